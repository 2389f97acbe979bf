//! The stateless MRTR engine (DESIGN §2, spec §2): opens the sealed
//! `requestState` of a retry, merges its answers, drives the handler, and on
//! suspension seals everything the next leg needs.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::mrtr::{InputKind, InputResponse};
use tern_protocol::{InputRequests, InputRequiredResult, InputResponses};
use tern_seal::{Claims, Expect, Sealer};

use crate::ctx::{Ctx, Leg, StoredAnswer, UNBOUND};
use crate::error::ToolError;
use crate::principal::Principal;
use crate::replay::ReplayStore;

/// The message of every refused `requestState` (DESIGN §3: one uniform
/// `-32602`, the real reason to the log only).
pub(crate) const INVALID_STATE: &str = "Invalid or expired requestState";

/// A source of the current time; injected in tests.
pub trait Clock: Send + Sync + std::fmt::Debug + 'static {
    /// Now.
    fn now(&self) -> SystemTime;
}

/// The system clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// What a pending question needs to have its answer checked on the retry.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct SealedPending {
    #[serde(rename = "f")]
    fingerprint: String,
    #[serde(rename = "k")]
    kind: SealedKind,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
enum SealedKind {
    #[serde(rename = "e")]
    Elicitation,
    #[serde(rename = "s")]
    Sampling,
    #[serde(rename = "r")]
    Roots,
}

impl From<InputKind> for SealedKind {
    fn from(k: InputKind) -> Self {
        match k {
            InputKind::Elicitation => Self::Elicitation,
            InputKind::Sampling => Self::Sampling,
            InputKind::Roots => Self::Roots,
        }
    }
}

impl From<SealedKind> for InputKind {
    fn from(k: SealedKind) -> Self {
        match k {
            SealedKind::Elicitation => Self::Elicitation,
            SealedKind::Sampling => Self::Sampling,
            SealedKind::Roots => Self::Roots,
        }
    }
}

/// The payload sealed into `requestState`.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Payload {
    /// Answers collected so far, with the fingerprints of their questions.
    #[serde(rename = "a", default, skip_serializing_if = "BTreeMap::is_empty")]
    answers: BTreeMap<String, StoredAnswer>,
    /// The questions of the round just sent.
    #[serde(rename = "p", default, skip_serializing_if = "BTreeMap::is_empty")]
    pending: BTreeMap<String, SealedPending>,
    /// Results of `ctx.once`.
    #[serde(rename = "o", default, skip_serializing_if = "BTreeMap::is_empty")]
    memo: BTreeMap<String, Value>,
}

/// What identifies the originating request (S10c).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Origin<'a> {
    pub(crate) method: &'a str,
    pub(crate) target: &'a str,
    pub(crate) arguments: Option<&'a Value>,
    pub(crate) principal: &'a Principal,
}

/// The state a retry resumes from.
#[derive(Debug, Default)]
pub(crate) struct Resumed {
    pub(crate) leg: Leg,
    pub(crate) round: u32,
    /// The id of the state this retry presented, when it presented one.
    pub(crate) state_id: Option<[u8; 16]>,
}

/// How a leg ended.
pub(crate) enum Driven<T> {
    Done(T),
    Suspended,
    Fatal(ErrorObject),
}

/// Replay protection a tool asks for (DESIGN §3).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReplayPolicy {
    pub(crate) single_use: bool,
    pub(crate) idempotent_retry: bool,
}

/// The engine shared by every request of a server.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) sealer: Sealer,
    pub(crate) replay: Arc<dyn ReplayStore>,
    pub(crate) clock: Arc<dyn Clock>,
}

impl Engine {
    /// How long the replay store keeps what it knows of a state: twice the
    /// state's own lifetime, so the record outlives every token it guards.
    fn replay_ttl(&self) -> Duration {
        self.sealer.options().ttl * 2
    }
}

fn invalid_state(reason: impl std::fmt::Display) -> ErrorObject {
    tracing::info!(%reason, "requestState refused");
    ErrorObject::invalid_params(INVALID_STATE)
}

fn random_bytes<const N: usize>() -> [u8; N] {
    let mut out = [0u8; N];
    if let Err(e) = getrandom::fill(&mut out) {
        // The OS random source failing is not recoverable for a server that
        // must mint unguessable ids and nonces.
        panic!("the operating system's random source failed: {e}");
    }
    out
}

