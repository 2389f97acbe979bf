//! Work that outlives a request (the Tasks extension): when the client
//! declares the extension, `ctx.into_task()` answers the call with a task
//! at once and the handler goes on in a server-owned task; its progress is
//! the task's `statusMessage`, its questions the task's `inputRequests`
//! (answered with `tasks/update`), its result what `tasks/get` returns at
//! the end. Without the extension the same handler runs inline.
//!
//! ```sh
//! cargo run -p tern-server --example task_tool   # stdio
//! tern call export_report pages=3 -- target/debug/examples/task_tool
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tern_server::transport::stdio::{StdioOptions, serve_stdio};
use tern_server::{
    Answer, Args, Ctx, Elicit, MemoryTaskStore, Server, TaskSupport, ToolDef, ToolError,
};

#[derive(Deserialize, schemars::JsonSchema)]
struct Export {
    /// How many pages the report has (1 to 20).
    pages: u32,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Confirm {
    /// Send the report to the team.
    send: bool,
}

async fn export_report(ctx: Ctx, Args(e): Args<Export>) -> Result<String, ToolError> {
    if !(1..=20).contains(&e.pages) {
        return Err(ToolError::new("pages must be between 1 and 20"));
    }
    ctx.into_task().await;
    for page in 1..=e.pages {
        if ctx.is_cancelled() {
            return Err(ToolError::new(format!(
                "cancelled after {} pages",
                page - 1
            )));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        let status = format!("rendered page {page} of {}", e.pages);
        ctx.progress(f64::from(page), Some(f64::from(e.pages)), Some(&status));
    }
    let question =
        Elicit::<Confirm>::form(format!("The {}-page report is ready. Send it?", e.pages));
    match ctx.ask(question).await? {
        Answer::Accept(Confirm { send: true }) => Ok(format!("Sent the {}-page report.", e.pages)),
        _ => Ok(format!("Kept the {}-page report.", e.pages)),
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = Server::builder("reports", "1.0.0")
        .tool(
            ToolDef::new("export_report", "Renders and sends a report", export_report)
                .elicits::<Confirm>()
                .task(TaskSupport::Optional),
        )
        // Tasks live in memory here (one process); tern-sqlite and
        // tern-redis keep them across restarts and replicas.
        .task_store(Arc::new(MemoryTaskStore::new()))
        .build()?;
    serve_stdio(server, StdioOptions::default()).await?;
    Ok(())
}
