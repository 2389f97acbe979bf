//! Caching hints of a kind of result (`ttlMs`, `cacheScope`): set on the
//! builder, sent by the list and read methods. A leaf.

use std::time::Duration;

use tern_protocol::result::CacheScope;

/// Caching hints for a kind of result (`ttlMs`, `cacheScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHints {
    /// How long a client may reuse the result, in milliseconds.
    pub ttl_ms: u64,
    /// Who may share it.
    pub scope: CacheScope,
}

impl CacheHints {
    /// Hints.
    pub fn new(ttl: Duration, scope: CacheScope) -> Self {
        Self {
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            scope,
        }
    }
}
