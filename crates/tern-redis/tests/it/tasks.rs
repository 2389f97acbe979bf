//! The Redis task store: the task store contract against a real Redis, and
//! tasks shared by two replicas — created on one, answered, cancelled and
//! polled on the other, their runner's lease lapsing into `failed`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::ClientCapabilities;
use tern_protocol::task::TASKS_EXTENSION;
use tern_redis::{RedisOptions, RedisTaskStore};
use tern_server::error::codes;
use tern_server::testing::{TestClient, task_store_contract, task_store_recovery_contract};
use tern_server::{
    Answer, Ctx, Elicit, KeyRing, Server, TaskConfig, TaskSupport, ToolDef, ToolError,
};

use tern_test_support::redis_server::RedisServer;

fn prefix() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    format!("t{}", u64::from_le_bytes(bytes))
}

#[tokio::test]
async fn the_redis_task_store_meets_the_task_store_contract() {
    let redis = RedisServer::start().await;
    // The suite asks for stores synchronously: connect them first, each
    // with a prefix of its own (they share one Redis).
    let mut stores = Vec::new();
    for _ in 0..10 {
        let options = RedisOptions::new().prefix(prefix());
        stores.push(Arc::new(
            RedisTaskStore::connect(&redis.url(), options)
                .await
                .unwrap(),
        ));
    }
    let stores = Mutex::new(stores);
    task_store_contract(|| stores.lock().unwrap().pop().expect("ten stores suffice")).await;
}

