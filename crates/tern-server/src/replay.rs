//! The replay store: what makes a guarded leg's effect happen once
//! (docs/design.md, "Exactly once"; rule `state-single-use`), in one process
//! or across replicas.
//!
//! Sealing makes a `requestState` unforgeable, not single-use. A tool, prompt
//! or resource marked `single_use` or `idempotent_retry` is *guarded*: the
//! first leg that presents a given state claims it in the store, runs in a
//! server-owned task, and stores whatever it ended with. Duplicates of that
//! retry (a network break after the server answered, a client that retried
//! twice, the same retry reaching two replicas) never run the handler again.
//!
//! # The contract
//!
//! A store keeps one record per state id:
//!
//! - [`ReplayStore::begin`] is one atomic step: if there is no live record it
//!   creates one owned by the caller, leased until `now + lease`, and answers
//!   [`Begin::First`]; otherwise it answers what the record holds:
//!   [`Begin::InFlight`] while another owner holds the lease (the same owner
//!   gets [`Begin::First`] again: a retried `begin` whose reply was lost),
//!   [`Begin::Done`] with
//!   the stored outcome, or [`Begin::Unknown`] when the owner's lease lapsed
//!   (it died, or passed its deadline) without finishing — never a second
//!   `First`.
//! - [`ReplayStore::renew`] extends the lease, only for the owner and only
//!   while the record is in flight.
//! - [`ReplayStore::finish`] stores the outcome, only for the owner and only
//!   while its lease holds; then it wakes every waiter.
//! - [`ReplayStore::changed`] resolves when a record may have changed. A
//!   notification can be lost (a store may publish over a network), so the
//!   engine also re-checks with [`ReplayStore::status`] on a slow timer.
//! - A record lives until `expires_at`, the sealed wall-clock expiry of the
//!   state it guards plus a skew allowance: past it the state no longer opens,
//!   so the record has nothing left to guard.
//! - Records are bounded in bytes — per principal, per anonymous peer and in
//!   total — and a store that is full refuses a new `begin` with
//!   [`StoreError::is_full`] rather than forget a live record (forgetting
//!   would reopen a replay).
//!
//! # How Redis keeps it
//!
//! `tern-redis`'s `RedisReplayStore` keeps each record as one string under a
//! hash tag of its scope (`SET … PXAT expires_at` inside a Lua script that
//! first reads the record and settles a lapsed lease against Redis's own
//! `TIME`), renews and finishes with scripts that check the owner before
//! they write and then `PUBLISH` the id, and counts bytes per scope in the
//! same slot; waiters subscribe to that channel and re-check on a timer.
//!
//! The first leg of a call (no state yet) cannot be guarded: there is nothing
//! to claim. Side effects belong after the first question.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use tern_protocol::error::ErrorObject;
use tokio::sync::watch;

use crate::ids::{Clock, SystemClock};

pub use crate::future::BoxFuture;

/// The id of a sealed state (fresh for every round's token).
pub type StateId = [u8; 16];

/// Who runs a claimed leg: a random id per run, so that only that run can
/// renew or finish the record.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Owner([u8; 16]);

impl Owner {
    /// A fresh random owner.
    ///
    /// # Panics
    ///
    /// When the operating system's random source fails.
    pub fn random() -> Self {
        Self(crate::ids::random_bytes())
    }

    /// An owner with these bytes (tests, and stores that persist owners).
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        Self(bytes)
    }

    /// The owner's bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Debug for Owner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Owner({})", hex(&self.0[..4]))
    }
}

/// Whose share of the store a record counts against: an authenticated
/// principal (by a digest, never the raw identity) or an anonymous peer.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Scope {
    key: Arc<str>,
    anonymous: bool,
}

impl Scope {
    /// The scope of an authenticated principal: a SHA-256 digest of its id.
    pub fn principal(id: &str) -> Self {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(id.as_bytes());
        Self {
            key: format!("p{}", hex(&digest[..16])).into(),
            anonymous: false,
        }
    }

