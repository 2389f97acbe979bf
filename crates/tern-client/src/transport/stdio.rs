//! A server run as a child process, one JSON message per line (spec: stdio).
//!
//! The child's standard error goes to `tracing` (and to a callback of
//! [`SpawnOptions::on_stderr`]); its last lines are kept. When the child closes
//! its output (it exited, or crashed), every waiting request and every later
//! one fails at once with its exit status and those last lines
//! ([`ChildProcess::watch`] tells it to whoever waits elsewhere, a person at a
//! prompt say). Closing asks the child to exit by closing its standard input
//! (spec: stdio › Shutdown), waits, then kills it with the platform's own call
//! (tokio's `Child::kill`). Dropping a request's exchange before its response
//! sends `notifications/cancelled`. A line from the server longer than
//! [`Limits::max_response_bytes`] ends the connection: every waiting request
//! gets the limit's error, none waits for ever.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern_protocol::ServerNotification;
use tern_protocol::jsonrpc::{Message, RequestId};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

use super::{BoxFuture, CancelGuard, Exchange, Incoming, Outgoing, SessionListeners, Transport};
use crate::error::ClientError;
use crate::limits::{Limit, Limits};

/// Where a request's replies go. Boxed: tokio's channel allocates its slots
/// 32 at a time, and a reply is about 200 bytes, so every request in flight
/// held 6.4 KiB of slots it mostly never used; a box is made per reply.
type Reply = mpsc::Sender<Box<Result<Incoming, ClientError>>>;

#[derive(Default)]
struct Routes {
    /// Requests waiting for their response.
    pending: HashMap<RequestId, Reply>,
    /// Progress tokens to the request that carries them.
    progress: HashMap<String, RequestId>,
    /// The child closed its output: how (every later request fails with it).
    closed: Option<ChildExit>,
    /// Requests in flight that may be asked questions by a 2025 server
    /// (`tools/call`, `prompts/get`, `resources/read`, and a 2025 task's
    /// `tasks/result`), oldest first.
    askers: Vec<RequestId>,
    /// The askers with a question of the server not answered yet
    /// ([`the_asker`] reads them).
    asked: HashMap<RequestId, usize>,
    /// The child's input, for answers to a 2025 server's requests (weak:
    /// closing the transport must still close the child's input).
    writer: Option<mpsc::WeakUnboundedSender<String>>,
    /// The client's roots, for a 2025 server's `roots/list` outside a call.
    roots: Option<Arc<dyn crate::handler::Roots>>,
    /// Told each time an answer to a `roots/list` was written.
    roots_answered: Arc<tokio::sync::Notify>,
}

/// How many turns of the scheduler a burst of requests to the child may
/// wait for more to join it before it is written.
const BURST_TURNS: usize = 8;

/// One line and its newline, into the child's buffered input.
async fn put<W: tokio::io::AsyncWrite + Unpin>(input: &mut W, line: &str) -> std::io::Result<()> {
    input.write_all(line.as_bytes()).await?;
    input.write_all(b"\n").await
}

/// The error a request gets once the child closed its output.
fn closed_error(exit: &ChildExit, max_line: usize) -> ClientError {
    if exit.line_too_long {
        ClientError::limit(
            Limit::ResponseBytes,
            format!("a line from the server is longer than {max_line} bytes"),
        )
    } else {
        ClientError::transport(exit)
    }
}

/// How long [`Transport::close`] waits for the child after closing its input,
/// before it kills it.
const GRACE: Duration = Duration::from_secs(3);

/// How long, once the child closed its output, the reader waits for its exit
/// status and the rest of its standard error before it reports the death.
const DEATH_GRACE: Duration = Duration::from_secs(2);

/// How many of the child's last lines of standard error are kept.
pub const STDERR_TAIL: usize = 20;

/// A callback given each line the child writes to its standard error.
pub type StderrFn = Arc<dyn Fn(&str) + Send + Sync>;

