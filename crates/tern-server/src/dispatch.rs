//! Answering requests: each request is decoded once, strictly, into a
//! [`DecodedRequest`] that transports inspect (HTTP checks its headers
//! against it) and the dispatcher routes, on one registry snapshot.

use std::sync::Arc;

use serde_json::Value;
use tern_protocol::completion::{CompleteRequestParams, CompleteResult, Completion};
use tern_protocol::discover::DiscoverResult;
use tern_protocol::error::ErrorObject;
use tern_protocol::jsonrpc::{self, RequestId};
use tern_protocol::meta::{RequestMeta, ResultMeta};
use tern_protocol::prompt::ListPromptsResult;
use tern_protocol::resource::{ListResourceTemplatesResult, ListResourcesResult};
use tern_protocol::tool::ListToolsResult;
use tern_protocol::{ClientRequest, method, version};

use crate::call::{CallContext, Reply};
use crate::completion::{CompletionDef, CompletionRequest};
use crate::engine::AnswerSource;
use crate::engine::runner::INVALID_STATE;
use crate::engine::strategy::Strategy;
use crate::error::short;
use crate::json::{Json, to_json};
use crate::paging::page;
use crate::registry::Registry;
use crate::relay::{ListKind, run as relay};
use crate::server::{Server, serves};

/// A request decoded once: its id and its typed params. Get one from
/// [`Server::decode`], answer it with [`Server::handle_decoded`].
pub struct DecodedRequest {
    id: RequestId,
    /// Boxed: the decoded request travels through every layer of a call's
    /// future, which would otherwise hold a copy of it at each.
    request: Box<ClientRequest>,
    registry: Arc<Registry>,
}

impl std::fmt::Debug for DecodedRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecodedRequest")
            .field("id", &self.id)
            .field("method", &self.request.method())
            .finish_non_exhaustive()
    }
}

impl DecodedRequest {
    /// The request's id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The typed request.
    pub fn request(&self) -> &ClientRequest {
        &self.request
    }

    #[cfg(feature = "http")]
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
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

/// What a failed decode still reads: `_meta`, to tell an unsupported version
/// from other bad params, and whether `requestState` was there at all.
#[derive(serde::Deserialize)]
struct Salvage {
    #[serde(rename = "_meta", default)]
    meta: Option<Value>,
    #[serde(rename = "requestState", default)]
    request_state: Option<Value>,
}

/// The skills served; a method of the extension reaches here only when
/// `serves` said so, but a registry without them answers `-32601`.
fn skills(registry: &Registry) -> Result<&crate::skill::SkillCatalog, ErrorObject> {
    registry
        .skills
        .as_ref()
        .ok_or_else(|| ErrorObject::method_not_found("skills"))
}

/// The relay runs the tasks.
fn relays_tasks(registry: &Registry) -> bool {
    registry.relay.as_ref().is_some_and(|r| r.relays_tasks())
}

/// A `tasks/*` request handed to the relay: `-32021` first for a request
/// that did not declare the extension (Tasks extension › Capability
/// Negotiation).
async fn relay_task<P: serde::Serialize>(
    engine: &crate::engine::Engine,
    registry: &Registry,
    method: &'static str,
    meta: &RequestMeta,
    params: &P,
    call: CallContext,
) -> Result<Json, ErrorObject> {
    if !crate::task::request_declared(meta) {
        return Err(crate::task::missing_extension(method));
    }
    let Some(relay) = registry.relay.clone() else {
        return Err(ErrorObject::method_not_found(method));
    };
    relay::task(engine, &*relay, method, params, call.principal).await
}

/// A `tools/call`: the registry's tool, or else the relay's. The relay's
/// future is boxed, as the prompt and resource ones: inline, it would size
/// every call's future past the tool's own.
async fn call_tool(
    engine: &Arc<crate::engine::Engine>,
    entry: Option<Arc<crate::tool::ToolEntry>>,
    relay: Option<Arc<dyn crate::relay::Relay>>,
    id: RequestId,
    params: tern_protocol::tool::CallToolRequestParams,
    call: CallContext,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    match relay {
        Some(relay) => Box::pin(relay::call_tool(engine, relay, id, params, call, strategy)).await,
        None => crate::tool::call(engine, entry, id, params, call, strategy).await,
    }
}

/// A `prompts/get`: the registry's prompt, or else the relay's (boxed, as
/// in [`call_tool`]).
async fn get_prompt(
    engine: &Arc<crate::engine::Engine>,
    def: Option<Arc<crate::prompt::PromptDef>>,
    relay: Option<Arc<dyn crate::relay::Relay>>,
    id: RequestId,
    params: tern_protocol::prompt::GetPromptRequestParams,
    call: CallContext,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    match relay {
        Some(relay) => Box::pin(relay::get_prompt(engine, relay, id, params, call, strategy)).await,
        None => crate::prompt::get(engine, def, id, params, call, strategy).await,
    }
}

/// The relay, when it serves `kind`.
fn relayed(registry: &Registry, kind: ListKind) -> Option<Arc<dyn crate::relay::Relay>> {
    registry.relay.clone().filter(|r| r.lists().contains(&kind))
}

/// The version check (spec: Versioning and Compatibility › Protocol Version
/// Negotiation): `-32022` with what is supported.
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

impl Server {
    /// Answers one request. Nothing is carried over from earlier requests: the
    /// version, the capabilities and any MRTR state come from this one.
    pub async fn handle(&self, request: &jsonrpc::Request, call: CallContext) -> Reply {
        match self.decode(request) {
            Ok(decoded) => self.handle_decoded(decoded, call).await,
            Err(reply) => *reply,
        }
    }

