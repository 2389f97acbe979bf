//! Durable tasks (docs/design.md, "Durable tasks"): a task whose runner
//! dies is taken again by another server sharing its store and finishes
//! from its journal, each `ctx.once` effect once.
//!
//! A "process" here is a server on a tokio runtime of its own, sharing the
//! test's task store and (injected) clock: killing it is shutting its
//! runtime down, so its runner stops between two instructions and writes
//! nothing more, as a SIGKILL would leave it. The lease then lapses when the
//! test moves the shared clock (no test waits for time to pass); the
//! process-level version (SIGKILL, Redis, SQLite) is in the tern crate's
//! cluster and demo tests.

#![allow(
    clippy::too_many_lines,
    clippy::many_single_char_names,
    reason = "each scenario is one story, its servers a, b, c as the docs name them"
)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tern_protocol::ClientCapabilities;
use tern_protocol::task::TASKS_EXTENSION;
use tern_server::error::codes;
use tern_server::task::{MemoryTaskStore, TaskStore};
use tern_server::testing::{ManualClock, TestClient};
use tern_server::{Answer, Args, Ctx, Elicit, KeyRing, Server, TaskConfig, ToolDef, ToolError};
use tokio::sync::Notify;

/// What the handlers did, shared by every "process" of a test.
#[derive(Default)]
struct World {
    /// Each batch imported, in order (a second import of one shows twice).
    imported: Mutex<Vec<u32>>,
    /// Charges made by the step that is not retry-safe.
    charged: Mutex<u32>,
    /// How often `import` reached each batch's step (run or not).
    attempted: Mutex<HashMap<u32, u32>>,
    /// Runs of each tool's handler (attempts).
    runs: Mutex<HashMap<&'static str, u32>>,
    /// Told each time a handler parks.
    parked: Notify,
    /// Opens every park of later runs.
    release: Notify,
}

impl World {
    fn run(&self, tool: &'static str) -> u32 {
        let mut runs = self.runs.lock().unwrap();
        let n = runs.entry(tool).or_insert(0);
        *n += 1;
        *n
    }

    fn attempts(&self, batch: u32) -> u32 {
        self.attempted
            .lock()
            .unwrap()
            .get(&batch)
            .copied()
            .unwrap_or(0)
    }

    fn runs(&self, tool: &'static str) -> u32 {
        self.runs.lock().unwrap().get(tool).copied().unwrap_or(0)
    }

    /// Parks the handler here for good (until its runtime dies or the
    /// test releases it), telling the test it got here.
    async fn park(&self) {
        let released = self.release.notified();
        self.parked.notify_one();
        released.await;
    }
}

#[derive(Deserialize, JsonSchema)]
struct Import {
    batches: u32,
    /// The first run parks after this batch is recorded.
    park_after: Option<u32>,
    /// Every run parks after this batch (a handler that kills its runner
    /// every time).
    park_always: Option<u32>,
    /// A marker that must never be stored in the clear.
    #[serde(default)]
    secret: String,
}

#[derive(Deserialize, JsonSchema)]
struct Go {
    go: bool,
}

