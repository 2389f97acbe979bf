//! Memory: resident set of a server holding many concurrent SSE streams
//! (progress-emitting calls), and the cost of an idle keep-alive connection.
//! Each measurement uses a fresh server process.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::json;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::procfs;
use crate::servers::{Kind, Transport};
use crate::workload::{self, VERSION};

/// Longest time to open all connections or streams.
const SETUP_TIMEOUT: Duration = Duration::from_secs(60);
/// Connections being set up at once.
const SETUP_PARALLEL: usize = 64;
/// How long the `slow` calls run if nobody hangs up (they are dropped as
/// soon as the memory is read).
const SLOW_SECONDS: u32 = 60;

/// One memory measurement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Reading {
    /// Connections or streams held.
    pub(crate) held: usize,
    /// RSS before, KiB.
    pub(crate) base_kib: u64,
    /// RSS while holding them, KiB.
    pub(crate) rss_kib: u64,
    /// Peak RSS of the process, KiB.
    pub(crate) peak_kib: u64,
}

impl Reading {
    /// Bytes per held connection or stream.
    #[allow(
        clippy::cast_precision_loss,
        reason = "KiB counts and connection counts are far below 2^52"
    )]
    pub(crate) fn per_item_bytes(&self) -> f64 {
        (self.rss_kib.saturating_sub(self.base_kib) * 1024) as f64 / self.held.max(1) as f64
    }
}

fn request(port: u16, tool: &str, body: &serde_json::Value) -> http::Request<Full<Bytes>> {
    let built = http::Request::post("/mcp")
        .header(http::header::HOST, format!("127.0.0.1:{port}"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(http::header::ACCEPT, "application/json, text/event-stream")
        .header("mcp-protocol-version", VERSION)
        .header("mcp-method", "tools/call")
        .header("mcp-name", tool)
        .body(Full::new(Bytes::from(body.to_string())));
    match built {
        Ok(r) => r,
        Err(e) => panic!("a constant request: {e}"),
    }
}

/// What each holder does before it reports ready.
#[derive(Debug, Clone, Copy)]
enum Hold {
    /// One `echo` call, then the connection stays idle.
    Idle,
    /// A `slow` call with a progress token, held open once its first
    /// progress notification arrived.
    Stream,
}

async fn holder(
    port: u16,
    hold: Hold,
    n: usize,
    gate: Arc<Semaphore>,
    ready: mpsc::Sender<Result<(), String>>,
    mut release: watch::Receiver<bool>,
) {
    let setup = async {
        let _permit = gate.acquire().await.map_err(|e| e.to_string())?;
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map_err(|e| e.to_string())?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        let (mut sender, connection) = http1::handshake::<_, Full<Bytes>>(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        let connection = tokio::spawn(connection);
        let (tool, body) = match hold {
            Hold::Idle => (
                "echo",
                workload::call(1, "echo", &workload::echo_args(), None),
            ),
            Hold::Stream => {
                let token = u64::try_from(n).unwrap_or(0);
                let args = json!({"seconds": SLOW_SECONDS});
                ("slow", workload::call(1, "slow", &args, Some(token)))
            }
        };
        let response = sender
            .send_request(request(port, tool, &body))
            .await
            .map_err(|e| e.to_string())?;
        let mut body = response.into_body();
        let kept = match hold {
            Hold::Idle => {
                body.collect().await.map_err(|e| e.to_string())?;
                None
            }
            Hold::Stream => {
                let mut seen = Vec::new();
                loop {
                    let Some(frame) = body.frame().await else {
                        return Err(format!("stream ended: {}", String::from_utf8_lossy(&seen)));
                    };
                    let frame = frame.map_err(|e| e.to_string())?;
                    if let Ok(data) = frame.into_data() {
                        seen.extend_from_slice(&data);
                    }
                    if seen.windows(8).any(|w| w == b"progress") {
                        break;
                    }
                }
                Some(body)
            }
        };
        Ok::<_, String>((sender, connection, kept))
    };
    let set_up = tokio::time::timeout(SETUP_TIMEOUT, setup).await;
    let kept_open = match set_up {
        Ok(Ok(open)) => {
            drop(ready.send(Ok(())).await);
            open
        }
        Ok(Err(e)) => {
            drop(ready.send(Err(e)).await);
            return;
        }
        Err(_) => {
            drop(ready.send(Err("timed out".into())).await);
            return;
        }
    };
    // Hold until released (bounded by the caller's timeout).
    drop(release.wait_for(|r| *r).await);
    let (sender, connection, kept) = kept_open;
    drop(kept);
    drop(sender);
    connection.abort();
}

/// Holds `count` connections (idle) or streams on a fresh `kind` server and
/// reads its memory.
async fn measure(kind: Kind, hold: Hold, count: usize) -> Result<Reading, String> {
    let server = procfs::spawn(kind, Transport::Http, &[])
        .await
        .map_err(|e| e.to_string())?;
    let (port, pid) = (server.port, server.pid);
    // Warm the server up on one connection so the baseline includes its
    // steady-state buffers, then settle.
    for _ in 0..20 {
        crate::load::probe(port, &crate::load::Op::echo()).await?;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (base_kib, _) = procfs::rss_kib(pid);
    let gate = Arc::new(Semaphore::new(SETUP_PARALLEL));
    let (ready_tx, mut ready_rx) = mpsc::channel(count.max(1));
    let (release_tx, release_rx) = watch::channel(false);
    let tasks: Vec<_> = (0..count)
        .map(|n| {
            tokio::spawn(holder(
                port,
                hold,
                n,
                Arc::clone(&gate),
                ready_tx.clone(),
                release_rx.clone(),
            ))
        })
        .collect();
    drop(ready_tx);
    let mut first_error = None;
    let mut ok = 0;
    for _ in 0..count {
        match tokio::time::timeout(SETUP_TIMEOUT, ready_rx.recv()).await {
            Ok(Some(Ok(()))) => ok += 1,
            Ok(Some(Err(e))) => {
                first_error.get_or_insert(e);
            }
            Ok(None) | Err(_) => break,
        }
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (rss_kib, peak_kib) = procfs::rss_kib(pid);
    let _ = release_tx.send(true);
    for task in tasks {
        drop(tokio::time::timeout(Duration::from_secs(5), task).await);
    }
    server.stop().await;
    if ok < count {
        return Err(format!(
            "{ok} of {count} held; first error: {}",
            first_error.unwrap_or_default()
        ));
    }
    Ok(Reading {
        held: count,
        base_kib,
        rss_kib,
        peak_kib,
    })
}

/// `count` concurrent SSE streams on a fresh `kind` server.
pub(crate) async fn streams(kind: Kind, count: usize) -> Result<Reading, String> {
    measure(kind, Hold::Stream, count).await
}

/// `count` idle keep-alive connections on a fresh `kind` server.
pub(crate) async fn idle(kind: Kind, count: usize) -> Result<Reading, String> {
    measure(kind, Hold::Idle, count).await
}
