//! Creating a task from a running leg, and running its body to its end
//! under a lease.
//!
//! The leg runner hands over the handler's still-pending future
//! (`Driven::IntoTask`); [`Tasks::start`] stores the record (durably,
//! before `CreateTaskResult` is sent) and spawns [`Tasks::drive`], which
//! keeps polling that same future under the *await* strategy with
//! [`Answers`] as its [`AnswerSource`]: questions go into the record's
//! `inputRequests`, answers come from the record (written by
//! `tasks/update`). Every write of the runner is fenced by its lease token:
//! a runner that lost its lease (it lapsed and a reader marked the task
//! `failed`) writes nothing more and stops its body.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::mrtr::{InputKind, InputResponse};
use tern_protocol::task::{CreateTaskResult, Task, TaskStatus};
use tern_protocol::{ClientCapabilities, InputRequests};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

use super::{
    Created, Lease, Local, TaskQuota, TaskRecord, Tasks, end, hex, iso8601, ms, owner_of,
    runner_gone, store_failed,
};
use crate::ctx::{Ctx, TaskSink};
use crate::engine::runner::FinishLeg;
use crate::engine::strategy::{self, AnswerSource, Driven};
use crate::engine::{CallId, Engine, random_bytes};
use crate::error::{ToolError, codes};
use crate::json::{Json, to_json};
use crate::principal::Principal;
use crate::replay::BoxFuture;

/// Who creates the task.
#[derive(Debug)]
pub(crate) struct StartSpec {
    pub(crate) call_id: CallId,
    pub(crate) principal: Principal,
    /// The transport's peer ([`crate::CallContext::peer`]): an anonymous
    /// caller's tasks count against its peer's quota.
    pub(crate) peer: Option<Arc<str>>,
    pub(crate) capabilities: ClientCapabilities,
    /// A durable tool's call: its task keeps a journal.
    pub(crate) durable: Option<super::durable::Seed>,
}

/// The wire view of a record (`Task`).
pub(crate) fn task_view(r: &TaskRecord) -> Task {
    Task {
        task_id: r.task_id.clone(),
        status: r.status,
        status_message: r.status_message.clone(),
        created_at: iso8601(r.created_at),
        last_updated_at: iso8601(r.last_updated_at),
        ttl_ms: r.ttl_ms.map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
        poll_interval_ms: r
            .poll_interval_ms
            .map(|t| i64::try_from(t).unwrap_or(i64::MAX)),
    }
}

/// The runner that holds `token` may still write `record`.
fn holds(record: &TaskRecord, token: &str) -> bool {
    !record.status.is_terminal() && record.lease.as_ref().is_some_and(|l| l.token == token)
}

