//! The task store contract ([`TaskStore`]) and what it keeps
//! ([`TaskRecord`]).
//!
//! A store is a map of versioned records with an atomic compare-and-swap, so
//! that every backend — [`super::MemoryTaskStore`] in this process,
//! `tern-sqlite` on disk, `tern-redis` shared between replicas — enforces
//! the task rules identically: the rules themselves (fenced runner writes,
//! the lapsed lease turning `failed` or recovered, answers taken from
//! `tasks/update`) are written once, in `tern_server::task`, on top of these
//! operations:
//!
//! | operation | atomic guarantee |
//! |---|---|
//! | [`TaskStore::create`] | inserts unless a live record has the same dedupe `key` (then returns that one), within the owner's [`TaskQuota`] |
//! | [`TaskStore::load`] | one record, as last written; `None` once expired |
//! | [`TaskStore::replace`] | writes only if the stored version is still the one read (`version - 1`) |
//! | [`TaskStore::remove`] | drops a record |
//! | [`TaskStore::claim_lapsed`] | takes one recoverable record whose lease lapsed, with a new lease (default: none, no recovery) |
//!
//! Every record carries its own expiry (`expires_at`, derived from `ttlMs`):
//! a store never returns an expired record and may drop it at any time
//! (Redis: `PX`; SQLite and memory: swept on `create`). Times are
//! milliseconds since the Unix epoch, passed in by the caller (the server's
//! injected clock), never read by the store.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_protocol::error::ErrorObject;
use tern_protocol::task::TaskStatus;
use tern_protocol::{ClientCapabilities, InputRequests};

use crate::future::BoxFuture;

/// A lease on a running task: the runner that holds `token` is the only
/// writer of the task's progress, questions and outcome until `expires_at`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Lease {
    /// The runner's random token (32 hex digits): every runner write
    /// presents it and is refused when it no longer matches (fencing).
    pub token: String,
    /// Milliseconds since the epoch; past it, with no renewal, the task
    /// reads `failed` (its outcome is unknown).
    pub expires_at: u64,
}

impl Lease {
    /// A lease held with `token` until `expires_at` (ms since the epoch).
    pub fn new(token: impl Into<String>, expires_at: u64) -> Self {
        Self {
            token: token.into(),
            expires_at,
        }
    }
}

/// Everything the server keeps about one task: its wire view, its result,
/// its questions and answers, its owner and its runner's lease. Stores keep
/// it whole (it serialises with serde; `tern-sqlite` and `tern-redis` keep
/// the JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct TaskRecord {
    /// The task id: 32 hex digits from the OS's CSPRNG (128 bits).
    pub task_id: String,
    /// Dedupe key: one logical call (owner and call id) creates one task,
    /// however many duplicates of its creating retry arrive.
    pub key: String,
    /// A keyed digest of the creating principal (`None`: anonymous). Never
    /// the raw identity.
    pub owner: Option<String>,
    /// Whose quota the record counts against when that is not its
    /// `owner`'s: an anonymous caller's tasks are charged to its peer (a
    /// keyed digest of its address, an IPv6 address by its /64), so one
    /// peer at its quota does not lock every anonymous caller out. Only
    /// the quota is per peer: an anonymous task stays bearer-by-id (anyone
    /// holding its unguessable id may read, answer or cancel it). `None`:
    /// the owner's quota ([`Self::charged_to`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_key: Option<String>,
    /// Incremented by every write ([`TaskStore::replace`] compares it).
    pub version: u64,
    /// Where the task is.
    pub status: TaskStatus,
    /// A human-readable status (progress, or why it failed).
    pub status_message: Option<String>,
    /// Creation, ms since the epoch.
    pub created_at: u64,
    /// Last change visible on the wire, ms since the epoch.
    pub last_updated_at: u64,
    /// `ttlMs`: lifetime counted from `created_at`; `None` is unlimited.
    pub ttl_ms: Option<u64>,
    /// When the store may forget the record (ms since the epoch), `None`
    /// never: `created_at + ttl_ms`.
    pub expires_at: Option<u64>,
    /// `pollIntervalMs`.
    pub poll_interval_ms: Option<u64>,
    /// The capabilities of the request that created the task, frozen: the
    /// task's questions are checked against them.
    pub capabilities: ClientCapabilities,
    /// Questions outstanding now, by wire key (`inputRequests`).
    pub input_requests: InputRequests,
    /// Answers `tasks/update` delivered and the runner has not taken yet.
    pub answers: BTreeMap<String, Value>,
    /// Every key ever published: a key is never reused over the task's life.
    pub used_keys: BTreeSet<String>,
    /// The result (status `completed`).
    pub result: Option<Value>,
    /// The JSON-RPC error (status `failed`).
    pub error: Option<ErrorObject>,
    /// Bytes charged to the owner's quota while the record is kept: the
    /// stored `result` or `error` serialized, plus
    /// [`RECORD_CHARGE`](crate::task::RECORD_CHARGE) for the record itself,
    /// so a principal's finished tasks are bounded however small their
    /// results (a soak of tiny results grew without bound until retention).
    pub result_bytes: u64,
    /// `tasks/cancel` arrived.
    pub cancel_requested: bool,
    /// The runner's lease while the task is not terminal.
    pub lease: Option<Lease>,
    /// What another runner needs to run the task again when this one's
    /// lease lapses (a durable tool's task, [`crate::ToolDef::durable`]);
    /// `None`: the task cannot be recovered, and a lapsed lease ends it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal: Option<Journal>,
}

