//! `bench journal`: what journaling costs a durable task's `ctx.once` step
//! (docs/durable-tasks.md), in process, per store: the same step in a task
//! of a tool that is not durable (a memo in memory only) against one of a
//! durable tool (two fenced compare-and-swap writes: "started", then the
//! result sealed into the journal). Memory, SQLite (`synchronous = FULL`, a
//! file in the temporary directory, so with its fsyncs) and, given
//! `--redis URL`, Redis.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde_json::json;
use tern_protocol::ClientCapabilities;
use tern_protocol::task::TASKS_EXTENSION;
use tern_server::testing::TestClient;
use tern_server::{Ctx, Server, TaskStore, ToolDef};

/// Steps per task.
const STEPS: u32 = 20;

type Shared = Arc<Mutex<Histogram<u64>>>;

async fn steps(ctx: Ctx, times: Shared) -> &'static str {
    ctx.into_task().await;
    for i in 0..STEPS {
        let start = Instant::now();
        let _: u32 = ctx.once(&format!("step-{i}"), async move { i }).await;
        let ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let _ = times
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .record(ns.max(1));
    }
    "done"
}

fn server(store: Arc<dyn TaskStore>, plain: Shared, durable: Shared) -> Result<Server, String> {
    Server::builder("bench-journal", "1")
        .task_store(store)
        .task_config(tern_server::TaskConfig::default().quota(usize::MAX, u64::MAX))
        .tool(
            ToolDef::new("plain", "", move |ctx: Ctx| steps(ctx, Arc::clone(&plain)))
                .task_from_start(),
        )
        .tool(
            ToolDef::new("durable", "", move |ctx: Ctx| {
                steps(ctx, Arc::clone(&durable))
            })
            .task_from_start()
            .durable("bench"),
        )
        .build()
        .map_err(|e| e.to_string())
}

/// Runs `tasks` tasks of `tool` to their end, one at a time.
async fn run_tasks(client: &TestClient, tool: &str, tasks: u32) -> Result<(), String> {
    for _ in 0..tasks {
        let r = client
            .call_tool(tool, json!({}))
            .await
            .result()
            .map_err(|e| e.message)?;
        let id = r["taskId"]
            .as_str()
            .ok_or("no task was created")?
            .to_owned();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let t = client
                .send("tasks/get", json!({"taskId": id}))
                .await
                .result()
                .map_err(|e| e.message)?;
            match t["status"].as_str() {
                Some("completed") => break,
                Some("working") if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                _ => return Err(format!("the task did not complete: {t}")),
            }
        }
    }
    Ok(())
}

/// p50 and p99 of one step, µs: (not durable, durable) for `store`.
#[allow(clippy::cast_precision_loss, reason = "nanoseconds far below 2^52")]
async fn per_store(store: Arc<dyn TaskStore>, tasks: u32) -> Result<[(f64, f64); 2], String> {
    let new = || Histogram::<u64>::new(3).map(|h| Arc::new(Mutex::new(h)));
    let (plain, durable) = (
        new().map_err(|e| e.to_string())?,
        new().map_err(|e| e.to_string())?,
    );
    let s = server(store, Arc::clone(&plain), Arc::clone(&durable))?;
    let client = TestClient::new(s)
        .with_capabilities(ClientCapabilities::default().with_extension(TASKS_EXTENSION));
    run_tasks(&client, "plain", tasks).await?;
    run_tasks(&client, "durable", tasks).await?;
    let us = |h: &Shared, q: f64| {
        let h = h.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        h.value_at_quantile(q) as f64 / 1000.0
    };
    Ok([
        (us(&plain, 0.5), us(&plain, 0.99)),
        (us(&durable, 0.5), us(&durable, 0.99)),
    ])
}

/// `bench journal`: `tasks` tasks of [`STEPS`] steps each, per store,
/// printed.
pub(crate) fn run(tasks: u32, redis: Option<&str>) -> Result<(), String> {
    let tasks = tasks.clamp(1, 10_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut rows = Vec::new();
        rows.push((
            "memory",
            per_store(Arc::new(tern_server::MemoryTaskStore::new()), tasks).await?,
        ));
        let path =
            std::env::temp_dir().join(format!("tern-bench-journal-{}.db", std::process::id()));
        let store = tern_sqlite::SqliteTaskStore::open(&path).map_err(|e| e.to_string())?;
        let sqlite = per_store(Arc::new(store), tasks).await;
        for suffix in ["", "-wal", "-shm"] {
            let mut p = path.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
        rows.push(("SQLite (synchronous = FULL)", sqlite?));
        if let Some(url) = redis {
            let options = tern_redis::RedisOptions::new().prefix(format!(
                "tern-bench-journal-{}",
                std::process::id()
            ));
            let store = tern_redis::RedisTaskStore::connect(url, options)
                .await
                .map_err(|e| e.to_string())?;
            rows.push(("Redis", per_store(Arc::new(store), tasks).await?));
        }
        #[allow(clippy::print_stdout, reason = "the report is this command's output")]
        for (store, [(p50, p99), (d50, d99)]) in rows {
            println!(
                "ctx.once step, {store:<28} not durable p50 {p50:>8.1} µs p99 {p99:>8.1} µs | durable p50 {d50:>8.1} µs p99 {d99:>8.1} µs | journaling +{:.1} µs (p50)",
                d50 - p50
            );
        }
        Ok(())
    })
}