impl Tasks {
    /// Stores a new task for the call and starts its runner; a duplicate of
    /// the creating retry gets the existing task (and `body` is dropped).
    pub(crate) async fn start<T: Send + 'static>(
        self: &Arc<Self>,
        engine: Arc<Engine>,
        spec: StartSpec,
        ctx: Ctx,
        cancel: CancellationToken,
        body: BoxFuture<'static, Result<T, ToolError>>,
        finish: FinishLeg<T>,
    ) -> Result<Json, ErrorObject> {
        let now = self.now_ms();
        let owner = owner_of(&spec.principal);
        let quota_key = match owner {
            Some(_) => None,
            None => super::peer_quota_key(spec.peer.as_deref()),
        };
        let ttl = ms(self.config.ttl);
        let token = hex(&random_bytes::<16>());
        let record = TaskRecord {
            // S: task ids MUST be unguessable: 128 bits from the OS CSPRNG.
            task_id: hex(&random_bytes::<16>()),
            key: format!("{}/{}", owner.as_deref().unwrap_or("-"), spec.call_id),
            owner,
            quota_key,
            version: 1,
            status: TaskStatus::Working,
            status_message: None,
            created_at: now,
            last_updated_at: now,
            ttl_ms: Some(ttl),
            expires_at: Some(now + ttl),
            poll_interval_ms: Some(ms(self.config.poll_interval)),
            capabilities: spec.capabilities,
            input_requests: InputRequests::new(),
            answers: std::collections::BTreeMap::new(),
            used_keys: std::collections::BTreeSet::new(),
            result: None,
            error: None,
            result_bytes: super::RECORD_CHARGE,
            cancel_requested: false,
            lease: Some(Lease::new(token.clone(), now + ms(self.config.lease))),
            journal: None,
        };
        let mut record = record;
        let durable = spec.durable.is_some();
        if let Some(seed) = &spec.durable {
            let journal = {
                let leg = ctx.leg();
                super::durable::seed(
                    &engine,
                    &record,
                    seed,
                    spec.call_id,
                    &spec.principal,
                    &leg,
                    ctx.token_read(),
                )?
            };
            let max = self.config.max_journal_bytes;
            if super::durable::journal_bytes(&journal) > max {
                return Err(ErrorObject::new(
                    codes::STORE_FULL,
                    format!("The task's journal would be larger than the {max} bytes kept"),
                ));
            }
            record.result_bytes = super::RECORD_CHARGE + super::durable::journal_bytes(&journal);
            record.journal = Some(journal);
        }
        let quota = TaskQuota::new(
            self.config.max_live_per_principal,
            self.config.max_result_bytes_per_principal,
        );
        // The answer and the id first, so the record moves into the store
        // rather than being copied for them.
        let out = create_result(&record);
        let task_id = record.task_id.clone();
        let created = self
            .store
            .create(record, quota, now)
            .await
            .map_err(store_failed)?;
        match created {
            Created::New => {}
            Created::Existing(existing) => {
                tracing::debug!(task_id = %existing.task_id, "duplicate of a task's creating retry");
                return Ok(create_result(&existing));
            }
            Created::OverQuota => {
                return Err(ErrorObject::new(
                    codes::STORE_FULL,
                    "Too many tasks are kept for this caller; wait for some to end or expire",
                ));
            }
        }
        // A task id is a bearer credential for an anonymous task: it goes
        // to debug-level logs only.
        tracing::info!("task created");
        self.launch(
            engine,
            task_id,
            token,
            ctx,
            cancel,
            body,
            finish,
            durable.then_some(0),
        );
        Ok(out)
    }

    /// Runs the body of task `task_id` under the lease `token` in a spawned
    /// task (a new task, or one taken again from its journal). `durable`:
    /// the task keeps a journal, and this is its run `Some(attempt)`.
    #[allow(clippy::too_many_arguments, reason = "the parts of one running task")]
    pub(crate) fn launch<T: Send + 'static>(
        self: &Arc<Self>,
        engine: Arc<Engine>,
        task_id: String,
        token: String,
        ctx: Ctx,
        cancel: CancellationToken,
        body: BoxFuture<'static, Result<T, ToolError>>,
        finish: FinishLeg<T>,
        durable: Option<u32>,
    ) {
        let (durable, attempt) = (durable.is_some(), durable.unwrap_or(0));
        let local = Arc::new(Local {
            bump: watch::Sender::new(0),
        });
        self.local
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(task_id.clone(), Arc::clone(&local));
        self.running.send_modify(|n| *n += 1);
        let tasks = Arc::clone(self);
        let span = tracing::debug_span!("task", %task_id);
        tokio::spawn(tracing::Instrument::instrument(
            async move {
                let run = Run {
                    engine,
                    task_id: &task_id,
                    token: &token,
                    local: &local,
                    durable,
                    attempt,
                };
                tasks.drive(run, ctx, cancel, body, finish).await;
                let mut locals = tasks
                    .local
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                // A later runner of the task in this process (it was taken
                // again) keeps its own.
                if locals.get(&task_id).is_some_and(|l| Arc::ptr_eq(l, &local)) {
                    locals.remove(&task_id);
                }
                drop(locals);
                tasks.running.send_modify(|n| *n = n.saturating_sub(1));
            },
            span,
        ));
    }

    /// Runs a task's body to its end and records the outcome.
    #[allow(
        clippy::too_many_arguments,
        clippy::too_many_lines,
        reason = "the parts of one running task, and its loop then its outcome, in order"
    )]
    async fn drive<T: Send + 'static>(
        self: &Arc<Self>,
        run: Run<'_>,
        ctx: Ctx,
        cancel: CancellationToken,
        body: BoxFuture<'static, Result<T, ToolError>>,
        finish: FinishLeg<T>,
    ) {
        let Run {
            engine,
            task_id,
            token,
            local,
            durable,
            attempt,
        } = run;
        let sink = Arc::new(Sink {
            task_id: task_id.to_owned(),
            attempt,
            journal: durable.then(|| Journaled {
                tasks: Arc::clone(self),
                engine: Arc::clone(&engine),
                task_id: task_id.to_owned(),
                token: token.to_owned(),
                steps: watch::Sender::new(0),
                draining: CancellationToken::new(),
            }),
            ..Sink::default()
        });
        ctx.become_task(Arc::clone(&sink) as Arc<dyn TaskSink>);
        // A question outstanding when the last runner stopped keeps its
        // wire key, and no key is reused.
        let keys = if durable {
            self.store
                .load(task_id, self.now_ms())
                .await
                .ok()
                .flatten()
                .map(|r| Keys {
                    current: r
                        .journal
                        .map(|j| j.keys.into_iter().collect())
                        .unwrap_or_default(),
                    used: r.used_keys.into_iter().collect(),
                })
                .unwrap_or_default()
        } else {
            Keys::default()
        };
        let source = Answers {
            inner: Arc::new(AnswersInner {
                tasks: Arc::clone(self),
                engine: durable.then(|| Arc::clone(&engine)),
                task_id: task_id.to_owned(),
                token: token.to_owned(),
                local: Arc::clone(local),
                cancel: cancel.clone(),
                keys: Mutex::new(keys),
            }),
        };
        let body_ctx = ctx.clone();
        let mut join = tokio::spawn(async move {
            let none = |_: &crate::ctx::Leg, _: u32| Ok(());
            strategy::await_answers(&body_ctx, body, &source, &none).await
        });
        let every = self.config.lease / 3;
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut recheck = tokio::time::interval(self.config.recheck);
        recheck.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut bumped = local.bump.subscribe();
        // Another replica's `tasks/cancel` wakes us through the store.
        let mut remote = self.store.changes();
        // The body stops once its lease may have lapsed without a renewal:
        // a sixth of the lease before the expiry last written, a margin for
        // the write's latency and the replicas' clock skew (a reader marks
        // the task `failed` on its own clock). From then on another replica
        // may read the task `failed`, so its effects must stop too.
        let hold = self.config.lease.saturating_sub(self.config.lease / 6);
        let mut deadline = tokio::time::Instant::now() + hold;
        let joined = loop {
            tokio::select! {
                joined = &mut join => break joined,
                () = tokio::time::sleep_until(deadline) => {
                    tracing::warn!("task could not renew its lease in time; its body is stopped");
                    join.abort();
                    return;
                }
                _ = renew.tick() => {
                    let started = tokio::time::Instant::now();
                    // Bounded by the deadline: a store that hangs must not
                    // hold the loop past it.
                    match tokio::time::timeout_at(deadline, self.renew(task_id, token)).await {
                        Ok(Ok(true)) => deadline = started + hold,
                        Ok(Ok(false)) => {
                            tracing::warn!("task lost its lease; its body is stopped");
                            join.abort();
                            return;
                        }
                        // The store is unreachable: keep going while the
                        // lease still holds (a blip must not kill every
                        // task); the deadline above stops the body.
                        Ok(Err(e)) => tracing::warn!(error = %e.message, "task lease renewal failed; retrying"),
                        Err(_) => {
                            tracing::warn!("task could not renew its lease in time; its body is stopped");
                            join.abort();
                            return;
                        }
                    }
                }
                _ = bumped.changed() => self.look(task_id, &cancel).await,
                () = super::announced(&mut remote, task_id) => self.look(task_id, &cancel).await,
                _ = recheck.tick() => self.look(task_id, &cancel).await,
                () = sink.changed.notified() => {
                    let message = sink.take();
                    if let Some(message) = message {
                        let _ = self.fenced(task_id, token, |r, now| {
                            r.status_message = Some(message.clone());
                            r.last_updated_at = now;
                        }).await;
                    }
                }
                () = self.shutdown.cancelled() => {
                    if let Some(j) = &sink.journal {
                        // Graceful hand-off: no new step starts; running
                        // ones finish (and are recorded) within the drain
                        // deadline, then the lease is released.
                        j.draining.cancel();
                        let mut steps = j.steps.subscribe();
                        let drained = tokio::time::timeout_at(
                            deadline.min(tokio::time::Instant::now() + self.config.drain),
                            steps.wait_for(|n| *n == 0),
                        );
                        tokio::select! {
                            joined = &mut join => break joined,
                            _ = drained => {}
                        }
                        join.abort();
                        let released = self.fenced(task_id, token, |r, now| {
                            if let Some(l) = r.lease.as_mut() {
                                l.expires_at = now;
                            }
                        }).await;
                        tracing::info!(released = matches!(released, Ok(true)), "task handed off");
                        return;
                    }
                    join.abort();
                    let error = runner_gone("the server stopped before it ended");
                    let retention = self.config.retention;
                    let _ = self.fenced(task_id, token, |r, now| {
                        end(r, now, TaskStatus::Failed, None, Some(error.clone()), Some(retention));
                    }).await;
                    return;
                }
            }
        };
        let cancelled = cancel.is_cancelled();
        let (status, result, error) = match joined {
            Ok(Driven::Done(out)) => match finish(&engine, out) {
                Ok(json) => match serde_json::from_str::<Value>(json.get()) {
                    Ok(v) if cancelled && v.get("isError") == Some(&Value::Bool(true)) => {
                        (TaskStatus::Cancelled, None, None)
                    }
                    Ok(v) => (TaskStatus::Completed, Some(v), None),
                    Err(e) => {
                        tracing::error!(error = %e, "a task's result does not decode");
                        (TaskStatus::Failed, None, Some(internal()))
                    }
                },
                Err(_) if cancelled => (TaskStatus::Cancelled, None, None),
                Err(e) => (TaskStatus::Failed, None, Some(e)),
            },
            Ok(Driven::Fatal(_)) if cancelled => (TaskStatus::Cancelled, None, None),
            Ok(Driven::Fatal(e)) => (TaskStatus::Failed, None, Some(e)),
            Ok(Driven::Suspended | Driven::IntoTask(_)) => {
                tracing::error!("a task's body suspended under the await strategy");
                (TaskStatus::Failed, None, Some(internal()))
            }
            Err(e) => {
                tracing::error!(panicked = e.is_panic(), "a task's body did not finish");
                (
                    TaskStatus::Failed,
                    None,
                    Some(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "Internal error: the task's handler panicked",
                    )),
                )
            }
        };
        let (status, result, error) = match result {
            Some(v)
                if serde_json::to_vec(&v).map_or(0, |b| b.len() as u64)
                    > self.config.max_result_bytes =>
            {
                let max = self.config.max_result_bytes;
                (
                    TaskStatus::Failed,
                    None,
                    Some(ErrorObject::new(
                        codes::STORE_FULL,
                        format!("The task's result is larger than the {max} bytes kept"),
                    )),
                )
            }
            other => (status, other, error),
        };
        let retention = self.config.retention;
        let written = self
            .fenced(task_id, token, |r, now| {
                end(
                    r,
                    now,
                    status,
                    result.clone(),
                    error.clone(),
                    Some(retention),
                );
            })
            .await;
        match written {
            Ok(true) => tracing::info!(?status, "task ended"),
            Ok(false) => {
                tracing::warn!(?status, "task ended after it lost its lease; not recorded");
            }
            Err(e) => tracing::error!(error = %e.message, "task outcome not recorded"),
        }
    }

    /// A write by the runner holding `token`; `false` when it no longer does.
    pub(crate) async fn fenced(
        &self,
        task_id: &str,
        token: &str,
        mut change: impl FnMut(&mut TaskRecord, u64),
    ) -> Result<bool, ErrorObject> {
        let done = self
            .modify_only(task_id, |r, now| {
                if !holds(r, token) {
                    return None;
                }
                change(r, now);
                Some(())
            })
            .await?;
        Ok(matches!(done, Some(Some(()))))
    }

    /// Renews the lease and keeps a running task from expiring.
    async fn renew(&self, task_id: &str, token: &str) -> Result<bool, ErrorObject> {
        let lease = ms(self.config.lease);
        let ttl = ms(self.config.ttl);
        self.fenced(task_id, token, |r, now| {
            if let Some(l) = r.lease.as_mut() {
                l.expires_at = now + lease;
            }
            // ttlMs MAY change: a running task never expires under its runner.
            if let Some(t) = r.ttl_ms
                && r.created_at + t < now + ttl
            {
                let t = now - r.created_at + ttl;
                r.ttl_ms = Some(t);
                r.expires_at = Some(r.created_at + t);
            }
        })
        .await
    }

    /// Reads the record for a cancellation written by `tasks/cancel`.
    async fn look(&self, task_id: &str, cancel: &CancellationToken) {
        if cancel.is_cancelled() {
            return;
        }
        match self.store.load(task_id, self.now_ms()).await {
            Ok(Some(r)) if r.cancel_requested => {
                tracing::info!("task cancellation requested");
                cancel.cancel();
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "task record not readable"),
        }
    }
}

