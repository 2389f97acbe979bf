//! The demo's imports: each batch `import_dataset` imports is recorded once
//! by an idempotency key (the task and the batch number), and
//! `demo://imports/{taskId}` reads them back, one line per batch, so a test
//! can count that no batch was imported twice however often its runner
//! died. Kept apart from the task store, as a real import's rows would be:
//! in fleet mode a Redis list (one script: `SET NX` on the batch's key,
//! then `RPUSH`), with `--tasks sqlite:PATH` an SQLite file of the demo's
//! own beside it (`PATH.imports`), otherwise this process's memory.

use std::collections::BTreeMap;
#[cfg(feature = "sqlite")]
use std::path::Path;
use std::sync::{Arc, Mutex};

#[cfg(feature = "fleet")]
use redis::aio::ConnectionManager;
#[cfg(feature = "fleet")]
use tern_redis::RedisOptions;

/// The resource template of one import's lines.
pub const IMPORTS_TEMPLATE: &str = "demo://imports/{taskId}";

#[cfg(feature = "fleet")]
/// KEYS: the batch's mark, the import's list. ARGV: the line, how long
/// both are kept (ms). 1 when the line was appended, 0 when the batch was
/// already recorded.
const RECORD: &str = r"
if not redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[2]) then return 0 end
redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
return 1
";

#[cfg(feature = "fleet")]
/// How long an import's lines are kept in Redis: a day.
const KEPT_MS: u64 = 86_400_000;

/// Each import's lines in memory, with the batch each records (`None`: a
/// line with no idempotency key).
pub type MemoryImports = Arc<Mutex<BTreeMap<String, Vec<(Option<u32>, String)>>>>;

/// Where the imports are recorded.
#[derive(Clone)]
pub enum Imports {
    /// This process's memory.
    Memory(MemoryImports),
    /// An SQLite file of the demo's own.
    #[cfg(feature = "sqlite")]
    Sqlite(Arc<Mutex<rusqlite::Connection>>),
    /// The fleet's Redis.
    #[cfg(feature = "fleet")]
    Redis {
        /// The connection.
        conn: ConnectionManager,
        /// `RECORD`.
        script: Arc<redis::Script>,
        /// `PREFIX:import`.
        prefix: String,
    },
}

impl std::fmt::Debug for Imports {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Memory(_) => "Imports::Memory",
            #[cfg(feature = "sqlite")]
            Self::Sqlite(_) => "Imports::Sqlite",
            #[cfg(feature = "fleet")]
            Self::Redis { .. } => "Imports::Redis",
        })
    }
}

impl Default for Imports {
    fn default() -> Self {
        Self::memory()
    }
}

impl Imports {
    /// In this process's memory.
    pub fn memory() -> Self {
        Self::Memory(Arc::default())
    }

    /// In the SQLite file at `path` (created if missing).
    ///
    /// # Errors
    /// The file cannot be opened.
    #[cfg(feature = "sqlite")]
    pub fn sqlite(path: &Path) -> Result<Self, String> {
        let conn = rusqlite::Connection::open(path)
            .and_then(|c| {
                c.execute_batch(
                    "PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; \
                     PRAGMA busy_timeout = 5000; \
                     CREATE TABLE IF NOT EXISTS demo_imports (\
                       n INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, \
                       batch INTEGER, line TEXT NOT NULL); \
                     CREATE UNIQUE INDEX IF NOT EXISTS demo_imports_batch \
                       ON demo_imports(task, batch) WHERE batch IS NOT NULL;",
                )
                .map(|()| c)
            })
            .map_err(|e| format!("cannot open the imports file {}: {e}", path.display()))?;
        Ok(Self::Sqlite(Arc::new(Mutex::new(conn))))
    }

    /// In the Redis at `url`, under `options`' prefix.
    ///
    /// # Errors
    /// Redis cannot be reached.
    #[cfg(feature = "fleet")]
    pub async fn redis(url: &str, options: &RedisOptions) -> Result<Self, String> {
        let conn = tern_redis::open_connection(url, options)
            .await
            .map_err(|e| crate::ledger::unreachable(url, &e))?;
        Ok(Self::Redis {
            conn,
            script: Arc::new(redis::Script::new(RECORD)),
            prefix: format!("{}:import", options.prefix),
        })
    }

    /// Records batch `batch` of import `task` as `line`, once: `false` when
    /// that batch was recorded before (a step run again after its runner
    /// died inside it).
    ///
    /// # Errors
    /// The store failed.
    pub async fn record(&self, task: &str, batch: u32, line: &str) -> Result<bool, String> {
        self.write(task, Some(batch), line).await
    }

    /// Appends `line` to import `task` with no idempotency key (an effect
    /// that is not retry-safe: run twice, it shows twice).
    ///
    /// # Errors
    /// The store failed.
    pub async fn append(&self, task: &str, line: &str) -> Result<(), String> {
        self.write(task, None, line).await.map(drop)
    }

