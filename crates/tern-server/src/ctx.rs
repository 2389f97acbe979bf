//! [`Ctx`]: what a handler knows about its request and how it talks back
//! (questions, progress, log messages, cancellation).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::Poll;
use std::time::{Duration, Instant};

use indexmap::IndexMap;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::logging::{LoggingLevel, LoggingMessageNotificationParams};
use tern_protocol::mrtr::InputRequest;
use tern_protocol::progress::ProgressNotificationParams;
use tern_protocol::{
    ClientCapabilities, Implementation, RequestId, RequestMeta, ServerNotification,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::engine::payload::StoredAnswer;
use crate::error::AskError;
use crate::future::BoxFuture;
use crate::ids::CallId;
use crate::principal::Principal;
use crate::question::{Question, declared, required_capabilities};
use crate::rendered::Rendered;

/// Where a request's notifications go: the transport's stream for that
/// request (stdio's output, or the POST's SSE stream).
///
/// The queue holds boxes: tokio's channel allocates its slots 32 at a time
/// and a `ServerNotification` is about 200 bytes, so a queue of the values
/// themselves held 6 KiB for each open stream, most of them never written
/// (a held SSE stream sends a notification now and then). A box costs one
/// allocation per notification sent instead.
#[derive(Debug, Clone)]
pub struct Notifier(mpsc::Sender<Box<ServerNotification>>);

impl Notifier {
    /// A notifier and the receiving end the transport drains. Sends never
    /// wait: when `capacity` notifications are queued, more are dropped (and
    /// logged), so a slow client cannot stall a handler.
    pub fn channel(capacity: usize) -> (Self, Notifications) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self(tx), Notifications(rx))
    }

    pub(crate) fn send(&self, notification: ServerNotification) -> bool {
        match self.0.try_send(Box::new(notification)) {
            Ok(()) => true,
            Err(e) => {
                tracing::debug!(error = %e, "notification dropped");
                false
            }
        }
    }
}

/// The receiving end of a [`Notifier`]: the notifications one request
/// raised, in order, for its transport to write. Also a
/// [`futures_core::Stream`].
#[derive(Debug)]
pub struct Notifications(mpsc::Receiver<Box<ServerNotification>>);

impl Notifications {
    /// The next notification; `None` once every [`Notifier`] is gone and the
    /// queue is drained.
    pub async fn recv(&mut self) -> Option<ServerNotification> {
        self.0.recv().await.map(|n| *n)
    }

    /// The next notification already queued, without waiting.
    pub fn try_recv(&mut self) -> Option<ServerNotification> {
        self.0.try_recv().ok().map(|n| *n)
    }

    /// Polls for the next notification.
    pub fn poll_recv(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<ServerNotification>> {
        self.0.poll_recv(cx).map(|n| n.map(|n| *n))
    }
}

impl futures_core::Stream for Notifications {
    type Item = ServerNotification;

    fn poll_next(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<ServerNotification>> {
        self.0.poll_recv(cx).map(|n| n.map(|n| *n))
    }
}

/// A question asked in this leg without a usable answer: its request as
/// rendered once (JSON and fingerprint).
#[derive(Debug, Clone)]
pub(crate) struct PendingQuestion {
    pub(crate) rendered: Arc<Rendered>,
}

impl PendingQuestion {
    pub(crate) fn fingerprint(&self) -> &str {
        &self.rendered.fingerprint
    }

