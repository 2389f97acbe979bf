//! The three ways a client reaches a server — in process, a child process
//! over stdio, Streamable HTTP — each recording every message the server
//! received and sent, so tests can check what went over the wire.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use http::header::CONTENT_TYPE;
use serde_json::Value;
use tern_client::transport::http::HttpTransport;
use tern_client::transport::stdio::ChildProcess;
use tern_client::transport::{BoxFuture, Exchange, Incoming, Outgoing, Transport};
use tern_client::{Client, ClientBuilder, ClientError, Limits};
use tern_protocol::ServerNotification;
use tern_protocol::jsonrpc::Message;
use tern_server::transport::http::Http;
use tern_server::{CallContext, Server};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{server, stub};

/// The longest any test waits for anything.
pub const BOUND: Duration = Duration::from_secs(30);

/// `fut`, or a failed test after [`BOUND`].
pub async fn bounded<F: Future>(fut: F) -> F::Output {
    tokio::time::timeout(BOUND, fut)
        .await
        .expect("bounded wait timed out")
}

/// How the client reaches the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// A transport calling `Server::handle` directly.
    InProcess,
    /// This test binary re-run as a server child process, over stdio.
    Stdio,
    /// tern's HTTP endpoint on 127.0.0.1.
    Http,
}

/// Which server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The tern fixture server ([`server::build`]).
    Fixture,
    /// The fixed-JSON stub ([`stub::reply`]).
    Stub,
}

/// Which way a message went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    /// Client to server.
    ToServer,
    /// Server to client.
    FromServer,
}

/// Every message the server received and sent, in order.
#[derive(Debug, Clone)]
pub enum Log {
    /// Kept by this process.
    Memory(Arc<Mutex<Vec<(Dir, Value)>>>),
    /// Written by a child process, one `>` or `<` line per message.
    File(PathBuf),
}

impl Log {
    fn memory() -> Self {
        Self::Memory(Arc::default())
    }

    fn push(&self, dir: Dir, message: Value) {
        if let Self::Memory(m) = self {
            m.lock().unwrap().push((dir, message));
        }
    }

    /// The messages so far.
    pub fn messages(&self) -> Vec<(Dir, Value)> {
        match self {
            Self::Memory(m) => m.lock().unwrap().clone(),
            Self::File(path) => std::fs::read_to_string(path)
                .unwrap_or_default()
                .lines()
                .filter_map(|line| {
                    let (dir, json) = line.split_at_checked(1)?;
                    let dir = if dir == ">" {
                        Dir::ToServer
                    } else {
                        Dir::FromServer
                    };
                    Some((dir, serde_json::from_str(json).ok()?))
                })
                .collect(),
        }
    }

    /// The requests of `method` the server received, in order.
    pub fn requests(&self, method: &str) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|(d, m)| *d == Dir::ToServer && m.get("id").is_some() && m["method"] == method)
            .map(|(_, m)| m)
            .collect()
    }

    /// The notifications of `method` the server received.
    pub fn notifications(&self, method: &str) -> Vec<Value> {
        self.messages()
            .into_iter()
            .filter(|(d, m)| *d == Dir::ToServer && m.get("id").is_none() && m["method"] == method)
            .map(|(_, m)| m)
            .collect()
    }

    /// The response the server sent to the request with `id`.
    pub fn response(&self, id: &Value) -> Option<Value> {
        self.messages().into_iter().find_map(|(d, m)| {
            (d == Dir::FromServer
                && m.get("id") == Some(id)
                && (m.get("result").is_some() || m.get("error").is_some()))
            .then_some(m)
        })
    }
}

/// A server reached one way, and its log.
#[derive(Debug)]
pub struct Conn {
    pub log: Log,
    target: Target,
}

#[derive(Debug)]
enum Target {
    InProcess(Server),
    InProcessStub,
    Child(Kind),
    Http(String),
}

/// A file name no other test uses (public for other modules).
pub fn scratch_file(what: &str) -> PathBuf {
    scratch(what)
}