    /// The scope of an anonymous peer (its address, or one name for a stdio
    /// peer).
    pub fn anonymous(peer: &str) -> Self {
        use sha2::Digest as _;
        let digest = sha2::Sha256::digest(peer.as_bytes());
        Self {
            key: format!("a{}", hex(&digest[..16])).into(),
            anonymous: true,
        }
    }

    /// A short, stable text key (safe to use in a Redis key or a hash tag).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// An anonymous peer's scope.
    pub fn is_anonymous(&self) -> bool {
        self.anonymous
    }
}

impl fmt::Debug for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Scope({})", self.key)
    }
}

use crate::json::hex;

/// What a guarded leg ended with: what every duplicate of its retry gets.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Outcome {
    /// A JSON-RPC result (a final result, an `isError` result, or another
    /// `input_required`), serialised.
    Result(Box<RawValue>),
    /// A JSON-RPC error.
    Error(ErrorObject),
    /// The run ended without a known outcome (it panicked, or passed its
    /// deadline): the record reads [`Begin::Unknown`] from then on.
    Unknown,
}

#[derive(Serialize, Deserialize)]
enum OutcomeWire {
    #[serde(rename = "r")]
    Result(Box<RawValue>),
    #[serde(rename = "e")]
    Error(ErrorObject),
    #[serde(rename = "u")]
    Unknown,
}

impl PartialEq for Outcome {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Result(a), Self::Result(b)) => a.get() == b.get(),
            (Self::Error(a), Self::Error(b)) => a == b,
            (Self::Unknown, Self::Unknown) => true,
            _ => false,
        }
    }
}

impl Outcome {
    /// The outcome as bytes, for a store that keeps them elsewhere.
    pub fn to_bytes(&self) -> Vec<u8> {
        let wire = match self {
            Self::Result(r) => OutcomeWire::Result(r.clone()),
            Self::Error(e) => OutcomeWire::Error(e.clone()),
            Self::Unknown => OutcomeWire::Unknown,
        };
        serde_json::to_vec(&wire).unwrap_or_default()
    }

    /// Reads [`Self::to_bytes`] back.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, StoreError> {
        match serde_json::from_slice(bytes) {
            Ok(OutcomeWire::Result(r)) => Ok(Self::Result(r)),
            Ok(OutcomeWire::Error(e)) => Ok(Self::Error(e)),
            Ok(OutcomeWire::Unknown) => Ok(Self::Unknown),
            Err(e) => Err(StoreError::new(format!("stored outcome: {e}"))),
        }
    }

    /// Bytes it occupies in a store (what the bounds count).
    pub fn len(&self) -> usize {
        match self {
            Self::Result(r) => r.get().len(),
            Self::Error(e) => e.message.len() + e.data.as_ref().map_or(0, |d| d.to_string().len()),
            Self::Unknown => 0,
        }
    }

    /// It occupies no bytes ([`Self::Unknown`]).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What [`ReplayStore::begin`] found.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Begin {
    /// No live record: the caller now owns a new one and must run the leg.
    First,
    /// Another run owns the record and holds its lease.
    InFlight,
    /// The record holds this outcome.
    Done(Outcome),
    /// The record's owner died, panicked or passed its deadline without an
    /// outcome (or the outcome was too large to keep): what happened is not
    /// known, and the leg must not run again.
    Unknown,
}

/// Where a record lives: its state id, and the scope whose share it counts
/// against (a store may keep each scope apart, as Redis does with a hash tag
/// per scope).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RecordKey {
    /// The state the record guards.
    pub id: StateId,
    /// Whose share it counts against.
    pub scope: Scope,
}

impl RecordKey {
    /// A record key.
    pub fn new(id: StateId, scope: Scope) -> Self {
        Self { id, scope }
    }
}

/// One claim: what [`ReplayStore::begin`] is asked to create.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ClaimSpec {
    /// The state being redeemed.
    pub id: StateId,
    /// The run that will own the record.
    pub owner: Owner,
    /// Whose share it counts against.
    pub scope: Scope,
    /// When the record may be forgotten (the state's sealed expiry plus a
    /// skew allowance).
    pub expires_at: SystemTime,
    /// How long the owner holds the record without renewing.
    pub lease: Duration,
}

