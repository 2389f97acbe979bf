//! `tern-client`: call Model Context Protocol (2026-07-28) servers.
//!
//! A [`Client`] sends every request with the full `_meta` (version, the
//! capabilities its handlers can honour, `clientInfo`), decodes results by
//! method and `resultType`, and drives MRTR for you: when a server answers
//! with questions, the installed handlers answer them (concurrently), and
//! the call is retried with a new id, the answers for the keys asked, and the
//! `requestState` exactly as received — within a bound on rounds (10) and
//! time (10 min). Manual mode ([`Client::call_tool_once`]) hands back a
//! serialisable [`PendingRound`] instead.
//!
//! ```no_run
//! # async fn run() -> Result<(), tern_client::ClientError> {
//! use tern_client::Client;
//! use tern_client::transport::stdio::ChildProcess;
//!
//! let server = ChildProcess::spawn("tern", &["serve".into(), "demo".into(), "--stdio".into()])?;
//! let client = Client::builder().build(server);
//! let tools = client.list_tools().await?;
//! println!("{} tools", tools.len());
//! # Ok(()) }
//! ```
//!
//! Transports: a child process over stdio, and Streamable HTTP (`http://`).
//! Stability: pre-1.0.

pub mod client;
pub mod error;
pub mod handler;
pub(crate) mod headers;
pub mod transport;

pub use client::{CallOptions, Client, ClientBuilder, PendingRound, Round, Subscription};
pub use error::ClientError;
pub use handler::{Elicitation, HandlerError, Question, Roots, Sampling, StaticRoots};
