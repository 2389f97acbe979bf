//! The smallest server: one tool, served on standard input and output (one
//! JSON-RPC message per line; logs on standard error).
//!
//! ```sh
//! cargo run -p tern-server --example stdio_server
//! tern tools -- target/debug/examples/stdio_server
//! tern call greet name=Ada -- target/debug/examples/stdio_server
//! ```

use serde::Deserialize;
use tern_server::transport::stdio::{StdioOptions, serve_stdio};
use tern_server::{Args, Server, ToolDef};

#[derive(Deserialize, schemars::JsonSchema)]
struct Greet {
    /// Whom to greet.
    name: String,
}

/// A tool is a plain `async fn`: its arguments decoded (and checked against
/// the schema derived from `Greet`), its output any `ToolOutput`.
async fn greet(Args(greet): Args<Greet>) -> String {
    format!("Hello, {}!", greet.name)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::builder("greeter", "1.0.0")
        .tool(ToolDef::new("greet", "Greets someone by name", greet))
        .build()?;
    serve_stdio(server, StdioOptions::default()).await?;
    Ok(())
}
