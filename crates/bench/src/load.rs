//! The closed-loop HTTP load generator: N keep-alive connections (raw hyper
//! HTTP/1.1 client, one task each), each sending its next call as soon as the
//! last one is answered, for a warm-up and then a fixed measured time. The
//! server's CPU time is read from `/proc/PID/stat` at the two ends of the
//! measured window.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use http::HeaderValue;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;

use crate::procfs;
use crate::workload::{self, VERSION};

/// Longest wait for one response before the connection is given up.
const OP_TIMEOUT: Duration = Duration::from_secs(5);
/// Responses checked in full at the start of each connection (and every
/// [`CHECK_EVERY`]th after); the others are checked by status only, so that
/// the client's core is not spent scanning bodies.
const CHECK_FIRST: u64 = 8;
const CHECK_EVERY: u64 = 1024;

const WARM: u8 = 0;
const MEASURE: u8 = 1;
const STOP: u8 = 2;

/// One logical call.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// One request, one response that contains `expect`.
    Plain {
        /// The tool (`Mcp-Name`).
        tool: &'static str,
        /// The request body.
        body: Bytes,
        /// A string the response must contain.
        expect: String,
    },
    /// Two legs: the call, answered `input_required`; then the retry with the
    /// answer and the echoed `requestState`, answered with `expect`.
    Mrtr {
        /// The tool (`Mcp-Name`).
        tool: &'static str,
        /// The first leg's body.
        first: Bytes,
        /// The retry's body around the state.
        retry: (String, String),
        /// A string the final response must contain.
        expect: String,
    },
}

impl Op {
    /// `echo` with a short text.
    pub(crate) fn echo() -> Self {
        let body = workload::call(1, "echo", &workload::echo_args(), None);
        Self::Plain {
            tool: "echo",
            body: Bytes::from(body.to_string()),
            expect: "\"text\":\"hello\"".into(),
        }
    }

    /// `payload`: 1 KiB argument, 4 KiB structured result.
    pub(crate) fn payload() -> Self {
        let body = workload::call(1, "payload", &workload::payload_args(), None);
        Self::Plain {
            tool: "payload",
            body: Bytes::from(body.to_string()),
            expect: "\"structuredContent\"".into(),
        }
    }

    /// `confirm`: one elicitation, answered at once.
    pub(crate) fn mrtr() -> Self {
        let body = workload::call(1, "confirm", &workload::confirm_args(), None);
        Self::Mrtr {
            tool: "confirm",
            first: Bytes::from(body.to_string()),
            retry: workload::confirm_retry_parts(),
            expect: workload::confirmed("order-42"),
        }
    }
}

/// How long and how wide.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// Concurrent connections.
    pub(crate) connections: usize,
    /// Warm-up before measuring.
    pub(crate) warmup: Duration,
    /// The measured time.
    pub(crate) measure: Duration,
}

/// What one run measured.
#[derive(Debug)]
pub(crate) struct Outcome {
    /// Logical calls completed in the measured window.
    pub(crate) ops: u64,
    /// Failed calls (any window).
    pub(crate) errors: u64,
    /// The measured window.
    pub(crate) elapsed: Duration,
    /// Latency of each logical call, ns.
    pub(crate) latency: Histogram<u64>,
    /// Server CPU (user + system) over the window, ticks.
    pub(crate) server_ticks: u64,
    /// This process's CPU over the window, ticks.
    pub(crate) client_ticks: u64,
}

fn histogram() -> Histogram<u64> {
    match Histogram::new_with_bounds(1, 120_000_000_000, 3) {
        Ok(h) => h,
        Err(e) => panic!("histogram bounds: {e}"),
    }
}

type Sender = http1::SendRequest<Full<Bytes>>;

async fn connect(port: u16) -> std::io::Result<Sender> {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(std::io::Error::other)?;
    tokio::spawn(async move {
        drop(connection.await);
    });
    Ok(sender)
}

