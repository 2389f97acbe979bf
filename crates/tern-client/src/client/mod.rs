//! [`Client`]: one server's client, by concern:
//!
//! - `request`: a request built once from its typed form, sent, and its
//!   response decoded once (method plus `resultType`), with the retries the
//!   spec asks for (`-32022`, `-32020`);
//! - `list`: discover, the paginated lists (bounded in pages and items),
//!   completion;
//! - `mrtr`: the MRTR driver (the client rules of docs/rules.md) and the
//!   answering of questions;
//! - `manual`: manual rounds ([`PendingRound`]) for `tools/call`,
//!   `prompts/get` and `resources/read`;
//! - `skill`: the Skills extension: [`Client::skills`], [`Client::skill`],
//!   files read verified against their entry ([`Client::read_skill_file`]),
//!   folders ([`Client::read_skill_directory`]);
//! - `subscription`: `subscriptions/listen`;
//! - `task`: the Tasks extension ([`TaskHandle`]): polling `tasks/get`,
//!   answering through `tasks/update`, cancel on drop, detach and resume.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern_protocol::progress::ProgressNotificationParams;
use tern_protocol::{ClientCapabilities, Implementation, JsonObject, RequestId, version};

use crate::handler::{Elicitation, Roots, Sampling};
use crate::headers::HeaderParam;
use crate::limits::Limits;
use crate::preset::Presets;
use crate::transport::Transport;

mod ceiling;
mod list;
mod live;
mod manual;
mod mrtr;
mod request;
mod skill;
mod subscription;
mod task;

pub use crate::limits::{DEFAULT_DEADLINE, DEFAULT_MAX_ROUNDS};
pub use live::live_key;
pub use manual::{Call, Completed, PendingRound, Round};
pub use skill::{SkillFile, SkillListing};
pub use subscription::Subscription;
pub use task::{DEFAULT_POLL, MAX_POLL, MAX_POLL_FAILURES, MIN_POLL, Started, TaskHandle};

/// A callback for progress notifications.
pub type ProgressFn = Arc<dyn Fn(&ProgressNotificationParams) + Send + Sync>;
/// A callback told about each MRTR round: its number and the keys asked.
pub type RoundFn = Arc<dyn Fn(u32, &[String]) + Send + Sync>;
/// A callback told about a task: at its creation (the place to persist its
/// id, ext-tasks' SHOULD) or at each change of its status or message.
pub type TaskFn = Arc<dyn Fn(&tern_protocol::task::Task) + Send + Sync>;

/// Per-call options. Build them with `CallOptions::default()` and the
/// `with_*` / `without_*` methods.
#[derive(Clone, Default)]
#[non_exhaustive]
#[allow(
    clippy::struct_excessive_bools,
    reason = "each bool drops one declared capability; a bitset would read worse"
)]
pub struct CallOptions {
    /// Do not declare elicitation (a headless run: servers take their
    /// fallback instead of asking).
    pub drop_elicitation: bool,
    /// Do not declare sampling.
    pub drop_sampling: bool,
    /// Do not declare roots.
    pub drop_roots: bool,
    /// Answers given in advance, each bound to the question it answers
    /// ([`Presets`]); used instead of the handlers for those questions.
    pub answers: Presets,
    /// Receives the call's progress notifications.
    pub on_progress: Option<ProgressFn>,
    /// Told about each `input_required` round.
    pub on_round: Option<RoundFn>,
    /// Do not declare the Tasks extension on this call, though the client
    /// does ([`ClientBuilder::tasks`]).
    pub drop_tasks: bool,
    /// Told when the call became a task, before it is polled: the hook to
    /// persist its id so another process can resume it ([`Client::task`]).
    pub on_task_created: Option<TaskFn>,
    /// Told each time a poll finds the task's status or message changed.
    pub on_task_status: Option<TaskFn>,
    /// The most this call declares, member by member (elicitation by mode,
    /// sampling with or without tools, roots, each extension): the
    /// handlers' capabilities cut down to it. `None`: no ceiling.
    pub ceiling: Option<Arc<ClientCapabilities>>,
}

impl CallOptions {
    /// Does not declare elicitation.
    #[must_use]
    pub fn without_elicitation(mut self) -> Self {
        self.drop_elicitation = true;
        self
    }

    /// Does not declare sampling.
    #[must_use]
    pub fn without_sampling(mut self) -> Self {
        self.drop_sampling = true;
        self
    }

