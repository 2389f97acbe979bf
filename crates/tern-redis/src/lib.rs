//! `tern-redis`: Redis backends for tern servers running as several replicas.
//!
//! What replicas must share lives in Redis: the replay / idempotency store that
//! makes single-use and exactly-once MRTR legs hold across processes, the task
//! store of the Tasks extension, and the subscription bus that fans
//! `list_changed` and `resources/updated` notifications out to every replica.
//!
//! Status: reserved. It is filled when tern scales past one process.
