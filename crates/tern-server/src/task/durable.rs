//! Durable tasks (docs/design.md, "Durable tasks"): the journal a runner
//! keeps in the task record, and the recovery that runs a task again from
//! it once its runner's lease lapsed.
//!
//! - At [`crate::Ctx::into_task`] the journal is seeded ([`seed`]): the
//!   call (arguments, the creating request's `_meta`, the principal) and the
//!   leg's answers and `ctx.once` results, sealed with the key ring.
//! - Each `ctx.once` step is two fenced writes ([`Tasks::step_started`],
//!   [`Tasks::step_done`]): "started" before it runs, its result after. A
//!   step found started and not recorded by a recovery has an unknown
//!   outcome: the task ends `failed` naming it, unless it was declared
//!   retry-safe ([`crate::Ctx::once_retry_safe`]), which runs again.
//! - Answers taken from `tasks/update` go into the journal in the write
//!   that takes them, so a recovered run finds them without asking again.
//! - [`Tasks::recover_loop`] claims lapsed tasks ([`TaskStore::claim_lapsed`])
//!   and runs their handler again with the journal's answers and memos.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_protocol::RequestMeta;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::task::TaskStatus;
use tern_seal::{Claims, Expect};
use tokio_util::sync::CancellationToken;

use super::store::{JOURNAL_FORMAT, Journal, Lease, TaskRecord};
use super::{Tasks, end, hex, ms};
use crate::ctx::{Ctx, CtxParts, Leg};
use crate::engine::payload::StoredAnswer;
use crate::engine::{CallId, Engine, random_bytes};
use crate::error::{ToolError, codes};
use crate::json::Json;
use crate::principal::Principal;
use crate::replay::BoxFuture;

/// The method the journal's seals are bound to (never a JSON-RPC method, so
/// a journal never opens as a `requestState`, nor one as a journal).
const SEAL_METHOD: &str = "tern/task-journal";

/// What a durable tool's call brings to its task.
#[derive(Debug, Clone)]
pub(crate) struct Seed {
    pub(crate) tool: String,
    pub(crate) version: &'static str,
    pub(crate) arguments: Arc<Value>,
    pub(crate) meta: RequestMeta,
}

/// The call, as sealed in [`Journal::call`].
#[derive(Serialize, Deserialize)]
struct SealedCall {
    /// The principal's id (`None`: anonymous).
    #[serde(rename = "p")]
    principal: Option<String>,
    /// The call id, 32 hex digits.
    #[serde(rename = "c")]
    call_id: String,
    #[serde(rename = "a")]
    arguments: Value,
    #[serde(rename = "m")]
    meta: RequestMeta,
}

/// The steps, as sealed in [`Journal::steps`].
#[derive(Default, Serialize, Deserialize)]
struct SealedSteps {
    #[serde(rename = "o", default)]
    memo: BTreeMap<String, Value>,
    #[serde(rename = "a", default)]
    answers: BTreeMap<String, StoredAnswer>,
}

/// A journal seal: `payload` encrypted and bound to the task id, sealed
/// and opened at the task's creation time `at` (ms): the record's ttl
/// bounds how long a journal is kept, not the seal's lifetime.
fn seal(engine: &Engine, task_id: &str, at: u64, payload: &[u8]) -> Result<String, ErrorObject> {
    let random: [u8; 16 + tern_seal::NONCE_LEN] = random_bytes();
    let (mut state_id, mut nonce) = ([0u8; 16], [0u8; tern_seal::NONCE_LEN]);
    state_id.copy_from_slice(&random[..16]);
    nonce.copy_from_slice(&random[16..]);
    let claims = Claims {
        principal: None,
        method: SEAL_METHOD,
        target: task_id,
        arguments: None,
        state_id,
        round: 0,
        payload,
    };
    engine
        .sealer()
        .seal(&claims, UNIX_EPOCH + Duration::from_millis(at), nonce)
        .map_err(|e| {
            ErrorObject::new(
                codes::STORE_FULL,
                format!("The task's journal cannot be kept: {e}"),
            )
        })
}