    pub(crate) fn request(&self) -> &InputRequest {
        &self.rendered.request
    }
}

/// The mutable state of one leg of a request.
#[derive(Default)]
pub(crate) struct Leg {
    pub(crate) answers: BTreeMap<String, StoredAnswer>,
    pub(crate) pending: IndexMap<String, PendingQuestion>,
    pub(crate) memo: BTreeMap<String, Value>,
    pub(crate) fatal: Option<ErrorObject>,
    /// How often each key was answered in this leg: asking a key again after
    /// that (a handler that loops until an answer suits it) is a new question.
    pub(crate) asked: HashMap<String, u32>,
    /// The runner's waker: woken when a question is raised outside the
    /// handler's own poll (from a spawned task holding a `Ctx`).
    pub(crate) waker: Option<std::task::Waker>,
    /// The wakers of `ask` futures waiting for an answer: woken when the
    /// *await* strategy brings answers in.
    pub(crate) askers: Vec<std::task::Waker>,
    /// The handler called [`Ctx::into_task`] and waits for the runner to
    /// turn the call into a task.
    pub(crate) into_task: bool,
}

impl std::fmt::Debug for Leg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys only: answers and memoised values are the caller's data.
        f.debug_struct("Leg")
            .field("answers", &self.answers.keys().collect::<Vec<_>>())
            .field("pending", &self.pending.keys().collect::<Vec<_>>())
            .field("memo", &self.memo.keys().collect::<Vec<_>>())
            .field("fatal", &self.fatal.as_ref().map(|e| e.code))
            .finish_non_exhaustive()
    }
}

impl Leg {
    /// Wakes every `ask` waiting for an answer (answers came in).
    pub(crate) fn wake_askers(&mut self) {
        for waker in self.askers.drain(..) {
            waker.wake();
        }
    }
}

/// The fingerprint of an answer given without a `requestState` (see
/// [`crate::ToolDef::accept_unsealed_answers`]): it counts for whichever question
/// is asked under its key, and is then bound to it.
pub(crate) const UNBOUND: &str = "*";

/// Where a task's `ctx.progress` goes instead of notifications (ext-tasks:
/// no progress or log notifications on tasks): its `statusMessage`.
pub(crate) trait TaskSink: Send + Sync {
    /// The task's status message is now `message`.
    fn status(&self, message: String);
    /// The task's id.
    fn task_id(&self) -> &str;
    /// Which run of the task this is: 0 the first, then one more each time
    /// it was taken again from its journal.
    fn attempt(&self) -> u32 {
        0
    }
    /// A durable task journals its `ctx.once` steps through this sink
    /// ([`Self::step_started`], [`Self::step_done`]).
    fn durable(&self) -> bool {
        false
    }
    /// Step `name` is about to run: recorded (fenced) before it does.
    /// `Err`: it must not run (the runner lost its lease, or is stopping),
    /// with the error the task ends with.
    fn step_started(
        &self,
        name: &str,
        retry_safe: bool,
    ) -> BoxFuture<'static, Result<(), ErrorObject>> {
        let _ = (name, retry_safe);
        Box::pin(std::future::ready(Ok(())))
    }
    /// Step `name` ran and returned `value`: recorded (fenced).
    fn step_done(&self, name: &str, value: Value) -> BoxFuture<'static, Result<(), ErrorObject>> {
        let _ = (name, value);
        Box::pin(std::future::ready(Ok(())))
    }
    /// The handler did something no recovery can repeat (it read the raw
    /// access token): the task is no longer recoverable.
    fn unrecoverable(&self, why: &'static str) {
        let _ = why;
    }
}

#[derive(Debug, Default)]
struct ProgressState {
    last: Option<f64>,
    sent_at: Option<Instant>,
}

struct Inner {
    request_id: RequestId,
    call_id: CallId,
    round: u32,
    memo_limit: usize,
    meta: Arc<RequestMeta>,
    principal: Principal,
    access_token: Option<Arc<crate::auth::AccessToken>>,
    server: Arc<Implementation>,
    notifier: Option<Notifier>,
    cancel: CancellationToken,
    progress_interval: Duration,
    leg: Mutex<Leg>,
    progress: Mutex<ProgressState>,
    /// This leg may become a task (see [`Ctx::into_task`]).
    can_task: bool,
    /// Set once the call runs as a task.
    task: std::sync::OnceLock<Arc<dyn TaskSink>>,
    /// The handler read [`Ctx::access_token`]: a durable task made of this
    /// call cannot be recovered (the raw token is never kept).
    token_read: std::sync::atomic::AtomicBool,
}

