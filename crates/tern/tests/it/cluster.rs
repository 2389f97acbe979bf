//! The cluster test (issue 13): three replicas of `tern serve demo --redis`
//! behind a real nginx (round robin, no stickiness, buffering off) sharing a
//! real Redis (AOF on, `appendfsync always`, `noeviction`), all on loopback;
//! replicas killed with SIGKILL between and inside legs, a durable task's
//! runner killed (SIGKILL), another's paused (SIGSTOP, then SIGCONT) and a
//! third's cut off from Redis (a TCP proxy between them cut, then
//! restored), each task finished by another replica, Redis restarted under
//! load.
//! Effects are counted in the fleet's ledger (`demo://ledger`) and the
//! imports' batches in `demo://imports/{taskId}`. Every loop is bounded in count and in time; the
//! fleet is torn down on drop, also when an assertion fails. The figures
//! (calls, kills, restarts, effects, errors by kind) are written to stderr
//! past the test harness's capture, so `.ci/run`'s log carries them.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use crate::fleet::{
    Listen, Nginx, Partition, RedisServer, Replica, Reply, Scratch, call, generate_keys, get,
};

/// Guarded legs' and task runners' lease in the fleet: a killed replica's
/// claims read "outcome unknown" within it.
const LEASE_SECS: u64 = 3;
/// The longest any one request may take before the test calls it a hang.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// What the run did, for the closing note.
#[derive(Debug, Default)]
struct Figures {
    calls: u64,
    replica_kills: u64,
    replica_restarts: u64,
    redis_restarts: u64,
    transfers_confirmed: u64,
    ledger_lines: usize,
    flows_across_replicas: usize,
    flows: usize,
    outage_calls: u64,
    /// The slowest call of the outage, and one of its errors.
    outage_slowest: Duration,
    outage_error: String,
    /// Transfers in the ledger whose call failed (effect made, outcome not
    /// stored): each at most once.
    uncertain: usize,
    by_kind: BTreeMap<String, u64>,
    /// Durable tasks whose runner was killed or cut off, each recovered.
    durable_tasks: u64,
    recoveries: u64,
    /// Batches counted in `demo://imports/…`, each once.
    batches: u64,
    /// Runners paused (SIGSTOP, then SIGCONT) or cut off from Redis (a TCP
    /// proxy cut, then restored).
    partitions: u64,
}

struct Cluster {
    // Dropped in this order: nginx, the replicas, the partition, Redis, the
    // folder.
    nginx: Nginx,
    replicas: Vec<Replica>,
    /// Replica 2 reaches Redis through it.
    partition: Partition,
    redis: RedisServer,
    figures: Mutex<Figures>,
    _dir: Scratch,
}

impl Cluster {
    async fn start() -> Self {
        let dir = Scratch::new("cluster");
        let redis = RedisServer::start().await;
        let keys = dir.0.join("keys");
        generate_keys(&keys).await;
        let partition =
            Partition::start(redis.url().trim_start_matches("redis://").to_owned()).await;
        let mut replicas = Vec::new();
        for i in 0..3 {
            let url = if i == 2 { partition.url() } else { redis.url() };
            replicas.push(Replica::start(&url, &keys, LEASE_SECS, &dir.0).await);
        }
        let upstreams: Vec<String> = replicas.iter().map(Replica::addr).collect();
        let nginx = Nginx::start(&upstreams, &dir.0);
        Self {
            nginx,
            replicas,
            partition,
            redis,
            figures: Mutex::default(),
            _dir: dir,
        }
    }

    fn lb(&self) -> String {
        self.nginx.url("")
    }

    fn direct(&self, i: usize) -> String {
        self.replicas[i].url("")
    }