    /// Does not declare roots.
    #[must_use]
    pub fn without_roots(mut self) -> Self {
        self.drop_roots = true;
        self
    }

    /// Answers given in advance.
    #[must_use]
    pub fn with_answers(mut self, answers: impl Into<Presets>) -> Self {
        self.answers = answers.into();
        self
    }

    /// Receives progress notifications.
    #[must_use]
    pub fn with_progress(mut self, on_progress: ProgressFn) -> Self {
        self.on_progress = Some(on_progress);
        self
    }

    /// Told about each round.
    #[must_use]
    pub fn with_rounds(mut self, on_round: RoundFn) -> Self {
        self.on_round = Some(on_round);
        self
    }

    /// Does not declare the Tasks extension.
    #[must_use]
    pub fn without_tasks(mut self) -> Self {
        self.drop_tasks = true;
        self
    }

    /// Told when the call becomes a task (persist its id here).
    #[must_use]
    pub fn on_task_created(mut self, f: TaskFn) -> Self {
        self.on_task_created = Some(f);
        self
    }

    /// Told about each change of a task's status or message.
    #[must_use]
    pub fn on_task_status(mut self, f: TaskFn) -> Self {
        self.on_task_status = Some(f);
        self
    }

    /// Declares at most `ceiling` on this call (a gateway forwarding its
    /// own client's capabilities, never more): form-mode elicitation only,
    /// URL mode only, sampling without tools, and so on. The ceiling never
    /// adds a capability the client has no handler for.
    ///
    /// ```
    /// use tern_client::CallOptions;
    /// use tern_protocol::ClientCapabilities;
    ///
    /// let form_only = CallOptions::default()
    ///     .with_ceiling(ClientCapabilities::default().with_elicitation_form());
    /// assert!(form_only.ceiling.is_some());
    /// ```
    #[must_use]
    pub fn with_ceiling(mut self, ceiling: ClientCapabilities) -> Self {
        self.ceiling = Some(Arc::new(ceiling));
        self
    }
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("drop_elicitation", &self.drop_elicitation)
            .field("drop_sampling", &self.drop_sampling)
            .field("drop_roots", &self.drop_roots)
            .field("answers", &self.answers)
            .field("drop_tasks", &self.drop_tasks)
            .field("ceiling", &self.ceiling)
            .finish_non_exhaustive()
    }
}

struct Inner {
    transport: Arc<dyn Transport>,
    info: Implementation,
    elicitation: Option<Arc<dyn Elicitation>>,
    sampling: Option<Arc<dyn Sampling>>,
    roots: Option<Arc<dyn Roots>>,
    limits: Limits,
    tasks: bool,
    next_id: AtomicI64,
    tool_headers: Mutex<HashMap<String, Vec<HeaderParam>>>,
    server_info: Mutex<Option<Arc<Implementation>>>,
}

/// An MCP client of one server. Cheap to clone; calls may run concurrently
/// and share nothing but the connection (rule `round-isolated`).
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tern_client::Client;
/// use tern_client::transport::http::HttpTransport;
/// use tern_client::transport::stdio::ChildProcess;
///
/// // A server on standard input and output…
/// let local = Client::builder().build(ChildProcess::spawn("my-server", &[])?);
/// // …or at a URL. Install handlers (`elicitation`, `sampling`, `roots`) to
/// // answer the questions servers ask; the client drives the rounds.
/// let remote = Client::builder().build(HttpTransport::new("https://mcp.example.com/mcp")?);
/// let tools = remote.list_tools().await?;
/// let result = local.call_tool("greet", Some(serde_json::json!({"name": "Ada"}))).await?;
/// println!("{} tools; {:?}", tools.len(), result.content);
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.inner.transport)
            .field("info", &self.inner.info)
            .field("limits", &self.inner.limits)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder {
    info: Implementation,
    elicitation: Option<Arc<dyn Elicitation>>,
    sampling: Option<Arc<dyn Sampling>>,
    roots: Option<Arc<dyn Roots>>,
    limits: Limits,
    tasks: bool,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("info", &self.info)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            info: Implementation::new("tern-client", env!("CARGO_PKG_VERSION")),
            elicitation: None,
            sampling: None,
            roots: None,
            limits: Limits::default(),
            tasks: false,
        }
    }
}

