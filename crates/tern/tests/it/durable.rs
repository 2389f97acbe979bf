//! Durable tasks on one host: `tern serve demo --http … --tasks sqlite:PATH
//! --lease 2 --keys FILE` killed with SIGKILL while `import_dataset` runs,
//! then started again on the same file, finishes the task; every batch is in
//! `demo://imports/{taskId}` once. A server killed inside the step that is
//! not retry-safe leaves the task `failed` naming it; a task whose server
//! dies every time ends after `--recoveries`. Each kill happens at a
//! synchronisation point the demo reports (`statusMessage` "paused …"),
//! never after a sleep; every wait is a bounded poll.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fleet::{Replica, Reply, Scratch, call, generate_keys};

/// The lease the processes hold: a killed one's task is taken again past it.
const LEASE_SECS: u64 = 2;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// One host: an SQLite task file and a key file, and the process on them.
struct Host {
    server: Replica,
    _dir: Scratch,
}

impl Host {
    async fn start(what: &str, extra: &[&str]) -> Self {
        let dir = Scratch::new(what);
        let keys = dir.0.join("keys");
        generate_keys(&keys).await;
        let mut args = vec![
            "--tasks".to_owned(),
            format!("sqlite:{}", dir.0.join("tasks.db").display()),
            "--keys".to_owned(),
            keys.display().to_string(),
            "--lease".to_owned(),
            LEASE_SECS.to_string(),
        ];
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let server = Replica::start_single(&args, &dir.0).await;
        Self { server, _dir: dir }
    }

    fn url(&self) -> String {
        self.server.url("")
    }

    async fn call(&self, method: &str, params: Value) -> Reply {
        call(&self.url(), "durable", method, params, REQUEST_TIMEOUT).await
    }

    async fn create(&self, arguments: Value) -> String {
        let r = self
            .call(
                "tools/call",
                json!({"name": "import_dataset", "arguments": arguments}),
            )
            .await;
        let r = r.result();
        assert_eq!(r["resultType"], "task", "{r}");
        r["taskId"].as_str().unwrap().to_owned()
    }

