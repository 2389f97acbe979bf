//! How a question reaches the client (docs/design.md, "One leg runner, three
//! ways of asking"). The handler never knows which strategy runs it.
//!
//! - *Suspend* (MRTR, 2026-07-28 requests): the leg polls the handler until
//!   it completes or leaves questions pending; pending questions end the leg
//!   as `input_required`, sealed, and the handler re-runs from the top on the
//!   retry.
//! - *Await* (a task, a 2025-11-25 session): the pending questions are handed
//!   to an [`AnswerSource`] — a task record that turns `input_required`, a
//!   live session that sends `elicitation/create` — and the still-running
//!   handler is woken with the answers as they come. The source sets the
//!   timeout of each question; when it fires the call ends with
//!   [`crate::error::codes::QUESTION_TIMEOUT`], never with an invented
//!   decline.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use tern_protocol::error::{ErrorObject, code};
use tern_protocol::mrtr::InputResponse;
use tern_protocol::{InputRequests, JsonObject};

use crate::ctx::{Ctx, Leg};
use crate::engine::payload::StoredAnswer;
use crate::error::{ToolError, codes};
use crate::future::BoxFuture;

/// Whoever drives a call under the *await* strategy: it shows the client the
/// questions outstanding and brings back the answers.
pub trait AnswerSource: Send + Sync + 'static {
    /// Publishes `questions` — every question outstanding now, by key; a call
    /// replaces the set published by the call before it — and resolves with
    /// answers to at least one of them (a partial answer is fine: the rest
    /// stay outstanding and are published again). An error ends the call
    /// with it (the session is gone, the task was cancelled).
    ///
    /// An answer under a key that is not outstanding, or of another kind
    /// than its question, is ignored (rule `answers-unknown-ignored`) and the
    /// question stays asked.
    fn answers(
        &self,
        questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>>;

    /// How long the call waits for an answer before it ends with
    /// [`crate::error::codes::QUESTION_TIMEOUT`]. Counted from each
    /// publication.
    fn question_timeout(&self) -> Duration;
}

/// The strategy of one leg.
#[derive(Clone, Default)]
pub(crate) enum Strategy {
    /// MRTR.
    #[default]
    Suspend,
    /// A task or a live session.
    Await(Arc<dyn AnswerSource>),
}

impl std::fmt::Debug for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Suspend => "Suspend",
            Self::Await(_) => "Await",
        })
    }
}

/// How a leg's handler ended.
pub(crate) enum Driven<T> {
    Done(T),
    /// Questions are pending (or the handler asked to come back later).
    Suspended,
    Fatal(ErrorObject),
    /// The handler called `ctx.into_task()` (MRTR only): its still-pending
    /// future, for the task runner to keep polling.
    IntoTask(BoxFuture<'static, T>),
}

/// What the runner checks before questions go out under *await*: that the
/// leg's answers and memo would still fit a sealed state (so a handler cannot
/// tell the strategies apart), and that the call has rounds left.
pub(crate) type Precheck<'a> = &'a (dyn Fn(&Leg, u32) -> Result<(), ErrorObject> + Send + Sync);

/// MRTR: polls `handler` until it completes, or until a poll leaves questions
/// pending (all questions raised in that poll travel together), or a fatal
/// error was recorded, or the handler asked to become a task (then the
/// still-pending future is handed back, never dropped half-way).
pub(crate) async fn suspend<T: 'static>(
    ctx: &Ctx,
    handler: BoxFuture<'static, Result<T, ToolError>>,
) -> Driven<Result<T, ToolError>> {
    let mut handler = Some(handler);
    std::future::poll_fn(|cx| {
        let running = handler
            .as_mut()
            .expect("polled again after it was handed over");
        match running.as_mut().poll(cx) {
            // `ToolError::retry_later`: a round with no new question, only the
            // state to come back with (rule `input-required-not-empty` allows
            // `requestState` alone).
            Poll::Ready(Err(e)) if e.is_retry_later() => Poll::Ready(Driven::Suspended),
            Poll::Ready(out) => Poll::Ready(Driven::Done(out)),
            Poll::Pending => {
                let mut leg = ctx.leg();
                leg.waker = Some(cx.waker().clone());
                if let Some(fatal) = leg.fatal.take() {
                    Poll::Ready(Driven::Fatal(fatal))
                } else if leg.into_task {
                    drop(leg);
                    let running = handler.take().expect("taken only here, once");
                    Poll::Ready(Driven::IntoTask(running))
                } else if leg.pending.is_empty() {
                    Poll::Pending
                } else {
                    Poll::Ready(Driven::Suspended)
                }
            }
        }
    })
    .await
}