/// The context of one request to a tool, prompt or resource handler.
///
/// A handler may run more than once for one logical call (once per MRTR
/// round): everything before its last question must be repeatable, or wrapped
/// in [`Ctx::once`]. The same handler also runs under the *await* strategy
/// (a task, a 2025-11-25 session), where it runs once and `ask` waits for the
/// answer; `ask`, `ask_all`, `once` and `can_ask` mean the same under both.
///
/// `Debug` shows the request id, call id and round, never answers, memoised
/// values or the principal.
#[derive(Clone)]
pub struct Ctx {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Ctx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ctx")
            .field("request_id", &self.inner.request_id)
            .field("call_id", &self.inner.call_id)
            .field("round", &self.inner.round)
            .finish_non_exhaustive()
    }
}

pub(crate) struct CtxParts {
    pub(crate) request_id: RequestId,
    pub(crate) call_id: CallId,
    pub(crate) round: u32,
    /// The most bytes the memo may take (half the state's size cap).
    pub(crate) memo_limit: usize,
    pub(crate) meta: Arc<RequestMeta>,
    pub(crate) principal: Principal,
    pub(crate) access_token: Option<Arc<crate::auth::AccessToken>>,
    pub(crate) server: Arc<Implementation>,
    pub(crate) notifier: Option<Notifier>,
    pub(crate) cancel: CancellationToken,
    pub(crate) progress_interval: Duration,
    pub(crate) can_task: bool,
    pub(crate) leg: Leg,
}

enum Lookup<T> {
    Answered(T),
    Missing(AskError),
    Suspend,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Ctx {
    pub(crate) fn new(parts: CtxParts) -> Self {
        Self {
            inner: Arc::new(Inner {
                request_id: parts.request_id,
                call_id: parts.call_id,
                round: parts.round,
                memo_limit: parts.memo_limit,
                meta: parts.meta,
                principal: parts.principal,
                access_token: parts.access_token,
                server: parts.server,
                notifier: parts.notifier,
                cancel: parts.cancel,
                progress_interval: parts.progress_interval,
                leg: Mutex::new(parts.leg),
                progress: Mutex::default(),
                can_task: parts.can_task,
                task: std::sync::OnceLock::new(),
                token_read: std::sync::atomic::AtomicBool::new(false),
            }),
        }
    }

    pub(crate) fn leg(&self) -> MutexGuard<'_, Leg> {
        lock(&self.inner.leg)
    }

    pub(crate) fn take_leg(&self) -> Leg {
        std::mem::take(&mut *self.leg())
    }

    /// The JSON-RPC id of this leg (each MRTR round has its own, rule
    /// `retry-new-id`).
    pub fn request_id(&self) -> &RequestId {
        &self.inner.request_id
    }

    /// The logical call this leg belongs to: the same in every round, on
    /// every replica. Use it as the idempotency key of a downstream effect.
    pub fn call_id(&self) -> CallId {
        self.inner.call_id
    }

    /// The round of this leg: 1 for the first leg of a call, then one more
    /// for each `input_required` the call went through.
    pub fn round(&self) -> u32 {
        self.inner.round
    }

    /// The authenticated caller.
    pub fn principal(&self) -> &Principal {
        &self.inner.principal
    }

    /// The request's verified access token (issuer, subject, scopes,
    /// claims), when the server is protected by OAuth and its resource
    /// server shows tokens to handlers
    /// ([`crate::auth::ResourceServer::token_in_context`]); `None`
    /// otherwise. Each round of a call sees its own request's token.
    ///
    /// A durable task's handler that reads it cannot be recovered
    /// ([`crate::ToolDef::durable`]): a task never keeps the raw token, so a
    /// recovered run could not see it. Its task fails as a lapsed one
    /// always did.
    pub fn access_token(&self) -> Option<&crate::auth::AccessToken> {
        if self.inner.access_token.is_some() {
            self.inner
                .token_read
                .store(true, std::sync::atomic::Ordering::Relaxed);
            if let Some(sink) = self.inner.task.get() {
                sink.unrecoverable("the handler read the request's access token");
            }
        }
        self.inner.access_token.as_deref()
    }