/// Posts `body` and returns the status and the whole response body.
async fn post(
    sender: &mut Sender,
    host: &HeaderValue,
    tool: &'static str,
    body: Bytes,
) -> Result<(u16, Bytes), String> {
    let mut request = http::Request::new(Full::new(body));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = http::Uri::from_static("/mcp");
    let headers = request.headers_mut();
    headers.insert(http::header::HOST, host.clone());
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(
        http::header::ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.insert("mcp-protocol-version", HeaderValue::from_static(VERSION));
    headers.insert("mcp-method", HeaderValue::from_static("tools/call"));
    headers.insert("mcp-name", HeaderValue::from_static(tool));
    sender.ready().await.map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let bytes = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((status, bytes))
}

fn host(port: u16) -> HeaderValue {
    HeaderValue::from_str(&format!("127.0.0.1:{port}"))
        .unwrap_or_else(|_| HeaderValue::from_static("127.0.0.1"))
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Runs one logical call; `check` also checks the final body's content.
async fn run_op(
    sender: &mut Sender,
    host: &HeaderValue,
    op: &Op,
    check: bool,
) -> Result<(), String> {
    let (tool, body, expect) = match op {
        Op::Plain { tool, body, expect } => (*tool, body.clone(), expect),
        Op::Mrtr {
            tool,
            first,
            retry,
            expect,
        } => {
            let (status, reply) = post(sender, host, tool, first.clone()).await?;
            let state = workload::request_state(&reply).filter(|_| status == 200);
            let Some(state) = state else {
                return Err(format!(
                    "first leg: {status} {}",
                    String::from_utf8_lossy(&reply)
                ));
            };
            let mut next = String::with_capacity(retry.0.len() + state.len() + retry.1.len());
            next.push_str(&retry.0);
            next.push_str(state);
            next.push_str(&retry.1);
            (*tool, Bytes::from(next), expect)
        }
    };
    let (status, reply) = post(sender, host, tool, body).await?;
    if status != 200 || (check && !contains(&reply, expect.as_bytes())) {
        return Err(format!("{status} {}", String::from_utf8_lossy(&reply)));
    }
    Ok(())
}

/// Sends `op` once and returns the failure, if any: run before the load so a
/// broken server is reported instead of measured.
pub(crate) async fn probe(port: u16, op: &Op) -> Result<(), String> {
    let mut sender = connect(port).await.map_err(|e| e.to_string())?;
    let host = host(port);
    tokio::time::timeout(OP_TIMEOUT, run_op(&mut sender, &host, op, true))
        .await
        .map_err(|_| "timed out".to_owned())?
}

struct ConnResult {
    latency: Histogram<u64>,
    ops: u64,
    errors: u64,
    first_error: Option<String>,
}

async fn connection(port: u16, op: Arc<Op>, phase: Arc<AtomicU8>) -> ConnResult {
    let mut result = ConnResult {
        latency: histogram(),
        ops: 0,
        errors: 0,
        first_error: None,
    };
    let mut sender = match connect(port).await {
        Ok(s) => s,
        Err(e) => {
            result.errors += 1;
            result.first_error = Some(e.to_string());
            return result;
        }
    };
    let host = host(port);
    let mut n: u64 = 0;
    loop {
        let started_in = phase.load(Ordering::Relaxed);
        if started_in == STOP {
            break;
        }
        let check = n < CHECK_FIRST || n.is_multiple_of(CHECK_EVERY);
        n += 1;
        let t0 = Instant::now();
        let outcome =
            tokio::time::timeout(OP_TIMEOUT, run_op(&mut sender, &host, &op, check)).await;
        let took = t0.elapsed();
        match outcome {
            Ok(Ok(())) => {
                if started_in == MEASURE && phase.load(Ordering::Relaxed) == MEASURE {
                    result.ops += 1;
                    let ns = u64::try_from(took.as_nanos()).unwrap_or(u64::MAX);
                    result.latency.saturating_record(ns.max(1));
                }
            }
            Ok(Err(e)) => {
                result.errors += 1;
                result.first_error.get_or_insert(e);
            }
            Err(_) => {
                result.errors += 1;
                result.first_error.get_or_insert("timed out".into());
                // The connection may be stuck: a new one.
                match connect(port).await {
                    Ok(s) => sender = s,
                    Err(_) => break,
                }
            }
        }
    }
    result
}

/// Drives `op` against the server on `port` (pid `pid`).
pub(crate) async fn run(port: u16, pid: u32, op: &Op, settings: Settings) -> Outcome {
    let phase = Arc::new(AtomicU8::new(WARM));
    let op = Arc::new(op.clone());
    let tasks: Vec<_> = (0..settings.connections)
        .map(|_| tokio::spawn(connection(port, Arc::clone(&op), Arc::clone(&phase))))
        .collect();
    tokio::time::sleep(settings.warmup).await;
    let me = std::process::id();
    let (server0, client0) = (procfs::cpu_ticks(pid), procfs::cpu_ticks(me));
    let t0 = Instant::now();
    phase.store(MEASURE, Ordering::Relaxed);
    tokio::time::sleep(settings.measure).await;
    phase.store(STOP, Ordering::Relaxed);
    let elapsed = t0.elapsed();
    let (server1, client1) = (procfs::cpu_ticks(pid), procfs::cpu_ticks(me));
    let mut outcome = Outcome {
        ops: 0,
        errors: 0,
        elapsed,
        latency: histogram(),
        server_ticks: server1.saturating_sub(server0),
        client_ticks: client1.saturating_sub(client0),
    };
    let mut first_error = None;
    for task in tasks {
        // Bounded: each connection stops at its next call, within OP_TIMEOUT.
        let Ok(Ok(r)) = tokio::time::timeout(2 * OP_TIMEOUT, task).await else {
            outcome.errors += 1;
            continue;
        };
        outcome.ops += r.ops;
        outcome.errors += r.errors;
        let _ = outcome.latency.add(&r.latency);
        if first_error.is_none() {
            first_error = r.first_error;
        }
    }
    if let Some(e) = first_error {
        let short: String = e.chars().take(300).collect();
        eprintln!("  {} errors; first: {short}", outcome.errors);
    }
    outcome
}
