//! The engine of tools, prompts and resources (docs/design.md, "The stateless
//! engine", "One leg runner, three ways of asking", "Exactly once"): one leg
//! runner for every method, the ways a question reaches the client, the
//! sealed payload, and exactly-once for guarded legs.
//!
//! | module | what it holds |
//! |---|---|
//! | `runner` | the one leg runner: opens the state, checks bindings and limits, merges answers, applies the replay policy, runs the handler, seals or finishes |
//! | [`strategy`] | how a question reaches the client: *suspend* (MRTR) or *await* (an [`AnswerSource`]: a task, a live session) |
//! | `payload` | what a `requestState` carries, versioned |
//! | `guard` | guarded legs: the claim, the server-owned run, leases and duplicates |

use std::sync::Arc;
use std::time::Duration;

use tern_protocol::Implementation;
use tern_seal::Sealer;

use crate::replay::ReplayStore;

pub(crate) mod guard;
pub(crate) mod payload;
pub(crate) mod runner;
pub mod strategy;

pub use strategy::AnswerSource;

pub(crate) use crate::ids::random_bytes;
pub use crate::ids::{CallId, Clock, SystemClock};

/// Bounds of one logical call and of guarded legs, with their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CallLimits {
    /// Longest time from a call's first leg to its last: default 1 hour. A
    /// state of an older call is refused like an expired one.
    pub max_lifetime: Duration,
    /// Most rounds one call may take: default 32. The leg that would ask
    /// round 33 ends with [`crate::error::codes::CALL_LIMIT`].
    pub max_rounds: u32,
    /// Longest a guarded leg runs once claimed, whether or not its client is
    /// still there: default 60 s. Past it the leg is stopped and its outcome
    /// reads "unknown".
    pub guarded_deadline: Duration,
    /// How long a duplicate of a guarded retry waits for the first run's
    /// outcome before it gets a state-only `input_required` to come back
    /// with: default 10 s.
    pub duplicate_wait: Duration,
    /// How long a claim holds without renewal: default 15 s (renewed every
    /// third of it while the leg runs). A process that dies leaves its claim
    /// to lapse into "unknown" within this time.
    pub lease: Duration,
    /// How often a waiting duplicate re-reads the store, in case a wake-up
    /// was lost: default 1 s.
    pub recheck: Duration,
}

impl Default for CallLimits {
    fn default() -> Self {
        Self {
            max_lifetime: Duration::from_secs(3600),
            max_rounds: 32,
            guarded_deadline: Duration::from_secs(60),
            duplicate_wait: Duration::from_secs(10),
            lease: Duration::from_secs(15),
            recheck: Duration::from_secs(1),
        }
    }
}

impl CallLimits {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Self::max_lifetime`].
    #[must_use]
    pub fn max_lifetime(mut self, lifetime: Duration) -> Self {
        self.max_lifetime = lifetime;
        self
    }

    /// Sets [`Self::max_rounds`] (at least 1).
    #[must_use]
    pub fn max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = rounds.max(1);
        self
    }

    /// Sets [`Self::guarded_deadline`].
    #[must_use]
    pub fn guarded_deadline(mut self, deadline: Duration) -> Self {
        self.guarded_deadline = deadline;
        self
    }

    /// Sets [`Self::duplicate_wait`].
    #[must_use]
    pub fn duplicate_wait(mut self, wait: Duration) -> Self {
        self.duplicate_wait = wait;
        self
    }

    /// Sets [`Self::lease`] (at least 3 ms, so it can be renewed).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(3));
        self
    }

    /// Sets [`Self::recheck`].
    #[must_use]
    pub fn recheck(mut self, every: Duration) -> Self {
        self.recheck = every.max(Duration::from_millis(1));
        self
    }
}

/// How far a replica's clock may be off another's: a replay record outlives
/// its state's sealed expiry by this much (the opener's own allowance).
pub const CLOCK_SKEW: Duration = tern_seal::MAX_CLOCK_SKEW;

impl Engine {
    /// The sealer of the current key ring.
    pub(crate) fn sealer(&self) -> Arc<Sealer> {
        Arc::clone(
            &self
                .sealer
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// What every leg of a server shares.
#[derive(Debug)]
pub(crate) struct Engine {
    /// Swapped whole by [`crate::Server::reload_keys`]; opening and sealing
    /// each read the one current at that moment.
    pub(crate) sealer: std::sync::RwLock<Arc<Sealer>>,
    pub(crate) store: Arc<dyn ReplayStore>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) limits: CallLimits,
    pub(crate) info: Arc<Implementation>,
    /// `info` written once, for the results stamped from text
    /// (a relay's).
    pub(crate) info_json: crate::json::Json,
    pub(crate) progress_interval: Duration,
    /// The task machinery (Tasks extension): its store and runners.
    pub(crate) tasks: Arc<crate::task::Tasks>,
}
