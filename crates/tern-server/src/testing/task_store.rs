//! The contract every [`TaskStore`] must meet, as one test function that
//! each backend runs against fresh stores of its own.

#![allow(
    clippy::unwrap_used,
    reason = "a failed unwrap is a broken contract, reported as a panic"
)]

use std::sync::Arc;

use serde_json::json;
use tern_protocol::error::ErrorObject;
use tern_protocol::mrtr::InputRequest;
use tern_protocol::task::TaskStatus;
use tern_protocol::{ClientCapabilities, InputRequests};

use crate::task::{Created, Journal, Lease, TaskQuota, TaskRecord, TaskStore};

const NOW: u64 = 1_800_000_000_000;

fn record(id: &str, key: &str, owner: Option<&str>) -> TaskRecord {
    TaskRecord {
        owner: owner.map(str::to_owned),
        ..task_record(id, key, NOW)
    }
}

/// A working, anonymous record created at `now` that expires 60 s later,
/// with a lease of 30 s and nothing charged (`result_bytes` 0): for tests
/// of a store of your own.
pub fn task_record(id: &str, key: &str, now: u64) -> TaskRecord {
    TaskRecord {
        task_id: id.to_owned(),
        key: key.to_owned(),
        owner: None,
        quota_key: None,
        version: 1,
        status: TaskStatus::Working,
        status_message: None,
        created_at: now,
        last_updated_at: now,
        ttl_ms: Some(60_000),
        expires_at: Some(now + 60_000),
        poll_interval_ms: Some(500),
        capabilities: ClientCapabilities::default().with_elicitation_form(),
        input_requests: InputRequests::new(),
        answers: std::collections::BTreeMap::new(),
        used_keys: std::collections::BTreeSet::new(),
        result: None,
        error: None,
        result_bytes: 0,
        cancel_requested: false,
        lease: Some(Lease::new("00ff", now + 30_000)),
        journal: None,
    }
}

/// A journal for tests of a store's [`TaskStore::claim_lapsed`]: a record
/// with it (not terminal, with a lease) is recoverable.
pub fn task_journal() -> Journal {
    Journal {
        format: crate::task::JOURNAL_FORMAT,
        tool: "import".to_owned(),
        version: "v1".to_owned(),
        call: "sealed-call".to_owned(),
        steps: "sealed-steps".to_owned(),
        started: std::collections::BTreeMap::from([("batch-1".to_owned(), true)]),
        keys: std::collections::BTreeMap::new(),
        attempt: 0,
        passed: 0,
        unrecoverable: None,
    }
}

fn durable(id: &str, lease_until: u64) -> TaskRecord {
    TaskRecord {
        journal: Some(task_journal()),
        lease: Some(Lease::new("0a", lease_until)),
        ..record(id, &format!("key-{id}"), Some("o"))
    }
}

/// The recovery part of the contract ([`TaskStore::claim_lapsed`]), for a
/// store that implements it (the default claims nothing: no recovery).
/// Panics on the first broken rule, naming it.
///
/// # Panics
///
/// When the store breaks the contract, or fails.
pub async fn task_store_recovery_contract<S: TaskStore>(fresh: impl Fn() -> Arc<S>) {
    // Boxed: the cases hold several records each.
    Box::pin(lapsed_records_are_claimed_in_deadline_order(&*fresh())).await;
    Box::pin(a_lapsed_lease_is_claimed_once(&*fresh())).await;
}

