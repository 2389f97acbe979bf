//! The demo's task tools (issue 11) against `tern serve demo --stdio`, with
//! tern's client: `import_dataset` as a task (skip and abort) and inline
//! through MRTR, `nightly_report` refused without the extension and run with
//! it, and a SQLite task store that a fresh child process still reads.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tern_client::transport::BoxFuture;
use tern_client::transport::stdio::ChildProcess;
use tern_client::{CallOptions, Client, Elicitation, ErrorKind, HandlerError, Question};
use tern_protocol::elicitation::{ElicitRequestFormParams, ElicitResult};
use tern_protocol::task::Task;
use tern_protocol::tool::CallToolResult;

const BOUND: Duration = Duration::from_secs(60);

/// Answers `on_error` with a fixed choice, counting the questions.
struct OnError(&'static str, Arc<std::sync::atomic::AtomicU32>);

impl Elicitation for OnError {
    fn form(
        &self,
        question: Question,
        _form: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        assert!(question.key.starts_with("on_error"), "{}", question.key);
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let result: ElicitResult =
            serde_json::from_value(json!({"action": "accept", "content": {"on_error": self.0}}))
                .unwrap();
        Box::pin(async move { Ok(result) })
    }
}

fn demo(
    tasks: bool,
    answer: &'static str,
    extra: &[&str],
) -> (Client, Arc<std::sync::atomic::AtomicU32>) {
    let mut args: Vec<String> = ["serve", "demo", "--stdio"].map(String::from).to_vec();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    let child = ChildProcess::spawn(env!("CARGO_BIN_EXE_tern"), &args).unwrap();
    let asked = Arc::default();
    let client = Client::builder()
        .tasks(tasks)
        .elicitation(OnError(answer, Arc::clone(&asked)))
        .build(child);
    (client, asked)
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(result).unwrap()["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned()
}

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(BOUND, f)
        .await
        .expect("bounded wait timed out")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_dataset_as_a_task_reports_rows_and_skips() {
    let (client, asked) = demo(true, "skip", &[]);
    let messages = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&messages);
    let options = CallOptions::default().on_task_status(Arc::new(move |t: &Task| {
        if let Some(m) = &t.status_message {
            seen.lock().unwrap().push(m.clone());
        }
    }));
    let result =
        bounded(client.call_tool_with("import_dataset", Some(json!({"rows": 8})), &options))
            .await
            .unwrap();
    assert_eq!(text(&result), "Imported 6 rows (skipped 2).");
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);
    let messages = messages.lock().unwrap().clone();
    let (last, running) = messages.split_last().unwrap();
    assert!(!running.is_empty(), "{messages:?}");
    assert!(
        running
            .iter()
            .all(|m| m.starts_with("imported ") && m.ends_with(" of 8 rows")),
        "{messages:?}"
    );
    assert!(
        !last.starts_with("imported 8"),
        "the end has the server's own message: {messages:?}"
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_dataset_as_a_task_aborts_halfway() {
    let (client, _) = demo(true, "abort", &[]);
    let result = bounded(client.call_tool("import_dataset", Some(json!({"rows": 6}))))
        .await
        .unwrap();
    assert_eq!(text(&result), "Import aborted after 3 rows.");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_dataset_without_the_extension_runs_inline() {
    let (client, asked) = demo(false, "skip", &[]);
    let result = bounded(client.call_tool("import_dataset", Some(json!({"rows": 4}))))
        .await
        .unwrap();
    assert_eq!(text(&result), "Imported 2 rows (skipped 2).");
    assert_eq!(asked.load(std::sync::atomic::Ordering::Relaxed), 1);
    let e = bounded(client.call_tool("import_dataset", Some(json!({"rows": 1}))))
        .await
        .unwrap();
    assert_eq!(e.is_error, Some(true), "too few rows is a tool error");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nightly_report_needs_the_extension() {
    let (client, _) = demo(false, "skip", &[]);
    let e = bounded(client.call_tool("nightly_report", None))
        .await
        .unwrap_err();
    assert_eq!(e.rpc_error().map(|r| r.code), Some(-32021), "{e:#}");
    client.close().await;
    let (client, _) = demo(true, "skip", &[]);
    let result = bounded(client.call_tool("nightly_report", None))
        .await
        .unwrap();
    assert_eq!(text(&result), "Nightly report ready.");
    client.close().await;
}

/// With `--tasks sqlite:PATH` a task outlives its process: a fresh stdio
/// child reads the finished task by id; with the memory store it does not.
#[cfg(feature = "sqlite")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_store_is_read_by_a_fresh_child() {
    let dir = std::env::temp_dir().join(format!("tern-demo-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("tasks.db");
    let spec = format!("sqlite:{}", db.display());
    let id = Arc::new(std::sync::Mutex::new(None::<String>));
    let keep = Arc::clone(&id);
    let options = CallOptions::default().on_task_created(Arc::new(move |t: &Task| {
        *keep.lock().unwrap() = Some(t.task_id.clone());
    }));
    let (first, _) = demo(true, "skip", &["--tasks", &spec]);
    let result = bounded(first.call_tool_with("nightly_report", None, &options))
        .await
        .unwrap();
    assert_eq!(text(&result), "Nightly report ready.");
    first.close().await;
    let id = id.lock().unwrap().clone().unwrap();

    let (second, _) = demo(true, "skip", &["--tasks", &spec]);
    let task = bounded(second.task(id.clone()).get()).await.unwrap();
    assert_eq!(task.task.status, tern_protocol::task::TaskStatus::Completed);
    let again: CallToolResult = serde_json::from_value(task.result.unwrap().into()).unwrap();
    assert_eq!(text(&again), "Nightly report ready.");
    second.close().await;

    let (memory, _) = demo(true, "skip", &[]);
    let e = bounded(memory.task(id).get()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TaskLost, "{e:#}");
    memory.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// The demo over HTTP on a loopback port, with `extra` options; its URL.
pub struct Http(std::process::Child, pub String);

impl Drop for Http {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn serve_http(extra: &[&str]) -> Http {
    use std::io::BufRead as _;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["serve", "demo", "--http", "127.0.0.1:0"])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines
            .next()
            .expect("the server says where it serves")
            .unwrap();
        if let Some(url) = line.split("serving the demo at ").nth(1) {
            break url.trim().to_owned();
        }
    };
    Http(child, url)
}

fn http_client(url: &str, token: Option<&str>) -> Client {
    let mut transport = tern_client::transport::http::HttpTransport::new(url).unwrap();
    if let Some(token) = token {
        transport = transport.with_header("authorization", format!("Bearer {token}"));
    }
    Client::builder()
        .tasks(true)
        .elicitation(OnError("skip", Arc::default()))
        .build(transport)
}

/// `--tokens FILE`: a request without a known bearer token is refused; a
/// task belongs to the principal its token names, so another user's token
/// gets the same `-32602` as an unknown id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_name_the_principal_that_owns_a_task() {
    let dir = std::env::temp_dir().join(format!("tern-demo-tokens-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens");
    std::fs::write(
        &file,
        "# token principal\nalice-token alice\nbob-token bob\n",
    )
    .unwrap();
    let server = serve_http(&["--tokens", &file.display().to_string()]);

    let anonymous = http_client(&server.1, None);
    let e = bounded(anonymous.call_tool("nightly_report", None))
        .await
        .unwrap_err();
    assert!(e.rpc_error().is_none(), "refused before MCP: {e:#}");
    let wrong = http_client(&server.1, Some("mallory-token"));
    assert!(
        bounded(wrong.call_tool("nightly_report", None))
            .await
            .is_err()
    );

    let alice = http_client(&server.1, Some("alice-token"));
    let tern_client::Started::Task(handle) =
        bounded(alice.start_tool("nightly_report", None, &CallOptions::default()))
            .await
            .unwrap()
    else {
        panic!("nightly_report is a task")
    };
    let id = handle.detach();
    let bob = http_client(&server.1, Some("bob-token"));
    let e = bounded(bob.task(id.clone()).get()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TaskLost, "{e:#}");
    let result = bounded(alice.task(id).wait(&CallOptions::default()))
        .await
        .unwrap();
    assert_eq!(text(&result), "Nightly report ready.");
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
