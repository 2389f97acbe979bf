//! `tern-sqlite`: the store contract shared with the memory store, and task
//! records and results surviving a close and reopen of the file, driven
//! through a real server.

#![allow(unreachable_pub, reason = "items of the test crate's modules")]
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::ClientCapabilities;
use tern_protocol::task::TASKS_EXTENSION;
use tern_server::error::codes;
use tern_server::testing::{
    ManualClock, TestClient, task_store_contract, task_store_recovery_contract,
};
use tern_server::{Ctx, Server, TaskConfig, TaskSupport, ToolDef};
use tern_sqlite::SqliteTaskStore;

/// A fresh database file, removed (with its WAL files) on drop.
struct TempDb(PathBuf);

impl TempDb {
    fn new() -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("tern-sqlite-test-{}-{n}.db", std::process::id()));
        let db = Self(path);
        db.clean();
        db
    }

    fn clean(&self) {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = self.0.clone().into_os_string();
            p.push(suffix);
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for TempDb {
    fn drop(&mut self) {
        self.clean();
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn the_sqlite_store_meets_the_task_store_contract() {
    let dbs = std::sync::Mutex::new(Vec::new());
    runtime().block_on(task_store_contract(|| {
        let db = TempDb::new();
        let store = Arc::new(SqliteTaskStore::open(&db.0).unwrap());
        dbs.lock().unwrap().push(db);
        store
    }));
}

#[test]
fn the_sqlite_store_claims_lapsed_tasks() {
    let dbs = std::sync::Mutex::new(Vec::new());
    runtime().block_on(task_store_recovery_contract(|| {
        let db = TempDb::new();
        let store = Arc::new(SqliteTaskStore::open(&db.0).unwrap());
        dbs.lock().unwrap().push(db);
        store
    }));
}

/// A file made by a build before durable tasks opens, gains the lease
/// deadline column, and its old rows (no journal) are never claimed.
#[test]
fn a_file_from_before_durable_tasks_is_migrated() {
    let db = TempDb::new();
    {
        let conn = rusqlite::Connection::open(&db.0).unwrap();
        conn.execute_batch(
            "CREATE TABLE tern_tasks_v1 (task_id TEXT PRIMARY KEY, key TEXT NOT NULL, \
             owner TEXT, version INTEGER NOT NULL, live INTEGER NOT NULL, \
             result_bytes INTEGER NOT NULL, expires_at INTEGER, record TEXT NOT NULL);",
        )
        .unwrap();
    }
    runtime().block_on(async {
        use tern_server::task::TaskStore as _;
        let store = SqliteTaskStore::open(&db.0).unwrap();
        let now = 1_800_000_000_000;
        let r = tern_server::testing::task_record("old", "k", now);
        let quota = tern_server::task::TaskQuota::new(10, 1 << 20);
        store.create(r, quota, now).await.unwrap();
        let lease = tern_server::task::Lease::new("t", now + 90_000);
        assert!(
            store
                .claim_lapsed(now + 40_000, lease)
                .await
                .unwrap()
                .is_none()
        );
        // Opened again: the migration is not applied twice.
        drop(store);
        SqliteTaskStore::open(&db.0).unwrap();
    });
}

fn server(db: &TempDb, clock: &Arc<ManualClock>) -> Server {
    Server::builder("sqlite-test", "1")
        .task_store(Arc::new(SqliteTaskStore::open(&db.0).unwrap()))
        .task_config(
            TaskConfig::default()
                .lease(Duration::from_secs(30))
                .ttl(Duration::from_secs(36_000)),
        )
        .clock(Arc::clone(clock) as Arc<dyn tern_server::Clock>)
        .tool(
            ToolDef::new("quick", "", |ctx: Ctx| async move {
                ctx.into_task().await;
                "quick result"
            })
            .task(TaskSupport::Required),
        )
        .tool(
            ToolDef::new("forever", "", |ctx: Ctx| async move {
                ctx.into_task().await;
                ctx.cancelled().await;
                "never"
            })
            .task(TaskSupport::Required),
        )
        .build()
        .unwrap()
}

fn client(server: &Server) -> TestClient {
    TestClient::new(server.clone())
        .with_capabilities(ClientCapabilities::default().with_extension(TASKS_EXTENSION))
}

async fn create(c: &TestClient, tool: &str) -> String {
    let r = c.call_tool(tool, json!({})).await.result().unwrap();
    r["taskId"].as_str().unwrap().to_owned()
}

async fn get(c: &TestClient, id: &str) -> Value {
    c.send("tasks/get", json!({"taskId": id}))
        .await
        .result()
        .unwrap()
}

/// Polls until the task is terminal: at most 500 polls, 10 ms apart.
async fn terminal(c: &TestClient, id: &str) -> Value {
    for _ in 0..500 {
        let t = get(c, id).await;
        if matches!(
            t["status"].as_str(),
            Some("completed" | "failed" | "cancelled")
        ) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never ended");
}

#[test]
fn a_completed_tasks_record_and_result_survive_close_and_reopen() {
    let db = TempDb::new();
    let clock = ManualClock::new();
    let id = runtime().block_on(async {
        let s = server(&db, &clock);
        let c = client(&s);
        let id = create(&c, "quick").await;
        let t = terminal(&c, &id).await;
        assert_eq!(t["status"], "completed");
        id
    });
    // A new process, as far as the store can tell: a new runtime, server
    // and connection to the same file.
    runtime().block_on(async {
        let s = server(&db, &clock);
        let t = get(&client(&s), &id).await;
        assert_eq!(t["status"], "completed");
        assert_eq!(t["result"]["content"][0]["text"], "quick result");
    });
}

#[test]
fn a_task_stopped_cleanly_reads_failed_after_a_restart() {
    let db = TempDb::new();
    let clock = ManualClock::new();
    let id = runtime().block_on(async {
        let s = server(&db, &clock);
        let id = create(&client(&s), "forever").await;
        s.stop_tasks().await;
        id
    });
    runtime().block_on(async {
        let s = server(&db, &clock);
        let t = get(&client(&s), &id).await;
        assert_eq!(t["status"], "failed");
        assert_eq!(t["error"]["code"], codes::OUTCOME_UNKNOWN);
    });
}

#[test]
fn a_task_whose_process_died_reads_failed_once_its_lease_lapses() {
    let db = TempDb::new();
    let clock = ManualClock::new();
    let id = {
        // The runtime is dropped with the runner still inside: the process
        // "died" with the task working and its lease held.
        let rt = runtime();
        let id = rt.block_on(async {
            let s = server(&db, &clock);
            let c = client(&s);
            let id = create(&c, "forever").await;
            assert_eq!(get(&c, &id).await["status"], "working");
            id
        });
        drop(rt);
        id
    };
    runtime().block_on(async {
        let s = server(&db, &clock);
        let c = client(&s);
        assert_eq!(
            get(&c, &id).await["status"],
            "working",
            "the lease still holds"
        );
        clock.tick(Duration::from_secs(31));
        let t = get(&c, &id).await;
        assert_eq!(t["status"], "failed");
        assert_eq!(t["error"]["code"], codes::OUTCOME_UNKNOWN);
    });
}

/// Each tally's (owner, live, bytes), sorted by owner (`-`: anonymous).
type Tallies = Vec<(String, i64, i64)>;

/// The tally table, and what a `SUM` over the rows says it should hold.
fn tally_and_sums(path: &std::path::Path) -> (Tallies, Tallies) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let rows = |sql: &str| -> Tallies {
        let mut stmt = conn.prepare(sql).unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    (
        rows("SELECT owner, live, bytes FROM tern_task_tally_v1 ORDER BY owner"),
        rows(
            "SELECT COALESCE(owner, '-') AS o, SUM(live), SUM(result_bytes) FROM tern_tasks_v1 \
             GROUP BY o HAVING SUM(live) > 0 OR SUM(result_bytes) > 0 ORDER BY o",
        ),
    )
}

/// A file written before the per-owner tally gets one, filled from its rows
/// (once, however often it is opened), and every write after — creates,
/// finishes, removals, the sweep of expired rows — keeps each owner's row
/// equal to the sum over its records: the quota check reads that one row
/// instead of summing the owner's records on every create.
#[test]
fn a_file_from_before_the_tally_gets_one_and_every_write_keeps_it_exact() {
    use tern_protocol::task::TaskStatus;
    use tern_server::task::{Created, TaskQuota, TaskStore as _};
    const NOW: u64 = 1_800_000_000_000;
    let db = TempDb::new();
    {
        // The layout as the store wrote it before (rows of two owners and
        // the anonymous one; one finished with a result).
        let conn = rusqlite::Connection::open(&db.0).unwrap();
        conn.execute_batch(
            "CREATE TABLE tern_tasks_v1 (task_id TEXT PRIMARY KEY, key TEXT NOT NULL, owner TEXT, \
             version INTEGER NOT NULL, live INTEGER NOT NULL, result_bytes INTEGER NOT NULL, \
             expires_at INTEGER, record TEXT NOT NULL);",
        )
        .unwrap();
        for (id, owner, live, bytes) in [
            ("old-1", Some("o"), 1, 2048),
            ("old-2", Some("o"), 0, 9000),
            ("old-3", None, 1, 2048),
            ("old-4", Some("p"), 1, 2048),
        ] {
            let mut r = tern_server::testing::task_record(id, &format!("k-{id}"), NOW);
            r.owner = owner.map(str::to_owned);
            r.result_bytes = bytes;
            conn.execute(
                "INSERT INTO tern_tasks_v1 VALUES (?1, ?2, ?3, 1, ?4, ?5, ?6, ?7)",
                rusqlite::params![
                    id,
                    r.key,
                    owner,
                    live,
                    bytes,
                    i64::try_from(NOW + 60_000).unwrap(),
                    serde_json::to_string(&r).unwrap()
                ],
            )
            .unwrap();
        }
    }
    let store = SqliteTaskStore::open(&db.0).unwrap();
    let _again = SqliteTaskStore::open(&db.0).unwrap();
    let (tally, sums) = tally_and_sums(&db.0);
    assert_eq!(
        tally,
        vec![
            ("-".to_owned(), 1, 2048),
            ("o".to_owned(), 1, 11_048),
            ("p".to_owned(), 1, 2048)
        ]
    );
    assert_eq!(tally, sums);
    let quota = TaskQuota::new(100, 1 << 30);
    let check = |why: &str| {
        let (tally, sums) = tally_and_sums(&db.0);
        assert_eq!(tally, sums, "the tally after {why}");
    };
    runtime().block_on(async {
        for i in 0..5 {
            let mut r = tern_server::testing::task_record(&format!("n{i}"), &format!("kn{i}"), NOW);
            r.owner = Some("o".to_owned());
            r.quota_key = (i % 2 == 0).then(|| "peer".to_owned());
            r.result_bytes = 2048;
            assert_eq!(store.create(r, quota, NOW).await.unwrap(), Created::New);
        }
        check("creates");
        let mut done = store.load("n1", NOW).await.unwrap().unwrap();
        done.version += 1;
        done.status = TaskStatus::Completed;
        done.result_bytes = 4096;
        assert!(store.replace(done).await.unwrap());
        let mut old = store.load("old-1", NOW).await.unwrap().unwrap();
        old.version += 1;
        old.status = TaskStatus::Failed;
        assert!(store.replace(old).await.unwrap());
        check("replaces");
        store.remove("n3").await.unwrap();
        store.remove("old-3").await.unwrap();
        check("removes");
        // Everything has expired by now: a create sweeps it all.
        let later = NOW + 61_000;
        let r = tern_server::testing::task_record("late", "k-late", later);
        assert_eq!(store.create(r, quota, later).await.unwrap(), Created::New);
        check("the sweep");
        let (tally, _) = tally_and_sums(&db.0);
        assert_eq!(
            tally,
            vec![("-".to_owned(), 1, 0)],
            "only the last create is left"
        );
    });
}
