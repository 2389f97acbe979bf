//! Exactly once for guarded legs (docs/design.md, "Exactly once", and the
//! cancellation rule of "Transports").
//!
//! A leg of a `single_use` or `idempotent_retry` target that presents a
//! `requestState` is *claimed* once its state opened and its answers
//! validated (refusals before that leave no record). From then on the run
//! belongs to the server, not to the connection:
//!
//! - it runs in a server-owned task until it returns or reaches the hard
//!   deadline ([`crate::CallLimits::guarded_deadline`], default 60 s); a
//!   disconnect or `notifications/cancelled` fires `ctx.cancelled()` but does
//!   not drop it;
//! - whatever it ends with — a result, an `isError` result, a JSON-RPC error,
//!   another `input_required` — is stored, and the original caller gets it if
//!   still there;
//! - it renews its lease every third of [`crate::CallLimits::lease`]; a run
//!   that cannot renew (its lease lapsed: the store already reads "unknown")
//!   is stopped;
//! - a run that panicked or passed its deadline is recorded as unknown.
//!
//! Duplicates of the retry: with `idempotent_retry`, a finished run's outcome;
//! a run still in flight is waited for (woken by the store, re-checked on a
//! slow timer) up to [`crate::CallLimits::duplicate_wait`], then the duplicate
//! gets a state-only `input_required` carrying the same token (rule
//! `input-required-not-empty`) to come back with; an unknown outcome is
//! [`crate::error::codes::OUTCOME_UNKNOWN`] — never a second run. With
//! `single_use` alone every duplicate gets the uniform `-32602`.

use std::sync::Arc;
use std::time::Duration;

use tern_protocol::InputRequiredResult;
use tern_protocol::error::{ErrorObject, code};
use tokio::sync::oneshot;

use crate::engine::runner::{FinishLeg, LegRequest, Presented, Resumed, RunHandler, invalid_state};
use crate::engine::strategy::Strategy;
use crate::engine::{CLOCK_SKEW, Engine};
use crate::error::codes;
use crate::json::Json;
use crate::replay::{Begin, ClaimSpec, Outcome, Owner, RecordKey, Scope, StoreError};

/// The error every duplicate of a run with no known outcome gets.
pub(crate) fn outcome_unknown() -> ErrorObject {
    ErrorObject::new(
        codes::OUTCOME_UNKNOWN,
        "The outcome of this request is unknown: an earlier attempt with the same \
         requestState started and did not finish. It will not run again; check its \
         effect before starting a new call.",
    )
}

fn store_failed(e: &StoreError) -> ErrorObject {
    if e.is_full() {
        tracing::warn!(error = ?e, "replay store full");
        return ErrorObject::new(
            codes::STORE_FULL,
            "The server is holding too many guarded requests for this caller; try again later",
        );
    }
    tracing::error!(error = ?e, "replay store failed");
    // Only `begin` and a duplicate's `status` come here: this attempt did
    // not run its handler, so retrying the same state later is safe.
    ErrorObject::new(
        code::INTERNAL_ERROR,
        "Internal error: the replay store is unreachable, so this request did not run; retry it \
         later with the same requestState",
    )
}

fn from_outcome(outcome: Outcome) -> Result<Json, ErrorObject> {
    match outcome {
        Outcome::Result(json) => Ok(json),
        Outcome::Error(e) => Err(e),
        Outcome::Unknown => Err(outcome_unknown()),
    }
}

