//! A fleet on loopback for the cluster tests: a real `redis-server` (AOF on,
//! `appendfsync always`, `noeviction`), replicas of `tern serve demo --redis`
//! (the real binary, one process each) and a real nginx in front (round
//! robin, no stickiness, buffering off), with a small JSON-RPC client over
//! HTTP. Every process is killed and every scratch folder removed on drop,
//! so a failing test tears the fleet down too. nginx and redis-server come
//! from Debian's packages (`scripts/test` installs them); a missing binary
//! fails the test with that advice.
#![cfg_attr(
    not(feature = "fleet"),
    allow(
        dead_code,
        unused_imports,
        reason = "without `fleet` only the HTTP helpers other tests share are used"
    )
)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tokio::process::{Child, Command};

pub use tern_test_support::nginx::Nginx;
pub use tern_test_support::ports::{Scratch, free_port};
pub use tern_test_support::redis_server::RedisServer;

/// Writes a fresh key ring (`tern keys generate`) to `path`.
pub async fn generate_keys(path: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["keys", "generate"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success());
    std::fs::write(path, out.stdout).unwrap();
}

/// One `tern serve demo --redis` process.
#[derive(Debug)]
pub struct Replica {
    pub port: u16,
    child: Option<Child>,
    args: Vec<String>,
    log: PathBuf,
}

impl Replica {
    /// Starts a replica on a free port and waits (bounded) for `/healthz`.
    pub async fn start(redis_url: &str, keys: &Path, lease_secs: u64, log_dir: &Path) -> Self {
        let port = free_port();
        let args = vec![
            "serve".into(),
            "demo".into(),
            "--http".into(),
            format!("127.0.0.1:{port}"),
            "--redis".into(),
            redis_url.into(),
            "--keys".into(),
            keys.display().to_string(),
            "--lease".into(),
            lease_secs.to_string(),
            // nginx, in front, is trusted to name its clients.
            "--trusted-proxy".into(),
            "127.0.0.1".into(),
            "--forwarded-header".into(),
            "x-forwarded-for".into(),
        ];
        let mut replica = Self {
            port,
            child: None,
            args,
            log: log_dir.join(format!("replica-{port}.log")),
        };
        replica.spawn().await;
        replica
    }

    /// Starts `tern serve demo --http 127.0.0.1:PORT` with `extra` (no
    /// Redis: one process, e.g. `--tasks sqlite:PATH`) on a free port, and
    /// waits (bounded) for it to serve.
    pub async fn start_single(extra: &[String], log_dir: &Path) -> Self {
        let port = free_port();
        let mut args: Vec<String> = vec![
            "serve".into(),
            "demo".into(),
            "--http".into(),
            format!("127.0.0.1:{port}"),
        ];
        args.extend(extra.iter().cloned());
        let mut replica = Self {
            port,
            child: None,
            args,
            log: log_dir.join(format!("single-{port}.log")),
        };
        replica.spawn().await;
        replica
    }

    async fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        self.child = Some(child);
        for _ in 0..400 {
            // A replica serves /healthz; a single process only /mcp (any
            // answer to a GET of it means it listens).
            match get(&self.url(self.ready_path())).await {
                Ok((200, _)) => return,
                Ok(_) if self.ready_path() == "/mcp" => return,
                _ => {}
            }
            if let Some(status) = self
                .child
                .as_mut()
                .and_then(|c| c.try_wait().ok().flatten())
            {
                panic!(
                    "replica {} exited ({status}): {}",
                    self.port,
                    self.log_text()
                );
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!(
            "replica {} never became healthy: {}",
            self.port,
            self.log_text()
        );
    }

    fn ready_path(&self) -> &'static str {
        if self.args.iter().any(|a| a == "--redis") {
            "/healthz"
        } else {
            "/mcp"
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().and_then(Child::id).expect("running")
    }

    /// SIGKILL: no goodbye, no clean task shutdown.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().await.unwrap();
        }
    }

    /// Waits for the process to exit on its own (after a signal), at most
    /// `within`; its exit status.
    pub async fn exited(&mut self, within: Duration) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        if let Ok(status) = tokio::time::timeout(within, child.wait()).await {
            return status.unwrap();
        }
        let _ = child.kill().await;
        panic!(
            "the server did not exit within {within:?}\n{}",
            self.log_text()
        );
    }

    /// Starts it again on the same port (killing it first if it runs).
    pub async fn restart(&mut self) {
        self.kill().await;
        self.spawn().await;
    }

    /// Sends a signal by name (`HUP`, `TERM`) with the system's `kill`.
    pub async fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .await
            .unwrap();
        assert!(status.success());
    }
}

fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

/// GET `url`: status and body (bounded: 5 s).
pub async fn get(url: &str) -> Result<(u16, String), String> {
    let request = hyper::Request::get(url)
        .body(Full::new(Bytes::new()))
        .map_err(|e| e.to_string())?;
    let call = async {
        let response = client().request(request).await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let body = response
            .into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok((status, String::from_utf8_lossy(&body).into_owned()))
    };
    tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .map_err(|_| "timed out".to_owned())?
}

/// The `_meta` of every request: 2026-07-28, form elicitation and tasks.
pub fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {
            "elicitation": {"form": {}},
            "extensions": {"io.modelcontextprotocol/tasks": {}}
        },
        "io.modelcontextprotocol/clientInfo": {"name": "tern-cluster-test", "version": "0"}
    })
}

/// How a JSON-RPC call over HTTP ended.
#[derive(Debug, Clone)]
pub enum Reply {
    /// The `result`.
    Result(Value),
    /// The `error` (with its HTTP status).
    Error(u16, Value),
    /// No JSON-RPC answer: the connection failed, timed out, or a proxy
    /// answered (its status).
    Transport(String),
}

