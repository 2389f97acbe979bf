//! Tasks (the `io.modelcontextprotocol/tasks` extension, SEP-2663,
//! <https://modelcontextprotocol.io/extensions/tasks/overview>; docs/design.md,
//! "Tasks"): a `tools/call` whose work outlives its request becomes a
//! durable handle (`taskId`) that the client polls with `tasks/get`,
//! answers with `tasks/update` and stops with `tasks/cancel`.
//!
//! A tool declares that it may become a task with [`crate::ToolDef::task`]
//! ([`TaskSupport::Optional`] or [`TaskSupport::Required`]); the moment it
//! does is explicit: [`crate::Ctx::into_task`] in the handler, or
//! [`crate::ToolDef::task_from_start`]. Before it the handler is an ordinary
//! MRTR leg (its questions travel as `input_required`); after it the same
//! future keeps running in a server-owned task under the *await* strategy:
//! its questions are published in the record's `inputRequests`, answers come
//! with `tasks/update`, `ctx.progress` sets `statusMessage`, and
//! `ctx.cancelled()` fires on `tasks/cancel` (no longer on the creating
//! request's disconnect).
//!
//! | module | what it holds |
//! |---|---|
//! | [`store`] | the [`TaskStore`] contract and the [`TaskRecord`] it keeps |
//! | `memory` | [`MemoryTaskStore`], the embedded default |
//! | `runner` | creating a task from a running leg, and running its body under a lease |
//! | `durable` | a durable task's journal, and its recovery after its runner died |
//! | `wire` | `tasks/get`, `tasks/update`, `tasks/cancel` |
//!
//! Rules (documented choices where the spec leaves room):
//! - The task record is durably created before `CreateTaskResult` is sent.
//!   A duplicate of the retry that created a task gets the same `taskId`
//!   (one task per logical call: the record's key is the owner and the
//!   engine's call id).
//! - A body that returns a JSON-RPC error or panics ends `failed` with the
//!   error inline; a tool error ends `completed` with `isError`. After
//!   `tasks/cancel`, a body that ends with any error ends `cancelled`; one
//!   that still returns a result ends `completed` (cancel is cooperative).
//! - A task whose runner is gone — its lease ([`TaskConfig::lease`], 30 s)
//!   lapsed, or the process stopped ([`crate::Server::stop_tasks`]) — reads
//!   `failed` with [`crate::error::codes::OUTCOME_UNKNOWN`], whether it was
//!   `working` or `input_required`, unless its tool is durable
//!   ([`crate::ToolDef::durable`]): then another replica, or the process
//!   started again on a store on disk, takes it with a new lease
//!   ([`TaskStore::claim_lapsed`]) and runs the handler again from the
//!   journal kept in the record (docs/durable-tasks.md): recorded
//!   `ctx.once` steps do not run again, answered questions are not asked
//!   again, a step that started and was not recorded ends the task `failed`
//!   naming it unless retry-safe (rule `task-step-unknown`), recoveries are
//!   bounded (rule `task-recovery-bounded`), a cancel while no runner holds
//!   it ends it `cancelled` (rule `task-cancel-unheld`), and it keeps its
//!   status meanwhile (rule `task-recovery-no-status`).
//! - `ttlMs` starts at [`TaskConfig::ttl`] (1 h), is extended while the work
//!   runs so a running task never expires, and is set at the end to keep the
//!   record [`TaskConfig::retention`] (1 h) longer.
//! - Unknown, expired and other principals' ids get the same `-32602`.
//! - An anonymous caller's task is bearer-by-id: whoever holds its
//!   unguessable id (128 bits) may read, answer or cancel it, from any
//!   address (a client behind a NAT or a proxy that changes address keeps
//!   its task). Its *quota* is its peer's, so one anonymous address at its
//!   quota does not refuse tasks to the others.

pub(crate) mod durable;
mod memory;
pub(crate) mod runner;
pub mod store;
mod view;
pub(crate) mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sha2::Digest as _;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::task::{TASKS_EXTENSION, TaskStatus};
use tern_protocol::{ClientCapabilities, RequestMeta};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use memory::MemoryTaskStore;
pub use store::{
    Created, JOURNAL_FORMAT, Journal, Lease, TaskQuota, TaskRecord, TaskStore, TaskStoreError,
};

