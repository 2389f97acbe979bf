//! [`Limits`]: how much a client reads and how long it keeps at one call, so
//! that a broken or hostile server gets a clear error instead of a client
//! that grows without bound or loops for ever.
//!
//! | limit | default | reached |
//! |---|---|---|
//! | [`Limits::max_response_bytes`] | 16 MiB | a JSON response body, or one stdio line |
//! | [`Limits::max_event_bytes`] | 16 MiB | one SSE event |
//! | [`Limits::max_pages`] | 1,000 | pages read by one `list_*` call |
//! | [`Limits::max_items`] | 100,000 | items collected by one `list_*` call |
//! | [`Limits::max_rounds`] | 10 | MRTR rounds of one call (rule `bounded-rounds`) |
//! | [`Limits::deadline`] | 10 min | total time of one call, rounds included |

use std::time::Duration;

/// Default [`Limits::max_response_bytes`]: 16 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 << 20;
/// Default [`Limits::max_event_bytes`]: 16 MiB.
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 << 20;
/// Default [`Limits::max_pages`]: 1,000.
pub const DEFAULT_MAX_PAGES: usize = 1_000;
/// Default [`Limits::max_items`]: 100,000.
pub const DEFAULT_MAX_ITEMS: usize = 100_000;
/// Default [`Limits::max_rounds`]: 10.
pub const DEFAULT_MAX_ROUNDS: u32 = 10;
/// Default [`Limits::deadline`]: 10 minutes.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// Which limit was reached ([`crate::ErrorKind::Limit`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Limit {
    /// [`Limits::max_response_bytes`].
    ResponseBytes,
    /// [`Limits::max_event_bytes`].
    EventBytes,
    /// [`Limits::max_pages`].
    Pages,
    /// [`Limits::max_items`].
    Items,
    /// [`Limits::max_rounds`].
    Rounds,
    /// [`Limits::deadline`].
    Deadline,
}

/// The client's limits; see the [module docs](self) for the defaults.
///
/// The byte limits apply where bytes are read: a transport's own copy
/// ([`crate::transport::http::HttpTransport::with_limits`],
/// [`crate::transport::stdio::ChildProcess::spawn_with`]); the others apply
/// to the [`crate::Client`] they are given to ([`crate::ClientBuilder::limits`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limits {
    /// The most bytes of one JSON response body (HTTP) or one line (stdio).
    pub max_response_bytes: usize,
    /// The most bytes of one SSE event, field names and line ends included.
    pub max_event_bytes: usize,
    /// The most pages one `list_*` call reads before it gives up: a server
    /// that always returns `nextCursor` is stopped here.
    pub max_pages: usize,
    /// The most items one `list_*` call collects.
    pub max_items: usize,
    /// The most MRTR rounds one call may take (at least 1).
    pub max_rounds: u32,
    /// The most time one call may take, rounds included.
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_pages: DEFAULT_MAX_PAGES,
            max_items: DEFAULT_MAX_ITEMS,
            max_rounds: DEFAULT_MAX_ROUNDS,
            deadline: DEFAULT_DEADLINE,
        }
    }
}

impl Limits {
    /// [`Limits::max_response_bytes`].
    #[must_use]
    pub fn with_max_response_bytes(mut self, bytes: usize) -> Self {
        self.max_response_bytes = bytes;
        self
    }

    /// [`Limits::max_event_bytes`].
    #[must_use]
    pub fn with_max_event_bytes(mut self, bytes: usize) -> Self {
        self.max_event_bytes = bytes;
        self
    }

    /// [`Limits::max_pages`].
    #[must_use]
    pub fn with_max_pages(mut self, pages: usize) -> Self {
        self.max_pages = pages;
        self
    }

    /// [`Limits::max_items`].
    #[must_use]
    pub fn with_max_items(mut self, items: usize) -> Self {
        self.max_items = items;
        self
    }

    /// [`Limits::max_rounds`] (0 reads as 1).
    #[must_use]
    pub fn with_max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = rounds.max(1);
        self
    }

    /// [`Limits::deadline`].
    #[must_use]
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }
}