fn internal() -> ErrorObject {
    ErrorObject::new(code::INTERNAL_ERROR, "Internal error")
}

fn create_result(record: &TaskRecord) -> Json {
    to_json(&CreateTaskResult::new(task_view(record)))
}

/// One running task, as [`Tasks::drive`] holds it.
struct Run<'a> {
    engine: Arc<Engine>,
    task_id: &'a str,
    token: &'a str,
    local: &'a Arc<Local>,
    durable: bool,
    attempt: u32,
}

/// `ctx.progress` inside a task: the latest message, written by the runner;
/// in a durable task, its `ctx.once` steps too.
#[derive(Default)]
struct Sink {
    task_id: String,
    attempt: u32,
    message: Mutex<Option<String>>,
    changed: Notify,
    journal: Option<Journaled>,
}

/// A durable task's journal writer.
struct Journaled {
    tasks: Arc<Tasks>,
    engine: Arc<Engine>,
    task_id: String,
    token: String,
    /// Steps running now.
    steps: watch::Sender<usize>,
    /// The server is stopping: no new step starts.
    draining: CancellationToken,
}

impl Sink {
    fn take(&self) -> Option<String> {
        self.message
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
    }
}

impl TaskSink for Sink {
    fn status(&self, message: String) {
        *self
            .message
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(message);
        self.changed.notify_one();
    }

