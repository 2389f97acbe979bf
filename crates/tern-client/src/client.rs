//! [`Client`]: requests with the full `_meta`, lists, the MRTR driver, manual
//! rounds, and subscriptions.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tern_protocol::completion::{CompleteResult, Reference};
use tern_protocol::discover::DiscoverResult;
use tern_protocol::elicitation::ElicitRequestParams;
use tern_protocol::error::code;
use tern_protocol::meta::RequestMeta;
use tern_protocol::mrtr::InputRequest;
use tern_protocol::progress::ProgressNotificationParams;
use tern_protocol::prompt::{GetPromptResult, ListPromptsResult, Prompt};
use tern_protocol::resource::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
    ResourceTemplate,
};
use tern_protocol::roots::ListRootsResult;
use tern_protocol::subscription::SubscriptionFilter;
use tern_protocol::tool::{CallToolResult, ListToolsResult, Tool};
use tern_protocol::{
    ClientCapabilities, Implementation, InputRequests, InputResponse, InputResponses, JsonObject,
    Outcome, RequestId, ResultContext, ServerNotification, ServerResult, method, version,
};

use crate::error::ClientError;
use crate::handler::{Elicitation, Question, Roots, Sampling};
use crate::headers::{HeaderParam, header_params, param_headers};
use crate::transport::{Exchange, Incoming, Outgoing, Transport};

/// Default bound on MRTR rounds per call: 10.
pub const DEFAULT_MAX_ROUNDS: u32 = 10;
/// Default bound on the total time of one call, rounds included: 10 minutes.
pub const DEFAULT_DEADLINE: Duration = Duration::from_secs(600);

/// A callback for progress notifications.
pub type ProgressFn = Arc<dyn Fn(&ProgressNotificationParams) + Send + Sync>;
/// A callback told about each MRTR round: its number and the keys asked.
pub type RoundFn = Arc<dyn Fn(u32, &[String]) + Send + Sync>;

/// Per-call options.
#[derive(Clone, Default)]
pub struct CallOptions {
    /// Do not declare elicitation (a headless run: servers take their
    /// fallback instead of asking).
    pub drop_elicitation: bool,
    /// Do not declare sampling.
    pub drop_sampling: bool,
    /// Do not declare roots.
    pub drop_roots: bool,
    /// Answers given in advance, by key; they are used for questions asked
    /// under those keys instead of the handlers.
    pub answers: InputResponses,
    /// Receives the call's progress notifications.
    pub on_progress: Option<ProgressFn>,
    /// Told about each `input_required` round.
    pub on_round: Option<RoundFn>,
}

impl std::fmt::Debug for CallOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallOptions")
            .field("drop_elicitation", &self.drop_elicitation)
            .field("drop_sampling", &self.drop_sampling)
            .field("drop_roots", &self.drop_roots)
            .field("answers", &self.answers)
            .finish_non_exhaustive()
    }
}

/// A round the server asked and nobody has answered yet (manual mode). It
/// serialises, so it can be parked (a hosted UI waiting for a person) and
/// resumed by another [`Client`], in another process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingRound {
    /// The method of the call (`tools/call`, `prompts/get`, `resources/read`).
    pub method: String,
    /// The call's params without `_meta` (name and arguments, or URI).
    pub params: JsonObject,
    /// The questions.
    #[serde(default)]
    pub input_requests: InputRequests,
    /// The server's state, echoed byte for byte on the retry (C2), or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// How many rounds this call has taken so far.
    pub round: u32,
}

/// The outcome of one leg in manual mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Round<T> {
    /// The final result.
    Complete(T),
    /// The server asks first.
    InputRequired(PendingRound),
}

/// A `subscriptions/listen` stream.
#[derive(Debug)]
pub struct Subscription {
    exchange: Exchange,
    ended: bool,
}