use crate::error::codes;
use crate::ids::Clock;
use crate::principal::Principal;

/// Whether a tool may run as a task ([`crate::ToolDef::task`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TaskSupport {
    /// It becomes a task when the request declared the extension, and runs
    /// inline (through MRTR) otherwise.
    Optional,
    /// It cannot run without a task: a request that did not declare the
    /// extension gets `-32021` with
    /// `requiredCapabilities.extensions["io.modelcontextprotocol/tasks"]`.
    Required,
}

/// How tasks are kept and run, with the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TaskConfig {
    /// `ttlMs` of a new task: default 1 hour.
    pub ttl: Duration,
    /// Longest a task waits in `input_required` for the answers to one
    /// question (never past [`Self::ttl`]): default 10 minutes. Then the
    /// task ends `failed` with [`crate::error::codes::QUESTION_TIMEOUT`],
    /// and its slot of the caller's quota is free again: a caller that
    /// never answers holds its tasks that long, not for their whole ttl.
    pub input_timeout: Duration,
    /// How long a finished task's record (and result) is kept after its
    /// end, shorter than [`Self::ttl`] or longer (the record's `ttlMs` is
    /// set to it at the end): default 1 hour.
    pub retention: Duration,
    /// `pollIntervalMs`: default 500 ms.
    pub poll_interval: Duration,
    /// A runner's lease: default 30 s, renewed every third of it. A task
    /// whose lease lapsed reads `failed` (outcome unknown).
    pub lease: Duration,
    /// How often a runner re-reads its record for answers and cancellation
    /// that another replica wrote: default 1 s (this process's own
    /// `tasks/update` and `tasks/cancel` wake it at once).
    pub recheck: Duration,
    /// Most live tasks per principal: default 64. Anonymous callers have
    /// this quota each, per peer address (an IPv6 address by its /64; all
    /// callers of a transport that names no peer share one), not one for
    /// them all; see [`TaskRecord::quota_key`].
    pub max_live_per_principal: usize,
    /// Most bytes per principal (per anonymous peer, as above) of its task
    /// records (each result or error, plus [`RECORD_CHARGE`] a record):
    /// default 16 MiB.
    pub max_result_bytes_per_principal: u64,
    /// Largest result one task may store: default 1 MiB. A larger one ends
    /// the task `failed` with [`crate::error::codes::STORE_FULL`].
    pub max_result_bytes: u64,
    /// How many times a durable task is taken again after its runner's
    /// lease lapsed before it ends `failed` with
    /// [`crate::error::codes::RECOVERY_LIMIT`]: default 3.
    pub recoveries: u32,
    /// How many leases a lapsed durable task waits for a replica that
    /// serves its tool's version before it reads `failed` (outcome
    /// unknown): default 3.
    pub unclaimed_leases: u32,
    /// Largest journal one durable task keeps (its sealed call and steps):
    /// default 256 KiB. A step whose result would grow it past this ends the
    /// task `failed` with [`crate::error::codes::STORE_FULL`].
    pub max_journal_bytes: u64,
    /// On [`crate::Server::stop_tasks`], how long a durable task's running
    /// `ctx.once` steps may take to finish and be recorded before its lease
    /// is released for another replica: default 10 s.
    pub drain: Duration,
}

impl Default for TaskConfig {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(3600),
            input_timeout: Duration::from_secs(600),
            retention: Duration::from_secs(3600),
            poll_interval: Duration::from_millis(500),
            lease: Duration::from_secs(30),
            recheck: Duration::from_secs(1),
            max_live_per_principal: 64,
            max_result_bytes_per_principal: 16 << 20,
            max_result_bytes: 1 << 20,
            recoveries: 3,
            unclaimed_leases: 3,
            max_journal_bytes: 256 << 10,
            drain: Duration::from_secs(10),
        }
    }
}

