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
use serde_json::value::RawValue;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::meta::{RequestMeta, SERVER_INFO_KEY as SERVER_INFO};
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
    // Shared, not copied: only a question needs them.
    let meta = Arc::clone(&request.meta);
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
        RelayOutcome::Complete(result) => stamp(&engine.info_json, result),
        RelayOutcome::Written(result) => stamp_written(&engine.info_json, &result),
        RelayOutcome::InputRequired { requests, routing } => {
            check_declared(&requests, &meta.client_capabilities)?;
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
    let handler = move |ctx: Ctx| -> crate::future::BoxFuture<'static, Result<Done, ToolError>> {
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
                        return Ok(Done::Tree(result));
                    }
                    RelayOutcome::Written(result) => {
                        unanswered.routing = None;
                        return Ok(Done::Written(result));
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
            Box::new(|engine, out: Result<Done, ToolError>| match out {
                Ok(Done::Tree(result)) => stamp(&engine.info_json, result),
                Ok(Done::Written(result)) => stamp_written(&engine.info_json, &result),
                Err(e) => Err(e
                    .error_object()
                    .unwrap_or_else(|| ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))),
            }),
            strategy,
        )
        .await
}

/// A live call's result, as the relay gave it.
enum Done {
    Tree(Value),
    Written(Box<RawValue>),
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
fn stamp(info: &RawValue, mut result: Value) -> Result<Json, ErrorObject> {
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
            SERVER_INFO.into(),
            serde_json::from_str(info.get()).unwrap_or_default(),
        );
    }
    Ok(to_json(&result))
}

/// [`stamp`] of a result as its sender wrote it, with no value tree: the
/// top-level members and `_meta`'s copied as written, `resultType` added
/// when absent, `_meta.serverInfo` this server's. A text this cannot pass
/// through unchanged in meaning is decoded and stamped as a tree: one that
/// is not an object, one whose top-level or `_meta` member names repeat (a
/// reader may take either of two `resultType`s; the tree keeps the last, as
/// the gateway's own reading of it does), one with line breaks (they would
/// end a stdio message early; outside strings they are only whitespace, and
/// inside them JSON escapes them).
///
/// What lies deeper passes as written, where the tree would have read it:
/// repeated names inside `content` or `structuredContent` reach the client
/// unresolved, an integer past 64 bits keeps its digits, and text a tree
/// refuses (a number past `f64`, nesting past 128, a lone surrogate
/// escape), which the tree path answers `-32603`, reaches the client as
/// sent — as it would from the server direct.
fn stamp_written(info: &RawValue, written: &RawValue) -> Result<Json, ErrorObject> {
    let text = written.get();
    let tree = || {
        serde_json::from_str(text).map_or_else(
            |_| {
                // JSON, but not what a value tree holds (a number past
                // `f64`, nesting past 128) on the path that needs one.
                tracing::error!("a relay answered a result that cannot be decoded");
                Err(ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))
            },
            |result| stamp(info, result),
        )
    };
    if memchr::memchr2(b'\n', b'\r', text.as_bytes()).is_some() {
        return tree();
    }
    let Ok(Members(members)) = serde_json::from_str::<Members<'_>>(text) else {
        return tree();
    };
    if !distinct(&members) {
        return tree();
    }
    let meta = match members.iter().find(|(k, _)| k == "_meta") {
        None => Vec::new(),
        Some((_, meta)) => match serde_json::from_str::<Members<'_>>(meta.get()) {
            Ok(Members(m)) if distinct(&m) => m,
            // Not an object: replaced, as the tree's stamp replaces it.
            Err(_) if !meta.get().starts_with('{') => Vec::new(),
            // Names repeated (or an object unread): the tree decides.
            Ok(_) | Err(_) => return tree(),
        },
    };
    Ok(to_json(&Stamped {
        members: &members,
        meta: &meta,
        info,
    }))
}

/// A member: its name (borrowed unless it has escapes), its value as
/// written.
type Member<'a> = (std::borrow::Cow<'a, str>, &'a RawValue);

