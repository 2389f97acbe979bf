//! How a server serves 2025 clients ([`LegacyOptions`]): set on the
//! builder, read by the sessions. Below both (a leaf but for `Duration`).

use std::time::Duration;

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
