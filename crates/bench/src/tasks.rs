//! `bench tasks`: the overhead of a task, in process (no transport): a
//! plain `tools/call`, against a call that becomes a task plus its first
//! `tasks/get`, with the in-memory store and with `tern-sqlite` (a file in
//! the temporary directory, `synchronous = FULL`, so it includes the fsync).

use std::sync::Arc;
use std::time::Instant;

use hdrhistogram::Histogram;
use serde_json::json;
use tern_protocol::ClientCapabilities;
use tern_protocol::task::TASKS_EXTENSION;
use tern_server::testing::TestClient;
use tern_server::{Ctx, Server, TaskStore, TaskSupport, ToolDef};

async fn plain() -> &'static str {
    "done"
}

async fn as_task(ctx: Ctx) -> &'static str {
    ctx.into_task().await;
    "done"
}

fn server(store: Arc<dyn TaskStore>) -> Result<Server, String> {
    Server::builder("bench-tasks", "1")
        .task_store(store)
        // Every iteration's task is kept (and may still be running): no quota.
        .task_config(tern_server::TaskConfig::default().quota(usize::MAX, u64::MAX))
        .tool(ToolDef::new("plain", "", plain))
        .tool(ToolDef::new("task", "", as_task).task(TaskSupport::Optional))
        .build()
        .map_err(|e| e.to_string())
}

#[allow(
    clippy::print_stdout,
    clippy::cast_precision_loss,
    reason = "the report is the bench's output; nanoseconds far below 2^52"
)]
fn line(name: &str, h: &Histogram<u64>) {
    println!(
        "{name:<32} p50 {:>7.1} µs   p99 {:>7.1} µs   ({} samples)",
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.len()
    );
}

async fn measure(client: &TestClient, task: bool, n: u32) -> Result<Histogram<u64>, String> {
    let mut h = Histogram::<u64>::new(3).map_err(|e| e.to_string())?;
    for _ in 0..n {
        let start = Instant::now();
        let r = client
            .call_tool(if task { "task" } else { "plain" }, json!({}))
            .await
            .result()
            .map_err(|e| e.message)?;
        if task {
            let id = r["taskId"].as_str().ok_or("no task was created")?;
            client
                .send("tasks/get", json!({"taskId": id}))
                .await
                .result()
                .map_err(|e| e.message)?;
        }
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        h.record(ns.max(1)).map_err(|e| e.to_string())?;
    }
    Ok(h)
}

/// Runs `n` (at most 100 000) of each and prints p50 and p99.
pub(crate) fn run(n: u32) -> Result<(), String> {
    let n = n.clamp(1, 100_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let caps = ClientCapabilities::default().with_extension(TASKS_EXTENSION);
        let memory = server(Arc::new(tern_server::MemoryTaskStore::new()))?;
        let c = TestClient::new(memory).with_capabilities(caps.clone());
        line("plain tools/call", &measure(&c, false, n).await?);
        line(
            "task create + tasks/get, memory",
            &measure(&c, true, n).await?,
        );
        let path = std::env::temp_dir().join(format!("tern-bench-tasks-{}.db", std::process::id()));
        let store = tern_sqlite::SqliteTaskStore::open(&path).map_err(|e| e.to_string())?;
        let c = TestClient::new(server(Arc::new(store))?).with_capabilities(caps);
        let sqlite = measure(&c, true, n).await;
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
        line("task create + tasks/get, sqlite", &sqlite?);
        Ok(())
    })
}
