//! The library behind the `tern` command.
//!
//! It holds the built-in servers the command serves, so tests (and the
//! client's `--demo` mode) can start them in process.

pub mod demo;
