//! The relayed leg (module docs of [`crate::relay`]): under MRTR, the
//! routing sealed alone into the `requestState` and opened again on the
//! retry; under the *await* strategy, round after round asked on the
//! session with [`AskInput`].
//!
//! A relay state's payload is its own format, never the engine's: compact
//! JSON `{"v": 101, "c": call id (32 hex digits), "t": call start (Unix
//! seconds), "r": routing}`. The engine refuses version 101 (a state of a
//! relayed call presented to a registered target), and this runner refuses
//! every other version.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::meta::RequestMeta;
use tern_protocol::{InputRequests, InputRequiredResult, InputResponses, RequestId};
use tern_seal::Claims;
use tracing::Instrument as _;

use super::{Relay, RelayLeg, RelayOutcome};
use crate::call::CallContext;
use crate::ctx::{Ctx, CtxParts, Leg};
use crate::engine::payload::parse_call_id;
use crate::engine::runner::{LegPolicy, LegRequest, Origin, invalid_state};
use crate::engine::strategy::Strategy;
use crate::engine::{CallId, Engine, random_bytes};
use crate::error::{AskError, ToolError, codes};
use crate::json::{Json, to_json};
use crate::question::{AskInput, declared, required_capabilities};

/// The payload version of a relay state.
const RELAY_VERSION: u32 = 101;

#[derive(Serialize, Deserialize)]
struct Wire {
    v: u32,
    c: String,
    t: u64,
    r: Value,
}

/// One relayed leg, as the method decoded it.
#[derive(Debug)]
pub(crate) struct RelayRequest {
    pub(crate) origin: Origin,
    /// The arguments handed to the relay (`{}` for a read).
    pub(crate) arguments: Arc<Value>,
    pub(crate) request_state: Option<String>,
    pub(crate) responses: Option<InputResponses>,
    pub(crate) id: RequestId,
    /// Shared with each leg's [`Ctx`], as a direct leg's is.
    pub(crate) meta: Arc<RequestMeta>,
    pub(crate) call: CallContext,
}