fn open(engine: &Engine, task_id: &str, at: u64, token: &str) -> Result<Vec<u8>, ErrorObject> {
    let expect = Expect {
        principal: None,
        method: SEAL_METHOD,
        target: task_id,
        arguments: None,
    };
    engine
        .sealer()
        .open(token, &expect, UNIX_EPOCH + Duration::from_millis(at))
        .map(|o| o.payload.to_vec())
        .map_err(|e| {
            tracing::warn!(
                reason = e.reason().as_str(),
                "a task's journal does not open"
            );
            super::runner_gone("its journal no longer opens with this server's keys")
        })
}

fn seal_steps(
    engine: &Engine,
    record: &TaskRecord,
    steps: &SealedSteps,
) -> Result<String, ErrorObject> {
    let bytes = serde_json::to_vec(steps)
        .map_err(|_| ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))?;
    seal(engine, &record.task_id, record.created_at, &bytes)
}

fn open_steps(
    engine: &Engine,
    record: &TaskRecord,
    j: &Journal,
) -> Result<SealedSteps, ErrorObject> {
    let bytes = open(engine, &record.task_id, record.created_at, &j.steps)?;
    serde_json::from_slice(&bytes).map_err(|_| super::runner_gone("its journal does not decode"))
}

/// The journal of a task created from `leg` (its answers and memos so far).
pub(crate) fn seed(
    engine: &Engine,
    record: &TaskRecord,
    seed: &Seed,
    call_id: CallId,
    principal: &Principal,
    leg: &Leg,
    token_read: bool,
) -> Result<Journal, ErrorObject> {
    let call = SealedCall {
        principal: principal.id().map(str::to_owned),
        call_id: call_id.to_string(),
        arguments: Value::clone(&seed.arguments),
        meta: seed.meta.clone(),
    };
    let bytes = serde_json::to_vec(&call)
        .map_err(|_| ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))?;
    let call = seal(engine, &record.task_id, record.created_at, &bytes)?;
    let steps = SealedSteps {
        memo: leg.memo.clone(),
        answers: leg.answers.clone(),
    };
    Ok(Journal {
        format: JOURNAL_FORMAT,
        tool: seed.tool.clone(),
        version: seed.version.to_owned(),
        call,
        steps: seal_steps(engine, record, &steps)?,
        started: BTreeMap::new(),
        keys: BTreeMap::new(),
        attempt: 0,
        passed: 0,
        unrecoverable: token_read.then(|| UNRECOVERABLE_TOKEN.to_owned()),
    })
}

/// Why a handler that read the raw access token cannot run again.
pub(crate) const UNRECOVERABLE_TOKEN: &str =
    "the handler read the request's access token, which a task never keeps";

/// The bytes a journal counts against its owner's quota.
pub(crate) fn journal_bytes(j: &Journal) -> u64 {
    (j.call.len() + j.steps.len()) as u64
}

/// A handler run again from its journal, with the server's finish of its
/// output: what [`Rerun::rerun`] gives.
pub(crate) type Rerun = BoxFuture<'static, Result<Result<Json, ErrorObject>, ToolError>>;

/// The server's tools, as recovery sees them (set by the server: the task
/// module sits below the tools).
pub(crate) trait Tools: Send + Sync {
    /// The handler of `tool` run with `ctx` and `arguments`, if this server
    /// serves `tool` at durable `version`.
    fn rerun(&self, tool: &str, version: &str, ctx: Ctx, arguments: Arc<Value>) -> Option<Rerun>;
    /// The engine, while the server lives.
    fn engine(&self) -> Option<Arc<Engine>>;
}

/// What a claim decided.
enum Claimed {
    /// Ended here (cancelled, over its recoveries, a step's outcome
    /// unknown, its journal unreadable).
    Ended,
    /// Not served here: left for another replica.
    Passed,
    /// Runs here.
    Run(Box<Rerun>, Ctx, CancellationToken, u32),
}

