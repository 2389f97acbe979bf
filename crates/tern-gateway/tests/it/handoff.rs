//! Fleet mode's hand-off of held calls over a real `redis-server`
//! (`RedisHandoff`): a retry published while the holding replica is between
//! two subscriptions still reaches it; one no replica ever hears is refused.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tern_gateway::bridge::Handoff as _;
use tern_gateway::fleet::RedisHandoff;
use tern_protocol::error::code;
use tern_redis::RedisOptions;
use tern_test_support::redis_server::RedisServer;

use crate::gateway::bounded;

async fn handoff(redis: &RedisServer) -> RedisHandoff {
    RedisHandoff::connect(&redis.url(), &RedisOptions::new())
        .await
        .unwrap()
}

/// The holder's hand-off channel is subscribed only after the retry was
/// first published to no one (as while the holder's connection to Redis is
/// made again): the retry, published again until it is heard, reaches it
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_published_while_the_holder_subscribes_again_reaches_it_once() {
    let redis = RedisServer::start().await;
    let (holder, forwarder) = (handoff(&redis).await, handoff(&redis).await);
    let forwarding = forwarder.forward(holder.replica(), json!({"n": 1}), Duration::from_secs(20));
    let forwarding = tokio::spawn(forwarding);
    // The holder subscribes only once a publish has reached no one.
    let mut redis_conn = redis::Client::open(redis.url())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();
    bounded(async {
        loop {
            let stats: String = redis::cmd("INFO")
                .arg("commandstats")
                .query_async(&mut redis_conn)
                .await
                .unwrap();
            if stats.contains("cmdstat_publish:calls=") {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let served = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counted = Arc::clone(&served);
    holder.serve(Arc::new(move |request| {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move { json!({"echo": request}) })
    }));
    let outcome = bounded(forwarding).await.unwrap();
    assert_eq!(outcome, Ok(json!({"echo": {"n": 1}})));
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// No replica ever listens under that id: after the few seconds a holder
/// may take to subscribe again, the retry is refused `-32602`, never sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_no_replica_hears_is_refused_as_an_expired_state() {
    let redis = RedisServer::start().await;
    let forwarder = handoff(&redis).await;
    let refused = bounded(forwarder.forward("gone", json!({}), Duration::from_secs(20)))
        .await
        .unwrap_err();
    assert_eq!(refused.code, code::INVALID_PARAMS, "{refused:?}");
}

/// Sets its flag when dropped.
struct Dropped(Arc<std::sync::atomic::AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The client cancels its retry at the forwarding replica (its future
/// dropped) while the holder resumes the call: the holder is told and drops
/// the resumed call, as a retry cancelled at the holder itself is dropped
/// (its upstream request cancelled), rather than run it on for no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_retry_cancelled_at_its_replica_is_dropped_at_the_holder() {
    let redis = RedisServer::start().await;
    let (holder, forwarder) = (handoff(&redis).await, handoff(&redis).await);
    let resumed = Arc::new(tokio::sync::Notify::new());
    let dropped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (began, flag) = (Arc::clone(&resumed), Arc::clone(&dropped));
    holder.serve(Arc::new(move |_request| {
        let (began, guard) = (Arc::clone(&began), Dropped(Arc::clone(&flag)));
        Box::pin(async move {
            let _guard = guard;
            began.notify_one();
            std::future::pending::<()>().await;
            json!("never")
        })
    }));
    let forwarding = forwarder.forward(holder.replica(), json!({}), Duration::from_secs(20));
    bounded(async {
        tokio::select! {
            outcome = forwarding => panic!("the resumed call ended: {outcome:?}"),
            () = resumed.notified() => {}
        }
    })
    .await;
    // Dropped with the select.
    bounded(async {
        while !dropped.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}
