//! [`Server`]: the registry, the dispatcher, and [`ServerBuilder`].

use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use tern_protocol::discover::DiscoverResult;
use tern_protocol::error::ErrorObject;
use tern_protocol::jsonrpc::{self, RequestId};
use tern_protocol::meta::{RequestMeta, ResultMeta};
use tern_protocol::prompt::ListPromptsResult;
use tern_protocol::resource::{ListResourceTemplatesResult, ListResourcesResult};
use tern_protocol::result::CacheScope;
use tern_protocol::tool::ListToolsResult;
use tern_protocol::{
    ClientRequest, Implementation, InputRequiredResult, ServerCapabilities, method, version,
};
use tern_seal::{KeyRing, Sealer, SealerOptions};
use tokio_util::sync::CancellationToken;

use crate::completion::CompletionDef;
use crate::ctx::{Ctx, CtxParts, Leg, Notifier};
use crate::error::BuildError;
use crate::mrtr::{Clock, Engine, SystemClock};
use crate::principal::Principal;
use crate::prompt::PromptDef;
use crate::registry::{Changes, Registry, ToolEntry};
use crate::replay::{MemoryReplayStore, ReplayStore};
use crate::resource::{ResourceDef, ResourceTemplateDef};
use crate::tool::ToolDef;

/// Caching hints for a kind of result (`ttlMs`, `cacheScope`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheHints {
    /// How long a client may reuse the result, in milliseconds.
    pub ttl_ms: u64,
    /// Who may share it.
    pub scope: CacheScope,
}

impl CacheHints {
    /// Hints.
    pub fn new(ttl: Duration, scope: CacheScope) -> Self {
        Self {
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
            scope,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) page_size: usize,
    pub(crate) list_cache: CacheHints,
    pub(crate) read_cache: CacheHints,
    pub(crate) progress_interval: Duration,
}

pub(crate) struct Inner {
    pub(crate) info: Implementation,
    pub(crate) instructions: Option<String>,
    pub(crate) registry: RwLock<Arc<Registry>>,
    pub(crate) changes: Changes,
    pub(crate) shutdown: CancellationToken,
    pub(crate) engine: Engine,
    pub(crate) config: Config,
}

/// An MCP server: what it offers, and the dispatcher that answers requests
/// statelessly. Cheap to clone; share one between transports.
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registry = self.registry();
        f.debug_struct("Server")
            .field("info", &self.inner.info)
            .field("tools", &registry.tools.keys().collect::<Vec<_>>())
            .field("prompts", &registry.prompts.keys().collect::<Vec<_>>())
            .field("resources", &registry.resources.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

/// What a transport knows about one request besides its body.
#[derive(Debug, Clone, Default)]
pub struct CallContext {
    /// The authenticated caller.
    pub principal: Principal,
    /// Where this request's notifications go; `None` when the transport
    /// cannot deliver any (a plain JSON HTTP response).
    pub notifier: Option<Notifier>,
    /// Cancelled when the client cancels the request or goes away.
    pub cancel: CancellationToken,
}

/// The answer to one request.
#[derive(Debug)]
pub struct Reply {
    /// The request's id.
    pub id: RequestId,
    /// The result, serialised, or the error.
    pub outcome: Result<Box<RawValue>, ErrorObject>,
    /// The request itself was malformed (missing `_meta`, params of the wrong
    /// shape): HTTP answers it with 400.
    pub malformed: bool,
}

impl Reply {
    /// The JSON-RPC error code, when this is an error.
    pub fn error_code(&self) -> Option<i64> {
        self.outcome.as_ref().err().map(|e| e.code)
    }
}

impl Serialize for Reply {
    /// The whole JSON-RPC response.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.outcome {
            Ok(result) => jsonrpc::serialize_response(&self.id, &**result, s),
            Err(error) => {
                jsonrpc::ErrorResponse::new(Some(self.id.clone()), error.clone()).serialize(s)
            }
        }
    }
}

