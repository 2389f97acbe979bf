//! The stdio transport (spec §6.1): one JSON-RPC message per line on standard
//! input and output; logs go to standard error through `tracing`.
//!
//! Requests are served concurrently up to a bound; `notifications/cancelled`
//! cancels one (its future is dropped and nothing more is written for it); a
//! line over the size limit is refused without being read whole into memory;
//! end of input drains the requests in flight, then returns.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};

use tern_protocol::ClientNotification;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::{ErrorResponse, Message, Notification, Request, RequestId};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::ctx::Notifier;
use crate::principal::Principal;
use crate::server::{CallContext, Server};

/// Limits of the stdio transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioOptions {
    /// The longest line accepted, in bytes (default 4 MiB).
    pub max_line_len: usize,
    /// Requests served at once (default 64); reading pauses beyond it.
    pub max_concurrent: usize,
}

impl Default for StdioOptions {
    fn default() -> Self {
        Self {
            max_line_len: 4 * 1024 * 1024,
            max_concurrent: 64,
        }
    }
}

/// Serves `server` on this process's standard input and output until end of
/// input.
pub async fn serve_stdio(server: Server, options: StdioOptions) -> io::Result<()> {
    serve(server, tokio::io::stdin(), tokio::io::stdout(), options).await
}

enum Line {
    Message,
    TooLong,
    Eof,
}

/// Reads one line into `buf` (without its newline), never holding more than
/// `max` bytes of it.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, buf.is_empty()) {
                (true, _) => Line::TooLong,
                (false, true) => Line::Eof,
                (false, false) => Line::Message,
            });
        }
        let (chunk, end) = match available.iter().position(|&b| b == b'\n') {
            Some(pos) => (&available[..pos], Some(pos + 1)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                too_long = true;
                buf.clear();
                buf.shrink_to(64 * 1024);
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let consumed = end.unwrap_or(available.len());
        reader.consume(consumed);
        if end.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Message
            });
        }
    }
}

type InFlight = Arc<Mutex<HashMap<RequestId, CancellationToken>>>;

fn encode(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot encode an outgoing message");
        String::new()
    })
}

/// Acts on a client notification: only `notifications/cancelled` matters.
fn on_notification(in_flight: &InFlight, n: &Notification) {
    match ClientNotification::from_notification(n) {
        Ok(ClientNotification::Cancelled(params)) => {
            let token = in_flight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&params.request_id)
                .cloned();
            if let Some(token) = token {
                tracing::debug!(id = %params.request_id, reason = ?params.reason, "request cancelled");
                token.cancel();
            } else {
                // Unknown or finished requests: ignored (spec §4.2).
                tracing::debug!(id = %params.request_id, "cancellation of an unknown or finished request ignored");
            }
        }
        Ok(other) => tracing::debug!(method = other.method(), "notification ignored"),
        Err(e) => tracing::debug!(error = %e, "malformed notification ignored"),
    }
}

/// Answers one request, writing its notifications first; writes nothing once
/// it is cancelled.
async fn serve_request(
    server: &Server,
    request: &Request,
    out: &mpsc::Sender<String>,
    cancel: CancellationToken,
) {
    let (notifier, mut notifications) = Notifier::channel(256);
    let call = CallContext {
        principal: Principal::anonymous(),
        notifier: Some(notifier),
        cancel: cancel.clone(),
    };
    let handling = server.handle(request, call);
    tokio::pin!(handling);
    loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => return,
            Some(n) = notifications.recv() => {
                let _ = out.send(encode(&n)).await;
            }
            reply = &mut handling => {
                // Notifications raised before the result go first.
                while let Ok(n) = notifications.try_recv() {
                    let _ = out.send(encode(&n)).await;
                }
                if !cancel.is_cancelled() {
                    let _ = out.send(encode(&reply)).await;
                }
                return;
            }
        }
    }
}

/// Serves `server` on any byte streams (a child process's pipes, a socket, an
/// in-memory pair in tests) until `reader` ends.
pub async fn serve<R, W>(
    server: Server,
    reader: R,
    writer: W,
    options: StdioOptions,
) -> io::Result<()>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::channel::<String>(1024);
    let writer_task = tokio::spawn(async move {
        let mut writer = writer;
        while let Some(line) = out_rx.recv().await {
            writer.write_all(line.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            if out_rx.is_empty() {
                writer.flush().await?;
            }
        }
        writer.flush().await?;
        Ok::<_, io::Error>(())
    });

    let in_flight: InFlight = Arc::default();
    let permits = Arc::new(Semaphore::new(options.max_concurrent.max(1)));
    let mut tasks = JoinSet::new();
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut buf = Vec::new();
    loop {
        while tasks.try_join_next().is_some() {}
        match read_line(&mut reader, &mut buf, options.max_line_len).await? {
            Line::Eof => break,
            Line::TooLong => {
                let error = ErrorObject::new(
                    code::INVALID_REQUEST,
                    format!("message exceeds the {} byte limit", options.max_line_len),
                );
                let _ = out_tx.send(encode(&ErrorResponse::new(None, error))).await;
            }
            Line::Message => {
                let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
                if line.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match Message::from_slice(line) {
                    Err(e) => {
                        let _ = out_tx
                            .send(encode(&ErrorResponse::new(None, e.to_error_object())))
                            .await;
                    }
                    Ok(Message::Request(request)) => {
                        let cancel = CancellationToken::new();
                        let duplicate = {
                            let mut active = in_flight
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner);
                            let duplicate = active.contains_key(&request.id);
                            if !duplicate {
                                active.insert(request.id.clone(), cancel.clone());
                            }
                            duplicate
                        };
                        if duplicate {
                            let error = ErrorObject::new(
                                code::INVALID_REQUEST,
                                "a request with this id is still in flight",
                            );
                            let _ = out_tx
                                .send(encode(&ErrorResponse::new(Some(request.id), error)))
                                .await;
                            continue;
                        }
                        let permit = Arc::clone(&permits)
                            .acquire_owned()
                            .await
                            .map_err(io::Error::other)?;
                        let (server, out, in_flight) =
                            (server.clone(), out_tx.clone(), Arc::clone(&in_flight));
                        tasks.spawn(async move {
                            let _permit = permit;
                            serve_request(&server, &request, &out, cancel).await;
                            in_flight
                                .lock()
                                .unwrap_or_else(std::sync::PoisonError::into_inner)
                                .remove(&request.id);
                        });
                    }
                    Ok(Message::Notification(n)) => on_notification(&in_flight, &n),
                    Ok(Message::Response(_) | Message::Error(_)) => {
                        tracing::debug!(
                            "a response from the client was ignored: this server sends no requests"
                        );
                    }
                }
            }
        }
    }
    // End of input: let the requests in flight finish, then flush.
    while tasks.join_next().await.is_some() {}
    drop(out_tx);
    writer_task.await.map_err(io::Error::other)?
}
