//! `tern-redis`: Redis stores for tern servers running as several replicas.
//!
//! MRTR lets any replica finish a call, because everything a leg needs
//! travels in its `requestState`. What the state cannot carry is the memory
//! that a retry already ran: a duplicate of a guarded final leg (a network
//! break after the effect, the same retry reaching two replicas) must find
//! the first run's claim and outcome wherever it lands. [`RedisReplayStore`]
//! keeps the engine's replay store contract ([`tern_server::replay`]) in one
//! Redis every replica shares.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use tern_redis::{RedisOptions, RedisReplayStore};
//!
//! let store = RedisReplayStore::connect("redis://127.0.0.1:6379", RedisOptions::new()).await?;
//! let server = tern_server::Server::builder("inventory", "1.0.0")
//!     .keys(tern_server::KeyRing::parse(&std::env::var("TERN_KEYS")?)?)
//!     .replay_store(Arc::new(store))
//!     .multi_instance()
//!     .build()?;
//! # drop(server); Ok(()) }
//! ```
//!
//! Redis settings the store relies on: persistence (`appendonly yes`,
//! `appendfsync always` where an effect must never be replayed after a Redis
//! crash), `maxmemory-policy noeviction` (an evicted claim would let a
//! duplicate run again; with `noeviction` a full Redis refuses new claims
//! instead, read as "store full"). Keys carry a hash tag per caller, so a
//! Redis Cluster works too.
//!
//! [`RedisTaskStore`] keeps task records (results, questions, answers, the
//! runner's lease) in the same Redis, so `tasks/get`, `tasks/update` and
//! `tasks/cancel` work on any replica and a task whose runner died reads
//! `failed` everywhere.
//!
//! [`RedisChangeBus`] carries resource updates between replicas, so a
//! `subscriptions/listen` stream on one replica hears a change made on
//! another (task notifications follow the task store's own announcements;
//! registry `list_changed` stays per replica, see [`bus`]).
//!
//! Features: `tls` (on by default) enables `rediss://` URLs (rustls with the
//! ring provider; the system's roots, or [`RedisOptions::ca_file`]'s).
//! Stability: pre-1.0.

pub mod bus;
pub mod replay;
pub mod task;

pub use bus::RedisChangeBus;
pub use replay::{
    ConnectError, RedisOptions, RedisReplayStore, open_client, open_connection, retry_once,
};
pub use task::RedisTaskStore;

/// Installs rustls's ring provider once, for `rediss://` connections. The
/// stores call it themselves; call it before opening a `redis::Client` of
/// your own on a `rediss://` URL.
#[cfg(feature = "tls")]
pub fn install_crypto_provider() {
    // Another part of the process may have installed one already: fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}