    /// Answers one request under the *await* strategy: the handler's
    /// questions go to `source` and the running handler waits for the
    /// answers (a task, a 2025-11-25 session; see
    /// [`crate::engine::strategy`]). Everything else is as [`Self::handle`].
    pub async fn handle_awaiting(
        &self,
        request: &jsonrpc::Request,
        call: CallContext,
        source: Arc<dyn AnswerSource>,
    ) -> Reply {
        match self.decode(request) {
            Ok(decoded) => self.answer(decoded, call, Strategy::Await(source)).await,
            Err(reply) => *reply,
        }
    }

    /// Answers a request decoded by [`Self::decode`] under the *await*
    /// strategy, as [`Self::handle_awaiting`].
    pub(crate) async fn handle_decoded_awaiting(
        &self,
        decoded: DecodedRequest,
        call: CallContext,
        source: Arc<dyn AnswerSource>,
    ) -> Reply {
        self.answer(decoded, call, Strategy::Await(source)).await
    }

    /// The params' shape checked in one pass: no repeated member name, and
    /// within [`crate::ServerBuilder::json_limits`]; `-32602` otherwise.
    pub(crate) fn check_shape(
        &self,
        params: Option<&serde_json::value::RawValue>,
    ) -> Result<(), ErrorObject> {
        let Some(raw) = params else {
            return Ok(());
        };
        tern_protocol::check_shape(raw.get(), &self.inner.config.json_limits).map_err(|e| {
            ErrorObject::invalid_params(tern_protocol::error::tidy(&format!("Invalid params: {e}")))
        })
    }