/// How to start a child ([`ChildProcess::spawn_with_options`]).
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct SpawnOptions {
    /// The byte limits (a line from the child may be at most
    /// `max_response_bytes` long).
    pub limits: Limits,
    /// Variables added to the child's environment.
    pub env: Vec<(String, String)>,
    /// Given each line of the child's standard error, as it comes.
    pub on_stderr: Option<StderrFn>,
    /// Start the child in a process group of its own (Unix), so that a
    /// terminal's Ctrl-C reaches the client only: the client can then cancel
    /// the request in flight with `notifications/cancelled` and close the
    /// child's input, instead of the child dying of the same signal.
    pub own_process_group: bool,
}

impl SpawnOptions {
    /// The byte limits.
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// Adds `key=value` to the child's environment.
    #[must_use]
    pub fn env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Gives each line of the child's standard error to `f`.
    #[must_use]
    pub fn on_stderr(mut self, f: StderrFn) -> Self {
        self.on_stderr = Some(f);
        self
    }

    /// Starts the child in a process group of its own (see
    /// [`Self::own_process_group`]).
    #[must_use]
    pub fn own_process_group(mut self) -> Self {
        self.own_process_group = true;
        self
    }
}

impl std::fmt::Debug for SpawnOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SpawnOptions")
            .field("limits", &self.limits)
            .field("env", &self.env.iter().map(|(k, _)| k).collect::<Vec<_>>())
            .field("own_process_group", &self.own_process_group)
            .finish_non_exhaustive()
    }
}

/// How the child ended its output: its exit status (when it exited within
/// a moment of closing it) and its last lines of standard error.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChildExit {
    /// The exit status as the platform prints it (`exit status: 3`,
    /// `signal: 9 (SIGKILL)`), or `None` if it had not exited yet.
    pub status: Option<String>,
    /// Its last lines of standard error (at most [`STDERR_TAIL`]).
    pub stderr: Vec<String>,
    /// The output closed because a line was over the limit (the child may
    /// still run).
    pub line_too_long: bool,
}

impl std::fmt::Display for ChildExit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.status {
            Some(status) => write!(f, "the server process exited ({status})")?,
            None => write!(f, "the server process closed its output")?,
        }
        if self.stderr.is_empty() {
            write!(f, "; it wrote nothing on standard error")
        } else {
            write!(f, "; the last lines of its standard error:")?;
            for line in &self.stderr {
                write!(f, "\n  | {line}")?;
            }
            Ok(())
        }
    }
}

/// Tells when a [`ChildProcess`] closed its output, and how
/// ([`ChildProcess::watch`]).
#[derive(Debug, Clone)]
pub struct ChildWatch {
    rx: tokio::sync::watch::Receiver<Option<ChildExit>>,
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl ChildWatch {
    /// Waits until the child closed its output; how it ended.
    pub async fn exited(&mut self) -> ChildExit {
        let exit = match self.rx.wait_for(Option::is_some).await {
            Ok(exit) => exit.clone(),
            // The reader is gone without a word: the transport was dropped.
            Err(_) => None,
        };
        exit.unwrap_or_else(|| self.now())
    }

    /// How the child ended, if it did.
    pub fn exit(&self) -> Option<ChildExit> {
        self.rx.borrow().clone()
    }

    /// The child's last lines of standard error so far.
    pub fn stderr_tail(&self) -> Vec<String> {
        lock(&self.tail).iter().cloned().collect()
    }

    fn now(&self) -> ChildExit {
        ChildExit {
            status: None,
            stderr: self.stderr_tail(),
            line_too_long: false,
        }
    }
}

/// A server running as a child process.
pub struct ChildProcess {
    writer: Mutex<Option<mpsc::UnboundedSender<String>>>,
    routes: Arc<Mutex<Routes>>,
    /// Listeners of the notifications no request takes (a 2025 session's
    /// resource updates).
    listeners: Arc<SessionListeners>,
    child: Arc<tokio::sync::Mutex<Child>>,
    program: String,
    watch: ChildWatch,
    max_line: usize,
}

impl std::fmt::Debug for ChildProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildProcess")
            .field("program", &self.program)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Why a line could not be read.
#[derive(Debug)]
enum LineError {
    TooLong,
    Io(std::io::Error),
}

/// Reads one line into `line` (its end dropped), refusing one longer than
/// `limit` bytes before it is held whole; `Ok(false)` at the end of input.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> Result<bool, LineError> {
    line.clear();
    loop {
        let available = reader.fill_buf().await.map_err(LineError::Io)?;
        if available.is_empty() {
            return Ok(!line.is_empty());
        }
        let (taken, done) = match available.iter().position(|&b| b == b'\n') {
            Some(end) => (end, true),
            None => (available.len(), false),
        };
        if line.len() + taken > limit {
            return Err(LineError::TooLong);
        }
        line.extend_from_slice(&available[..taken]);
        reader.consume(taken + usize::from(done));
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(true);
        }
    }
}

