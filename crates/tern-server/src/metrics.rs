//! Counters a fleet watches, emitted as `tracing` events on this module's
//! target, `tern_server::metrics` (level DEBUG), in the shape
//! `tracing-opentelemetry`'s `MetricsLayer` turns into OpenTelemetry
//! instruments (the `tern` command's `otel` feature exports them over
//! OTLP); without such a subscriber they cost one disabled-event check.
//!
//! | instrument | kind | attributes |
//! |---|---|---|
//! | `tern.rounds_per_call` | histogram | `method` |
//! | `tern.refused_states` | counter | `reason` (a fixed set: `seal:<OpenFailure>`, `payload`, `lifetime`, `answer`, `redeemed`, `vanished`) |
//! | `tern.replay_outcomes` | counter | `outcome` (`first`, `done`, `in_flight`, `unknown`, `redeemed`) |
//! | `tern.task_states` | counter | `status` (each terminal status reached) |
//! | `tern.task_recoveries` | counter | `outcome`: `run` (taken again from its journal), `passed` (left for a replica serving its version), `ended` (cancelled, over its recoveries, or a step's outcome unknown) |

/// A call ended (its final leg answered) after `rounds` rounds.
pub(crate) fn rounds_per_call(method: &'static str, rounds: u32) {
    tracing::debug!(
        histogram.tern.rounds_per_call = u64::from(rounds),
        method = method,
        "metric"
    );
}

/// A `requestState` was refused.
pub(crate) fn refused_state(reason: &str) {
    tracing::debug!(
        monotonic_counter.tern.refused_states = 1_u64,
        reason = reason,
        "metric"
    );
}

/// What the replay store said to a guarded leg.
pub(crate) fn replay_outcome(outcome: &'static str) {
    tracing::debug!(
        monotonic_counter.tern.replay_outcomes = 1_u64,
        outcome = outcome,
        "metric"
    );
}

/// A lapsed durable task was claimed, with what became of it.
pub(crate) fn task_recovered(outcome: &'static str) {
    tracing::debug!(
        monotonic_counter.tern.task_recoveries = 1_u64,
        outcome = outcome,
        "metric"
    );
}

/// A task reached `status`.
pub(crate) fn task_state(status: &'static str) {
    tracing::debug!(
        monotonic_counter.tern.task_states = 1_u64,
        status = status,
        "metric"
    );
}