/// An object's members in order.
struct Members<'a>(Vec<Member<'a>>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut members = Vec::with_capacity(map.size_hint().unwrap_or(4));
                while let Some((Name(name), value)) = map.next_entry::<Name<'de>, &RawValue>()? {
                    members.push((name, value));
                }
                Ok(Members(members))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A member name, borrowed unless it has escapes.
#[derive(Deserialize)]
struct Name<'a>(#[serde(borrow)] std::borrow::Cow<'a, str>);

/// No name twice (a result has a handful of members; past 32 the tree
/// decides).
fn distinct(members: &[Member<'_>]) -> bool {
    members.len() <= 32
        && members
            .iter()
            .enumerate()
            .all(|(i, (name, _))| members[..i].iter().all(|(other, _)| other != name))
}

/// The written result with its stamp.
struct Stamped<'a> {
    members: &'a [Member<'a>],
    meta: &'a [Member<'a>],
    info: &'a RawValue,
}

impl Serialize for Stamped<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(None)?;
        let mut typed = false;
        for (name, value) in self.members {
            if name == "_meta" {
                continue;
            }
            typed |= name == "resultType";
            map.serialize_entry(name, value)?;
        }
        if !typed {
            map.serialize_entry("resultType", "complete")?;
        }
        map.serialize_entry(
            "_meta",
            &StampedMeta {
                members: self.meta,
                info: self.info,
            },
        )?;
        map.end()
    }
}

/// `_meta` as written, `serverInfo` this server's.
struct StampedMeta<'a> {
    members: &'a [Member<'a>],
    info: &'a RawValue,
}

