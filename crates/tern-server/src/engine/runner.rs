//! The one leg runner (docs/design.md, "One leg runner, three ways of
//! asking") shared by `tools/call`, `prompts/get` and
//! `resources/read` — and by task bodies and legacy sessions through the
//! *await* strategy. It is the one place that opens the state, checks every
//! binding and the call's limits, merges and validates the answers, applies
//! the replay policy, runs the handler, and seals or finishes.
//!
//! One leg, in order:
//!
//! 1. **Resume** (`Engine::resume`): no `requestState` starts a call (a fresh
//!    call id, round 1); a state is opened and checked against the retry's
//!    principal, method, target and arguments (rules `state-integrity`,
//!    `state-expiry`, `state-bound-principal`, `state-bound-request`), its
//!    payload version, and the call's lifetime. The retry's `inputResponses`
//!    are merged for the questions the state asked (rule
//!    `answers-unknown-ignored`), each decoded as its question's kind (rule
//!    `answers-validated`) and size-checked. Every refusal is the one uniform
//!    `-32602`.
//! 2. **Guard**: a leg of a `single_use` / `idempotent_retry` target that
//!    presented a state is claimed in the replay store and runs in a
//!    server-owned task (see `guard`); duplicates get the stored outcome.
//! 3. **Run** under the strategy: *suspend* (MRTR) or *await*.
//! 4. **Finish**: the method turns the handler's output into its result; or
//!    the pending questions are sealed into the next round's state
//!    (`input_required`), within the call's round limit.
//!
//! Every leg runs in a `leg` tracing span with the call id, round, method,
//! target and outcome — never answers, state or principals.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

use serde_json::Value;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::mrtr::{InputKind, InputResponse};
use tern_protocol::{InputRequiredResult, InputResponses, RequestId, RequestMeta};
use tern_seal::{Claims, Expect};
use tracing::Instrument as _;

use crate::call::CallContext;
use crate::ctx::{Ctx, CtxParts, Leg, LenCounter};
use crate::engine::payload::{Payload, SealedPending, StoredAnswer};
use crate::engine::strategy::{self, Driven, Strategy};
use crate::engine::{CallId, Engine, guard, random_bytes};
use crate::error::{ToolError, codes};
use crate::json::{Json, to_json};
use crate::principal::Principal;
use crate::rendered::{InputRequired, Rendered, RenderedRequests};
use crate::replay::BoxFuture;

/// The message of every refused `requestState` (docs/design.md, "Sealing
/// requestState": one uniform `-32602`, the real reason to the log only).
pub(crate) const INVALID_STATE: &str = "Invalid or expired requestState";

/// The fingerprint of an answer given without a `requestState` (see
/// [`crate::ToolDef::accept_unsealed_answers`]): it counts for whichever question
/// is asked under its key, and is then bound to it.
pub(crate) const UNBOUND: &str = "*";

/// The uniform refusal, the detail logged and `class` counted: the
/// counter's label is one of a fixed set (`seal:…` for the seal's own
/// reasons, `payload`, `lifetime`, `answer`, `redeemed`, `vanished`), never
/// text the client chose, so its cardinality stays bounded.
pub(crate) fn invalid_state(class: &str, detail: impl std::fmt::Display) -> ErrorObject {
    tracing::info!(reason = %detail, class, "requestState refused");
    crate::metrics::refused_state(class);
    ErrorObject::invalid_params(INVALID_STATE)
}

/// An answer that is not a result of its question's kind, refused once the
/// state opened: `-32602` naming the key (the server's own, from the sealed
/// state, so nothing the client chose is echoed) and the kind expected, so
/// the client looks at its answer, not at the `requestState` (the uniform
/// state refusal is for a state that does not open).
pub(crate) fn invalid_answer(
    key: &str,
    kind: InputKind,
    detail: &dyn std::fmt::Display,
) -> ErrorObject {
    tracing::info!(%key, reason = %detail, "answer refused");
    crate::metrics::refused_state("answer");
    let expected = match kind {
        InputKind::Elicitation => "an elicitation result (`action`, and `content` when accepted)",
        InputKind::Sampling => "a sampling result (`role`, `content`, `model`)",
        InputKind::Roots => "a roots result (`roots`)",
    };
    ErrorObject::invalid_params(format!(
        "Invalid answer in inputResponses for `{key}`: not {expected}"
    ))
}

/// What identifies the originating request (rule `state-bound-request`).
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) method: &'static str,
    pub(crate) target: String,
    pub(crate) arguments: Option<Arc<Value>>,
    pub(crate) principal: Principal,
}

