//! Transports: [`stdio`] (one JSON message per line) and [`http`] (Streamable
//! HTTP), served by tern's own accept loop ([`accept`]).

pub mod accept;
pub mod forwarded;
pub mod http;
pub mod stdio;