/// Runs one relayed leg under `strategy`.
pub(crate) async fn run(
    engine: &Arc<Engine>,
    relay: Arc<dyn Relay>,
    request: RelayRequest,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    let span = tracing::info_span!(
        "relay",
        method = request.origin.method,
        target = %request.origin.target,
        round = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    async move {
        let result = match strategy {
            Strategy::Suspend => Box::pin(suspend(engine, relay, request)).await,
            Strategy::Await(_) => Box::pin(awaiting(engine, relay, request, strategy)).await,
        };
        let outcome = match &result {
            Ok(_) => "ok",
            Err(_) => "error",
        };
        tracing::Span::current().record("outcome", outcome);
        result
    }
    .instrument(span)
    .await
}

/// What a relay state opened to.
struct Opened {
    call_id: CallId,
    started_at: SystemTime,
    round: u32,
    routing: Option<Value>,
}

/// MRTR: open the state (if any), run the relay once, seal its routing.
async fn suspend(
    engine: &Arc<Engine>,
    relay: Arc<dyn Relay>,
    request: RelayRequest,
) -> Result<Json, ErrorObject> {
    let opened = open(engine, &request)?;
    tracing::Span::current().record("round", opened.round + 1);
    let ctx = context(engine, &request, opened.call_id, opened.round + 1);
    let capabilities = request.meta.client_capabilities.clone();
    let outcome = relay
        .call(RelayLeg {
            ctx,
            method: request.origin.method,
            target: request.origin.target.clone(),
            arguments: Arc::clone(&request.arguments),
            input_responses: request.responses,
            routing: opened.routing,
            round: opened.round + 1,
            live: false,
        })
        .await?;
    match outcome {
        RelayOutcome::Complete(result) => stamp(engine, result),
        RelayOutcome::InputRequired { requests, routing } => {
            check_declared(&requests, &capabilities)?;
            let round = opened.round + 1;
            engine.check_round(round)?;
            let token = seal(
                engine,
                &request.origin,
                opened.call_id,
                opened.started_at,
                round,
                routing,
            )?;
            let ir = if requests.is_empty() {
                InputRequiredResult::state_only(token)
            } else {
                InputRequiredResult::new(requests, Some(token))
            };
            Ok(engine.stamp_input_required(ir))
        }
    }
}

/// *Await*: the engine's leg with a handler that asks each round's requests
/// on the session and calls the relay again with the answers.
async fn awaiting(
    engine: &Arc<Engine>,
    relay: Arc<dyn Relay>,
    request: RelayRequest,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    let RelayRequest {
        origin,
        arguments,
        request_state,
        id,
        meta,
        call,
        ..
    } = request;
    let method = origin.method;
    let target = origin.target.clone();
    let max_rounds = engine.limits.max_rounds;
    let leg = LegRequest {
        origin,
        request_state,
        // The session's answers come through the strategy, never here.
        responses: None,
        policy: LegPolicy::default(),
        id,
        meta,
        call,
    };
    let handler = move |ctx: Ctx| -> crate::future::BoxFuture<'static, Result<Value, ToolError>> {
        Box::pin(async move {
            let mut routing: Option<Value> = None;
            let mut responses = None;
            let mut round = 1u32;
            let mut pause = Duration::from_millis(50);
            loop {
                // Until a leg's outcome comes back, and then until the next
                // leg takes its routing, the relay is told if the round
                // ends there: the leg failed or was dropped, past the round
                // limit, or its answers never came.
                let mut unanswered = Unanswered {
                    relay: &relay,
                    ctx: &ctx,
                    routing: routing.clone(),
                };
                let outcome = relay
                    .call(RelayLeg {
                        ctx: ctx.clone(),
                        method,
                        target: target.clone(),
                        arguments: Arc::clone(&arguments),
                        input_responses: responses.take(),
                        routing: routing.take(),
                        round,
                        live: true,
                    })
                    .await
                    .map_err(ToolError::protocol)?;
                let (requests, next) = match outcome {
                    RelayOutcome::Complete(result) => {
                        unanswered.routing = None;
                        return Ok(result);
                    }
                    RelayOutcome::InputRequired { requests, routing } => (requests, routing),
                };
                unanswered.routing = Some(next);
                round += 1;
                if round > max_rounds.saturating_add(1) {
                    return Err(ToolError::protocol(
                        ErrorObject::new(
                            codes::CALL_LIMIT,
                            format!("The call needed more than {max_rounds} rounds of questions"),
                        )
                        .with_data(serde_json::json!({ "maxRounds": max_rounds })),
                    ));
                }
                if requests.is_empty() {
                    // A state-only round: come back later, as a client
                    // would, with a growing pause.
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).min(Duration::from_secs(1));
                } else {
                    let keys: Vec<String> = requests.keys().cloned().collect();
                    let answers = ctx
                        .ask_all(requests.into_iter().map(|(k, r)| AskInput::new(k, r)))
                        .await?;
                    responses = Some(keys.into_iter().zip(answers).collect());
                }
                routing = unanswered.routing.take();
            }
        })
    };
    engine
        .run(
            leg,
            Box::new(handler),
            Box::new(|engine, out: Result<Value, ToolError>| match out {
                Ok(result) => stamp(engine, result),
                Err(e) => Err(e
                    .error_object()
                    .unwrap_or_else(|| ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))),
            }),
            strategy,
        )
        .await
}

/// A live round's routing while its questions are out: dropped still
/// holding it (the handler's future dropped, or its answers refused), it
/// tells the relay ([`Relay::abandon`]).
struct Unanswered<'a> {
    relay: &'a Arc<dyn Relay>,
    ctx: &'a Ctx,
    routing: Option<Value>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(routing) = self.routing.take() {
            self.relay.abandon(self.ctx, routing);
        }
    }
}

/// Every relayed request is one this request declared the capability for
/// (rule `ask-declared-only`): else `-32021`, as `ctx.ask` ends.
fn check_declared(
    requests: &InputRequests,
    capabilities: &tern_protocol::ClientCapabilities,
) -> Result<(), ErrorObject> {
    match requests.values().find(|r| !declared(r, capabilities)) {
        Some(request) => {
            let (required, what) = required_capabilities(request);
            tracing::info!(
                what,
                "a relayed input request asks beyond the request's capabilities"
            );
            Err(AskError::missing(required, what).to_error_object())
        }
        None => Ok(()),
    }
}

/// The relayed result with this server's `serverInfo` (`resultType` set to
/// `complete` when it has none).
fn stamp(engine: &Engine, mut result: Value) -> Result<Json, ErrorObject> {
    let Some(object) = result.as_object_mut() else {
        tracing::error!("a relay answered a result that is not an object");
        return Err(ErrorObject::new(code::INTERNAL_ERROR, "Internal error"));
    };
    object
        .entry("resultType")
        .or_insert_with(|| Value::String("complete".into()));
    let meta = object
        .entry("_meta")
        .or_insert_with(|| Value::Object(serde_json::Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(serde_json::Map::new());
    }
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(
            "io.modelcontextprotocol/serverInfo".into(),
            serde_json::to_value(&*engine.info).unwrap_or_default(),
        );
    }
    Ok(to_json(&result))
}