fn builder(
    world: &Arc<World>,
    store: &Arc<MemoryTaskStore>,
    clock: &Arc<ManualClock>,
    keys: &str,
    config: TaskConfig,
) -> tern_server::ServerBuilder {
    let w = Arc::clone(world);
    let import = move |ctx: Ctx, Args(a): Args<Import>| {
        let w = Arc::clone(&w);
        async move {
            let run = w.run("import");
            ctx.into_task().await;
            for b in 0..a.batches {
                *w.attempted.lock().unwrap().entry(b).or_insert(0) += 1;
                let wb = Arc::clone(&w);
                ctx.once_retry_safe(&format!("batch-{b}"), async move {
                    wb.imported.lock().unwrap().push(b);
                })
                .await;
                ctx.progress(
                    f64::from(b + 1),
                    None,
                    Some(&format!("batch {} of {}", b + 1, a.batches)),
                );
                if (run == 1 && a.park_after == Some(b)) || a.park_always == Some(b) {
                    w.park().await;
                }
            }
            Ok::<_, ToolError>(format!("imported {}; {}", a.batches, a.secret.len()))
        }
    };
    let w = Arc::clone(world);
    let charge = move |ctx: Ctx| {
        let w = Arc::clone(&w);
        async move {
            let run = w.run("charge");
            ctx.into_task().await;
            let wc = Arc::clone(&w);
            ctx.once("charge_card", async move {
                *wc.charged.lock().unwrap() += 1;
                if run == 1 {
                    // Dies inside the step: its outcome is unknown.
                    wc.park().await;
                }
            })
            .await;
            Ok::<_, ToolError>("charged")
        }
    };
    let w = Arc::clone(world);
    let asks = move |ctx: Ctx| {
        let w = Arc::clone(&w);
        async move {
            let run = w.run("asks");
            // Asked before the task: the answer is part of the seed.
            let first = ctx.ask(Elicit::<Go>::form("Before?").key("before")).await?;
            ctx.into_task().await;
            let wb = Arc::clone(&w);
            ctx.once("prepare", async move {
                wb.imported.lock().unwrap().push(100);
            })
            .await;
            let second = ctx.ask(Elicit::<Go>::form("Go on?").key("go")).await?;
            if run == 1 {
                w.park().await;
            }
            let yes = |a: Answer<Go>| matches!(a, Answer::Accept(Go { go: true }));
            Ok::<_, ToolError>(format!("before {} go {}", yes(first), yes(second)))
        }
    };
    let big = |ctx: Ctx| async move {
        ctx.into_task().await;
        let small: String = ctx.once("small", async { "x".repeat(100) }).await;
        let large: String = ctx.once("large", async { "y".repeat(8_000) }).await;
        Ok::<_, ToolError>(format!("{} {}", small.len(), large.len()))
    };
    Server::builder("durable-test", "1")
        .keys(KeyRing::parse(keys).unwrap())
        .tool(ToolDef::new("big", "", big).durable("v1"))
        .clock(Arc::clone(clock) as Arc<dyn tern_server::engine::Clock>)
        .task_store(Arc::clone(store) as Arc<dyn TaskStore>)
        .task_config(config)
        .tool(ToolDef::new("import", "", import).durable("v1"))
        .tool(ToolDef::new("charge", "", charge).durable("v1"))
        .tool(ToolDef::new("asks", "", asks).durable("v1").elicits::<Go>())
}

fn config() -> TaskConfig {
    TaskConfig::default()
        .lease(Duration::from_secs(3600))
        .ttl(Duration::from_secs(36_000))
        .recheck(Duration::from_millis(20))
}

const LEASE: Duration = Duration::from_secs(3601);

fn caps() -> ClientCapabilities {
    ClientCapabilities::default()
        .with_elicitation_form()
        .with_extension(TASKS_EXTENSION)
}

/// A server on a runtime of its own: a process the test can kill.
struct Process {
    runtime: Option<tokio::runtime::Runtime>,
    client: Arc<TestClient>,
    server: Server,
}

impl Process {
    async fn start(build: impl FnOnce() -> Server + Send + 'static) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        // Built on its runtime, so its recovery runs there.
        let server = runtime.spawn(async move { build() }).await.unwrap();
        let client = Arc::new(TestClient::new(server.clone()).with_capabilities(caps()));
        Self {
            runtime: Some(runtime),
            client,
            server,
        }
    }

    /// Sends on the process's runtime (a task it creates runs there).
    async fn send(
        &self,
        method: &'static str,
        params: Value,
    ) -> Result<Value, tern_protocol::ErrorObject> {
        let client = Arc::clone(&self.client);
        self.runtime
            .as_ref()
            .expect("alive")
            .spawn(async move { client.send(method, params).await.result() })
            .await
            .unwrap()
    }