    fn task_id(&self) -> &str {
        &self.task_id
    }

    fn attempt(&self) -> u32 {
        self.attempt
    }

    fn durable(&self) -> bool {
        self.journal.is_some()
    }

    fn step_started(
        &self,
        name: &str,
        retry_safe: bool,
    ) -> BoxFuture<'static, Result<(), ErrorObject>> {
        let Some(j) = &self.journal else {
            return Box::pin(std::future::ready(Ok(())));
        };
        let (tasks, task_id, token) = (Arc::clone(&j.tasks), j.task_id.clone(), j.token.clone());
        let (name, draining, steps) = (name.to_owned(), j.draining.clone(), j.steps.clone());
        Box::pin(async move {
            if draining.is_cancelled() {
                // Handing off: the step runs on the next runner.
                return std::future::pending().await;
            }
            steps.send_modify(|n| *n += 1);
            match tasks
                .step_started(&task_id, &token, &name, retry_safe)
                .await
            {
                Ok(true) => Ok(()),
                Ok(false) => {
                    steps.send_modify(|n| *n = n.saturating_sub(1));
                    Err(runner_gone("the task's runner lost its lease"))
                }
                Err(e) => {
                    steps.send_modify(|n| *n = n.saturating_sub(1));
                    Err(e)
                }
            }
        })
    }

    fn step_done(&self, name: &str, value: Value) -> BoxFuture<'static, Result<(), ErrorObject>> {
        let Some(j) = &self.journal else {
            return Box::pin(std::future::ready(Ok(())));
        };
        let (tasks, engine) = (Arc::clone(&j.tasks), Arc::clone(&j.engine));
        let (task_id, token, name, steps) = (
            j.task_id.clone(),
            j.token.clone(),
            name.to_owned(),
            j.steps.clone(),
        );
        Box::pin(async move {
            let done = tasks
                .step_done(&engine, &task_id, &token, &name, &value)
                .await;
            steps.send_modify(|n| *n = n.saturating_sub(1));
            match done {
                Ok(true) => Ok(()),
                Ok(false) => Err(runner_gone("the task's runner lost its lease")),
                Err(e) => Err(e),
            }
        })
    }

    fn unrecoverable(&self, why: &'static str) {
        let Some(j) = &self.journal else { return };
        let (tasks, task_id, token) = (Arc::clone(&j.tasks), j.task_id.clone(), j.token.clone());
        tokio::spawn(async move {
            let _ = tasks
                .fenced(&task_id, &token, |r, _| {
                    if let Some(j) = r.journal.as_mut() {
                        j.unrecoverable.get_or_insert_with(|| why.to_owned());
                    }
                })
                .await;
        });
    }
}

