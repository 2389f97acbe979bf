//! The stdio transport (spec: stdio): one JSON-RPC message per line on standard
//! input and output; logs go to standard error through `tracing`.
//!
//! Requests are served concurrently up to a bound; `notifications/cancelled`
//! cancels one: `Ctx::cancelled` fires and nothing more is written for it; an
//! unguarded handler's future is dropped, a guarded leg finishes in a
//! server-owned task and its outcome is stored for the retry
//! ([`crate::engine`]); a
//! line over the size limit is refused without being read whole into memory;
//! end of input drains the requests in flight, then returns.
//!
//! Two eras (docs/design.md, "Two eras, one handler"; spec: Versioning and
//! Compatibility › Backward Compatibility with Initialization-Based
//! Versions): an `initialize` without modern `_meta` makes the
//! process a 2025-11-25 session ([`crate::legacy`]); its requests are served
//! by the same handlers, their questions sent as server-to-client requests on
//! standard output. Requests with modern `_meta` stay stateless.

use std::collections::HashMap;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use tern_protocol::ClientNotification;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::{ErrorResponse, Message, Notification, Request, RequestId};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::call::CallContext;
use crate::ctx::Notifier;
use crate::legacy;
use crate::principal::Principal;
use crate::server::Server;

/// Limits of the stdio transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StdioOptions {
    /// The longest line accepted, in bytes (default 4 MiB).
    pub max_line_len: usize,
    /// Requests served at once (default 64); more wait for a slot (up to 16
    /// times as many), beyond that they are refused.
    pub max_concurrent: usize,
    /// How long end of input waits for requests in flight before cancelling
    /// them (default 30 s).
    pub drain_timeout: std::time::Duration,
    /// What an overloaded server suggests as a wait before retrying, in the
    /// `-32603` error's `data.retryAfterMs` (default 1 s).
    pub retry_after: std::time::Duration,
}

impl Default for StdioOptions {
    fn default() -> Self {
        Self {
            max_line_len: 4 * 1024 * 1024,
            max_concurrent: 64,
            drain_timeout: std::time::Duration::from_secs(30),
            retry_after: std::time::Duration::from_secs(1),
        }
    }
}

/// The answer to a request beyond the queue: `-32603` with
/// `data.retryAfterMs`.
fn overloaded(retry_after: std::time::Duration) -> ErrorObject {
    let ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
    ErrorObject::new(code::INTERNAL_ERROR, "server overloaded; retry later")
        .with_data(serde_json::json!({ "retryAfterMs": ms }))
}

/// Serves `server` on this process's standard input and output until end of
/// input.
///
/// When both are pipes, or both sockets — what a client that starts the
/// server gives it: Python's and Rust's process APIs make pipes, Node's
/// (libuv) a socket pair — they are read and written on tokio's reactor,
/// without a thread hop per read and per write: tokio's `stdin()` and
/// `stdout()` hand every read and write to its blocking thread pool, two
/// context switches each. They are then in non-blocking mode, and stay so
/// after it returns: this process's other writers to its standard output
/// see it too (anything else written there breaks the protocol anyway), as
/// would a process that shares them after this one. Otherwise (a terminal,
/// a file, one of each) tokio's `stdin()` and `stdout()` serve. The reactor
/// path needs the runtime's I/O driver (`enable_io`; `#[tokio::main]`
/// enables it).
pub async fn serve_stdio(server: Server, options: StdioOptions) -> io::Result<()> {
    #[cfg(unix)]
    match reactor::stdio() {
        Some(reactor::Stdio::Pipes(input, output)) => {
            return serve(server, input, output, options).await;
        }
        Some(reactor::Stdio::Sockets(input, output)) => {
            return serve(server, input, output, options).await;
        }
        None => {}
    }
    serve(server, tokio::io::stdin(), tokio::io::stdout(), options).await
}

/// Standard input and output on tokio's reactor ([`serve_stdio`]).
#[cfg(unix)]
mod reactor {
    use std::io;
    use std::os::fd::{AsFd as _, OwnedFd};
    use std::os::unix::fs::FileTypeExt as _;

    use tokio::net::UnixStream;
    use tokio::net::unix::pipe;

    /// Standard input and output, both of one kind.
    pub(super) enum Stdio {
        Pipes(pipe::Receiver, pipe::Sender),
        Sockets(UnixStream, UnixStream),
    }