#[tokio::test]
async fn the_redis_task_store_claims_lapsed_tasks() {
    let redis = RedisServer::start().await;
    let mut stores = Vec::new();
    for _ in 0..2 {
        let options = RedisOptions::new().prefix(prefix());
        stores.push(Arc::new(
            RedisTaskStore::connect(&redis.url(), options)
                .await
                .unwrap(),
        ));
    }
    let stores = Mutex::new(stores);
    task_store_recovery_contract(|| stores.lock().unwrap().pop().expect("two stores suffice"))
        .await;
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Confirm {
    ok: bool,
}

const KEYS: &str = "k1:HJwshgyxYHGHo34Km8vjEsH8_OYqBA7Ocx6guZcSytQ";

/// One replica: shared keys and the shared task store. `slow` asks a
/// question, then waits for cancellation; `forever` only waits.
async fn replica(redis: &RedisServer, prefix: &str, lease: Duration) -> (Server, TestClient) {
    let store = RedisTaskStore::connect(&redis.url(), RedisOptions::new().prefix(prefix))
        .await
        .unwrap();
    let replay =
        tern_redis::RedisReplayStore::connect(&redis.url(), RedisOptions::new().prefix(prefix))
            .await
            .unwrap();
    let server = Server::builder("redis-tasks", "1")
        .keys(KeyRing::parse(KEYS).unwrap())
        .replay_store(Arc::new(replay))
        .task_store(Arc::new(store))
        .multi_instance()
        // A long recheck: a cross-replica answer or cancel that arrives
        // promptly was woken by pub/sub, not found by polling.
        .task_config(
            TaskConfig::default()
                .lease(lease)
                .recheck(Duration::from_secs(600)),
        )
        .tool(
            ToolDef::new("ask", "", |ctx: Ctx| async move {
                ctx.into_task().await;
                match ctx.ask(Elicit::<Confirm>::form("Go?").key("go")).await {
                    Ok(Answer::Accept(Confirm { ok: true })) => "went".to_owned(),
                    Ok(_) => "stayed".to_owned(),
                    Err(e) => format!("error: {e:?}"),
                }
            })
            .task(TaskSupport::Required),
        )
        .tool(
            ToolDef::new("forever", "", |ctx: Ctx| async move {
                ctx.into_task().await;
                ctx.cancelled().await;
                Err::<String, _>(ToolError::new("stopped"))
            })
            .task(TaskSupport::Required),
        )
        .build()
        .unwrap();
    let client = TestClient::new(server.clone()).with_capabilities(
        ClientCapabilities::default()
            .with_extension(TASKS_EXTENSION)
            .with_elicitation_form(),
    );
    (server, client)
}

async fn get(c: &TestClient, id: &str) -> Value {
    c.send("tasks/get", json!({"taskId": id}))
        .await
        .result()
        .unwrap()
}

/// Polls `c` until the task's status is one of `want`: at most 400 polls,
/// 25 ms apart (10 s).
async fn until(c: &TestClient, id: &str, want: &[&str]) -> Value {
    let mut last = Value::Null;
    for _ in 0..400 {
        last = get(c, id).await;
        if want.iter().any(|w| last["status"] == *w) {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("task {id} never reached {want:?}; last {last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_created_on_one_replica_is_answered_and_polled_on_another() {
    let redis = RedisServer::start().await;
    let p = prefix();
    let (_a, on_a) = replica(&redis, &p, Duration::from_secs(30)).await;
    let (_b, on_b) = replica(&redis, &p, Duration::from_secs(30)).await;
    let created = on_a.call_tool("ask", json!({})).await.result().unwrap();
    let id = created["taskId"].as_str().unwrap().to_owned();
    let waiting = until(&on_b, &id, &["input_required"]).await;
    let key = waiting["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .next()
        .unwrap()
        .clone();
    let update = on_b
        .send(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {
                key: {"action": "accept", "content": {"ok": true}}}}),
        )
        .await;
    assert!(update.result().is_ok(), "tasks/update on the other replica");
    let done = until(&on_b, &id, &["completed", "failed"]).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "went");
    // And the creating replica reads the same record.
    assert_eq!(get(&on_a, &id).await["status"], "completed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_through_another_replica_reaches_the_runner() {
    let redis = RedisServer::start().await;
    let p = prefix();
    let (_a, on_a) = replica(&redis, &p, Duration::from_secs(30)).await;
    let (_b, on_b) = replica(&redis, &p, Duration::from_secs(30)).await;
    let created = on_a.call_tool("forever", json!({})).await.result().unwrap();
    let id = created["taskId"].as_str().unwrap().to_owned();
    assert_eq!(get(&on_b, &id).await["status"], "working");
    on_b.send("tasks/cancel", json!({"taskId": id}))
        .await
        .result()
        .unwrap();
    let done = until(&on_a, &id, &["cancelled", "completed", "failed"]).await;
    assert_eq!(done["status"], "cancelled", "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_died_leaves_its_task_failed_on_every_replica() {
    let redis = RedisServer::start().await;
    let p = prefix();
    let id = {
        // Replica A's runtime is dropped with its runner inside: the
        // process "died" holding the lease.
        let url = RedisServer::url(&redis);
        let p = p.clone();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let store = RedisTaskStore::connect(&url, RedisOptions::new().prefix(&p))
                    .await
                    .unwrap();
                let server = Server::builder("redis-tasks", "1")
                    .keys(KeyRing::parse(KEYS).unwrap())
                    .task_store(Arc::new(store))
                    .task_config(TaskConfig::default().lease(Duration::from_millis(600)))
                    .tool(
                        ToolDef::new("forever", "", |ctx: Ctx| async move {
                            ctx.into_task().await;
                            ctx.cancelled().await;
                            "never"
                        })
                        .task(TaskSupport::Required),
                    )
                    .build()
                    .unwrap();
                let c = TestClient::new(server).with_capabilities(
                    ClientCapabilities::default().with_extension(TASKS_EXTENSION),
                );
                let r = c.call_tool("forever", json!({})).await.result().unwrap();
                r["taskId"].as_str().unwrap().to_owned()
            })
        })
        .join()
        .unwrap()
    };
    let (_b, on_b) = replica(&redis, &p, Duration::from_millis(600)).await;
    let (_c, on_c) = replica(&redis, &p, Duration::from_millis(600)).await;
    let failed = until(&on_b, &id, &["failed", "completed", "cancelled"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], codes::OUTCOME_UNKNOWN);
    let seen = get(&on_c, &id).await;
    assert_eq!(seen["status"], "failed");
    assert_eq!(
        seen["error"], failed["error"],
        "one outcome, seen from both"
    );
}