impl ClaimSpec {
    /// Where the claimed record lives.
    pub fn record(&self) -> RecordKey {
        RecordKey::new(self.id, self.scope.clone())
    }

    /// A claim.
    pub fn new(
        id: StateId,
        owner: Owner,
        scope: Scope,
        expires_at: SystemTime,
        lease: Duration,
    ) -> Self {
        Self {
            id,
            owner,
            scope,
            expires_at,
            lease,
        }
    }
}

/// A replay store failed: it could not be reached, or it is full.
#[derive(Debug)]
pub struct StoreError {
    full: bool,
    source: Box<dyn std::error::Error + Send + Sync>,
}

impl StoreError {
    /// Wraps the store's own error.
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            full: false,
            source: e.into(),
        }
    }

    /// The store refused a new record: its byte bounds are reached.
    pub fn full(why: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self {
            full: true,
            source: why.into(),
        }
    }

    /// The store is full (for this scope or in total), not broken.
    pub fn is_full(&self) -> bool {
        self.full
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.full {
            f.write_str("replay store full")
        } else {
            f.write_str("replay store failed")
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.source)
    }
}

/// Where guarded legs are claimed and their outcomes kept: in memory for one
/// process ([`MemoryReplayStore`]), in Redis for replicas (`tern-redis`). See
/// the [module docs](self) for the contract;
/// [`crate::testing::replay_store_contract`] checks it.
pub trait ReplayStore: Send + Sync + fmt::Debug + 'static {
    /// Claims `claim.id` for `claim.owner`, or reports what is there.
    /// Atomic across every process sharing the store.
    fn begin(&self, claim: ClaimSpec) -> BoxFuture<'_, Result<Begin, StoreError>>;

    /// Extends the owner's lease to `now + lease`; `false` when the caller no
    /// longer owns a record in flight (it lapsed, or was finished).
    fn renew(
        &self,
        record: &RecordKey,
        owner: Owner,
        lease: Duration,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// Stores the owner's outcome and wakes waiters; `false` when the caller
    /// no longer owns a record in flight (its lease lapsed: the record reads
    /// [`Begin::Unknown`] and stays so).
    fn finish(
        &self,
        record: &RecordKey,
        owner: Owner,
        outcome: Outcome,
    ) -> BoxFuture<'_, Result<bool, StoreError>>;

    /// What the record of `id` holds now, without claiming: `None` when there
    /// is none (never claimed, or expired).
    fn status(&self, record: &RecordKey) -> BoxFuture<'_, Result<Option<Begin>, StoreError>>;

    /// Resolves when the record of `id` may have changed. Registered when
    /// called, so a change between this call and a following
    /// [`Self::status`] still wakes it. It may also resolve spuriously, or
    /// never (a lost notification): callers re-check on a timer.
    fn changed(&self, record: &RecordKey) -> BoxFuture<'static, ()>;

    /// Every process serving the server sees this store (Redis does; memory
    /// does not). [`crate::ServerBuilder::multi_instance`] requires it.
    fn is_shared(&self) -> bool;
}

/// Byte bounds of a store, with their defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoreLimits {
    /// All records together: default 64 MiB.
    pub total_bytes: usize,
    /// The records of one authenticated principal: default 8 MiB.
    pub per_principal_bytes: usize,
    /// The records of one anonymous peer: default 1 MiB.
    pub per_anonymous_bytes: usize,
    /// The largest outcome kept; a larger one is recorded as
    /// [`Begin::Unknown`] (its first caller still gets it): default 1 MiB.
    pub max_outcome_bytes: usize,
}

/// What one record costs besides its outcome, in the bounds: 256 bytes.
pub const RECORD_OVERHEAD: usize = 256;

impl Default for StoreLimits {
    fn default() -> Self {
        Self {
            total_bytes: 64 << 20,
            per_principal_bytes: 8 << 20,
            per_anonymous_bytes: 1 << 20,
            max_outcome_bytes: 1 << 20,
        }
    }
}