impl Reply {
    pub fn result(&self) -> &Value {
        match self {
            Self::Result(v) => v,
            other => panic!("expected a result, got {other:?}"),
        }
    }

    pub fn kind(&self) -> String {
        match self {
            Self::Result(v) if v["isError"] == true => "complete (isError)".to_owned(),
            Self::Result(v) => v["resultType"].as_str().unwrap_or("result").to_owned(),
            Self::Error(status, e) => format!("error {} (HTTP {status})", e["code"]),
            Self::Transport(why) => format!("transport ({why})"),
        }
    }
}

/// Posts one JSON-RPC request to `base` (`http://host:port`) with the
/// headers the 2026-07-28 HTTP transport requires; bounded by `timeout`.
pub async fn call(
    base: &str,
    test_id: &str,
    method: &str,
    mut params: Value,
    timeout: Duration,
) -> Reply {
    params["_meta"] = meta();
    let name = match method {
        "tools/call" | "prompts/get" => params["name"].as_str().map(str::to_owned),
        "resources/read" => params["uri"].as_str().map(str::to_owned),
        "tasks/get" | "tasks/update" | "tasks/cancel" => {
            params["taskId"].as_str().map(str::to_owned)
        }
        _ => None,
    };
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut request = hyper::Request::post(format!("{base}/mcp"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method)
        .header("x-test-id", test_id);
    if let Some(name) = name {
        request = request.header("mcp-name", name);
    }
    let Ok(request) = request.body(Full::new(Bytes::from(body.to_string()))) else {
        return Reply::Transport("bad request".into());
    };
    let exchange = async {
        let response = client()
            .request(request)
            .await
            .map_err(|e| format!("{e}"))?;
        let status = response.status().as_u16();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| format!("{e}"))?
            .to_bytes();
        Ok::<_, String>((status, String::from_utf8_lossy(&bytes).into_owned()))
    };
    let (status, text) = match tokio::time::timeout(timeout, exchange).await {
        Err(_) => return Reply::Transport("timed out".into()),
        Ok(Err(e)) => return Reply::Transport(e),
        Ok(Ok(answer)) => answer,
    };
    // JSON, or an SSE stream whose last `data:` line is the answer.
    let json = if text.trim_start().starts_with('{') {
        text.clone()
    } else {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .next_back()
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    match serde_json::from_str::<Value>(&json) {
        Ok(v) if v.get("result").is_some() => Reply::Result(v["result"].clone()),
        Ok(v) if v.get("error").is_some() => Reply::Error(status, v["error"].clone()),
        _ => Reply::Transport(format!("HTTP {status}")),
    }
}

/// An open `subscriptions/listen` stream (SSE), read message by message.
pub struct Listen {
    body: hyper::body::Incoming,
    buffer: String,
}

impl std::fmt::Debug for Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listen").finish_non_exhaustive()
    }
}

impl Listen {
    /// Opens `subscriptions/listen` at `base` with `filter`.
    pub async fn open(base: &str, filter: Value) -> Self {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": "subscriptions/listen",
            "params": {"notifications": filter, "_meta": meta()}});
        let request = hyper::Request::post(format!("{base}/mcp"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "subscriptions/listen")
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let response = tokio::time::timeout(Duration::from_secs(5), client().request(request))
            .await
            .expect("the listen stream opens within 5 s")
            .unwrap();
        assert_eq!(response.status(), 200);
        Self {
            body: response.into_body(),
            buffer: String::new(),
        }
    }

    /// The next JSON-RPC message of the stream, within `within`.
    pub async fn next(&mut self, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: String = event
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(str::trim)
                    .collect();
                if let Ok(v) = serde_json::from_str(&data) {
                    return Some(v);
                }
                continue;
            }
            let frame = tokio::time::timeout_at(deadline, self.body.frame())
                .await
                .ok()??
                .ok()?;
            if let Some(bytes) = frame.data_ref() {
                self.buffer
                    .push_str(&String::from_utf8_lossy(bytes).replace("\r\n", "\n"));
            }
        }
    }

    /// Reads until a message `accept`s (at most 100 messages, each within
    /// `within`).
    pub async fn until(&mut self, within: Duration, accept: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..100 {
            let Some(message) = self.next(within).await else {
                panic!("the listen stream went quiet or closed");
            };
            if accept(&message) {
                return message;
            }
        }
        panic!("no matching message in 100");
    }
}

/// A TCP proxy on loopback in front of one address (a replica's Redis), that
/// a test can cut — every connection through it dropped, new ones refused —
/// and restore: a network partition between one process and Redis.
pub struct Partition {
    pub port: u16,
    cut: tokio::sync::watch::Sender<bool>,
    accept: tokio::task::JoinHandle<()>,
}

impl Partition {
    /// Listens on a free port, forwarding to `upstream` (`host:port`).
    pub async fn start(upstream: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (cut, watching) = tokio::sync::watch::channel(false);
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                if *watching.borrow() {
                    // Cut: the connection is dropped at once.
                    continue;
                }
                let mut watching = watching.clone();
                let upstream = upstream.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&upstream).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = watching.wait_for(|cut| *cut) => {}
                    }
                });
            }
        });
        Self { port, cut, accept }
    }

    /// The `redis://` URL through the proxy.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Drops every connection through it and refuses new ones.
    pub fn cut(&self) {
        self.cut.send_replace(true);
    }

    /// Lets connections through again.
    pub fn restore(&self) {
        self.cut.send_replace(false);
    }
}

impl Drop for Partition {
    fn drop(&mut self) {
        self.accept.abort();
    }
}