    fn figures(&self) -> std::sync::MutexGuard<'_, Figures> {
        self.figures.lock().unwrap()
    }

    /// One JSON-RPC call, counted by the kind of its answer.
    async fn call(&self, base: &str, test_id: &str, method: &str, params: Value) -> Reply {
        let reply = call(base, test_id, method, params, REQUEST_TIMEOUT).await;
        let mut f = self.figures();
        f.calls += 1;
        *f.by_kind.entry(reply.kind()).or_default() += 1;
        reply
    }

    /// `transfer_funds`'s first leg: its arguments and sealed state.
    async fn start_transfer(
        &self,
        base: &str,
        id: &str,
        to: &str,
        settle_ms: u64,
    ) -> (Value, String) {
        let args = json!({"to": to, "amount": 1250, "settle_ms": settle_ms});
        let r = self
            .call(
                base,
                id,
                "tools/call",
                json!({"name": "transfer_funds", "arguments": args}),
            )
            .await;
        let r = r.result();
        assert_eq!(r["resultType"], "input_required", "{r}");
        assert!(r["inputRequests"]["confirm"].is_object(), "{r}");
        (args, r["requestState"].as_str().unwrap().to_owned())
    }

    /// The final (guarded) leg; a state-only `input_required` (a duplicate
    /// that waited its limit while the first run was in flight) is followed
    /// with its new state, at most 10 times.
    async fn final_transfer(&self, base: &str, id: &str, args: &Value, state: &str) -> Reply {
        let mut state = state.to_owned();
        for _ in 0..10 {
            let params = json!({
                "name": "transfer_funds",
                "arguments": args,
                "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}},
                "requestState": state,
            });
            let reply = self.call(base, id, "tools/call", params).await;
            match &reply {
                Reply::Result(r) if r["resultType"] == "input_required" => {
                    r["requestState"].as_str().unwrap().clone_into(&mut state);
                }
                _ => return reply,
            }
        }
        panic!("{id}: the final leg kept asking to come back");
    }

    async fn ledger(&self, base: &str) -> Vec<String> {
        let r = self
            .call(
                base,
                "ledger",
                "resources/read",
                json!({"uri": "demo://ledger"}),
            )
            .await;
        let text = r.result()["contents"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        text.lines().map(str::to_owned).collect()
    }

    async fn ledger_count(&self, base: &str, to: &str) -> usize {
        let suffix = format!(" {to}");
        self.ledger(base)
            .await
            .iter()
            .filter(|l| l.ends_with(&suffix))
            .count()
    }

    async fn kill(&mut self, i: usize) {
        self.replicas[i].kill().await;
        self.figures().replica_kills += 1;
    }

    async fn restart(&mut self, i: usize) {
        self.replicas[i].restart().await;
        self.figures().replica_restarts += 1;
    }
}

fn transferred(reply: &Reply) -> Option<String> {
    match reply {
        Reply::Result(r) => r["content"][0]["text"]
            .as_str()
            .filter(|t| t.starts_with("Transferred"))
            .map(str::to_owned),
        _ => None,
    }
}