async fn lapsed_records_are_claimed_in_deadline_order(store: &dyn TaskStore) {
    let mut plain = record("plain", "k-plain", Some("o"));
    plain.lease = Some(Lease::new("0a", NOW + 1_000));
    let mut done = durable("done", NOW + 1_000);
    done.status = TaskStatus::Completed;
    let mut unrecoverable = durable("token", NOW + 1_000);
    unrecoverable.journal.as_mut().unwrap().unrecoverable = Some("token".into());
    for r in [
        durable("late", NOW + 30_000),
        durable("early", NOW + 10_000),
        plain,
        done,
        unrecoverable,
    ] {
        assert_eq!(store.create(r, ROOMY, NOW).await.unwrap(), Created::New);
    }
    let claim =
        |at: u64, token: &'static str| store.claim_lapsed(at, Lease::new(token, at + 30_000));
    assert!(
        claim(NOW + 5_000, "t1").await.unwrap().is_none(),
        "claimed a record whose lease holds, or one with no journal or a terminal one"
    );
    let early = claim(NOW + 20_000, "t2")
        .await
        .unwrap()
        .expect("the lapsed record");
    assert_eq!(early.task_id, "early", "not the earliest deadline");
    assert_eq!(
        early.lease,
        Some(Lease::new("t2", NOW + 50_000)),
        "the new lease"
    );
    assert_eq!(early.version, 2, "a claim is a write: the version moves");
    assert_eq!(
        early.journal,
        Some(task_journal()),
        "the journal comes back whole"
    );
    assert_eq!(
        store.load("early", NOW + 20_000).await.unwrap(),
        Some(early.clone()),
        "the claimed record is what is stored"
    );
    assert!(
        claim(NOW + 20_000, "t3").await.unwrap().is_none(),
        "a record claimed again under its new lease"
    );
    // The old runner's compare-and-swap loses to the claim.
    let mut stale = durable("early", NOW + 40_000);
    stale.version = 2;
    assert!(
        !store.replace(stale).await.unwrap(),
        "a write over the claim"
    );
    // A replace that moves a deadline is indexed again: "late" renewed.
    let mut late = store.load("late", NOW).await.unwrap().unwrap();
    late.version += 1;
    late.lease = Some(Lease::new("0a", NOW + 55_000));
    assert!(store.replace(late).await.unwrap());
    assert!(
        claim(NOW + 40_000, "t4").await.unwrap().is_none(),
        "claimed by its old deadline after a renewal"
    );
    // A record that became recoverable through a replace is claimable.
    let mut plain = store.load("plain", NOW).await.unwrap().unwrap();
    plain.version += 1;
    plain.journal = Some(task_journal());
    assert!(store.replace(plain).await.unwrap());
    let got = claim(NOW + 40_000, "t5")
        .await
        .unwrap()
        .expect("plain, now durable");
    assert_eq!(got.task_id, "plain");
    // One that ended is not.
    let mut early = store.load("early", NOW).await.unwrap().unwrap();
    early.version += 1;
    early.status = TaskStatus::Completed;
    assert!(store.replace(early).await.unwrap());
    assert_eq!(
        claim(NOW + 56_000, "t6").await.unwrap().map(|r| r.task_id),
        Some("late".to_owned()),
        "after late's renewed lease lapsed, late (early ended)"
    );
    // Expired records (at NOW + 60 s) are never claimed.
    assert!(
        claim(NOW + 90_000, "t7").await.unwrap().is_none(),
        "an expired record was claimed"
    );
}

async fn a_lapsed_lease_is_claimed_once(store: &dyn TaskStore) {
    for i in 0..3 {
        let r = durable(&format!("r{i}"), NOW + 1_000);
        assert_eq!(store.create(r, ROOMY, NOW).await.unwrap(), Created::New);
    }
    let at = NOW + 2_000;
    let claim = |i: u32| store.claim_lapsed(at, Lease::new(format!("c{i}"), at + 30_000));
    let got = tokio::join!(claim(0), claim(1), claim(2), claim(3), claim(4), claim(5));
    let mut ids: Vec<String> = [got.0, got.1, got.2, got.3, got.4, got.5]
        .into_iter()
        .filter_map(|r| r.unwrap().map(|r| r.task_id))
        .collect();
    ids.sort();
    assert_eq!(
        ids,
        ["r0", "r1", "r2"],
        "each lapsed record claimed exactly once"
    );
}

const ROOMY: TaskQuota = TaskQuota {
    max_live: 100,
    max_result_bytes: 1 << 20,
};

/// Runs the task store contract against stores made by `fresh` (each call
/// must give an empty store). Panics on the first broken rule, naming it.
///
/// # Panics
///
/// When the store breaks the contract, or fails.
pub async fn task_store_contract<S: TaskStore>(fresh: impl Fn() -> Arc<S>) {
    creates_once_per_key(&*fresh()).await;
    replace_is_compare_and_swap(&*fresh()).await;
    records_round_trip_whole(&*fresh()).await;
    expired_records_are_gone(&*fresh()).await;
    read_lends_what_load_returns(&*fresh()).await;
    quotas_count_live_tasks_and_result_bytes(&*fresh()).await;
    remove_forgets(&*fresh()).await;
    the_tally_follows_every_write(&*fresh()).await;
    a_mass_expiry_frees_the_whole_quota(&*fresh()).await;
    quota_keys_have_tallies_of_their_own(&*fresh()).await;
}

