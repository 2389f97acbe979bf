//! Legacy sessions over Streamable HTTP (2025-11-25 transport), next to the
//! modern stateless endpoint on the same URL.
//!
//! Routing, before any modern header check (Versioning and Compatibility ›
//! Backward Compatibility with Initialization-Based Versions):
//!
//! | request | goes to |
//! |---|---|
//! | `Mcp-Session-Id` of a live session of this principal | that session |
//! | otherwise, `MCP-Protocol-Version` of a modern (non-2025) version, or a `_meta` with the modern version key | the modern stateless path (so `initialize` there is 404 / `-32601`) |
//! | otherwise, an unknown or expired `Mcp-Session-Id` | 404 |
//! | otherwise, `initialize` | a new session (`Mcp-Session-Id` on the response) |
//! | otherwise, a request with a 2025 `MCP-Protocol-Version` | 400 (the session id is missing) |
//! | anything else | the modern path |
//!
//! On a session: a request is answered with JSON when its response comes
//! first, otherwise with an SSE stream carrying its notifications and its
//! server-to-client requests, then the response (no event ids: there is no
//! resumption); client responses and notifications get 202; `DELETE` ends the
//! session; `GET` opens the standalone SSE stream (one at a time, else 409)
//! carrying list-changed and resource-updated notifications. A disconnect is
//! not a cancellation (2025-11-25): the handler goes on, its late response is
//! dropped; `notifications/cancelled` cancels it. Session ids are 128 random
//! bits from the operating system, bound to the principal that opened the
//! session (another principal gets 404).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::{ErrorResponse, Message, Request};
use tern_protocol::{legacy, method};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;

use super::session::Prepared;
use super::{LegacyOptions, Session, Sink, has_modern_meta};
use crate::call::{CallContext, Reply};
use crate::dispatch::DecodedRequest;
use crate::principal::Principal;
use crate::server::Server;

/// The session header.
pub(crate) const SESSION_ID: &str = "mcp-session-id";

pub(crate) use crate::ids::random_id;

struct Entry {
    session: Arc<Session>,
    principal: Principal,
    /// Whose share the session counts against (principal, else peer).
    caller: Option<String>,
    last_used: Instant,
    standalone: Option<mpsc::Sender<String>>,
}

/// The legacy sessions of one HTTP endpoint.
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Entry>>,
    options: LegacyOptions,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// What sees a session's request once it is decoded, before it is served:
/// a response answers the request instead.
pub(crate) type Gate<'a> = dyn Fn(&DecodedRequest) -> Option<Response<Body>> + Sync + 'a;

