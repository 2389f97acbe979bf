//! The replay store contract (see [`crate::replay`]) as one test suite any
//! store can run: the in-memory store runs it in this crate's tests, and
//! `tern-redis` runs it against a real `redis-server`.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! use std::sync::Arc;
//! use tern_server::MemoryReplayStore;
//! use tern_server::testing::{ManualClock, replay_store_contract};
//!
//! replay_store_contract(|limits| async move {
//!     let clock = ManualClock::new();
//!     let store = Arc::new(MemoryReplayStore::new(limits, clock.clone()));
//!     (store as _, clock as _)
//! })
//! .await;
//! # });
//! ```

#![allow(
    clippy::unwrap_used,
    reason = "a test suite: a store that fails is a failed check, reported by the panic"
)]

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::value::RawValue;
use tern_protocol::error::ErrorObject;

use crate::engine::Clock;
use crate::replay::{
    Begin, BoxFuture, ClaimSpec, Outcome, Owner, RECORD_OVERHEAD, RecordKey, ReplayStore, Scope,
    StateId, StoreLimits,
};

/// How the suite moves time for a store: a manual clock the store reads, or
/// real time for a store with a clock of its own (Redis).
pub trait Advance: Send + Sync {
    /// The time the store goes by now.
    fn now(&self) -> SystemTime;

    /// Lets `by` pass for the store.
    fn advance(&self, by: Duration) -> BoxFuture<'_, ()>;
}

/// A clock that moves only when told: a [`Clock`] to give the server or
/// store, and an [`Advance`] for the contract suite.
#[derive(Debug)]
pub struct ManualClock(Mutex<SystemTime>);

impl ManualClock {
    /// A clock at 2027-01-15T08:00:00Z.
    pub fn new() -> Arc<Self> {
        Arc::new(Self(Mutex::new(
            UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        )))
    }

    /// Moves the clock forward.
    pub fn tick(&self, by: Duration) {
        let mut now = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Advance for ManualClock {
    fn now(&self) -> SystemTime {
        Clock::now(self)
    }

    fn advance(&self, by: Duration) -> BoxFuture<'_, ()> {
        self.tick(by);
        Box::pin(std::future::ready(()))
    }
}

/// Real time, for a store that keeps its own clock: advancing sleeps.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealTime;

impl Advance for RealTime {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }

    fn advance(&self, by: Duration) -> BoxFuture<'_, ()> {
        Box::pin(tokio::time::sleep(by))
    }
}

fn id(n: u8) -> StateId {
    let mut id = crate::engine::random_bytes::<16>();
    id[0] = n;
    id
}

fn result(text: &str) -> Outcome {
    Outcome::Result(
        RawValue::from_string(format!("{{\"text\":{}}}", serde_json::Value::from(text)))
            .expect("a JSON object"),
    )
}

/// The lease the suite uses: long enough that real time (Redis) does not
/// lapse it by accident between two steps, short enough to wait out.
const LEASE: Duration = Duration::from_millis(1500);

/// Runs the whole contract against stores made by `make`, which gets the
/// byte bounds to build with and returns the store and how to move its time.
/// Panics, naming the broken rule, at the first violation.
///
/// # Panics
///
/// When the store breaks the contract, or fails.
pub async fn replay_store_contract<F, Fut>(make: F)
where
    F: Fn(StoreLimits) -> Fut,
    Fut: Future<Output = (Arc<dyn ReplayStore>, Arc<dyn Advance>)>,
{
    let roomy = StoreLimits::default();
    first_in_flight_done(&make(roomy).await).await;
    only_the_owner_writes(&make(roomy).await).await;
    a_lapsed_lease_is_unknown_for_good(&make(roomy).await).await;
    records_expire(&make(roomy).await).await;
    concurrent_begins_make_one_owner(&make(roomy).await).await;
    waiters_are_woken(&make(roomy).await).await;
    let tight = StoreLimits::default()
        .per_anonymous_bytes(RECORD_OVERHEAD * 3)
        .per_principal_bytes(RECORD_OVERHEAD * 4 + 64)
        .total_bytes(RECORD_OVERHEAD * 8)
        .max_outcome_bytes(64);
    bounds_per_scope_and_total(&make(tight).await).await;
    large_outcomes_read_unknown(&make(tight).await).await;
}

