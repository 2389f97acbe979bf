//! One caller's share of a resource the whole server holds a cap on (listen
//! streams, SSE responses, requests in flight): a count per key, taken and
//! given back with a slot, so one caller at its share cannot lock others out
//! of what is left below the server-wide cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::principal::Principal;

/// Counts per caller.
#[derive(Debug, Default)]
pub(crate) struct Shares(Mutex<HashMap<Arc<str>, usize>>);

/// One caller's slot; given back when dropped.
#[derive(Debug)]
pub(crate) struct ShareSlot {
    shares: Arc<Shares>,
    key: Arc<str>,
}

impl Shares {
    /// A slot for `key`, or `None` when it already holds `max`.
    pub(crate) fn take(self: &Arc<Self>, key: &str, max: usize) -> Option<ShareSlot> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.get(key).copied().unwrap_or(0) >= max {
            return None;
        }
        let key: Arc<str> = Arc::from(key);
        *map.entry(Arc::clone(&key)).or_insert(0) += 1;
        Some(ShareSlot {
            shares: Arc::clone(self),
            key,
        })
    }
}

impl Drop for ShareSlot {
    fn drop(&mut self) {
        let mut map = self.shares.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

/// Whose share a request counts against: its authenticated principal, else
/// the anonymous peer (an HTTP client's address, `stdio`); `None` when the
/// transport names neither (all such callers then share the server-wide
/// cap only).
pub(crate) fn caller_key(principal: &Principal, peer: Option<&str>) -> Option<String> {
    match (principal.id(), peer) {
        (Some(id), _) => Some(format!("principal:{id}")),
        (None, Some(peer)) => Some(format!("peer:{peer}")),
        (None, None) => None,
    }
}