impl ChildProcess {
    /// Starts `program` with `args`, with the default [`Limits`].
    pub fn spawn(program: &str, args: &[String]) -> Result<Self, ClientError> {
        Self::spawn_with(program, args, Limits::default())
    }

    /// Starts `program` with `args`; a line from it may be at most
    /// `limits.max_response_bytes` long.
    pub fn spawn_with(program: &str, args: &[String], limits: Limits) -> Result<Self, ClientError> {
        Self::spawn_with_options(program, args, SpawnOptions::default().limits(limits))
    }

    /// Starts `program` with `args` as `options` say.
    #[allow(
        clippy::too_many_lines,
        reason = "one child's setup in order: command, pipes, reader, stderr tail, writer"
    )]
    pub fn spawn_with_options(
        program: &str,
        args: &[String],
        options: SpawnOptions,
    ) -> Result<Self, ClientError> {
        let limits = options.limits;
        let mut command = Command::new(program);
        #[cfg(unix)]
        if options.own_process_group {
            command.process_group(0);
        }
        let mut child = command
            .args(args)
            .envs(options.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| ClientError::transport(format!("cannot start {program}")).because(e))?;
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(ClientError::transport("the child's pipes are missing"));
        };
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let routes: Arc<Mutex<Routes>> = Arc::default();
        let writer_routes = Arc::clone(&routes);
        tokio::spawn(async move {
            // Buffered, flushed when nothing more is queued: a line and its
            // newline in one write, a burst of lines in one (the pipe is
            // unbuffered: each write_all was a system call of its own).
            let mut stdin = tokio::io::BufWriter::with_capacity(64 * 1024, stdin);
            'lines: while let Some(line) = rx.recv().await {
                if put(&mut stdin, &line).await.is_err() {
                    break;
                }
                if !rx.is_empty() {
                    continue;
                }
                // With other requests in flight (a gateway's many callers
                // sharing one child), the tasks already woken are likely to
                // queue more: let them run, and write what they queued in
                // the same write, for as long as each turn of the scheduler
                // brings more (at most `BURST_TURNS`). Each write wakes the
                // child, and a child on this core is a switch away and back.
                // One request alone is written at once.
                if lock(&writer_routes).pending.len() > 1 {
                    for _ in 0..BURST_TURNS {
                        tokio::task::yield_now().await;
                        let mut more = false;
                        while let Ok(line) = rx.try_recv() {
                            if put(&mut stdin, &line).await.is_err() {
                                break 'lines;
                            }
                            more = true;
                        }
                        if !more {
                            break;
                        }
                    }
                }
                if stdin.flush().await.is_err() {
                    break;
                }
            }
            // Dropping stdin closes it: the server's cue to exit (what is
            // buffered is written first).
            let _ = stdin.flush().await;
        });
        let tail: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let stderr_finished = read_stderr(
            stderr,
            program.to_owned(),
            options.on_stderr,
            Arc::clone(&tail),
        );
        let child = Arc::new(tokio::sync::Mutex::new(child));
        let (exit_tx, exit_rx) = tokio::sync::watch::channel(None);
        let watch = ChildWatch {
            rx: exit_rx,
            tail: Arc::clone(&tail),
        };
        lock(&routes).writer = Some(tx.downgrade());
        let reader_routes = Arc::clone(&routes);
        let listeners: Arc<SessionListeners> = Arc::default();
        let reader_listeners = Arc::clone(&listeners);
        let reader_child = Arc::clone(&child);
        let max_line = limits.max_response_bytes;
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            let why = loop {
                match read_line(&mut reader, &mut line, max_line).await {
                    Ok(true) => dispatch(&reader_routes, &reader_listeners, &line).await,
                    Ok(false) => break None,
                    Err(LineError::TooLong) => break Some(Limit::ResponseBytes),
                    Err(LineError::Io(e)) => {
                        tracing::warn!(error = %e, "reading the server's output failed");
                        break None;
                    }
                }
            };
            // The server is gone, or this client stopped reading it: how it
            // ended (its exit status and last words, when they come within a
            // moment), then every waiting request and every later one learns
            // it (the long line may have been any one's response).
            let line_too_long = why == Some(Limit::ResponseBytes);
            let status = if line_too_long {
                None
            } else {
                let _ = tokio::time::timeout(DEATH_GRACE, stderr_finished).await;
                let mut child = reader_child.lock().await;
                tokio::time::timeout(DEATH_GRACE, child.wait())
                    .await
                    .ok()
                    .and_then(Result::ok)
                    .map(|s| s.to_string())
            };
            let exit = ChildExit {
                status,
                stderr: lock(&tail).iter().cloned().collect(),
                line_too_long,
            };
            let pending: Vec<Reply> = {
                let mut r = lock(&reader_routes);
                r.closed = Some(exit.clone());
                r.progress.clear();
                r.pending.drain().map(|(_, tx)| tx).collect()
            };
            for tx in pending {
                let _ = tx.send(Box::new(Err(closed_error(&exit, max_line)))).await;
            }
            reader_listeners.end();
            let _ = exit_tx.send(Some(exit));
        });
        Ok(Self {
            writer: Mutex::new(Some(tx)),
            routes,
            listeners,
            child,
            program: program.to_owned(),
            watch,
            max_line,
        })
    }

    /// A handle that tells when the child closed its output, and how.
    pub fn watch(&self) -> ChildWatch {
        self.watch.clone()
    }

    /// With the client's roots served: waits at most `grace` for the
    /// server's `roots/list` to be answered, then for a `ping` sent after
    /// the answer, so the server has read its roots before the first
    /// request (server-filesystem asks on `notifications/initialized` and
    /// serves requests meanwhile). Without roots, or if it does not ask,
    /// nothing more.
    pub(crate) async fn settle_roots(&self, grace: Duration) {
        let answered = {
            let r = lock(&self.routes);
            if r.roots.is_none() {
                return;
            }
            Arc::clone(&r.roots_answered)
        };
        if tokio::time::timeout(grace, answered.notified())
            .await
            .is_err()
        {
            return;
        }
        let ping = Outgoing {
            id: RequestId::from("tern-roots-ping"),
            method: tern_protocol::method::PING.to_owned(),
            name: None,
            protocol_version: String::new(),
            header_params: Vec::new(),
            progress_token: None,
            body: r#"{"jsonrpc":"2.0","id":"tern-roots-ping","method":"ping"}"#.to_owned(),
        };
        if let Ok(mut exchange) = self.send(ping).await {
            let _ = tokio::time::timeout(DEATH_GRACE, exchange.next()).await;
            exchange.disarm();
        }
    }

    /// The listeners of notifications no request takes.
    pub(crate) fn listeners(&self) -> &SessionListeners {
        &self.listeners
    }

    /// Writes one line to the child (a notification of the legacy leg).
    pub(crate) fn write_line(&self, line: String) -> Result<(), ClientError> {
        self.write(line)
    }

    fn write(&self, line: String) -> Result<(), ClientError> {
        match lock(&self.writer).as_ref() {
            Some(tx) => tx
                .send(line)
                .map_err(|_| ClientError::transport("the server process is gone")),
            None => Err(ClientError::transport("the transport is closed")),
        }
    }
}

