//! `tern-sqlite`: the embedded durable task store of tern. One SQLite file
//! keeps every task's record and result, so they survive a restart of the
//! server: a client that polls after the restart still reads the result of
//! a task that completed before it.
//!
//! A durable tool's task ([`tern_server::ToolDef::durable`]) survives the
//! process too: its journal is in the row, and the process started again on
//! the file takes it once its lease lapses
//! ([`tern_server::task::TaskStore::claim_lapsed`], through an index on the
//! lease deadline) and runs its handler again from the journal. Any other
//! task's handler does not survive a restart (it was a future in the old
//! process): a task that was still running reads `failed` with
//! [`tern_server::error::codes::OUTCOME_UNKNOWN`] once its lease lapses, or
//! at once when the server stopped cleanly
//! ([`tern_server::Server::stop_tasks`]). The file is one host's: processes
//! on it share it, a fleet needs `tern-redis`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use tern_server::{Server, ToolDef, TaskSupport, Ctx};
//! use tern_sqlite::SqliteTaskStore;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = SqliteTaskStore::open("tasks.db")?;
//! let server = Server::builder("reports", "1.0.0")
//!     .task_store(Arc::new(store))
//!     .tool(ToolDef::new("nightly_report", "Builds the report", |ctx: Ctx| async move {
//!         ctx.into_task().await;
//!         "Nightly report ready."
//!     }).task(TaskSupport::Required))
//!     .build()?;
//! # drop(server); Ok(()) }
//! ```
//!
//! How it keeps them: one table, one row per task, the
//! [`tern_server::task::TaskRecord`] as JSON beside the columns the store
//! queries (dedupe key, the tally it is charged to —
//! [`TaskRecord::charged_to`](tern_server::task::TaskRecord::charged_to) —,
//! version, liveness, result bytes, expiry), and a second table with one
//! row of running totals per tally (`tern_task_tally_v1`), kept by triggers
//! in the same transaction as every insert, replace, remove and sweep, so
//! the quota check of a create reads one row, however many tasks the owner
//! has. A file made before that table gets it on the first open, filled
//! from the rows already there. The
//! database runs in WAL mode with `synchronous = FULL`, so a record is on
//! disk when [`TaskStore::create`] returns (the extension requires the task
//! to exist before `CreateTaskResult` is sent). Every write is a
//! compare-and-swap on the version (see [`tern_server::task::store`]);
//! several processes may share the file (SQLite's own locking), one machine
//! only. Calls run on tokio's blocking pool.
//!
//! Features: none. Stability: pre-1.0; the table layout is versioned by its
//! names (`tern_tasks_v1`, `tern_task_tally_v1`).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use tern_server::replay::BoxFuture;
use tern_server::task::{Created, Lease, TaskQuota, TaskRecord, TaskStore, TaskStoreError};

/// Task records in one SQLite file. Cheap to clone (one shared connection).
///
/// ```
/// use std::sync::Arc;
/// use tern_sqlite::SqliteTaskStore;
///
/// let path = std::env::temp_dir().join(format!("tern-doc-{}.sqlite", std::process::id()));
/// let tasks = SqliteTaskStore::open(&path)?;
/// let server = tern_server::Server::builder("app", "1.0.0")
///     .task_store(Arc::new(tasks))
///     .build()?;
/// # drop(server); let _ = std::fs::remove_file(&path);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct SqliteTaskStore {
    conn: Arc<Mutex<Connection>>,
}

