//! Transports: [`stdio`] (one JSON message per line) and [`http`] (Streamable
//! HTTP), served by tern's own accept loop ([`accept`]).

#[cfg(feature = "http")]
pub mod accept;
#[cfg(feature = "http")]
pub mod forwarded;
#[cfg(feature = "http")]
pub mod http;
pub mod stdio;
