//! `tern-sqlite`: the embedded durable task store of tern. One SQLite file
//! keeps every task's record and result, so they survive a restart of the
//! server: a client that polls after the restart still reads the result of
//! a task that completed before it.
//!
//! A task's *handler* does not survive a restart (it was a future in the old
//! process): a task that was still running reads `failed` with
//! [`tern_server::error::codes::OUTCOME_UNKNOWN`] once its lease lapses, or
//! at once when the server stopped cleanly
//! ([`tern_server::Server::stop_tasks`]).
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
//! queries (dedupe key, owner, version, liveness, result bytes, expiry). The
//! database runs in WAL mode with `synchronous = FULL`, so a record is on
//! disk when [`TaskStore::create`] returns (the extension requires the task
//! to exist before `CreateTaskResult` is sent). Every write is a
//! compare-and-swap on the version (see [`tern_server::task::store`]);
//! several processes may share the file (SQLite's own locking), one machine
//! only. Calls run on tokio's blocking pool.
//!
//! Features: none. Stability: pre-1.0; the table layout is versioned by its
//! name (`tern_tasks_v1`).

use std::path::Path;
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, OptionalExtension, params};
use tern_server::replay::BoxFuture;
use tern_server::task::{Created, TaskQuota, TaskRecord, TaskStore, TaskStoreError};

/// Task records in one SQLite file. Cheap to clone (one shared connection).
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
        let conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(SCHEMA).map_err(err)?;
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
            let (live, bytes): (i64, i64) = tx
                .prepare_cached(
                    "SELECT COALESCE(SUM(live), 0), COALESCE(SUM(result_bytes), 0) \
                     FROM tern_tasks_v1 WHERE owner IS ?1",
                )
                .map_err(err)?
                .query_row(params![record.owner], |row| Ok((row.get(0)?, row.get(1)?)))
                .map_err(err)?;
            if usize::try_from(live).unwrap_or(usize::MAX) >= quota.max_live
                || u64::try_from(bytes).unwrap_or(0) > quota.max_result_bytes
            {
                return Ok(Created::OverQuota);
            }
            tx.prepare_cached(
                "INSERT INTO tern_tasks_v1 \
                 (task_id, key, owner, version, live, result_bytes, expires_at, record) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )
            .map_err(err)?
            .execute(params![
                record.task_id,
                record.key,
                record.owner,
                int(record.version),
                i64::from(!record.status.is_terminal()),
                int(record.result_bytes),
                record.expires_at.map(int),
                json
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
        self.with(move |conn| {
            let json = serde_json::to_string(&record).map_err(err)?;
            let changed = conn
                .prepare_cached(
                    "UPDATE tern_tasks_v1 SET version = ?1, live = ?2, result_bytes = ?3, \
                     expires_at = ?4, record = ?5 WHERE task_id = ?6 AND version = ?7",
                )
                .map_err(err)?
                .execute(params![
                    int(record.version),
                    i64::from(!record.status.is_terminal()),
                    int(record.result_bytes),
                    record.expires_at.map(int),
                    json,
                    record.task_id,
                    int(record.version.saturating_sub(1))
                ])
                .map_err(err)?;
            Ok(changed == 1)
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