impl StoreLimits {
    /// The default bounds.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Self::total_bytes`].
    #[must_use]
    pub fn total_bytes(mut self, bytes: usize) -> Self {
        self.total_bytes = bytes;
        self
    }

    /// Sets [`Self::per_principal_bytes`].
    #[must_use]
    pub fn per_principal_bytes(mut self, bytes: usize) -> Self {
        self.per_principal_bytes = bytes;
        self
    }

    /// Sets [`Self::per_anonymous_bytes`].
    #[must_use]
    pub fn per_anonymous_bytes(mut self, bytes: usize) -> Self {
        self.per_anonymous_bytes = bytes;
        self
    }

    /// Sets [`Self::max_outcome_bytes`].
    #[must_use]
    pub fn max_outcome_bytes(mut self, bytes: usize) -> Self {
        self.max_outcome_bytes = bytes;
        self
    }

    fn scope_limit(&self, scope: &Scope) -> usize {
        if scope.is_anonymous() {
            self.per_anonymous_bytes
        } else {
            self.per_principal_bytes
        }
    }
}

#[derive(Debug)]
enum RecordState {
    Running {
        owner: Owner,
        lease_until: SystemTime,
    },
    Done(Outcome),
    Unknown,
}

#[derive(Debug)]
struct Record {
    state: RecordState,
    expires_at: SystemTime,
    scope: Scope,
    bytes: usize,
}

impl Record {
    /// What the record reads at `now`: a lapsed lease is Unknown for good.
    fn settle(&mut self, now: SystemTime) -> Begin {
        self.settle_for(now, None)
    }

    /// [`Self::settle`], where `owner` reads its own live claim as `First`.
    fn settle_for(&mut self, now: SystemTime, owner: Option<Owner>) -> Begin {
        if let RecordState::Running { lease_until, .. } = self.state
            && lease_until <= now
        {
            self.state = RecordState::Unknown;
        }
        match &self.state {
            RecordState::Running { owner: held, .. } if Some(*held) == owner => Begin::First,
            RecordState::Running { .. } => Begin::InFlight,
            RecordState::Done(outcome) => Begin::Done(outcome.clone()),
            RecordState::Unknown => Begin::Unknown,
        }
    }
}

#[derive(Debug, Default)]
struct Records {
    map: HashMap<StateId, Record>,
    per_scope: HashMap<Scope, usize>,
    total: usize,
}

impl Records {
    fn forget(&mut self, id: &StateId) {
        if let Some(record) = self.map.remove(id) {
            self.uncount(&record.scope, record.bytes);
        }
    }

    fn uncount(&mut self, scope: &Scope, bytes: usize) {
        self.total = self.total.saturating_sub(bytes);
        if let Some(used) = self.per_scope.get_mut(scope) {
            *used = used.saturating_sub(bytes);
            if *used == 0 {
                self.per_scope.remove(scope);
            }
        }
    }

    fn count(&mut self, scope: &Scope, bytes: usize) {
        self.total += bytes;
        *self.per_scope.entry(scope.clone()).or_insert(0) += bytes;
    }

    fn sweep(&mut self, now: SystemTime) {
        let expired: Vec<StateId> = self
            .map
            .iter()
            .filter(|(_, r)| r.expires_at <= now)
            .map(|(id, _)| *id)
            .collect();
        for id in expired {
            self.forget(&id);
        }
    }
}

/// The in-memory store of one process: the embedded default. It keeps the
/// whole contract (bounds in bytes with [`StoreLimits`], expiry and leases
/// on the injected [`Clock`]) but only this process sees it, so
/// [`crate::ServerBuilder::multi_instance`] refuses it.
///
/// ```
/// use std::sync::Arc;
/// use tern_server::{MemoryReplayStore, Server, StoreLimits, SystemClock};
///
/// let store = MemoryReplayStore::new(StoreLimits::default(), Arc::new(SystemClock));
/// let server = Server::builder("app", "1.0.0").replay_store(Arc::new(store)).build()?;
/// # drop(server);
/// # Ok::<(), tern_server::BuildError>(())
/// ```
pub struct MemoryReplayStore {
    records: Mutex<Records>,
    limits: StoreLimits,
    clock: Arc<dyn Clock>,
    /// Bumped on every finish and lapse; waiters watch it.
    changes: watch::Sender<u64>,
}

