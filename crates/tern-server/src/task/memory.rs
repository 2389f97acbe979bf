//! [`MemoryTaskStore`]: the embedded default, in this process's memory.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use super::store::{Created, Lease, TaskQuota, TaskRecord, TaskStore, TaskStoreError};
use crate::future::BoxFuture;

#[derive(Debug, Default)]
struct Maps {
    /// Boxed: a record is over 1 KiB, and a table keeps its empty buckets
    /// (it grows to twice its records and shrinks only when swept).
    records: HashMap<String, Box<TaskRecord>>,
    /// Dedupe key → task id.
    keys: HashMap<String, String>,
    /// Each owner's tally over the records held (expired ones not swept yet
    /// included): a create under quota is told so without a scan of every
    /// record; only a refusal counts exactly.
    usage: HashMap<Option<String>, Usage>,
    /// Recoverable records by lease deadline, for
    /// [`TaskStore::claim_lapsed`].
    deadlines: BTreeSet<(u64, String)>,
    /// No sweep before this (ms since the epoch): at most one a second.
    next_sweep: u64,
}

/// What an owner's records count against its [`TaskQuota`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Usage {
    /// Records not in a terminal status.
    running: usize,
    /// Their `result_bytes`, all of them.
    bytes: u64,
}

impl Usage {
    fn of(r: &TaskRecord) -> Self {
        Self {
            running: usize::from(!r.status.is_terminal()),
            bytes: r.result_bytes,
        }
    }

    fn plus(self, other: Self) -> Self {
        Self {
            running: self.running + other.running,
            bytes: self.bytes.saturating_add(other.bytes),
        }
    }

    fn over(self, quota: TaskQuota) -> bool {
        self.running >= quota.max_live || self.bytes > quota.max_result_bytes
    }
}

/// Adds `r` to its owner's tally.
fn tally(usage: &mut HashMap<Option<String>, Usage>, r: &TaskRecord) {
    let u = usage.entry(r.charged_to().map(str::to_owned)).or_default();
    *u = u.plus(Usage::of(r));
}

/// Takes `r` off its owner's tally (the owner goes once nothing is left).
fn untally(usage: &mut HashMap<Option<String>, Usage>, r: &TaskRecord) {
    let sub = Usage::of(r);
    let key = r.charged_to().map(str::to_owned);
    if let Some(u) = usage.get_mut(&key) {
        u.running = u.running.saturating_sub(sub.running);
        u.bytes = u.bytes.saturating_sub(sub.bytes);
        if *u == Usage::default() {
            usage.remove(&key);
        }
    }
}

impl Maps {
    /// Drops expired records (and their dedupe keys), at most once a second
    /// of `now`: called on `create` and `load`, so a server that only
    /// serves `tasks/get` after a burst still lets its finished tasks go.
    fn sweep(&mut self, now: u64) {
        // A clock set back more than the interval sweeps at once rather
        // than waiting for it to catch up.
        if now < self.next_sweep && self.next_sweep - now <= SWEEP_EVERY_MS {
            return;
        }
        self.next_sweep = now.saturating_add(SWEEP_EVERY_MS);
        let (keys, usage, deadlines) = (&mut self.keys, &mut self.usage, &mut self.deadlines);
        self.records.retain(|id, r| {
            let keep = live(r, now);
            if !keep {
                forget_key(keys, &r.key, id);
                untally(usage, r);
                unindex(deadlines, r);
            }
            keep
        });
        // A burst's table is given back once most of it has gone.
        if self.records.capacity() > 64 && self.records.len() * 4 < self.records.capacity() {
            self.records.shrink_to(self.records.len() * 2);
            self.keys.shrink_to(self.keys.len() * 2);
        }
    }
}

/// Indexes `r` by its lease deadline when it is recoverable.
fn index(deadlines: &mut BTreeSet<(u64, String)>, r: &TaskRecord) {
    if let Some(at) = r.lease_deadline() {
        deadlines.insert((at, r.task_id.clone()));
    }
}

fn unindex(deadlines: &mut BTreeSet<(u64, String)>, r: &TaskRecord) {
    if let Some(at) = r.lease_deadline() {
        deadlines.remove(&(at, r.task_id.clone()));
    }
}

/// Drops the dedupe `key` if it still names `task_id`: an expired record's
/// key may already name the live task created after it under that key.
fn forget_key(keys: &mut HashMap<String, String>, key: &str, task_id: &str) {
    if keys.get(key).is_some_and(|id| id == task_id) {
        keys.remove(key);
    }
}

/// How often expired records are swept, at most (ms).
const SWEEP_EVERY_MS: u64 = 1000;

/// Task records in this process's memory: the default store. Nothing
/// survives the process (a task's record goes with it); use `tern-sqlite`
/// for tasks that must survive a restart, `tern-redis` for replicas.
///
/// ```
/// use std::sync::Arc;
/// use tern_server::{MemoryTaskStore, Server};
///
/// // One process: tasks live as long as it does (tern-sqlite keeps them on
/// // disk, tern-redis across a fleet).
/// let server = Server::builder("app", "1.0.0")
///     .task_store(Arc::new(MemoryTaskStore::new()))
///     .build()?;
/// # drop(server);
/// # Ok::<(), tern_server::BuildError>(())
/// ```
#[derive(Debug, Default)]
pub struct MemoryTaskStore {
    maps: Mutex<Maps>,
}