/// The handler's question keys and the wire keys published for them: a
/// wire key is never reused over the task's life, so a question asked again
/// (its answer refused) gets a new one.
#[derive(Debug, Default)]
struct Keys {
    current: HashMap<String, String>,
    used: HashSet<String>,
}

impl Keys {
    fn wire(&mut self, key: &str) -> String {
        if let Some(w) = self.current.get(key) {
            return w.clone();
        }
        let mut n = 1u32;
        let mut wire = key.to_owned();
        while self.used.contains(&wire) {
            n += 1;
            wire = format!("{key}.{n}");
        }
        self.used.insert(wire.clone());
        self.current.insert(key.to_owned(), wire.clone());
        wire
    }
}

struct AnswersInner {
    tasks: Arc<Tasks>,
    /// A durable task's engine: answers taken go into its journal.
    engine: Option<Arc<Engine>>,
    task_id: String,
    token: String,
    local: Arc<Local>,
    cancel: CancellationToken,
    keys: Mutex<Keys>,
}

/// A task's [`AnswerSource`]: the record's `inputRequests` and the answers
/// `tasks/update` left in it.
#[derive(Clone)]
struct Answers {
    inner: Arc<AnswersInner>,
}

fn cancelled_error() -> ErrorObject {
    ErrorObject::new(code::INTERNAL_ERROR, "The task was cancelled")
}