/// Reads the child's standard error: to `tracing`, to `on_stderr`, and its
/// last lines into `tail`; the receiver resolves at its end.
fn read_stderr(
    stderr: tokio::process::ChildStderr,
    name: String,
    on_stderr: Option<StderrFn>,
    tail: Arc<Mutex<VecDeque<String>>>,
) -> tokio::sync::oneshot::Receiver<()> {
    let (done, finished) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::info!(target: "tern_client::server_stderr", server = %name, "{line}");
            if let Some(f) = &on_stderr {
                f(&line);
            }
            let mut t = lock(&tail);
            if t.len() == STDERR_TAIL {
                t.pop_front();
            }
            t.push_back(line);
        }
        let _ = done.send(());
    });
    finished
}

/// Routes one line from the server to the request it belongs to.
async fn dispatch(routes: &Arc<Mutex<Routes>>, listeners: &SessionListeners, line: &[u8]) {
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let (target, reply) = match Message::from_slice(line) {
        Ok(Message::Response(r)) => (Some(r.id), Ok(Incoming::Result(r.result))),
        Ok(Message::Error(e)) => {
            let Some(id) = e.id else {
                tracing::warn!(error = %e.error, "the server reported an error for no request");
                return;
            };
            (Some(id), Ok(Incoming::Error(e.error)))
        }
        Ok(Message::Notification(n)) => {
            let notification = match ServerNotification::from_notification(&n) {
                Ok(n) => n,
                Err(e) => {
                    tracing::debug!(error = %e, "undecodable notification ignored");
                    return;
                }
            };
            let target = {
                let r = lock(routes);
                match &notification {
                    ServerNotification::Progress(p) => {
                        let token = serde_json::to_string(&p.progress_token).unwrap_or_default();
                        r.progress.get(&token).cloned()
                    }
                    ServerNotification::LoggingMessage(m) => {
                        tracing::info!(target: "tern_client::server_log", level = ?m.level, logger = ?m.logger, data = %m.data, "server log");
                        None
                    }
                    other => subscription_of(other),
                }
            };
            if target.is_none() {
                listeners.tell(&notification);
                return;
            }
            (target, Ok(Incoming::Notification(notification)))
        }
        Ok(Message::Request(r)) => {
            // Only a 2025 server sends requests (a 2026-07-28 one never
            // does, rule `no-server-requests`): the legacy leg answers them.
            server_request(routes, &r).await;
            return;
        }
        Err(e) => {
            tracing::warn!(error = %e, "unreadable line from the server");
            return;
        }
    };
    let Some(id) = target else { return };
    // A server's `notifications/cancelled` ends a listen stream as its result
    // would (Cancellation › Behavior Requirements: a server's cancellation
    // references a `subscriptions/listen` request), so the route is released
    // with it.
    let final_reply = matches!(
        reply,
        Ok(Incoming::Result(_)
            | Incoming::Error(_)
            | Incoming::Notification(ServerNotification::Cancelled(_)))
    );
    let tx = {
        let mut r = lock(routes);
        if final_reply {
            r.progress.retain(|_, owner| *owner != id);
            r.askers.retain(|a| *a != id);
            r.pending.remove(&id)
        } else {
            r.pending.get(&id).cloned()
        }
    };
    if let Some(tx) = tx {
        let _ = tx.send(Box::new(reply)).await;
    }
}