impl Origin {
    /// Opens `token` against every binding of this request (rules
    /// `state-bound-principal`, `state-bound-request`; the expiry at `now`),
    /// with the uniform `-32602` and the seal's reason logged otherwise. The
    /// leg runner and the relay both open their states here.
    pub(crate) fn open(
        &self,
        sealer: &tern_seal::Sealer,
        token: &str,
        now: SystemTime,
    ) -> Result<tern_seal::Opened, ErrorObject> {
        let expect = Expect {
            principal: self.principal.id(),
            method: self.method,
            target: &self.target,
            arguments: self.arguments.as_deref(),
        };
        sealer.open(token, &expect, now).map_err(|e| {
            let reason = format!("{:?}", e.reason());
            invalid_state(&format!("seal:{reason}"), reason)
        })
    }
}

/// What a target asks of the runner (docs/design.md, "Exactly once"), the
/// same for tools, prompts and resources.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct LegPolicy {
    pub(crate) single_use: bool,
    pub(crate) idempotent_retry: bool,
    pub(crate) accept_unsealed_answers: bool,
    /// The target may become a task (tools only).
    pub(crate) task: Option<crate::task::TaskMode>,
}

impl LegPolicy {
    /// Legs that present a state are claimed in the replay store.
    pub(crate) fn guarded(self) -> bool {
        self.single_use || self.idempotent_retry
    }

    /// `accept_unsealed_answers` lets a stateless leg carry answers, and a
    /// stateless leg cannot be claimed: the two together would let a
    /// "guarded" effect run any number of times.
    pub(crate) fn check(self, what: &str) -> Result<(), crate::error::BuildError> {
        if self.accept_unsealed_answers && self.guarded() {
            return Err(crate::error::BuildError(format!(
                "{what}: accept_unsealed_answers cannot be combined with single_use or \
                 idempotent_retry (a leg without state cannot be claimed)"
            )));
        }
        if self.task.is_some() && self.guarded() {
            // A task is already once per logical call (keyed by its call
            // id); a claimed leg cannot also hand its run to a task.
            return Err(crate::error::BuildError(format!(
                "{what}: task support cannot be combined with single_use or idempotent_retry"
            )));
        }
        Ok(())
    }
}

/// The replay-policy builders of a prompt or resource definition, which all
/// follow [`crate::ToolDef`]'s: written once here.
macro_rules! policy_builders {
    () => {
        /// Accepts answers without a `requestState` (see
        /// [`crate::ToolDef::accept_unsealed_answers`]).
        #[must_use]
        pub fn accept_unsealed_answers(mut self) -> Self {
            self.policy.accept_unsealed_answers = true;
            self
        }

        /// Each `requestState` is accepted once (see
        /// [`crate::ToolDef::single_use`]).
        #[must_use]
        pub fn single_use(mut self) -> Self {
            self.policy.single_use = true;
            self
        }

        /// Exactly once per `requestState` (see
        /// [`crate::ToolDef::idempotent_retry`]).
        #[must_use]
        pub fn idempotent_retry(mut self) -> Self {
            self.policy.idempotent_retry = true;
            self
        }
    };
}
pub(crate) use policy_builders;

/// One leg, as the method decoded it.
#[derive(Debug)]
pub(crate) struct LegRequest {
    pub(crate) origin: Origin,
    pub(crate) request_state: Option<String>,
    pub(crate) responses: Option<InputResponses>,
    pub(crate) policy: LegPolicy,
    pub(crate) id: RequestId,
    /// Shared with the leg's [`Ctx`], which reads it, rather than copied.
    pub(crate) meta: Arc<RequestMeta>,
    pub(crate) call: CallContext,
}

/// The state a retry presented, once opened.
#[derive(Debug, Clone)]
pub(crate) struct Presented {
    pub(crate) state_id: [u8; 16],
    pub(crate) expires_at: SystemTime,
    /// The token as received, for a duplicate told to come back with it.
    pub(crate) token: String,
}

/// What a leg resumes from.
#[derive(Debug)]
pub(crate) struct Resumed {
    pub(crate) payload: Payload,
    /// Rounds (`input_required` results) the call went through so far.
    pub(crate) round: u32,
    pub(crate) presented: Option<Presented>,
}

/// The handler of a leg, given its context.
pub(crate) type RunHandler<T> =
    Box<dyn FnOnce(Ctx) -> BoxFuture<'static, Result<T, ToolError>> + Send>;

/// Turns the handler's output into the method's result.
pub(crate) type FinishLeg<T> =
    Box<dyn FnOnce(&Engine, Result<T, ToolError>) -> Result<Json, ErrorObject> + Send>;

