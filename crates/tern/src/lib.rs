//! The library behind the `tern` command.
//!
//! It holds the built-in servers the command serves (`tern serve demo`, which
//! `--demo` starts as a child process), so tests can also start them in
//! process, and [`safe`], the one sanitiser every server-provided string
//! passes before tern shows it.

pub mod built;
pub mod demo;
#[cfg(feature = "fleet")]
pub mod demo_fleet;
pub mod imports;
pub mod ledger;
pub mod login;
pub mod safe;
pub mod serving;
pub mod telemetry;