impl fmt::Debug for MemoryReplayStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let records = self.lock();
        f.debug_struct("MemoryReplayStore")
            .field("records", &records.map.len())
            .field("bytes", &records.total)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Default for MemoryReplayStore {
    fn default() -> Self {
        Self::new(StoreLimits::default(), Arc::new(SystemClock))
    }
}

impl MemoryReplayStore {
    /// A store with these bounds, on this clock.
    pub fn new(limits: StoreLimits, clock: Arc<dyn Clock>) -> Self {
        Self {
            records: Mutex::default(),
            limits,
            clock,
            changes: watch::Sender::new(0),
        }
    }

    /// Bytes in use now (records and outcomes), for monitoring and tests.
    pub fn bytes_used(&self) -> usize {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn notify(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn begin_now(&self, claim: ClaimSpec) -> Result<Begin, StoreError> {
        let now = self.clock.now();
        let mut records = self.lock();
        if let Some(record) = records.map.get_mut(&claim.id) {
            if record.expires_at > now {
                return Ok(record.settle_for(now, Some(claim.owner)));
            }
            records.forget(&claim.id);
        }
        let fits = |r: &Records| {
            r.total + RECORD_OVERHEAD <= self.limits.total_bytes
                && r.per_scope.get(&claim.scope).copied().unwrap_or(0) + RECORD_OVERHEAD
                    <= self.limits.scope_limit(&claim.scope)
        };
        if !fits(&records) {
            records.sweep(now);
            if !fits(&records) {
                return Err(StoreError::full(format!(
                    "{} bytes in use ({} for this caller)",
                    records.total,
                    records.per_scope.get(&claim.scope).copied().unwrap_or(0)
                )));
            }
        }
        records.count(&claim.scope, RECORD_OVERHEAD);
        records.map.insert(
            claim.id,
            Record {
                state: RecordState::Running {
                    owner: claim.owner,
                    lease_until: now + claim.lease,
                },
                expires_at: claim.expires_at,
                scope: claim.scope,
                bytes: RECORD_OVERHEAD,
            },
        );
        Ok(Begin::First)
    }

    fn finish_now(&self, id: StateId, owner: Owner, outcome: Outcome) -> bool {
        let now = self.clock.now();
        let mut records = self.lock();
        let Some(record) = records.map.get_mut(&id) else {
            return false;
        };
        let _ = record.settle(now);
        let RecordState::Running { owner: held, .. } = record.state else {
            drop(records);
            self.notify();
            return false;
        };
        if held != owner {
            return false;
        }
        let scope = record.scope.clone();
        let used = records.per_scope.get(&scope).copied().unwrap_or(0);
        let extra = outcome.len();
        // An outcome too large to keep (for the record limit, the caller's
        // share or the whole store) is recorded as Unknown: the effect still
        // happened once, and no duplicate runs it again.
        let keep = !matches!(outcome, Outcome::Unknown)
            && extra <= self.limits.max_outcome_bytes
            && used + extra <= self.limits.scope_limit(&scope)
            && records.total + extra <= self.limits.total_bytes;
        let record = records
            .map
            .get_mut(&id)
            .expect("the record was found under the same lock");
        if keep {
            record.state = RecordState::Done(outcome);
            record.bytes += extra;
            records.count(&scope, extra);
        } else {
            if !matches!(outcome, Outcome::Unknown) {
                tracing::warn!(
                    bytes = extra,
                    "outcome too large to keep; duplicates read it as unknown"
                );
            }
            record.state = RecordState::Unknown;
        }
        drop(records);
        self.notify();
        true
    }
}

impl ReplayStore for MemoryReplayStore {
    fn begin(&self, claim: ClaimSpec) -> BoxFuture<'_, Result<Begin, StoreError>> {
        Box::pin(std::future::ready(self.begin_now(claim)))
    }

    fn renew(
        &self,
        record: &RecordKey,
        owner: Owner,
        lease: Duration,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let now = self.clock.now();
        let mut records = self.lock();
        let renewed = records.map.get_mut(&record.id).is_some_and(|record| {
            let _ = record.settle(now);
            match &mut record.state {
                RecordState::Running {
                    owner: held,
                    lease_until,
                } if *held == owner => {
                    *lease_until = now + lease;
                    true
                }
                _ => false,
            }
        });
        Box::pin(std::future::ready(Ok(renewed)))
    }

    fn finish(
        &self,
        record: &RecordKey,
        owner: Owner,
        outcome: Outcome,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        Box::pin(std::future::ready(Ok(
            self.finish_now(record.id, owner, outcome)
        )))
    }

    fn status(&self, record: &RecordKey) -> BoxFuture<'_, Result<Option<Begin>, StoreError>> {
        let now = self.clock.now();
        let mut records = self.lock();
        let found = records
            .map
            .get_mut(&record.id)
            .filter(|r| r.expires_at > now)
            .map(|r| r.settle(now));
        Box::pin(std::future::ready(Ok(found)))
    }