/// The call a 2025 server's question is for, when only one can be asking.
/// Nothing on a 2025 stdio wire ties a question to its request, so it goes
/// to the only asker in flight without a question outstanding (a call
/// waiting for its answer is not the one asking again), or to the only
/// asker in flight; with more candidates it is nobody's, and answered as a
/// question the client did not declare — never guessed, since a transport
/// shared by several callers (a gateway's) must not hand one caller's
/// question, or its answer, to another. The one case left: a call with a
/// question outstanding that asks a second one at the same time, while
/// another call is in flight, has it sent to that other call.
fn the_asker(askers: &[RequestId], asked: &HashMap<RequestId, usize>) -> Option<RequestId> {
    let mut free = askers.iter().filter(|id| !asked.contains_key(*id));
    match (free.next(), free.next(), askers) {
        (Some(one), None, _) => Some(one.clone()),
        (None, _, [only]) => Some(only.clone()),
        _ => None,
    }
}

/// A 2025 server's request: `ping` is answered here; a question goes to
/// the call that asked it ([`the_asker`]), whose answer is written back
/// when it comes, or is answered as undeclared; anything else gets an
/// error.
async fn server_request(routes: &Arc<Mutex<Routes>>, request: &tern_protocol::jsonrpc::Request) {
    use super::asks::{ServerAsk, answer_text, response_text, server_ask};
    let (writer, asker, roots, roots_answered) = {
        let r = lock(routes);
        let chosen = the_asker(&r.askers, &r.asked);
        let asker = chosen
            .as_ref()
            .and_then(|id| r.pending.get(id).cloned().map(|tx| (id.clone(), tx)));
        (
            r.writer
                .as_ref()
                .and_then(mpsc::WeakUnboundedSender::upgrade),
            asker,
            r.roots.clone(),
            Arc::clone(&r.roots_answered),
        )
    };
    let Some(writer) = writer else { return };
    let id = request.id.clone();
    match server_ask(request) {
        ServerAsk::Ping => {
            let _ = writer.send(response_text(&id, Ok(serde_json::json!({}))));
        }
        ServerAsk::Unknown(error) => {
            let _ = writer.send(response_text(&id, Err(error)));
        }
        ServerAsk::Live(live, rx) => {
            let roots_question = matches!(live.request(), tern_protocol::InputRequest::Roots(_));
            let taker = if let Some((taker, tx)) = asker {
                *lock(routes).asked.entry(taker.clone()).or_default() += 1;
                let _ = tx.send(Box::new(Ok(Incoming::Request(live)))).await;
                Some(taker)
            } else {
                super::asks::answer_standing(live, roots);
                None
            };
            let routes = Arc::clone(routes);
            // Without a call to take it (or roots to give), the dropped
            // question answers an error.
            tokio::spawn(async move {
                let answer = answer_text(id, rx).await;
                if let Some(asker_id) = taker {
                    let mut r = lock(&routes);
                    if let Some(n) = r.asked.get_mut(&asker_id) {
                        *n -= 1;
                        if *n == 0 {
                            r.asked.remove(&asker_id);
                        }
                    }
                }
                let _ = writer.send(answer);
                if roots_question {
                    roots_answered.notify_one();
                }
            });
        }
    }
}

