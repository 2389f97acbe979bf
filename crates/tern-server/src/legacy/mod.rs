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
pub(crate) mod http;
pub(crate) mod live;
pub(crate) mod session;

use std::time::Duration;

pub(crate) use session::{Session, Sink};

/// Default time a 2025 client has to answer one server-to-client request: 5
/// minutes (a person may be filling in a form).
pub const DEFAULT_QUESTION_TIMEOUT: Duration = Duration::from_secs(300);
/// Default number of HTTP legacy sessions held at once: 1,024.
pub const DEFAULT_MAX_SESSIONS: usize = 1024;
/// Default number of HTTP legacy sessions one caller holds: 64.
pub const DEFAULT_MAX_SESSIONS_PER_CALLER: usize = 64;
/// Default idle time after which an HTTP legacy session expires: 30 minutes.
pub const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// How a server serves 2025 clients; see the module docs for what the
/// defaults mean. Set with [`crate::ServerBuilder::legacy`]; turned off with
/// [`crate::ServerBuilder::modern_only`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct LegacyOptions {
    /// Time to answer one server-to-client request.
    pub question_timeout: Duration,
    /// HTTP sessions held at once.
    pub max_sessions: usize,
    /// HTTP sessions one caller (its principal, else its peer address)
    /// holds: default 64. A caller at its share that opens another session
    /// ends its own least recently used one; it never refuses anyone else.
    pub max_sessions_per_caller: usize,
    /// Idle time after which an HTTP session expires.
    pub session_idle: Duration,
    /// How often the server pings the client; `None` (the default): never.
    pub ping_interval: Option<Duration>,
}

impl Default for LegacyOptions {
    fn default() -> Self {
        Self {
            question_timeout: DEFAULT_QUESTION_TIMEOUT,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_sessions_per_caller: DEFAULT_MAX_SESSIONS_PER_CALLER,
            session_idle: DEFAULT_SESSION_IDLE,
            ping_interval: None,
        }
    }
}

impl LegacyOptions {
    /// Sets the time to answer one server-to-client request.
    #[must_use]
    pub fn question_timeout(mut self, timeout: Duration) -> Self {
        self.question_timeout = timeout;
        self
    }

    /// Sets the number of HTTP sessions held at once (at least 1).
    #[must_use]
    pub fn max_sessions(mut self, max: usize) -> Self {
        self.max_sessions = max.max(1);
        self
    }

    /// Sets [`Self::max_sessions_per_caller`] (at least 1).
    #[must_use]
    pub fn max_sessions_per_caller(mut self, max: usize) -> Self {
        self.max_sessions_per_caller = max.max(1);
        self
    }

    /// Sets the idle time after which an HTTP session expires.
    #[must_use]
    pub fn session_idle(mut self, idle: Duration) -> Self {
        self.session_idle = idle;
        self
    }

    /// Pings the client every `interval` (at least 10 ms); a ping left
    /// unanswered that long closes the session as stale. Over HTTP the
    /// pings go on the session's standalone `GET` stream, while it is open.
    #[must_use]
    pub fn ping_interval(mut self, interval: Duration) -> Self {
        self.ping_interval = Some(interval.max(Duration::from_millis(10)));
        self
    }
}

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