    /// SIGKILL: every task of the runtime stops where it is.
    fn kill(&mut self) {
        self.runtime.take().expect("alive").shutdown_background();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn create(p: &Process, tool: &str, arguments: Value) -> String {
    let r = p
        .send("tools/call", json!({"name": tool, "arguments": arguments}))
        .await
        .unwrap();
    assert_eq!(r["resultType"], "task", "{r}");
    r["taskId"].as_str().unwrap().to_owned()
}

/// Polls `tasks/get` through `p` until `done` holds (at most 1000 polls,
/// 10 ms apart).
async fn until(p: &Process, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..1000 {
        let t = p.send("tasks/get", json!({"taskId": id})).await.unwrap();
        if done(&t) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never reached the expected state");
}

fn terminal(t: &Value) -> bool {
    matches!(
        t["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

struct Fixture {
    world: Arc<World>,
    store: Arc<MemoryTaskStore>,
    clock: Arc<ManualClock>,
    keys: String,
}

impl Fixture {
    fn new() -> Self {
        Self {
            world: Arc::default(),
            store: Arc::new(MemoryTaskStore::new()),
            clock: ManualClock::new(),
            keys: KeyRing::generate().to_text().to_string(),
        }
    }

    async fn process(&self, config: TaskConfig) -> Process {
        let (w, s, c, k) = (
            Arc::clone(&self.world),
            Arc::clone(&self.store),
            Arc::clone(&self.clock),
            self.keys.clone(),
        );
        Process::start(move || builder(&w, &s, &c, &k, config).build().unwrap()).await
    }
}

#[tokio::test]
async fn a_killed_runners_task_completes_on_another_server_each_batch_once() {
    let f = Fixture::new();
    let mut a = f.process(config()).await;
    let b = f.process(config()).await;
    let parked = f.world.parked.notified();
    let id = create(
        &a,
        "import",
        json!({"batches": 6, "park_after": 2, "secret": "plaintext-marker"}),
    )
    .await;
    parked.await;
    // The journal is in the record, sealed: no argument in the clear.
    let text = serde_json::to_string(&f.store.load(&id, 0).await.unwrap()).unwrap();
    assert!(
        text.contains("\"journal\""),
        "no journal in the record: {text}"
    );
    assert!(
        !text.contains("plaintext-marker"),
        "an argument stored in the clear"
    );
    a.kill();
    // Before the lease lapses nothing takes it: still working, progress kept.
    let t = b.send("tasks/get", json!({"taskId": id})).await.unwrap();
    assert_eq!(t["status"], "working", "{t}");
    f.clock.tick(LEASE);
    let t = until(&b, &id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["content"][0]["text"], "imported 6; 16");
    assert_eq!(t["_meta"]["dev.tern/attempt"], 1, "{t}");
    assert_eq!(
        *f.world.imported.lock().unwrap(),
        [0, 1, 2, 3, 4, 5],
        "a batch ran twice or never"
    );
    assert_eq!(f.world.runs("import"), 2);
}

#[tokio::test]
async fn the_status_message_is_restored_and_recovery_adds_no_status() {
    let f = Fixture::new();
    let mut a = f.process(config()).await;
    // B recovers nothing until told to (its recheck is an hour).
    let b = f.process(config().recheck(Duration::from_secs(3600))).await;
    let parked = f.world.parked.notified();
    let id = create(&a, "import", json!({"batches": 4, "park_after": 1})).await;
    parked.await;
    until(&b, &id, |t| t["statusMessage"] == "batch 2 of 4").await;
    a.kill();
    f.clock.tick(LEASE);
    // Lapsed, not taken yet: still working, with its last progress.
    let t = b.send("tasks/get", json!({"taskId": id})).await.unwrap();
    assert_eq!(t["status"], "working", "{t}");
    assert_eq!(t["statusMessage"], "batch 2 of 4");
    assert_eq!(t["_meta"]["dev.tern/attempt"], 0);
    // A third server takes it.
    let c = f.process(config()).await;
    let t = until(&c, &id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(*f.world.imported.lock().unwrap(), [0, 1, 2, 3]);
}

#[tokio::test]
async fn a_partitioned_runners_late_writes_are_fenced() {
    let f = Fixture::new();
    // One process, two servers: A is cut off (its lease lapses on the
    // shared clock) but keeps running.
    let a = f.process(config().recheck(Duration::from_secs(3600))).await;
    let parked = f.world.parked.notified();
    let id = create(&a, "import", json!({"batches": 5, "park_after": 1})).await;
    parked.await;
    f.clock.tick(LEASE);
    let b = f.process(config()).await;
    let t = until(&b, &id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    // A wakes up and tries its next step: fenced, it never runs.
    f.world.release.notify_waiters();
    for _ in 0..1000 {
        if f.world.attempts(2) >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(f.world.attempts(2), 2, "A never reached its next step");
    // Once A's runner has ended (stop_tasks waits for it, and for a step it
    // may have started), nothing more can happen.
    let server = a.server.clone();
    a.runtime
        .as_ref()
        .unwrap()
        .spawn(async move { server.stop_tasks().await })
        .await
        .unwrap();
    let again = b.send("tasks/get", json!({"taskId": id})).await.unwrap();
    assert_eq!(again, t, "the fenced runner changed the record");
    assert_eq!(
        *f.world.imported.lock().unwrap(),
        [0, 1, 2, 3, 4],
        "the old runner imported a batch"
    );
}

#[tokio::test]
async fn a_runner_that_died_inside_a_step_not_declared_retry_safe_ends_failed_naming_it() {
    let f = Fixture::new();
    let mut a = f.process(config()).await;
    let b = f.process(config()).await;
    let parked = f.world.parked.notified();
    let id = create(&a, "charge", json!({})).await;
    parked.await;
    a.kill();
    f.clock.tick(LEASE);
    let t = until(&b, &id, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["code"], codes::OUTCOME_UNKNOWN);
    let message = t["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("charge_card") && message.contains("retry-safe"),
        "{message}"
    );
    assert_eq!(
        *f.world.charged.lock().unwrap(),
        1,
        "the card was charged twice"
    );
    assert_eq!(f.world.runs("charge"), 1, "the handler ran again");
}

#[tokio::test]
async fn a_task_that_kills_its_runner_every_time_ends_after_its_recoveries() {
    let f = Fixture::new();
    let s = f.process(config().recoveries(2)).await;
    let id = create(&s, "import", json!({"batches": 3, "park_always": 1})).await;
    for run in 1..=3 {
        // Each run parks (as if it killed its runner); the lease lapses and
        // the server takes the task again, fencing the parked run.
        f.world.parked.notified().await;
        assert_eq!(f.world.runs("import"), run);
        f.clock.tick(LEASE);
    }
    let t = until(&s, &id, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["code"], codes::RECOVERY_LIMIT);
    assert_eq!(t["error"]["data"]["recoveries"], 2);
    assert_eq!(
        f.world.runs("import"),
        3,
        "the first run and two recoveries"
    );
    // Batches 0 and 1 were recorded by the first run and never re-run.
    assert_eq!(*f.world.imported.lock().unwrap(), [0, 1]);
}

#[tokio::test]
async fn a_cancel_while_no_runner_holds_the_task_ends_it_cancelled_not_recovered() {
    let f = Fixture::new();
    let mut a = f.process(config()).await;
    let b = f.process(config().recheck(Duration::from_secs(3600))).await;
    let parked = f.world.parked.notified();
    let id = create(&a, "import", json!({"batches": 4, "park_after": 0})).await;
    parked.await;
    a.kill();
    f.clock.tick(LEASE);
    b.send("tasks/cancel", json!({"taskId": id})).await.unwrap();
    let t = b.send("tasks/get", json!({"taskId": id})).await.unwrap();
    assert_eq!(t["status"], "cancelled", "{t}");
    // A server that recovers finds nothing to run.
    let c = f.process(config()).await;
    for _ in 0..20 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let t = c.send("tasks/get", json!({"taskId": id})).await.unwrap();
    assert_eq!(t["status"], "cancelled");
    assert_eq!(f.world.runs("import"), 1);
}

#[tokio::test]
async fn answers_given_before_and_while_no_runner_are_kept_for_the_recovered_run() {
    let f = Fixture::new();
    let mut a = f.process(config()).await;
    let b = f.process(config().recheck(Duration::from_secs(3600))).await;
    // Round 1 asks "before" through MRTR; the retry answers it and the call
    // becomes a task.
    let r = a
        .send("tools/call", json!({"name": "asks", "arguments": {}}))
        .await
        .unwrap();
    assert_eq!(r["resultType"], "input_required", "{r}");
    let state = r["requestState"].clone();
    let r = a
        .send(
            "tools/call",
            json!({"name": "asks", "arguments": {}, "requestState": state,
                   "inputResponses": {"before": {"action": "accept", "content": {"go": true}}}}),
        )
        .await
        .unwrap();
    assert_eq!(r["resultType"], "task", "{r}");
    let id = r["taskId"].as_str().unwrap().to_owned();
    let t = until(&b, &id, |t| t["status"] == "input_required").await;
    let key = t["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    a.kill();
    f.clock.tick(LEASE);
    // Answered while no runner holds it: kept.
    b.send(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {key.clone(): {"action": "accept", "content": {"go": true}}}}),
    )
    .await
    .unwrap();
    let c = f.process(config()).await;
    let t = until(&c, &id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(t["result"]["content"][0]["text"], "before true go true");
    assert_eq!(
        *f.world.imported.lock().unwrap(),
        [100],
        "the step before the question ran again"
    );
    assert_eq!(f.world.runs("asks"), 3, "two MRTR legs, then the recovery");
}

#[tokio::test]
async fn stop_tasks_hands_a_durable_task_off_without_waiting_for_its_lease() {
    let f = Fixture::new();
    let a = f.process(config()).await;
    let b = f.process(config()).await;
    let parked = f.world.parked.notified();
    let id = create(&a, "import", json!({"batches": 4, "park_after": 1})).await;
    parked.await;
    // SIGTERM: A releases its lease; B takes the task at once (the clock
    // never moves, so no lease lapses).
    let server = a.server.clone();
    a.runtime
        .as_ref()
        .unwrap()
        .spawn(async move { server.stop_tasks().await })
        .await
        .unwrap();
    let t = until(&b, &id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
    assert_eq!(*f.world.imported.lock().unwrap(), [0, 1, 2, 3]);
    assert_eq!(t["_meta"]["dev.tern/attempt"], 1);
}

#[tokio::test]
async fn a_server_that_does_not_serve_the_version_leaves_the_task_and_it_fails_after_k_leases() {
    let f = Fixture::new();
    let mut a = f.process(config()).await;
    let parked = f.world.parked.notified();
    let id = create(&a, "import", json!({"batches": 3, "park_after": 0})).await;
    parked.await;
    a.kill();
    // A server with the same tool at another version.
    let (s, c, k) = (Arc::clone(&f.store), Arc::clone(&f.clock), f.keys.clone());
    let other = Process::start(move || {
        Server::builder("durable-test", "2")
            .keys(KeyRing::parse(&k).unwrap())
            .clock(c as Arc<dyn tern_server::engine::Clock>)
            .task_store(s as Arc<dyn TaskStore>)
            .task_config(config().unclaimed_leases(2))
            .tool(ToolDef::new("import", "", || async { "v2" }).durable("v2"))
            .build()
            .unwrap()
    })
    .await;
    for _ in 0..2 {
        f.clock.tick(LEASE);
        for _ in 0..30 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let t = until(&other, &id, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["code"], codes::OUTCOME_UNKNOWN);
    assert!(
        t["error"]["message"].as_str().unwrap().contains("v1"),
        "{t}"
    );
    assert_eq!(f.world.runs("import"), 1);
}

#[tokio::test]
async fn a_step_that_outgrows_the_journal_ends_the_task_failed_as_a_full_store() {
    let f = Fixture::new();
    let s = f.process(config().max_journal_bytes(6_000)).await;
    let id = create(&s, "big", json!({})).await;
    let t = until(&s, &id, terminal).await;
    assert_eq!(t["status"], "failed", "{t}");
    assert_eq!(t["error"]["code"], codes::STORE_FULL, "{t}");
    assert!(
        t["error"]["message"]
            .as_str()
            .unwrap()
            .contains("6000 bytes"),
        "{t}"
    );
}
