//! A tool that asks the user a question before it acts (MRTR): the first
//! leg answers `input_required` with the question and a sealed
//! `requestState`; the client retries with the answer, and the handler runs
//! again from the top with the answer in hand. The side effect sits in
//! `ctx.once`, so it happens once however many legs the call takes.
//!
//! ```sh
//! cargo run -p tern-server --example asking_tool   # stdio
//! tern call provision_database name=orders -- target/debug/examples/asking_tool
//! ```

use serde::Deserialize;
use tern_server::transport::stdio::{StdioOptions, serve_stdio};
use tern_server::{Answer, Args, BuildError, Ctx, Elicit, Server, ToolDef, ToolError};

#[derive(Deserialize, schemars::JsonSchema)]
struct Provision {
    /// Name of the database.
    name: String,
}

/// What the question asks for: one field, a choice of three.
#[derive(Deserialize, schemars::JsonSchema)]
struct Region {
    /// Where the data lives.
    region: RegionChoice,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
enum RegionChoice {
    #[serde(rename = "eu-west-1")]
    EuWest1,
    #[serde(rename = "us-east-1")]
    UsEast1,
    #[serde(rename = "ap-south-1")]
    ApSouth1,
}

async fn provision_database(ctx: Ctx, Args(a): Args<Provision>) -> Result<String, ToolError> {
    let question = Elicit::<Region>::form(format!("Which region should {} live in?", a.name));
    let Answer::Accept(Region { region }) = ctx.ask(question).await? else {
        return Ok("Provisioning cancelled.".into());
    };
    // The effect: memoised under its name in the sealed state, so a later
    // leg (another question, a retry) reads its result instead of running it.
    let id = ctx
        .once("create", async {
            format!("db-{}-{region:?}", a.name).to_lowercase()
        })
        .await;
    Ok(format!("Created {} in {region:?} (id {id})", a.name))
}

/// The server: one tool, which asks.
pub fn server() -> Result<Server, BuildError> {
    Server::builder("inventory", "1.0.0")
        .tool(
            ToolDef::new(
                "provision_database",
                "Creates a database",
                provision_database,
            )
            .elicits::<Region>(),
        )
        .build()
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    serve_stdio(server()?, StdioOptions::default()).await?;
    Ok(())
}
