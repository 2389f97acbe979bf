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

/// The rows of the figure, in order.
pub(crate) const ROWS: [&str; 3] = [
    "plain tools/call",
    "task create + first tasks/get, memory store",
    "task create + first tasks/get, SQLite (synchronous = FULL)",
];

/// Runs `n` (at most 100 000) of each of [`ROWS`] and answers, per row, the
/// p50 and p99 in µs.
#[allow(clippy::cast_precision_loss, reason = "nanoseconds far below 2^52")]
pub(crate) fn figures(n: u32) -> Result<[(f64, f64); 3], String> {
    let n = n.clamp(1, 100_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let [plain, memory, sqlite] = rt.block_on(async {
        let caps = ClientCapabilities::default().with_extension(TASKS_EXTENSION);
        let memory = server(Arc::new(tern_server::MemoryTaskStore::new()))?;
        let c = TestClient::new(memory).with_capabilities(caps.clone());
        let plain = measure(&c, false, n).await?;
        let in_memory = measure(&c, true, n).await?;
        let path = std::env::temp_dir().join(format!("tern-bench-tasks-{}.db", std::process::id()));
        let store = tern_sqlite::SqliteTaskStore::open(&path).map_err(|e| e.to_string())?;
        let c = TestClient::new(server(Arc::new(store))?).with_capabilities(caps);
        let sqlite = measure(&c, true, n).await;
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
        Ok::<_, String>([plain, in_memory, sqlite?])
    })?;
    let us = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Ok([plain, memory, sqlite].map(|h| (us(&h, 0.5), us(&h, 0.99))))
}

/// `bench tasks`: [`figures`], printed.
pub(crate) fn run(n: u32) -> Result<(), String> {
    let figures = figures(n)?;
    #[allow(clippy::print_stdout, reason = "the report is this command's output")]
    for (name, (p50, p99)) in ROWS.iter().zip(figures) {
        println!("{name:<58} p50 {p50:>7.1} µs   p99 {p99:>7.1} µs");
    }
    Ok(())
}
