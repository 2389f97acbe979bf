//! Time and identity, below everything that needs them (the engine, the
//! stores, tasks, sessions): the [`Clock`], random bytes from the
//! operating system, the [`CallId`] of a logical call, and random hex ids.
//! A leaf: it uses nothing of the crate but its JSON helpers.

use std::fmt;
use std::time::SystemTime;

/// A source of the current time; injected in tests.
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// Fresh random bytes from the operating system.
///
/// # Panics
///
/// When the operating system's random source fails: a server that cannot mint
/// unguessable ids and nonces must not go on.
pub(crate) fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    if let Err(e) = getrandom::fill(&mut out) {
        panic!("the operating system's random source failed: {e}");
    }
    out
}

/// The id of one logical call: random, minted on its first leg, sealed into
/// every round's state, the same for every round (and every replica) of the
/// call. Use it for downstream idempotency keys ([`crate::Ctx::call_id`]).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId([u8; 16]);

impl CallId {
    /// A fresh id: the first half of SHA-256 over a per-process random
    /// secret and a counter. Unique in the process, unguessable without the
    /// secret, and without a system call per call (most calls never ask, and
    /// they still get an id).
    pub(crate) fn random() -> Self {
        use sha2::Digest as _;
        use std::sync::OnceLock;
        use std::sync::atomic::{AtomicU64, Ordering};
        static SECRET: OnceLock<[u8; 32]> = OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let secret = SECRET.get_or_init(random_bytes);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let mut hasher = sha2::Sha256::new();
        hasher.update(secret);
        hasher.update(n.to_le_bytes());
        let digest = hasher.finalize();
        let mut id = [0u8; 16];
        id.copy_from_slice(&digest[..16]);
        Self(id)
    }

    pub(crate) fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The id's bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Display for CallId {
    /// 32 lowercase hex digits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&crate::json::hex(&self.0))
    }
}

impl fmt::Debug for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CallId({self})")
    }
}

/// 128 random bits, hex: a session id or an `elicitationId`.
pub(crate) fn random_id() -> String {
    crate::json::hex(&random_bytes::<16>())
}