impl TaskRecord {
    /// The record may be taken by [`TaskStore::claim_lapsed`] once its lease
    /// lapses: it is not terminal, and it has a journal to run again from.
    /// A store indexes these records by [`Self::lease_deadline`].
    pub fn recoverable(&self) -> bool {
        !self.status.is_terminal()
            && self.lease.is_some()
            && self
                .journal
                .as_ref()
                .is_some_and(|j| j.unrecoverable.is_none())
    }

    /// When the lease of a [`Self::recoverable`] record lapses (ms since the
    /// epoch): the key a store indexes it by. `None` for other records.
    pub fn lease_deadline(&self) -> Option<u64> {
        self.recoverable()
            .then(|| self.lease.as_ref().map(|l| l.expires_at))
            .flatten()
    }
}

/// A durable task's journal (docs/design.md, "Durable tasks"): what a
/// runner recorded so another can run the handler again from it. Kept in
/// the [`TaskRecord`], so every store writes it under the record's
/// compare-and-swap and lease fencing. The call and the steps are sealed
/// with the server's key ring (the principal, the arguments and the
/// answers are the caller's data): a store holds them encrypted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct Journal {
    /// The journal's format: [`JOURNAL_FORMAT`]. A runner that does not know
    /// the format does not take the task.
    pub format: u32,
    /// The tool whose handler runs.
    pub tool: String,
    /// The tool's durable version ([`crate::ToolDef::durable`]): a replica
    /// serving another version does not take the task.
    pub version: String,
    /// The call, sealed at `into_task`: the arguments, the creating
    /// request's `_meta` (its capabilities included) and the principal.
    pub call: String,
    /// What the handler did, sealed again at each step: the `ctx.once`
    /// results and the answers taken so far.
    pub steps: String,
    /// `ctx.once` steps that started and whose result is not recorded, with
    /// whether each was declared retry-safe ([`crate::Ctx::once_retry_safe`]).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub started: BTreeMap<String, bool>,
    /// The wire key of each question outstanding, by the handler's key: a
    /// question outstanding at a crash keeps its key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub keys: BTreeMap<String, String>,
    /// How many times the task was taken again after its runner's lease
    /// lapsed.
    pub attempt: u32,
    /// How many replicas took the task since it was last run and left it
    /// (they do not serve its tool at its version).
    #[serde(default)]
    pub passed: u32,
    /// Why the task cannot run again (the handler read the raw access
    /// token, which is never kept), when it cannot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unrecoverable: Option<String>,
}

/// The [`Journal::format`] this build writes and reads.
pub const JOURNAL_FORMAT: u32 = 1;

impl TaskRecord {
    /// The tally this record counts against: its `quota_key`, else its
    /// `owner` (`None`: the anonymous callers with no peer, together).
    /// Stores keep one tally per value.
    pub fn charged_to(&self) -> Option<&str> {
        self.quota_key.as_deref().or(self.owner.as_deref())
    }
}

/// Per-owner bounds checked atomically by [`TaskStore::create`]; an
/// anonymous caller's are per peer ([`TaskRecord::quota_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskQuota {
    /// Most non-terminal tasks one owner may have.
    pub max_live: usize,
    /// Most bytes one owner's records may be charged: each record's
    /// `result_bytes` (its result or error plus
    /// [`RECORD_CHARGE`](crate::task::RECORD_CHARGE) for the record itself);
    /// expired records do not count.
    pub max_result_bytes: u64,
}

impl TaskQuota {
    /// A quota.
    pub fn new(max_live: usize, max_result_bytes: u64) -> Self {
        Self {
            max_live,
            max_result_bytes,
        }
    }
}