    /// Decodes `request` strictly, once: an unknown or unserved method is
    /// `-32601`; params that do not decode are `-32602` (`-32022` when their
    /// version is the problem; the uniform `requestState` refusal when a
    /// `requestState` is not a string).
    pub fn decode(&self, request: &jsonrpc::Request) -> Result<DecodedRequest, Box<Reply>> {
        let fail = |fail: Fail| {
            Box::new(Reply {
                id: request.id.clone(),
                outcome: Err(fail.error),
                malformed: fail.malformed,
            })
        };
        let registry = self.registry();
        let m = request.method.as_str();
        if !serves(&registry, m) {
            return Err(fail(ErrorObject::method_not_found(&short(m)).into()));
        }
        // One reading of the params for everyone: a repeated member name
        // (which serde's maps read last-wins, a gateway first-wins) is
        // refused wherever it is, `arguments` included; so are params
        // nested or wide past the server's JSON limits.
        if let Err(error) = self.check_shape(request.params.as_deref()) {
            return Err(fail(Fail {
                error,
                malformed: true,
            }));
        }
        match ClientRequest::decode(m, request.params.as_deref()) {
            Ok(ClientRequest::Other { .. }) => {
                Err(fail(ErrorObject::method_not_found(&short(m)).into()))
            }
            Ok(typed) => Ok(DecodedRequest {
                id: request.id.clone(),
                request: Box::new(typed),
                registry,
            }),
            Err(e) => {
                let salvage = request
                    .params
                    .as_deref()
                    .and_then(|raw| serde_json::from_str::<Salvage>(raw.get()).ok());
                // An unsupported version wins over other bad params (-32022).
                if let Some(meta) = salvage
                    .as_ref()
                    .and_then(|s| s.meta.as_ref())
                    .and_then(|m| <RequestMeta as serde::Deserialize>::deserialize(m).ok())
                    && let Err(error) = check_version(&meta)
                {
                    return Err(fail(error.into()));
                }
                // A requestState that is not a string is a refused state like
                // any other: the one uniform message (docs/design.md,
                // "Sealing requestState").
                let error = if salvage
                    .as_ref()
                    .and_then(|s| s.request_state.as_ref())
                    .is_some_and(|v| !v.is_string())
                {
                    tracing::info!(reason = "not a string", "requestState refused");
                    ErrorObject::invalid_params(INVALID_STATE)
                } else {
                    // Already tidied by the decoder: no position, no type
                    // name, quoted values cut short.
                    ErrorObject::invalid_params(e.to_string())
                };
                Err(fail(Fail {
                    error,
                    malformed: true,
                }))
            }
        }
    }

    /// Answers a request [`Self::decode`] decoded.
    pub async fn handle_decoded(&self, decoded: DecodedRequest, call: CallContext) -> Reply {
        self.answer(decoded, call, Strategy::Suspend).await
    }

    async fn answer(
        &self,
        decoded: DecodedRequest,
        call: CallContext,
        strategy: Strategy,
    ) -> Reply {
        // A server built outside a runtime recovers from its first request.
        self.recover_tasks();
        let id = decoded.id.clone();
        let outcome = self.dispatch(decoded, call, strategy).await;
        Reply {
            id,
            outcome,
            malformed: false,
        }
    }