impl Tasks {
    /// Marks step `name` started in the journal, before it runs.
    pub(crate) async fn step_started(
        &self,
        task_id: &str,
        token: &str,
        name: &str,
        retry_safe: bool,
    ) -> Result<bool, ErrorObject> {
        self.fenced(task_id, token, |r, _| {
            if let Some(j) = r.journal.as_mut() {
                j.started.insert(name.to_owned(), retry_safe);
            }
        })
        .await
    }

    /// Records step `name`'s result in the journal.
    pub(crate) async fn step_done(
        &self,
        engine: &Engine,
        task_id: &str,
        token: &str,
        name: &str,
        value: &Value,
    ) -> Result<bool, ErrorObject> {
        let max = self.config.max_journal_bytes;
        let mut failed = None;
        let written = self
            .fenced(task_id, token, |r, _| {
                failed = None;
                let Some(j) = r.journal.as_ref() else { return };
                let sealed = open_steps(engine, r, j).and_then(|mut steps| {
                    steps.memo.insert(name.to_owned(), value.clone());
                    seal_steps(engine, r, &steps)
                });
                match sealed {
                    Ok(s) if (s.len() + j.call.len()) as u64 <= max => {
                        let j = r.journal.as_mut().expect("checked above");
                        j.steps = s;
                        j.started.remove(name);
                        r.result_bytes = super::RECORD_CHARGE + journal_bytes(j);
                    }
                    Ok(_) => {
                        failed = Some(ErrorObject::new(
                            codes::STORE_FULL,
                            format!("The task's journal grew past the {max} bytes kept"),
                        ));
                    }
                    Err(e) => failed = Some(e),
                }
            })
            .await?;
        match failed {
            Some(e) => Err(e),
            None => Ok(written),
        }
    }

    /// In the write that takes answers from the record: keeps them in the
    /// journal under the handler's keys (bound to whichever question is
    /// asked under the key again, and checked against it).
    pub(crate) fn journal_answers(
        engine: &Engine,
        r: &mut TaskRecord,
        answers: &[(String, Value)],
    ) -> Result<(), ErrorObject> {
        let Some(j) = r.journal.as_ref() else {
            return Ok(());
        };
        let mut steps = open_steps(engine, r, j)?;
        for (key, value) in answers {
            steps.answers.insert(
                key.clone(),
                StoredAnswer::new(crate::ctx::UNBOUND.to_owned(), value.clone()),
            );
        }
        let sealed = seal_steps(engine, r, &steps)?;
        let j = r.journal.as_mut().expect("checked above");
        j.steps = sealed;
        for (key, _) in answers {
            j.keys.remove(key);
        }
        r.result_bytes = super::RECORD_CHARGE + journal_bytes(j);
        Ok(())
    }