/// Who creates the task a leg becomes, and what a durable tool's task keeps.
fn start_spec(
    request: &LegRequest,
    call_id: CallId,
    task_mode: Option<crate::task::TaskMode>,
) -> crate::task::runner::StartSpec {
    crate::task::runner::StartSpec {
        call_id,
        principal: request.origin.principal.clone(),
        peer: request.call.peer.clone(),
        capabilities: (*request.meta.client_capabilities).clone(),
        durable: crate::task::durable::seed_of(
            task_mode,
            &request.origin.target,
            request.origin.arguments.as_ref(),
            &request.meta,
        ),
    }
}

impl Engine {
    /// Runs one leg: see the module docs.
    pub(crate) async fn run<T: Send + 'static>(
        self: &Arc<Self>,
        request: LegRequest,
        handler: RunHandler<T>,
        finish: FinishLeg<T>,
        strategy: Strategy,
    ) -> Result<Json, ErrorObject> {
        let span = tracing::info_span!(
            "leg",
            call_id = tracing::field::Empty,
            round = tracing::field::Empty,
            method = request.origin.method,
            target = %request.origin.target,
            outcome = tracing::field::Empty,
        );
        let engine = Arc::clone(self);
        async move {
            // Boxed: a leg's future is large, and it is awaited inside every
            // method's dispatch.
            let result = Box::pin(engine.run_in_span(request, handler, finish, strategy)).await;
            let outcome = match &result {
                Ok(_) => "ok",
                Err(e) if e.code == codes::OUTCOME_UNKNOWN => "unknown",
                Err(_) => "error",
            };
            tracing::Span::current().record("outcome", outcome);
            tracing::debug!("leg done");
            result
        }
        .instrument(span)
        .await
    }

    async fn run_in_span<T: Send + 'static>(
        self: Arc<Self>,
        request: LegRequest,
        handler: RunHandler<T>,
        finish: FinishLeg<T>,
        strategy: Strategy,
    ) -> Result<Json, ErrorObject> {
        let resumed = self.resume(&request)?;
        let span = tracing::Span::current();
        span.record("call_id", tracing::field::display(resumed.payload.call_id));
        span.record("round", resumed.round + 1);
        if request.policy.guarded()
            && matches!(strategy, Strategy::Suspend)
            && resumed.presented.is_some()
        {
            // Boxed, as the task start: the common leg stays small.
            return Box::pin(guard::run(self, request, resumed, handler, finish)).await;
        }
        self.leg(request, resumed, handler, finish, strategy).await
    }

    /// Runs the handler of one leg under `strategy` and finishes it.
    pub(crate) async fn leg<T: Send + 'static>(
        self: Arc<Self>,
        request: LegRequest,
        resumed: Resumed,
        handler: RunHandler<T>,
        finish: FinishLeg<T>,
        strategy: Strategy,
    ) -> Result<Json, ErrorObject> {
        {
            let Resumed { payload, round, .. } = resumed;
            let call_id = payload.call_id;
            let started_at = payload.started_at;
            // Tasks: only an MRTR leg of a task-capable target whose request
            // declared the extension may become a task (Tasks extension ›
            // Capability Negotiation).
            let task_mode = request.policy.task.filter(|_| {
                matches!(strategy, Strategy::Suspend)
                    && !request.policy.guarded()
                    && crate::task::request_declared(&request.meta)
            });
            // A leg that may become a task gets its own token: the request's
            // cancellation is forwarded to it only while the leg is a
            // request, never once it is a task. (A spawned forwarder, not a
            // poll of this leg: a transport drops a cancelled leg's future
            // at once, and spawned cleanup work must still see it.) Other
            // legs use the request's token as it is.
            let (cancel, forwarding) = if task_mode.is_some() {
                let own = tokio_util::sync::CancellationToken::new();
                let stop = tokio_util::sync::CancellationToken::new();
                let (request_cancel, forward_to, stopped) =
                    (request.call.cancel.clone(), own.clone(), stop.clone());
                tokio::spawn(async move {
                    // Biased: once the leg became a task (`stopped`), a
                    // disconnect that is also ready by the time this task
                    // runs must not reach it.
                    tokio::select! {
                        biased;
                        () = stopped.cancelled() => {}
                        () = request_cancel.cancelled() => forward_to.cancel(),
                    }
                });
                (own, Some(stop.drop_guard()))
            } else {
                (request.call.cancel.clone(), None)
            };
            let ctx = Ctx::new(CtxParts {
                request_id: request.id.clone(),
                call_id,
                round: round + 1,
                memo_limit: self.sealer().options().max_token_len / 2,
                meta: Arc::clone(&request.meta),
                principal: request.origin.principal.clone(),
                access_token: request.call.access_token.clone(),
                server: self.info.clone(),
                notifier: request.call.notifier.clone(),
                cancel: cancel.clone(),
                progress_interval: self.progress_interval,
                can_task: task_mode.is_some(),
                leg: Leg {
                    answers: payload.answers,
                    memo: payload.memo,
                    ..Leg::default()
                },
            });
            let running = handler(ctx.clone());
            let drive = async {
                match &strategy {
                    Strategy::Suspend if task_mode.is_some_and(|m| m.from_start) => {
                        Driven::IntoTask(running)
                    }
                    Strategy::Suspend => strategy::suspend(&ctx, running).await,
                    Strategy::Await(source) => {
                        let check = |leg: &Leg, rounds: u32| {
                            self.check_round(round + rounds)?;
                            self.seal_leg(&request.origin, call_id, started_at, leg, round)
                                .map(drop)
                        };
                        // Boxed: the await strategy (a task, a 2025-11-25
                        // session) is the cold arm of an HTTP leg.
                        Box::pin(strategy::await_answers(&ctx, running, &**source, &check)).await
                    }
                }
            };
            let driven = drive.await;
            match driven {
                Driven::IntoTask(body) => {
                    // From here the request's cancellation no longer reaches
                    // the handler; `tasks/cancel` does.
                    drop(forwarding);
                    let spec = start_spec(&request, call_id, task_mode);
                    let tasks = Arc::clone(&self.tasks);
                    // Boxed: rare, and large enough to double every leg's
                    // future if held inline.
                    Box::pin(tasks.start(Arc::clone(&self), spec, ctx, cancel, body, finish)).await
                }
                Driven::Done(out) => {
                    crate::metrics::rounds_per_call(request.origin.method, round + 1);
                    finish(&self, out)
                }
                Driven::Suspended => {
                    let leg = ctx.take_leg();
                    let round = round + 1;
                    self.check_round(round)?;
                    let (token, requests) =
                        self.seal_leg(&request.origin, call_id, started_at, &leg, round - 1)?;
                    if requests.is_empty() {
                        Ok(self.stamp_input_required(InputRequiredResult::state_only(token)))
                    } else {
                        Ok(self.stamp_rendered(&requests, &token))
                    }
                }
                Driven::Fatal(e) => Err(e),
            }
        }
    }

    /// The call may go through `round` rounds.
    pub(crate) fn check_round(&self, round: u32) -> Result<(), ErrorObject> {
        let max = self.limits.max_rounds;
        if round > max {
            return Err(ErrorObject::new(
                codes::CALL_LIMIT,
                format!("The call needed more than {max} rounds of questions"),
            )
            .with_data(serde_json::json!({ "maxRounds": max })));
        }
        Ok(())
    }

    /// `input_required` as sent: with the server's identity, no caching
    /// hints (rule `input-required-uncached`).
    pub(crate) fn stamp_input_required(&self, mut ir: InputRequiredResult) -> Json {
        ir.meta = Some(tern_protocol::meta::ResultMeta::with_server_info(
            self.info.clone(),
        ));
        to_json(&ir)
    }

    /// [`Engine::stamp_input_required`] of questions written from their
    /// cached JSON (the text their fingerprints were hashed from).
    fn stamp_rendered(&self, requests: &[(String, Arc<Rendered>)], token: &str) -> Json {
        let meta = tern_protocol::meta::ResultMeta::with_server_info(self.info.clone());
        to_json(&InputRequired {
            requests,
            request_state: token,
            meta: &meta,
        })
    }

    /// Opens the retry's state, checks every binding (the `requestState`
    /// rules of docs/rules.md) and the call's lifetime, and merges the
    /// answers to the questions it asked (rule `answers-unknown-ignored`:
    /// other keys are ignored; rule `answers-validated`: an answer of the
    /// wrong shape is refused).
    pub(crate) fn resume(&self, request: &LegRequest) -> Result<Resumed, ErrorObject> {
        let now = self.clock.now();
        let responses = request.responses.as_ref();
        let Some(token) = request.request_state.as_deref() else {
            let mut payload = Payload::first(CallId::random(), now);
            if request.policy.accept_unsealed_answers {
                // The handler opted in: answers count for whatever it asks
                // under their keys, each checked against its question when
                // asked.
                for key in responses.into_iter().flat_map(InputResponses::keys) {
                    let Some(raw) = responses.and_then(|r| r.raw(key)) else {
                        continue;
                    };
                    self.check_answer_len(raw)?;
                    payload.answers.insert(
                        key.to_owned(),
                        StoredAnswer::new(UNBOUND.to_owned(), raw.clone()),
                    );
                }
            }
            // Otherwise nothing was asked, so no answer can count (rule
            // `answers-unknown-ignored`).
            return Ok(Resumed {
                payload,
                round: 0,
                presented: None,
            });
        };
        let opened = request.origin.open(&self.sealer(), token, now)?;
        let payload = Payload::decode(&opened.payload, opened.state_id, opened.issued_at)
            .map_err(|e| invalid_state("payload", e))?;
        if now
            .duration_since(payload.started_at)
            .is_ok_and(|age| age > self.limits.max_lifetime)
        {
            return Err(invalid_state(
                "lifetime",
                "the call outlived its maximum lifetime",
            ));
        }
        let Payload {
            call_id,
            started_at,
            mut answers,
            pending,
            memo,
        } = payload;
        for (key, pending) in &pending {
            let Some(raw) = responses.and_then(|r| r.raw(key)) else {
                continue;
            };
            let kind = InputKind::from(pending.kind);
            self.check_answer_len(raw)?;
            let response =
                InputResponse::decode_as(kind, raw).map_err(|e| invalid_answer(key, kind, &e))?;
            // Keep the typed answer, not the raw one: members the answer's
            // kind does not have are not carried into the sealed state.
            let value = serde_json::to_value(&response).map_err(|e| {
                invalid_state("answer", format_args!("inputResponses[{key:?}]: {e}"))
            })?;
            answers.insert(
                key.clone(),
                StoredAnswer::decoded(pending.fingerprint.clone(), value, response),
            );
        }
        Ok(Resumed {
            payload: Payload {
                call_id,
                started_at,
                answers,
                pending: BTreeMap::new(),
                memo,
            },
            round: opened.round,
            presented: Some(Presented {
                state_id: opened.state_id,
                expires_at: opened.expires_at,
                token: token.to_owned(),
            }),
        })
    }

    /// Seals the state of round `round + 1`: the answers the leg holds, its
    /// pending questions and its memo.
    fn seal_leg(
        &self,
        origin: &Origin,
        call_id: CallId,
        started_at: SystemTime,
        leg: &Leg,
        round: u32,
    ) -> Result<(String, RenderedRequests), ErrorObject> {
        let mut requests = Vec::with_capacity(leg.pending.len());
        let mut pending = BTreeMap::new();
        for (key, question) in &leg.pending {
            pending.insert(
                key.clone(),
                SealedPending {
                    fingerprint: question.fingerprint().to_owned(),
                    kind: question.request().kind().into(),
                },
            );
            requests.push((key.clone(), Arc::clone(&question.rendered)));
        }
        let mut answers = leg.answers.clone();
        // Unbound answers that no question used are dropped, not carried on.
        answers.retain(|k, a| !pending.contains_key(k) && a.fingerprint != UNBOUND);
        let payload = Payload {
            call_id,
            started_at,
            answers,
            pending,
            memo: leg.memo.clone(),
        };
        let bytes = zeroize::Zeroizing::new(payload.encode().map_err(|e| {
            tracing::error!(error = %e, "cannot encode requestState payload");
            ErrorObject::new(code::INTERNAL_ERROR, "Internal error")
        })?);
        // The state's id and the nonce from one read of the random source.
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
            round: round.saturating_add(1),
            payload: &bytes,
        };
        let token = self
            .sealer()
            .seal(&claims, self.clock.now(), nonce)
            .map_err(|e| {
                if e.is_inexact_arguments() {
                    tracing::info!(error = %e, "arguments cannot be bound exactly");
                    return ErrorObject::invalid_params(
                        "The arguments hold a number that cannot be represented exactly; \
                         send it as a string",
                    );
                }
                tracing::error!(error = %e, "requestState too large to seal");
                ErrorObject::new(
                    code::INTERNAL_ERROR,
                    "Internal error: the request's state grew too large",
                )
            })?;
        Ok((token, requests))
    }

    /// An answer may use at most half the state's size cap: it is sealed into
    /// the next round's state, and an oversized one is the client's fault
    /// (`-32602`), not a server error later.
    fn check_answer_len(&self, raw: &Value) -> Result<(), ErrorObject> {
        let limit = self.sealer().options().max_token_len / 2;
        let mut counter = LenCounter(0);
        let _ = serde_json::to_writer(&mut counter, raw);
        if counter.0 > limit {
            return Err(ErrorObject::invalid_params(format!(
                "An inputResponses entry is larger than {limit} bytes"
            )));
        }
        Ok(())
    }
}