impl Subscription {
    /// The next notification; `None` when the subscription ended: the server
    /// closed it gracefully, cancelled it, or went away (spec §9: a client
    /// accepts any of the three as the end), and every call after that.
    pub async fn next(&mut self) -> Option<Result<ServerNotification, ClientError>> {
        if self.ended {
            return None;
        }
        let next = match self.exchange.next().await {
            None
            | Some(Ok(
                Incoming::Result(_) | Incoming::Notification(ServerNotification::Cancelled(_)),
            )) => None,
            Some(Ok(Incoming::Notification(n))) => Some(Ok(n)),
            Some(Ok(Incoming::Error(e))) => Some(Err(ClientError::rpc(e))),
            Some(Err(e)) => Some(Err(e)),
        };
        self.ended = next.is_none();
        next
    }
}

struct Inner {
    transport: Arc<dyn Transport>,
    info: Implementation,
    elicitation: Option<Arc<dyn Elicitation>>,
    sampling: Option<Arc<dyn Sampling>>,
    roots: Option<Arc<dyn Roots>>,
    max_rounds: u32,
    deadline: Duration,
    next_id: AtomicI64,
    tool_headers: Mutex<HashMap<String, Vec<HeaderParam>>>,
    server_info: Mutex<Option<Implementation>>,
}

/// An MCP client of one server. Cheap to clone; calls may run concurrently
/// and share nothing but the connection (C5).
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("transport", &self.inner.transport)
            .field("info", &self.inner.info)
            .finish_non_exhaustive()
    }
}

/// Builds a [`Client`].
pub struct ClientBuilder {
    info: Implementation,
    elicitation: Option<Arc<dyn Elicitation>>,
    sampling: Option<Arc<dyn Sampling>>,
    roots: Option<Arc<dyn Roots>>,
    max_rounds: u32,
    deadline: Duration,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("info", &self.info)
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
            max_rounds: DEFAULT_MAX_ROUNDS,
            deadline: DEFAULT_DEADLINE,
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

    /// The most MRTR rounds one call may take (default 10).
    #[must_use]
    pub fn max_rounds(mut self, rounds: u32) -> Self {
        self.max_rounds = rounds.max(1);
        self
    }