/// Builds a [`Server`].
pub struct ServerBuilder {
    info: Implementation,
    instructions: Option<String>,
    tools: Vec<ToolDef>,
    prompts: Vec<PromptDef>,
    resources: Vec<ResourceDef>,
    templates: Vec<ResourceTemplateDef>,
    completions: Vec<CompletionDef>,
    keys: Option<KeyRing>,
    multi_instance: bool,
    state_ttl: Duration,
    max_state_len: usize,
    replay: Option<Arc<dyn ReplayStore>>,
    clock: Arc<dyn Clock>,
    config: Config,
    changes: Changes,
    audience: Option<String>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Default lifetime of a `requestState`: 10 minutes, refreshed each round.
pub const DEFAULT_STATE_TTL: Duration = Duration::from_secs(600);
/// Default size cap of a `requestState` token: 64 KiB.
pub const DEFAULT_MAX_STATE_LEN: usize = 64 * 1024;
/// Default page size of the list methods: 100.
pub const DEFAULT_PAGE_SIZE: usize = 100;

impl ServerBuilder {
    fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            info: Implementation::new(name, version),
            instructions: None,
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            completions: Vec::new(),
            keys: None,
            multi_instance: false,
            state_ttl: DEFAULT_STATE_TTL,
            max_state_len: DEFAULT_MAX_STATE_LEN,
            replay: None,
            clock: Arc::new(SystemClock),
            changes: Changes::default(),
            audience: None,
            config: Config {
                page_size: DEFAULT_PAGE_SIZE,
                list_cache: CacheHints::new(Duration::from_secs(60), CacheScope::Public),
                read_cache: CacheHints::new(Duration::ZERO, CacheScope::Private),
                progress_interval: Duration::from_millis(10),
            },
        }
    }

    /// The server's title, description and so on (`serverInfo`).
    #[must_use]
    pub fn info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }

    /// Instructions for clients and models, sent in `server/discover`.
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Registers a tool. Tools are listed in registration order.
    #[must_use]
    pub fn tool(mut self, tool: ToolDef) -> Self {
        self.tools.push(tool);
        self
    }

    /// Registers a prompt.
    #[must_use]
    pub fn prompt(mut self, prompt: PromptDef) -> Self {
        self.prompts.push(prompt);
        self
    }

    /// Registers a resource at a fixed URI.
    #[must_use]
    pub fn resource(mut self, resource: ResourceDef) -> Self {
        self.resources.push(resource);
        self
    }

    /// Registers a resource template.
    #[must_use]
    pub fn resource_template(mut self, template: ResourceTemplateDef) -> Self {
        self.templates.push(template);
        self
    }

    /// Registers completions for a prompt or a resource template.
    #[must_use]
    pub fn completion(mut self, completion: CompletionDef) -> Self {
        self.completions.push(completion);
        self
    }

    /// The keys that seal `requestState`: the first seals, all open. Every
    /// replica must share them. Without keys a random one is made at start-up,
    /// which serves a single process only (and says so in the log).
    #[must_use]
    pub fn keys(mut self, keys: KeyRing) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Who `requestState` is sealed for (default: the server's name). Give
    /// one value per logical server, the same on every replica (its public
    /// URL, say), so that two servers sharing keys never accept each other's
    /// states.
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Declares that several instances serve this server: [`Self::build`] then
    /// refuses to start without shared [`Self::keys`].
    #[must_use]
    pub fn multi_instance(mut self) -> Self {
        self.multi_instance = true;
        self
    }

    /// Lifetime of each round's `requestState` (default 10 minutes).
    #[must_use]
    pub fn state_ttl(mut self, ttl: Duration) -> Self {
        self.state_ttl = ttl;
        self
    }

    /// Size cap of a `requestState` token (default 64 KiB); a round whose
    /// state would be larger fails with `-32603`.
    #[must_use]
    pub fn max_state_len(mut self, len: usize) -> Self {
        self.max_state_len = len;
        self
    }

    /// Where single-use and idempotent-retry records live (default: in this
    /// process's memory).
    #[must_use]
    pub fn replay_store(mut self, store: Arc<dyn ReplayStore>) -> Self {
        self.replay = Some(store);
        self
    }

    /// The clock used for state expiry (tests inject one).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Page size of the list methods (default 100).
    #[must_use]
    pub fn page_size(mut self, size: usize) -> Self {
        self.config.page_size = size.max(1);
        self
    }

    /// Caching hints of `server/discover` and the list results (default
    /// 60 s, public).
    #[must_use]
    pub fn list_cache(mut self, hints: CacheHints) -> Self {
        self.config.list_cache = hints;
        self
    }

    /// Caching hints of `resources/read` results (default 0, private).
    #[must_use]
    pub fn read_cache(mut self, hints: CacheHints) -> Self {
        self.config.read_cache = hints;
        self
    }

    /// Least time between two progress notifications of one request (default
    /// 10 ms; the one reaching `total` is always sent).
    #[must_use]
    pub fn progress_interval(mut self, interval: Duration) -> Self {
        self.config.progress_interval = interval;
        self
    }

    /// The change announcer of the server being built, for handlers that
    /// change what the server offers (see [`Changes`]).
    pub fn changes(&self) -> Changes {
        self.changes.clone()
    }

    /// Checks everything and builds the server.
    pub fn build(self) -> Result<Server, BuildError> {
        let keys = match self.keys {
            Some(keys) => keys,
            None if self.multi_instance => {
                return Err(BuildError(
                    "a server configured for several instances needs shared requestState keys"
                        .into(),
                ));
            }
            None => {
                tracing::warn!(
                    "no requestState keys configured: using a random key for this process only; \
                     pending questions will not survive a restart or reach another replica"
                );
                KeyRing::generate()
            }
        };
        let sealer = Sealer::new(
            keys,
            SealerOptions {
                ttl: self.state_ttl,
                max_token_len: self.max_state_len,
                audience: self
                    .audience
                    .clone()
                    .unwrap_or_else(|| self.info.name.clone()),
            },
        );
        let mut registry = Registry::default();
        for def in self.tools {
            let name = def.tool.name.clone();
            if registry
                .tools
                .insert(name.clone(), Arc::new(ToolEntry::new(def)?))
                .is_some()
            {
                return Err(BuildError(format!("tool {name} is registered twice")));
            }
        }
        for def in self.prompts {
            def.check()?;
            let name = def.prompt.name.clone();
            if registry
                .prompts
                .insert(name.clone(), Arc::new(def))
                .is_some()
            {
                return Err(BuildError(format!("prompt {name} is registered twice")));
            }
        }
        for def in self.resources {
            let def = def.finish();
            let uri = def.resource.uri.clone();
            if registry
                .resources
                .insert(uri.clone(), Arc::new(def))
                .is_some()
            {
                return Err(BuildError(format!("resource {uri} is registered twice")));
            }
        }
        for def in self.templates {
            registry.templates.push(Arc::new(def.finish()?));
        }
        registry.completions = self
            .completions
            .into_iter()
            .map(|c| (CompletionDef::key(&c.reference), c))
            .collect();
        registry.refresh();
        let inner = Inner {
            info: self.info,
            instructions: self.instructions,
            registry: RwLock::new(Arc::new(registry)),
            changes: self.changes,
            shutdown: CancellationToken::new(),
            engine: Engine {
                sealer,
                replay: self
                    .replay
                    .unwrap_or_else(|| Arc::new(MemoryReplayStore::default())),
                clock: self.clock,
            },
            config: self.config,
        };
        Ok(Server {
            inner: Arc::new(inner),
        })
    }
}

