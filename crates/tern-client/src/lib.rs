//! `tern-client`: call Model Context Protocol (2026-07-28) servers.
//!
//! A [`Client`] sends every request with the full `_meta` (version, the
//! capabilities its handlers can honour, `clientInfo`), decodes results by
//! method and `resultType`, and drives MRTR for you: when a server answers
//! with questions, the installed handlers answer them (concurrently), and
//! the call is retried with a new id, the answers for the keys asked, and the
//! `requestState` exactly as received — within a bound on rounds (10) and
//! time (10 min). Manual mode ([`Client::call_tool_once`],
//! [`Client::get_prompt_once`], [`Client::read_resource_once`]) hands back a
//! serialisable [`PendingRound`] instead, which [`Client::resume`] retries
//! from any process. Answers given in advance ([`Presets`]) are bound to the
//! question they answer. Everything read is bounded ([`Limits`]: 16 MiB per
//! response body or SSE event, 1,000 pages and 100,000 items per list).
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
//! Features (on by default; the core is always built: the client, MRTR
//! rounds, tasks, handlers, limits, [`transport::stdio`], 2025-11-25
//! servers over stdio):
//!
//! | feature | adds | pulls |
//! |---|---|---|
//! | `http` | `transport::http` (Streamable HTTP over HTTPS), `tls`, 2025-11-25 HTTP sessions | hyper, rustls, webpki-roots |
//! | `auth` (implies `http`) | `auth`: the OAuth 2.1 client (discovery, registration, PKCE, refresh) | url |
//!
//! A stdio-only client: `tern-client = { version = "0.1", default-features
//! = false }`. Stability: pre-1.0.

// The floors, lowest first (a module uses only floors below its own;
// `tests::layers` holds them): error, limits, future, tls, headers →
// handler, preset → auth → transport → legacy → client.
#[cfg(feature = "auth")]
pub mod auth;
pub mod client;
pub mod error;
mod future;
pub mod handler;
pub(crate) mod headers;
pub mod legacy;
pub mod limits;
pub mod preset;
#[cfg(feature = "http")]
pub mod tls;
pub mod transport;

pub use client::{
    Call, CallOptions, Client, ClientBuilder, Completed, PendingRound, Round, SkillFile,
    SkillListing, Started, Subscription, TaskFn, TaskHandle,
};
pub use client::{DEFAULT_POLL, MAX_POLL, MAX_POLL_FAILURES, MIN_POLL};
pub use error::{ClientError, ErrorKind};
pub use handler::{Elicitation, HandlerError, Question, Roots, Sampling, StaticRoots};
pub use headers::param_headers;
pub use limits::{Limit, Limits};
pub use preset::{PresetError, Presets};