/// The store's tally of `owner` is exactly (`live`, `bytes`) at `now`, as
/// its quota decisions show: at `max_live == live` a create is refused, at
/// `max_result_bytes == bytes - 1` too, and at (`live + 1`, `bytes`) it
/// passes (the probe charges nothing, and is removed again).
async fn tally_is(
    store: &dyn TaskStore,
    owner: &str,
    now: u64,
    live: usize,
    bytes: u64,
    why: &str,
) {
    let probe = |n: &str| {
        let mut r = task_record(&format!("probe-{n}"), &format!("probe-{n}"), now);
        r.owner = Some(owner.to_owned());
        r
    };
    if live > 0 {
        assert_eq!(
            store
                .create(probe("live"), TaskQuota::new(live, u64::MAX / 2), now)
                .await
                .unwrap(),
            Created::OverQuota,
            "tally ({why}): fewer than {live} live tasks counted"
        );
    }
    if bytes > 0 {
        assert_eq!(
            store
                .create(
                    probe("bytes"),
                    TaskQuota::new(usize::MAX / 2, bytes - 1),
                    now
                )
                .await
                .unwrap(),
            Created::OverQuota,
            "tally ({why}): fewer than {bytes} bytes counted"
        );
    }
    assert_eq!(
        store
            .create(probe("fits"), TaskQuota::new(live + 1, bytes), now)
            .await
            .unwrap(),
        Created::New,
        "tally ({why}): more than {live} live tasks or {bytes} bytes counted"
    );
    store.remove("probe-fits").await.unwrap();
}

/// The per-owner tally a store keeps (rather than a scan of the owner's
/// records on each create) follows creates, finishes and renewals that
/// change a record's charge or expiry, removals and expiries, exactly.
async fn the_tally_follows_every_write(store: &dyn TaskStore) {
    let create = |id: &str, bytes: u64, ttl: Option<u64>| {
        let mut r = record(id, &format!("k{id}"), Some("o"));
        r.result_bytes = bytes;
        r.ttl_ms = ttl;
        r.expires_at = ttl.map(|t| NOW + t);
        async move { store.create(r, ROOMY, NOW).await.unwrap() }
    };
    for (id, bytes, ttl) in [
        ("a", 100, Some(60_000)),
        ("b", 100, Some(60_000)),
        ("c", 100, Some(60_000)),
        ("d", 100, Some(10_000)),
        ("e", 100, None),
    ] {
        assert_eq!(create(id, bytes, ttl).await, Created::New);
    }
    tally_is(store, "o", NOW, 5, 500, "five created").await;
    // a finishes with a result: no longer live, charged more.
    let mut a = store.load("a", NOW).await.unwrap().unwrap();
    a.version += 1;
    a.status = TaskStatus::Completed;
    a.result_bytes = 1000;
    assert!(store.replace(a.clone()).await.unwrap());
    // The same write again (a retry whose reply was lost): whether a store
    // answers it done or stale, the charge counts once.
    store.replace(a).await.unwrap();
    // b is renewed: kept to NOW + 120 s.
    let mut b = store.load("b", NOW).await.unwrap().unwrap();
    b.version += 1;
    b.expires_at = Some(NOW + 120_000);
    assert!(store.replace(b).await.unwrap());
    // A refused write changes nothing.
    let mut stale = store.load("c", NOW).await.unwrap().unwrap();
    stale.result_bytes = 50_000;
    assert!(!store.replace(stale).await.unwrap());
    store.remove("c").await.unwrap();
    store.remove("c").await.unwrap();
    tally_is(store, "o", NOW, 3, 1300, "a finished, b renewed, c removed").await;
    // d expires at NOW + 10 s.
    tally_is(store, "o", NOW + 30_000, 2, 1200, "d expired").await;
    // a expires at NOW + 60 s; b, renewed, does not.
    tally_is(store, "o", NOW + 61_000, 2, 200, "a expired").await;
    tally_is(store, "o", NOW + 121_000, 1, 100, "b expired").await;
    store.remove("e").await.unwrap();
    tally_is(store, "o", NOW + 121_000, 0, 0, "all gone").await;
}