    /// Polls `tasks/get` until `done` holds: at most `within`, 50 ms apart.
    async fn until(&self, id: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
        let deadline = tokio::time::Instant::now() + within;
        let mut last = Value::Null;
        while tokio::time::Instant::now() < deadline {
            if let Reply::Result(t) = self.call("tasks/get", json!({"taskId": id})).await {
                if done(&t) {
                    return t;
                }
                last = t;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!(
            "task {id}: not there within {within:?}; last {last}\n{}",
            self.server.log_text()
        );
    }

    async fn answer_skip(&self, id: &str, task: &Value) {
        let key = task["inputRequests"]
            .as_object()
            .and_then(|q| q.keys().next())
            .expect("a question")
            .clone();
        let r = self
            .call(
                "tasks/update",
                json!({"taskId": id, "inputResponses": {key: {"action": "accept", "content": {"on_error": "skip"}}}}),
            )
            .await;
        assert!(matches!(r, Reply::Result(_)), "{r:?}");
    }

    async fn imports(&self, id: &str) -> Vec<String> {
        let r = self
            .call(
                "resources/read",
                json!({"uri": format!("demo://imports/{id}")}),
            )
            .await;
        r.result()["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

fn status_is(t: &Value, status: &str) -> bool {
    t["status"] == status
}

fn terminal(t: &Value) -> bool {
    matches!(
        t["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

/// Time for the work itself (60 rows of 50 ms) on top of the lease + 10 s.
const WORK: Duration = Duration::from_secs(5);

fn recovered_within() -> Duration {
    Duration::from_secs(LEASE_SECS + 10) + WORK
}

#[tokio::test]
async fn sqlite_a_server_killed_mid_import_and_started_again_finishes_it_each_batch_once() {
    let mut host = Host::start("durable-sqlite", &[]).await;
    // 60 rows: batches 0–2, the question, batches 3–5, the commit.
    let id = host
        .create(json!({"rows": 60, "pause_after_batch": 1}))
        .await;
    let paused = host
        .until(&id, Duration::from_secs(20), |t| {
            t["statusMessage"] == "paused after batch 1"
        })
        .await;
    assert_eq!(paused["_meta"]["dev.tern/attempt"], 0, "{paused}");
    host.server.kill().await;
    host.server.restart().await;
    // The restarted process takes the task once its lease lapsed, runs on
    // from batch 2 and asks the question (not asked before the kill).
    let asking = host
        .until(&id, recovered_within(), |t| status_is(t, "input_required"))
        .await;
    assert_eq!(asking["_meta"]["dev.tern/attempt"], 1, "{asking}");
    host.answer_skip(&id, &asking).await;
    let done = host.until(&id, recovered_within(), terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Imported 58 rows (skipped 2)."
    );
    assert_eq!(
        host.imports(&id).await,
        [
            "batch 0 rows 0-9",
            "batch 1 rows 10-19",
            "batch 2 rows 20-29",
            "batch 3 rows 30-39",
            "batch 4 rows 40-49",
            "batch 5 rows 50-59",
            "commit 58 rows",
        ],
        "a batch imported twice or lost"
    );
}

#[tokio::test]
async fn sqlite_a_server_stopped_with_sigterm_hands_the_task_to_its_next_start() {
    let mut host = Host::start("durable-sigterm", &[]).await;
    let id = host
        .create(json!({"rows": 60, "pause_after_batch": 1}))
        .await;
    host.until(&id, Duration::from_secs(20), |t| {
        t["statusMessage"] == "paused after batch 1"
    })
    .await;
    // SIGTERM: the process stops its tasks cleanly and exits by itself.
    host.server.signal("TERM").await;
    let status = host.server.exited(Duration::from_secs(20)).await;
    assert!(status.success(), "{status}\n{}", host.server.log_text());
    host.server.restart().await;
    // Handed off, not failed: the next start takes the task and runs on.
    let asking = host
        .until(&id, recovered_within(), |t| {
            status_is(t, "input_required") || terminal(t)
        })
        .await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    host.answer_skip(&id, &asking).await;
    let done = host.until(&id, recovered_within(), terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    let imports = host.imports(&id).await;
    assert_eq!(
        imports.len(),
        7,
        "each batch and the commit once: {imports:?}"
    );
    assert_eq!(imports[6], "commit 58 rows");
}

#[tokio::test]
async fn sqlite_a_server_killed_inside_the_commit_leaves_the_task_failed_naming_the_step() {
    let mut host = Host::start("durable-commit", &[]).await;
    let id = host
        .create(json!({"rows": 4, "pause_in_commit": true}))
        .await;
    let asking = host
        .until(&id, Duration::from_secs(20), |t| {
            status_is(t, "input_required")
        })
        .await;
    host.answer_skip(&id, &asking).await;
    host.until(&id, Duration::from_secs(20), |t| {
        t["statusMessage"] == "paused in commit"
    })
    .await;
    host.server.kill().await;
    host.server.restart().await;
    let failed = host.until(&id, recovered_within(), terminal).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        failed["error"]["code"],
        tern_server::error::codes::OUTCOME_UNKNOWN
    );
    let message = failed["error"]["message"].as_str().unwrap();
    assert!(message.contains("`commit`"), "{message}");
    // Its effect happened once, and was not repeated.
    assert_eq!(
        host.imports(&id).await,
        ["batch 0 rows 0-1", "batch 1 rows 2-3", "commit 2 rows"]
    );
}

#[tokio::test]
async fn sqlite_a_task_whose_server_dies_every_time_ends_after_its_recoveries() {
    let mut host = Host::start("durable-bounded", &["--recoveries", "2"]).await;
    let id = host
        .create(json!({"rows": 20, "pause_after_batch": 0, "pause_every_run": true}))
        .await;
    let mut kills = 0;
    for attempt in 0..=2 {
        let paused = host
            .until(&id, recovered_within(), |t| {
                t["statusMessage"] == "paused after batch 0"
                    && t["_meta"]["dev.tern/attempt"] == attempt
            })
            .await;
        assert_eq!(paused["status"], "working", "{paused}");
        host.server.kill().await;
        kills += 1;
        host.server.restart().await;
    }
    let failed = host.until(&id, recovered_within(), terminal).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(
        failed["error"]["code"],
        tern_server::error::codes::RECOVERY_LIMIT
    );
    assert_eq!(failed["error"]["data"]["recoveries"], 2);
    assert_eq!(kills, 3);
    assert_eq!(host.imports(&id).await, ["batch 0 rows 0-9"]);
}