    /// Claims lapsed tasks and runs them again, until the server stops or is
    /// dropped. Runs on every server; a store without
    /// [`TaskStore::claim_lapsed`] never gives it a task.
    pub(crate) async fn recover_loop(self: Arc<Self>, tools: Arc<dyn Tools>) {
        let every = self.config.recheck.max(Duration::from_millis(50));
        loop {
            tokio::select! {
                () = self.shutdown.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
            if tools.engine().is_none() {
                // The server is gone.
                return;
            }
            // Drain: every lapsed task this round, one at a time.
            loop {
                if self.shutdown.is_cancelled() {
                    return;
                }
                let now = self.now_ms();
                let token = hex(&random_bytes::<16>());
                let lease = Lease::new(token.clone(), now + ms(self.config.lease));
                let claimed = match self.store.claim_lapsed(now, lease).await {
                    Ok(Some(record)) => record,
                    Ok(None) => break,
                    Err(e) => {
                        tracing::warn!(error = %e, "claiming lapsed tasks failed");
                        break;
                    }
                };
                let task_id = claimed.task_id.clone();
                let span = tracing::info_span!("task_recovery", attempt = tracing::field::Empty);
                let outcome =
                    tracing::Instrument::instrument(self.take(&*tools, claimed, &token), span)
                        .await;
                match outcome {
                    Ok(Claimed::Run(body, ctx, cancel, attempt)) => {
                        crate::metrics::task_recovered("run");
                        let Some(engine) = tools.engine() else { return };
                        self.launch(
                            engine,
                            task_id,
                            token,
                            ctx,
                            cancel,
                            *body,
                            finish_rerun(),
                            Some(attempt),
                        );
                    }
                    Ok(Claimed::Passed) => crate::metrics::task_recovered("passed"),
                    Ok(Claimed::Ended) => crate::metrics::task_recovered("ended"),
                    Err(e) => tracing::warn!(error = %e.message, "a lapsed task was not taken"),
                }
            }
        }
    }

    /// Decides what becomes of a task this replica just claimed with
    /// `token`, and writes it (fenced).
    async fn take(
        &self,
        tools: &dyn Tools,
        record: TaskRecord,
        token: &str,
    ) -> Result<Claimed, ErrorObject> {
        let Some(journal) = record.journal.clone() else {
            return Ok(Claimed::Passed);
        };
        let retention = self.config.retention;
        let task_id = record.task_id.clone();
        let ending = |status: TaskStatus, error: Option<ErrorObject>| {
            let task_id = task_id.clone();
            async move {
                self.fenced(&task_id, token, |r, now| {
                    end(r, now, status, None, error.clone(), Some(retention));
                })
                .await
                .map(|_| Claimed::Ended)
            }
        };
        if record.cancel_requested {
            // Rule task-cancel-unheld: cancelled while no runner held it, it
            // is not run again.
            return ending(TaskStatus::Cancelled, None).await;
        }
        // Rule task-recovery-bounded.
        let max = self.config.recoveries;
        if journal.attempt >= max {
            tracing::warn!(
                attempt = journal.attempt,
                "task recovered too often; it ends"
            );
            return ending(
                TaskStatus::Failed,
                Some(
                    ErrorObject::new(
                        codes::RECOVERY_LIMIT,
                        format!(
                            "The task's runner stopped {} times; it is not run again",
                            journal.attempt + 1
                        ),
                    )
                    .with_data(serde_json::json!({ "recoveries": max })),
                ),
            )
            .await;
        }
        // Rule task-step-unknown: never a silent second run of a step that
        // was not declared retry-safe.
        if let Some((step, _)) = journal.started.iter().find(|(_, safe)| !**safe) {
            return ending(
                TaskStatus::Failed,
                Some(super::runner_gone(&format!(
                    "its runner stopped inside the step `{}`, which is not declared retry-safe, \
                     so whether it took effect is unknown",
                    crate::error::short(step)
                ))),
            )
            .await;
        }
        if journal.format != JOURNAL_FORMAT {
            return self.pass(&record, token).await;
        }
        let engine = tools.engine().ok_or_else(super::internal)?;
        let (call, ctx, cancel) = match recovered_ctx(&engine, &record, &journal) {
            Ok(parts) => parts,
            Err(e) => return ending(TaskStatus::Failed, Some(e)).await,
        };
        let arguments = Arc::new(call.arguments);
        let Some(body) = tools.rerun(&journal.tool, &journal.version, ctx.clone(), arguments)
        else {
            return self.pass(&record, token).await;
        };
        let attempt = journal.attempt + 1;
        tracing::Span::current().record("attempt", attempt);
        let written = self
            .fenced(&record.task_id, token, |r, now| {
                if let Some(j) = r.journal.as_mut() {
                    j.attempt = attempt;
                    // Retry-safe steps found started run again.
                    j.started.clear();
                    j.passed = 0;
                }
                r.last_updated_at = now;
            })
            .await?;
        if !written {
            return Ok(Claimed::Passed);
        }
        tracing::info!(attempt, "task taken again from its journal");
        // Recoveries back off: 100 ms, 200 ms, 400 ms, … (at most a lease).
        let backoff = Duration::from_millis(100u64 << attempt.min(10).saturating_sub(1))
            .min(self.config.lease);
        let body: Rerun = Box::pin(async move {
            tokio::time::sleep(backoff).await;
            body.await
        });
        Ok(Claimed::Run(Box::new(body), ctx, cancel, attempt))
    }

    /// Leaves a claimed task for a replica that serves its tool's version;
    /// after [`super::TaskConfig::unclaimed_leases`] passes it ends `failed`.
    async fn pass(&self, record: &TaskRecord, token: &str) -> Result<Claimed, ErrorObject> {
        let k = self.config.unclaimed_leases;
        let retention = self.config.retention;
        let lease = ms(self.config.lease);
        self.fenced(&record.task_id, token, |r, now| {
            let Some(j) = r.journal.as_mut() else { return };
            j.passed += 1;
            if j.passed >= k {
                let error = super::runner_gone(&format!(
                    "no replica serving its tool `{}` at version `{}` took it",
                    crate::error::short(&j.tool),
                    crate::error::short(&j.version)
                ));
                end(
                    r,
                    now,
                    TaskStatus::Failed,
                    None,
                    Some(error),
                    Some(retention),
                );
            } else if let Some(l) = r.lease.as_mut() {
                // Nobody holds it; another replica may claim it after a lease.
                l.token = hex(&random_bytes::<16>());
                l.expires_at = now + lease;
            }
        })
        .await?;
        Ok(Claimed::Passed)
    }
}

/// The call of a claimed task opened from its journal, and the context its
/// handler runs again with: the principal, the creating request's `_meta`,
/// the answers and `ctx.once` results recorded.
fn recovered_ctx(
    engine: &Engine,
    record: &TaskRecord,
    journal: &Journal,
) -> Result<(SealedCall, Ctx, CancellationToken), ErrorObject> {
    let bytes = open(engine, &record.task_id, record.created_at, &journal.call)?;
    let mut call = serde_json::from_slice::<SealedCall>(&bytes)
        .map_err(|_| super::runner_gone("its journal does not decode"))?;
    let steps = open_steps(engine, record, journal)?;
    let call_id = parse_call_id(&call.call_id).ok_or_else(super::internal)?;
    let cancel = CancellationToken::new();
    let ctx = Ctx::new(CtxParts {
        request_id: tern_protocol::RequestId::String(format!("task-{}", record.task_id)),
        call_id,
        round: 1,
        memo_limit: engine.sealer().options().max_token_len / 2,
        meta: Arc::new(call.meta.clone()),
        principal: call
            .principal
            .take()
            .map_or_else(Principal::anonymous, Principal::new),
        access_token: None,
        server: engine.info.clone(),
        notifier: None,
        cancel: cancel.clone(),
        progress_interval: engine.progress_interval,
        can_task: true,
        leg: Leg {
            answers: steps.answers,
            memo: steps.memo,
            ..Leg::default()
        },
    });
    Ok((call, ctx, cancel))
}

/// The seed of a durable tool's task, when the leg may become one.
pub(crate) fn seed_of(
    mode: Option<super::TaskMode>,
    target: &str,
    arguments: Option<&Arc<Value>>,
    meta: &RequestMeta,
) -> Option<Seed> {
    let version = mode?.durable?;
    Some(Seed {
        tool: target.to_owned(),
        version,
        arguments: arguments.cloned().unwrap_or_default(),
        meta: meta.clone(),
    })
}

fn parse_call_id(hex_id: &str) -> Option<CallId> {
    if hex_id.len() != 32 {
        return None;
    }
    let mut bytes = [0u8; 16];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex_id.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(CallId::from_bytes(bytes))
}

/// The finish of a rerun body: its output is already the method's result.
fn finish_rerun() -> crate::engine::runner::FinishLeg<Result<Json, ErrorObject>> {
    Box::new(|_, out| match out {
        Ok(result) => result,
        Err(e) => {
            tracing::error!(error = %e, "a recovered task's body failed outside its finish");
            Err(super::internal())
        }
    })
}

/// How long a recoverable task whose lease lapsed waits for a replica to
/// take it before a reader ends it `failed`.
pub(crate) fn unclaimed_grace(config: &super::TaskConfig) -> u64 {
    ms(config.lease).saturating_mul(u64::from(config.unclaimed_leases))
}