impl TaskConfig {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Self::ttl`] (at least 1 ms).
    #[must_use]
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl.max(Duration::from_millis(1));
        self
    }

    /// Sets [`Self::input_timeout`] (at least 1 ms).
    #[must_use]
    pub fn input_timeout(mut self, timeout: Duration) -> Self {
        self.input_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// Sets [`Self::retention`].
    #[must_use]
    pub fn retention(mut self, retention: Duration) -> Self {
        self.retention = retention;
        self
    }

    /// Sets [`Self::poll_interval`] (at least 1 ms).
    #[must_use]
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = every.max(Duration::from_millis(1));
        self
    }

    /// Sets [`Self::lease`] (at least 3 ms, so it can be renewed).
    #[must_use]
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(3));
        self
    }

    /// Sets [`Self::recheck`] (at least 1 ms).
    #[must_use]
    pub fn recheck(mut self, every: Duration) -> Self {
        self.recheck = every.max(Duration::from_millis(1));
        self
    }

    /// Sets the per-principal quotas.
    #[must_use]
    pub fn quota(mut self, max_live: usize, max_result_bytes: u64) -> Self {
        self.max_live_per_principal = max_live;
        self.max_result_bytes_per_principal = max_result_bytes;
        self
    }

    /// Sets [`Self::recoveries`].
    #[must_use]
    pub fn recoveries(mut self, recoveries: u32) -> Self {
        self.recoveries = recoveries;
        self
    }

    /// Sets [`Self::unclaimed_leases`] (at least 1).
    #[must_use]
    pub fn unclaimed_leases(mut self, leases: u32) -> Self {
        self.unclaimed_leases = leases.max(1);
        self
    }

    /// Sets [`Self::drain`].
    #[must_use]
    pub fn drain(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Sets [`Self::max_journal_bytes`].
    #[must_use]
    pub fn max_journal_bytes(mut self, bytes: u64) -> Self {
        self.max_journal_bytes = bytes;
        self
    }

    /// Sets [`Self::max_result_bytes`].
    #[must_use]
    pub fn max_result_bytes(mut self, bytes: u64) -> Self {
        self.max_result_bytes = bytes;
        self
    }
}

/// What a tool asks of the task machinery (part of its leg policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TaskMode {
    pub(crate) support: TaskSupport,
    pub(crate) from_start: bool,
    /// The tool is durable at this version ([`crate::ToolDef::durable`]).
    pub(crate) durable: Option<&'static str>,
}

/// A runner this process holds: how to wake it.
#[derive(Debug)]
pub(crate) struct Local {
    /// Bumped on every local write the runner should look at (answers,
    /// cancellation).
    pub(crate) bump: watch::Sender<u64>,
}

impl Local {
    pub(crate) fn wake(&self) {
        self.bump.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// The task machinery of one server: its store, its settings and the
/// runners this process holds.
#[derive(Debug)]
pub(crate) struct Tasks {
    pub(crate) store: Arc<dyn TaskStore>,
    pub(crate) config: TaskConfig,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) local: Mutex<HashMap<String, Arc<Local>>>,
    /// Fired by [`crate::Server::stop_tasks`].
    pub(crate) shutdown: CancellationToken,
    /// Runners still holding a task; `stop_tasks` waits for 0.
    pub(crate) running: watch::Sender<usize>,
    /// The id of every record this process wrote, for `notifications/tasks`
    /// on `subscriptions/listen`, when the store does not announce writes
    /// itself ([`TaskStore::changes`]; a shared store's announcements carry
    /// every replica's writes, this process's included).
    pub(crate) changed: tokio::sync::broadcast::Sender<String>,
    /// The store announces every write ([`TaskStore::changes`] is `Some`).
    pub(crate) announced: bool,
}

impl Tasks {
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        config: TaskConfig,
        clock: Arc<dyn Clock>,
    ) -> Self {
        let announced = store.changes().is_some();
        Self {
            announced,
            store,
            config,
            clock,
            local: Mutex::default(),
            shutdown: CancellationToken::new(),
            running: watch::Sender::new(0),
            changed: tokio::sync::broadcast::Sender::new(256),
        }
    }

    pub(crate) fn now_ms(&self) -> u64 {
        millis(self.clock.now())
    }

    /// Ids of changed records: the store's announcements (every replica's
    /// writes) when it makes them, this process's own writes otherwise.
    pub(crate) fn subscribe_changes(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.store
            .changes()
            .unwrap_or_else(|| self.changed.subscribe())
    }

    pub(crate) fn local(&self, task_id: &str) -> Option<Arc<Local>> {
        self.local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(task_id)
            .cloned()
    }

    /// Reads, changes and writes a record atomically (compare-and-swap,
    /// retried on a conflict). `change` returns `None` to leave the record
    /// as it is. A lapsed lease is applied first, so every path sees it.
    pub(crate) async fn modify<R>(
        &self,
        task_id: &str,
        change: impl FnMut(&mut TaskRecord, u64) -> Option<R>,
    ) -> Result<Option<(TaskRecord, Option<R>)>, ErrorObject> {
        let done = self.modify_keeping(task_id, change, true).await?;
        Ok(done.and_then(|(record, out)| Some((record?, out))))
    }

    /// [`Tasks::modify`] for a caller that wants only whether `change`
    /// was written (`Some(Some(_))`): the written record is moved into the
    /// store rather than copied for the caller (the runner's fenced writes,
    /// two a task: about 12k instructions a task, callgrind).
    pub(crate) async fn modify_only<R>(
        &self,
        task_id: &str,
        change: impl FnMut(&mut TaskRecord, u64) -> Option<R>,
    ) -> Result<Option<Option<R>>, ErrorObject> {
        let done = self.modify_keeping(task_id, change, false).await?;
        Ok(done.map(|(_, out)| out))
    }

    /// The loop of [`Tasks::modify`]; the record comes back only when
    /// `keep` (or when nothing was written).
    async fn modify_keeping<R>(
        &self,
        task_id: &str,
        mut change: impl FnMut(&mut TaskRecord, u64) -> Option<R>,
        keep: bool,
    ) -> Result<Option<(Option<TaskRecord>, Option<R>)>, ErrorObject> {
        for _ in 0..64 {
            let now = self.now_ms();
            let Some(mut record) = self.store.load(task_id, now).await.map_err(store_failed)?
            else {
                return Ok(None);
            };
            let was_terminal = record.status.is_terminal();
            let lapsed = lapse(&mut record, now, &self.config);
            let out = change(&mut record, now);
            if out.is_none() && !lapsed {
                return Ok(Some((Some(record), None)));
            }
            record.version += 1;
            let status = record.status;
            let (written, kept) = if keep {
                (record.clone(), Some(record))
            } else {
                (record, None)
            };
            if self.store.replace(written).await.map_err(store_failed)? {
                if !self.announced {
                    // Nobody listening is not an error.
                    let _ = self.changed.send(task_id.to_owned());
                }
                // Counted once the write is in: a lost compare-and-swap or
                // two replicas racing to fail a lapsed task count once.
                if !was_terminal && status.is_terminal() {
                    crate::metrics::task_state(status_label(status));
                }
                return Ok(Some((kept, out)));
            }
        }
        // The id is a bearer credential of an anonymous task: debug only.
        tracing::debug!(%task_id, "task record kept changing");
        tracing::error!("a task record kept changing under 64 writes");
        Err(ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))
    }
}

/// Resolves when a shared store announces a write of `task_id` (or missed
/// announcements, one of which may have been it); never without a shared
/// store. Only a wake-up: the caller re-reads the record.
pub(crate) async fn announced(
    changes: &mut Option<tokio::sync::broadcast::Receiver<String>>,
    task_id: &str,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        let Some(rx) = changes.as_mut() else {
            return std::future::pending().await;
        };
        match rx.recv().await {
            Ok(id) if id == task_id => return,
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => return,
            Err(RecvError::Closed) => *changes = None,
        }
    }
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "used as `map_err(store_failed)`"
)]
pub(crate) fn store_failed(e: TaskStoreError) -> ErrorObject {
    tracing::error!(error = %e, "task store failed");
    ErrorObject::new(
        code::INTERNAL_ERROR,
        "Internal error: the task store failed",
    )
}

/// The error of a task whose runner went away before it ended.
pub(crate) fn runner_gone(why: &str) -> ErrorObject {
    ErrorObject::new(
        codes::OUTCOME_UNKNOWN,
        format!(
            "The outcome of this task is unknown: {why}. It will not run again; check its \
             effect before starting a new call."
        ),
    )
}

/// A non-terminal task whose lease lapsed turns `failed` (outcome unknown),
/// kept `retention` from now like any finished task. Returns whether it
/// changed. A recoverable one (a durable task with its journal) waits for
/// a replica to take it again ([`TaskStore::claim_lapsed`]): it keeps its
/// status, unless it was cancelled meanwhile (then `cancelled`: it is not
/// run again) or no replica took it within
/// [`TaskConfig::unclaimed_leases`] leases.
pub(crate) fn lapse(record: &mut TaskRecord, now: u64, config: &TaskConfig) -> bool {
    let retention = config.retention;
    let Some(lapsed_at) = record
        .lease
        .as_ref()
        .map(|l| l.expires_at)
        .filter(|at| *at <= now && !record.status.is_terminal())
    else {
        return false;
    };
    if record.recoverable() {
        if record.cancel_requested {
            end(
                record,
                now,
                TaskStatus::Cancelled,
                None,
                None,
                Some(retention),
            );
            return true;
        }
        if now < lapsed_at.saturating_add(durable::unclaimed_grace(config)) {
            return false;
        }
    }
    end(
        record,
        now,
        TaskStatus::Failed,
        None,
        Some(runner_gone("its runner stopped renewing its lease")),
        Some(retention),
    );
    true
}

pub(crate) fn internal() -> ErrorObject {
    ErrorObject::new(code::INTERNAL_ERROR, "Internal error")
}

/// The `_meta` key of `tasks/get` that says which run of a durable task
/// this is: `0` the first, then one more for each time it was taken again
/// after its runner stopped.
pub fn attempt_meta_key() -> String {
    format!("{}attempt", crate::error::META_PREFIX)
}

/// What each kept task record counts against its owner's byte quota beside
/// its result (see [`TaskRecord::result_bytes`](crate::task::TaskRecord)):
/// about what a record with its ids, metadata and index entries takes.
pub const RECORD_CHARGE: u64 = 2048;

/// `status` as the `tern.task_states` counter labels it.
fn status_label(status: TaskStatus) -> &'static str {
    match status {
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "input_required",
    }
}

/// Moves `record` to a terminal status.
pub(crate) fn end(
    record: &mut TaskRecord,
    now: u64,
    status: TaskStatus,
    result: Option<serde_json::Value>,
    error: Option<ErrorObject>,
    retention: Option<Duration>,
) {
    record.status = status;
    record.status_message = Some(match (status, &error) {
        (TaskStatus::Failed, Some(e)) => e.message.clone(),
        (TaskStatus::Cancelled, _) => "Cancelled".to_owned(),
        _ => "Done".to_owned(),
    });
    let kept = |v: Option<Vec<u8>>| v.map_or(0, |v| v.len() as u64);
    record.result_bytes = RECORD_CHARGE
        + kept(result.as_ref().and_then(|r| serde_json::to_vec(r).ok()))
        + kept(error.as_ref().and_then(|e| serde_json::to_vec(e).ok()));
    record.result = result;
    record.error = error;
    record.input_requests.clear();
    record.answers.clear();
    record.lease = None;
    // Nothing runs again from a finished task: its journal goes, but for
    // the attempt it ended in (`tasks/get` shows it).
    if let Some(j) = record.journal.as_mut() {
        j.call.clear();
        j.steps.clear();
        j.started.clear();
        j.keys.clear();
    }
    record.last_updated_at = now;
    // Keep the record `retention` past its end, shorter than the ttl given at
    // creation too: ttlMs "may change" (Tasks extension › Tasks). Kept at least
    // the original ttl, a retention below it was never applied and every
    // finished task stayed the full hour (the soak's HTTP memory grew for its
    // whole run with `--task-retention 120`). An unlimited ttl (`None`) stays
    // unlimited.
    let retention = retention.unwrap_or(Duration::from_secs(3600));
    let keep = now.saturating_sub(record.created_at) + ms(retention);
    let ttl = record.ttl_ms.map(|_| keep);
    record.ttl_ms = ttl;
    record.expires_at = ttl.map(|t| record.created_at + t);
}

/// Whether `capabilities` declared the extension (per request, Tasks
/// extension › Capability Negotiation).
pub(crate) fn declared(capabilities: &ClientCapabilities) -> bool {
    capabilities.extension(TASKS_EXTENSION)
}

/// `-32021` for a request that did not declare the extension.
pub(crate) fn missing_extension(what: &str) -> ErrorObject {
    ErrorObject::missing_capability(
        format!("{what} needs the client capability extensions[\"{TASKS_EXTENSION}\"]"),
        ClientCapabilities::default().with_extension(TASKS_EXTENSION),
    )
}

/// The request declared the extension.
pub(crate) fn request_declared(meta: &RequestMeta) -> bool {
    declared(&meta.client_capabilities)
}

/// The owner of a principal's tasks: a digest, never the raw identity.
pub(crate) fn owner_of(principal: &Principal) -> Option<String> {
    principal.id().map(|id| {
        let digest = sha2::Sha256::new()
            .chain_update(b"tern-task-owner\0")
            .chain_update(id.as_bytes())
            .finalize();
        hex(&digest)
    })
}

/// The quota of an anonymous caller's tasks: its peer's, as a keyed digest
/// (never the address itself), an IPv6 peer by its /64 (one host holds a
/// whole /64, so its single addresses are not separate callers), an
/// IPv4-mapped IPv6 address as the IPv4 one. `None` without a peer: every
/// such caller shares one quota. The task itself stays bearer-by-id.
pub(crate) fn peer_quota_key(peer: Option<&str>) -> Option<String> {
    let peer = peer?;
    // HTTP names its peers by share::peer_name already (`2001:db8::/64`);
    // an address from elsewhere is grouped the same way, and a
    // transport's own name for its peer (`stdio`) is kept.
    let group = peer.parse::<std::net::IpAddr>().map_or_else(
        |_| peer.to_owned(),
        |ip| crate::share::peer_name(ip).to_string(),
    );
    let digest = sha2::Sha256::new()
        .chain_update(b"tern-task-peer\0")
        .chain_update(group.as_bytes())
        .finalize();
    Some(hex(&digest))
}

pub(crate) use crate::json::hex;

pub(crate) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

pub(crate) fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, ms)
}

/// ISO 8601 in UTC with `Z` and milliseconds: `2025-11-25T10:30:00.000Z`.
pub(crate) fn iso8601(ms_since_epoch: u64) -> String {
    let secs = ms_since_epoch / 1000;
    let millis = ms_since_epoch % 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (Ok(year @ 0..=9999), Ok(month), Ok(day)) = (
        u64::try_from(year),
        u64::try_from(month),
        u64::try_from(day),
    ) else {
        // Past year 9999: more digits than the fixed layout has.
        return format!(
            "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
            rem / 3600,
            rem % 3600 / 60,
            rem % 60
        );
    };
    // Every task view carries two of these: digits by hand, not a
    // formatter per field.
    let mut out = String::with_capacity(24);
    for (n, width, after) in [
        (year, 4, '-'),
        (month, 2, '-'),
        (day, 2, 'T'),
        (rem / 3600, 2, ':'),
        (rem % 3600 / 60, 2, ':'),
        (rem % 60, 2, '.'),
        (millis, 3, 'Z'),
    ] {
        for place in (0..width).rev() {
            let digit = n / 10u64.pow(place) % 10;
            out.push(char::from(b'0' + u8::try_from(digit).unwrap_or(0)));
        }
        out.push(after);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_with_z() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_764_066_600_123), "2025-11-25T10:30:00.123Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso8601(253_402_300_799_999), "9999-12-31T23:59:59.999Z");
        assert_eq!(iso8601(253_402_300_800_000), "10000-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_000_000_000_009), "2001-09-09T01:46:40.009Z");
    }

    #[test]
    fn anonymous_quotas_are_per_peer_and_ipv6_per_64() {
        let key = |p: &str| peer_quota_key(Some(p)).unwrap();
        assert_eq!(peer_quota_key(None), None);
        assert_ne!(key("127.0.0.2"), key("127.0.0.3"));
        assert!(
            !key("127.0.0.2").contains("127"),
            "a digest, not the address"
        );
        assert_eq!(key("2001:db8:1:2::1"), key("2001:db8:1:2:ffff::9"));
        assert_ne!(key("2001:db8:1:2::1"), key("2001:db8:1:3::1"));
        assert_eq!(key("::ffff:192.0.2.1"), key("192.0.2.1"));
        assert_eq!(key("stdio"), key("stdio"));
        assert_ne!(Some(key("stdio")), owner_of(&Principal::new("stdio")));
    }

    #[test]
    fn owners_are_digests_not_identities() {
        let owner = owner_of(&Principal::new("alice")).unwrap();
        assert_eq!(owner.len(), 64);
        assert!(!owner.contains("alice"));
        assert_ne!(Some(owner), owner_of(&Principal::new("bob")));
        assert_eq!(owner_of(&Principal::anonymous()), None);
    }
}
