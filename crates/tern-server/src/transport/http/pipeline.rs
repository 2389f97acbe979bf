//! The pipeline: each request of either era passes the stages in the one
//! order the module docs draw.

use std::sync::Arc;

use axum::body::Body;
use http::header::{ACCEPT, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE};
use http::{HeaderValue, Method, Request, Response, StatusCode};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::Message;
use tern_protocol::{ClientRequest, RequestId, method};
use tokio_util::sync::CancellationToken;

use crate::call::{CallContext, Reply};
use crate::ctx::Notifier;
use crate::dispatch::DecodedRequest;
use crate::principal::Principal;
use crate::replay::BoxFuture;
use crate::share::caller_key;

use super::{
    Caller, First, Held, Http, SseStream, Unauthorized, body, error_response, header_lists,
    insufficient_scope, overloaded, plain, reply_response, sse_response, unauthorized,
};

impl Http {
    /// What handlers get of the request's token ([`crate::auth::ResourceServer::token_in_context`]).
    pub(super) fn token_for_context(
        &self,
        token: Option<&crate::auth::AccessToken>,
    ) -> Option<Arc<crate::auth::AccessToken>> {
        self.oauth.as_ref()?.for_context(token?)
    }

    /// Takes an SSE slot into `held`: the caller's share first (one caller
    /// at its share leaves the rest of the server-wide cap to others), then
    /// the cap. What it gives back is the refusal (503 + `Retry-After`),
    /// when there is no slot.
    pub(super) fn refuse_without_stream_slot(
        &self,
        principal: &Principal,
        peer: Option<&str>,
        id: Option<&RequestId>,
        held: &mut Held,
    ) -> Option<Response<Body>> {
        if let Some(key) = caller_key(principal, peer) {
            let Some(slot) = self.stream_shares.take(&key, self.max_streams_per_caller) else {
                tracing::warn!("one caller's SSE streams at its share: 503");
                return Some(overloaded(
                    self.retry_hint(),
                    id.cloned(),
                    "too many streams open for this caller; retry later",
                ));
            };
            held.stream_share = Some(slot);
        }
        let Ok(permit) = Arc::clone(&self.streams).try_acquire_owned() else {
            tracing::warn!("SSE streams at the cap: 503");
            return Some(overloaded(
                self.retry_hint(),
                id.cloned(),
                "too many streams open; retry later",
            ));
        };
        held.stream = Some(permit);
        None
    }

