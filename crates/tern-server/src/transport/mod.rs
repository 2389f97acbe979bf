//! Transports: [`stdio`] (one JSON message per line) and [`http`] (Streamable HTTP).

pub mod http;
pub mod stdio;
