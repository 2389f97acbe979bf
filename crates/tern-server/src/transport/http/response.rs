//! The response stage: JSON, or an SSE stream (one writer for both eras'
//! framing: events, keep-alive comments, headers), and the status of each
//! reply.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::header::CONTENT_TYPE;
use http::{HeaderValue, Response, StatusCode};
use serde_json::Value;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::ErrorResponse;
use tern_protocol::{RequestId, ServerNotification};
use tokio_util::sync::DropGuard;

use crate::call::Reply;
use crate::ctx::Notifications;
use crate::replay::BoxFuture;

/// `503` + `Retry-After` with an id-less `-32603` carrying
/// `data.retryAfterMs`, as the accept loop answers when full.
pub(super) fn overloaded(
    retry_after: Duration,
    id: Option<RequestId>,
    why: &str,
) -> Response<Body> {
    let ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
    let error = ErrorObject::new(code::INTERNAL_ERROR, why)
        .with_data(serde_json::json!({ "retryAfterMs": ms }));
    let mut response = error_response(StatusCode::SERVICE_UNAVAILABLE, id, error);
    if let Ok(v) = HeaderValue::from_str(&retry_after.as_secs().max(1).to_string()) {
        response.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    response
}

pub(super) fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response<Body> {
    json_response_in(status, body, 256)
}

/// [`json_response`] written into a buffer of `capacity` bytes to start
/// with: a reply's size is known from its result's, and a buffer that
/// grows copies what it holds at each step.
fn json_response_in(
    status: StatusCode,
    body: &impl serde::Serialize,
    capacity: usize,
) -> Response<Body> {
    let mut bytes = Vec::with_capacity(capacity);
    if serde_json::to_writer(&mut bytes, body).is_err() {
        bytes.clear();
    }
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

pub(super) fn error_response(
    status: StatusCode,
    id: Option<RequestId>,
    error: ErrorObject,
) -> Response<Body> {
    json_response(status, &ErrorResponse::new(id, error))
}

pub(super) fn plain(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

pub(super) enum First {
    Notification(ServerNotification),
    Reply(Reply),
}

/// The HTTP status of a reply (module docs' table).
pub(super) fn status_of(reply: &Reply) -> StatusCode {
    match reply.error_code() {
        Some(code::METHOD_NOT_FOUND) => StatusCode::NOT_FOUND,
        Some(
            code::HEADER_MISMATCH
            | code::MISSING_REQUIRED_CLIENT_CAPABILITY
            | code::UNSUPPORTED_PROTOCOL_VERSION
            | code::PARSE_ERROR
            | code::INVALID_REQUEST,
        ) => StatusCode::BAD_REQUEST,
        Some(_) if reply.malformed => StatusCode::BAD_REQUEST,
        None | Some(_) => StatusCode::OK,
    }
}

pub(super) fn reply_response(reply: &Reply) -> Response<Body> {
    // An overload refusal from the server (a listen over its cap, say) is
    // a 503 with Retry-After over HTTP, like the accept loop's.
    if let Err(e) = &reply.outcome
        && e.code == code::INTERNAL_ERROR
        && let Some(ms) = e
            .data
            .as_ref()
            .and_then(|d| d.get("retryAfterMs"))
            .and_then(Value::as_u64)
    {
        let mut response = json_response(StatusCode::SERVICE_UNAVAILABLE, reply);
        if let Ok(v) = HeaderValue::from_str(&ms.div_ceil(1000).max(1).to_string()) {
            response.headers_mut().insert(http::header::RETRY_AFTER, v);
        }
        return response;
    }
    // The envelope around the result: `{"jsonrpc":"2.0","id":…,"result":}`.
    let capacity = match &reply.outcome {
        Ok(result) => result.get().len() + 64,
        Err(_) => 256,
    };
    json_response_in(status_of(reply), reply, capacity)
}

pub(super) fn sse_response(stream: SseStream) -> Response<Body> {
    super::sse::response(Body::from_stream(stream))
}

/// An SSE response body. It owns the request's handling: when the client
/// goes away the body is dropped, which drops the handler's future and
/// cancels the request (`Ctx::cancelled` fires).
pub(super) struct SseStream {
    queued: std::collections::VecDeque<ServerNotification>,
    handling: Option<BoxFuture<'static, Reply>>,
    notifications: Option<Notifications>,
    reply: Option<Reply>,
    keep_alive: tokio::time::Interval,
    done: bool,
    guard: Option<DropGuard>,
}

impl SseStream {
    pub(super) fn new(
        first: ServerNotification,
        handling: BoxFuture<'static, Reply>,
        notifications: Notifications,
        guard: DropGuard,
        keep_alive: Duration,
    ) -> Self {
        Self {
            queued: std::iter::once(first).collect(),
            handling: Some(handling),
            notifications: Some(notifications),
            reply: None,
            keep_alive: super::sse::keep_alive(keep_alive),
            done: false,
            guard: Some(guard),
        }
    }

    pub(super) fn finished(
        pending: Vec<ServerNotification>,
        reply: Reply,
        keep_alive: Duration,
    ) -> Self {
        Self {
            queued: pending.into(),
            handling: None,
            notifications: None,
            reply: Some(reply),
            keep_alive: super::sse::keep_alive(keep_alive),
            done: false,
            guard: None,
        }
    }
}

impl futures_core::Stream for SseStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(n) = this.queued.pop_front() {
            return Poll::Ready(Some(Ok(super::sse::event(&n))));
        }
        if let Some(rx) = this.notifications.as_mut()
            && let Poll::Ready(Some(n)) = rx.poll_recv(cx)
        {
            return Poll::Ready(Some(Ok(super::sse::event(&n))));
        }
        if let Some(handling) = this.handling.as_mut()
            && let Poll::Ready(reply) = handling.as_mut().poll(cx)
        {
            this.handling = None;
            // Drain what was sent before the result, then the result.
            if let Some(mut rx) = this.notifications.take() {
                while let Some(n) = rx.try_recv() {
                    this.queued.push_back(n);
                }
            }
            this.reply = Some(reply);
            if let Some(guard) = this.guard.take() {
                drop(guard.disarm());
            }
            return self.poll_next(cx);
        }
        if this.handling.is_none()
            && let Some(reply) = this.reply.take()
        {
            this.done = true;
            return Poll::Ready(Some(Ok(super::sse::event(&reply))));
        }
        if this.keep_alive.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(super::sse::keep_alive_comment())));
        }
        Poll::Pending
    }
}