impl Serialize for StampedMeta<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(None)?;
        for (name, value) in self.members {
            if name != SERVER_INFO {
                map.serialize_entry(name, value)?;
            }
        }
        map.serialize_entry(SERVER_INFO, self.info)?;
        map.end()
    }
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
    stamp(&engine.info_json, result)
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
    stamp(&engine.info_json, result)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::{Just, any, prop, prop_assert, prop_assert_eq, prop_oneof, proptest};
    use proptest::strategy::Strategy as _;
    use serde_json::json;

    use super::*;

    fn info() -> Box<RawValue> {
        serde_json::value::to_raw_value(&tern_protocol::Implementation::new("gateway", "1.0.0"))
            .unwrap()
    }

    fn written(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).unwrap()
    }

    /// What the client reads: the stamp's text, decoded.
    fn read(json: &Json) -> Value {
        serde_json::from_str(json.get()).unwrap()
    }

    #[test]
    fn a_written_result_keeps_its_members_and_takes_this_servers_info() {
        let text = r#"{"content":[{"type":"text","text":"hi"}],"isError":false,"_meta":{"x":{"y":[1,2.50,"\u00e9"]},"io.modelcontextprotocol/serverInfo":{"name":"upstream","version":"9"}}}"#;
        let out = stamp_written(&info(), &written(text)).unwrap();
        assert_eq!(
            read(&out),
            json!({
                "content": [{"type": "text", "text": "hi"}],
                "isError": false,
                "resultType": "complete",
                "_meta": {
                    "x": {"y": [1, 2.5, "é"]},
                    "io.modelcontextprotocol/serverInfo": {"name": "gateway", "version": "1.0.0"},
                },
            })
        );
        // Copied as written, not re-encoded: the upstream's own spelling
        // of a number and an escape passes through.
        assert!(out.get().contains(r#"[1,2.50,"\u00e9"]"#), "{}", out.get());
        assert!(!out.get().contains("upstream"), "{}", out.get());
    }

    #[test]
    fn a_written_result_type_is_kept_and_a_missing_meta_is_added() {
        let out = stamp_written(&info(), &written(r#"{"resultType":"complete","n":1}"#)).unwrap();
        let v = read(&out);
        assert_eq!(v["resultType"], "complete");
        assert_eq!(v["n"], 1);
        assert_eq!(v["_meta"][SERVER_INFO]["name"], "gateway");
        assert_eq!(out.get().matches("resultType").count(), 1, "{}", out.get());
    }

    #[test]
    fn a_meta_that_is_not_an_object_is_replaced() {
        for meta in ["5", "\"x\"", "null", "[1]"] {
            let text = format!(r#"{{"a":1,"_meta":{meta}}}"#);
            let v = read(&stamp_written(&info(), &written(&text)).unwrap());
            assert_eq!(
                v["_meta"],
                json!({SERVER_INFO: {"name": "gateway", "version": "1.0.0"}}),
                "{meta}"
            );
        }
    }

    #[test]
    fn repeated_names_are_read_as_the_tree_reads_them() {
        // A second resultType must not reach a client that takes the last
        // one while the gateway judged the first.
        let text = r#"{"resultType":"complete","resultType":"input_required","a":1}"#;
        let out = stamp_written(&info(), &written(text)).unwrap();
        assert_eq!(out.get().matches("resultType").count(), 1, "{}", out.get());
        assert_eq!(read(&out)["resultType"], "input_required");
        let text = r#"{"_meta":{"a":1},"_meta":{"b":2}}"#;
        let v = read(&stamp_written(&info(), &written(text)).unwrap());
        assert_eq!(v["_meta"]["b"], 2);
        assert!(v["_meta"].get("a").is_none());
        // Inside `_meta` too.
        let text = r#"{"_meta":{"k":1,"k":2}}"#;
        let out = stamp_written(&info(), &written(text)).unwrap();
        assert_eq!(out.get().matches("\"k\"").count(), 1, "{}", out.get());
        assert_eq!(read(&out)["_meta"]["k"], 2);
    }

    #[test]
    fn line_breaks_do_not_pass_through() {
        let text = "{\n  \"content\": [\r\n    1\n  ],\n  \"_meta\": {\n\"k\": \"v\"\n}\n}";
        let out = stamp_written(&info(), &written(text)).unwrap();
        assert!(!out.get().contains(['\n', '\r']), "{:?}", out.get());
        let v = read(&out);
        assert_eq!(v["content"], json!([1]));
        assert_eq!(v["_meta"]["k"], "v");
    }

    #[test]
    fn a_result_that_is_not_an_object_is_an_internal_error() {
        for text in ["[1]", "3", "\"s\"", "null"] {
            let e = stamp_written(&info(), &written(text)).unwrap_err();
            assert_eq!(e.code, code::INTERNAL_ERROR, "{text}");
        }
    }

    fn json_value() -> impl proptest::strategy::Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(Value::from),
            "\\PC{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec((name(), inner), 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Names that clash often with the ones the stamp treats specially.
    fn name() -> impl proptest::strategy::Strategy<Value = String> {
        prop_oneof![
            Just("_meta".to_owned()),
            Just("resultType".to_owned()),
            Just(SERVER_INFO.to_owned()),
            "[a-z\"\\\\é\n]{0,4}",
        ]
    }

    proptest! {
        /// Any object, compact or pretty, written or as a tree: the client
        /// reads the same result.
        #[test]
        fn the_written_stamp_reads_as_the_tree_stamp(
            members in prop::collection::vec((name(), json_value()), 0..6),
            meta in prop::collection::vec((name(), json_value()), 0..4),
            with_meta in any::<bool>(),
            pretty in any::<bool>(),
        ) {
            let mut object: serde_json::Map<String, Value> = members.into_iter().collect();
            if with_meta {
                object.insert("_meta".into(), Value::Object(meta.into_iter().collect()));
            }
            let tree = Value::Object(object);
            let text = if pretty {
                serde_json::to_string_pretty(&tree).unwrap()
            } else {
                serde_json::to_string(&tree).unwrap()
            };
            let by_text = stamp_written(&info(), &written(&text)).unwrap();
            let by_tree = stamp(&info(), tree).unwrap();
            prop_assert_eq!(read(&by_text), read(&by_tree));
            prop_assert!(!by_text.get().contains('\n'));
        }
    }
}