impl Engine {
    /// Opens the retry's state, checks every binding (S8–S10), and merges the
    /// answers to the questions it asked (S14: other keys are ignored; S13: an
    /// answer of the wrong shape is `-32602`).
    pub(crate) fn resume(
        &self,
        origin: Origin<'_>,
        request_state: Option<&str>,
        responses: Option<&InputResponses>,
        without_state: bool,
    ) -> Result<Resumed, ErrorObject> {
        let Some(token) = request_state else {
            if !without_state {
                // No state: nothing was asked, so no answer can count (S14).
                return Ok(Resumed::default());
            }
            // The handler opted in: answers count for whatever it asks under
            // their keys, each checked against its question when asked.
            let mut answers = BTreeMap::new();
            for key in responses
                .map(|r| r.keys().collect::<Vec<_>>())
                .unwrap_or_default()
            {
                let Some(raw) = responses.and_then(|r| r.raw(key)) else {
                    continue;
                };
                self.check_answer_len(key, raw)?;
                answers.insert(
                    key.to_owned(),
                    StoredAnswer {
                        fingerprint: UNBOUND.to_owned(),
                        value: raw.clone(),
                    },
                );
            }
            return Ok(Resumed {
                leg: Leg {
                    answers,
                    ..Leg::default()
                },
                ..Resumed::default()
            });
        };
        let expect = Expect {
            principal: origin.principal.id(),
            method: origin.method,
            target: origin.target,
            arguments: origin.arguments,
        };
        let opened = self
            .sealer
            .open(token, &expect, self.clock.now())
            .map_err(|e| invalid_state(format_args!("{:?}", e.reason())))?;
        let payload: Payload = serde_json::from_slice(&opened.payload)
            .map_err(|e| invalid_state(format_args!("payload: {e}")))?;
        let mut answers = payload.answers;
        for (key, pending) in &payload.pending {
            let Some(raw) = responses.and_then(|r| r.raw(key)) else {
                continue;
            };
            let kind = InputKind::from(pending.kind);
            self.check_answer_len(key, raw)?;
            let response = InputResponse::decode_as(kind, raw).map_err(|e| {
                ErrorObject::invalid_params(format!("inputResponses[\"{key}\"]: {e}"))
            })?;
            // Keep the typed answer, not the raw one: members the answer's kind
            // does not have are not carried into the sealed state.
            let value = serde_json::to_value(&response).unwrap_or_default();
            answers.insert(
                key.clone(),
                StoredAnswer {
                    fingerprint: pending.fingerprint.clone(),
                    value,
                },
            );
        }
        Ok(Resumed {
            leg: Leg {
                answers,
                memo: payload.memo,
                ..Leg::default()
            },
            round: opened.round,
            state_id: Some(opened.state_id),
        })
    }

    /// Seals the next round's state and builds the `input_required` result.
    pub(crate) fn suspend(
        &self,
        origin: Origin<'_>,
        leg: Leg,
        round: u32,
    ) -> Result<InputRequiredResult, ErrorObject> {
        let mut requests = InputRequests::new();
        let mut pending = BTreeMap::new();
        for (key, question) in leg.pending {
            pending.insert(
                key.clone(),
                SealedPending {
                    fingerprint: question.fingerprint,
                    kind: question.request.kind().into(),
                },
            );
            requests.insert(key, question.request);
        }
        let mut answers = leg.answers;
        // Unbound answers that no question used are dropped, not carried on.
        answers.retain(|k, a| !pending.contains_key(k) && a.fingerprint != UNBOUND);
        let payload = Payload {
            answers,
            pending,
            memo: leg.memo,
        };
        let bytes = serde_json::to_vec(&payload).map_err(|e| {
            tracing::error!(error = %e, "cannot encode requestState payload");
            ErrorObject::new(code::INTERNAL_ERROR, "Internal error")
        })?;
        let claims = Claims {
            principal: origin.principal.id(),
            method: origin.method,
            target: origin.target,
            arguments: origin.arguments,
            state_id: random_bytes(),
            round: round.saturating_add(1),
            payload: &bytes,
        };
        let token = self
            .sealer
            .seal(&claims, self.clock.now(), random_bytes())
            .map_err(|e| {
                tracing::error!(error = %e, "requestState too large to seal");
                ErrorObject::new(
                    code::INTERNAL_ERROR,
                    "Internal error: the request's state grew too large",
                )
            })?;
        if requests.is_empty() {
            return Ok(InputRequiredResult::state_only(token));
        }
        Ok(InputRequiredResult::new(requests, Some(token)))
    }

    /// An answer may use at most half the state's size cap: it is sealed into
    /// the next round's state, and an oversized one is the client's fault
    /// (`-32602`), not a server error later.
    fn check_answer_len(&self, key: &str, raw: &Value) -> Result<(), ErrorObject> {
        let limit = self.sealer.options().max_token_len / 2;
        let mut counter = LenCounter(0);
        let _ = serde_json::to_writer(&mut counter, raw);
        if counter.0 > limit {
            return Err(ErrorObject::invalid_params(format!(
                "inputResponses[\"{key}\"] is larger than {limit} bytes"
            )));
        }
        Ok(())
    }

