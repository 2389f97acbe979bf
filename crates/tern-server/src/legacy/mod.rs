//! Two eras, one handler (docs/design.md, "Two eras, one handler"; spec:
//! Versioning and Compatibility › Backward Compatibility with
//! Initialization-Based Versions): a tern server also serves
//! 2025-11-25 clients (and 2025-06-18, 2025-03-26), with the same handlers.
//!
//! A client that opens with `initialize` gets a *legacy session*: the stdio
//! process, or an HTTP session named by `Mcp-Session-Id`. On it, each request
//! is rewritten into the modern request it means (the session's version,
//! capabilities, client info and log level go into `_meta`) and served by the
//! same dispatcher under the engine's *await, live* strategy
//! (`live`): every question a handler asks becomes a real server-to-client
//! request (`elicitation/create`, `sampling/createMessage`, `roots/list`) on
//! the session — over HTTP on the originating POST's SSE stream — and the
//! reply wakes the still-running handler, for any number of rounds. Results
//! are downgraded to the 2025 schema (`downgrade`): no `resultType`,
//! `ttlMs`, `cacheScope` or `serverInfo` `_meta`.
//!
//! | rule | default |
//! |---|---|
//! | time to answer one server-to-client request | 5 min ([`DEFAULT_QUESTION_TIMEOUT`]); then the call ends with [`crate::error::codes::QUESTION_TIMEOUT`] |
//! | HTTP sessions held at once | 1,024 ([`DEFAULT_MAX_SESSIONS`]); more `initialize`s get 503 |
//! | HTTP sessions one caller (principal, else peer address) holds | 64 ([`DEFAULT_MAX_SESSIONS_PER_CALLER`]); its next `initialize` ends its own least recently used session |
//! | a session's standalone `GET` stream | one at a time (409), and one change forwarder, ended with the stream; over HTTP the stream takes an SSE slot of the caller's share and of the server's cap (503 + `Retry-After`) |
//! | HTTP session idle time | 30 min ([`DEFAULT_SESSION_IDLE`]); then 404 |
//! | server-to-client `ping` | off; [`LegacyOptions::ping_interval`] sends one that often (on stdio, and over HTTP on the session's open `GET` stream); one unanswered for the interval closes the session (HTTP: 404 from then on; stdio: the server stops serving) |
//!
//! A question the session cannot receive (its `initialize` did not declare
//! the capability) fails the call with
//! [`crate::error::codes::QUESTION_UNDELIVERABLE`]: there is no `-32021` in
//! 2025, and the call never proceeds as if the user had agreed.
//!
//! HTTP sessions live in the process that minted them: behind a load balancer
//! legacy clients need sticky routing on `Mcp-Session-Id` (modern requests do
//! not).

pub(crate) mod downgrade;
#[cfg(feature = "http")]
pub(crate) mod http;
pub(crate) mod live;
pub(crate) mod session;

pub(crate) use session::{Session, Sink};

pub(crate) mod options;

pub use options::{
    DEFAULT_MAX_SESSIONS, DEFAULT_MAX_SESSIONS_PER_CALLER, DEFAULT_QUESTION_TIMEOUT,
    DEFAULT_SESSION_IDLE, LegacyOptions,
};

/// The params of `request` carry the modern `_meta` version key (Versioning
/// and Compatibility: such a request is served statelessly, whatever its
/// method).
pub(crate) fn has_modern_meta(params: Option<&serde_json::value::RawValue>) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(rename = "_meta", default)]
        meta: Option<MetaProbe>,
    }
    #[derive(serde::Deserialize)]
    struct MetaProbe {
        #[serde(rename = "io.modelcontextprotocol/protocolVersion", default)]
        version: Option<serde::de::IgnoredAny>,
    }
    params
        .and_then(|raw| serde_json::from_str::<Probe>(raw.get()).ok())
        .and_then(|p| p.meta)
        .is_some_and(|m| m.version.is_some())
}