/// Sends the instant it is dropped: a body that stopped.
struct Stopped(std::sync::mpsc::Sender<std::time::Instant>);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.send(std::time::Instant::now());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runner_that_cannot_reach_redis_stops_its_body_before_the_lease_lapses() {
    let mut redis = RedisServer::start().await;
    let p = prefix();
    let lease = Duration::from_millis(1500);
    let (stopped_tx, stopped) = std::sync::mpsc::channel();
    let stopped_tx = Arc::new(Mutex::new(stopped_tx));
    let store = RedisTaskStore::connect(&redis.url(), RedisOptions::new().prefix(&p))
        .await
        .unwrap();
    let server = Server::builder("redis-tasks", "1")
        .keys(KeyRing::parse(KEYS).unwrap())
        .task_store(Arc::new(store))
        .task_config(TaskConfig::default().lease(lease))
        .tool(
            ToolDef::new("stubborn", "", move |ctx: Ctx| {
                let tx = stopped_tx.lock().unwrap().clone();
                async move {
                    ctx.into_task().await;
                    let _guard = Stopped(tx);
                    // Ignores cancellation: only dropping the body stops it.
                    std::future::pending::<()>().await;
                    "never"
                }
            })
            .task(TaskSupport::Required),
        )
        .build()
        .unwrap();
    let c = TestClient::new(server)
        .with_capabilities(ClientCapabilities::default().with_extension(TASKS_EXTENSION));
    let started = std::time::Instant::now();
    let created = c.call_tool("stubborn", json!({})).await.result().unwrap();
    let id = created["taskId"].as_str().unwrap().to_owned();
    assert_eq!(get(&c, &id).await["status"], "working");
    // The runner renews every third of a lease: let the first renewal
    // land (at a third), then take Redis away before the second.
    tokio::time::sleep(lease / 2).await;
    let killed = std::time::Instant::now();
    redis.kill().await;
    let at = tokio::task::spawn_blocking(move || stopped.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the body was stopped");
    // The renewal at a third of a lease wrote an expiry at four thirds:
    // the body must be gone before then, or it could still act on a task
    // another replica already reads `failed`.
    assert!(at > killed, "the body ran until Redis went away");
    assert!(
        at.duration_since(started) < lease * 4 / 3,
        "the body ran {:?} after the task began, past its lease's expiry (lease {lease:?})",
        at.duration_since(started)
    );
    // Redis back (AOF kept the record): the lapsed lease reads `failed`.
    redis.restart().await;
    let failed = until(&c, &id, &["failed", "completed", "cancelled"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(failed["error"]["code"], codes::OUTCOME_UNKNOWN);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_result_from_a_runner_that_lost_its_lease_is_dropped() {
    let redis = RedisServer::start().await;
    let p = prefix();
    let lease = Duration::from_millis(600);
    let (returned_tx, returned) = std::sync::mpsc::channel::<()>();
    let url = redis.url();
    let (id_tx, id_rx) = std::sync::mpsc::channel::<String>();
    let p_a = p.clone();
    // Replica A stalls (its one runtime thread blocked well past the
    // lease, as a paused process would), then its body returns a result.
    let a = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let store = RedisTaskStore::connect(&url, RedisOptions::new().prefix(&p_a))
                .await
                .unwrap();
            let returned_tx = Arc::new(Mutex::new(returned_tx));
            let server = Server::builder("redis-tasks", "1")
                .keys(KeyRing::parse(KEYS).unwrap())
                .task_store(Arc::new(store))
                .task_config(TaskConfig::default().lease(lease))
                .tool(
                    ToolDef::new("stall", "", move |ctx: Ctx| {
                        let tx = returned_tx.lock().unwrap().clone();
                        async move {
                            ctx.into_task().await;
                            std::thread::sleep(lease * 4);
                            let _ = tx.send(());
                            "late"
                        }
                    })
                    .task(TaskSupport::Required),
                )
                .build()
                .unwrap();
            let c = TestClient::new(server)
                .with_capabilities(ClientCapabilities::default().with_extension(TASKS_EXTENSION));
            let r = c.call_tool("stall", json!({})).await.result().unwrap();
            id_tx
                .send(r["taskId"].as_str().unwrap().to_owned())
                .unwrap();
            // Keep A alive after the stall, so its runner tries to write.
            tokio::time::sleep(lease * 8).await;
        });
    });
    let id = tokio::task::spawn_blocking(move || id_rx.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .unwrap();
    let (_b, on_b) = replica(&redis, &p, lease).await;
    let failed = until(&on_b, &id, &["failed", "completed", "cancelled"]).await;
    assert_eq!(failed["status"], "failed", "{failed}");
    tokio::task::spawn_blocking(move || returned.recv_timeout(Duration::from_secs(10)))
        .await
        .unwrap()
        .expect("the stalled body returned");
    // A's runner had its chance to write "late"; the record keeps the
    // outcome every replica already read.
    for _ in 0..8 {
        tokio::time::sleep(lease / 2).await;
        let seen = get(&on_b, &id).await;
        assert_eq!(seen["status"], "failed", "{seen}");
        assert_eq!(seen["error"], failed["error"]);
        assert!(seen.get("result").is_none_or(Value::is_null), "{seen}");
    }
    tokio::task::spawn_blocking(move || a.join().unwrap())
        .await
        .unwrap();
}

#[tokio::test]
async fn multi_instance_refuses_a_task_store_of_one_process() {
    let redis = RedisServer::start().await;
    let replay = tern_redis::RedisReplayStore::connect(&redis.url(), RedisOptions::new())
        .await
        .unwrap();
    let built = Server::builder("x", "1")
        .keys(KeyRing::parse(KEYS).unwrap())
        .replay_store(Arc::new(replay))
        .task_store(Arc::new(tern_server::MemoryTaskStore::new()))
        .multi_instance()
        .build();
    let Err(e) = built else {
        panic!("a memory task store must be refused under multi_instance");
    };
    assert!(e.to_string().contains("task store"), "{e}");
}

/// `INFO commandstats` as (command → calls, usec). Redis counts the
/// commands a script runs there too (`cmdstat_hmget`, …), besides the
/// script's own `EVALSHA`.
async fn command_stats(conn: &mut redis::aio::MultiplexedConnection) -> Vec<(String, u64, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
                    .unwrap_or(0)
            };
            Some((name.to_owned(), field("calls"), field("usec")))
        })
        .collect()
}

