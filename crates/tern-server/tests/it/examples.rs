//! The examples of `examples/` run as a user runs them: each built binary
//! started, called with tern's client (answering the questions it asks),
//! and stopped.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern_client::transport::BoxFuture;
use tern_client::transport::http::HttpTransport;
use tern_client::transport::stdio::ChildProcess;
use tern_client::{CallOptions, Client, Elicitation, HandlerError, Question};
use tern_protocol::elicitation::{ElicitRequestFormParams, ElicitResult, ElicitValue};
use tern_protocol::task::Task;
use tokio::io::AsyncBufReadExt;

/// `target/<profile>/examples/NAME`, beside this test's `deps/` folder, where
/// `cargo build --examples` puts it (scripts/test builds them before the
/// tests; `cargo test` itself leaves only hashed test-harness copies).
fn example(name: &str) -> String {
    let exe = std::env::current_exe().unwrap();
    let profile = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path: PathBuf = profile.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is not built (scripts/test builds the examples first: cargo build --workspace --examples)",
        path.display()
    );
    path.to_string_lossy().into_owned()
}

/// Answers every form with fixed values, and remembers what was asked.
struct Answers {
    values: Vec<(&'static str, ElicitValue)>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl Elicitation for Answers {
    fn form(
        &self,
        _question: Question,
        params: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        self.asked.lock().unwrap().push(params.message.clone());
        let content = self
            .values
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        Box::pin(async move { Ok(ElicitResult::accept(content)) })
    }
}

fn text(result: &tern_protocol::tool::CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text())
        .collect::<Vec<_>>()
        .join("\n")
}

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the example did not answer within 60 s")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_server_greets() {
    let child = ChildProcess::spawn(&example("stdio_server"), &[]).unwrap();
    let watch = child.watch();
    let client = Client::builder().build(child);
    let result = bounded(client.call_tool("greet", Some(serde_json::json!({"name": "Ada"}))))
        .await
        .unwrap();
    assert_eq!(text(&result), "Hello, Ada!");
    // Wrong arguments are refused by the schema derived from the type, as
    // a tool execution error the model can read (Tools › Error Handling).
    let refused = bounded(client.call_tool("greet", Some(serde_json::json!({"name": 7}))))
        .await
        .unwrap();
    assert_eq!(refused.is_error, Some(true));
    assert!(text(&refused).contains("/name"), "{}", text(&refused));
    client.close().await;
    drop(watch);
}

