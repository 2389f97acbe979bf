//! Transports: [`stdio`] (one JSON message per line).

pub mod stdio;