    /// Before running a leg that presented state `state_id`: the stored final
    /// result of an idempotent retry, or a refusal of a replayed single-use
    /// state.
    pub(crate) async fn before_leg(
        &self,
        policy: ReplayPolicy,
        state_id: Option<[u8; 16]>,
    ) -> Result<Option<Box<serde_json::value::RawValue>>, ErrorObject> {
        let Some(state_id) = state_id else {
            return Ok(None);
        };
        if !policy.single_use && !policy.idempotent_retry {
            return Ok(None);
        }
        let store_failed = |e: crate::replay::StoreError| {
            tracing::error!(error = %e, "replay store failed");
            ErrorObject::new(code::INTERNAL_ERROR, "Internal error")
        };
        if policy.idempotent_retry
            && let Some(result) = self.replay.result(state_id).await.map_err(store_failed)?
        {
            return Ok(Some(crate::server::to_json(&result)));
        }
        // S11: single use is enforced server-side, in the shared store.
        let first = self
            .replay
            .redeem(state_id, self.replay_ttl())
            .await
            .map_err(store_failed)?;
        if first {
            return Ok(None);
        }
        if policy.idempotent_retry {
            // A duplicate that arrives while the first is still running waits
            // (bounded) for its outcome rather than failing.
            let deadline = tokio::time::Instant::now() + DUPLICATE_WAIT;
            while tokio::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(20)).await;
                if let Some(result) = self.replay.result(state_id).await.map_err(store_failed)? {
                    return Ok(Some(crate::server::to_json(&result)));
                }
            }
        }
        Err(invalid_state("state already redeemed"))
    }

    /// Holds the redemption of `state_id` for this leg; unless
    /// [`Claim::keep`] is called (the leg produced an outcome), it is released
    /// so the same retry can be made again.
    pub(crate) fn claim(&self, policy: ReplayPolicy, state_id: Option<[u8; 16]>) -> Claim {
        let held = state_id.filter(|_| policy.single_use || policy.idempotent_retry);
        Claim {
            store: Arc::clone(&self.replay),
            state_id: held,
        }
    }

    /// After a leg that presented `state_id` completed: keep the result for a
    /// duplicate retry.
    pub(crate) async fn after_leg(
        &self,
        policy: ReplayPolicy,
        state_id: Option<[u8; 16]>,
        result: &serde_json::value::RawValue,
    ) {
        let (true, Some(state_id)) = (policy.idempotent_retry, state_id) else {
            return;
        };
        let Ok(value) = serde_json::from_str::<Value>(result.get()) else {
            return;
        };
        if let Err(e) = self
            .replay
            .store_result(state_id, value, self.replay_ttl())
            .await
        {
            tracing::error!(error = %e, "replay store failed to keep a result");
        }
    }
}

/// How long a duplicate idempotent retry waits for the first one's outcome.
const DUPLICATE_WAIT: Duration = Duration::from_secs(10);

/// See [`Engine::claim`].
pub(crate) struct Claim {
    store: Arc<dyn ReplayStore>,
    state_id: Option<[u8; 16]>,
}

impl Claim {
    /// The leg produced an outcome: the redemption stands.
    pub(crate) fn keep(mut self) {
        self.state_id = None;
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        let Some(state_id) = self.state_id.take() else {
            return;
        };
        let store = Arc::clone(&self.store);
        // Runs when the leg failed or its client went away (the future was
        // dropped): release in the background.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(e) = store.release(state_id).await {
                    tracing::warn!(error = %e, "replay store failed to release a claim");
                }
            });
        }
    }
}

/// Counts the bytes a serialiser writes.
struct LenCounter(usize);

impl std::io::Write for LenCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Polls `handler` until it completes, or until a poll leaves questions
/// pending (all questions raised in that poll travel together), or a fatal
/// error was recorded.
pub(crate) async fn drive<T, F>(ctx: &Ctx, handler: F) -> Driven<Result<T, ToolError>>
where
    F: Future<Output = Result<T, ToolError>>,
{
    let mut handler = pin!(handler);
    std::future::poll_fn(|cx| match handler.as_mut().poll(cx) {
        // `ToolError::retry_later`: a round with no new question, only the
        // state to come back with (S6 allows `requestState` alone).
        Poll::Ready(Err(e)) if e.is_retry_later() => Poll::Ready(Driven::Suspended),
        Poll::Ready(out) => Poll::Ready(Driven::Done(out)),
        Poll::Pending => {
            let mut leg = ctx.leg();
            leg.waker = Some(cx.waker().clone());
            if let Some(fatal) = leg.fatal.take() {
                Poll::Ready(Driven::Fatal(fatal))
            } else if leg.pending.is_empty() {
                Poll::Pending
            } else {
                Poll::Ready(Driven::Suspended)
            }
        }
    })
    .await
}