    #[derive(PartialEq)]
    enum Kind {
        Pipe,
        Socket,
        Other,
    }

    fn kind(fd: &OwnedFd) -> Kind {
        let Ok(meta) = fd
            .try_clone()
            .map(std::fs::File::from)
            .and_then(|file| file.metadata())
        else {
            return Kind::Other;
        };
        match meta.file_type() {
            t if t.is_fifo() => Kind::Pipe,
            t if t.is_socket() => Kind::Socket,
            _ => Kind::Other,
        }
    }

    /// Both checked before either is switched to non-blocking mode (a
    /// blocking reader of a non-blocking descriptor would fail), and the
    /// first switched back if the second cannot be; `None` leaves both as
    /// they were.
    pub(super) fn stdio() -> Option<Stdio> {
        let input = io::stdin().as_fd().try_clone_to_owned().ok()?;
        let output = io::stdout().as_fd().try_clone_to_owned().ok()?;
        match (kind(&input), kind(&output)) {
            (Kind::Pipe, Kind::Pipe) => {
                let input = pipe::Receiver::from_owned_fd(input).ok()?;
                if let Ok(output) = pipe::Sender::from_owned_fd(output) {
                    Some(Stdio::Pipes(input, output))
                } else {
                    drop(input.into_blocking_fd());
                    None
                }
            }
            (Kind::Socket, Kind::Socket) => {
                let input = socket(input)?;
                if let Some(output) = socket(output) {
                    Some(Stdio::Sockets(input, output))
                } else {
                    let _ = input.into_std().and_then(|s| s.set_nonblocking(false));
                    None
                }
            }
            _ => None,
        }
    }

    fn socket(fd: OwnedFd) -> Option<UnixStream> {
        let stream = std::os::unix::net::UnixStream::from(fd);
        stream.set_nonblocking(true).ok()?;
        if let Ok(registered) = UnixStream::from_std(stream.try_clone().ok()?) {
            Some(registered)
        } else {
            let _ = stream.set_nonblocking(false);
            None
        }
    }
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

/// Requests in flight: id → (a sequence number telling reuses of one id
/// apart, the request's cancellation).
type InFlight = Arc<Mutex<HashMap<RequestId, (u64, CancellationToken)>>>;

/// One outgoing line, newline included.
fn encode(value: &impl serde::Serialize) -> String {
    let mut line = serde_json::to_string(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot encode an outgoing message");
        String::new()
    });
    line.push('\n');
    line
}

/// Acts on a client notification: only `notifications/cancelled` matters.
fn on_notification(in_flight: &InFlight, n: &Notification) {
    match ClientNotification::from_notification(n) {
        Ok(ClientNotification::Cancelled(params)) => {
            let token = in_flight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&params.request_id)
                .map(|(_, token)| token.clone());
            if let Some(token) = token {
                tracing::debug!(id = %params.request_id, reason = ?params.reason, "request cancelled");
                token.cancel();
            } else {
                // Unknown or finished requests: ignored (spec: Cancellation ›
                // Behavior Requirements).
                tracing::debug!(id = %params.request_id, "cancellation of an unknown or finished request ignored");
            }
        }
        Ok(other) => tracing::debug!(method = other.method(), "notification ignored"),
        Err(e) => tracing::debug!(error = %e, "malformed notification ignored"),
    }
}