    async fn dispatch(
        &self,
        decoded: DecodedRequest,
        call: CallContext,
        strategy: Strategy,
    ) -> Result<Json, ErrorObject> {
        if let Some(meta) = decoded.request.meta() {
            check_version(meta)?;
        }
        let engine = &self.inner.engine;
        let page_size = self.inner.config.page_size;
        let registry = Arc::clone(&decoded.registry);
        let hints = self.inner.config.list_cache;
        let meta = || Some(ResultMeta::with_server_info(engine.info.clone()));
        let id = decoded.id;
        match *decoded.request {
            ClientRequest::Discover(_) => Ok(to_json(&DiscoverResult {
                result_type: tern_protocol::result::CompleteTag,
                supported_versions: vec![version::LATEST.to_owned()],
                capabilities: registry.capabilities.clone(),
                instructions: self.inner.instructions.clone(),
                ttl_ms: Some(hints.ttl_ms),
                cache_scope: Some(hints.scope),
                meta: meta(),
            })),
            ClientRequest::ListTools(p) => self.list(&registry, ListKind::Tools, p, call).await,
            ClientRequest::ListResources(p) => {
                self.list(&registry, ListKind::Resources, p, call).await
            }
            ClientRequest::ListResourceTemplates(p) => {
                self.list(&registry, ListKind::ResourceTemplates, p, call)
                    .await
            }
            ClientRequest::ListPrompts(p) => self.list(&registry, ListKind::Prompts, p, call).await,
            // One await per arm, each in a function of its own: a coroutine
            // overlaps only the locals live at one suspension, so params
            // held across two awaits here would take a slot beside every
            // other arm's state, in a future copied into its box on every
            // call and held for as long as an SSE stream is open.
            ClientRequest::CallTool(p) => {
                let entry = registry.tools.get(&p.name).cloned();
                let relay = entry
                    .is_none()
                    .then(|| relayed(&registry, ListKind::Tools))
                    .flatten();
                call_tool(engine, entry, relay, id, p, call, strategy).await
            }
            ClientRequest::GetPrompt(p) => {
                let def = registry.prompts.get(&p.name).cloned();
                let relay = def
                    .is_none()
                    .then(|| relayed(&registry, ListKind::Prompts))
                    .flatten();
                get_prompt(engine, def, relay, id, p, call, strategy).await
            }
            ClientRequest::ReadResource(p) => {
                Box::pin(self.read_resource(&registry, id, p, call, strategy)).await
            }
            ClientRequest::Completion(p)
                if !registry
                    .completions
                    .contains_key(&CompletionDef::key(&p.reference))
                    && registry.relay.as_ref().is_some_and(|r| r.completes()) =>
            {
                let relay = registry.relay.clone().expect("checked just above");
                relay::complete(engine, &*relay, &p, call.principal).await
            }
            ClientRequest::Completion(p) => Ok(to_json(&self.complete(&registry, p).await)),
            // Boxed, the listen and task arms: each future is larger than
            // a tool call's, and would size every request's.
            ClientRequest::Listen(p) => Box::pin(self.listen(&id, p, call)).await,
            ClientRequest::GetTask(p) if relays_tasks(&registry) => {
                relay_task(engine, &registry, method::TASKS_GET, &p.meta, &p, call).await
            }
            ClientRequest::UpdateTask(p) if relays_tasks(&registry) => {
                relay_task(engine, &registry, method::TASKS_UPDATE, &p.meta, &p, call).await
            }
            ClientRequest::CancelTask(p) if relays_tasks(&registry) => {
                relay_task(engine, &registry, method::TASKS_CANCEL, &p.meta, &p, call).await
            }
            ClientRequest::GetTask(p) => Box::pin(engine.tasks.get(p, &call)).await,
            ClientRequest::UpdateTask(p) => Box::pin(engine.tasks.update(p, &call)).await,
            ClientRequest::CancelTask(p) => Box::pin(engine.tasks.cancel(p, &call)).await,
            ClientRequest::ListSkills(p) => skills(&registry)
                .and_then(|s| crate::skill::list(s, p.cursor.as_deref(), page_size, hints, meta())),
            ClientRequest::GetSkill(p) => {
                skills(&registry).and_then(|s| crate::skill::get(s, &p.uri, hints, meta()))
            }
            ClientRequest::ReadResourceDirectory(p) => skills(&registry)
                .and_then(|s| crate::skill::read_directory(s, &p, page_size, hints, meta())),
            other => Err(ErrorObject::method_not_found(&short(other.method()))),
        }
    }
}

impl Server {
    /// One page of a list: the relay's when it serves the list, else the
    /// registry's.
    async fn list(
        &self,
        registry: &Registry,
        kind: ListKind,
        p: tern_protocol::pagination::PaginatedRequestParams,
        call: CallContext,
    ) -> Result<Json, ErrorObject> {
        let engine = &self.inner.engine;
        let page_size = self.inner.config.page_size;
        let hints = self.inner.config.list_cache;
        if let Some(relay) = relayed(registry, kind) {
            return relay::list(engine, &*relay, kind, p, call, hints).await;
        }
        let meta = || Some(ResultMeta::with_server_info(engine.info.clone()));
        let cursor = p.cursor.as_deref();
        Ok(match kind {
            ListKind::Tools => {
                let (tools, next_cursor) = page(cursor, &registry.tool_list, page_size)?;
                to_json(&ListToolsResult {
                    tools,
                    next_cursor,
                    ttl_ms: Some(hints.ttl_ms),
                    cache_scope: Some(hints.scope),
                    meta: meta(),
                    ..ListToolsResult::default()
                })
            }
            ListKind::Resources => {
                let (resources, next_cursor) = page(cursor, &registry.resource_list, page_size)?;
                to_json(&ListResourcesResult {
                    resources,
                    next_cursor,
                    ttl_ms: Some(hints.ttl_ms),
                    cache_scope: Some(hints.scope),
                    meta: meta(),
                    ..ListResourcesResult::default()
                })
            }
            ListKind::ResourceTemplates => {
                let (resource_templates, next_cursor) =
                    page(cursor, &registry.template_list, page_size)?;
                to_json(&ListResourceTemplatesResult {
                    resource_templates,
                    next_cursor,
                    ttl_ms: Some(hints.ttl_ms),
                    cache_scope: Some(hints.scope),
                    meta: meta(),
                    ..ListResourceTemplatesResult::default()
                })
            }
            ListKind::Prompts => {
                let (prompts, next_cursor) = page(cursor, &registry.prompt_list, page_size)?;
                to_json(&ListPromptsResult {
                    prompts,
                    next_cursor,
                    ttl_ms: Some(hints.ttl_ms),
                    cache_scope: Some(hints.scope),
                    meta: meta(),
                    ..ListPromptsResult::default()
                })
            }
        })
    }
}

impl Server {
    /// `resources/read`: a skill file (Skills extension: the catalogue owns
    /// the URIs it serves), else the resource or template that serves the
    /// URI.
    async fn read_resource(
        &self,
        registry: &Registry,
        id: RequestId,
        p: tern_protocol::resource::ReadResourceRequestParams,
        call: CallContext,
        strategy: Strategy,
    ) -> Result<Json, ErrorObject> {
        let engine = &self.inner.engine;
        let read_cache = self.inner.config.read_cache;
        let meta = || Some(ResultMeta::with_server_info(engine.info.clone()));
        if let Some(answer) = registry
            .skills
            .as_ref()
            .and_then(|skills| crate::skill::read(skills, &p, read_cache, meta))
        {
            return answer;
        }
        let found = registry.resource_for(&p.uri);
        if found.is_none()
            && let Some(relay) = relayed(registry, ListKind::Resources)
                .or_else(|| relayed(registry, ListKind::ResourceTemplates))
        {
            return relay::read_resource(engine, relay, id, p, call, strategy).await;
        }
        crate::resource::read(engine, found, id, p, call, strategy, read_cache).await
    }
}

/// `completion/complete`: the completer registered for the reference, if
/// any; at most [`Completion::MAX_VALUES`] values.
impl Server {
    pub(crate) async fn complete(
        &self,
        registry: &Registry,
        params: CompleteRequestParams,
    ) -> CompleteResult {
        let handler = registry
            .completions
            .get(&CompletionDef::key(&params.reference))
            .map(|d| d.handler.clone());
        let values = match handler {
            Some(handler) => {
                handler(CompletionRequest {
                    argument: params.argument.name,
                    value: params.argument.value,
                    context: params.context.and_then(|c| c.arguments).unwrap_or_default(),
                })
                .await
            }
            None => Vec::new(),
        };
        let total = values.len() as u64;
        let has_more = values.len() > Completion::MAX_VALUES;
        let mut values = values;
        values.truncate(Completion::MAX_VALUES);
        CompleteResult {
            completion: Completion {
                values,
                total: Some(total),
                has_more: Some(has_more),
            },
            meta: Some(ResultMeta::with_server_info(Arc::clone(
                &self.inner.engine.info,
            ))),
            ..CompleteResult::default()
        }
    }
}