const SCHEMA: &str = "
PRAGMA journal_mode = WAL;
PRAGMA synchronous = FULL;
PRAGMA busy_timeout = 5000;
CREATE TABLE IF NOT EXISTS tern_tasks_v1 (
    task_id TEXT PRIMARY KEY,
    key TEXT NOT NULL,
    owner TEXT,
    version INTEGER NOT NULL,
    live INTEGER NOT NULL,
    result_bytes INTEGER NOT NULL,
    expires_at INTEGER,
    record TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS tern_tasks_v1_key ON tern_tasks_v1(key);
CREATE INDEX IF NOT EXISTS tern_tasks_v1_owner ON tern_tasks_v1(owner);
CREATE INDEX IF NOT EXISTS tern_tasks_v1_expiry ON tern_tasks_v1(expires_at);
";

/// Each tally's running totals, kept by triggers in the transaction of
/// every insert, update and delete of a task row (a create, a replace, a
/// remove, the sweep of expired rows): whatever writes the rows, the
/// quota check reads one row instead of a `SUM` over the owner's.
/// Anonymous callers with no peer are `-` (owners and peers are hex
/// digests). Created, and filled from the rows already there, by
/// [`migrate`].
const TALLY: &str = "
CREATE TABLE tern_task_tally_v1 (
    owner TEXT PRIMARY KEY NOT NULL,
    live INTEGER NOT NULL,
    bytes INTEGER NOT NULL
);
INSERT INTO tern_task_tally_v1 (owner, live, bytes)
    SELECT COALESCE(owner, '-'), SUM(live), SUM(result_bytes) FROM tern_tasks_v1
    GROUP BY COALESCE(owner, '-');
CREATE TRIGGER tern_tasks_v1_tally_insert AFTER INSERT ON tern_tasks_v1 BEGIN
    INSERT INTO tern_task_tally_v1 (owner, live, bytes)
        VALUES (COALESCE(NEW.owner, '-'), NEW.live, NEW.result_bytes)
        ON CONFLICT (owner) DO UPDATE SET live = live + excluded.live,
            bytes = bytes + excluded.bytes;
END;
CREATE TRIGGER tern_tasks_v1_tally_delete AFTER DELETE ON tern_tasks_v1 BEGIN
    UPDATE tern_task_tally_v1 SET live = live - OLD.live, bytes = bytes - OLD.result_bytes
        WHERE owner = COALESCE(OLD.owner, '-');
    DELETE FROM tern_task_tally_v1
        WHERE owner = COALESCE(OLD.owner, '-') AND live = 0 AND bytes = 0;
END;
CREATE TRIGGER tern_tasks_v1_tally_update AFTER UPDATE OF owner, live, result_bytes
    ON tern_tasks_v1 BEGIN
    UPDATE tern_task_tally_v1 SET live = live - OLD.live, bytes = bytes - OLD.result_bytes
        WHERE owner = COALESCE(OLD.owner, '-');
    INSERT INTO tern_task_tally_v1 (owner, live, bytes)
        VALUES (COALESCE(NEW.owner, '-'), NEW.live, NEW.result_bytes)
        ON CONFLICT (owner) DO UPDATE SET live = live + excluded.live,
            bytes = bytes + excluded.bytes;
    DELETE FROM tern_task_tally_v1
        WHERE owner = COALESCE(OLD.owner, '-') AND live = 0 AND bytes = 0;
END;
";

/// Adds the tally to a file made before it (one transaction, so two
/// processes opening the file together add it once).
fn migrate(conn: &mut Connection) -> Result<(), TaskStoreError> {
    let tx = conn
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .map_err(err)?;
    let has_tally: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master \
             WHERE type = 'table' AND name = 'tern_task_tally_v1')",
            [],
            |row| row.get(0),
        )
        .map_err(err)?;
    if !has_tally {
        tx.execute_batch(TALLY).map_err(err)?;
    }
    // Durable tasks: recoverable rows by lease deadline, for claim_lapsed.
    let has_deadline: bool = tx
        .query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info('tern_tasks_v1') \
             WHERE name = 'lease_deadline')",
            [],
            |row| row.get(0),
        )
        .map_err(err)?;
    if !has_deadline {
        tx.execute_batch(LEASE_DEADLINE).map_err(err)?;
    }
    tx.commit().map_err(err)
}

/// The lease deadline of recoverable records (`NULL` for the others), and
/// its index: a lapsed task is found without a scan.
const LEASE_DEADLINE: &str = "
ALTER TABLE tern_tasks_v1 ADD COLUMN lease_deadline INTEGER;
CREATE INDEX tern_tasks_v1_lease_deadline ON tern_tasks_v1(lease_deadline)
    WHERE lease_deadline IS NOT NULL;
";

fn err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> TaskStoreError {
    TaskStoreError::new(e)
}

/// SQLite integers are signed: times and sizes beyond `i64::MAX` saturate.
fn int(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

impl SqliteTaskStore {
    /// Opens (or creates) the store in the file at `path`.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, TaskStoreError> {
        let mut conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
        migrate(&mut conn)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    /// Runs `f` on the connection on tokio's blocking pool.
    fn with<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, TaskStoreError> + Send + 'static,
    ) -> BoxFuture<'_, Result<T, TaskStoreError>> {
        let conn = Arc::clone(&self.conn);
        Box::pin(async move {
            tokio::task::spawn_blocking(move || {
                let mut conn = conn
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                f(&mut conn)
            })
            .await
            .map_err(err)?
        })
    }
}

/// The compare-and-swap write of `record` (its stored version is
/// `version - 1`).
fn write(conn: &Connection, record: &TaskRecord) -> Result<bool, TaskStoreError> {
    let json = serde_json::to_string(record).map_err(err)?;
    let changed = conn
        .prepare_cached(
            "UPDATE tern_tasks_v1 SET version = ?1, live = ?2, result_bytes = ?3, \
             expires_at = ?4, record = ?5, lease_deadline = ?8 \
             WHERE task_id = ?6 AND version = ?7",
        )
        .map_err(err)?
        .execute(params![
            int(record.version),
            i64::from(!record.status.is_terminal()),
            int(record.result_bytes),
            record.expires_at.map(int),
            json,
            record.task_id,
            int(record.version.saturating_sub(1)),
            record.lease_deadline().map(int)
        ])
        .map_err(err)?;
    Ok(changed == 1)
}