impl AnswerSource for Answers {
    #[allow(
        clippy::too_many_lines,
        reason = "publish, then take answers, in one loop"
    )]
    fn answers(
        &self,
        questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>> {
        let this = Arc::clone(&self.inner);
        Box::pin(async move {
            loop {
                // Publish: every outstanding question under its wire key.
                let (wire, kinds) = {
                    let mut keys = this
                        .keys
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    let mut wire = InputRequests::new();
                    let mut kinds: HashMap<String, (String, InputKind)> = HashMap::new();
                    for (key, q) in &questions {
                        let w = keys.wire(key);
                        kinds.insert(w.clone(), (key.clone(), q.kind()));
                        wire.insert(w, q.clone());
                    }
                    (wire, kinds)
                };
                let published = this
                    .tasks
                    .fenced(&this.task_id, &this.token, |r, now| {
                        r.input_requests = wire
                            .iter()
                            .filter(|(k, _)| !r.answers.contains_key(*k))
                            .map(|(k, q)| (k.clone(), q.clone()))
                            .collect();
                        r.used_keys.extend(wire.keys().cloned());
                        if let Some(j) = r.journal.as_mut() {
                            for (w, (key, _)) in &kinds {
                                j.keys.insert(key.clone(), w.clone());
                            }
                        }
                        r.status = if r.input_requests.is_empty() {
                            TaskStatus::Working
                        } else {
                            TaskStatus::InputRequired
                        };
                        r.last_updated_at = now;
                    })
                    .await?;
                if !published {
                    return Err(runner_gone("the task's runner lost its lease"));
                }
                // Wait for answers to any of them.
                loop {
                    let mut bumped = this.local.bump.subscribe();
                    // Answers written through another replica: the store's
                    // announcement wakes us (the record is the truth).
                    let mut remote = this.tasks.store.changes();
                    let mut taken = Vec::new();
                    let mut cancel_asked = false;
                    let mut journal_failed = None;
                    let done = this
                        .tasks
                        .modify(&this.task_id, |r, _| {
                            if !holds(r, &this.token) {
                                return None;
                            }
                            cancel_asked = r.cancel_requested;
                            let mine: Vec<String> = r
                                .answers
                                .keys()
                                .filter(|k| kinds.contains_key(*k))
                                .cloned()
                                .collect();
                            if mine.is_empty() {
                                return None;
                            }
                            let picked: Vec<(String, Value)> = mine
                                .iter()
                                .filter_map(|k| r.answers.get(k).map(|v| (k.clone(), v.clone())))
                                .collect();
                            if let Some(engine) = &this.engine {
                                let by_key: Vec<(String, Value)> = picked
                                    .iter()
                                    .filter_map(|(w, v)| {
                                        kinds.get(w).map(|(k, _)| (k.clone(), v.clone()))
                                    })
                                    .collect();
                                if let Err(e) = Tasks::journal_answers(engine, r, &by_key) {
                                    journal_failed = Some(e);
                                    return None;
                                }
                            }
                            for k in &mine {
                                r.answers.remove(k);
                            }
                            taken = picked;
                            Some(())
                        })
                        .await?;
                    if let Some(e) = journal_failed {
                        return Err(e);
                    }
                    let Some((record, _)) = done else {
                        return Err(runner_gone("the task's record is gone"));
                    };
                    if !holds(&record, &this.token) {
                        return Err(runner_gone("the task's runner lost its lease"));
                    }
                    if cancel_asked {
                        this.cancel.cancel();
                        return Err(cancelled_error());
                    }
                    if !taken.is_empty() {
                        let mut keys = this
                            .keys
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner);
                        let mut decoded = Vec::new();
                        for (wire, value) in taken {
                            let Some((key, kind)) = kinds.get(&wire) else {
                                continue;
                            };
                            // Answered (well or not): the wire key is retired.
                            keys.current.remove(key);
                            match InputResponse::decode_as(*kind, &value) {
                                Ok(response) => decoded.push((key.clone(), response)),
                                Err(e) => {
                                    tracing::info!(%wire, error = %e, "task answer refused; asking again");
                                }
                            }
                        }
                        if decoded.is_empty() {
                            // Every answer was refused: publish again, new keys.
                            break;
                        }
                        return Ok(decoded);
                    }
                    tokio::select! {
                        _ = bumped.changed() => {}
                        () = super::announced(&mut remote, &this.task_id) => {}
                        () = tokio::time::sleep(this.tasks.config.recheck) => {}
                        () = this.cancel.cancelled() => return Err(cancelled_error()),
                    }
                }
            }
        })
    }

    fn question_timeout(&self) -> Duration {
        let config = &self.inner.tasks.config;
        config.input_timeout.min(config.ttl)
    }
}