    /// The handler read [`Self::access_token`] (and there was one).
    pub(crate) fn token_read(&self) -> bool {
        self.inner
            .token_read
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The capabilities this request declared (never inferred from earlier
    /// requests).
    pub fn client_capabilities(&self) -> &ClientCapabilities {
        &self.inner.meta.client_capabilities
    }

    /// The client's self-description, if sent (display and logs only).
    pub fn client_info(&self) -> Option<&Implementation> {
        self.inner.meta.client_info.as_deref()
    }

    /// The request's whole `_meta`.
    pub fn meta(&self) -> &RequestMeta {
        &self.inner.meta
    }

    /// This server's self-description.
    pub fn server_info(&self) -> &Implementation {
        &self.inner.server
    }

    /// The request declared what `question` needs (rule `ask-declared-only`),
    /// so asking it will not end the request with `-32021`.
    pub fn can_ask<Q: Question>(&self, question: &Q) -> bool {
        declared(question.request(), self.client_capabilities())
    }

    /// Asks the client `question`. Returns at once with the answer when this
    /// round carries one for exactly this question. Otherwise, under MRTR, the
    /// request is answered with `input_required` and the handler runs again,
    /// from the top, when the client retries with the answer; under the
    /// *await* strategy the question goes to whoever drives the call and this
    /// future resolves when the answer comes.
    ///
    /// Questions raised in the same poll (`tokio::join!`, [`Ctx::ask_all`])
    /// travel in one round. Fails with [`AskError`] when the request did not
    /// declare the capability the question needs; propagated with `?`, that
    /// ends the request with `-32021`.
    ///
    /// ```
    /// use serde::Deserialize;
    /// use tern_server::{Answer, Ctx, Elicit, ToolError};
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Confirm {
    ///     /// Delete it for good.
    ///     confirm: bool,
    /// }
    ///
    /// async fn delete_branch(ctx: Ctx) -> Result<String, ToolError> {
    ///     let question = Elicit::<Confirm>::form("Delete the branch `old`? This cannot be undone.");
    ///     match ctx.ask(question).await? {
    ///         Answer::Accept(Confirm { confirm: true }) => Ok("Deleted.".into()),
    ///         // Declined, cancelled, or "no": the handler decides.
    ///         _ => Ok("Kept.".into()),
    ///     }
    /// }
    /// # let _ = tern_server::ToolDef::new("delete_branch", "Deletes a branch", delete_branch).elicits::<Confirm>();
    /// ```
    pub async fn ask<Q: Question>(&self, question: Q) -> Result<Q::Output, AskError> {
        std::future::poll_fn(|cx| match self.lookup(&question, question.key()) {
            Lookup::Answered(out) => Poll::Ready(Ok(out)),
            Lookup::Missing(e) => Poll::Ready(Err(e)),
            Lookup::Suspend => {
                self.leg().askers.push(cx.waker().clone());
                Poll::Pending
            }
        })
        .await
    }

    /// Asks several questions of one type in one round; the answers come back
    /// in order. Questions whose derived keys are the same (several forms of
    /// one type) are numbered in order: `confirm`, `confirm_2`, …; keys set
    /// with `.key(...)` are kept as they are.
    ///
    /// ```
    /// use serde::Deserialize;
    /// use tern_server::{Answer, Ctx, Elicit, ToolError};
    ///
    /// #[derive(Deserialize, schemars::JsonSchema)]
    /// struct Approve {
    ///     /// Approve this step.
    ///     approve: bool,
    /// }
    ///
    /// async fn deploy(ctx: Ctx) -> Result<String, ToolError> {
    ///     let steps = ["migrate the database", "switch traffic"];
    ///     // One round, two questions: keys `approve` and `approve_2`.
    ///     let answers = ctx
    ///         .ask_all(steps.iter().map(|s| Elicit::<Approve>::form(format!("Approve: {s}?"))))
    ///         .await?;
    ///     let approved = answers
    ///         .iter()
    ///         .filter(|a| matches!(a, Answer::Accept(Approve { approve: true })))
    ///         .count();
    ///     Ok(format!("{approved} of {} steps approved", steps.len()))
    /// }
    /// # let _ = tern_server::ToolDef::new("deploy", "Deploys", deploy).elicits::<Approve>();
    /// ```
    pub async fn ask_all<Q: Question>(
        &self,
        questions: impl IntoIterator<Item = Q>,
    ) -> Result<Vec<Q::Output>, AskError> {
        let questions: Vec<Q> = questions.into_iter().collect();
        let mut seen: HashMap<&str, usize> = HashMap::new();
        let keys: Vec<String> = questions
            .iter()
            .map(|q| {
                if q.explicit_key() {
                    return q.key().to_owned();
                }
                let n = seen.entry(q.key()).or_insert(0);
                *n += 1;
                if *n == 1 {
                    q.key().to_owned()
                } else {
                    format!("{}_{n}", q.key())
                }
            })
            .collect();
        if let Some(q) = questions.iter().find(|q| !self.can_ask(*q)) {
            let (required, what) = required_capabilities(q.request());
            return Err(AskError::missing(required, what));
        }
        let mut answers: Vec<Option<Q::Output>> = questions.iter().map(|_| None).collect();
        std::future::poll_fn(|cx| {
            let mut waiting = false;
            for ((q, key), slot) in questions.iter().zip(&keys).zip(answers.iter_mut()) {
                if slot.is_some() {
                    continue;
                }
                match self.lookup(q, key) {
                    Lookup::Answered(out) => *slot = Some(out),
                    Lookup::Missing(e) => return Poll::Ready(Err(e)),
                    Lookup::Suspend => waiting = true,
                }
            }
            if waiting {
                self.leg().askers.push(cx.waker().clone());
                Poll::Pending
            } else {
                Poll::Ready(Ok(()))
            }
        })
        .await?;
        Ok(answers.into_iter().flatten().collect())
    }

    fn lookup<Q: Question>(&self, question: &Q, base: &str) -> Lookup<Q::Output> {
        if let Some(err) = question.invalid() {
            tracing::error!(%err, "a handler asked an invalid form");
            self.leg().fatal = Some(ErrorObject::new(code::INTERNAL_ERROR, "Internal error"));
            return Lookup::Suspend;
        }
        let request = question.request();
        if !declared(request, self.client_capabilities()) {
            let (required, what) = required_capabilities(request);
            return Lookup::Missing(AskError::missing(required, what));
        }
        let rendered = question.rendered();
        let fingerprint = rendered.fingerprint.as_str();
        let mut leg = self.leg();
        let base = base.to_owned();
        // Asking a key again after it was answered in this leg (a handler
        // looping until an answer suits it, or asking one form type twice)
        // is a new question: `key#2`, … So a key never names two questions
        // over a call's life, a task's included.
        let answered = leg.asked.get(&base).copied().unwrap_or(0);
        let key = if answered == 0 {
            base.clone()
        } else {
            format!("{base}#{}", answered + 1)
        };
        if let Some(answer) = leg.answers.get_mut(&key) {
            if answer.fingerprint == fingerprint || answer.fingerprint == UNBOUND {
                let decoded = answer
                    .take_response(request.kind())
                    .map_err(|e| e.to_string())
                    .and_then(|response| question.decode(response));
                match decoded {
                    Ok(out) => {
                        if answer.fingerprint != fingerprint {
                            fingerprint.clone_into(&mut answer.fingerprint);
                        }
                        *leg.asked.entry(base).or_insert(0) += 1;
                        return Lookup::Answered(out);
                    }
                    // The answer does not satisfy the question: ask again
                    // (rule `answers-missing-ask-again`).
                    Err(reason) => tracing::debug!(%key, %reason, "answer refused; asking again"),
                }
            }
            leg.answers.remove(&key);
        }
        if let Some(existing) = leg.pending.get(&key) {
            if existing.fingerprint() != fingerprint {
                // A handler's mistake, named so its author can mend it.
                let message = format!(
                    "Two questions of one round share the key `{key}`: {} and {}; give one of them its own .key(...)",
                    crate::question::describe(existing.request()),
                    crate::question::describe(request)
                );
                tracing::error!(%key, "{message}");
                leg.fatal = Some(ErrorObject::new(code::INTERNAL_ERROR, message));
            }
            return Lookup::Suspend;
        }
        leg.pending.insert(
            key,
            PendingQuestion {
                rendered: Arc::clone(rendered),
            },
        );
        if let Some(waker) = leg.waker.take() {
            waker.wake();
        }
        Lookup::Suspend
    }

    /// Runs `step` once per logical call: its result is kept in the sealed
    /// `requestState` and reused when the handler runs again in a later round.
    /// Use it for work before a question that must not repeat (creating an id,
    /// reserving something). `T` travels to the client encrypted; keep it
    /// small: the memo counts against the state's size cap (half of it), and
    /// a leg whose memo outgrows it ends with `-32603`.
    ///
    /// The value always round-trips through serde, also in the round that
    /// ran the step, so every round (and the *await* strategy, where the
    /// handler runs once) sees the same value.
    ///
    /// What "once" can promise: a state is a snapshot of one round, and the
    /// client holds every state it was given. Replaying an *earlier* state
    /// after a newer one re-runs the handler from that earlier round: steps
    /// memoised by then are reused, steps memoised only in later rounds run
    /// again. With a replay store and the handler marked
    /// [`crate::ToolDef::single_use`] or [`crate::ToolDef::idempotent_retry`],
    /// each state redeems once, so a state replayed a second time never runs
    /// anything; without one, nothing stops a client from replaying a state
    /// (within its expiry and the call's lifetime). Effects that must happen
    /// once per call belong in the last round of a guarded handler, or take
    /// [`Ctx::call_id`] as a downstream idempotency key.
    ///
    /// In a durable task ([`crate::ToolDef::durable`]) each result is also
    /// written to the task's journal, and a recovered run gets it without
    /// running the step. A step that started and whose result was not
    /// recorded (its runner died inside it) has an unknown outcome: the task
    /// then ends `failed` naming the step, never a silent second run; use
    /// [`Self::once_retry_safe`] for a step that may run again.
    ///
    /// ```
    /// use tern_server::{Answer, Ctx, Elicit, ToolError};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Name {
    ///     /// The ticket's title.
    ///     title: String,
    /// }
    ///
    /// async fn open_ticket(ctx: Ctx) -> Result<String, ToolError> {
    ///     // Runs in the first leg; the later leg (after the question) reads the
    ///     // memo from the sealed state instead of opening a second ticket.
    ///     let id: u64 = ctx.once("open", async { 4242 }).await;
    ///     let Answer::Accept(Name { title }) = ctx.ask(Elicit::<Name>::form("Title?")).await? else {
    ///         return Ok(format!("Ticket {id} opened without a title."));
    ///     };
    ///     Ok(format!("Ticket {id}: {title}"))
    /// }
    /// # let _ = tern_server::ToolDef::new("open_ticket", "Opens a ticket", open_ticket).elicits::<Name>();
    /// ```
    pub async fn once<T, F>(&self, name: &str, step: F) -> T
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = T>,
    {
        self.once_inner(name, false, step).await
    }

    /// [`Self::once`] for a step that may safely run again (an idempotent
    /// effect, e.g. one that carries its own idempotency key): when a
    /// durable task's runner dies inside it, the recovered run runs it
    /// again instead of ending the task `failed`. Outside a durable task it
    /// is [`Self::once`].
    pub async fn once_retry_safe<T, F>(&self, name: &str, step: F) -> T
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = T>,
    {
        self.once_inner(name, true, step).await
    }

    async fn once_inner<T, F>(&self, name: &str, retry_safe: bool, step: F) -> T
    where
        T: Serialize + DeserializeOwned,
        F: Future<Output = T>,
    {
        let remembered = self.leg().memo.get(name).cloned();
        if let Some(value) = remembered {
            match T::deserialize(value) {
                Ok(t) => return t,
                Err(e) => {
                    tracing::warn!(%name, error = %e, "memoised step no longer decodes; running it again");
                }
            }
        }
        let journal = self.inner.task.get().filter(|s| s.durable()).cloned();
        if let Some(sink) = &journal
            && let Err(e) = sink.step_started(name, retry_safe).await
        {
            return self.stop_with(e).await;
        }
        let out = step.await;
        let value = match serde_json::to_value(&out) {
            Ok(value) => value,
            Err(e) => {
                tracing::warn!(%name, error = %e, "step result not serialisable; it will run again");
                return out;
            }
        };
        {
            let mut leg = self.leg();
            leg.memo.insert(name.to_owned(), value.clone());
            let mut counter = LenCounter(0);
            let _ = serde_json::to_writer(&mut counter, &leg.memo);
            if counter.0 > self.inner.memo_limit {
                tracing::error!(%name, bytes = counter.0, "memoised steps outgrew the state's size cap");
                leg.fatal = Some(ErrorObject::new(
                    code::INTERNAL_ERROR,
                    "Internal error: the request's state grew too large",
                ));
            }
        }
        if let Some(sink) = &journal
            && let Err(e) = sink.step_done(name, value.clone()).await
        {
            return self.stop_with(e).await;
        }
        T::deserialize(value).unwrap_or(out)
    }

    /// Ends the leg with `error` (its runner reads it) and never resolves.
    async fn stop_with<T>(&self, error: ErrorObject) -> T {
        let waker = {
            let mut leg = self.leg();
            leg.fatal = Some(error);
            leg.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        std::future::pending().await
    }

    /// Turns this call into a task (Tasks extension), when it can be one:
    /// the tool declared [`crate::ToolDef::task`] support, the request
    /// declared the extension, and the call is an MRTR request. The request
    /// is then answered with `CreateTaskResult` (the task stored first) and
    /// this future resolves, in a server-owned task, with `true`: from here
    /// on questions are published in the task's `inputRequests` and answered
    /// with `tasks/update`, [`Self::progress`] sets its `statusMessage`,
    /// [`Self::log`] sends nothing, and [`Self::cancelled`] fires on
    /// `tasks/cancel` instead of the request's disconnect. The call never
    /// goes back to MRTR. Resolves at once with `false` when the call cannot
    /// be a task (it goes on inline), and with `true` when it already is one.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tern_server::{Ctx, MemoryTaskStore, Server, TaskSupport, ToolDef, ToolError};
    ///
    /// async fn rebuild_index(ctx: Ctx) -> Result<String, ToolError> {
    ///     // From here on the client polls the task; the request has its answer.
    ///     let as_task = ctx.into_task().await;
    ///     for shard in 1..=4 {
    ///         ctx.progress(f64::from(shard), Some(4.0), Some(&format!("shard {shard} of 4")));
    ///     }
    ///     Ok(format!("Index rebuilt (as a task: {as_task})."))
    /// }
    ///
    /// let server = Server::builder("search", "1.0.0")
    ///     .tool(ToolDef::new("rebuild_index", "Rebuilds the index", rebuild_index).task(TaskSupport::Optional))
    ///     .task_store(Arc::new(MemoryTaskStore::new()))
    ///     .build()?;
    /// assert!(server.serves("tools/call"));
    /// # Ok::<(), tern_server::BuildError>(())
    /// ```
    pub async fn into_task(&self) -> bool {
        if self.is_task() {
            return true;
        }
        if !self.inner.can_task {
            return false;
        }
        std::future::poll_fn(|cx| {
            if self.is_task() {
                return Poll::Ready(true);
            }
            let mut leg = self.leg();
            leg.into_task = true;
            leg.askers.push(cx.waker().clone());
            if let Some(waker) = leg.waker.take() {
                waker.wake();
            }
            Poll::Pending
        })
        .await
    }

    /// The call runs as a task.
    pub fn is_task(&self) -> bool {
        self.inner.task.get().is_some()
    }

    /// The id of the task this call runs as (`None` before
    /// [`Self::into_task`], or when the call is not a task): a downstream
    /// idempotency key that every run of a durable task shares. Like the id
    /// itself, a credential for an anonymous task: keep it out of logs.
    pub fn task_id(&self) -> Option<&str> {
        self.inner.task.get().map(|s| s.task_id())
    }

    /// Which run of a durable task this is ([`crate::ToolDef::durable`]): 0
    /// the first (and outside a task), then one more each time the task was
    /// taken again after its runner stopped. A handler must not branch on it
    /// around its `ctx.once` steps (every run must reach the same ones); a
    /// test hook or a log line may.
    pub fn attempt(&self) -> u32 {
        self.inner.task.get().map_or(0, |s| s.attempt())
    }

    /// The runner turned the call into a task: `into_task` resolves.
    pub(crate) fn become_task(&self, sink: Arc<dyn TaskSink>) {
        let _ = self.inner.task.set(sink);
        let mut leg = self.leg();
        leg.into_task = false;
        leg.wake_askers();
    }

    /// Reports progress, when the request asked for it with a `progressToken`.
    /// Inside a task it sets the task's `statusMessage` (the message, or
    /// `progress/total`) instead, and bumps its `lastUpdatedAt`.
    /// Values must increase; a value not above the last one sent is dropped,
    /// and so are updates closer together than the server's progress interval
    /// (except the one that reaches `total`). Returns whether it was sent.
    pub fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) -> bool {
        if let Some(sink) = self.inner.task.get() {
            if self.is_cancelled() || !progress.is_finite() {
                return false;
            }
            sink.status(match (message, total) {
                (Some(m), _) => m.to_owned(),
                (None, Some(t)) => format!("{progress}/{t}"),
                (None, None) => format!("{progress}"),
            });
            return true;
        }
        let (Some(token), Some(notifier)) = (&self.inner.meta.progress_token, &self.inner.notifier)
        else {
            return false;
        };
        // Progress › Progress Flow: values must increase; NaN and infinities
        // cannot.
        if self.is_cancelled() || !progress.is_finite() || total.is_some_and(|t| !t.is_finite()) {
            return false;
        }
        let mut state = lock(&self.inner.progress);
        if state.last.is_some_and(|last| progress <= last) {
            return false;
        }
        let now = Instant::now();
        let finishing = total.is_some_and(|t| progress >= t);
        if !finishing
            && state
                .sent_at
                .is_some_and(|at| now.duration_since(at) < self.inner.progress_interval)
        {
            return false;
        }
        let sent = notifier.send(ServerNotification::Progress(ProgressNotificationParams {
            progress_token: token.clone(),
            progress,
            total,
            message: message.map(str::to_owned),
            meta: None,
        }));
        if sent {
            state.last = Some(progress);
            state.sent_at = Some(now);
        }
        sent
    }

    /// Sends a log message to the client (deprecated logging, SEP-2577), only
    /// when the request set a log level at or below `level`. Returns whether it
    /// was sent.
    /// Inside a task nothing is sent (ext-tasks).
    ///
    /// Deprecated as sampling and roots are: MCP 2026-07-28 leaves logs to
    /// the server's own channels. Write them to standard error (over stdio
    /// the client may show it) or with `tracing`, exported by OpenTelemetry
    /// where you collect them; the first use per process also logs a
    /// warning saying so.
    #[deprecated(
        note = "logging to the client is deprecated in MCP 2026-07-28 (SEP-2577); log to standard error or with tracing / OpenTelemetry"
    )]
    pub fn log(&self, level: LoggingLevel, logger: Option<&str>, data: impl Serialize) -> bool {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                "this server logs to the client (Ctx::log), deprecated by SEP-2577: log to standard error or with tracing / OpenTelemetry"
            );
        });
        if self.is_task() {
            return false;
        }
        let (Some(min), Some(notifier)) = (self.inner.meta.log_level, &self.inner.notifier) else {
            return false;
        };
        if level < min || self.is_cancelled() {
            return false;
        }
        let Ok(data) = serde_json::to_value(data) else {
            return false;
        };
        notifier.send(ServerNotification::LoggingMessage(
            LoggingMessageNotificationParams {
                level,
                logger: logger.map(str::to_owned),
                data,
                meta: None,
            },
        ))
    }

    /// Resolves when the request is cancelled (the client disconnected, or
    /// sent `notifications/cancelled`); inside a task, when `tasks/cancel`
    /// arrives (the creating request's disconnect no longer counts). Nothing more is written for the
    /// request after that. An unguarded handler's future is dropped right
    /// after (use this from spawned cleanup work); a guarded one (marked
    /// `single_use` or `idempotent_retry`, on a leg that presented a
    /// `requestState`) keeps running to its end or its hard deadline, so
    /// that its outcome is stored for the retry: it may use this to hurry.
    pub async fn cancelled(&self) {
        self.inner.cancel.cancelled().await;
    }

    /// The request has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.inner.cancel.is_cancelled()
    }
}

/// Counts the bytes a serialiser writes.
pub(crate) struct LenCounter(pub(crate) usize);

impl std::io::Write for LenCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