/// Many records of one owner expiring together all leave its tally before
/// the next create is judged: a store that drops expired records a batch
/// at a time must not refuse an owner whose records have all expired.
async fn a_mass_expiry_frees_the_whole_quota(store: &dyn TaskStore) {
    let quota = TaskQuota::new(200, 1 << 30);
    for i in 0..150 {
        let mut r = record(&format!("t{i}"), &format!("k{i}"), Some("o"));
        r.result_bytes = 2048;
        assert_eq!(store.create(r, quota, NOW).await.unwrap(), Created::New);
    }
    let later = NOW + 60_000;
    let mut next = task_record("next", "knext", later);
    next.owner = Some("o".to_owned());
    assert_eq!(
        store
            .create(next, TaskQuota::new(1, 2048), later)
            .await
            .unwrap(),
        Created::New,
        "tally: 150 expired records still counted against their owner"
    );
}

/// A record with a `quota_key` counts against that tally, not its owner's
/// (anonymous callers, one tally per peer), through replace and remove too.
async fn quota_keys_have_tallies_of_their_own(store: &dyn TaskStore) {
    let one = TaskQuota::new(1, 1 << 20);
    let from = |id: &str, peer: Option<&str>| {
        let mut r = record(id, &format!("k{id}"), None);
        r.quota_key = peer.map(str::to_owned);
        r
    };
    let created = |r: TaskRecord| async move { store.create(r, one, NOW).await.unwrap() };
    assert_eq!(created(from("a", Some("peer-1"))).await, Created::New);
    assert_eq!(
        created(from("b", Some("peer-1"))).await,
        Created::OverQuota,
        "quota key: a second live task of one peer is refused"
    );
    assert_eq!(
        created(from("c", Some("peer-2"))).await,
        Created::New,
        "quota key: another peer has a quota of its own"
    );
    assert_eq!(
        created(from("d", None)).await,
        Created::New,
        "quota key: callers without one share the owner's tally"
    );
    let mut a = store.load("a", NOW).await.unwrap().unwrap();
    a.version += 1;
    a.status = TaskStatus::Completed;
    assert!(store.replace(a).await.unwrap());
    assert_eq!(
        created(from("e", Some("peer-1"))).await,
        Created::New,
        "quota key: a finished task no longer counts as live"
    );
    store.remove("e").await.unwrap();
    store.remove("c").await.unwrap();
    assert_eq!(created(from("f", Some("peer-1"))).await, Created::New);
    assert_eq!(created(from("g", Some("peer-2"))).await, Created::New);
}

async fn creates_once_per_key(store: &dyn TaskStore) {
    let first = store
        .create(record("a", "k", None), ROOMY, NOW)
        .await
        .unwrap();
    assert_eq!(first, Created::New, "create: a new key inserts");
    let again = store
        .create(record("b", "k", None), ROOMY, NOW)
        .await
        .unwrap();
    let Created::Existing(existing) = again else {
        panic!("create: a live record with the same key must be returned, got {again:?}");
    };
    assert_eq!(
        existing.task_id, "a",
        "create: the existing record is returned"
    );
    assert!(
        store.load("b", NOW).await.unwrap().is_none(),
        "create: the duplicate must not be inserted"
    );
    assert_eq!(store.load("a", NOW).await.unwrap().unwrap().key, "k");
    assert!(
        store.load("nope", NOW).await.unwrap().is_none(),
        "load: unknown id is None"
    );
}

async fn replace_is_compare_and_swap(store: &dyn TaskStore) {
    store
        .create(record("a", "k", None), ROOMY, NOW)
        .await
        .unwrap();
    let mut next = store.load("a", NOW).await.unwrap().unwrap();
    next.version += 1;
    next.status_message = Some("one".into());
    assert!(
        store.replace(next.clone()).await.unwrap(),
        "replace: the current version swaps"
    );
    let mut stale = next.clone();
    stale.status_message = Some("stale".into());
    assert!(
        !store.replace(stale).await.unwrap(),
        "replace: a write from an old version must be refused"
    );
    let stored = store.load("a", NOW).await.unwrap().unwrap();
    assert_eq!(stored.status_message.as_deref(), Some("one"));
    assert_eq!(stored.version, 2);
    let mut ghost = record("ghost", "g", None);
    ghost.version = 2;
    assert!(
        !store.replace(ghost).await.unwrap(),
        "replace: an unknown record is refused"
    );
}