/// What [`TaskStore::create`] did.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Created {
    /// The record was inserted.
    New,
    /// A live record with the same key exists: this one (a duplicate).
    Existing(Box<TaskRecord>),
    /// The owner is at its quota; nothing was inserted.
    OverQuota,
}

/// A store failed (I/O, a corrupt record). Opaque; its `Display` names the
/// backend's reason.
#[derive(Debug)]
pub struct TaskStoreError(Box<dyn std::error::Error + Send + Sync>);

impl TaskStoreError {
    /// Wraps a backend's error.
    pub fn new(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> Self {
        Self(e.into())
    }
}

impl fmt::Display for TaskStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "task store failed: {}", self.0)
    }
}

impl std::error::Error for TaskStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

/// Where task records live. See the module docs for the contract; the
/// shared contract tests are [`crate::testing::task_store_contract`].
pub trait TaskStore: Send + Sync + fmt::Debug + 'static {
    /// Inserts `record` (its `version` is 1) unless a live record has the
    /// same `key`, and only if the tally it is charged to
    /// ([`TaskRecord::charged_to`]) stays within `quota` (counting records
    /// live at `now`). A store keeps each tally as it goes (never a scan of
    /// the owner's records per create): every `create`, `replace`,
    /// `remove` and expiry moves it by the record's charge.
    fn create(
        &self,
        record: TaskRecord,
        quota: TaskQuota,
        now: u64,
    ) -> BoxFuture<'_, Result<Created, TaskStoreError>>;

    /// The record of `task_id`, unless it is unknown or expired at `now`.
    fn load(
        &self,
        task_id: &str,
        now: u64,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>>;

    /// Shows `read` the record of `task_id` where it lies, unless it is
    /// unknown or expired at `now`, and tells whether it did: `tasks/get`
    /// writes its answer from the borrowed record instead of a copy. The
    /// default loads the record ([`TaskStore::load`]) and shows that; a
    /// store that keeps records in memory lends its own.
    fn read<'a>(
        &'a self,
        task_id: &'a str,
        now: u64,
        read: &'a mut (dyn FnMut(&TaskRecord) + Send),
    ) -> BoxFuture<'a, Result<bool, TaskStoreError>> {
        Box::pin(async move {
            let Some(record) = self.load(task_id, now).await? else {
                return Ok(false);
            };
            read(&record);
            Ok(true)
        })
    }

    /// Writes `record` if the stored one still has version
    /// `record.version - 1`; `false` when another write came first (or the
    /// record is gone).
    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>>;

    /// Drops `task_id`.
    fn remove(&self, task_id: &str) -> BoxFuture<'_, Result<(), TaskStoreError>>;

    /// Records survive the process (SQLite, Redis). A fresh process serving
    /// over stdio only knows tasks in a durable store.
    fn is_durable(&self) -> bool;

    /// Every process of a fleet sees the same records (Redis), so
    /// [`crate::ServerBuilder::multi_instance`] accepts this store. Default
    /// `false`: this process's memory, or a file only it opens.
    fn is_shared(&self) -> bool {
        false
    }

    /// The ids of records written by *any* process sharing this store (a
    /// shared store announces each successful `create`, `replace` and
    /// `remove`; Redis: pub/sub). A wake-up only, never the data: whoever
    /// hears an id re-reads the record, and a lost announcement only delays
    /// a reader until its slow re-check ([`super::TaskConfig::recheck`]).
    /// `None` (the default): only this process writes, and it wakes its own
    /// runners and subscribers directly.
    fn changes(&self) -> Option<tokio::sync::broadcast::Receiver<String>> {
        None
    }

    /// Takes one [`TaskRecord::recoverable`] record whose lease lapsed at
    /// `now` (its [`TaskRecord::lease_deadline`] is at or before it) for a
    /// new runner, atomically: its lease becomes `lease`, its `version` one
    /// more, and the record as written is returned. Two callers never take
    /// the same lapsed lease. A store finds the record through an index on
    /// the lease deadline (never a scan of every record). `None`: no record
    /// has lapsed.
    ///
    /// The default takes nothing: a store that does not implement it runs
    /// no recovery, and a task whose runner dies reads `failed`
    /// ([`crate::error::codes::OUTCOME_UNKNOWN`]) as it always did.
    fn claim_lapsed(
        &self,
        now: u64,
        lease: Lease,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        let _ = (now, lease);
        Box::pin(std::future::ready(Ok(None)))
    }
}
