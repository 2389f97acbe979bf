//! Fleet mode (the `fleet` feature): gateway replicas behind a load
//! balancer, each with the same servers file and key ring. What must be
//! shared is: the key ring seals the relayed `requestState`s and keys the
//! list cursors and task ids (any replica continues a round, pages a list,
//! polls a task), the replay store of `dedupe` upstreams lives in Redis (a
//! duplicate retry through another replica finds the first one's claim),
//! and the lists do not vary per replica — a down upstream's entries stay
//! listed (as it last listed them) and their calls fail fast with
//! `data.retryAfterMs`. A call to a 2025 upstream held for its retry
//! ([`crate::bridge`]) stays on the replica that holds the upstream
//! request; a retry reaching another replica is handed to it over Redis
//! ([`RedisHandoff`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), String> {
//! use tern_gateway::{GatewayOptions, fleet};
//!
//! let options = fleet::options(GatewayOptions::default(), "redis://127.0.0.1:6379", None).await?;
//! assert!(options.fleet);
//! # Ok(()) }
//! ```

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tern_protocol::error::ErrorObject;
use tern_redis::{RedisOptions, RedisReplayStore};
use tern_server::replay::BoxFuture;

use crate::bridge::Handoff;
use crate::gateway::GatewayOptions;

/// The key prefix of the gateway's records in Redis (apart from a tern
/// server's own).
pub const PREFIX: &str = "tern-gateway";

/// `options` in fleet mode, with the replay store in the Redis at `url`
/// (`redis://` or `rediss://`, trusting `ca_file` when given).
///
/// # Errors
/// Redis cannot be reached, or the URL is not one.
pub async fn options(
    options: GatewayOptions,
    url: &str,
    ca_file: Option<&Path>,
) -> Result<GatewayOptions, String> {
    let mut redis = RedisOptions::new().prefix(PREFIX);
    if let Some(ca) = ca_file {
        redis = redis.ca_file(ca);
    }
    let store = RedisReplayStore::connect(url, redis.clone())
        .await
        .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
    let handoff = RedisHandoff::connect(url, &redis)
        .await
        .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
    Ok(options
        .replay_store(Arc::new(store))
        .handoff(Arc::new(handoff))
        .fleet(true))
}

/// Held calls handed between replicas over Redis pub/sub: each replica
/// listens on `tern-gateway:bridge:REPLICA`; a retry of a call another
/// replica holds is published there with the name of a reply channel the
/// forwarding replica subscribed to first, and the holder publishes the
/// outcome on it. No replica listening: published again for a few seconds
/// (the holder may be subscribing again), then the holder is taken as gone
/// and its held call with it, answered `-32602`; no outcome within the
/// wait: "outcome unknown", never a second send that could be heard. A
/// retry cancelled at the forwarding replica before its outcome came is
/// recalled (`{"recall": reply}`): the holder drops the resumed call.
pub struct RedisHandoff {
    client: redis::Client,
    conn: redis::aio::ConnectionManager,
    replica: String,
}

impl std::fmt::Debug for RedisHandoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisHandoff")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

/// How long a retry is published again while no replica hears it: longer
/// than a holder's longest pause between two subscriptions (2 s, then the
/// time to connect), short enough that a replica truly gone is said soon.
const RESUBSCRIBING: Duration = Duration::from_secs(4);

/// A forwarded retry still awaiting its outcome: dropped armed, it
/// publishes `{"recall": reply}` to the holder, which drops the resumed
/// call (cancelled upstream, as a retry cancelled at the holder is).
struct Recall {
    /// `None`: disarmed.
    conn: Option<redis::aio::ConnectionManager>,
    to: String,
    reply: String,
}

impl Drop for Recall {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (to, message) = (
            std::mem::take(&mut self.to),
            json!({"recall": self.reply}).to_string(),
        );
        runtime.spawn(async move {
            hand_on(&mut conn, &to, message, "a cancelled retry's recall").await;
        });
    }
}