/// Where a POST goes.
pub(crate) enum Route {
    /// The modern stateless path, with the message given back.
    Modern(Message),
    /// Answered on the legacy leg.
    Done(Response<Body>),
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response<Body> {
    let mut response = Response::new(Body::from(serde_json::to_vec(body).unwrap_or_default()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error(status: StatusCode, message: &str) -> Response<Body> {
    json_response(
        status,
        &ErrorResponse::new(None, ErrorObject::new(code::INVALID_REQUEST, message)),
    )
}

fn not_found() -> Response<Body> {
    // The 2025 SDKs answer an unknown session with -32001 and 404.
    json_response(
        StatusCode::NOT_FOUND,
        &ErrorResponse::new(None, ErrorObject::new(-32001, "Session not found")),
    )
}

fn plain(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

impl Sessions {
    pub(crate) fn new(options: LegacyOptions) -> Self {
        Self {
            map: Mutex::default(),
            options,
        }
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The live session `id` of `principal`, touched; expired ones go.
    fn lookup(&self, id: &str, principal: &Principal) -> Option<Arc<Session>> {
        let mut map = self.map();
        let now = Instant::now();
        let expired = map.get(id).is_some_and(|e| {
            e.session.is_closed() || now.duration_since(e.last_used) > self.options.session_idle
        });
        if expired {
            if let Some(e) = map.remove(id) {
                e.session.close();
            }
            return None;
        }
        let entry = map.get_mut(id).filter(|e| e.principal == *principal)?;
        entry.last_used = now;
        Some(Arc::clone(&entry.session))
    }

    fn sweep(&self, map: &mut HashMap<String, Entry>) {
        let now = Instant::now();
        map.retain(|_, e| {
            let live = !e.session.is_closed()
                && now.duration_since(e.last_used) <= self.options.session_idle;
            if !live {
                e.session.close();
            }
            live
        });
    }

    /// Routes one POST (module docs' table). `gate` sees each request bound
    /// for a session once it is decoded, strictly, the one reading the
    /// handler is served from: its response, when it has one, answers the
    /// request instead (the per-tool scope check of `auth`). A request that
    /// does not decode never reaches the gate: it is refused (`-32602`). `call` makes the
    /// context of a request that goes to a session, from `principal`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the POST's parts, each from a different layer of the endpoint"
    )]
    pub(crate) async fn route(
        &self,
        server: &Server,
        headers: &HeaderMap,
        principal: &Principal,
        peer: Option<&str>,
        call: impl FnOnce() -> CallContext + Send,
        message: Message,
        keep_alive: Duration,
        gate: &Gate<'_>,
    ) -> Route {
        let header_version = header(headers, "mcp-protocol-version");
        let params = match &message {
            Message::Request(r) => r.params.as_deref(),
            Message::Notification(n) => n.params.as_deref(),
            Message::Response(_) | Message::Error(_) => None,
        };
        let modern =
            header_version.is_some_and(|v| !legacy::is_session_era(v)) || has_modern_meta(params);
        if let Some(id) = header(headers, SESSION_ID) {
            return match self.lookup(id, principal) {
                Some(session) => Route::Done(
                    self.on_session(
                        server,
                        &session,
                        header_version,
                        call,
                        message,
                        keep_alive,
                        gate,
                    )
                    .await,
                ),
                None if modern => Route::Modern(message),
                None => Route::Done(not_found()),
            };
        }
        if modern {
            return Route::Modern(message);
        }
        match message {
            Message::Request(r) if r.method == method::INITIALIZE => {
                Route::Done(self.initialize(server, &r, principal.clone(), peer))
            }
            Message::Request(_) if header_version.is_some() => Route::Done(error(
                StatusCode::BAD_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            )),
            other => Route::Modern(other),
        }
    }

    fn initialize(
        &self,
        server: &Server,
        request: &Request,
        principal: Principal,
        peer: Option<&str>,
    ) -> Response<Body> {
        let caller = crate::share::caller_key(&principal, peer);
        {
            let mut map = self.map();
            if map.len() >= self.options.max_sessions {
                self.sweep(&mut map);
            }
            // A caller at its share gives up its own least recently used
            // session: one caller's initialize storm cannot fill the table,
            // and never refuses another caller.
            if let Some(caller) = &caller {
                let mine = map
                    .iter()
                    .filter(|(_, e)| e.caller.as_ref() == Some(caller));
                let (count, oldest) =
                    mine.fold((0, None::<(&String, Instant)>), |(n, old), (id, e)| {
                        let older = old.is_none_or(|(_, at)| e.last_used < at);
                        (n + 1, if older { Some((id, e.last_used)) } else { old })
                    });
                if count >= self.options.max_sessions_per_caller
                    && let Some((id, _)) = oldest
                {
                    let id = id.clone();
                    if let Some(e) = map.remove(&id) {
                        tracing::debug!("a caller at its session share: its oldest session ends");
                        e.session.close();
                    }
                }
            }
            if map.len() >= self.options.max_sessions {
                tracing::warn!(
                    max = self.options.max_sessions,
                    "legacy session limit reached"
                );
                return json_response(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &ErrorResponse::new(
                        Some(request.id.clone()),
                        ErrorObject::new(
                            code::INTERNAL_ERROR,
                            "Too many sessions; try again later",
                        ),
                    ),
                );
            }
        }
        let (session, reply) = match Session::open(server, request, self.options) {
            Ok(opened) => opened,
            Err(reply) => return json_response(StatusCode::BAD_REQUEST, &*reply),
        };
        let id = random_id();
        self.map().insert(
            id.clone(),
            Entry {
                session,
                principal,
                caller,
                last_used: Instant::now(),
                standalone: None,
            },
        );
        let mut response = json_response(StatusCode::OK, &reply);
        if let Ok(value) = HeaderValue::from_str(&id) {
            response.headers_mut().insert(SESSION_ID, value);
        }
        response
    }

    #[allow(
        clippy::too_many_arguments,
        reason = "the POST's parts, each from a different layer of the endpoint"
    )]
    async fn on_session(
        &self,
        server: &Server,
        session: &Arc<Session>,
        header_version: Option<&str>,
        call: impl FnOnce() -> CallContext + Send,
        message: Message,
        keep_alive: Duration,
        gate: &Gate<'_>,
    ) -> Response<Body> {
        // 2025-11-25: later requests carry the negotiated version.
        if let Some(v) = header_version
            && v != session.version()
        {
            return error(
                StatusCode::BAD_REQUEST,
                &format!(
                    "Bad Request: MCP-Protocol-Version {v} is not this session's ({})",
                    session.version()
                ),
            );
        }
        match message {
            Message::Notification(n) => {
                session.on_notification(&n);
                plain(StatusCode::ACCEPTED)
            }
            Message::Response(r) => {
                session.on_response(&r);
                plain(StatusCode::ACCEPTED)
            }
            Message::Error(e) => {
                session.on_error(&e);
                plain(StatusCode::ACCEPTED)
            }
            Message::Request(request) => {
                // One reading, then authorization, then the handler: one
                // request per POST (2025-11-25 has no batches), so a refusal
                // comes before any SSE stream is open.
                let prepared = match session.prepare(server, &request) {
                    Ok(prepared) => prepared,
                    Err(refused) => {
                        let reply =
                            super::downgrade::reply(session.version(), &request.method, *refused);
                        return json_response(StatusCode::OK, &reply);
                    }
                };
                if let Prepared::Modern(decoded) = &prepared
                    && let Some(refused) = gate(decoded)
                {
                    return refused;
                }
                serve(server, session, request, prepared, call(), keep_alive).await
            }
        }
    }

    /// GET (the standalone SSE stream) or DELETE (end the session) with an
    /// `Mcp-Session-Id`.
    pub(crate) fn other_method(
        &self,
        server: &Server,
        method_: &Method,
        headers: &HeaderMap,
        principal: &Principal,
        keep_alive: Duration,
    ) -> Response<Body> {
        let Some(id) = header(headers, SESSION_ID) else {
            return error(
                StatusCode::BAD_REQUEST,
                "Bad Request: Mcp-Session-Id header is required",
            );
        };
        let Some(session) = self.lookup(id, principal) else {
            return not_found();
        };
        if method_ == Method::DELETE {
            if let Some(entry) = self.map().remove(id) {
                entry.session.close();
            }
            tracing::debug!("legacy session ended by DELETE");
            return plain(StatusCode::OK);
        }
        let accepts = headers
            .get_all(ACCEPT)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| v.contains("text/event-stream"));
        if !accepts {
            return plain(StatusCode::NOT_ACCEPTABLE);
        }
        let (tx, rx) = mpsc::channel(256);
        {
            let mut map = self.map();
            let Some(entry) = map.get_mut(id) else {
                return not_found();
            };
            if entry.standalone.as_ref().is_some_and(|s| !s.is_closed()) {
                return error(
                    StatusCode::CONFLICT,
                    "Conflict: the session's SSE stream is already open",
                );
            }
            entry.standalone = Some(tx.clone());
        }
        if let Some(interval) = self.options.ping_interval {
            tokio::spawn(Arc::clone(&session).keep_alive(Sink::events(tx.clone()), interval));
        }
        // The forwarder and the pinger end with the stream (the sink is
        // closed when its body is dropped), so a client opening GET after
        // GET leaves at most one of each behind.
        tokio::spawn(Arc::clone(&session).forward_changes(server.clone(), Sink::events(tx)));
        sse(Stream::new(Vec::new(), rx, None, keep_alive))
    }
}

/// Serves one request of a session: JSON if its response comes first,
/// otherwise SSE.
async fn serve(
    server: &Server,
    session: &Arc<Session>,
    request: Request,
    prepared: Prepared,
    call: CallContext,
    keep_alive: Duration,
) -> Response<Body> {
    let Some(in_flight) = session.start(&request.id) else {
        return json_response(
            StatusCode::BAD_REQUEST,
            &ErrorResponse::new(
                Some(request.id),
                ErrorObject::new(
                    code::INVALID_REQUEST,
                    "a request with this id is still in flight",
                ),
            ),
        );
    };
    let (tx, mut rx) = mpsc::channel(256);
    let (done_tx, mut done_rx) = oneshot::channel::<Reply>();
    let (server, session) = (server.clone(), Arc::clone(session));
    // The handling is the session's, not the connection's: a disconnect
    // does not cancel it (2025-11-25); `notifications/cancelled` does.
    tokio::spawn(async move {
        let token = in_flight.token().clone();
        let call = call.with_cancel(token.clone());
        let sink = Sink::events(tx);
        tokio::select! {
            reply = session.serve_prepared(&server, &request, prepared, call, &sink) => {
                let _ = done_tx.send(reply);
            }
            () = token.cancelled() => {
                tracing::debug!(id = %request.id, "legacy request cancelled; no response");
            }
        }
        drop(in_flight);
    });
    let first = tokio::select! {
        biased;
        Some(message) = rx.recv() => Ok(message),
        reply = &mut done_rx => Err(reply),
    };
    match first {
        Err(Ok(reply)) => {
            let mut queued = Vec::new();
            while let Ok(m) = rx.try_recv() {
                queued.push(m);
            }
            if queued.is_empty() {
                json_response(StatusCode::OK, &reply)
            } else {
                queued.push(serde_json::to_string(&reply).unwrap_or_default());
                sse(Stream::finished(queued, keep_alive))
            }
        }
        // Cancelled before anything was said: an empty stream.
        Err(Err(_)) => sse(Stream::finished(Vec::new(), keep_alive)),
        Ok(message) => sse(Stream::new(vec![message], rx, Some(done_rx), keep_alive)),
    }
}

fn sse(stream: Stream) -> Response<Body> {
    crate::transport::http::sse::response(Body::from_stream(stream))
}

/// An SSE body: queued messages, then the channel, then (for a request's
/// stream) the final response, after which it ends.
struct Stream {
    queued: std::collections::VecDeque<String>,
    rx: Option<mpsc::Receiver<String>>,
    done: Option<oneshot::Receiver<Reply>>,
    /// A request's stream ends after its response; the standalone one when
    /// the session does.
    request: bool,
    keep_alive: tokio::time::Interval,
}

impl Stream {
    fn new(
        queued: Vec<String>,
        rx: mpsc::Receiver<String>,
        done: Option<oneshot::Receiver<Reply>>,
        keep_alive: Duration,
    ) -> Self {
        let request = done.is_some();
        Self {
            queued: queued.into(),
            rx: Some(rx),
            done,
            request,
            keep_alive: crate::transport::http::sse::keep_alive(keep_alive),
        }
    }

