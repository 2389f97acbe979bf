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
use tern_server::testing::{TestClient, task_store_contract};
use tern_server::{
    Answer, Ctx, Elicit, KeyRing, Server, TaskConfig, TaskSupport, ToolDef, ToolError,
};

use crate::redis_server::RedisServer;

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
    for _ in 0..6 {
        let options = RedisOptions::new().prefix(prefix());
        stores.push(Arc::new(
            RedisTaskStore::connect(&redis.url(), options)
                .await
                .unwrap(),
        ));
    }
    let stores = Mutex::new(stores);
    task_store_contract(|| stores.lock().unwrap().pop().expect("six stores suffice")).await;
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