/// The subscription a listen-stream notification belongs to.
fn subscription_of(n: &ServerNotification) -> Option<RequestId> {
    let meta = match n {
        ServerNotification::ToolListChanged(p)
        | ServerNotification::PromptListChanged(p)
        | ServerNotification::ResourceListChanged(p) => p.meta.as_ref(),
        ServerNotification::ResourceUpdated(p) => p.meta.as_ref(),
        ServerNotification::SubscriptionsAcknowledged(p) => p.meta.as_ref(),
        ServerNotification::TaskStatus(p) => p.meta.as_ref(),
        ServerNotification::Cancelled(p) => return Some(p.request_id.clone()),
        _ => None,
    };
    meta.and_then(|m| m.subscription_id.clone())
}

impl Transport for ChildProcess {
    fn send(&self, out: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        Box::pin(async move {
            let (tx, rx) = mpsc::channel(64);
            {
                let mut r = lock(&self.routes);
                if let Some(exit) = &r.closed {
                    return Err(closed_error(exit, self.max_line));
                }
                r.pending.insert(out.id.clone(), tx);
                if let Some(token) = &out.progress_token {
                    r.progress.insert(token.clone(), out.id.clone());
                }
                if matches!(
                    out.method.as_str(),
                    tern_protocol::method::TOOLS_CALL
                        | tern_protocol::method::PROMPTS_GET
                        | tern_protocol::method::TASKS_RESULT
                        | tern_protocol::method::RESOURCES_READ
                ) {
                    r.askers.push(out.id.clone());
                }
            }
            if let Err(e) = self.write(out.body) {
                // The writer stopped: the child is gone or going. Say how,
                // once the reader knows (bounded: it reports within a moment
                // of the output closing).
                lock(&self.routes).pending.remove(&out.id);
                let mut watch = self.watch();
                return Err(
                    match tokio::time::timeout(DEATH_GRACE * 2, watch.exited()).await {
                        Ok(exit) => closed_error(&exit, self.max_line),
                        Err(_) => e,
                    },
                );
            }
            let routes = Arc::clone(&self.routes);
            let writer = lock(&self.writer).clone();
            let id = out.id;
            let cancel = move || {
                // Cancellation › Transport-Specific Cancellation: on stdio the
                // client MUST say it cancels.
                let mut r = lock(&routes);
                r.pending.remove(&id);
                r.progress.retain(|_, owner| *owner != id);
                r.askers.retain(|a| *a != id);
                let note = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
                if let Some(writer) = writer {
                    let _ = writer.send(note.to_string());
                }
            };
            Ok(Exchange::streamed_boxed(
                rx,
                Some(CancelGuard {
                    armed: true,
                    on_cancel: Some(Box::new(cancel)),
                }),
            ))
        })
    }