fn claim(store_time: &dyn Advance, record: &RecordKey, owner: Owner, scope: &Scope) -> ClaimSpec {
    ClaimSpec::new(
        record.id,
        owner,
        scope.clone(),
        store_time.now() + Duration::from_secs(600),
        LEASE,
    )
}

async fn first_in_flight_done((store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>)) {
    let scope = Scope::principal("alice");
    let (a, b) = (Owner::random(), Owner::random());
    let s = RecordKey::new(id(1), scope.clone());
    assert_eq!(
        store.status(&s).await.unwrap(),
        None,
        "no record before begin"
    );
    assert_eq!(
        store.begin(claim(&**time, &s, a, &scope)).await.unwrap(),
        Begin::First,
        "the first begin owns the record"
    );
    assert_eq!(
        store.begin(claim(&**time, &s, b, &scope)).await.unwrap(),
        Begin::InFlight,
        "a second begin while the owner holds its lease is in flight"
    );
    assert_eq!(
        store.begin(claim(&**time, &s, a, &scope)).await.unwrap(),
        Begin::First,
        "begin is idempotent for its owner (a retried begin whose reply was lost)"
    );
    assert!(store.finish(&s, a, result("paid")).await.unwrap());
    assert_eq!(
        store.begin(claim(&**time, &s, b, &scope)).await.unwrap(),
        Begin::Done(result("paid")),
        "after finish, begin reads the outcome"
    );
    assert_eq!(
        store.status(&s).await.unwrap(),
        Some(Begin::Done(result("paid")))
    );
    let e = RecordKey::new(id(2), scope.clone());
    store.begin(claim(&**time, &e, a, &scope)).await.unwrap();
    let error = ErrorObject::new(-32603, "backend down");
    assert!(
        store
            .finish(&e, a, Outcome::Error(error.clone()))
            .await
            .unwrap()
    );
    assert_eq!(
        store.status(&e).await.unwrap(),
        Some(Begin::Done(Outcome::Error(error))),
        "a JSON-RPC error is an outcome like a result"
    );
    assert!(
        !store.finish(&e, a, result("again")).await.unwrap(),
        "a finished record is not finished twice"
    );
}

async fn only_the_owner_writes((store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>)) {
    let scope = Scope::anonymous("127.0.0.1");
    let (a, b) = (Owner::random(), Owner::random());
    let s = RecordKey::new(id(3), scope.clone());
    store.begin(claim(&**time, &s, a, &scope)).await.unwrap();
    assert!(
        !store.renew(&s, b, LEASE).await.unwrap(),
        "another owner cannot renew"
    );
    assert!(
        !store.finish(&s, b, result("forged")).await.unwrap(),
        "another owner cannot finish"
    );
    assert_eq!(store.status(&s).await.unwrap(), Some(Begin::InFlight));
    assert!(store.renew(&s, a, LEASE).await.unwrap(), "the owner renews");
    assert!(
        !store
            .renew(&RecordKey::new(id(4), scope.clone()), a, LEASE)
            .await
            .unwrap(),
        "no record, nothing to renew"
    );
}

async fn a_lapsed_lease_is_unknown_for_good(
    (store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>),
) {
    let scope = Scope::principal("bob");
    let (a, b) = (Owner::random(), Owner::random());
    let s = RecordKey::new(id(5), scope.clone());
    store.begin(claim(&**time, &s, a, &scope)).await.unwrap();
    // Renewed halfway, the lease holds past its first end…
    time.advance(LEASE / 2).await;
    assert!(store.renew(&s, a, LEASE).await.unwrap());
    time.advance(LEASE * 3 / 4).await;
    assert_eq!(
        store.status(&s).await.unwrap(),
        Some(Begin::InFlight),
        "a renewed lease holds"
    );
    // …and lapses when the owner stops renewing (it died).
    time.advance(LEASE + Duration::from_millis(100)).await;
    assert_eq!(
        store.begin(claim(&**time, &s, b, &scope)).await.unwrap(),
        Begin::Unknown,
        "a lapsed lease reads unknown, never a second First"
    );
    assert!(
        !store.renew(&s, a, LEASE).await.unwrap(),
        "a lapsed owner cannot renew"
    );
    assert!(
        !store.finish(&s, a, result("late")).await.unwrap(),
        "a lapsed owner cannot finish"
    );
    assert_eq!(store.status(&s).await.unwrap(), Some(Begin::Unknown));
    let d = RecordKey::new(id(6), scope.clone());
    store.begin(claim(&**time, &d, a, &scope)).await.unwrap();
    assert!(store.finish(&d, a, Outcome::Unknown).await.unwrap());
    assert_eq!(
        store.begin(claim(&**time, &d, b, &scope)).await.unwrap(),
        Begin::Unknown,
        "an owner that gave up (deadline, panic) leaves unknown"
    );
}