/// MRTR flows through nginx: every flow completes, and nginx's log shows
/// their legs served by different replicas.
async fn legs_land_on_different_replicas(c: &Cluster) {
    let flows = 30;
    for i in 0..flows {
        let id = format!("a-{i}");
        let args = json!({"name": format!("db{i}")});
        let first = c
            .call(
                &c.lb(),
                &id,
                "tools/call",
                json!({"name": "provision_database", "arguments": args}),
            )
            .await;
        let first = first.result();
        assert_eq!(first["resultType"], "input_required");
        let done = c
            .call(
                &c.lb(),
                &id,
                "tools/call",
                json!({
                    "name": "provision_database",
                    "arguments": args,
                    "inputResponses": {"region": {"action": "accept", "content": {"region": "eu-west-1"}}},
                    "requestState": first["requestState"],
                }),
            )
            .await;
        assert_eq!(
            done.result()["content"][0]["text"],
            format!("Created database db{i} in eu-west-1.")
        );
    }
    // nginx logs a request once it is done, which may be just after its
    // client read the answer: wait (bounded: 200 × 10 ms) for every line.
    let mut log = c.nginx.upstreams();
    for _ in 0..200 {
        if (0..flows).all(|i| log.get(&format!("a-{i}")).is_some_and(|l| l.len() == 2)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        log = c.nginx.upstreams();
    }
    let across = (0..flows)
        .filter(|i| {
            let legs = &log[&format!("a-{i}")];
            assert_eq!(legs.len(), 2, "two legs logged for a-{i}");
            legs[0] != legs[1]
        })
        .count();
    let mut f = c.figures();
    f.flows += flows;
    f.flows_across_replicas += across;
    assert!(
        across * 2 >= flows,
        "round robin without stickiness: most flows' legs on two replicas ({across} of {flows})"
    );
}

/// The same final leg to two replicas at once, then again after a pause to
/// the third: one transfer, the first answer to all.
async fn duplicates_on_two_replicas_make_one_transfer(c: &Cluster) {
    for i in 0..10 {
        let id = format!("b-{i}");
        let to = format!("bob-{i}");
        let (args, state) = c.start_transfer(&c.lb(), &id, &to, 0).await;
        let (r0, r1) = (c.direct(0), c.direct(1));
        let (one, two) = tokio::join!(
            c.final_transfer(&r0, &id, &args, &state),
            c.final_transfer(&r1, &id, &args, &state),
        );
        // And again after a pause, on the third replica.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let late = c.final_transfer(&c.direct(2), &id, &args, &state).await;
        let first = transferred(&one).unwrap_or_else(|| panic!("{id}: {one:?}"));
        assert_eq!(
            transferred(&two).as_deref(),
            Some(first.as_str()),
            "{id}: {two:?}"
        );
        assert_eq!(
            transferred(&late).as_deref(),
            Some(first.as_str()),
            "{id}: {late:?}"
        );
        c.figures().transfers_confirmed += 1;
        assert_eq!(c.ledger_count(&c.lb(), &to).await, 1, "{id}: one transfer");
    }
}

/// A replica killed between two legs: the flow finishes through the others.
async fn a_kill_between_legs_loses_nothing(c: &mut Cluster) {
    for r in 0..3 {
        let id = format!("c-{r}");
        let to = format!("carol-{r}");
        let (args, state) = c.start_transfer(&c.direct(r), &id, &to, 0).await;
        c.kill(r).await;
        let done = c.final_transfer(&c.lb(), &id, &args, &state).await;
        assert!(transferred(&done).is_some(), "{id}: {done:?}");
        c.figures().transfers_confirmed += 1;
        assert_eq!(c.ledger_count(&c.lb(), &to).await, 1);
        c.restart(r).await;
    }
}

/// A replica killed inside a guarded final leg (after the effect, before
/// its outcome was stored): its duplicates on the other replicas get
/// "outcome unknown", and the ledger shows the one transfer.
async fn a_kill_inside_a_guarded_leg_is_outcome_unknown(c: &mut Cluster) {
    for round in 0..2 {
        let victim = round;
        let (y, z) = ((victim + 1) % 3, (victim + 2) % 3);
        let id = format!("d-{round}");
        let to = format!("dave-{round}");
        // The bank settles for 8 s after recording: the kill lands inside.
        let (args, state) = c.start_transfer(&c.lb(), &id, &to, 8000).await;
        let base = c.direct(victim);
        let (a2, s2, id2) = (args.clone(), state.clone(), id.clone());
        let inflight = tokio::spawn(async move {
            call(
                &base,
                &id2,
                "tools/call",
                final_params(&a2, &s2),
                REQUEST_TIMEOUT,
            )
            .await
        });
        // Wait (bounded: 400 × 25 ms) until the effect is in the ledger.
        let mut recorded = false;
        for _ in 0..400 {
            if c.ledger_count(&c.direct(y), &to).await == 1 {
                recorded = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        assert!(recorded, "{id}: the transfer was recorded");
        c.kill(victim).await;
        let cut = inflight.await.unwrap();
        assert!(
            matches!(cut, Reply::Transport(_)),
            "{id}: the killed replica's caller lost its answer: {cut:?}"
        );
        {
            let mut f = c.figures();
            f.calls += 1;
            *f.by_kind.entry(cut.kind()).or_default() += 1;
        }
        let (ry, rz) = (c.direct(y), c.direct(z));
        let (dup_y, dup_z) = tokio::join!(
            c.final_transfer(&ry, &id, &args, &state),
            c.final_transfer(&rz, &id, &args, &state),
        );
        for dup in [&dup_y, &dup_z] {
            let Reply::Error(_, e) = dup else {
                panic!("{id}: a duplicate after the kill must be outcome unknown: {dup:?}");
            };
            assert_eq!(
                e["code"],
                tern_server::error::codes::OUTCOME_UNKNOWN,
                "{id}: {e}"
            );
        }
        assert_eq!(
            c.ledger_count(&c.lb(), &to).await,
            1,
            "{id}: at most one transfer"
        );
        c.restart(victim).await;
    }
}

fn final_params(args: &Value, state: &str) -> Value {
    json!({
        "name": "transfer_funds",
        "arguments": args,
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}},
        "requestState": state,
    })
}

/// Polls `base` until the task's status is one of `want` (bounded: 400 ×
/// 25 ms).
async fn task_until(c: &Cluster, base: &str, task_id: &str, want: &[&str]) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        let r = c
            .call(base, "e-poll", "tasks/get", json!({"taskId": task_id}))
            .await;
        if let Reply::Result(t) = r {
            if want.iter().any(|w| t["status"] == *w) {
                return t;
            }
            last = t;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {task_id} never reached {want:?}; last {last}");
}

/// A task created through one replica, polled and answered through the
/// others.
async fn tasks_span_replicas(c: &mut Cluster) {
    let created = c
        .call(
            &c.direct(0),
            "e-1",
            "tools/call",
            json!({"name": "import_dataset", "arguments": {"rows": 20}}),
        )
        .await;
    let task_id = created.result()["taskId"].as_str().unwrap().to_owned();
    let asking = task_until(c, &c.direct(1), &task_id, &["input_required"]).await;
    let key = asking["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let update = c
        .call(
            &c.direct(2),
            "e-1",
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"on_error": "skip"}}}}),
        )
        .await;
    assert!(matches!(update, Reply::Result(_)), "{update:?}");
    let done = task_until(c, &c.lb(), &task_id, &["completed", "failed", "cancelled"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Imported 18 rows (skipped 2)."
    );
}