/// Publishes `message` on `to` once, a failure logged as `what` not handed
/// on (a message nobody awaits the answer of).
async fn hand_on(conn: &mut redis::aio::ConnectionManager, to: &str, message: String, what: &str) {
    let sent: Result<i64, _> = redis::cmd("PUBLISH")
        .arg(to)
        .arg(message)
        .query_async(conn)
        .await;
    if let Err(e) = sent {
        tracing::warn!(error = %e, "{what} was not handed on");
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn channel(replica: &str) -> String {
    format!("{PREFIX}:bridge:{replica}")
}

fn random_id() -> String {
    let mut id = [0u8; 16];
    // The operating system's random source; without it no id is safe.
    getrandom::fill(&mut id).expect("the operating system's random source");
    URL_SAFE_NO_PAD.encode(id)
}

fn unknown(why: impl std::fmt::Display) -> ErrorObject {
    ErrorObject::new(
        tern_server::error::codes::OUTCOME_UNKNOWN,
        format!(
            "The retry could not be handed to the gateway replica holding its call ({why}); the outcome is unknown"
        ),
    )
}

impl RedisHandoff {
    /// A hand-off through the Redis at `url`, under a new random replica id.
    ///
    /// # Errors
    /// Redis cannot be reached, or the URL is not one.
    pub async fn connect(
        url: &str,
        options: &RedisOptions,
    ) -> Result<Self, tern_redis::ConnectError> {
        let client = tern_redis::open_client(url, options)?;
        let conn = tern_redis::open_connection(url, options).await?;
        Ok(Self {
            client,
            conn,
            replica: random_id(),
        })
    }
}

impl Handoff for RedisHandoff {
    fn replica(&self) -> &str {
        &self.replica
    }

    fn forward(
        &self,
        replica: &str,
        request: Value,
        wait: Duration,
    ) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        let client = self.client.clone();
        let mut conn = self.conn.clone();
        let to = channel(replica);
        Box::pin(async move {
            let reply = format!("{PREFIX}:bridge:reply:{}", random_id());
            let mut pubsub = client.get_async_pubsub().await.map_err(unknown)?;
            pubsub.subscribe(&reply).await.map_err(unknown)?;
            let message = json!({"reply": reply, "request": request}).to_string();
            // From here, dropped (the client cancelled its retry, or went)
            // before the outcome came, the holder is told to drop the
            // resumed call, as a retry cancelled at the holder drops it.
            let mut recall = Recall {
                conn: Some(conn.clone()),
                to: to.clone(),
                reply: reply.clone(),
            };
            // Heard once, never again: a second copy would resume the call
            // twice. A failed publish leaves the call held, so the client's
            // next retry of the same state still resumes it. Heard by no
            // one, it may be the holder between two subscriptions (its
            // connection to Redis went and is made again, within its
            // backoff): published again, which no one can hear twice, for
            // at most `RESUBSCRIBING`.
            let heard_by = tokio::time::Instant::now() + RESUBSCRIBING.min(wait);
            let mut pause = Duration::from_millis(50);
            loop {
                let listening: i64 = redis::cmd("PUBLISH")
                    .arg(&to)
                    .arg(&message)
                    .query_async(&mut conn)
                    .await
                    .map_err(unknown)?;
                if listening > 0 {
                    break;
                }
                if tokio::time::Instant::now() + pause > heard_by {
                    // Heard by no one: nothing to recall.
                    recall.conn = None;
                    return Err(ErrorObject::invalid_params(
                        "Invalid or expired requestState: the gateway replica holding the call is gone; it was not repeated",
                    ));
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            let mut messages = pubsub.into_on_message();
            match tokio::time::timeout(wait, messages.next()).await {
                Ok(Some(m)) => {
                    // The outcome came: the holder is done with the call.
                    recall.conn = None;
                    let payload: String = m.get_payload().map_err(unknown)?;
                    serde_json::from_str(&payload).map_err(unknown)
                }
                // No outcome: the client is told "unknown" and the holder to
                // drop the call (the recall, on the way out).
                Ok(None) => Err(unknown("the reply channel closed")),
                Err(_) => Err(unknown("no answer in time")),
            }
        })
    }

    fn serve(&self, serve: Arc<dyn Fn(Value) -> BoxFuture<'static, Value> + Send + Sync>) {
        let client = self.client.clone();
        let conn = self.conn.clone();
        let mine = channel(&self.replica);
        // The forwarded retries being served, by reply channel, for their
        // recall.
        let running: Arc<Mutex<HashMap<String, tokio::task::AbortHandle>>> = Arc::default();
        tokio::spawn(async move {
            let mut backoff = Duration::from_millis(50);
            loop {
                let subscribed = match client.get_async_pubsub().await {
                    Ok(mut pubsub) => match pubsub.subscribe(&mine).await {
                        Ok(()) => Ok(pubsub),
                        Err(e) => Err(e),
                    },
                    Err(e) => Err(e),
                };
                match subscribed {
                    Ok(pubsub) => {
                        backoff = Duration::from_millis(50);
                        let mut messages = pubsub.into_on_message();
                        while let Some(m) = messages.next().await {
                            let Ok(payload) = m.get_payload::<String>() else {
                                continue;
                            };
                            let Ok(message) = serde_json::from_str::<Value>(&payload) else {
                                continue;
                            };
                            if let Some(reply) = message["recall"].as_str() {
                                if let Some(resuming) = lock(&running).remove(reply) {
                                    tracing::info!(
                                        "a forwarded retry was cancelled: its resumed call dropped"
                                    );
                                    resuming.abort();
                                }
                                continue;
                            }
                            let Some(reply) = message["reply"].as_str().map(str::to_owned) else {
                                continue;
                            };
                            let serve = Arc::clone(&serve);
                            let mut conn = conn.clone();
                            let done = Arc::clone(&running);
                            let key = reply.clone();
                            let mut table = lock(&running);
                            let resuming = tokio::spawn(async move {
                                let outcome = serve(message["request"].clone()).await.to_string();
                                lock(&done).remove(&reply);
                                hand_on(&mut conn, &reply, outcome, "a held call's outcome").await;
                            });
                            table.insert(key, resuming.abort_handle());
                        }
                        tracing::warn!(
                            "the hand-off channel's connection closed; subscribing again"
                        );
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot subscribe to the hand-off channel");
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        });
    }
}