/// A file name no other test uses.
fn scratch(what: &str) -> PathBuf {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    std::env::temp_dir().join(format!(
        "tern-client-it-{}-{}-{what}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ))
}

/// Starts `kind` the `way` given (a child process starts with each client).
pub async fn start(way: Way, kind: Kind) -> Conn {
    let (log, target) = match (way, kind) {
        (Way::InProcess, Kind::Fixture) => (Log::memory(), Target::InProcess(server::build())),
        (Way::InProcess, Kind::Stub) => (Log::memory(), Target::InProcessStub),
        (Way::Stdio, kind) => (Log::File(scratch("log")), Target::Child(kind)),
        (Way::Http, Kind::Fixture) => {
            let log = Log::memory();
            let url = serve_http(recorded(Http::new(server::build()), log.clone())).await;
            (log, Target::Http(url))
        }
        (Way::Http, Kind::Stub) => {
            let log = Log::memory();
            let url = serve_http(stub_router(log.clone())).await;
            (log, Target::Http(url))
        }
    };
    Conn { log, target }
}

impl Conn {
    /// A client of the server. Over stdio each client starts its own server
    /// process (same keys), logging into this connection's log.
    pub fn client(&self, builder: ClientBuilder) -> Client {
        self.connect(builder, None)
    }

    /// A client of the server with `limits`, its transport's byte limits
    /// included.
    pub fn client_with(&self, builder: ClientBuilder, limits: Limits) -> Client {
        self.connect(builder.limits(limits), Some(limits))
    }

    fn connect(&self, builder: ClientBuilder, limits: Option<Limits>) -> Client {
        let limits_or_default = limits.unwrap_or_default();
        match &self.target {
            Target::InProcess(server) => builder.build(InProcess {
                server: server.clone(),
                log: self.log.clone(),
            }),
            Target::InProcessStub => builder.build(StubTransport(self.log.clone())),
            Target::Child(kind) => {
                let Log::File(record) = &self.log else {
                    unreachable!("a child logs to a file")
                };
                builder.build(spawn_child(*kind, record, limits_or_default))
            }
            Target::Http(url) => builder.build(
                HttpTransport::new(url)
                    .unwrap()
                    .with_limits(limits_or_default),
            ),
        }
    }

    /// The server's URL, over HTTP.
    pub fn url(&self) -> Option<&str> {
        match &self.target {
            Target::Http(url) => Some(url),
            _ => None,
        }
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        if let Log::File(path) = &self.log {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// This test binary, run as a server child (see `child::entry`).
fn spawn_child(kind: Kind, record: &std::path::Path, limits: Limits) -> ChildProcess {
    let role = match kind {
        Kind::Fixture => "server",
        Kind::Stub => "stub",
    };
    let exe = std::env::current_exe().unwrap();
    let args: Vec<String> = vec![
        format!("{}={role}", crate::child::ROLE),
        format!("{}={}", crate::child::RECORD, record.display()),
        exe.display().to_string(),
        "--exact".into(),
        "child::entry".into(),
        "--quiet".into(),
        "--test-threads=1".into(),
    ];
    // `env` sets the child's role: `ChildProcess` takes no environment.
    ChildProcess::spawn_with("env", &args, limits).unwrap()
}

// --- in process -----------------------------------------------------------

/// Hands each request to `Server::handle`, as a transport would: its
/// notifications stream back before the response, and dropping the exchange
/// cancels the request's token.
#[derive(Debug)]
struct InProcess {
    server: Server,
    log: Log,
}

impl Transport for InProcess {
    fn send(&self, out: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        Box::pin(async move {
            self.log
                .push(Dir::ToServer, serde_json::from_str(&out.body).unwrap());
            let Ok(Message::Request(request)) = Message::from_slice(out.body.as_bytes()) else {
                panic!(
                    "the client sent something other than a request: {}",
                    out.body
                );
            };
            let (tx, rx) = mpsc::channel(64);
            let (notifier, mut notes) = tern_server::Notifier::channel(256);
            let cancel = CancellationToken::new();
            let call = CallContext::default()
                .with_notifier(notifier)
                .with_cancel(cancel.clone());
            let server = self.server.clone();
            let log = self.log.clone();
            tokio::spawn(async move {
                let handling = server.handle(&request, call);
                tokio::pin!(handling);
                let reply = loop {
                    tokio::select! {
                        biased;
                        Some(n) = notes.recv() => {
                            log.push(Dir::FromServer, serde_json::to_value(&n).unwrap());
                            let _ = tx.send(Ok(Incoming::Notification(n))).await;
                        }
                        reply = &mut handling => break reply,
                    }
                };
                while let Some(n) = notes.try_recv() {
                    log.push(Dir::FromServer, serde_json::to_value(&n).unwrap());
                    let _ = tx.send(Ok(Incoming::Notification(n))).await;
                }
                log.push(Dir::FromServer, serde_json::to_value(&reply).unwrap());
                let incoming = match reply.outcome {
                    Ok(raw) => Incoming::Result(raw),
                    Err(e) => Incoming::Error(e),
                };
                let _ = tx.send(Ok(incoming)).await;
            });
            Ok(Exchange::new(rx, Some(Box::new(move || cancel.cancel()))))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// The stub, in process, logging what it receives and answers.
#[derive(Debug)]
struct StubTransport(Log);

impl Transport for StubTransport {
    fn send(&self, out: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        Box::pin(async move {
            let message: Value = serde_json::from_str(&out.body).unwrap();
            let reply = stub::reply(&message).unwrap();
            self.0.push(Dir::ToServer, message);
            self.0.push(Dir::FromServer, reply.clone());
            let reply = reply.to_string();
            let incoming = match Message::from_slice(reply.as_bytes()).unwrap() {
                Message::Response(r) => Incoming::Result(r.result),
                Message::Error(e) => Incoming::Error(e.error),
                Message::Notification(n) => {
                    Incoming::Notification(ServerNotification::from_notification(&n).unwrap())
                }
                Message::Request(r) => panic!("the stub sent a request: {r:?}"),
            };
            let (tx, rx) = mpsc::channel(1);
            tx.send(Ok(incoming)).await.unwrap();
            Ok(Exchange::new(rx, None))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

// --- HTTP ------------------------------------------------------------------

/// Serves `app` on 127.0.0.1 (a free port) for the rest of the test.
pub async fn serve_http(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/mcp")
}

/// tern's endpoint behind a recorder of request bodies and of the JSON or
/// SSE response bodies, as they stream through.
fn recorded(http: Http, log: Log) -> axum::Router {
    let service = http.into_service();
    let handler = move |request: axum::extract::Request| {
        let mut service = service.clone();
        let log = log.clone();
        async move {
            let (parts, body) = request.into_parts();
            let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
            if let Ok(message) = serde_json::from_slice(&bytes) {
                log.push(Dir::ToServer, message);
            }
            let request = http::Request::from_parts(parts, Body::from(bytes));
            std::future::poll_fn(|cx| tower::Service::poll_ready(&mut service, cx))
                .await
                .unwrap();
            let response = tower::Service::call(&mut service, request).await.unwrap();
            let (parts, body) = response.into_parts();
            let sse = parts
                .headers
                .get(CONTENT_TYPE)
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            let mut buffer = String::new();
            let body = body.into_data_stream().map(move |chunk| {
                if let Ok(bytes) = &chunk {
                    buffer.push_str(&String::from_utf8_lossy(bytes));
                    record_chunk(&log, &mut buffer, sse);
                }
                chunk
            });
            Response::from_parts(parts, Body::from_stream(body))
        }
    };
    axum::Router::new().route("/mcp", axum::routing::any(handler))
}

/// Logs the complete messages in `buffer` and keeps the rest.
fn record_chunk(log: &Log, buffer: &mut String, sse: bool) {
    if !sse {
        if let Ok(message) = serde_json::from_str(buffer) {
            log.push(Dir::FromServer, message);
            buffer.clear();
        }
        return;
    }
    while let Some(end) = buffer.find("\n\n") {
        let event: String = buffer.drain(..end + 2).collect();
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect();
        if let Ok(message) = serde_json::from_str(&data.join("\n")) {
            log.push(Dir::FromServer, message);
        }
    }
}

/// The stub over HTTP: one JSON response per request, 202 for
/// notifications; `log` records both directions.
fn stub_router(log: Log) -> axum::Router {
    let handler = move |body: axum::body::Bytes| async move {
        let message: Value = serde_json::from_slice(&body).unwrap();
        let reply = stub::reply(&message);
        log.push(Dir::ToServer, message);
        match reply {
            Some(reply) => (
                http::StatusCode::OK,
                [(CONTENT_TYPE, "application/json")],
                reply.to_string(),
            )
                .into_response(),
            None => http::StatusCode::ACCEPTED.into_response(),
        }
    };
    axum::Router::new().route("/mcp", axum::routing::post(handler))
}

// --- results ---------------------------------------------------------------

/// The text of the first content block of a result (tool, prompt message or
/// resource contents).
pub fn text(result: &impl serde::Serialize) -> String {
    let v = serde_json::to_value(result).unwrap();
    let text = v
        .pointer("/content/0/text")
        .or_else(|| v.pointer("/messages/0/content/text"))
        .or_else(|| v.pointer("/contents/0/text"));
    text.and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no text in {v}"))
        .to_owned()
}