/// Only `_meta`, to tell an unsupported version from other bad params.
#[derive(serde::Deserialize)]
struct MetaOnly {
    #[serde(rename = "_meta")]
    meta: RequestMeta,
}

fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("tern:{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .strip_prefix("tern:")?
        .parse()
        .ok()
}

impl Server {
    /// Starts building a server called `name` at `version`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name, version)
    }

    /// This server's self-description.
    pub fn info(&self) -> &Implementation {
        &self.inner.info
    }

    /// The capabilities `server/discover` advertises, derived from what is
    /// registered now.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.registry().capabilities.clone()
    }

    pub(crate) fn registry(&self) -> Arc<Registry> {
        Arc::clone(
            &self
                .inner
                .registry
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn update(
        &self,
        change: impl FnOnce(&mut Registry) -> Result<bool, BuildError>,
    ) -> Result<bool, BuildError> {
        let mut slot = self
            .inner
            .registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = (**slot).clone();
        let changed = change(&mut next)?;
        if changed {
            next.refresh();
            *slot = Arc::new(next);
        }
        Ok(changed)
    }

    /// The announcer of changes to open subscriptions.
    pub fn changes(&self) -> &Changes {
        &self.inner.changes
    }

    /// Adds (or replaces) a tool at run time and tells listeners
    /// (`notifications/tools/list_changed`).
    pub fn add_tool(&self, tool: ToolDef) -> Result<(), BuildError> {
        let entry = Arc::new(ToolEntry::new(tool)?);
        self.update(|r| {
            r.tools.insert(entry.def.tool.name.clone(), entry);
            Ok(true)
        })?;
        self.inner.changes.tools_changed();
        Ok(())
    }

    /// Removes a tool at run time; `true` if it was there (listeners are told).
    pub fn remove_tool(&self, name: &str) -> bool {
        let removed = self
            .update(|r| Ok(r.tools.shift_remove(name).is_some()))
            .unwrap_or(false);
        if removed {
            self.inner.changes.tools_changed();
        }
        removed
    }

    /// Adds (or replaces) a prompt at run time and tells listeners.
    pub fn add_prompt(&self, prompt: PromptDef) -> Result<(), BuildError> {
        prompt.check()?;
        let prompt = Arc::new(prompt);
        self.update(|r| {
            r.prompts.insert(prompt.prompt.name.clone(), prompt);
            Ok(true)
        })?;
        self.inner.changes.prompts_changed();
        Ok(())
    }

    /// Removes a prompt at run time; `true` if it was there.
    pub fn remove_prompt(&self, name: &str) -> bool {
        let removed = self
            .update(|r| Ok(r.prompts.shift_remove(name).is_some()))
            .unwrap_or(false);
        if removed {
            self.inner.changes.prompts_changed();
        }
        removed
    }

    /// Adds (or replaces) a resource at run time and tells listeners.
    pub fn add_resource(&self, resource: ResourceDef) -> Result<(), BuildError> {
        let resource = Arc::new(resource.finish());
        self.update(|r| {
            r.resources.insert(resource.resource.uri.clone(), resource);
            Ok(true)
        })?;
        self.inner.changes.resources_changed();
        Ok(())
    }

    /// Removes a resource at run time; `true` if it was there.
    pub fn remove_resource(&self, uri: &str) -> bool {
        let removed = self
            .update(|r| Ok(r.resources.shift_remove(uri).is_some()))
            .unwrap_or(false);
        if removed {
            self.inner.changes.resources_changed();
        }
        removed
    }

    /// Ends every open subscription gracefully (each gets its closing
    /// result); call it before stopping the process.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// The context of one leg of a tool call, prompt or resource read: the
    /// request's own metadata and caller, and what the engine restored.
    pub(crate) fn leg_ctx(
        &self,
        id: &RequestId,
        meta: RequestMeta,
        call: &CallContext,
        leg: Leg,
    ) -> Ctx {
        Ctx::new(CtxParts {
            request_id: id.clone(),
            meta,
            principal: call.principal.clone(),
            server: self.inner.info.clone(),
            notifier: call.notifier.clone(),
            cancel: call.cancel.clone(),
            progress_interval: self.inner.config.progress_interval,
            leg,
        })
    }

    /// Answers one request. Nothing is carried over from earlier requests: the
    /// version, the capabilities and any MRTR state come from this one.
    pub async fn handle(&self, request: &jsonrpc::Request, call: CallContext) -> Reply {
        let (outcome, malformed) = match self.dispatch(request, call).await {
            Ok(value) => (Ok(value), false),
            Err(Fail { error, malformed }) => (Err(error), malformed),
        };
        Reply {
            id: request.id.clone(),
            outcome,
            malformed,
        }
    }

    /// The method is served: known, not removed, and behind a capability this
    /// server advertises (otherwise `-32601`).
    pub fn serves(&self, method: &str) -> bool {
        let registry = self.registry();
        let caps = &registry.capabilities;
        match method {
            method::DISCOVER => true,
            method::TOOLS_LIST | method::TOOLS_CALL => caps.tools.is_some(),
            method::RESOURCES_LIST | method::RESOURCES_TEMPLATES_LIST | method::RESOURCES_READ => {
                caps.resources.is_some()
            }
            method::PROMPTS_LIST | method::PROMPTS_GET => caps.prompts.is_some(),
            method::COMPLETION_COMPLETE => caps.completions.is_some(),
            method::SUBSCRIPTIONS_LISTEN => {
                caps.tools.is_some() || caps.prompts.is_some() || caps.resources.is_some()
            }
            _ => false,
        }
    }

    async fn dispatch(&self, request: &jsonrpc::Request, call: CallContext) -> Result<Json, Fail> {
        let m = request.method.as_str();
        if !self.serves(m) {
            return Err(ErrorObject::method_not_found(m).into());
        }
        let typed = match ClientRequest::decode(m, request.params.as_deref()) {
            Ok(typed) => typed,
            Err(e) => {
                // An unsupported version wins over other bad params (-32022).
                if let Some(raw) = request.params.as_deref()
                    && let Ok(MetaOnly { meta }) = serde_json::from_str(raw.get())
                {
                    check_version(&meta)?;
                }
                return Err(Fail {
                    error: ErrorObject::invalid_params(e.to_string()),
                    malformed: true,
                });
            }
        };
        if let Some(meta) = typed.meta() {
            check_version(meta)?;
        }
        let id = &request.id;
        let registry = self.registry();
        let result = match typed {
            ClientRequest::Discover(_) => Ok(self.discover()),
            ClientRequest::ListTools(p) => self.list(
                p.cursor.as_deref(),
                &registry.tool_list,
                |tools, next_cursor, ttl_ms, cache_scope, meta| {
                    to_json(&ListToolsResult {
                        tools,
                        next_cursor,
                        ttl_ms,
                        cache_scope,
                        meta,
                        ..ListToolsResult::default()
                    })
                },
            ),
            ClientRequest::CallTool(p) => self.call_tool(id, p, call).await,
            ClientRequest::ListResources(p) => self.list(
                p.cursor.as_deref(),
                &registry.resource_list,
                |resources, next_cursor, ttl_ms, cache_scope, meta| {
                    to_json(&ListResourcesResult {
                        resources,
                        next_cursor,
                        ttl_ms,
                        cache_scope,
                        meta,
                        ..ListResourcesResult::default()
                    })
                },
            ),
            ClientRequest::ListResourceTemplates(p) => self.list(
                p.cursor.as_deref(),
                &registry.template_list,
                |resource_templates, next_cursor, ttl_ms, cache_scope, meta| {
                    to_json(&ListResourceTemplatesResult {
                        resource_templates,
                        next_cursor,
                        ttl_ms,
                        cache_scope,
                        meta,
                        ..ListResourceTemplatesResult::default()
                    })
                },
            ),
            ClientRequest::ReadResource(p) => self.read_resource(id, p, call).await,
            ClientRequest::ListPrompts(p) => self.list(
                p.cursor.as_deref(),
                &registry.prompt_list,
                |prompts, next_cursor, ttl_ms, cache_scope, meta| {
                    to_json(&ListPromptsResult {
                        prompts,
                        next_cursor,
                        ttl_ms,
                        cache_scope,
                        meta,
                        ..ListPromptsResult::default()
                    })
                },
            ),
            ClientRequest::GetPrompt(p) => self.get_prompt(id, p, call).await,
            ClientRequest::Completion(p) => Ok(to_json(&self.complete(p).await)),
            ClientRequest::Listen(p) => self.listen(id, p, call).await,
            _ => Err(ErrorObject::method_not_found(m)),
        };
        result.map_err(Fail::from)
    }

    pub(crate) fn result_meta(&self) -> ResultMeta {
        ResultMeta::with_server_info(self.inner.info.clone())
    }

    pub(crate) fn stamp_input_required(&self, mut ir: InputRequiredResult) -> Json {
        ir.meta = Some(self.result_meta());
        to_json(&ir)
    }

    fn discover(&self) -> Json {
        let hints = self.inner.config.list_cache;
        to_json(&DiscoverResult {
            result_type: tern_protocol::result::CompleteTag,
            supported_versions: vec![version::LATEST.to_owned()],
            capabilities: self.registry().capabilities.clone(),
            instructions: self.inner.instructions.clone(),
            ttl_ms: Some(hints.ttl_ms),
            cache_scope: Some(hints.scope),
            meta: Some(self.result_meta()),
        })
    }

    /// One page of `items`; an unreadable cursor is `-32602`.
    #[allow(clippy::type_complexity, reason = "a local callback shape")]
    fn list<T: Clone>(
        &self,
        cursor: Option<&str>,
        items: &[T],
        build: impl FnOnce(
            Vec<T>,
            Option<String>,
            Option<u64>,
            Option<CacheScope>,
            Option<ResultMeta>,
        ) -> Json,
    ) -> Result<Json, ErrorObject> {
        let start = match cursor {
            None => 0,
            Some(c) => decode_cursor(c)
                .filter(|&o| o <= items.len())
                .ok_or_else(|| ErrorObject::invalid_params("Invalid cursor"))?,
        };
        let end = (start + self.inner.config.page_size).min(items.len());
        let next = (end < items.len()).then(|| encode_cursor(end));
        let hints = self.inner.config.list_cache;
        Ok(build(
            items[start..end].to_vec(),
            next,
            Some(hints.ttl_ms),
            Some(hints.scope),
            Some(self.result_meta()),
        ))
    }
}

/// A failed request, and whether the request itself was malformed.
pub(crate) struct Fail {
    pub(crate) error: ErrorObject,
    pub(crate) malformed: bool,
}

impl From<ErrorObject> for Fail {
    fn from(error: ErrorObject) -> Self {
        Self {
            error,
            malformed: false,
        }
    }
}

/// The version check (spec §1.3): `-32022` with what is supported.
fn check_version(meta: &RequestMeta) -> Result<(), ErrorObject> {
    if meta.protocol_version == version::LATEST {
        Ok(())
    } else {
        Err(ErrorObject::unsupported_version(
            vec![version::LATEST.to_owned()],
            meta.protocol_version.clone(),
        ))
    }
}

/// A serialised result: written once, straight into the response.
pub(crate) type Json = Box<RawValue>;

pub(crate) fn to_json<T: Serialize>(value: &T) -> Json {
    serde_json::value::to_raw_value(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot encode a result");
        RawValue::NULL.to_owned()
    })
}
