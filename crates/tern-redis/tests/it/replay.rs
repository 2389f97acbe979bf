//! The Redis replay store: the engine's contract suite against a real Redis,
//! two replicas sharing it, and a Redis that goes away mid-flow.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tern_redis::{RedisOptions, RedisReplayStore};
use tern_server::error::codes;
use tern_server::replay::ReplayStore;
use tern_server::testing::{RealTime, TestClient, replay_store_contract};
use tern_server::{Answer, CallLimits, Ctx, Elicit, KeyRing, Server, ToolDef, ToolError};

use tern_test_support::redis_server::RedisServer;

fn prefix() -> String {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).unwrap();
    format!("t{}", u64::from_le_bytes(bytes))
}

#[tokio::test]
async fn the_redis_store_keeps_the_contract() {
    let redis = RedisServer::start().await;
    let url = redis.url();
    replay_store_contract(|limits| {
        let url = url.clone();
        async move {
            // A prefix per store: the suite's stores share one Redis.
            let options = RedisOptions::new().prefix(prefix()).limits(limits);
            let store = RedisReplayStore::connect(&url, options).await.unwrap();
            (
                Arc::new(store) as Arc<dyn ReplayStore>,
                Arc::new(RealTime) as _,
            )
        }
    })
    .await;
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Confirm {
    ok: bool,
}

/// Two replicas of one server: the same keys, one Redis.
async fn replicas(redis: &RedisServer, prefix: &str, effects: &Arc<AtomicU64>) -> [TestClient; 2] {
    let keys = "k1:HJwshgyxYHGHo34Km8vjEsH8_OYqBA7Ocx6guZcSytQ";
    let mut out = Vec::new();
    for _ in 0..2 {
        let store = RedisReplayStore::connect(&redis.url(), RedisOptions::new().prefix(prefix))
            .await
            .unwrap();
        let effects = Arc::clone(effects);
        let pay = move |ctx: Ctx| {
            let effects = Arc::clone(&effects);
            async move {
                let Answer::Accept(Confirm { ok: true }) = ctx
                    .ask(Elicit::<Confirm>::form("Pay?").key("confirm"))
                    .await?
                else {
                    return Ok::<_, ToolError>("not paid".to_owned());
                };
                let n = effects.fetch_add(1, Ordering::SeqCst) + 1;
                Ok(format!("payment #{n}"))
            }
        };
        let server = Server::builder("fleet", "1.0.0")
            .keys(KeyRing::parse(keys).unwrap())
            .replay_store(Arc::new(store))
            .multi_instance()
            .tool(ToolDef::new("pay", "Pays once", pay).idempotent_retry())
            .build()
            .unwrap();
        out.push(TestClient::new(server));
    }
    out.try_into().unwrap()
}

fn yes() -> Value {
    json!({"confirm": {"action": "accept", "content": {"ok": true}}})
}

#[tokio::test]
async fn a_duplicate_on_another_replica_gets_the_first_outcome() {
    let redis = RedisServer::start().await;
    let effects = Arc::new(AtomicU64::new(0));
    let [a, b] = replicas(&redis, &prefix(), &effects).await;
    let r1 = a.call_tool("pay", json!({})).await;
    let state = r1.request_state().unwrap().to_owned();
    // Leg 2 on replica B, its duplicate on A, and both at once.
    let first = b.retry_tool("pay", json!({}), yes(), Some(&state)).await;
    assert_eq!(first.text(), Some("payment #1"));
    let again = a.retry_tool("pay", json!({}), yes(), Some(&state)).await;
    assert_eq!(again.text(), Some("payment #1"));
    let r1 = a.call_tool("pay", json!({})).await;
    let state = r1.request_state().unwrap().to_owned();
    let (x, y) = tokio::join!(
        a.retry_tool("pay", json!({}), yes(), Some(&state)),
        b.retry_tool("pay", json!({}), yes(), Some(&state)),
    );
    assert_eq!(x.text(), y.text(), "{x:?} {y:?}");
    assert_eq!(effects.load(Ordering::SeqCst), 2, "one effect per state");
}

#[tokio::test]
async fn a_redis_outage_fails_clearly_and_service_resumes_without_a_second_effect() {
    let mut redis = RedisServer::start().await;
    let effects = Arc::new(AtomicU64::new(0));
    let [a, b] = replicas(&redis, &prefix(), &effects).await;
    let r1 = a.call_tool("pay", json!({})).await;
    let state = r1.request_state().unwrap().to_owned();
    let paid = a.retry_tool("pay", json!({}), yes(), Some(&state)).await;
    assert_eq!(paid.text(), Some("payment #1"));
    let r2 = a.call_tool("pay", json!({})).await;
    let pending = r2.request_state().unwrap().to_owned();
    redis.kill().await;
    // During the outage: a clear error within the response timeout, no
    // effect, no hang (bounded here by the test's own timeout).
    let during = tokio::time::timeout(
        Duration::from_secs(20),
        b.retry_tool("pay", json!({}), yes(), Some(&pending)),
    )
    .await
    .expect("no hang while Redis is down");
    assert_eq!(during.error_code(), Some(-32603), "{during:?}");
    assert_eq!(effects.load(Ordering::SeqCst), 1);
    // Redis comes back with what it acknowledged (AOF): the old state still
    // reads its outcome, and the pending one runs once.
    redis.restart().await;
    let mut resumed = None;
    for _ in 0..100 {
        let e = b.retry_tool("pay", json!({}), yes(), Some(&state)).await;
        if e.outcome.is_ok() {
            resumed = Some(e);
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        resumed.expect("service resumes by itself").text(),
        Some("payment #1")
    );
    let now = b.retry_tool("pay", json!({}), yes(), Some(&pending)).await;
    assert_eq!(now.text(), Some("payment #2"), "{now:?}");
    let dup = a.retry_tool("pay", json!({}), yes(), Some(&pending)).await;
    assert_eq!(dup.text(), Some("payment #2"));
    assert_eq!(effects.load(Ordering::SeqCst), 2);
}

/// Replica A is killed (its whole runtime torn down, as a process dies)
/// inside a guarded leg, after the effect: a duplicate on replica B waits,
/// then reads "outcome unknown" once A's lease lapses — never a second run.
#[test]
fn a_replica_killed_inside_a_guarded_leg_leaves_outcome_unknown() {
    let main = tokio::runtime::Runtime::new().unwrap();
    let redis = main.block_on(RedisServer::start());
    let prefix = prefix();
    let effects = Arc::new(AtomicU64::new(0));
    let started = Arc::new(tokio::sync::Notify::new());
    let limits = CallLimits::default()
        .lease(Duration::from_millis(300))
        .recheck(Duration::from_millis(100));
    let wedge_server = |effects: Arc<AtomicU64>, started: Arc<tokio::sync::Notify>, store| {
        let wedge = move |ctx: Ctx| {
            let (effects, started) = (Arc::clone(&effects), Arc::clone(&started));
            async move {
                ctx.ask(Elicit::<Confirm>::form("Go?").key("go")).await?;
                effects.fetch_add(1, Ordering::SeqCst);
                started.notify_one();
                std::future::pending::<()>().await;
                Ok::<_, ToolError>("unreachable".to_owned())
            }
        };
        Server::builder("fleet", "1.0.0")
            .keys(KeyRing::parse("k1:HJwshgyxYHGHo34Km8vjEsH8_OYqBA7Ocx6guZcSytQ").unwrap())
            .replay_store(Arc::new(store))
            .multi_instance()
            .call_limits(limits)
            .tool(ToolDef::new("wedge", "Never ends", wedge).idempotent_retry())
            .build()
            .unwrap()
    };
    let go = json!({"go": {"action": "accept", "content": {"ok": true}}});
    // Replica A, on a runtime of its own.
    let replica_a = tokio::runtime::Runtime::new().unwrap();
    let state = replica_a.block_on({
        let (url, prefix, effects, started, go) = (
            redis.url(),
            prefix.clone(),
            Arc::clone(&effects),
            Arc::clone(&started),
            go.clone(),
        );
        async move {
            let store = RedisReplayStore::connect(&url, RedisOptions::new().prefix(prefix))
                .await
                .unwrap();
            let a = Arc::new(TestClient::new(wedge_server(
                effects,
                Arc::clone(&started),
                store,
            )));
            let r1 = a.call_tool("wedge", json!({})).await;
            let state = r1.request_state().unwrap().to_owned();
            let retry = Arc::clone(&a);
            let sent = state.clone();
            tokio::spawn(
                async move { retry.retry_tool("wedge", json!({}), go, Some(&sent)).await },
            );
            started.notified().await;
            state
        }
    });
    // SIGKILL, in process: every task of replica A, its lease renewal
    // included, is gone at once.
    replica_a.shutdown_background();
    let duplicate = main.block_on(async {
        let store = RedisReplayStore::connect(&redis.url(), RedisOptions::new().prefix(prefix))
            .await
            .unwrap();
        let b = TestClient::new(wedge_server(
            Arc::clone(&effects),
            Arc::clone(&started),
            store,
        ));
        b.retry_tool("wedge", json!({}), go, Some(&state)).await
    });
    assert_eq!(
        duplicate.error_code(),
        Some(codes::OUTCOME_UNKNOWN),
        "{duplicate:?}"
    );
    assert_eq!(
        effects.load(Ordering::SeqCst),
        1,
        "the effect ran once, on replica A"
    );
    drop(redis);
}
