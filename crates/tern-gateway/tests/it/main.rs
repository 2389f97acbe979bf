//! Integration tests of `tern-gateway`: the gateway in front of real
//! upstream processes (this test binary re-run as a tern server on stdio,
//! `child::entry`), driven through the tern server that serves it.

#![allow(unreachable_pub, reason = "items of the test crate's modules")]
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]
#![allow(
    clippy::needless_pass_by_value,
    reason = "test code reads best with values passed"
)]

mod auth;
mod bridge;
mod child;
mod dedupe;
mod gateway;
#[cfg(feature = "fleet")]
mod handoff;
mod health;
mod layers;
mod legacy_child;
mod metrics;
mod relayed;
mod reload;
mod tasked;
