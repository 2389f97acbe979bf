//! Tests of `tern-redis` against a real `redis-server` on loopback (the test
//! script installs it from Debian's packages).

#![allow(unreachable_pub, reason = "items of the test crate's modules")]
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]

mod example;
mod replay;
mod tasks;
mod tls;