    fn changed(&self, _record: &RecordKey) -> BoxFuture<'static, ()> {
        let mut rx = self.changes.subscribe();
        Box::pin(async move {
            // A closed sender means the store is gone: nothing will change.
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }

    fn is_shared(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{ManualClock, replay_store_contract};

    #[tokio::test]
    async fn the_memory_store_keeps_the_contract() {
        replay_store_contract(|limits| async move {
            let clock = ManualClock::new();
            let store = Arc::new(MemoryReplayStore::new(limits, clock.clone()));
            (store as _, clock as _)
        })
        .await;
    }

    /// A store that forgets every claim: the suite must catch it.
    #[derive(Debug)]
    struct Forgetful(MemoryReplayStore);

    impl ReplayStore for Forgetful {
        fn begin(&self, _claim: ClaimSpec) -> BoxFuture<'_, Result<Begin, StoreError>> {
            Box::pin(std::future::ready(Ok(Begin::First)))
        }
        fn renew(
            &self,
            record: &RecordKey,
            owner: Owner,
            lease: Duration,
        ) -> BoxFuture<'_, Result<bool, StoreError>> {
            self.0.renew(record, owner, lease)
        }
        fn finish(
            &self,
            record: &RecordKey,
            owner: Owner,
            outcome: Outcome,
        ) -> BoxFuture<'_, Result<bool, StoreError>> {
            self.0.finish(record, owner, outcome)
        }
        fn status(&self, record: &RecordKey) -> BoxFuture<'_, Result<Option<Begin>, StoreError>> {
            self.0.status(record)
        }
        fn changed(&self, record: &RecordKey) -> BoxFuture<'static, ()> {
            self.0.changed(record)
        }
        fn is_shared(&self) -> bool {
            false
        }
    }

    #[tokio::test]
    #[should_panic(expected = "in flight")]
    async fn the_contract_catches_a_store_that_double_claims() {
        replay_store_contract(|limits| async move {
            let clock = ManualClock::new();
            let store = Arc::new(Forgetful(MemoryReplayStore::new(limits, clock.clone())));
            (store as _, clock as _)
        })
        .await;
    }

    #[test]
    fn outcomes_round_trip_as_bytes() {
        for outcome in [
            Outcome::Result(RawValue::from_string("{\"a\":[1,2]}".into()).unwrap()),
            Outcome::Error(ErrorObject::new(-32603, "boom")),
            Outcome::Unknown,
        ] {
            assert_eq!(Outcome::from_bytes(&outcome.to_bytes()).unwrap(), outcome);
        }
        assert!(Outcome::from_bytes(b"{\"x\":1}").is_err());
    }

    #[test]
    fn scopes_never_show_the_identity() {
        let scope = Scope::principal("alice@example.com");
        assert!(!scope.key().contains("alice") && !format!("{scope:?}").contains("alice"));
        assert_ne!(scope, Scope::anonymous("alice@example.com"));
        assert!(Scope::anonymous("10.0.0.1").is_anonymous());
    }
}