async fn records_round_trip_whole(store: &dyn TaskStore) {
    let mut r = record("a", "k", Some("owner-digest"));
    let mut asks = InputRequests::new();
    asks.insert("q".into(), InputRequest::roots());
    r.input_requests = asks;
    r.answers
        .insert("p".into(), json!({"action": "accept", "content": {"x": 1}}));
    r.used_keys.insert("p".into());
    r.status = TaskStatus::InputRequired;
    r.error = Some(ErrorObject::new(-32603, "e"));
    r.cancel_requested = true;
    r.ttl_ms = None;
    r.expires_at = None;
    store.create(r.clone(), ROOMY, NOW).await.unwrap();
    let back = store.load("a", NOW).await.unwrap().unwrap();
    assert_eq!(back, r, "load: a record comes back exactly as written");
    assert!(
        store.load("a", u64::MAX / 2).await.unwrap().is_some(),
        "a record without expiry never expires"
    );
}

async fn expired_records_are_gone(store: &dyn TaskStore) {
    store
        .create(record("a", "k", None), ROOMY, NOW)
        .await
        .unwrap();
    assert!(store.load("a", NOW + 59_999).await.unwrap().is_some());
    assert!(
        store.load("a", NOW + 60_000).await.unwrap().is_none(),
        "load: an expired record is gone"
    );
    let later = store
        .create(record("b", "k", None), ROOMY, NOW + 60_000)
        .await
        .unwrap();
    assert_eq!(
        later,
        Created::New,
        "create: an expired record's key is free again"
    );
}

/// [`TaskStore::read`] shows the record `load` returns, and nothing for an
/// unknown or expired id.
async fn read_lends_what_load_returns(store: &dyn TaskStore) {
    let mut stored = record("a", "k", Some("o"));
    stored.status_message = Some("half way".into());
    store.create(stored, ROOMY, NOW).await.unwrap();
    let loaded = store.load("a", NOW).await.unwrap().unwrap();
    let mut seen = Vec::new();
    let mut read = |r: &TaskRecord| seen.push(r.clone());
    assert!(
        store.read("a", NOW, &mut read).await.unwrap(),
        "read: a live record is shown"
    );
    assert!(
        !store.read("zz", NOW, &mut read).await.unwrap(),
        "read: an unknown id is not"
    );
    assert!(
        !store.read("a", NOW + 60_000, &mut read).await.unwrap(),
        "read: an expired record is not"
    );
    assert_eq!(seen, [loaded], "read: shown once, as load returns it");
}

async fn quotas_count_live_tasks_and_result_bytes(store: &dyn TaskStore) {
    let quota = TaskQuota::new(2, 100);
    let ok = |c: Created| assert_eq!(c, Created::New);
    ok(store
        .create(record("a", "ka", Some("o")), quota, NOW)
        .await
        .unwrap());
    ok(store
        .create(record("b", "kb", Some("o")), quota, NOW)
        .await
        .unwrap());
    assert_eq!(
        store
            .create(record("c", "kc", Some("o")), quota, NOW)
            .await
            .unwrap(),
        Created::OverQuota,
        "quota: a third live task of one owner is refused"
    );
    ok(store
        .create(record("d", "kd", Some("other")), quota, NOW)
        .await
        .unwrap());
    ok(store
        .create(record("e", "ke", None), quota, NOW)
        .await
        .unwrap());
    // One of o's tasks ends with a large result: no longer live, but its
    // bytes count.
    let mut done = store.load("a", NOW).await.unwrap().unwrap();
    done.version += 1;
    done.status = TaskStatus::Completed;
    done.result = Some(json!({"content": []}));
    done.result_bytes = 101;
    assert!(store.replace(done).await.unwrap());
    assert_eq!(
        store
            .create(record("f", "kf", Some("o")), quota, NOW)
            .await
            .unwrap(),
        Created::OverQuota,
        "quota: stored result bytes over the budget refuse a new task"
    );
    let mut small = store.load("a", NOW).await.unwrap().unwrap();
    small.version += 1;
    small.result_bytes = 10;
    assert!(store.replace(small).await.unwrap());
    ok(store
        .create(record("g", "kg", Some("o")), quota, NOW)
        .await
        .unwrap());
}

async fn remove_forgets(store: &dyn TaskStore) {
    store
        .create(record("a", "k", None), ROOMY, NOW)
        .await
        .unwrap();
    store.remove("a").await.unwrap();
    assert!(
        store.load("a", NOW).await.unwrap().is_none(),
        "remove: the record is gone"
    );
    assert_eq!(
        store
            .create(record("b", "k", None), ROOMY, NOW)
            .await
            .unwrap(),
        Created::New,
        "remove: its key is free again"
    );
    store.remove("a").await.unwrap();
}