/// Runs a guarded leg, or serves a duplicate.
pub(crate) async fn run<T: Send + 'static>(
    engine: Arc<Engine>,
    request: LegRequest,
    resumed: Resumed,
    handler: RunHandler<T>,
    finish: FinishLeg<T>,
) -> Result<Json, ErrorObject> {
    let presented = resumed
        .presented
        .clone()
        .expect("the runner guards only legs that presented a state");
    let policy = request.policy;
    let scope = match request.origin.principal.id() {
        Some(id) => Scope::principal(id),
        None => Scope::anonymous(request.call.peer.as_deref().unwrap_or("anonymous")),
    };
    let owner = Owner::random();
    let claim = ClaimSpec::new(
        presented.state_id,
        owner,
        scope,
        presented.expires_at + CLOCK_SKEW,
        engine.limits.lease,
    );
    let record = claim.record();
    let begun = engine
        .store
        .begin(claim)
        .await
        .map_err(|e| store_failed(&e))?;
    crate::metrics::replay_outcome(match (&begun, policy.idempotent_retry) {
        (Begin::First, _) => "first",
        (_, false) => "redeemed",
        (Begin::Done(_), true) => "done",
        (Begin::Unknown, true) => "unknown",
        (Begin::InFlight, true) => "in_flight",
    });
    match begun {
        Begin::First => {}
        _ if !policy.idempotent_retry => {
            // Rule `state-single-use`: enforced server-side, in the shared
            // store.
            return Err(invalid_state("redeemed", "state already redeemed"));
        }
        Begin::Done(outcome) => {
            tracing::debug!("duplicate served the stored outcome");
            return from_outcome(outcome);
        }
        Begin::Unknown => return Err(outcome_unknown()),
        Begin::InFlight => return duplicate(&engine, &presented, &record).await,
    }
    // Ours: from here the run belongs to the server.
    let (tx, rx) = oneshot::channel();
    let run = Arc::clone(&engine).leg(request, resumed, handler, finish, Strategy::Suspend);
    let span = tracing::Span::current();
    tokio::spawn(tracing::Instrument::instrument(
        async move {
            let outcome = supervise(&engine, &record, owner, tokio::spawn(run)).await;
            let stored = match &outcome {
                Supervised::Ended(Ok(json)) => Outcome::Result(json.clone()),
                Supervised::Ended(Err(e)) => Outcome::Error(e.clone()),
                Supervised::Unknown(_) => Outcome::Unknown,
                Supervised::Lost => {
                    let _ = tx.send(Err(outcome_unknown()));
                    return;
                }
            };
            match engine.store.finish(&record, owner, stored).await {
                Ok(true) => {}
                Ok(false) => tracing::warn!("guarded leg lost its claim before it finished"),
                Err(e) => tracing::error!(error = ?e, "replay store failed to keep an outcome"),
            }
            let _ = tx.send(match outcome {
                Supervised::Ended(result) => result,
                Supervised::Unknown(e) => Err(e),
                Supervised::Lost => Err(outcome_unknown()),
            });
        },
        span,
    ));
    // The caller may go away here: the run goes on without it.
    rx.await.unwrap_or_else(|_| Err(outcome_unknown()))
}

enum Supervised {
    /// The leg ended with this.
    Ended(Result<Json, ErrorObject>),
    /// It panicked or passed its deadline: recorded as unknown; the original
    /// caller gets this error.
    Unknown(ErrorObject),
    /// It lost its lease: the store reads unknown already.
    Lost,
}

/// Waits for the run, renewing its lease, within the hard deadline.
async fn supervise(
    engine: &Engine,
    record: &RecordKey,
    owner: Owner,
    mut run: tokio::task::JoinHandle<Result<Json, ErrorObject>>,
) -> Supervised {
    let limits = engine.limits;
    let deadline = tokio::time::sleep(limits.guarded_deadline);
    tokio::pin!(deadline);
    let every = limits.lease / 3;
    let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            ended = &mut run => {
                return match ended {
                    Ok(result) => Supervised::Ended(result),
                    Err(e) => {
                        tracing::error!(panicked = e.is_panic(), "a guarded leg's handler did not finish");
                        Supervised::Unknown(ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))
                    }
                };
            }
            () = &mut deadline => {
                run.abort();
                tracing::warn!(deadline = ?limits.guarded_deadline, "a guarded leg passed its deadline and was stopped");
                return Supervised::Unknown(outcome_unknown());
            }
            _ = renew.tick() => {
                match engine.store.renew(record, owner, limits.lease).await {
                    Ok(true) => {}
                    Ok(false) => {
                        run.abort();
                        tracing::error!("a guarded leg lost its lease and was stopped");
                        return Supervised::Lost;
                    }
                    // A store that cannot be reached now may be back before
                    // the lease lapses: keep running, try again next tick.
                    Err(e) => tracing::warn!(error = ?e, "cannot renew a guarded leg's lease"),
                }
            }
        }
    }
}

/// A duplicate of an idempotent retry whose first run is in flight: wait for
/// its outcome, woken by the store and re-checking on a slow timer; past the
/// bound, come back later with the same state (rule
/// `input-required-not-empty`).
async fn duplicate(
    engine: &Engine,
    presented: &Presented,
    record: &RecordKey,
) -> Result<Json, ErrorObject> {
    let until = tokio::time::Instant::now() + engine.limits.duplicate_wait;
    loop {
        // Registered before the read, so a finish in between still wakes us.
        let changed = engine.store.changed(record);
        match engine
            .store
            .status(record)
            .await
            .map_err(|e| store_failed(&e))?
        {
            Some(Begin::Done(outcome)) => return from_outcome(outcome),
            Some(Begin::Unknown) => return Err(outcome_unknown()),
            Some(Begin::InFlight) => {}
            // Forgotten (expired) while we waited: the state is past use.
            Some(Begin::First) | None => return Err(invalid_state("vanished", "record vanished")),
        }
        let recheck = tokio::time::sleep(engine.limits.recheck.min(Duration::from_secs(60)));
        tokio::select! {
            () = changed => {}
            () = recheck => {}
            () = tokio::time::sleep_until(until) => {
                tracing::debug!("duplicate told to come back: the first run is still going");
                return Ok(engine.stamp_input_required(InputRequiredResult::state_only(
                    presented.token.clone(),
                )));
            }
        }
    }
}