/// Answers one request, writing its notifications first; writes nothing once
/// it is cancelled.
#[allow(
    clippy::too_many_arguments,
    reason = "what one request's serving needs from the connection"
)]
async fn serve_request(
    server: &Server,
    request: &Request,
    out: &mpsc::Sender<String>,
    cancel: CancellationToken,
    in_flight: &InFlight,
    seq: u64,
    session: Option<Arc<legacy::Session>>,
    retry_after: std::time::Duration,
) {
    let (notifier, mut notifications) = Notifier::channel(256);
    // One peer per stdio process: anonymous replay records share its bound.
    let call = CallContext::cancelled_by(Principal::anonymous(), cancel.clone())
        .with_notifier(notifier)
        .with_peer("stdio")
        .with_retry_after(retry_after);
    let sink = legacy::Sink::lines(out.clone());
    let handling: Pin<Box<dyn Future<Output = crate::call::Reply> + Send + '_>> = match &session {
        Some(session) => Box::pin(session.serve(server, request, call, &sink)),
        None => Box::pin(server.handle(request, call)),
    };
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
                while let Some(n) = notifications.try_recv() {
                    let _ = out.send(encode(&n)).await;
                }
                // The id is free before its answer is out, so a client may
                // reuse it as soon as it reads the answer.
                forget(in_flight, &request.id, seq);
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
        // Buffered, flushed when nothing more is queued: one write per burst,
        // not one per message (each write to stdout is a blocking-pool hop).
        let mut writer = tokio::io::BufWriter::with_capacity(64 * 1024, writer);
        while let Some(line) = out_rx.recv().await {
            writer.write_all(line.as_bytes()).await?;
            if out_rx.is_empty() {
                writer.flush().await?;
            }
        }
        writer.flush().await?;
        Ok::<_, io::Error>(())
    });

    let mut conn = Connection {
        server,
        out: out_tx,
        in_flight: Arc::default(),
        permits: Arc::new(Semaphore::new(options.max_concurrent.max(1))),
        tasks: JoinSet::new(),
        seq: 0,
        options,
        legacy: None,
    };
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut buf = Vec::new();
    loop {
        conn.reap();
        // Output gone (the peer closed our stdout): stop, so handlers do not
        // run on with nobody to answer.
        if conn.out.is_closed() || writer_task.is_finished() {
            tracing::warn!("output closed; stopping");
            break;
        }
        let session = conn.legacy.clone();
        let ended = async {
            match &session {
                Some(session) => session.ended().await,
                None => std::future::pending().await,
            }
        };
        let line = tokio::select! {
            line = read_line(&mut reader, &mut buf, options.max_line_len) => line?,
            () = ended => {
                // Closed by the keep-alive: the client stopped answering.
                tracing::warn!("the 2025 session ended; stopping");
                break;
            }
        };
        match line {
            Line::Eof => break,
            Line::TooLong => {
                let error = ErrorObject::new(
                    code::INVALID_REQUEST,
                    format!("message exceeds the {} byte limit", options.max_line_len),
                );
                conn.send(&ErrorResponse::new(None, error)).await;
            }
            Line::Message => {
                let line = buf.strip_suffix(b"\r").unwrap_or(&buf);
                if !line.iter().all(u8::is_ascii_whitespace) {
                    conn.on_line(line).await;
                }
            }
        }
    }
    conn.drain().await;
    if let Some(session) = conn.legacy.take() {
        session.close();
    }
    drop(conn);
    writer_task.await.map_err(io::Error::other)?
}

/// Removes `id` from the requests in flight, unless it was reused since.
fn forget(in_flight: &InFlight, id: &RequestId, seq: u64) {
    let mut active = in_flight
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if active.get(id).is_some_and(|(s, _)| *s == seq) {
        active.remove(id);
    }
}

/// Resolves to `Err` instead of unwinding when the future panics, so a
/// handler bug still gets its request an answer.
struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, ()>;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let inner = self.0.as_mut();
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(std::task::Poll::Ready(out)) => std::task::Poll::Ready(Ok(out)),
            Ok(std::task::Poll::Pending) => std::task::Poll::Pending,
            Err(_) => std::task::Poll::Ready(Err(())),
        }
    }
}

/// One stdio connection's state.
struct Connection {
    server: Server,
    out: mpsc::Sender<String>,
    in_flight: InFlight,
    permits: Arc<Semaphore>,
    tasks: JoinSet<()>,
    seq: u64,
    options: StdioOptions,
    /// The 2025 session this process became with `initialize`.
    legacy: Option<Arc<legacy::Session>>,
}

impl Connection {
    async fn send(&self, message: &impl serde::Serialize) {
        let _ = self.out.send(encode(message)).await;
    }

    async fn on_line(&mut self, line: &[u8]) {
        match Message::from_slice(line) {
            Err(e) => {
                self.send(&ErrorResponse::new(None, e.to_error_object()))
                    .await;
            }
            Ok(Message::Request(request)) => self.on_request(request).await,
            Ok(Message::Notification(n)) => {
                on_notification(&self.in_flight, &n);
                if let Some(session) = &self.legacy {
                    session.on_notification(&n);
                }
            }
            Ok(Message::Response(r)) => {
                if let Some(session) = &self.legacy {
                    session.on_response(&r);
                } else {
                    tracing::debug!("a response from the client was ignored: no session");
                }
            }
            Ok(Message::Error(e)) => {
                if let Some(session) = &self.legacy {
                    session.on_error(&e);
                } else {
                    tracing::debug!("an error from the client was ignored: no session");
                }
            }
        }
    }