/// Commands run by Redis (scripts' included) and the `EVALSHA` time
/// between two snapshots, leaving out the scripts themselves and the
/// snapshots' `INFO`.
fn work_between(before: &[(String, u64, u64)], after: &[(String, u64, u64)]) -> (u64, u64) {
    let was = |name: &str| {
        before
            .iter()
            .find(|(n, ..)| n == name)
            .map_or((0, 0), |(_, c, u)| (*c, *u))
    };
    let mut commands = 0;
    let mut script_usec = 0;
    for (name, calls, usec) in after {
        let (c, u) = was(name);
        match name.as_str() {
            "info" => {}
            "evalsha" | "eval" => script_usec += usec - u,
            _ => commands += calls - c,
        }
    }
    (commands, script_usec)
}

/// One create's work in Redis does not grow with its owner's records:
/// with 2,000 live records of the anonymous owner, one more create runs a
/// small, fixed number of commands (counted by `INFO commandstats`, which
/// counts what a script runs). Before the per-owner sorted set and tally,
/// the create script read every record of the owner (2,000 `HMGET`s).
#[tokio::test]
async fn one_create_under_2000_records_of_one_owner_runs_a_few_commands() {
    use tern_server::task::{Created, TaskQuota, TaskStore as _};
    const NOW: u64 = 1_800_000_000_000;
    const RECORDS: usize = 2000;
    let redis = RedisServer::start().await;
    let store = RedisTaskStore::connect(&redis.url(), RedisOptions::new().prefix(prefix()))
        .await
        .unwrap();
    let quota = TaskQuota::new(RECORDS * 2, u64::MAX / 2);
    for i in 0..RECORDS {
        let mut r = tern_server::testing::task_record(&format!("t{i}"), &format!("k{i}"), NOW);
        r.result_bytes = 2048;
        assert_eq!(store.create(r, quota, NOW).await.unwrap(), Created::New);
    }
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let mut most = 0;
    let mut usec = Vec::new();
    // A few creates, each measured alone (the store's only client here is
    // this test, its change listener only listens).
    for i in 0..5 {
        let before = command_stats(&mut conn).await;
        let mut r = tern_server::testing::task_record(&format!("n{i}"), &format!("m{i}"), NOW);
        r.result_bytes = 2048;
        assert_eq!(store.create(r, quota, NOW).await.unwrap(), Created::New);
        let (commands, script_usec) = work_between(&before, &command_stats(&mut conn).await);
        most = most.max(commands);
        usec.push(script_usec);
    }
    eprintln!("one create under {RECORDS} records: at most {most} commands, EVALSHA usec {usec:?}");
    assert!(
        most <= 32,
        "one create under {RECORDS} records ran {most} Redis commands: it must not read the owner's records"
    );
}