async fn records_expire((store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>)) {
    let scope = Scope::principal("carol");
    let a = Owner::random();
    let s = RecordKey::new(id(7), scope.clone());
    let short = ClaimSpec::new(
        s.id,
        a,
        scope.clone(),
        time.now() + Duration::from_secs(2),
        LEASE,
    );
    store.begin(short).await.unwrap();
    assert!(store.finish(&s, a, result("kept")).await.unwrap());
    time.advance(Duration::from_millis(2100)).await;
    assert_eq!(
        store.status(&s).await.unwrap(),
        None,
        "past expires_at the record is gone"
    );
    assert_eq!(
        store.begin(claim(&**time, &s, a, &scope)).await.unwrap(),
        Begin::First,
        "an expired record guards nothing (its state no longer opens)"
    );
}

async fn concurrent_begins_make_one_owner(
    (store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>),
) {
    let scope = Scope::principal("dave");
    let s = RecordKey::new(id(8), scope.clone());
    let begins = (0..16).map(|_| {
        let store = Arc::clone(store);
        let spec = claim(&**time, &s, Owner::random(), &scope);
        tokio::spawn(async move { store.begin(spec).await })
    });
    let mut firsts = 0;
    for begin in begins {
        match begin.await.expect("no panic").unwrap() {
            Begin::First => firsts += 1,
            Begin::InFlight => {}
            other => panic!("a concurrent begin read {other:?}"),
        }
    }
    assert_eq!(
        firsts, 1,
        "exactly one of 16 concurrent begins owns the record"
    );
}

async fn waiters_are_woken((store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>)) {
    let scope = Scope::principal("erin");
    let a = Owner::random();
    let s = RecordKey::new(id(9), scope.clone());
    store.begin(claim(&**time, &s, a, &scope)).await.unwrap();
    let changed = store.changed(&s);
    let finisher = {
        let store = Arc::clone(store);
        let s = s.clone();
        tokio::spawn(async move { store.finish(&s, a, result("woken")).await })
    };
    // Bounded: a store that never wakes fails here rather than hanging.
    tokio::time::timeout(Duration::from_secs(10), changed)
        .await
        .expect("finish wakes a waiter registered before it");
    assert!(finisher.await.expect("no panic").unwrap());
    assert_eq!(
        store.status(&s).await.unwrap(),
        Some(Begin::Done(result("woken")))
    );
}

async fn bounds_per_scope_and_total((store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>)) {
    let anon = Scope::anonymous("203.0.113.9");
    let other_anon = Scope::anonymous("203.0.113.10");
    let alice = Scope::principal("alice");
    let begin = |n: u8, scope: &Scope| {
        let spec = claim(
            &**time,
            &RecordKey::new(id(n), scope.clone()),
            Owner::random(),
            scope,
        );
        let store = Arc::clone(store);
        async move { store.begin(spec).await }
    };
    for n in 0..3 {
        assert_eq!(begin(10 + n, &anon).await.unwrap(), Begin::First);
    }
    let full = begin(13, &anon)
        .await
        .expect_err("an anonymous peer's share is bounded");
    assert!(full.is_full(), "a full store says so: {full:?}");
    assert_eq!(
        begin(14, &other_anon).await.unwrap(),
        Begin::First,
        "one peer filling its share does not refuse another"
    );
    for n in 0..4 {
        assert_eq!(begin(20 + n, &alice).await.unwrap(), Begin::First);
    }
    let total = begin(30, &Scope::principal("zed"))
        .await
        .expect_err("the total is bounded");
    assert!(total.is_full());
}

async fn large_outcomes_read_unknown((store, time): &(Arc<dyn ReplayStore>, Arc<dyn Advance>)) {
    let scope = Scope::principal("frank");
    let a = Owner::random();
    let s = RecordKey::new(id(40), scope.clone());
    store.begin(claim(&**time, &s, a, &scope)).await.unwrap();
    let big = result(&"x".repeat(200));
    assert!(store.finish(&s, a, big).await.unwrap());
    assert_eq!(
        store.status(&s).await.unwrap(),
        Some(Begin::Unknown),
        "an outcome over max_outcome_bytes is not kept, and never re-run"
    );
}
