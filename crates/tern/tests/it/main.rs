//! Tests of the `tern` command and its demo server: every demo tool's accept,
//! decline and cancel paths in process, the binary over stdio, and the
//! client subcommands with and without a terminal.

#![allow(unreachable_pub, reason = "items of the test crate's modules")]
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]
#![allow(
    clippy::needless_pass_by_value,
    clippy::items_after_statements,
    reason = "test code reads best with values passed and helpers declared where used"
)]

mod audit;
mod await_demo;
mod cli;
#[cfg(feature = "fleet")]
mod cluster;
mod demo;
mod demo_tasks;
#[cfg(feature = "sqlite")]
mod durable;
mod fake;
mod features;
mod fleet;
#[cfg(feature = "fleet")]
mod fleet_mode;
mod gateway;
mod gateway_bridge;
#[cfg(feature = "fleet")]
mod gateway_fleet;
mod gateway_peers;
mod gateway_reload;
mod hostile;
mod layers;
mod limits;
mod listen;
mod login;
#[cfg(feature = "otel")]
mod otel;
mod park;
mod peers2025;
mod process;
mod served;
mod skills;
mod skills_ts;
mod terminal;
