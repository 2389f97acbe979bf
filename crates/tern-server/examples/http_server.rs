//! A Streamable HTTP server inside an axum application: the MCP endpoint
//! mounted at `/mcp` next to the application's own routes.
//!
//! ```sh
//! cargo run -p tern-server --example http_server -- 127.0.0.1:8080
//! tern tools --url http://127.0.0.1:8080/mcp
//! ```
//!
//! It prints `listening on http://ADDR/mcp` once bound (port 0 picks a free
//! one) and stops on Ctrl-C. `tern_server::transport::http::serve` is the
//! alternative when the endpoint is all you serve: tern's own accept loop,
//! with header, body and write timeouts and connection caps.

#![allow(
    clippy::print_stdout,
    reason = "an example prints what it serves or gets"
)]

use axum::Router;
use axum::routing::get;
use serde::Deserialize;
use tern_server::transport::http::Http;
use tern_server::{Args, Server, ToolDef};

#[derive(Deserialize, schemars::JsonSchema)]
struct Add {
    /// The first addend.
    a: i64,
    /// The second addend.
    b: i64,
}

async fn add(Args(add): Args<Add>) -> String {
    (add.a + add.b).to_string()
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8080".into());
    let server = Server::builder("calculator", "1.0.0")
        .tool(ToolDef::new("add", "Adds two integers", add))
        .build()?;
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route_service("/mcp", Http::new(server).into_service());
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    Ok(())
}