    /// The most time one call may take, rounds included (default 10 min).
    #[must_use]
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// The client, over `transport`.
    pub fn build(self, transport: impl Transport) -> Client {
        Client {
            inner: Arc::new(Inner {
                transport: Arc::new(transport),
                info: self.info,
                elicitation: self.elicitation,
                sampling: self.sampling,
                roots: self.roots,
                max_rounds: self.max_rounds,
                deadline: self.deadline,
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

fn object(value: Value) -> JsonObject {
    match value {
        Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

/// Backoff before retrying a state-only round (load shedding): 50 ms
/// doubling to 2 s.
fn backoff(shed_rounds: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1 << shed_rounds.min(6))).min(Duration::from_secs(2))
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
        lock(&self.inner.server_info).clone()
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
        caps
    }

    fn next_id(&self) -> RequestId {
        RequestId::Number(self.inner.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Sends one request (a new id every time, C4) and waits for its
    /// response, passing notifications to `options`.
    async fn send_once(
        &self,
        m: &str,
        params: &JsonObject,
        options: &CallOptions,
    ) -> Result<Box<RawValue>, ClientError> {
        let id = self.next_id();
        let version = self.protocol_version();
        let mut meta = RequestMeta::new(version, self.capabilities(options))
            .with_client_info(self.inner.info.clone());
        let progress_token = options.on_progress.as_ref().map(|_| format!("tern-{id}"));
        if let Some(token) = &progress_token {
            meta = meta.with_progress_token(token.as_str());
        }
        let mut full = params.clone();
        full.insert(
            "_meta".into(),
            serde_json::to_value(&meta).map_err(ClientError::protocol)?,
        );
        let name = match m {
            method::TOOLS_CALL | method::PROMPTS_GET => {
                full.get("name").and_then(Value::as_str).map(str::to_owned)
            }
            method::RESOURCES_READ => full.get("uri").and_then(Value::as_str).map(str::to_owned),
            method::TASKS_GET | method::TASKS_UPDATE | method::TASKS_CANCEL => full
                .get("taskId")
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        let header_params = match (m, &name) {
            (method::TOOLS_CALL, Some(tool)) => lock(&self.inner.tool_headers)
                .get(tool)
                .map(|params| param_headers(params, full.get("arguments")))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let body = json!({"jsonrpc": "2.0", "id": id, "method": m, "params": full}).to_string();
        let out = Outgoing {
            id,
            method: m.to_owned(),
            name,
            protocol_version: version.to_owned(),
            header_params,
            progress_token,
            body,
        };
        let mut exchange = self.inner.transport.send(out).await?;
        loop {
            match exchange.next().await {
                None => {
                    return Err(ClientError::transport(
                        "the connection closed before the response",
                    ));
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(Incoming::Notification(n))) => {
                    if let (ServerNotification::Progress(p), Some(on_progress)) =
                        (&n, &options.on_progress)
                    {
                        on_progress(p);
                    }
                }
                Some(Ok(Incoming::Result(raw))) => {
                    exchange.disarm();
                    if let Ok(meta) = serde_json::from_str::<ResultMetaPeek>(raw.get())
                        && let Some(info) = meta.meta.and_then(|m| m.server_info)
                    {
                        *lock(&self.inner.server_info) = Some(info);
                    }
                    return Ok(raw);
                }
                Some(Ok(Incoming::Error(e))) => {
                    exchange.disarm();
                    return Err(ClientError::rpc(e));
                }
            }
        }
    }

    /// [`Self::send_once`] with the two retries the spec asks for: after
    /// `-32022`, once, if `supported` lists the version tern speaks (§2.3: a
    /// mutually supported version; tern speaks 2026-07-28 only, so this is a
    /// replica of another release answering, as in a rolling upgrade, and
    /// otherwise the error is the answer); after `-32020` on `tools/call`,
    /// once after refreshing `tools/list` (§6.2).
    async fn request(
        &self,
        m: &str,
        params: &JsonObject,
        options: &CallOptions,
    ) -> Result<Box<RawValue>, ClientError> {
        match self.send_once(m, params, options).await {
            Err(e)
                if e.rpc_error()
                    .filter(|e| e.code == code::UNSUPPORTED_PROTOCOL_VERSION)
                    .and_then(tern_protocol::ErrorObject::unsupported_version_data)
                    .is_some_and(|d| d.supported.iter().any(|v| v == version::LATEST)) =>
            {
                self.send_once(m, params, options).await
            }
            Err(e)
                if m == method::TOOLS_CALL
                    && e.rpc_error()
                        .is_some_and(|e| e.code == code::HEADER_MISMATCH) =>
            {
                self.refresh_tool_headers().await?;
                self.send_once(m, params, options).await
            }
            other => other,
        }
    }

    /// Re-reads `tools/list` (every page) to refresh the `x-mcp-header`
    /// annotations, after a `-32020`.
    async fn refresh_tool_headers(&self) -> Result<(), ClientError> {
        let mut cursor: Option<String> = None;
        loop {
            let params = cursor
                .as_deref()
                .map_or_else(JsonObject::new, |c| object(json!({ "cursor": c })));
            let raw = self
                .send_once(method::TOOLS_LIST, &params, &CallOptions::default())
                .await?;
            let ServerResult::ListTools(page) = Self::decode(method::TOOLS_LIST, &raw)? else {
                return Err(ClientError::protocol("not a tools/list result"));
            };
            self.remember_headers(&page.tools);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// Keeps the header params of `tools`; returns which tools are valid.
    fn remember_headers(&self, tools: &[Tool]) -> Vec<bool> {
        let mut headers = lock(&self.inner.tool_headers);
        tools
            .iter()
            .map(|tool| match header_params(&tool.input_schema) {
                Ok(params) => {
                    headers.insert(tool.name.clone(), params);
                    true
                }
                Err(why) => {
                    tracing::warn!(tool = %tool.name, %why, "tool dropped: invalid x-mcp-header");
                    headers.remove(&tool.name);
                    false
                }
            })
            .collect()
    }

    fn decode(m: &str, raw: &RawValue) -> Result<ServerResult, ClientError> {
        ServerResult::decode(m, raw.get(), ResultContext::default()).map_err(ClientError::protocol)
    }

    /// `server/discover`.
    pub async fn discover(&self) -> Result<DiscoverResult, ClientError> {
        let raw = self
            .request(
                method::DISCOVER,
                &JsonObject::new(),
                &CallOptions::default(),
            )
            .await?;
        match Self::decode(method::DISCOVER, &raw)? {
            ServerResult::Discover(d) => Ok(d),
            _ => Err(ClientError::protocol("not a discover result")),
        }
    }

    async fn page(&self, m: &str, cursor: Option<&str>) -> Result<ServerResult, ClientError> {
        let params = cursor.map_or_else(JsonObject::new, |c| object(json!({ "cursor": c })));
        let raw = self.request(m, &params, &CallOptions::default()).await?;
        Self::decode(m, &raw)
    }

    /// One page of `tools/list`. Tools whose `x-mcp-header` annotations are
    /// invalid are dropped from the page, with a warning (spec §6.2).
    pub async fn list_tools_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListToolsResult, ClientError> {
        let ServerResult::ListTools(mut page) = self.page(method::TOOLS_LIST, cursor).await? else {
            return Err(ClientError::protocol("not a tools/list result"));
        };
        let valid = self.remember_headers(&page.tools);
        let mut valid = valid.into_iter();
        page.tools.retain(|_| valid.next().unwrap_or(false));
        Ok(page)
    }

    /// Every tool, every page.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        all_pages(|cursor| async move {
            let page = self.list_tools_page(cursor.as_deref()).await?;
            Ok((page.tools, page.next_cursor))
        })
        .await
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListPromptsResult, ClientError> {
        match self.page(method::PROMPTS_LIST, cursor).await? {
            ServerResult::ListPrompts(p) => Ok(p),
            _ => Err(ClientError::protocol("not a prompts/list result")),
        }
    }

    /// Every prompt, every page.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, ClientError> {
        all_pages(|cursor| async move {
            let page = self.list_prompts_page(cursor.as_deref()).await?;
            Ok((page.prompts, page.next_cursor))
        })
        .await
    }

    /// One page of `resources/list`.
    pub async fn list_resources_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListResourcesResult, ClientError> {
        match self.page(method::RESOURCES_LIST, cursor).await? {
            ServerResult::ListResources(p) => Ok(p),
            _ => Err(ClientError::protocol("not a resources/list result")),
        }
    }

    /// Every resource, every page.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, ClientError> {
        all_pages(|cursor| async move {
            let page = self.list_resources_page(cursor.as_deref()).await?;
            Ok((page.resources, page.next_cursor))
        })
        .await
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListResourceTemplatesResult, ClientError> {
        match self.page(method::RESOURCES_TEMPLATES_LIST, cursor).await? {
            ServerResult::ListResourceTemplates(p) => Ok(p),
            _ => Err(ClientError::protocol(
                "not a resources/templates/list result",
            )),
        }
    }

    /// Every resource template, every page.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ClientError> {
        all_pages(|cursor| async move {
            let page = self.list_resource_templates_page(cursor.as_deref()).await?;
            Ok((page.resource_templates, page.next_cursor))
        })
        .await
    }

    /// `completion/complete`.
    pub async fn complete(
        &self,
        reference: Reference,
        argument: &str,
        value: &str,
        context: Option<JsonObject>,
    ) -> Result<CompleteResult, ClientError> {
        let mut params =
            object(json!({"ref": reference, "argument": {"name": argument, "value": value}}));
        if let Some(context) = context {
            params.insert("context".into(), json!({ "arguments": context }));
        }
        match Self::decode(
            method::COMPLETION_COMPLETE,
            &self
                .request(
                    method::COMPLETION_COMPLETE,
                    &params,
                    &CallOptions::default(),
                )
                .await?,
        )? {
            ServerResult::Completion(c) => Ok(c),
            _ => Err(ClientError::protocol("not a completion result")),
        }
    }

    /// Opens a `subscriptions/listen` stream; its first notification is the
    /// acknowledgement. Dropping the subscription ends it.
    pub async fn listen(&self, filter: SubscriptionFilter) -> Result<Subscription, ClientError> {
        let id = self.next_id();
        let version = self.protocol_version();
        let meta = RequestMeta::new(version, self.capabilities(&CallOptions::default()))
            .with_client_info(self.inner.info.clone());
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method::SUBSCRIPTIONS_LISTEN, "params": {"notifications": filter, "_meta": meta}}).to_string();
        let out = Outgoing {
            id,
            method: method::SUBSCRIPTIONS_LISTEN.into(),
            name: None,
            protocol_version: version.to_owned(),
            header_params: Vec::new(),
            progress_token: None,
            body,
        };
        Ok(Subscription {
            exchange: self.inner.transport.send(out).await?,
            ended: false,
        })
    }

    /// Calls a tool, answering the server's questions until it completes.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Value>,
    ) -> Result<CallToolResult, ClientError> {
        self.call_tool_with(name, arguments, &CallOptions::default())
            .await
    }

    /// [`Self::call_tool`] with options.
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Option<Value>,
        options: &CallOptions,
    ) -> Result<CallToolResult, ClientError> {
        match self
            .drive(
                method::TOOLS_CALL,
                Self::tool_params(name, arguments),
                options,
            )
            .await?
        {
            ServerResult::CallTool(Outcome::Complete(r)) => Ok(r),
            _ => Err(ClientError::protocol("not a tools/call result")),
        }
    }

    /// Gets a prompt, answering the server's questions until it completes.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        options: &CallOptions,
    ) -> Result<GetPromptResult, ClientError> {
        let mut params = object(json!({ "name": name }));
        if let Some(arguments) = arguments {
            params.insert("arguments".into(), Value::Object(arguments));
        }
        match self.drive(method::PROMPTS_GET, params, options).await? {
            ServerResult::GetPrompt(Outcome::Complete(r)) => Ok(r),
            _ => Err(ClientError::protocol("not a prompts/get result")),
        }
    }

    /// Reads a resource, answering the server's questions until it completes.
    pub async fn read_resource(
        &self,
        uri: &str,
        options: &CallOptions,
    ) -> Result<ReadResourceResult, ClientError> {
        match self
            .drive(
                method::RESOURCES_READ,
                object(json!({ "uri": uri })),
                options,
            )
            .await?
        {
            ServerResult::ReadResource(Outcome::Complete(r)) => Ok(r),
            _ => Err(ClientError::protocol("not a resources/read result")),
        }
    }

    fn tool_params(name: &str, arguments: Option<Value>) -> JsonObject {
        let mut params = object(json!({ "name": name }));
        if let Some(arguments) = arguments {
            params.insert("arguments".into(), arguments);
        }
        params
    }

    /// Manual mode: one leg of `tools/call`; the questions come back as a
    /// [`PendingRound`] instead of being answered.
    pub async fn call_tool_once(
        &self,
        name: &str,
        arguments: Option<Value>,
        options: &CallOptions,
    ) -> Result<Round<CallToolResult>, ClientError> {
        let pending = PendingRound {
            method: method::TOOLS_CALL.into(),
            params: Self::tool_params(name, arguments),
            input_requests: InputRequests::new(),
            request_state: None,
            round: 0,
        };
        self.leg(&pending, None, options).await
    }

    /// Manual mode: retries `pending` with `responses` (only the keys it asked
    /// are sent, C6), from this client or any other.
    pub async fn resume_tool(
        &self,
        pending: &PendingRound,
        responses: &InputResponses,
        options: &CallOptions,
    ) -> Result<Round<CallToolResult>, ClientError> {
        self.leg(pending, Some(responses), options).await
    }

    /// Answers `pending`'s questions with this client's handlers (and the
    /// preset answers of `options`).
    pub async fn answer(
        &self,
        pending: &PendingRound,
        options: &CallOptions,
    ) -> Result<InputResponses, ClientError> {
        let target = pending
            .params
            .get("name")
            .or_else(|| pending.params.get("uri"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        self.answer_all(&pending.method, target, &pending.input_requests, options)
            .await
    }

    async fn leg(
        &self,
        pending: &PendingRound,
        responses: Option<&InputResponses>,
        options: &CallOptions,
    ) -> Result<Round<CallToolResult>, ClientError> {
        let params = retry_params(pending, responses);
        let raw = self.request(&pending.method, &params, options).await?;
        match Self::decode(&pending.method, &raw)? {
            ServerResult::CallTool(Outcome::Complete(r)) => Ok(Round::Complete(r)),
            ServerResult::CallTool(Outcome::InputRequired(ir)) => {
                Ok(Round::InputRequired(PendingRound {
                    method: pending.method.clone(),
                    params: pending.params.clone(),
                    input_requests: ir.input_requests.unwrap_or_default(),
                    request_state: ir.request_state,
                    round: pending.round + 1,
                }))
            }
            _ => Err(ClientError::protocol("unexpected result")),
        }
    }

    /// The MRTR driver (C1–C12): rounds until the call completes, within the
    /// round and time bounds.
    async fn drive(
        &self,
        m: &str,
        params: JsonObject,
        options: &CallOptions,
    ) -> Result<ServerResult, ClientError> {
        let deadline = tokio::time::Instant::now() + self.inner.deadline;
        let target = params
            .get("name")
            .or_else(|| params.get("uri"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let mut pending = PendingRound {
            method: m.to_owned(),
            params,
            input_requests: InputRequests::new(),
            request_state: None,
            round: 0,
        };
        let mut responses: Option<InputResponses> = None;
        let mut shed = 0;
        loop {
            let params = retry_params(&pending, responses.as_ref());
            let raw = tokio::time::timeout_at(deadline, self.request(m, &params, options))
                .await
                .map_err(|_| ClientError::bounds("the call's deadline passed"))??;
            let result = Self::decode(m, &raw)?;
            let ir = match result {
                ServerResult::CallTool(Outcome::InputRequired(ir))
                | ServerResult::GetPrompt(Outcome::InputRequired(ir))
                | ServerResult::ReadResource(Outcome::InputRequired(ir)) => ir,
                done => return Ok(done),
            };
            if pending.round + 1 >= self.inner.max_rounds {
                return Err(ClientError::bounds(format!(
                    "the server asked for more than {} rounds",
                    self.inner.max_rounds
                )));
            }
            let requests = ir.input_requests.unwrap_or_default();
            if let Some(on_round) = &options.on_round {
                let keys: Vec<String> = requests.keys().cloned().collect();
                on_round(pending.round + 1, &keys);
            }
            if requests.is_empty() {
                // A state-only round (load shedding, §2.4): retry, after a
                // growing pause (C1 allows retrying at once).
                tokio::time::sleep_until(
                    (tokio::time::Instant::now() + backoff(shed)).min(deadline),
                )
                .await;
                shed += 1;
                responses = None;
            } else {
                shed = 0;
                let answers = tokio::time::timeout_at(
                    deadline,
                    self.answer_all(m, &target, &requests, options),
                )
                .await
                .map_err(|_| ClientError::bounds("the call's deadline passed while answering"))??;
                responses = Some(answers);
            }
            // C2/C3: the state exactly as received, or none.
            pending = PendingRound {
                input_requests: requests,
                request_state: ir.request_state,
                round: pending.round + 1,
                ..pending
            };
        }
    }

    /// Answers every question of a round concurrently; the first that fails
    /// cancels the others (C11: there is no per-answer error to send).
    async fn answer_all(
        &self,
        m: &str,
        target: &str,
        requests: &InputRequests,
        options: &CallOptions,
    ) -> Result<InputResponses, ClientError> {
        let server = self.server_info();
        let jobs = requests.iter().map(|(key, request)| {
            let question = Question {
                key: key.clone(),
                server: server.clone(),
                method: m.to_owned(),
                target: target.to_owned(),
            };
            async move {
                if let Some(preset) = options.answers.raw(key) {
                    let answer = InputResponse::decode_as(request.kind(), preset).map_err(|e| {
                        ClientError::handler(format!(
                            "the answer given for `{key}` does not fit its question: {e}"
                        ))
                    })?;
                    return Ok((key.clone(), answer));
                }
                let answer = self.answer_one(question, request, options).await?;
                Ok::<_, ClientError>((key.clone(), answer))
            }
        });
        let answers = futures_util::future::try_join_all(jobs).await?;
        Ok(answers.into_iter().collect())
    }

    async fn answer_one(
        &self,
        question: Question,
        request: &InputRequest,
        options: &CallOptions,
    ) -> Result<InputResponse, ClientError> {
        let key = question.key.clone();
        match request {
            InputRequest::Elicitation(e) => {
                let handler = self
                    .inner
                    .elicitation
                    .as_ref()
                    .filter(|_| !options.drop_elicitation)
                    .ok_or_else(|| {
                        ClientError::unanswerable(format!(
                            "`{key}` is an elicitation and this client has no elicitation handler"
                        ))
                    })?;
                let result = match &e.params {
                    ElicitRequestParams::Form(form) if handler.supports_form() => {
                        handler.form(question, form.clone()).await
                    }
                    ElicitRequestParams::Url(url) if handler.supports_url() => {
                        handler.url(question, url.clone()).await
                    }
                    _ => {
                        return Err(ClientError::unanswerable(format!(
                            "`{key}` uses an elicitation mode this client did not declare"
                        )));
                    }
                };
                result
                    .map(InputResponse::from)
                    .map_err(|e| ClientError::handler(format!("`{key}`: {e}")))
            }
            InputRequest::Sampling(s) => {
                let handler = self
                    .inner
                    .sampling
                    .as_ref()
                    .filter(|_| !options.drop_sampling)
                    .ok_or_else(|| {
                        ClientError::unanswerable(format!(
                            "`{key}` asks for sampling and this client has no sampling handler"
                        ))
                    })?;
                handler
                    .create_message(question, s.params.clone())
                    .await
                    .map(InputResponse::from)
                    .map_err(|e| ClientError::handler(format!("`{key}`: {e}")))
            }
            InputRequest::Roots(_) => {
                let handler = self
                    .inner
                    .roots
                    .as_ref()
                    .filter(|_| !options.drop_roots)
                    .ok_or_else(|| {
                        ClientError::unanswerable(format!(
                            "`{key}` asks for roots and this client has no roots handler"
                        ))
                    })?;
                handler
                    .list_roots(question)
                    .await
                    .map(|roots| InputResponse::from(ListRootsResult { roots }))
                    .map_err(|e| ClientError::handler(format!("`{key}`: {e}")))
            }
        }
    }
}

/// The params of a retry: the original ones (C6), the answers for the keys
/// asked, and the state as received (C2) or none (C3).
fn retry_params(pending: &PendingRound, responses: Option<&InputResponses>) -> JsonObject {
    let mut params = pending.params.clone();
    if let Some(responses) = responses {
        let asked: InputResponses = responses
            .keys()
            .filter(|k| pending.input_requests.contains_key(*k))
            .filter_map(|k| {
                let value = responses.raw(k)?;
                let kind = pending.input_requests.get(k)?.kind();
                InputResponse::decode_as(kind, value)
                    .ok()
                    .map(|r| (k.to_owned(), r))
            })
            .collect();
        if !asked.is_empty() {
            params.insert(
                "inputResponses".into(),
                serde_json::to_value(asked).unwrap_or_default(),
            );
        }
    }
    if let Some(state) = &pending.request_state {
        params.insert("requestState".into(), Value::String(state.clone()));
    }
    params
}

#[derive(Deserialize)]
struct ResultMetaPeek {
    #[serde(rename = "_meta", default)]
    meta: Option<tern_protocol::ResultMeta>,
}

/// Every item of a paginated list: `page` is asked for the page at each
/// cursor, starting without one, until a page has no `nextCursor`.
async fn all_pages<T, F, Fut>(mut page: F) -> Result<Vec<T>, ClientError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ClientError>>,
{
    let mut all = Vec::new();
    let mut cursor = None;
    loop {
        let (items, next) = page(cursor.take()).await?;
        all.extend(items);
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
}
