//! [`RedisChangeBus`]: resource updates shared by the replicas of a fleet
//! through Redis pub/sub, so a `subscriptions/listen` stream on one replica
//! hears `notifications/resources/updated` for a change made on another.
//!
//! Task status notifications (`notifications/tasks`) need no bus of their
//! own: [`crate::RedisTaskStore`] announces every record it writes, and each
//! replica's listen streams follow those announcements.
//!
//! What is **not** shared: `notifications/tools/list_changed`,
//! `prompts/list_changed` and `resources/list_changed`. A registry change
//! made at run time (`Server::add_tool`, …) changes that replica's registry
//! only, so its `list_changed` stays on that replica; a fleet changes what
//! it offers by rolling out a new version to every replica.
//!
//! Delivery is best effort, as pub/sub is: an update published while a
//! replica's subscriber is reconnecting is lost for that replica's streams.
//! After a Redis restart each replica's subscriber subscribes again by
//! itself (backing off from 50 ms to 2 s between attempts), and a publish
//! that fails on the dead connection is sent once more.

use std::fmt;

use redis::aio::ConnectionManager;
use tern_server::{Change, ChangeRelay, Changes};
use tokio::sync::broadcast;

use crate::replay::{ConnectError, RedisOptions, connect, once_more, spawn_listener};

/// The resource-update bus of a fleet: channel `P:changes`, one URI per
/// message.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use tern_redis::{RedisChangeBus, RedisOptions};
///
/// let builder = tern_server::Server::builder("inventory", "1.0.0");
/// let changes = builder.changes();
/// let bus = RedisChangeBus::connect("redis://127.0.0.1:6379", RedisOptions::new(), changes.clone())
///     .await?;
/// changes.relay_through(Arc::new(bus));
/// // Any replica's `changes.resource_updated(uri)` now reaches every replica.
/// # Ok(()) }
/// ```
pub struct RedisChangeBus {
    conn: ConnectionManager,
    channel: String,
    listener: tokio::task::JoinHandle<()>,
    forwarder: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for RedisChangeBus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisChangeBus")
            .field("channel", &self.channel)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisChangeBus {
    fn drop(&mut self) {
        self.listener.abort();
        self.forwarder.abort();
    }
}

/// A URI as published: non-empty, at most 8 KiB.
fn uri(text: &str) -> Option<String> {
    (!text.is_empty() && text.len() <= 8192).then(|| text.to_owned())
}

impl RedisChangeBus {
    /// Connects to the Redis at `url` and delivers every update it hears
    /// (from any replica, this one included) to `changes`' streams. Hand the
    /// bus to [`Changes::relay_through`] so this replica's updates are
    /// published.
    pub async fn connect(
        url: &str,
        options: RedisOptions,
        changes: Changes,
    ) -> Result<Self, ConnectError> {
        let (client, conn) = connect(url, &options).await?;
        let channel = format!("{}:changes", options.prefix);
        let (heard, mut rx) = broadcast::channel::<String>(1024);
        let listener =
            spawn_listener(client, channel.clone(), heard, uri, options.connect_timeout).await;
        let forwarder = tokio::spawn(async move {
            loop {
                match rx.recv().await {
                    Ok(uri) => changes.deliver(Change::ResourceUpdated(uri)),
                    Err(broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "resource updates dropped: the bus lagged");
                    }
                    Err(broadcast::error::RecvError::Closed) => return,
                }
            }
        });
        Ok(Self {
            conn,
            channel,
            listener,
            forwarder,
        })
    }
}

impl ChangeRelay for RedisChangeBus {
    fn publish(&self, uri: &str) {
        let conn = self.conn.clone();
        let channel = self.channel.clone();
        let owned = uri.to_owned();
        let publish = async move {
            let uri = owned;
            // Sent once more after a connection error (the first command
            // after a Redis restart fails on the dead socket): an update
            // heard twice only wakes a listener twice; one never sent is
            // lost for every replica.
            let sent: redis::RedisResult<i64> = once_more(|| {
                let mut conn = conn.clone();
                let (channel, uri) = (channel.clone(), uri.clone());
                async move {
                    redis::cmd("PUBLISH")
                        .arg(channel)
                        .arg(uri)
                        .query_async(&mut conn)
                        .await
                }
            })
            .await;
            if let Err(e) = sent {
                tracing::warn!(error = %e, %uri, "resource update not published");
            }
        };
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(publish);
        } else {
            tracing::warn!(uri, "resource update not published: no runtime");
        }
    }
}