impl ClientBuilder {
    /// The client's self-description (`clientInfo`).
    #[must_use]
    pub fn info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }

    /// Answers elicitations (declares `elicitation`, with its modes).
    #[must_use]
    pub fn elicitation(mut self, handler: impl Elicitation) -> Self {
        self.elicitation = Some(Arc::new(handler));
        self
    }

    /// Answers sampling requests (declares `sampling`; deprecated).
    #[must_use]
    pub fn sampling(mut self, handler: impl Sampling) -> Self {
        self.sampling = Some(Arc::new(handler));
        self
    }

    /// Lists roots (declares `roots`; deprecated).
    #[must_use]
    pub fn roots(mut self, handler: impl Roots) -> Self {
        self.roots = Some(Arc::new(handler));
        self
    }

    /// The client's limits (pages, items, rounds, deadline; the byte limits
    /// are the transport's, see [`Limits`]).
    #[must_use]
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The most MRTR rounds one call may take (default 10).
    #[must_use]
    pub fn max_rounds(mut self, rounds: u32) -> Self {
        self.limits = self.limits.with_max_rounds(rounds);
        self
    }

    /// The most time one call may take, rounds included (default 10 min).
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.limits = self.limits.with_deadline(deadline);
        self
    }

    /// Declares the Tasks extension (`io.modelcontextprotocol/tasks`) on
    /// every request (unless a call drops it): a tool that supports tasks
    /// may then answer `tools/call` with a task, which
    /// [`Client::call_tool`] follows to its end.
    ///
    /// Off by default, a documented choice: a task outlives the request
    /// that made it and holds storage on the server for its TTL, and a
    /// client that lets its call go (a dropped future) leaves it to be
    /// cancelled in the background; an application opts in knowing that,
    /// and can persist the ids ([`CallOptions::on_task_created`]).
    #[must_use]
    pub fn tasks(mut self, declare: bool) -> Self {
        self.tasks = declare;
        self
    }

    /// The client, over `transport`. A roots handler is also handed to
    /// the transport ([`Transport::serve_roots`]), so a 2025-11-25 server's
    /// `roots/list` is answered whenever it comes.
    pub fn build(self, transport: impl Transport) -> Client {
        if let Some(roots) = &self.roots {
            transport.serve_roots(Arc::clone(roots));
        }
        Client {
            inner: Arc::new(Inner {
                transport: Arc::new(transport),
                info: self.info,
                elicitation: self.elicitation,
                sampling: self.sampling,
                roots: self.roots,
                limits: self.limits,
                tasks: self.tasks,
                next_id: AtomicI64::new(1),
                tool_headers: Mutex::new(HashMap::new()),
                server_info: Mutex::new(None),
            }),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Client {
    /// Starts building a client.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The protocol version every request is sent with: tern's client speaks
    /// 2026-07-28 only.
    pub fn protocol_version(&self) -> &'static str {
        version::LATEST
    }

    /// The server's self-description, from the last result that carried it.
    pub fn server_info(&self) -> Option<Implementation> {
        lock(&self.inner.server_info).as_deref().cloned()
    }

    /// The limits this client keeps.
    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// Closes the transport (a child process is asked to exit).
    pub async fn close(&self) {
        self.inner.transport.close().await;
    }

    /// The capabilities a request declares: from the installed handlers,
    /// less what `options` drops.
    pub fn capabilities(&self, options: &CallOptions) -> ClientCapabilities {
        let mut caps = ClientCapabilities::default();
        if let Some(e) = self
            .inner
            .elicitation
            .as_ref()
            .filter(|_| !options.drop_elicitation)
        {
            if e.supports_form() {
                caps = caps.with_elicitation_form();
            }
            if e.supports_url() {
                caps = caps.with_elicitation_url();
            }
        }
        if let Some(s) = self
            .inner
            .sampling
            .as_ref()
            .filter(|_| !options.drop_sampling)
        {
            caps = caps.with_sampling();
            if s.supports_tools()
                && let Some(sampling) = caps.sampling.as_mut()
            {
                sampling.tools = Some(JsonObject::new());
            }
        }
        if self.inner.roots.is_some() && !options.drop_roots {
            caps = caps.with_roots();
        }
        if self.inner.tasks && !options.drop_tasks {
            caps = caps.with_extension(tern_protocol::task::TASKS_EXTENSION);
        }
        match &options.ceiling {
            Some(ceiling) => ceiling::within(caps, ceiling),
            None => caps,
        }
    }

    fn next_id(&self) -> RequestId {
        RequestId::Number(self.inner.next_id.fetch_add(1, Ordering::Relaxed))
    }
}