    /// A legacy session's `tools/call` of a tool whose scopes `token` lacks:
    /// the same 403 `insufficient_scope` as the stateless wire gives (the
    /// challenge and a JSON-RPC error body, RFC 6750 §3.1). It reads the
    /// request as decoded, strictly, for the handler: the name checked is
    /// the name served.
    pub(super) fn legacy_scope_gate(
        &self,
        token: Option<&crate::auth::AccessToken>,
        request: &DecodedRequest,
    ) -> Option<Response<Body>> {
        let (Some(oauth), Some(token)) = (&self.oauth, token) else {
            return None;
        };
        let ClientRequest::CallTool(params) = request.request() else {
            return None;
        };
        let missing = oauth.missing_for_tool(token, &params.name);
        (!missing.is_empty()).then(|| insufficient_scope(oauth, request.id().clone(), &missing))
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one pass over the checks of the table in the module docs"
    )]
    pub(super) async fn handle(&self, request: Request<Body>) -> Response<Body> {
        // GET and DELETE name a legacy session (2025-11-25 transport).
        let legacy_method = self.legacy.is_some()
            && matches!(*request.method(), Method::GET | Method::DELETE)
            && request
                .headers()
                .contains_key(crate::legacy::http::SESSION_ID);
        if request.method() != Method::POST && !legacy_method {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED);
            response
                .headers_mut()
                .insert(http::header::ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        let (parts, body) = request.into_parts();
        let headers = &parts.headers;
        // Anonymous callers' replay records are bounded per address.
        // Behind a trusted proxy, the client its forwarded header names.
        let peer = parts
            .extensions
            .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
            .map(|info| {
                let ip = match &self.trusted {
                    Some(trusted) => trusted.client(info.0.ip(), headers),
                    None => info.0.ip(),
                };
                crate::share::peer_name(ip)
            });
        let forbidden = || {
            error_response(
                StatusCode::FORBIDDEN,
                None,
                ErrorObject::new(code::INVALID_REQUEST, "Forbidden origin"),
            )
        };
        // Exactly one Host (or, over HTTP/2, the URI's authority), at most
        // one Origin: a second one is refused, never read past, so a proxy
        // and this check cannot look at different values.
        let hosts = headers.get_all(HOST).iter().count();
        if hosts > 1 || (hosts == 0 && parts.uri.authority().is_none()) {
            return error_response(
                StatusCode::BAD_REQUEST,
                None,
                ErrorObject::new(code::INVALID_REQUEST, "Exactly one Host header is required"),
            );
        }
        if headers.get_all(ORIGIN).iter().count() > 1 {
            return forbidden();
        }
        let origin_ok = headers
            .get(ORIGIN)
            .is_none_or(|o| o.to_str().is_ok_and(|o| self.origins.origin_ok(o)));
        let host = headers
            .get(HOST)
            .and_then(|h| h.to_str().ok())
            .or_else(|| parts.uri.authority().map(http::uri::Authority::as_str));
        let host_ok = host.is_some_and(|h| self.hosts.host_ok(h));
        if !(origin_ok && host_ok) {
            return forbidden();
        }
        let mut token = None;
        let principal = if let Some(oauth) = &self.oauth {
            match oauth.authenticate(headers).await {
                Ok(t) => {
                    if let Some(scopes) = oauth.missing_required(&t) {
                        let mut response = plain(StatusCode::FORBIDDEN);
                        if let Ok(value) = HeaderValue::from_str(&oauth.insufficient(&scopes)) {
                            response.headers_mut().insert(WWW_AUTHENTICATE, value);
                        }
                        return response;
                    }
                    let p = t.principal();
                    token = Some(t);
                    p
                }
                Err(challenge) => {
                    return unauthorized(&Unauthorized {
                        challenge: Some(challenge),
                    });
                }
            }
        } else if let Some(p) = parts.extensions.get::<Principal>() {
            p.clone()
        } else if let Some(auth) = &self.auth {
            match auth.authenticate(&parts).await {
                Ok(p) => p,
                Err(refused) => return unauthorized(&refused),
            }
        } else {
            Principal::anonymous()
        };
        let mut held = Held::default();
        if let Some(id) = principal.id() {
            let Some(slot) = self
                .per_principal
                .take(id, self.max_in_flight_per_principal)
            else {
                tracing::warn!("one principal's requests in flight at the cap: 503");
                return overloaded(
                    self.retry_hint(),
                    None,
                    "too many requests in flight for this principal; retry later",
                );
            };
            held.principal = Some(slot);
        }
        let caller = Caller {
            principal,
            peer,
            token,
        };
        let response = self
            .handle_as(parts, body, caller, legacy_method, &mut held)
            .await;
        crate::transport::accept::holding(response, held)
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one pass over the checks of the table in the module docs"
    )]
    pub(super) async fn handle_as(
        &self,
        parts: http::request::Parts,
        body: Body,
        caller: Caller,
        legacy_method: bool,
        held: &mut Held,
    ) -> Response<Body> {
        let Caller {
            principal,
            peer,
            token,
        } = caller;
        let headers = &parts.headers;
        if let (true, Some(sessions)) = (legacy_method, &self.legacy) {
            // A standalone GET stream is an SSE body like any other: it
            // takes a slot of the caller's share and of the server's cap
            // (DELETE takes none).
            if parts.method == Method::GET
                && let Some(refused) =
                    self.refuse_without_stream_slot(&principal, peer.as_deref(), None, held)
            {
                return refused;
            }
            return sessions.other_method(
                &self.server,
                &parts.method,
                headers,
                &principal,
                self.keep_alive,
            );
        }
        if !header_lists(headers, ACCEPT, ["application/json", "text/event-stream"]) {
            return plain(StatusCode::NOT_ACCEPTABLE);
        }
        if !header_lists(headers, CONTENT_TYPE, ["application/json"]) {
            return plain(StatusCode::UNSUPPORTED_MEDIA_TYPE);
        }
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let caller = || caller_key(&principal, peer.as_deref());
        let read = match self.bodies.read(body, declared, caller).await {
            Ok(read) => read,
            Err(body::Refused::TooLarge) => return plain(StatusCode::PAYLOAD_TOO_LARGE),
            Err(body::Refused::Broken) => return plain(StatusCode::BAD_REQUEST),
            Err(body::Refused::Busy(why)) => {
                tracing::warn!("{why}: 503");
                return overloaded(self.retry_hint(), None, why);
            }
        };
        // A heavy body is decoded off the async workers.
        let bytes = read.bytes;
        let parsed = if read.held.is_heavy() {
            match tokio::task::spawn_blocking(move || Message::from_slice(&bytes)).await {
                Ok(parsed) => parsed,
                Err(_) => return plain(StatusCode::INTERNAL_SERVER_ERROR),
            }
        } else {
            Message::from_slice(&bytes)
        };
        held.body = Some(read.held);
        let message = match parsed {
            Ok(message) => message,
            Err(e) => return error_response(StatusCode::BAD_REQUEST, None, e.to_error_object()),
        };
        // Legacy sessions are routed before the modern header checks.
        let message = match &self.legacy {
            Some(sessions) => {
                // Made only for a request that goes to a session.
                let call = || {
                    let mut call =
                        CallContext::new(principal.clone()).with_retry_after(self.retry_hint());
                    call.peer.clone_from(&peer);
                    call.access_token = self.token_for_context(token.as_ref());
                    call
                };
                let gate =
                    |request: &DecodedRequest| self.legacy_scope_gate(token.as_ref(), request);
                // Boxed: a session's routing is a cold arm, and held inline
                // its state would grow every request's future.
                match Box::pin(sessions.route(
                    &self.server,
                    headers,
                    &principal,
                    peer.as_deref(),
                    call,
                    message,
                    self.keep_alive,
                    &gate,
                ))
                .await
                {
                    crate::legacy::http::Route::Done(response) => return response,
                    crate::legacy::http::Route::Modern(message) => message,
                }
            }
            None => message,
        };
        let request = match message {
            Message::Request(r) => r,
            Message::Notification(n) => {
                // Cancellation over HTTP is closing the stream (Cancellation ›
                // Transport-Specific Cancellation); nothing
                // else is defined from the client: accepted and ignored.
                tracing::debug!(method = %n.method, "notification accepted");
                return plain(StatusCode::ACCEPTED);
            }
            Message::Response(_) | Message::Error(_) => {
                let error = ErrorObject::new(
                    code::INVALID_REQUEST,
                    "a 2026-07-28 client sends no responses",
                );
                return error_response(StatusCode::BAD_REQUEST, None, error);
            }
        };
        let version = match Self::check_envelope_headers(headers, &request.method) {
            Ok(version) => version,
            Err(error) => return error_response(StatusCode::BAD_REQUEST, Some(request.id), error),
        };
        // Decoded once: the header checks below and the dispatcher read the
        // same typed request.
        let decoded = match self.server.decode(&request) {
            Ok(decoded) => decoded,
            Err(reply) => return reply_response(&reply),
        };
        if let Err(error) = Self::check_headers(headers, &version, &decoded) {
            return error_response(StatusCode::BAD_REQUEST, Some(request.id), error);
        }
        if let (Some(oauth), Some(token), ClientRequest::CallTool(p)) =
            (&self.oauth, &token, decoded.request())
        {
            let missing = oauth.missing_for_tool(token, &p.name);
            if !missing.is_empty() {
                return insufficient_scope(oauth, request.id, &missing);
            }
        }
        let streams = request.method == method::SUBSCRIPTIONS_LISTEN
            || decoded
                .request()
                .meta()
                .is_some_and(|m| m.progress_token.is_some() || m.log_level.is_some());
        let cancel = CancellationToken::new();
        let guard = cancel.clone().drop_guard();
        let (notifier, notifications) = if streams {
            // A stream slot is taken before any work: over the cap the
            // request is refused whole, not served without its stream.
            if let Some(refused) = self.refuse_without_stream_slot(
                &principal,
                peer.as_deref(),
                Some(&request.id),
                held,
            ) {
                return refused;
            }
            let (n, rx) = Notifier::channel(self.stream_buffer);
            (Some(n), Some(rx))
        } else {
            (None, None)
        };
        let server = self.server.clone();
        let mut call =
            CallContext::cancelled_by(principal, cancel).with_retry_after(self.retry_hint());
        call.notifier = notifier;
        call.peer = peer;
        call.access_token = self.token_for_context(token.as_ref());
        let handling: BoxFuture<'static, Reply> =
            Box::pin(async move { server.handle_decoded(decoded, call).await });
        let Some(mut notifications) = notifications else {
            let reply = handling.await;
            drop(guard.disarm());
            return reply_response(&reply);
        };
        // Answer with JSON if the final response comes before any
        // notification; otherwise open an SSE stream.
        let mut handling = handling;
        let first = tokio::select! {
            biased;
            Some(n) = notifications.recv() => First::Notification(n),
            reply = &mut handling => First::Reply(reply),
        };
        match first {
            First::Reply(reply) => {
                // Notifications raised right before the result still go out.
                let mut pending = Vec::new();
                while let Some(n) = notifications.try_recv() {
                    pending.push(n);
                }
                drop(guard.disarm());
                if pending.is_empty() {
                    return reply_response(&reply);
                }
                sse_response(SseStream::finished(pending, reply, self.keep_alive))
            }
            First::Notification(n) => sse_response(SseStream::new(
                n,
                handling,
                notifications,
                guard,
                self.keep_alive,
            )),
        }
    }
}