    fn finished(queued: Vec<String>, keep_alive: Duration) -> Self {
        Self {
            queued: queued.into(),
            rx: None,
            done: None,
            request: true,
            keep_alive: crate::transport::http::sse::keep_alive(keep_alive),
        }
    }
}

impl futures_core::Stream for Stream {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(text) = this.queued.pop_front() {
            return Poll::Ready(Some(Ok(crate::transport::http::sse::event_text(&text))));
        }
        if let Some(rx) = this.rx.as_mut() {
            match rx.poll_recv(cx) {
                Poll::Ready(Some(text)) => {
                    return Poll::Ready(Some(Ok(crate::transport::http::sse::event_text(&text))));
                }
                Poll::Ready(None) => {
                    this.rx = None;
                    if !this.request {
                        return Poll::Ready(None);
                    }
                }
                Poll::Pending => {}
            }
        }
        if let Some(done) = this.done.as_mut()
            && let Poll::Ready(reply) = Pin::new(done).poll(cx)
        {
            this.done = None;
            if let Some(mut rx) = this.rx.take() {
                while let Ok(text) = rx.try_recv() {
                    this.queued.push_back(text);
                }
            }
            if let Ok(reply) = reply {
                this.queued
                    .push_back(serde_json::to_string(&reply).unwrap_or_default());
            }
            return self.poll_next(cx);
        }
        if this.request && this.rx.is_none() && this.done.is_none() {
            return Poll::Ready(None);
        }
        if this.keep_alive.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(crate::transport::http::sse::keep_alive_comment())));
        }
        Poll::Pending
    }
}