/// Standard input and output that are files, not pipes (a shell's
/// `server <requests >replies`), or a pipe in and a file out: served by
/// tokio's blocking stdin and stdout, the reactor path left alone; and one
/// socket for both, on the reactor (`serve_stdio`).
#[test]
fn stdio_server_serves_files_as_well_as_pipes() {
    let dir = std::env::temp_dir().join(format!("tern-stdio-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let meta = serde_json::json!({
        tern_protocol::meta::PROTOCOL_VERSION_KEY: "2026-07-28",
        tern_protocol::meta::CLIENT_INFO_KEY: {"name": "files", "version": "1"},
        tern_protocol::meta::CLIENT_CAPABILITIES_KEY: {},
    });
    let mut requests = String::new();
    for (id, name) in ["Ada", "Grace"].iter().enumerate() {
        let request = serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "greet", "arguments": {"name": name}, "_meta": meta}});
        requests.push_str(&request.to_string());
        requests.push('\n');
    }
    std::fs::write(dir.join("requests"), &requests).unwrap();
    let greetings = |replies: &str| {
        let mut texts: Vec<String> = replies
            .lines()
            .map(|line| {
                let reply: serde_json::Value = serde_json::from_str(line).unwrap();
                reply["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or(line)
                    .to_owned()
            })
            .collect();
        texts.sort();
        texts
    };
    // Both files.
    let status = std::process::Command::new(example("stdio_server"))
        .stdin(std::fs::File::open(dir.join("requests")).unwrap())
        .stdout(std::fs::File::create(dir.join("replies")).unwrap())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    let replies = std::fs::read_to_string(dir.join("replies")).unwrap();
    assert_eq!(
        greetings(&replies),
        ["Hello, Ada!", "Hello, Grace!"],
        "{replies}"
    );
    // A pipe in, a file out: neither is switched (a non-blocking input
    // under tokio's blocking reader would fail).
    let mut child = std::process::Command::new(example("stdio_server"))
        .stdin(std::process::Stdio::piped())
        .stdout(std::fs::File::create(dir.join("replies2")).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        // Written once the server waits on an empty pipe (where a
        // non-blocking read would say "would block").
        std::thread::sleep(Duration::from_millis(300));
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(requests.as_bytes()).unwrap();
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let replies = std::fs::read_to_string(dir.join("replies2")).unwrap();
    assert_eq!(
        greetings(&replies),
        ["Hello, Ada!", "Hello, Grace!"],
        "{replies}"
    );
    // One socket for both, as Node's child processes get (a socket pair):
    // the reactor path for sockets, the requests sent once the server waits.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let child = std::process::Command::new(example("stdio_server"))
        .stdin(std::os::fd::OwnedFd::from(theirs.try_clone().unwrap()))
        .stdout(std::os::fd::OwnedFd::from(theirs))
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    {
        use std::io::{BufRead as _, Write as _};
        (&ours).write_all(requests.as_bytes()).unwrap();
        ours.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut lines = std::io::BufReader::new(&ours).lines();
        let replies: String = (0..2)
            .map(|_| lines.next().unwrap().unwrap() + "\n")
            .collect();
        assert_eq!(
            greetings(&replies),
            ["Hello, Ada!", "Hello, Grace!"],
            "{replies}"
        );
    }
    ours.shutdown(std::net::Shutdown::Write).unwrap();
    let status = child.wait_with_output().unwrap().status;
    assert!(status.success(), "{status}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asking_tool_asks_then_creates_once() {
    let asked = Arc::default();
    let client = Client::builder()
        .elicitation(Answers {
            values: vec![("region", ElicitValue::from("us-east-1"))],
            asked: Arc::clone(&asked),
        })
        .build(ChildProcess::spawn(&example("asking_tool"), &[]).unwrap());
    let result = bounded(client.call_tool(
        "provision_database",
        Some(serde_json::json!({"name": "orders"})),
    ))
    .await
    .unwrap();
    assert_eq!(
        text(&result),
        "Created orders in UsEast1 (id db-orders-useast1)"
    );
    assert_eq!(
        *asked.lock().unwrap(),
        ["Which region should orders live in?"]
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_tool_runs_as_a_task_and_asks() {
    let created: Arc<Mutex<Vec<Task>>> = Arc::default();
    let seen = Arc::clone(&created);
    let asked = Arc::default();
    let client = Client::builder()
        .elicitation(Answers {
            values: vec![("send", ElicitValue::Bool(true))],
            asked: Arc::clone(&asked),
        })
        .tasks(true)
        .build(ChildProcess::spawn(&example("task_tool"), &[]).unwrap());
    let options = CallOptions::default().on_task_created(Arc::new(move |t: &Task| {
        seen.lock().unwrap().push(t.clone());
    }));
    let result = bounded(client.call_tool_with(
        "export_report",
        Some(serde_json::json!({"pages": 3})),
        &options,
    ))
    .await
    .unwrap();
    assert_eq!(text(&result), "Sent the 3-page report.");
    assert_eq!(created.lock().unwrap().len(), 1, "the call became one task");
    assert_eq!(
        *asked.lock().unwrap(),
        ["The 3-page report is ready. Send it?"]
    );
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_server_serves_in_axum_and_stops_on_sigint() {
    let mut child = tokio::process::Command::new(example("http_server"))
        .arg("127.0.0.1:0")
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = bounded(lines.next_line()).await.unwrap().unwrap();
    let url = line.strip_prefix("listening on ").unwrap().to_owned();
    let client = Client::builder().build(HttpTransport::new(&url).unwrap());
    let result = bounded(client.call_tool("add", Some(serde_json::json!({"a": 2, "b": 3}))))
        .await
        .unwrap();
    assert_eq!(text(&result), "5");
    // The application's own route sits beside the endpoint.
    let authority = url
        .strip_prefix("http://")
        .and_then(|rest| rest.strip_suffix("/mcp"))
        .unwrap();
    let response = bounded(raw_get(authority, "/healthz")).await;
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("\r\n\r\nok"), "{response}");
    client.close().await;
    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    let exit = bounded(child.wait()).await.unwrap();
    assert!(exit.success(), "{exit:?}");
}

/// A plain `GET` on a fresh connection; the whole response as text.
async fn raw_get(authority: &str, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(authority).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    response
}