/// The lines of `demo://imports/{task_id}`.
async fn imports(c: &Cluster, base: &str, task_id: &str) -> Vec<String> {
    let r = c
        .call(
            base,
            "e-imports",
            "resources/read",
            json!({"uri": format!("demo://imports/{task_id}")}),
        )
        .await;
    r.result()["contents"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Answers the import's question ("skip") through `base`.
async fn skip(c: &Cluster, base: &str, task_id: &str, asking: &Value) {
    let key = asking["inputRequests"]
        .as_object()
        .and_then(|q| q.keys().next())
        .expect("a question")
        .clone();
    let update = c
        .call(
            base,
            "e-skip",
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"on_error": "skip"}}}}),
        )
        .await;
    assert!(matches!(update, Reply::Result(_)), "{update:?}");
}

/// Polls through `base` until the task's status is one of `want`, within
/// `within`.
async fn task_within(
    c: &Cluster,
    base: &str,
    task_id: &str,
    want: &[&str],
    within: Duration,
) -> Value {
    let deadline = tokio::time::Instant::now() + within;
    let mut last = Value::Null;
    while tokio::time::Instant::now() < deadline {
        if let Reply::Result(t) = c
            .call(base, "e-poll", "tasks/get", json!({"taskId": task_id}))
            .await
        {
            if want.iter().any(|w| t["status"] == *w) {
                return t;
            }
            last = t;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {task_id}: not {want:?} within {within:?}; last {last}");
}

/// The batches of 40 rows and the commit, each once.
const IMPORT_40: [&str; 5] = [
    "batch 0 rows 0-9",
    "batch 1 rows 10-19",
    "batch 2 rows 20-29",
    "batch 3 rows 30-39",
    "commit 38 rows",
];

/// Recovery takes the lease, then the work (40 rows of 50 ms) and the
/// polls: lease + 10 s, plus the rows.
fn recovered_within() -> Duration {
    Duration::from_secs(LEASE_SECS + 10) + Duration::from_secs(2)
}

/// A durable task (`import_dataset`) whose runner is killed with SIGKILL
/// at a known point completes on another replica within lease + 10 s,
/// every batch in `demo://imports/…` once.
async fn a_killed_runners_task_completes_on_another_replica(c: &mut Cluster) {
    let created = c
        .call(
            &c.direct(0),
            "e-2",
            "tools/call",
            json!({"name": "import_dataset", "arguments": {"rows": 40, "pause_after_batch": 0}}),
        )
        .await;
    let task_id = created.result()["taskId"].as_str().unwrap().to_owned();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let t = task_until(c, &c.direct(1), &task_id, &["working"]).await;
        if t["statusMessage"] == "paused after batch 0" {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never paused: {t}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    c.kill(0).await;
    let asking = task_within(
        c,
        &c.direct(1),
        &task_id,
        &["input_required", "failed"],
        recovered_within(),
    )
    .await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    assert_eq!(asking["_meta"]["dev.tern/attempt"], 1, "{asking}");
    skip(c, &c.direct(2), &task_id, &asking).await;
    let done = task_within(
        c,
        &c.lb(),
        &task_id,
        &["completed", "failed", "cancelled"],
        recovered_within(),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"][0]["text"],
        "Imported 38 rows (skipped 2)."
    );
    assert_eq!(
        imports(c, &c.lb(), &task_id).await,
        IMPORT_40,
        "a batch twice, or lost"
    );
    {
        let mut f = c.figures();
        f.durable_tasks += 1;
        f.recoveries += 1;
        f.batches += 4;
    }
    c.restart(0).await;
}

/// A runner cut off mid-batch (its process stopped with SIGSTOP: it neither
/// renews nor writes) loses its lease; another replica takes the task and
/// runs the batch again (retry-safe: its idempotency key keeps one line).
/// Resumed (SIGCONT), the old runner's late writes are fenced: the record
/// is the new runner's, every batch once.
async fn a_paused_runners_late_writes_are_fenced(c: &mut Cluster) {
    let created = c
        .call(
            &c.direct(1),
            "e-3",
            "tools/call",
            json!({"name": "import_dataset", "arguments": {"rows": 40}}),
        )
        .await;
    let task_id = created.result()["taskId"].as_str().unwrap().to_owned();
    inside_batch_0(c, &c.direct(2), &task_id).await;
    c.replicas[1].signal("STOP").await;
    let asking = task_within(
        c,
        &c.direct(2),
        &task_id,
        &["input_required", "failed"],
        recovered_within(),
    )
    .await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    assert_eq!(asking["_meta"]["dev.tern/attempt"], 1, "{asking}");
    c.replicas[1].signal("CONT").await;
    skip(c, &c.direct(0), &task_id, &asking).await;
    let done = task_within(
        c,
        &c.direct(1),
        &task_id,
        &["completed", "failed", "cancelled"],
        recovered_within(),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["_meta"]["dev.tern/attempt"], 1,
        "the old runner wrote over the new: {done}"
    );
    assert_eq!(
        imports(c, &c.lb(), &task_id).await,
        IMPORT_40,
        "a batch twice, or lost"
    );
    let mut f = c.figures();
    f.durable_tasks += 1;
    f.recoveries += 1;
    f.batches += 4;
    f.partitions += 1;
}

/// Waits (bounded) until the import `task_id`, read through `base`, is
/// inside batch 0 (rows 1 to 8 of its 10 done).
async fn inside_batch_0(c: &Cluster, base: &str, task_id: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let t = task_until(c, base, task_id, &["working"]).await;
        let rows: Option<u32> = t["statusMessage"]
            .as_str()
            .and_then(|m| m.strip_prefix("imported "))
            .and_then(|m| m.split(' ').next())
            .and_then(|n| n.parse().ok());
        if rows.is_some_and(|n| (1..=8).contains(&n)) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never got into batch 0: {t}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The runner's replica cut off from Redis (a TCP proxy between them drops
/// every connection) mid-batch: it cannot renew its lease and stops its
/// body at the lease deadline; another replica takes the task and finishes
/// it. Reconnected, the cut-off replica reads the new runner's record: no
/// write of the old runner landed after the claim, every batch once.
async fn a_runner_cut_off_from_redis_is_replaced(c: &mut Cluster) {
    let created = c
        .call(
            &c.direct(2),
            "e-4",
            "tools/call",
            json!({"name": "import_dataset", "arguments": {"rows": 40}}),
        )
        .await;
    let task_id = created.result()["taskId"].as_str().unwrap().to_owned();
    inside_batch_0(c, &c.direct(0), &task_id).await;
    c.partition.cut();
    let asking = task_within(
        c,
        &c.direct(0),
        &task_id,
        &["input_required", "failed"],
        recovered_within(),
    )
    .await;
    assert_eq!(asking["status"], "input_required", "{asking}");
    assert_eq!(asking["_meta"]["dev.tern/attempt"], 1, "{asking}");
    c.partition.restore();
    skip(c, &c.direct(1), &task_id, &asking).await;
    let done = task_within(
        c,
        &c.direct(0),
        &task_id,
        &["completed", "failed", "cancelled"],
        recovered_within(),
    )
    .await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["_meta"]["dev.tern/attempt"], 1, "{done}");
    // Through the replica that was cut off, once it reconnected: the same.
    let seen = task_within(
        c,
        &c.direct(2),
        &task_id,
        &["completed"],
        recovered_within(),
    )
    .await;
    assert_eq!(seen["result"], done["result"]);
    assert_eq!(
        imports(c, &c.direct(2), &task_id).await,
        IMPORT_40,
        "a batch twice, or lost"
    );
    let mut f = c.figures();
    f.durable_tasks += 1;
    f.recoveries += 1;
    f.batches += 4;
    f.partitions += 1;
}

/// Redis killed under load, then started again: transfers during the
/// outage fail with a JSON-RPC error (never a hang, never a duplicate),
/// replicas stay ready, and service resumes by itself.
async fn a_redis_restart_under_load(c: &mut Cluster) {
    let mut successes_after = 0;
    let mut outage_errors = 0;
    let mut confirmed = Vec::new();
    // At most 60 rounds of three concurrent flows, and 60 s.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    for i in 0..60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the load loop ran out of time"
        );
        if i == 4 {
            c.redis.kill().await;
        }
        let down = (4..7).contains(&i);
        if i == 7 {
            c.redis.restart().await;
            c.figures().redis_restarts += 1;
        }
        let (first, second, third) = tokio::join!(
            outage_flow(c, i, 0),
            outage_flow(c, i, 1),
            outage_flow(c, i, 2)
        );
        for (to, reply, took) in [first, second, third] {
            if down {
                // A clear JSON-RPC error within seconds: not a hang, not a
                // proxy's timeout.
                let Reply::Error(_, e) = &reply else {
                    panic!("{to} during the outage: {reply:?}");
                };
                assert!(
                    took < Duration::from_secs(5),
                    "{to} during the outage took {took:?}"
                );
                let mut f = c.figures();
                f.outage_calls += 1;
                f.outage_slowest = f.outage_slowest.max(took);
                f.outage_error = format!("{} {}", e["code"], e["message"]);
                outage_errors += 1;
                continue;
            }
            match transferred(&reply) {
                Some(_) => {
                    confirmed.push(to);
                    if i >= 7 {
                        successes_after += 1;
                    }
                }
                // Right after the restart a call may still fail while the
                // connections come back.
                None if i >= 7 => {}
                None => panic!("{to} before the outage: {reply:?}"),
            }
        }
        if i == 5 {
            let (status, body) = get(&c.replicas[1].url("/readyz")).await.unwrap();
            assert_eq!(status, 200, "readiness holds during a Redis outage: {body}");
            assert!(body.contains("redis=down"), "{body}");
        }
        if successes_after >= 15 {
            break;
        }
    }
    assert!(outage_errors > 0);
    assert!(
        successes_after >= 15,
        "service resumed by itself after Redis came back ({successes_after} transfers since)"
    );
    let ledger = c.ledger(&c.lb()).await;
    for to in &confirmed {
        let n = ledger
            .iter()
            .filter(|l| l.ends_with(&format!(" {to}")))
            .count();
        assert_eq!(n, 1, "{to}: one transfer per confirmed call");
    }
    let mut frank = 0;
    for i in 0..60 {
        for k in 0..3 {
            let n = ledger
                .iter()
                .filter(|l| l.ends_with(&format!(" frank-{i}-{k}")))
                .count();
            assert!(n <= 1, "frank-{i}-{k}: never a duplicate effect");
            frank += n;
        }
    }
    // A call that failed right after the restart may have made its effect
    // before its outcome could be stored: uncertain, never doubled.
    let uncertain = frank - confirmed.len();
    let mut f = c.figures();
    f.transfers_confirmed += confirmed.len() as u64;
    f.uncertain += uncertain;
}

/// One `transfer_funds` flow through the balancer (round `i`, flow `k`):
/// its recipient, its last reply and how long the flow took.
async fn outage_flow(c: &Cluster, i: usize, k: usize) -> (String, Reply, Duration) {
    let id = format!("f-{i}-{k}");
    let to = format!("frank-{i}-{k}");
    let began = tokio::time::Instant::now();
    let args = json!({"to": to, "amount": 99});
    let first = c
        .call(
            &c.lb(),
            &id,
            "tools/call",
            json!({"name": "transfer_funds", "arguments": args}),
        )
        .await;
    let reply = match &first {
        Reply::Result(r) if r["resultType"] == "input_required" => {
            let state = r["requestState"].as_str().unwrap().to_owned();
            c.final_transfer(&c.lb(), &id, &args, &state).await
        }
        other => other.clone(),
    };
    (to, reply, began.elapsed())
}

/// A listen stream on one replica hears a resource update and a task's
/// status written on others (through Redis).
async fn a_listen_stream_hears_other_replicas(c: &Cluster) {
    let quiet = Duration::from_secs(10);
    let mut on_a = Listen::open(
        &c.direct(0),
        json!({"resourceSubscriptions": ["demo://ledger"]}),
    )
    .await;
    let ack = on_a.next(quiet).await.expect("the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    let (args, state) = c.start_transfer(&c.direct(1), "g-1", "grace", 0).await;
    let done = c.final_transfer(&c.direct(1), "g-1", &args, &state).await;
    assert!(transferred(&done).is_some(), "{done:?}");
    c.figures().transfers_confirmed += 1;
    let updated = on_a
        .until(quiet, |m| m["method"] == "notifications/resources/updated")
        .await;
    assert_eq!(updated["params"]["uri"], "demo://ledger");

    let created = c
        .call(
            &c.direct(1),
            "g-2",
            "tools/call",
            json!({"name": "import_dataset", "arguments": {"rows": 20}}),
        )
        .await;
    let task_id = created.result()["taskId"].as_str().unwrap().to_owned();
    let mut on_c = Listen::open(&c.direct(2), json!({"taskIds": [task_id]})).await;
    let ack = on_c.next(quiet).await.expect("the acknowledgement");
    assert_eq!(
        ack["params"]["notifications"]["taskIds"],
        json!([task_id]),
        "{ack}"
    );
    let asking = task_until(c, &c.direct(0), &task_id, &["input_required"]).await;
    let key = asking["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let update = c
        .call(
            &c.direct(0),
            "g-2",
            "tasks/update",
            json!({"taskId": task_id, "inputResponses": {key: {"action": "accept", "content": {"on_error": "abort"}}}}),
        )
        .await;
    assert!(matches!(update, Reply::Result(_)), "{update:?}");
    let ended = on_c
        .until(quiet, |m| {
            m["method"] == "notifications/tasks" && m["params"]["status"] == "completed"
        })
        .await;
    assert_eq!(ended["params"]["taskId"], task_id.as_str(), "{ended}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fleet_behind_nginx_keeps_every_effect_once_through_kills_and_a_redis_restart() {
    // The whole run is bounded: a hang anywhere fails the test, and the
    // cluster is torn down when it is dropped.
    tokio::time::timeout(Duration::from_secs(600), the_fleet_run())
        .await
        .expect("the cluster test finished within 10 minutes");
}

async fn the_fleet_run() {
    let mut c = Cluster::start().await;
    legs_land_on_different_replicas(&c).await;
    duplicates_on_two_replicas_make_one_transfer(&c).await;
    a_listen_stream_hears_other_replicas(&c).await;
    a_kill_between_legs_loses_nothing(&mut c).await;
    a_kill_inside_a_guarded_leg_is_outcome_unknown(&mut c).await;
    tasks_span_replicas(&mut c).await;
    a_killed_runners_task_completes_on_another_replica(&mut c).await;
    a_paused_runners_late_writes_are_fenced(&mut c).await;
    a_runner_cut_off_from_redis_is_replaced(&mut c).await;
    a_redis_restart_under_load(&mut c).await;
    let lines = c.ledger(&c.lb()).await.len();
    let mut f = c.figures();
    f.ledger_lines = lines;
    // Confirmed transfers plus the two recorded inside killed legs.
    assert_eq!(
        lines as u64,
        f.transfers_confirmed + 2 + f.uncertain as u64,
        "every effect counted once: {f:?}"
    );
    let kinds: Vec<String> = f.by_kind.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    let report = format!(
        "cluster figures: {} calls, {} replica kills (SIGKILL), {} replica restarts, {} Redis restarts; \
         {} of {} MRTR flows had legs on two replicas; {} transfers confirmed, {} ledger lines \
         (2 recorded inside killed legs, {} uncertain after the Redis restart); {} transfer flows during the \
         Redis outage, each failed in at most {} ms ({}); {} durable tasks survived their runner ({} recoveries, \
         {} of them a runner paused or cut off from Redis; {} batches counted, each once); answers by kind: {}\n",
        f.calls,
        f.replica_kills,
        f.replica_restarts,
        f.redis_restarts,
        f.flows_across_replicas,
        f.flows,
        f.transfers_confirmed,
        f.ledger_lines,
        f.uncertain,
        f.outage_calls,
        f.outage_slowest.as_millis(),
        f.outage_error,
        f.durable_tasks,
        f.recoveries,
        f.partitions,
        f.batches,
        kinds.join(", ")
    );
    // Past the harness's capture: the run's log carries the figures.
    let _ = std::io::stderr().write_all(report.as_bytes());
}
