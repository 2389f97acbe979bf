//! Replay protection for MRTR state (DESIGN §3, spec S11): single-use states
//! and exactly-once final legs.
//!
//! Sealing makes a state unforgeable, not single-use. A tool marked
//! `single_use` redeems each state once, in a store every replica shares; a
//! tool marked `idempotent_retry` also keeps the first final result per state,
//! so a retry that arrives twice (a network break after the server answered)
//! gets the same answer and the side effect happens once.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A replay store failed (it could not be reached, say).
#[derive(Debug)]
pub struct StoreError(Box<dyn std::error::Error + Send + Sync>);

impl StoreError {
    /// Wraps the store's own error.
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(e.into())
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "replay store: {}", self.0)
    }
}

impl std::error::Error for StoreError {}

/// Where redeemed state ids and final results live: in memory for one
/// process ([`MemoryReplayStore`]), in Redis for replicas (`tern-redis`).
pub trait ReplayStore: Send + Sync + fmt::Debug + 'static {
    /// Marks `state_id` redeemed for `ttl`; `true` if this was the first
    /// redemption. Must be atomic across every process sharing the store.
    fn redeem(&self, state_id: [u8; 16], ttl: Duration) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// The final result kept for `state_id`, if any.
    fn result(&self, state_id: [u8; 16]) -> BoxFuture<'_, Result<Option<Value>, StoreError>>;

    /// Forgets the redemption of `state_id` (its leg ended without an outcome),
    /// unless a result is kept for it.
    fn release(&self, state_id: [u8; 16]) -> BoxFuture<'_, Result<(), StoreError>>;

    /// Keeps the final result of the leg that redeemed `state_id`.
    fn store_result(
        &self,
        state_id: [u8; 16],
        result: Value,
        ttl: Duration,
    ) -> BoxFuture<'_, Result<(), StoreError>>;
}

#[derive(Debug)]
struct Entry {
    expires: Instant,
    result: Option<Value>,
}

/// The in-memory store of one process, bounded in entries (default 100,000;
/// when full, expired entries are swept and new redemptions refused rather
/// than old ones forgotten, which would reopen replays).
#[derive(Debug)]
pub struct MemoryReplayStore {
    entries: Mutex<HashMap<[u8; 16], Entry>>,
    max_entries: usize,
    inserts: std::sync::atomic::AtomicUsize,
}

impl Default for MemoryReplayStore {
    fn default() -> Self {
        Self::with_capacity(100_000)
    }
}

impl MemoryReplayStore {
    /// A store holding at most `max_entries` live entries.
    pub fn with_capacity(max_entries: usize) -> Self {
        Self {
            entries: Mutex::new(HashMap::new()),
            max_entries,
            inserts: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 16], Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ReplayStore for MemoryReplayStore {
    fn redeem(&self, state_id: [u8; 16], ttl: Duration) -> BoxFuture<'_, Result<bool, StoreError>> {
        let now = Instant::now();
        let mut entries = self.lock();
        if entries.get(&state_id).is_some_and(|e| e.expires > now) {
            return Box::pin(std::future::ready(Ok(false)));
        }
        // Expired entries are swept every 4,096 redemptions, and whenever the
        // store is full.
        let count = self
            .inserts
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if count % 4096 == 4095 {
            entries.retain(|_, e| e.expires > now);
        }
        if entries.len() >= self.max_entries {
            entries.retain(|_, e| e.expires > now);
            if entries.len() >= self.max_entries {
                return Box::pin(std::future::ready(Err(StoreError::new(
                    "memory replay store is full",
                ))));
            }
        }
        entries.insert(
            state_id,
            Entry {
                expires: now + ttl,
                result: None,
            },
        );
        Box::pin(std::future::ready(Ok(true)))
    }

    fn release(&self, state_id: [u8; 16]) -> BoxFuture<'_, Result<(), StoreError>> {
        let mut entries = self.lock();
        if entries.get(&state_id).is_some_and(|e| e.result.is_none()) {
            entries.remove(&state_id);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn result(&self, state_id: [u8; 16]) -> BoxFuture<'_, Result<Option<Value>, StoreError>> {
        let now = Instant::now();
        let found = self
            .lock()
            .get(&state_id)
            .filter(|e| e.expires > now)
            .and_then(|e| e.result.clone());
        Box::pin(std::future::ready(Ok(found)))
    }

    fn store_result(
        &self,
        state_id: [u8; 16],
        result: Value,
        ttl: Duration,
    ) -> BoxFuture<'_, Result<(), StoreError>> {
        let expires = Instant::now() + ttl;
        self.lock().insert(
            state_id,
            Entry {
                expires,
                result: Some(result),
            },
        );
        Box::pin(std::future::ready(Ok(())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn redeems_once_and_keeps_results() {
        let store = MemoryReplayStore::default();
        let ttl = Duration::from_secs(60);
        assert!(store.redeem([1; 16], ttl).await.unwrap());
        assert!(!store.redeem([1; 16], ttl).await.unwrap());
        assert!(store.redeem([2; 16], ttl).await.unwrap());
        assert_eq!(store.result([1; 16]).await.unwrap(), None);
        store
            .store_result([1; 16], serde_json::json!({"ok": true}), ttl)
            .await
            .unwrap();
        assert_eq!(
            store.result([1; 16]).await.unwrap(),
            Some(serde_json::json!({"ok": true}))
        );
        assert!(!store.redeem([1; 16], ttl).await.unwrap());
    }

    #[tokio::test]
    async fn a_full_store_refuses_rather_than_forgets() {
        let store = MemoryReplayStore::with_capacity(2);
        let ttl = Duration::from_secs(60);
        assert!(store.redeem([1; 16], ttl).await.unwrap());
        assert!(store.redeem([2; 16], ttl).await.unwrap());
        assert!(store.redeem([3; 16], ttl).await.is_err());
        assert!(
            !store.redeem([1; 16], ttl).await.unwrap(),
            "old entries are not forgotten"
        );
        let short = MemoryReplayStore::with_capacity(1);
        assert!(short.redeem([1; 16], Duration::ZERO).await.unwrap());
        assert!(
            short.redeem([2; 16], ttl).await.unwrap(),
            "expired entries are swept"
        );
    }
}