fn decode(json: &str) -> Result<TaskRecord, TaskStoreError> {
    serde_json::from_str(json).map_err(err)
}

// Every statement is prepared once per connection (`prepare_cached`), not
// parsed again on each call.
impl TaskStore for SqliteTaskStore {
    fn create(
        &self,
        record: TaskRecord,
        quota: TaskQuota,
        now: u64,
    ) -> BoxFuture<'_, Result<Created, TaskStoreError>> {
        self.with(move |conn| {
            let json = serde_json::to_string(&record).map_err(err)?;
            let charged_to = record.charged_to().unwrap_or("-").to_owned();
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err)?;
            tx.prepare_cached(
                "DELETE FROM tern_tasks_v1 WHERE expires_at IS NOT NULL AND expires_at <= ?1",
            )
            .map_err(err)?
            .execute(params![int(now)])
            .map_err(err)?;
            let existing: Option<String> = tx
                .prepare_cached("SELECT record FROM tern_tasks_v1 WHERE key = ?1")
                .map_err(err)?
                .query_row(params![record.key], |row| row.get(0))
                .optional()
                .map_err(err)?;
            if let Some(existing) = existing {
                return Ok(Created::Existing(Box::new(decode(&existing)?)));
            }
            // The sweep above took the expired rows off the tally (its
            // trigger): the row read here counts live records only.
            let (live, bytes): (i64, i64) = tx
                .prepare_cached("SELECT live, bytes FROM tern_task_tally_v1 WHERE owner = ?1")
                .map_err(err)?
                .query_row(params![charged_to], |row| Ok((row.get(0)?, row.get(1)?)))
                .optional()
                .map_err(err)?
                .unwrap_or((0, 0));
            if usize::try_from(live).unwrap_or(usize::MAX) >= quota.max_live
                || u64::try_from(bytes).unwrap_or(0) > quota.max_result_bytes
            {
                return Ok(Created::OverQuota);
            }
            tx.prepare_cached(
                "INSERT INTO tern_tasks_v1 \
                 (task_id, key, owner, version, live, result_bytes, expires_at, record, \
                 lease_deadline) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )
            .map_err(err)?
            .execute(params![
                record.task_id,
                record.key,
                charged_to,
                int(record.version),
                i64::from(!record.status.is_terminal()),
                int(record.result_bytes),
                record.expires_at.map(int),
                json,
                record.lease_deadline().map(int)
            ])
            .map_err(err)?;
            tx.commit().map_err(err)?;
            Ok(Created::New)
        })
    }

    fn load(
        &self,
        task_id: &str,
        now: u64,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        let task_id = task_id.to_owned();
        self.with(move |conn| {
            let json: Option<String> = conn
                .prepare_cached(
                    "SELECT record FROM tern_tasks_v1 WHERE task_id = ?1 \
                     AND (expires_at IS NULL OR expires_at > ?2)",
                )
                .map_err(err)?
                .query_row(params![task_id, int(now)], |row| row.get(0))
                .optional()
                .map_err(err)?;
            json.as_deref().map(decode).transpose()
        })
    }

    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>> {
        self.with(move |conn| write(conn, &record))
    }

    fn claim_lapsed(
        &self,
        now: u64,
        lease: Lease,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        self.with(move |conn| {
            // Most calls find nothing: a read first, without the write lock
            // (the recovery loop asks every second).
            let any: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM tern_tasks_v1 \
                     WHERE lease_deadline IS NOT NULL AND lease_deadline <= ?1 \
                     AND (expires_at IS NULL OR expires_at > ?1))",
                )
                .map_err(err)?
                .query_row(params![int(now)], |row| row.get(0))
                .map_err(err)?;
            if !any {
                return Ok(None);
            }
            // Then one transaction taking the write lock first: two
            // processes on the file never claim the same row.
            let tx = conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err)?;
            let found: Option<String> = tx
                .prepare_cached(
                    "SELECT record FROM tern_tasks_v1 \
                     WHERE lease_deadline IS NOT NULL AND lease_deadline <= ?1 \
                     AND (expires_at IS NULL OR expires_at > ?1) \
                     ORDER BY lease_deadline LIMIT 1",
                )
                .map_err(err)?
                .query_row(params![int(now)], |row| row.get(0))
                .optional()
                .map_err(err)?;
            let Some(found) = found else {
                return Ok(None);
            };
            let mut record = decode(&found)?;
            record.lease = Some(lease);
            record.version += 1;
            if !write(&tx, &record)? {
                return Ok(None);
            }
            tx.commit().map_err(err)?;
            Ok(Some(record))
        })
    }

    fn remove(&self, task_id: &str) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        let task_id = task_id.to_owned();
        self.with(move |conn| {
            conn.prepare_cached("DELETE FROM tern_tasks_v1 WHERE task_id = ?1")
                .map_err(err)?
                .execute(params![task_id])
                .map_err(err)?;
            Ok(())
        })
    }

    fn is_durable(&self) -> bool {
        true
    }
}