impl MemoryTaskStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    /// Records held, expired ones not swept yet included (they are dropped
    /// at most a second after they expire, on the next `create` or `load`).
    pub fn len(&self) -> usize {
        self.maps().records.len()
    }

    /// No record is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn maps(&self) -> std::sync::MutexGuard<'_, Maps> {
        self.maps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn live(r: &TaskRecord, now: u64) -> bool {
    r.expires_at.is_none_or(|at| at > now)
}

impl TaskStore for MemoryTaskStore {
    fn create(
        &self,
        record: TaskRecord,
        quota: TaskQuota,
        now: u64,
    ) -> BoxFuture<'_, Result<Created, TaskStoreError>> {
        let mut maps = self.maps();
        maps.sweep(now);
        let out = if let Some(existing) = maps
            .keys
            .get(&record.key)
            .and_then(|id| maps.records.get(id))
            .filter(|r| live(r, now))
        {
            Created::Existing(existing.clone())
        } else {
            let charged_to = record.charged_to().map(str::to_owned);
            let tallied = maps.usage.get(&charged_to).copied().unwrap_or_default();
            // The tally still counts records expired since the last sweep:
            // a refusal is decided on the live ones, counted exactly.
            let over = tallied.over(quota)
                && maps
                    .records
                    .values()
                    .filter(|r| r.charged_to() == record.charged_to() && live(r, now))
                    .fold(Usage::default(), |u, r| u.plus(Usage::of(r)))
                    .over(quota);
            if over {
                Created::OverQuota
            } else {
                tally(&mut maps.usage, &record);
                index(&mut maps.deadlines, &record);
                maps.keys.insert(record.key.clone(), record.task_id.clone());
                maps.records
                    .insert(record.task_id.clone(), Box::new(record));
                Created::New
            }
        };
        Box::pin(std::future::ready(Ok(out)))
    }

    fn load(
        &self,
        task_id: &str,
        now: u64,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        let mut maps = self.maps();
        maps.sweep(now);
        let found = maps
            .records
            .get(task_id)
            .filter(|r| live(r, now))
            .map(|r| TaskRecord::clone(r));
        Box::pin(std::future::ready(Ok(found)))
    }

    fn read<'a>(
        &'a self,
        task_id: &'a str,
        now: u64,
        read: &'a mut (dyn FnMut(&TaskRecord) + Send),
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>> {
        // Under the lock, no copy: `read` only serialises.
        let mut maps = self.maps();
        maps.sweep(now);
        let found = maps.records.get(task_id).filter(|r| live(r, now));
        if let Some(record) = found {
            read(record);
        }
        let shown = found.is_some();
        drop(maps);
        Box::pin(std::future::ready(Ok(shown)))
    }

    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>> {
        let mut maps = self.maps();
        let Maps {
            records,
            usage,
            deadlines,
            ..
        } = &mut *maps;
        let swapped = match records.get_mut(&record.task_id) {
            Some(current) if current.version + 1 == record.version => {
                untally(usage, current);
                unindex(deadlines, current);
                tally(usage, &record);
                index(deadlines, &record);
                **current = record;
                true
            }
            _ => false,
        };
        Box::pin(std::future::ready(Ok(swapped)))
    }

    fn remove(&self, task_id: &str) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        let mut maps = self.maps();
        if let Some(r) = maps.records.remove(task_id) {
            forget_key(&mut maps.keys, &r.key, task_id);
            untally(&mut maps.usage, &r);
            unindex(&mut maps.deadlines, &r);
        }
        Box::pin(std::future::ready(Ok(())))
    }

    fn claim_lapsed(
        &self,
        now: u64,
        lease: Lease,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        let mut maps = self.maps();
        let Maps {
            records, deadlines, ..
        } = &mut *maps;
        let mut claimed = None;
        while let Some((at, id)) = deadlines.first().cloned() {
            if at > now {
                break;
            }
            deadlines.pop_first();
            let Some(r) = records.get_mut(&id).filter(|r| live(r, now)) else {
                // Expired: the next sweep drops it.
                continue;
            };
            r.lease = Some(lease);
            r.version += 1;
            index(deadlines, r);
            claimed = Some(TaskRecord::clone(r));
            break;
        }
        Box::pin(std::future::ready(Ok(claimed)))
    }

    fn is_durable(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::MemoryTaskStore;
    use crate::task::{Created, TaskQuota, TaskStore};

    #[tokio::test]
    async fn the_memory_store_meets_the_task_store_contract() {
        crate::testing::task_store_contract(|| Arc::new(MemoryTaskStore::new())).await;
    }

    #[tokio::test]
    async fn the_memory_store_claims_lapsed_tasks() {
        Box::pin(crate::testing::task_store_recovery_contract(|| {
            Arc::new(MemoryTaskStore::new())
        }))
        .await;
    }

    const NOW: u64 = 1_800_000_000_000;

    #[tokio::test]
    async fn expired_records_are_swept_by_loads_too_and_the_tables_shrink() {
        let store = MemoryTaskStore::new();
        let quota = TaskQuota::new(1000, 1 << 30);
        for i in 0..500 {
            let r = crate::testing::task_record(&format!("t{i}"), &format!("k{i}"), NOW);
            assert_eq!(store.create(r, quota, NOW).await.unwrap(), Created::New);
        }
        assert_eq!(store.len(), 500);
        let big = store.maps().records.capacity();
        // Only loads after the records' expiry (60 s): no create sweeps.
        assert!(store.load("t1", NOW + 60_000).await.unwrap().is_none());
        assert!(store.is_empty(), "{} records left", store.len());
        let maps = store.maps();
        assert!(maps.keys.is_empty(), "dedupe keys left behind");
        assert!(maps.records.capacity() < big / 4, "the table kept its size");
    }

    /// The per-owner tally is what a scan of the records held would count,
    /// after creates, completions with results, removals and sweeps; and a
    /// refusal still counts only live records.
    #[tokio::test]
    async fn the_owners_tally_matches_the_records_held() {
        use super::{Maps, Usage};
        use crate::task::TaskStatus;
        fn scanned(maps: &Maps) -> std::collections::HashMap<Option<String>, Usage> {
            let mut out = std::collections::HashMap::new();
            for r in maps.records.values() {
                super::tally(&mut out, r);
            }
            out
        }
        fn check(store: &MemoryTaskStore) {
            let maps = store.maps();
            assert_eq!(scanned(&maps), maps.usage);
        }
        let store = MemoryTaskStore::new();
        let quota = TaskQuota::new(4, 10_000);
        for i in 0..6 {
            let mut r = crate::testing::task_record(&format!("t{i}"), &format!("k{i}"), NOW);
            r.owner = (i % 2 == 0).then(|| "alice".to_owned());
            assert_eq!(store.create(r, quota, NOW).await.unwrap(), Created::New);
        }
        check(&store);
        // Two finish with results, one is removed.
        for id in ["t0", "t2"] {
            let mut r = store.load(id, NOW).await.unwrap().unwrap();
            r.version += 1;
            r.status = TaskStatus::Completed;
            r.result_bytes = 4_000;
            assert!(store.replace(r).await.unwrap());
        }
        store.remove("t1").await.unwrap();
        check(&store);
        assert_eq!(
            store.maps().usage[&Some("alice".to_owned())],
            Usage {
                running: 1,
                bytes: 8_000
            }
        );
        // Alice's 8,000 bytes of results: one more result would be over,
        // but under the quota's 10,000 bytes she may still create.
        let mut next = crate::testing::task_record("t6", "k6", NOW);
        next.owner = Some("alice".to_owned());
        assert_eq!(store.create(next, quota, NOW).await.unwrap(), Created::New);
        let mut full = crate::testing::task_record("t7", "k7", NOW);
        full.owner = Some("alice".to_owned());
        full.result_bytes = 0;
        let tight = TaskQuota::new(2, 10_000);
        assert_eq!(
            store.create(full.clone(), tight, NOW).await.unwrap(),
            Created::OverQuota
        );
        // Once her records have expired (not yet swept: the last sweep was
        // just before, so the tally still counts them), the exact count
        // lets her in.
        store.load("t0", NOW + 59_800).await.unwrap();
        let later = NOW + 60_500;
        full.created_at = later;
        full.expires_at = Some(later + 60_000);
        assert_eq!(
            store.create(full, tight, later).await.unwrap(),
            Created::New
        );
        check(&store);
        // Everything swept: no owner left in the tally.
        store.load("t7", later + 120_000).await.unwrap();
        let maps = store.maps();
        assert!(maps.usage.is_empty(), "{:?}", maps.usage);
    }

    #[tokio::test]
    async fn a_sweep_keeps_the_key_of_a_live_task_created_over_an_expired_one() {
        let store = MemoryTaskStore::new();
        let quota = TaskQuota::new(10, 1 << 20);
        let first = crate::testing::task_record("a", "k", NOW);
        store.create(first, quota, NOW).await.unwrap();
        // A sweep just before "a" expires (at NOW + 60 s); the next is a
        // second later.
        store.load("a", NOW + 59_500).await.unwrap();
        // "a" has expired, not yet swept: "b" takes its key.
        let second = crate::testing::task_record("b", "k", NOW + 60_100);
        assert_eq!(
            store.create(second, quota, NOW + 60_100).await.unwrap(),
            Created::New
        );
        // This create sweeps "a": "b" must still own the key.
        let third = crate::testing::task_record("c", "k", NOW + 61_000);
        let Created::Existing(existing) = store.create(third, quota, NOW + 61_000).await.unwrap()
        else {
            panic!("the duplicate of b's creating call was inserted");
        };
        assert_eq!(existing.task_id, "b");
    }
}
