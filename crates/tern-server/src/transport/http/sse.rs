//! The one SSE writer of both eras: the response's headers, the framing of
//! one event, and the keep-alive comments. The 2026-07-28 route's streams
//! ([`super::response`]) and a 2025-11-25 session's (`crate::legacy::http`)
//! differ in where their messages come from, never in how they are written.

use axum::body::{Body, Bytes};
use http::header::{CACHE_CONTROL, CONTENT_TYPE};
use http::{HeaderValue, Response};

/// An SSE response carrying `body`: `text/event-stream`, no caching, and
/// `X-Accel-Buffering: no` so a proxy such as nginx passes each event on
/// at once.
pub(crate) fn response(body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// One event carrying `message` as compact JSON: one `data:` line (compact
/// JSON has no newline), the event type the default `message`.
pub(crate) fn event(message: &impl serde::Serialize) -> Bytes {
    let mut out = b"data: ".to_vec();
    if serde_json::to_writer(&mut out, message).is_err() {
        tracing::error!("cannot encode an SSE event");
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// One event carrying `json`, a message already written as compact JSON.
pub(crate) fn event_text(json: &str) -> Bytes {
    let mut out = Vec::with_capacity(json.len() + 8);
    out.extend_from_slice(b"data: ");
    out.extend_from_slice(json.as_bytes());
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// A keep-alive comment, sent when a stream has been quiet for an interval.
pub(crate) fn keep_alive_comment() -> Bytes {
    Bytes::from_static(b": keep-alive\n\n")
}

/// The keep-alive timer: first tick one interval from now, then every
/// interval; ticks missed while events were flowing are not made up.
pub(crate) fn keep_alive(every: std::time::Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_of_event_are_framed_alike() {
        let value = serde_json::json!({"jsonrpc": "2.0", "method": "ping"});
        let text = serde_json::to_string(&value).unwrap();
        assert_eq!(event(&value), event_text(&text));
        assert_eq!(
            &event_text("{}")[..],
            b"data: {}\n\n",
            "one data line, a blank line after"
        );
    }
}
