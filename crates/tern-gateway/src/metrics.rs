//! The gateway's counters, in tern-server's convention (its `metrics`
//! module): `tracing` events on this module's target,
//! `tern_gateway::metrics` (level DEBUG), in the shape
//! `tracing-opentelemetry`'s `MetricsLayer` turns into OpenTelemetry
//! instruments (the `tern` command's `otel` feature exports them over
//! OTLP); without such a subscriber they cost one disabled-event check.
//! The spans: tern-server's `relay` span per relayed leg (method, target,
//! round, outcome) holds the gateway's `upstream` span per request sent to
//! an upstream (its name, the method, the outcome below).
//!
//! | instrument | kind | attributes |
//! |---|---|---|
//! | `tern.gateway.upstream_requests` | counter | `upstream` (its configured name), `method`, `outcome` (a fixed set: `ok`, `input_required`, `task`, `error`, `unavailable`, `unknown`) |
//! | `tern.gateway.upstream_ms` | histogram | `upstream`, `method` |
//! | `tern.gateway.upstream_down` | counter | `upstream` (each time it goes down) |

use std::time::Duration;

use tern_protocol::error::ErrorObject;

/// The outcome label of an upstream's answer: an answer is labelled by the kind of its result (`ok`,
/// `input_required`, `task`), an error by what it says.
pub(crate) fn outcome(answer: Result<&'static str, &ErrorObject>) -> &'static str {
    match answer {
        Ok(kind) => kind,
        // Down, not started: refused before anything was sent.
        Err(e)
            if e.data
                .as_ref()
                .is_some_and(|d| d.get("retryAfterMs").is_some()) =>
        {
            "unavailable"
        }
        // Lost or silent past its timeout after the request was sent.
        Err(e) if e.code == tern_server::error::codes::OUTCOME_UNKNOWN => "unknown",
        Err(_) => "error",
    }
}

/// A request sent to `upstream` ended with `outcome` after `elapsed`.
pub(crate) fn upstream_request(
    upstream: &str,
    method: &str,
    outcome: &'static str,
    elapsed: Duration,
) {
    tracing::debug!(
        monotonic_counter.tern.gateway.upstream_requests = 1_u64,
        upstream = upstream,
        method = method,
        outcome = outcome,
        "metric"
    );
    tracing::debug!(
        histogram.tern.gateway.upstream_ms = elapsed.as_secs_f64() * 1000.0,
        upstream = upstream,
        method = method,
        "metric"
    );
}

/// `upstream` went down.
pub(crate) fn upstream_down(upstream: &str) {
    tracing::debug!(
        monotonic_counter.tern.gateway.upstream_down = 1_u64,
        upstream = upstream,
        "metric"
    );
}