    /// The legacy session `request` belongs to (a dual-era server selects by
    /// how the client opens, Versioning and Compatibility): none
    /// for a request with modern `_meta`; `initialize` opens it.
    async fn route(&mut self, request: &Request) -> Result<Option<Arc<legacy::Session>>, ()> {
        if legacy::has_modern_meta(request.params.as_deref()) {
            return Ok(None);
        }
        if let Some(session) = &self.legacy {
            return Ok(Some(Arc::clone(session)));
        }
        let Some(options) = self.server.legacy_options() else {
            return Ok(None);
        };
        if request.method != tern_protocol::method::INITIALIZE {
            return Ok(None);
        }
        match legacy::Session::open(&self.server, request, options) {
            Ok((session, reply)) => {
                if let Some(interval) = options.ping_interval {
                    tokio::spawn(
                        Arc::clone(&session)
                            .keep_alive(legacy::Sink::lines(self.out.clone()), interval),
                    );
                }
                tokio::spawn(
                    Arc::clone(&session).forward_changes(
                        self.server.clone(),
                        legacy::Sink::lines(self.out.clone()),
                    ),
                );
                self.legacy = Some(session);
                self.send(&reply).await;
            }
            Err(reply) => self.send(&*reply).await,
        }
        Err(())
    }

    async fn on_request(&mut self, request: Request) {
        let Ok(session) = self.route(&request).await else {
            return;
        };
        let cancel = CancellationToken::new();
        self.seq += 1;
        let seq = self.seq;
        let refused = {
            let mut active = self
                .in_flight
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if active.contains_key(&request.id) {
                Some(ErrorObject::new(
                    code::INVALID_REQUEST,
                    "a request with this id is still in flight",
                ))
            } else if active.len() >= self.options.max_concurrent.max(1) * 16 {
                // Overload is the server's state, not a fault of the request:
                // -32603 with a hint, as HTTP answers 503 + Retry-After.
                Some(overloaded(self.options.retry_after))
            } else {
                active.insert(request.id.clone(), (seq, cancel.clone()));
                None
            }
        };
        if let Some(error) = refused {
            self.send(&ErrorResponse::new(Some(request.id), error))
                .await;
            return;
        }
        let retry_after = self.options.retry_after;
        let (server, out, in_flight, permits) = (
            self.server.clone(),
            self.out.clone(),
            Arc::clone(&self.in_flight),
            Arc::clone(&self.permits),
        );
        self.tasks.spawn(async move {
            // Waiting for a slot happens here, not in the reader, so a
            // cancellation of a waiting or running request is always read.
            let permit = tokio::select! {
                permit = permits.acquire_owned() => permit.ok(),
                () = cancel.cancelled() => None,
            };
            if permit.is_some() {
                let serving = CatchUnwind(Box::pin(serve_request(
                    &server,
                    &request,
                    &out,
                    cancel,
                    &in_flight,
                    seq,
                    session,
                    retry_after,
                )));
                if serving.await.is_err() {
                    tracing::error!(id = %request.id, "a handler panicked");
                    forget(&in_flight, &request.id, seq);
                    let error = ErrorObject::new(code::INTERNAL_ERROR, "Internal error");
                    let _ = out
                        .send(encode(&ErrorResponse::new(Some(request.id.clone()), error)))
                        .await;
                }
            }
            forget(&in_flight, &request.id, seq);
        });
    }

    /// Collects finished tasks.
    fn reap(&mut self) {
        while self.tasks.try_join_next().is_some() {}
    }

    /// End of input: lets the requests in flight finish for up to
    /// `drain_timeout`, then cancels the rest.
    async fn drain(&mut self) {
        let deadline = tokio::time::Instant::now() + self.options.drain_timeout;
        loop {
            match tokio::time::timeout_at(deadline, self.tasks.join_next()).await {
                Ok(Some(_)) => {}
                Ok(None) => return,
                Err(_) => break,
            }
        }
        tracing::warn!("requests still running at end of input are cancelled");
        for token in self
            .in_flight
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .values()
        {
            token.1.cancel();
        }
        while self.tasks.join_next().await.is_some() {}
    }
}