    fn serve_roots(&self, roots: Arc<dyn crate::handler::Roots>) {
        lock(&self.routes).roots = Some(roots);
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            // Close stdin, wait, then kill (spec: stdio › Shutdown), with the
            // platform's own call: no `kill` command, no unsafe signal code.
            lock(&self.writer).take();
            let mut child = self.child.lock().await;
            if tokio::time::timeout(GRACE, child.wait()).await.is_ok() {
                return;
            }
            tracing::warn!(server = %self.program, "the server did not exit after its input closed; killing it");
            let _ = child.kill().await;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_goes_only_to_the_one_call_that_can_have_asked_it() {
        let (a, b, c) = (
            RequestId::Number(1),
            RequestId::Number(2),
            RequestId::Number(3),
        );
        let none = HashMap::new();
        let waiting = |ids: &[&RequestId]| -> HashMap<RequestId, usize> {
            ids.iter().map(|id| ((*id).clone(), 1)).collect()
        };
        // One call in flight: its question, even a second one.
        assert_eq!(the_asker(std::slice::from_ref(&a), &none), Some(a.clone()));
        assert_eq!(
            the_asker(std::slice::from_ref(&a), &waiting(&[&a])),
            Some(a.clone())
        );
        // Two calls, one waiting for its answer: the other asked.
        assert_eq!(
            the_asker(&[a.clone(), b.clone()], &waiting(&[&a])),
            Some(b.clone())
        );
        // Two that may be asking, or none: nobody's (the oldest was chosen
        // before, so one caller's question could reach another's call).
        assert_eq!(the_asker(&[a.clone(), b.clone()], &none), None);
        assert_eq!(
            the_asker(&[a.clone(), b.clone(), c.clone()], &waiting(&[&a])),
            None
        );
        assert_eq!(
            the_asker(&[a.clone(), b.clone()], &waiting(&[&a, &b])),
            None
        );
        assert_eq!(the_asker(&[], &none), None);
    }

    async fn lines(input: &[u8], capacity: usize, limit: usize) -> Result<Vec<String>, String> {
        // A small buffer, so lines arrive in several reads.
        let mut reader = BufReader::with_capacity(capacity, input);
        let mut line = Vec::new();
        let mut out = Vec::new();
        loop {
            match read_line(&mut reader, &mut line, limit).await {
                Ok(true) => out.push(String::from_utf8_lossy(&line).into_owned()),
                Ok(false) => return Ok(out),
                Err(e) => return Err(format!("{e:?}")),
            }
        }
    }

    #[tokio::test]
    async fn lines_are_read_whole_across_reads_and_bounded() {
        let input = "{\"a\":\"สวัสดี\"}\r\n\n{\"b\":2}\nlast".as_bytes();
        for capacity in [1, 2, 7, 64] {
            assert_eq!(
                lines(input, capacity, 100).await.unwrap(),
                ["{\"a\":\"สวัสดี\"}", "", "{\"b\":2}", "last"],
                "capacity {capacity}"
            );
        }
        // The limit counts a line's bytes without its end; one over it is
        // refused before it is held whole.
        assert_eq!(lines(b"12345\n", 3, 5).await.unwrap(), ["12345"]);
        assert_eq!(lines(b"123456\n", 3, 5).await.unwrap_err(), "TooLong");
        assert_eq!(lines(b"ok\n123456", 2, 5).await.unwrap_err(), "TooLong");
    }
}