/// Records a store wrote before the tally (their owner's ids in the set
/// `o:OWNER`) are charged by the next create of that owner, and leave the
/// tally as any other when removed: an upgrade neither lets an owner past
/// its quota nor locks it out.
#[tokio::test]
async fn records_from_before_the_tally_count_against_their_owner() {
    use tern_server::task::{Created, TaskQuota, TaskStore as _};
    const NOW: u64 = 1_800_000_000_000;
    let redis = RedisServer::start().await;
    let p = prefix();
    let store = RedisTaskStore::connect(&redis.url(), RedisOptions::new().prefix(&p))
        .await
        .unwrap();
    let client = redis::Client::open(redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let tag = format!("{p}:{{tasks}}:");
    // The layout of the store before: a record hash without `q`, its
    // dedupe key, the owner's set.
    for id in ["old-1", "old-2"] {
        let mut r = tern_server::testing::task_record(id, &format!("k-{id}"), NOW);
        r.owner = Some("o".to_owned());
        r.result_bytes = 2048;
        let exp = (NOW + 60_000).to_string();
        let _: () = redis::cmd("HSET")
            .arg(format!("{tag}t:{id}"))
            .arg(&[
                ("json", serde_json::to_string(&r).unwrap()),
                ("v", "1".to_owned()),
                ("key", r.key.clone()),
                ("owner", "o".to_owned()),
                ("live", "1".to_owned()),
                ("bytes", "2048".to_owned()),
                ("exp", exp),
            ])
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: () = redis::cmd("SET")
            .arg(format!("{tag}k:{}", r.key))
            .arg(id)
            .query_async(&mut conn)
            .await
            .unwrap();
        let _: () = redis::cmd("SADD")
            .arg(format!("{tag}o:o"))
            .arg(id)
            .query_async(&mut conn)
            .await
            .unwrap();
    }
    let quota = TaskQuota::new(3, 1 << 20);
    let new = |id: &str| {
        let mut r = tern_server::testing::task_record(id, &format!("k-{id}"), NOW);
        r.owner = Some("o".to_owned());
        r
    };
    assert_eq!(
        store.create(new("n1"), quota, NOW).await.unwrap(),
        Created::New
    );
    assert_eq!(
        store.create(new("n2"), quota, NOW).await.unwrap(),
        Created::OverQuota,
        "the two records from before count: a fourth live task is refused"
    );
    let old_set: bool = redis::cmd("EXISTS")
        .arg(format!("{tag}o:o"))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!old_set, "the owner set is read once, then gone");
    store.remove("old-1").await.unwrap();
    assert_eq!(
        store.create(new("n2"), quota, NOW).await.unwrap(),
        Created::New,
        "a removed record from before leaves the tally"
    );
    let mut finished = store.load("old-2", NOW).await.unwrap().unwrap();
    finished.version += 1;
    finished.status = tern_protocol::task::TaskStatus::Completed;
    assert!(store.replace(finished).await.unwrap());
    assert_eq!(
        store.create(new("n3"), quota, NOW).await.unwrap(),
        Created::New,
        "a record from before that finished is no longer live"
    );
}