/// The leg's context: no answers or memo (the relay's state is its own).
fn context(engine: &Engine, request: &RelayRequest, call_id: CallId, round: u32) -> Ctx {
    Ctx::new(CtxParts {
        request_id: request.id.clone(),
        call_id,
        round,
        memo_limit: engine.sealer().options().max_token_len / 2,
        meta: Arc::clone(&request.meta),
        principal: request.origin.principal.clone(),
        access_token: request.call.access_token.clone(),
        server: Arc::clone(&engine.info),
        notifier: request.call.notifier.clone(),
        cancel: request.call.cancel.clone(),
        progress_interval: engine.progress_interval,
        can_task: false,
        leg: Leg::default(),
    })
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Opens the retry's relay state against every binding (the uniform
/// `-32602` otherwise); no state starts a call.
fn open(engine: &Engine, request: &RelayRequest) -> Result<Opened, ErrorObject> {
    let now = engine.clock.now();
    let Some(token) = request.request_state.as_deref() else {
        return Ok(Opened {
            call_id: CallId::random(),
            started_at: UNIX_EPOCH + Duration::from_secs(unix_secs(now)),
            round: 0,
            routing: None,
        });
    };
    let opened = request.origin.open(&engine.sealer(), token, now)?;
    let wire: Wire = serde_json::from_slice(&opened.payload)
        .map_err(|e| invalid_state("payload", format_args!("relay payload: {e}")))?;
    if wire.v != RELAY_VERSION {
        return Err(invalid_state(
            "payload",
            format_args!("not a relay state (version {})", wire.v),
        ));
    }
    let call_id =
        parse_call_id(&wire.c).ok_or_else(|| invalid_state("payload", "relay payload: call id"))?;
    let started_at = UNIX_EPOCH + Duration::from_secs(wire.t);
    if now
        .duration_since(started_at)
        .is_ok_and(|age| age > engine.limits.max_lifetime)
    {
        return Err(invalid_state(
            "lifetime",
            "the call outlived its maximum lifetime",
        ));
    }
    Ok(Opened {
        call_id,
        started_at,
        round: opened.round,
        routing: Some(wire.r),
    })
}

/// Seals `routing` as the state of round `round + 1`, bound as the engine
/// binds its own. Too large to seal: `-32603` saying so.
fn seal(
    engine: &Engine,
    origin: &Origin,
    call_id: CallId,
    started_at: SystemTime,
    round: u32,
    routing: Value,
) -> Result<String, ErrorObject> {
    let bytes = zeroize::Zeroizing::new(
        serde_json::to_vec(&Wire {
            v: RELAY_VERSION,
            c: call_id.to_string(),
            t: unix_secs(started_at),
            r: routing,
        })
        .map_err(|e| {
            tracing::error!(error = %e, "cannot encode a relay state");
            ErrorObject::new(code::INTERNAL_ERROR, "Internal error")
        })?,
    );
    let random: [u8; 16 + tern_seal::NONCE_LEN] = random_bytes();
    let (mut state_id, mut nonce) = ([0u8; 16], [0u8; tern_seal::NONCE_LEN]);
    state_id.copy_from_slice(&random[..16]);
    nonce.copy_from_slice(&random[16..]);
    let claims = Claims {
        principal: origin.principal.id(),
        method: origin.method,
        target: &origin.target,
        arguments: origin.arguments.as_deref(),
        state_id,
        round,
        payload: &bytes,
    };
    let sealer = engine.sealer();
    sealer.seal(&claims, engine.clock.now(), nonce).map_err(|e| {
        if e.is_inexact_arguments() {
            tracing::info!(error = %e, "arguments cannot be bound exactly");
            return ErrorObject::invalid_params(
                "The arguments hold a number that cannot be represented exactly; \
                 send it as a string",
            );
        }
        let limit = sealer.options().max_token_len;
        tracing::error!(error = %e, bytes = bytes.len(), limit, "relay state too large to seal");
        ErrorObject::new(
            code::INTERNAL_ERROR,
            format!(
                "Internal error: the relayed state ({} bytes) does not fit this server's \
                 requestState limit of {limit} bytes",
                bytes.len()
            ),
        )
    })
}

/// The relayed leg of one request: the routing the state binds (method,
/// target, the arguments unless `None`, the caller) and what the relay gets.
struct Relayed {
    method: &'static str,
    target: String,
    bound: Option<Arc<Value>>,
    arguments: Arc<Value>,
    request_state: Option<String>,
    responses: Option<InputResponses>,
    meta: RequestMeta,
}

impl Relayed {
    async fn run(
        self,
        engine: &Arc<Engine>,
        relay: Arc<dyn Relay>,
        id: RequestId,
        call: CallContext,
        strategy: Strategy,
    ) -> Result<Json, ErrorObject> {
        let request = RelayRequest {
            origin: Origin {
                method: self.method,
                target: self.target,
                arguments: self.bound,
                principal: call.principal.clone(),
            },
            arguments: self.arguments,
            request_state: self.request_state,
            responses: self.responses,
            id,
            meta: Arc::new(self.meta),
            call,
        };
        run(engine, relay, request, strategy).await
    }
}

/// `tools/call` of a tool no registered entry serves.
pub(crate) async fn call_tool(
    engine: &Arc<Engine>,
    relay: Arc<dyn Relay>,
    id: RequestId,
    params: tern_protocol::tool::CallToolRequestParams,
    call: CallContext,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    let arguments = Arc::new(Value::Object(params.arguments.unwrap_or_default()));
    let relayed = Relayed {
        method: tern_protocol::method::TOOLS_CALL,
        target: params.name,
        bound: Some(Arc::clone(&arguments)),
        arguments,
        request_state: params.request_state,
        responses: params.input_responses,
        meta: params.meta,
    };
    relayed.run(engine, relay, id, call, strategy).await
}

/// `prompts/get` of a prompt no registered entry serves.
pub(crate) async fn get_prompt(
    engine: &Arc<Engine>,
    relay: Arc<dyn Relay>,
    id: RequestId,
    params: tern_protocol::prompt::GetPromptRequestParams,
    call: CallContext,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    let arguments: serde_json::Map<String, Value> = params
        .arguments
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let arguments = Arc::new(Value::Object(arguments));
    let relayed = Relayed {
        method: tern_protocol::method::PROMPTS_GET,
        target: params.name,
        bound: Some(Arc::clone(&arguments)),
        arguments,
        request_state: params.request_state,
        responses: params.input_responses,
        meta: params.meta,
    };
    relayed.run(engine, relay, id, call, strategy).await
}

/// `resources/read` of a URI no registered resource or template serves.
pub(crate) async fn read_resource(
    engine: &Arc<Engine>,
    relay: Arc<dyn Relay>,
    id: RequestId,
    params: tern_protocol::resource::ReadResourceRequestParams,
    call: CallContext,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    let relayed = Relayed {
        method: tern_protocol::method::RESOURCES_READ,
        target: params.uri,
        bound: None,
        arguments: Arc::new(Value::Object(serde_json::Map::new())),
        request_state: params.request_state,
        responses: params.input_responses,
        meta: params.meta,
    };
    relayed.run(engine, relay, id, call, strategy).await
}

/// One page of a relayed list, with this server's `serverInfo` and the
/// page's cache hints (the server's `list` hints where the page has none).
pub(crate) async fn list(
    engine: &Engine,
    relay: &dyn Relay,
    kind: super::ListKind,
    params: tern_protocol::pagination::PaginatedRequestParams,
    call: CallContext,
    hints: crate::cache::CacheHints,
) -> Result<Json, ErrorObject> {
    let page = relay
        .list(
            kind,
            super::ListRequest {
                cursor: params.cursor,
                principal: call.principal,
                access_token: call.access_token,
                meta: params.meta,
            },
        )
        .await?;
    let mut result = serde_json::Map::new();
    result.insert("resultType".into(), Value::String("complete".into()));
    result.insert(kind.member().into(), Value::Array(page.items));
    if let Some(cursor) = page.next_cursor {
        result.insert("nextCursor".into(), Value::String(cursor));
    }
    result.insert("ttlMs".into(), page.ttl_ms.unwrap_or(hints.ttl_ms).into());
    result.insert(
        "cacheScope".into(),
        serde_json::to_value(page.cache_scope.unwrap_or(hints.scope)).unwrap_or_default(),
    );
    result.insert(
        "_meta".into(),
        serde_json::to_value(tern_protocol::meta::ResultMeta::with_server_info(
            Arc::clone(&engine.info),
        ))
        .unwrap_or_default(),
    );
    Ok(to_json(&result))
}

/// A relayed `completion/complete`, with this server's `serverInfo`.
pub(crate) async fn complete(
    engine: &Engine,
    relay: &dyn Relay,
    params: &tern_protocol::completion::CompleteRequestParams,
    principal: crate::principal::Principal,
) -> Result<Json, ErrorObject> {
    let params = serde_json::to_value(params)
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
    let result = relay.complete(params, principal).await?;
    stamp(engine, result)
}

/// A relayed `tasks/*` request, with this server's `serverInfo`.
pub(crate) async fn task<P: Serialize>(
    engine: &Engine,
    relay: &dyn Relay,
    method: &'static str,
    params: &P,
    principal: crate::principal::Principal,
) -> Result<Json, ErrorObject> {
    let params = serde_json::to_value(params)
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
    let result = relay.task(method, params, principal).await?;
    stamp(engine, result)
}