struct Asking {
    keys: Vec<String>,
    answers: BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

/// *Await*: polls `handler` to its end; questions it leaves pending go to
/// `source`, and their answers wake it.
pub(crate) async fn await_answers<T, F>(
    ctx: &Ctx,
    handler: F,
    source: &dyn AnswerSource,
    precheck: Precheck<'_>,
) -> Driven<Result<T, ToolError>>
where
    F: Future<Output = Result<T, ToolError>>,
{
    let mut handler = pin!(handler);
    let mut asking: Option<Asking> = None;
    let mut rounds = 0u32;
    // Keys published so far: a round is a publication with a new question
    // (publishing the rest of a partly answered round again is not).
    let mut published = std::collections::HashSet::new();
    std::future::poll_fn(|cx| {
        loop {
            match handler.as_mut().poll(cx) {
                // No state to come back with: the caller of an awaited call
                // is told to try again later.
                Poll::Ready(Err(e)) if e.is_retry_later() => {
                    return Poll::Ready(Driven::Fatal(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "The server is busy; try again later",
                    )));
                }
                Poll::Ready(out) => return Poll::Ready(Driven::Done(out)),
                Poll::Pending => {}
            }
            let mut leg = ctx.leg();
            leg.waker = Some(cx.waker().clone());
            if let Some(fatal) = leg.fatal.take() {
                return Poll::Ready(Driven::Fatal(fatal));
            }
            if leg.pending.is_empty() {
                // Waiting on something else; a question raised later wakes us.
                asking = None;
                return Poll::Pending;
            }
            let keys: Vec<String> = leg.pending.keys().cloned().collect();
            if asking.as_ref().is_none_or(|a| a.keys != keys) {
                if keys.iter().any(|k| !published.contains(k)) {
                    rounds += 1;
                    published.extend(keys.iter().cloned());
                }
                if let Err(e) = precheck(&leg, rounds) {
                    return Poll::Ready(Driven::Fatal(e));
                }
                let questions: InputRequests = leg
                    .pending
                    .iter()
                    .map(|(k, q)| (k.clone(), q.request().clone()))
                    .collect();
                drop(leg);
                asking = Some(Asking {
                    keys,
                    answers: source.answers(questions),
                    deadline: Box::pin(tokio::time::sleep(source.question_timeout())),
                });
                leg = ctx.leg();
            }
            drop(leg);
            let current = asking.as_mut().expect("set just above when missing");
            match current.answers.as_mut().poll(cx) {
                Poll::Ready(Ok(answers)) => {
                    asking = None;
                    let mut leg = ctx.leg();
                    merge(&mut leg, answers);
                    leg.wake_askers();
                    // Poll the handler again with the answers in.
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Driven::Fatal(e)),
                Poll::Pending => {
                    if current.deadline.as_mut().poll(cx).is_ready() {
                        let secs = source.question_timeout().as_secs_f64();
                        return Poll::Ready(Driven::Fatal(
                            ErrorObject::new(
                                codes::QUESTION_TIMEOUT,
                                format!("No answer to the server's question within {secs} s"),
                            )
                            .with_data(serde_json::Value::Object(
                                JsonObject::from_iter([(
                                    "timeoutSeconds".to_owned(),
                                    serde_json::json!(secs),
                                )]),
                            )),
                        ));
                    }
                    return Poll::Pending;
                }
            }
        }
    })
    .await
}

/// Takes the answers that fit an outstanding question of their kind.
fn merge(leg: &mut Leg, answers: Vec<(String, InputResponse)>) {
    for (key, response) in answers {
        let Some(question) = leg.pending.get(&key) else {
            tracing::debug!(%key, "answer to no outstanding question ignored");
            continue;
        };
        if response.kind() != question.request().kind() {
            tracing::debug!(%key, "answer of another kind than its question ignored");
            continue;
        }
        let Ok(value) = serde_json::to_value(&response) else {
            continue;
        };
        let fingerprint = question.fingerprint().to_owned();
        leg.pending.shift_remove(&key);
        leg.answers
            .insert(key, StoredAnswer::decoded(fingerprint, value, response));
    }
}