    #[cfg_attr(
        not(any(feature = "sqlite", feature = "fleet")),
        expect(clippy::unused_async, reason = "the SQLite and Redis stores await")
    )]
    async fn write(&self, task: &str, batch: Option<u32>, line: &str) -> Result<bool, String> {
        match self {
            Self::Memory(map) => {
                let mut map = map
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let lines = map.entry(task.to_owned()).or_default();
                if batch.is_some() && lines.iter().any(|(b, _)| *b == batch) {
                    return Ok(false);
                }
                lines.push((batch, line.to_owned()));
                Ok(true)
            }
            #[cfg(feature = "sqlite")]
            Self::Sqlite(conn) => {
                let (conn, task, line) = (Arc::clone(conn), task.to_owned(), line.to_owned());
                tokio::task::spawn_blocking(move || {
                    let conn = conn.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    conn.execute(
                        "INSERT OR IGNORE INTO demo_imports (task, batch, line) VALUES (?1, ?2, ?3)",
                        rusqlite::params![task, batch, line],
                    )
                    .map(|n| n == 1)
                    .map_err(|e| format!("the imports file failed: {e}"))
                })
                .await
                .map_err(|e| e.to_string())?
            }
            #[cfg(feature = "fleet")]
            Self::Redis {
                conn,
                script,
                prefix,
            } => {
                let list = format!("{prefix}:{task}");
                let Some(batch) = batch else {
                    let mut conn = conn.clone();
                    let _: i64 = redis::cmd("RPUSH")
                        .arg(&list)
                        .arg(line)
                        .query_async(&mut conn)
                        .await
                        .map_err(|e| format!("the imports are unreachable: {e}"))?;
                    return Ok(true);
                };
                let mark = format!("{prefix}:{task}:{batch}");
                let n: i64 = tern_redis::retry_once(|| {
                    let mut conn = conn.clone();
                    let mut invoke = script.prepare_invoke();
                    invoke.key(&mark).key(&list).arg(line).arg(KEPT_MS);
                    async move { invoke.invoke_async(&mut conn).await }
                })
                .await
                .map_err(|e| format!("the imports are unreachable: {e}"))?;
                Ok(n == 1)
            }
        }
    }

    /// Every line of import `task`, oldest first.
    ///
    /// # Errors
    /// The store failed.
    #[cfg_attr(
        not(any(feature = "sqlite", feature = "fleet")),
        expect(clippy::unused_async, reason = "the SQLite and Redis stores await")
    )]
    pub async fn lines(&self, task: &str) -> Result<Vec<String>, String> {
        match self {
            Self::Memory(map) => Ok(map
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(task)
                .map(|l| l.iter().map(|(_, line)| line.clone()).collect())
                .unwrap_or_default()),
            #[cfg(feature = "sqlite")]
            Self::Sqlite(conn) => {
                let (conn, task) = (Arc::clone(conn), task.to_owned());
                tokio::task::spawn_blocking(move || {
                    let conn = conn
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let mut q = conn
                        .prepare_cached("SELECT line FROM demo_imports WHERE task = ?1 ORDER BY n")
                        .map_err(|e| e.to_string())?;
                    q.query_map([task], |row| row.get::<_, String>(0))
                        .and_then(Iterator::collect)
                        .map_err(|e| format!("the imports file failed: {e}"))
                })
                .await
                .map_err(|e| e.to_string())?
            }
            #[cfg(feature = "fleet")]
            Self::Redis { conn, prefix, .. } => {
                let list = format!("{prefix}:{task}");
                tern_redis::retry_once(|| {
                    let mut conn = conn.clone();
                    let list = list.clone();
                    async move {
                        redis::cmd("LRANGE")
                            .arg(list)
                            .arg(0)
                            .arg(-1)
                            .query_async(&mut conn)
                            .await
                    }
                })
                .await
                .map_err(|e| format!("the imports are unreachable: {e}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Imports;

    #[tokio::test]
    async fn a_batch_is_recorded_once_and_an_unkeyed_line_each_time() {
        let dir = std::env::temp_dir().join(format!("tern-imports-{}", std::process::id()));
        let _ = std::fs::remove_file(&dir);
        let stores = [
            Some(Imports::memory()),
            #[cfg(feature = "sqlite")]
            Some(Imports::sqlite(&dir).unwrap()),
        ];
        for imports in stores.into_iter().flatten() {
            assert!(imports.record("t", 0, "batch 0").await.unwrap());
            assert!(
                !imports.record("t", 0, "batch 0").await.unwrap(),
                "{imports:?}"
            );
            assert!(imports.record("t", 1, "batch 1").await.unwrap());
            imports.append("t", "commit").await.unwrap();
            imports.append("t", "commit").await.unwrap();
            assert!(imports.record("u", 0, "other").await.unwrap());
            assert_eq!(
                imports.lines("t").await.unwrap(),
                ["batch 0", "batch 1", "commit", "commit"],
                "{imports:?}"
            );
        }
        let _ = std::fs::remove_file(&dir);
    }
}
