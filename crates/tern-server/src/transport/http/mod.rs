//! Streamable HTTP, 2026-07-28 form (spec §6.2): one POST endpoint, served by
//! tern's own accept loop ([`serve`]), or as a tower [`tower::Service`] you
//! mount in your own axum `Router` and serve with [`serve_service`].
//!
//! ```no_run
//! # async fn run(server: tern_server::Server) -> std::io::Result<()> {
//! use tern_server::transport::http::{Http, serve};
//!
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! serve(listener, Http::new(server), "/mcp", std::future::pending()).await
//! # }
//! ```
//!
//! Your own router, still behind tern's accept loop (its timeouts, caps and
//! the peer address):
//!
//! ```no_run
//! # async fn run(server: tern_server::Server) -> std::io::Result<()> {
//! use tern_server::transport::http::{Http, ServeOptions, serve_service};
//!
//! let mcp = Http::new(server.clone()).into_service();
//! let app = axum::Router::new().route_service("/mcp", mcp);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
//! serve_service(listener, app, ServeOptions::default(), async move {
//!     std::future::pending::<()>().await;
//!     server.shutdown();
//! })
//! .await
//! # }
//! ```
//!
//! Anonymous callers are told apart by their address, which the endpoint
//! reads from axum's `ConnectInfo<SocketAddr>` request extension: tern's
//! loop supplies it; `axum::serve` does not (unless the router is served
//! with `into_make_service_with_connect_info`). Without it every anonymous
//! caller counts as one: one share of the replay store, of listen streams
//! and of SSE responses, so one of them filling its share refuses them all.
//! An IPv6 caller is keyed by its /64 (one host holds the whole prefix).
//! Behind a proxy every caller has the proxy's address, unless the proxy is
//! trusted ([`Http::trusted_proxies`]): then the client is read from the
//! one forwarded header it sets ([`crate::transport::forwarded`]).
//!
//! What it checks, in order, and how it answers:
//!
//! | case | status | JSON-RPC |
//! |---|---|---|
//! | GET, DELETE or any other method than POST | 405 | — |
//! | `Origin` or `Host` not allowed (DNS rebinding; default: loopback only) | 403 | id-less `-32600` |
//! | authentication refused | 401 | — |
//! | under [`Http::oauth`], a token lacking the resource's scopes | 403 `insufficient_scope` | — |
//! | `Accept` lacks `application/json` or `text/event-stream` | 406 | — |
//! | `Content-Type` is not JSON | 415 | — |
//! | body over the limit (default 4 MiB), refused before it is read whole | 413 | — |
//! | the request-body bytes held at once at [`Http::body_budget`] (default 128 MiB, 16 MiB per caller; a declared length counts at once) | 503 + `Retry-After` | id-less `-32603`, `data.retryAfterMs` |
//! | a heavy body (over 256 KiB) with [`Http::heavy_bodies`] in flight (default 4, 2 per caller) | 503 + `Retry-After` | id-less `-32603`, `data.retryAfterMs` |
//! | not JSON / not a JSON-RPC message | 400 | `-32700` / `-32600` |
//! | a notification | 202 | — |
//! | `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` or `Mcp-Param-*` missing, malformed or not matching the body | 400 | `-32020` |
//! | missing or malformed `_meta` | 400 | `-32602` |
//! | unsupported version / missing client capability | 400 | `-32022` / `-32021` |
//! | unknown or removed method | 404 | `-32601` |
//! | under [`Http::oauth`], `tools/call` of a tool whose scopes the token lacks (on a 2025 session too) | 403 `insufficient_scope` | `-32600`, `data.requiredScopes` |
//! | the principal's requests in flight at [`Http::max_in_flight_per_principal`] (default 32) | 503 + `Retry-After` | id-less `-32603`, `data.retryAfterMs` |
//! | a streaming request with the caller's SSE responses at [`Http::max_streams_per_caller`] (default 32; the caller is the principal, else the peer address) | 503 + `Retry-After` | `-32603`, `data.retryAfterMs` |
//! | a streaming request with SSE responses at [`Http::max_streams`] (default 128) | 503 + `Retry-After` | `-32603`, `data.retryAfterMs` |
//! | `subscriptions/listen` over the caller's share ([`crate::ServerBuilder::max_listens_per_caller`], default 16) or the server's cap ([`crate::ServerBuilder::max_listens`], default 64) | 503 + `Retry-After` | `-32603`, `data.retryAfterMs` |
//! | `subscriptions/listen` naming an unknown or repeated resource URI, or more than [`crate::ServerBuilder::max_listen_uris`] (default 256) | 200 | `-32602` (the URI not echoed) |
//! | anything else | 200 | the result or error |
//!
//! A request that can receive notifications (it carries a `progressToken` or a
//! `logLevel`, or is `subscriptions/listen`) is answered with an SSE stream as
//! soon as its first notification is ready (`X-Accel-Buffering: no`, keep-alive
//! comments every 15 s, the final response ending the stream); otherwise, and
//! when the final response comes first, with JSON. `Mcp-Session-Id` and
//! `Last-Event-ID` are ignored. A client that disconnects cancels its request:
//! `Ctx::cancelled` fires and nothing more is written; an unguarded handler's
//! future is dropped, a guarded leg finishes in a server-owned task and its
//! outcome is stored for the retry ([`crate::engine`]).
//!
//! Two eras: unless the server is [`crate::ServerBuilder::modern_only`], 2025
//! clients get sessions on the same endpoint, routed before any of the checks
//! above from the body's parse on (`Mcp-Session-Id`, GET, DELETE; see
//! [`crate::legacy`] for the routing table).

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use base64::Engine as _;
use http::header::{
    ACCEPT, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, WWW_AUTHENTICATE,
};
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode};
use serde_json::Value;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::header::HeaderParam;
use tern_protocol::jsonrpc::{ErrorResponse, Message};
use tern_protocol::{ClientRequest, JsonObject, RequestId, ServerNotification, method};
use tokio_util::sync::{CancellationToken, DropGuard};

pub use super::forwarded::{ForwardedHeader, InvalidNetwork, TrustedProxies};
use crate::call::{CallContext, Reply};
use crate::ctx::{Notifications, Notifier};
use crate::dispatch::DecodedRequest;
use crate::principal::Principal;
use crate::registry::HeaderParamType;
use crate::replay::BoxFuture;
use crate::server::Server;
use crate::share::{ShareSlot, Shares, caller_key};

mod body;
pub use crate::transport::accept::{ServeOptions, serve_service};
pub use body::{
    DEFAULT_BODY_BUDGET, DEFAULT_BODY_BUDGET_PER_CALLER, DEFAULT_HEAVY_BODY, DEFAULT_MAX_HEAVY,
    DEFAULT_MAX_HEAVY_PER_CALLER,
};

/// Default body limit: 4 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// Default interval of SSE keep-alive comments: 15 s.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Why a request was not authenticated: answered with 401.
#[derive(Debug, Clone, Default)]
pub struct Unauthorized {
    /// The `WWW-Authenticate` challenge, e.g. `Bearer realm="mcp"`.
    pub challenge: Option<String>,
}

/// Turns request parts into a [`Principal`], or refuses with 401. Every
/// request is authenticated on its own (there is no session).
pub trait Authenticate: Send + Sync + 'static {
    /// Authenticates one request.
    fn authenticate<'a>(
        &'a self,
        parts: &'a http::request::Parts,
    ) -> BoxFuture<'a, Result<Principal, Unauthorized>>;
}

/// Bearer-token authentication with a check you supply: `check(token)` gives
/// the principal, or `None` to refuse.
pub struct Bearer<F>(pub F);

impl<F> std::fmt::Debug for Bearer<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Bearer(..)")
    }
}

impl<F: Fn(&str) -> Option<Principal> + Send + Sync + 'static> Authenticate for Bearer<F> {
    fn authenticate<'a>(
        &'a self,
        parts: &'a http::request::Parts,
    ) -> BoxFuture<'a, Result<Principal, Unauthorized>> {
        let token = parts
            .headers
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| {
                v.strip_prefix("Bearer ")
                    .or_else(|| v.strip_prefix("bearer "))
            })
            .map(str::trim);
        let result = token.and_then(&self.0).ok_or(Unauthorized {
            challenge: Some("Bearer".into()),
        });
        Box::pin(std::future::ready(result))
    }
}

/// A tower layer that authenticates requests and puts the [`Principal`] in
/// their extensions, where [`McpService`] finds it; refusals are 401. Use it
/// to share one authentication across several services.
#[derive(Clone)]
pub struct AuthLayer(Arc<dyn Authenticate>);

impl std::fmt::Debug for AuthLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthLayer(..)")
    }
}

impl AuthLayer {
    /// A layer using `auth`.
    pub fn new(auth: impl Authenticate) -> Self {
        Self(Arc::new(auth))
    }
}

impl<S> tower::Layer<S> for AuthLayer {
    type Service = AuthService<S>;

    fn layer(&self, inner: S) -> AuthService<S> {
        AuthService {
            auth: Arc::clone(&self.0),
            inner,
        }
    }
}

/// The service of [`AuthLayer`].
#[derive(Clone)]
pub struct AuthService<S> {
    auth: Arc<dyn Authenticate>,
    inner: S,
}

impl<S> std::fmt::Debug for AuthService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthService(..)")
    }
}

impl<S> tower::Service<Request<Body>> for AuthService<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let auth = Arc::clone(&self.auth);
        let mut inner = self.inner.clone();
        Box::pin(async move {
            let (mut parts, body) = request.into_parts();
            match auth.authenticate(&parts).await {
                Ok(principal) => {
                    parts.extensions.insert(principal);
                    inner.call(Request::from_parts(parts, body)).await
                }
                Err(refused) => Ok(unauthorized(&refused)),
            }
        })
    }
}

/// Which `Origin` / `Host` values are accepted.
#[derive(Debug, Clone)]
enum Allow {
    /// Loopback, plus the listed values.
    Loopback(Vec<String>),
    /// Anything (behind a proxy that checks it, say).
    Any,
}

/// Configures the HTTP endpoint of a [`Server`].
pub struct Http {
    server: Server,
    /// The body stage: size limit, byte budget, heavy permits.
    bodies: body::Bodies,
    keep_alive: Duration,
    origins: Allow,
    hosts: Allow,
    auth: Option<Arc<dyn Authenticate>>,
    oauth: Option<Arc<crate::auth::ResourceServer>>,
    legacy: Option<Arc<crate::legacy::http::Sessions>>,
    /// One permit per open SSE response.
    streams: Arc<tokio::sync::Semaphore>,
    max_streams: usize,
    per_principal: Arc<Shares>,
    max_in_flight_per_principal: usize,
    /// SSE responses open per caller (principal, else peer address).
    stream_shares: Arc<Shares>,
    max_streams_per_caller: usize,
    stream_buffer: usize,
    /// `None`: the accept loop's ([`ServeOptions::retry_after`]) under
    /// [`serve_with`], else 1 s.
    retry_after: Option<Duration>,
    /// The proxies whose forwarded header names the client.
    trusted: Option<Arc<TrustedProxies>>,
}

/// Default cap on SSE responses open at once: 128 (half the accept loop's
/// requests in flight, so plain calls still get through).
pub const DEFAULT_MAX_STREAMS: usize = 128;
/// Default cap on the SSE responses one caller (an authenticated
/// principal, else one peer address) holds open: 32, a quarter of
/// [`DEFAULT_MAX_STREAMS`], so one caller cannot take every stream.
pub const DEFAULT_MAX_STREAMS_PER_CALLER: usize = 32;
/// Default cap on one authenticated principal's requests in flight: 32 (an
/// SSE stream counts until it ends).
pub const DEFAULT_MAX_IN_FLIGHT_PER_PRINCIPAL: usize = 32;
/// Default number of notifications one response buffers for a client that
/// reads slower than they come: 256. Past it notifications are dropped
/// (progress is lossy by nature); a client that stops reading altogether is
/// dropped by the accept loop's write timeout, which cancels its request.
pub const DEFAULT_STREAM_BUFFER: usize = 256;

/// Who sent a request: the principal, the peer address (for logs) and,
/// under OAuth, the access token that named the principal.
struct Caller {
    principal: Principal,
    peer: Option<Arc<str>>,
    token: Option<crate::auth::AccessToken>,
}

/// What a response holds until its body ends: the principal's slot and,
/// for SSE, the stream permit.
#[derive(Default)]
struct Held {
    #[allow(dead_code, reason = "held for its drop")]
    principal: Option<ShareSlot>,
    #[allow(dead_code, reason = "held for its drop")]
    stream: Option<tokio::sync::OwnedSemaphorePermit>,
    #[allow(dead_code, reason = "held for its drop")]
    stream_share: Option<ShareSlot>,
    #[allow(dead_code, reason = "held for its drop")]
    body: Option<body::Held>,
}

/// `503` + `Retry-After` with an id-less `-32603` carrying
/// `data.retryAfterMs`, as the accept loop answers when full.
fn overloaded(retry_after: Duration, id: Option<RequestId>, why: &str) -> Response<Body> {
    let ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
    let error = ErrorObject::new(code::INTERNAL_ERROR, why)
        .with_data(serde_json::json!({ "retryAfterMs": ms }));
    let mut response = error_response(StatusCode::SERVICE_UNAVAILABLE, id, error);
    if let Ok(v) = HeaderValue::from_str(&retry_after.as_secs().max(1).to_string()) {
        response.headers_mut().insert(http::header::RETRY_AFTER, v);
    }
    response
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http")
            .field("body_limit", &self.bodies.limit)
            .field("origins", &self.origins)
            .field("hosts", &self.hosts)
            .finish_non_exhaustive()
    }
}

impl Http {
    /// The endpoint of `server`, with the defaults: 4 MiB bodies, loopback
    /// origins and hosts only, anonymous callers.
    pub fn new(server: Server) -> Self {
        Self {
            bodies: body::Bodies::default(),
            keep_alive: DEFAULT_KEEP_ALIVE,
            origins: Allow::Loopback(Vec::new()),
            hosts: Allow::Loopback(Vec::new()),
            auth: None,
            oauth: None,
            streams: Arc::new(tokio::sync::Semaphore::new(DEFAULT_MAX_STREAMS)),
            max_streams: DEFAULT_MAX_STREAMS,
            per_principal: Arc::default(),
            max_in_flight_per_principal: DEFAULT_MAX_IN_FLIGHT_PER_PRINCIPAL,
            stream_shares: Arc::default(),
            max_streams_per_caller: DEFAULT_MAX_STREAMS_PER_CALLER,
            stream_buffer: DEFAULT_STREAM_BUFFER,
            retry_after: None,
            trusted: None,
            legacy: server
                .legacy_options()
                .map(|o| Arc::new(crate::legacy::http::Sessions::new(o))),
            server,
        }
    }

    /// The largest request body accepted (default 4 MiB).
    #[must_use]
    pub fn body_limit(mut self, bytes: usize) -> Self {
        self.bodies.limit = bytes;
        self
    }

    /// Bounds the request-body bytes held at once: `total` for all callers
    /// (default [`DEFAULT_BODY_BUDGET`], 128 MiB) and `per_caller` for one
    /// (principal, else peer address; default
    /// [`DEFAULT_BODY_BUDGET_PER_CALLER`], 16 MiB). A body is counted from
    /// when it is read (its declared length at once) until its response
    /// ends; past either, `503` + `Retry-After`. Set them at least as large
    /// as [`Self::body_limit`].
    #[must_use]
    pub fn body_budget(mut self, total: usize, per_caller: usize) -> Self {
        self.bodies.bytes = body::Budget::new(total, per_caller);
        self
    }

    /// Bodies over `from` bytes (default [`DEFAULT_HEAVY_BODY`], 256 KiB)
    /// are heavy: decoded off the async workers, at most `total` at once
    /// (default [`DEFAULT_MAX_HEAVY`], 4) and `per_caller` for one caller
    /// (default [`DEFAULT_MAX_HEAVY_PER_CALLER`], 2); past them, `503` +
    /// `Retry-After`, so one caller's huge bodies do not starve the small
    /// requests of others.
    #[must_use]
    pub fn heavy_bodies(mut self, from: usize, total: usize, per_caller: usize) -> Self {
        self.bodies.heavy_from = from;
        self.bodies.heavy = body::Budget::new(total.max(1), per_caller.max(1));
        self
    }

    /// Most SSE responses open at once (default [`DEFAULT_MAX_STREAMS`]);
    /// a request that would open one more is answered `503` +
    /// `Retry-After`.
    #[must_use]
    pub fn max_streams(mut self, n: usize) -> Self {
        self.max_streams = n.max(1);
        self.streams = Arc::new(tokio::sync::Semaphore::new(self.max_streams));
        self
    }

    /// Most SSE responses one caller holds open (default
    /// [`DEFAULT_MAX_STREAMS_PER_CALLER`]): an authenticated principal, else
    /// the peer address (from `ConnectInfo`, which [`serve`] supplies). One
    /// more is answered `503` + `Retry-After`, and other callers still get
    /// what is left of [`Self::max_streams`].
    #[must_use]
    pub fn max_streams_per_caller(mut self, n: usize) -> Self {
        self.max_streams_per_caller = n.max(1);
        self
    }

    /// Most requests in flight for one authenticated principal (default
    /// [`DEFAULT_MAX_IN_FLIGHT_PER_PRINCIPAL`]); one more is answered `503`
    /// and `Retry-After`, and other principals are not affected. Anonymous
    /// callers are bounded per address by the accept loop instead.
    #[must_use]
    pub fn max_in_flight_per_principal(mut self, n: usize) -> Self {
        self.max_in_flight_per_principal = n.max(1);
        self
    }

    /// What every overload refusal of this endpoint says: `Retry-After`
    /// (whole seconds, at least 1) and `data.retryAfterMs`, for its own
    /// caps and for a listen the server refuses (default: the accept loop's
    /// [`ServeOptions::retry_after`] under [`serve`] / [`serve_with`], else
    /// 1 s).
    #[must_use]
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// Reads the client of a request from a trusted proxy in the one
    /// forwarded header it sets ([`TrustedProxies`]): every per-caller
    /// share (SSE streams, listen streams, the replay store's per-peer
    /// bound, legacy sessions) then counts that client, not the proxy.
    /// Default: none, every request's client is its TCP peer. Under
    /// [`serve_with`] the accept loop's ([`ServeOptions::trusted_proxies`])
    /// apply unless the endpoint has its own.
    #[must_use]
    pub fn trusted_proxies(mut self, proxies: TrustedProxies) -> Self {
        self.trusted = Some(Arc::new(proxies));
        self
    }

    fn retry_hint(&self) -> Duration {
        self.retry_after.unwrap_or(Duration::from_secs(1))
    }

    /// Notifications buffered per response for a slow reader (default
    /// [`DEFAULT_STREAM_BUFFER`]).
    #[must_use]
    pub fn stream_buffer(mut self, n: usize) -> Self {
        self.stream_buffer = n.max(1);
        self
    }

    /// The interval of SSE keep-alive comments (default 15 s).
    #[must_use]
    pub fn keep_alive(mut self, interval: Duration) -> Self {
        self.keep_alive = interval;
        self
    }

    /// Also accepts browser requests from `origin` (e.g.
    /// `https://app.example.com`).
    #[must_use]
    pub fn allow_origin(mut self, origin: impl Into<String>) -> Self {
        if let Allow::Loopback(list) = &mut self.origins {
            list.push(origin.into());
        }
        self
    }

    /// Also accepts requests addressed to `host` (the `Host` header, port
    /// optional), e.g. the public name of a deployed server.
    #[must_use]
    pub fn allow_host(mut self, host: impl Into<String>) -> Self {
        if let Allow::Loopback(list) = &mut self.hosts {
            list.push(host.into());
        }
        self
    }

    /// Accepts any `Origin` and `Host`. Dangerous: it disables DNS-rebinding
    /// protection; use it only behind a proxy that checks them.
    #[must_use]
    pub fn dangerous_allow_any_origin(mut self) -> Self {
        self.origins = Allow::Any;
        self.hosts = Allow::Any;
        self
    }

    /// Authenticates every request with `auth` (default: anonymous, unless an
    /// [`AuthLayer`] in front put a [`Principal`] in the request).
    #[must_use]
    pub fn authenticate(mut self, auth: impl Authenticate) -> Self {
        self.auth = Some(Arc::new(auth));
        self
    }

    /// Protects the endpoint with OAuth ([`crate::auth`]): every request's
    /// bearer token is checked by `resource`'s verifier (401 with its
    /// challenge otherwise), tools needing more scopes answer 403
    /// `insufficient_scope`, and the principal is the token's issuer and
    /// subject. [`serve`] also serves its Protected Resource Metadata; mount
    /// [`crate::auth::ResourceServer::metadata_router`] yourself otherwise.
    #[must_use]
    pub fn oauth(mut self, resource: crate::auth::ResourceServer) -> Self {
        self.oauth = Some(Arc::new(resource));
        self
    }

    /// The tower service.
    pub fn into_service(self) -> McpService {
        McpService {
            inner: Arc::new(self),
        }
    }
}

/// The MCP endpoint as a tower service (`Request<Body>` to `Response<Body>`).
#[derive(Clone, Debug)]
pub struct McpService {
    inner: Arc<Http>,
}

impl tower::Service<Request<Body>> for McpService {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let http = Arc::clone(&self.inner);
        Box::pin(async move { Ok(http.handle(request).await) })
    }
}

/// [`serve_with`]'s service: the endpoint at its path, the OAuth metadata
/// routes (if any) beside it, `404` elsewhere. The endpoint is found with
/// one comparison per request; an `axum::Router` here cost a route clone, a
/// boxed future and extension inserts on every call (`bench`'s tern-axum
/// line measures that way of mounting).
#[derive(Clone, Debug)]
struct Endpoint {
    path: Arc<str>,
    mcp: McpService,
    rest: Option<axum::Router>,
}

impl tower::Service<Request<Body>> for Endpoint {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        if request.uri().path() == &*self.path {
            return self.mcp.call(request);
        }
        match self.rest.clone() {
            Some(router) => Box::pin(tower::ServiceExt::oneshot(router, request)),
            None => Box::pin(std::future::ready(Ok(plain(StatusCode::NOT_FOUND)))),
        }
    }
}

/// Serves `server` at `path` on `listener` until `shutdown` resolves, with
/// tern's accept loop and its default limits ([`ServeOptions`]: header,
/// body and write timeouts, connection and in-flight caps); open
/// subscriptions are then closed gracefully and connections drained.
pub async fn serve(
    listener: tokio::net::TcpListener,
    http: Http,
    path: &str,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with(listener, http, path, ServeOptions::default(), shutdown).await
}

/// [`serve`] with other limits.
pub async fn serve_with(
    listener: tokio::net::TcpListener,
    http: Http,
    path: &str,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let server = http.server.clone();
    // One configured hint for the whole stack: the endpoint follows the
    // accept loop's unless it was given its own.
    let mut http = http;
    http.retry_after.get_or_insert(options.retry_after);
    if http.trusted.is_none() {
        http.trusted.clone_from(&options.trusted_proxies);
    }
    // The path is compared as it is: no captures or wildcards (an
    // application that wants them mounts `Http::into_service` in its own
    // router).
    if !path.starts_with('/') || path.contains(['{', '}', '*']) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("the endpoint's path must start with '/' and be literal, not {path:?}"),
        ));
    }
    let app = Endpoint {
        path: Arc::from(path),
        rest: http.oauth.as_ref().map(|r| r.metadata_router()),
        mcp: http.into_service(),
    };
    serve_service(listener, app, options, async move {
        shutdown.await;
        server.shutdown();
    })
    .await
}

fn json_response(status: StatusCode, body: &impl serde::Serialize) -> Response<Body> {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let mut response = Response::new(Body::from(bytes));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

fn error_response(status: StatusCode, id: Option<RequestId>, error: ErrorObject) -> Response<Body> {
    json_response(status, &ErrorResponse::new(id, error))
}

fn plain(status: StatusCode) -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = status;
    response
}

fn unauthorized(refused: &Unauthorized) -> Response<Body> {
    let mut response = plain(StatusCode::UNAUTHORIZED);
    if let Some(value) = refused
        .challenge
        .as_deref()
        .and_then(|c| HeaderValue::from_str(c).ok())
    {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

/// 403 for a step-up: the challenge naming every scope the call needs, and
/// a JSON-RPC error a client without OAuth can read.
fn insufficient_scope(
    oauth: &crate::auth::ResourceServer,
    id: RequestId,
    scopes: &[String],
) -> Response<Body> {
    let error = ErrorObject::new(
        code::INVALID_REQUEST,
        format!("insufficient scope: this call needs {}", scopes.join(" ")),
    )
    .with_data(serde_json::json!({ "requiredScopes": scopes }));
    let mut response = error_response(StatusCode::FORBIDDEN, Some(id), error);
    if let Ok(value) = HeaderValue::from_str(&oauth.insufficient(scopes)) {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

/// The host of an authority `host[:port]` (RFC 3986 §3.2.2, without
/// userinfo: neither `Host` nor an `Origin` has one), read strictly: an
/// IPv6 literal only in brackets with nothing after them but `:port`, a
/// port all digits, a name of the characters a reg-name allows. Anything
/// else is `None`, and refused: `[::1].evil.example` is not loopback.
fn host_of(authority: &str) -> Option<&str> {
    let port_ok =
        |port: &str| (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = authority.strip_prefix('[') {
        let (literal, after) = rest.split_once(']')?;
        let port_fine = after.is_empty() || after.strip_prefix(':').is_some_and(port_ok);
        return (port_fine && literal.parse::<std::net::Ipv6Addr>().is_ok()).then_some(literal);
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port_ok(port) => host,
        Some(_) => return None,
        None => authority,
    };
    let name_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b));
    name_ok.then_some(host)
}

/// The authority of an `Origin` (RFC 6454 §7: `scheme "://" host [":"
/// port]`, nothing after it); `null` and anything else is `None`.
fn origin_authority(origin: &str) -> Option<&str> {
    let (scheme, authority) = origin.split_once("://")?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    (scheme_ok && host_of(authority).is_some()).then_some(authority)
}

fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Allow {
    /// An allowed origin is one of the list, exactly (case aside), or a
    /// well-formed origin whose host is loopback.
    fn origin_ok(&self, origin: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Loopback(list) => {
                list.iter().any(|o| o.eq_ignore_ascii_case(origin))
                    || origin_authority(origin)
                        .and_then(host_of)
                        .is_some_and(is_loopback)
            }
        }
    }

    /// An allowed host is a well-formed authority whose host is loopback,
    /// or one of the list, exactly, with or without its port.
    fn host_ok(&self, host: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Loopback(list) => {
                let Some(name) = host_of(host) else {
                    return false;
                };
                is_loopback(name)
                    || list
                        .iter()
                        .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
            }
        }
    }
}

/// Whether the values of header `name` list every media type of `wanted`
/// (parameters and case aside), in one pass over them.
fn header_lists<const N: usize>(
    headers: &HeaderMap,
    name: http::HeaderName,
    wanted: [&str; N],
) -> bool {
    let mut seen = [false; N];
    for item in headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let media = item.split(';').next().unwrap_or_default().trim();
        for (seen, wanted) in seen.iter_mut().zip(wanted) {
            *seen |= media.eq_ignore_ascii_case(wanted);
        }
    }
    seen.iter().all(|s| *s)
}

/// A header value as the spec encodes it: plain visible ASCII, or
/// `=?base64?…?=` for anything else. Surrounding whitespace is tolerated.
fn decode_header(value: &HeaderValue) -> Result<std::borrow::Cow<'_, str>, &'static str> {
    let text = value.to_str().map_err(|_| "has invalid characters")?.trim();
    if let Some(inner) = text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(inner)
            .map_err(|_| "has invalid base64")?;
        return String::from_utf8(bytes)
            .map(std::borrow::Cow::Owned)
            .map_err(|_| "is not UTF-8");
    }
    if text.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        return Err("has invalid characters");
    }
    Ok(std::borrow::Cow::Borrowed(text))
}

fn mismatch(message: String) -> ErrorObject {
    ErrorObject::header_mismatch(message)
}

/// The one value of header `name`: sent twice it is refused, so a gateway
/// that reads the first and a server that reads the last cannot disagree.
fn single<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a HeaderValue>, ErrorObject> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(mismatch(format!("{name} header sent more than once")));
    }
    Ok(first)
}

/// Checks one header against the body value (after decoding).
fn check_named(headers: &HeaderMap, name: &str, body: Option<&str>) -> Result<(), ErrorObject> {
    match (single(headers, name)?, body) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(mismatch(format!("Missing {name} header"))),
        (Some(value), body) => {
            let decoded =
                decode_header(value).map_err(|why| mismatch(format!("{name} header {why}")))?;
            match body {
                Some(body) if body == decoded => Ok(()),
                Some(body) => Err(mismatch(format!(
                    "Header mismatch: {name} header value '{}' does not match body value '{}'",
                    crate::dispatch::short(&decoded),
                    crate::dispatch::short(body)
                ))),
                None => Err(mismatch(format!(
                    "{name} header sent but the body has no such value"
                ))),
            }
        }
    }
}

impl Http {
    /// The header checks that need no decoded body (spec §6.2; conformance
    /// §5.2: before the version is checked): `MCP-Protocol-Version` present
    /// and well formed, `Mcp-Method` matching the envelope.
    fn check_envelope_headers<'h>(
        headers: &'h HeaderMap,
        method_name: &str,
    ) -> Result<std::borrow::Cow<'h, str>, ErrorObject> {
        let version = single(headers, "mcp-protocol-version")?
            .ok_or_else(|| mismatch("Missing MCP-Protocol-Version header".into()))?;
        let version = decode_header(version)
            .map_err(|why| mismatch(format!("MCP-Protocol-Version header {why}")))?;
        check_named(headers, "mcp-method", Some(method_name))?;
        Ok(version)
    }

    /// The header checks against the decoded body: the version, `Mcp-Name`
    /// and `Mcp-Param-*` — read from the same strict decode the dispatcher
    /// serves, so no header can be checked against one reading of the body
    /// and served from another.
    fn check_headers(
        headers: &HeaderMap,
        version: &str,
        decoded: &DecodedRequest,
    ) -> Result<(), ErrorObject> {
        let request = decoded.request();
        if let Some(meta) = request.meta()
            && meta.protocol_version != version
        {
            return Err(mismatch(format!(
                "Header mismatch: MCP-Protocol-Version header value '{}' does not match body value '{}'",
                crate::dispatch::short(version),
                crate::dispatch::short(&meta.protocol_version)
            )));
        }
        let name = match request {
            ClientRequest::CallTool(p) => Some(p.name.as_str()),
            ClientRequest::GetPrompt(p) => Some(p.name.as_str()),
            ClientRequest::ReadResource(p) => Some(p.uri.as_str()),
            ClientRequest::GetTask(p) | ClientRequest::CancelTask(p) => Some(p.task_id.as_str()),
            ClientRequest::UpdateTask(p) => Some(p.task_id.as_str()),
            _ => None,
        };
        if let Some(name) = name {
            check_named(headers, "mcp-name", Some(name))?;
        }
        if let ClientRequest::CallTool(p) = request
            && let Some(entry) = decoded.registry().tools.get(&p.name)
        {
            check_param_headers(headers, &entry.header_params, p.arguments.as_ref())?;
        }
        Ok(())
    }
}

/// `Mcp-Param-*` for the tool's `x-mcp-header` arguments.
fn check_param_headers(
    headers: &HeaderMap,
    params: &[HeaderParam],
    arguments: Option<&JsonObject>,
) -> Result<(), ErrorObject> {
    for param in params {
        let mut path = param.path.iter();
        let mut value = path.next().and_then(|first| arguments?.get(first));
        for key in path {
            value = value.and_then(|v| v.get(key));
        }
        let header_name = format!("mcp-param-{}", param.name.to_ascii_lowercase());
        let header = single(headers, header_name.as_str())?;
        let display = format!("Mcp-Param-{}", param.name);
        let Some(value) = value.filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(header) = header else {
            return Err(mismatch(format!("Missing {display} header")));
        };
        let decoded =
            decode_header(header).map_err(|why| mismatch(format!("{display} header {why}")))?;
        let matches = match (param.kind, value) {
            (HeaderParamType::String, Value::String(s)) => *s == decoded,
            (HeaderParamType::Integer, Value::Number(n)) => decoded
                .parse::<i64>()
                .ok()
                .is_some_and(|h| n.as_i64() == Some(h)),
            (HeaderParamType::Boolean, Value::Bool(b)) => {
                decoded == if *b { "true" } else { "false" }
            }
            // A value of the wrong type is the arguments' problem: the tool
            // reports it (isError).
            _ => true,
        };
        if !matches {
            return Err(mismatch(format!(
                "Header mismatch: {display} header value '{}' does not match the argument",
                crate::dispatch::short(&decoded)
            )));
        }
    }
    Ok(())
}

impl Http {
    /// What handlers get of the request's token ([`crate::auth::ResourceServer::token_in_context`]).
    fn token_for_context(
        &self,
        token: Option<&crate::auth::AccessToken>,
    ) -> Option<Arc<crate::auth::AccessToken>> {
        self.oauth.as_ref()?.for_context(token?)
    }

    /// Takes an SSE slot into `held`: the caller's share first (one caller
    /// at its share leaves the rest of the server-wide cap to others), then
    /// the cap. What it gives back is the refusal (503 + `Retry-After`),
    /// when there is no slot.
    fn refuse_without_stream_slot(
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
    fn legacy_scope_gate(
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
    async fn handle(&self, request: Request<Body>) -> Response<Body> {
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
                Arc::<str>::from(crate::share::peer_name(ip))
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
        super::accept::holding(response, held)
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one pass over the checks of the table in the module docs"
    )]
    async fn handle_as(
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
        let caller = caller_key(&principal, peer.as_deref());
        let read = match self.bodies.read(body, declared, caller.as_deref()).await {
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
                match sessions
                    .route(
                        &self.server,
                        headers,
                        &principal,
                        peer.as_deref(),
                        call,
                        message,
                        self.keep_alive,
                        &gate,
                    )
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
                // Cancellation over HTTP is closing the stream (§4.2); nothing
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

enum First {
    Notification(ServerNotification),
    Reply(Reply),
}

/// The HTTP status of a reply (module docs' table).
fn status_of(reply: &Reply) -> StatusCode {
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

fn reply_response(reply: &Reply) -> Response<Body> {
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
    json_response(status_of(reply), reply)
}

fn sse_response(stream: SseStream) -> Response<Body> {
    let mut response = Response::new(Body::from_stream(stream));
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

fn event(message: &impl serde::Serialize) -> Bytes {
    let mut out = b"data: ".to_vec();
    // Compact JSON has no newline, so one `data:` line carries the message.
    if serde_json::to_writer(&mut out, message).is_err() {
        tracing::error!("cannot encode an SSE event");
    }
    out.extend_from_slice(b"\n\n");
    Bytes::from(out)
}

/// An SSE response body. It owns the request's handling: when the client
/// goes away the body is dropped, which drops the handler's future and
/// cancels the request (`Ctx::cancelled` fires).
struct SseStream {
    queued: std::collections::VecDeque<ServerNotification>,
    handling: Option<BoxFuture<'static, Reply>>,
    notifications: Option<Notifications>,
    reply: Option<Reply>,
    keep_alive: tokio::time::Interval,
    done: bool,
    guard: Option<DropGuard>,
}

impl SseStream {
    fn new(
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
            keep_alive: interval(keep_alive),
            done: false,
            guard: Some(guard),
        }
    }

    fn finished(pending: Vec<ServerNotification>, reply: Reply, keep_alive: Duration) -> Self {
        Self {
            queued: pending.into(),
            handling: None,
            notifications: None,
            reply: Some(reply),
            keep_alive: interval(keep_alive),
            done: false,
            guard: None,
        }
    }
}

fn interval(every: Duration) -> tokio::time::Interval {
    let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval
}

impl futures_core::Stream for SseStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if this.done {
            return Poll::Ready(None);
        }
        if let Some(n) = this.queued.pop_front() {
            return Poll::Ready(Some(Ok(event(&n))));
        }
        if let Some(rx) = this.notifications.as_mut()
            && let Poll::Ready(Some(n)) = rx.poll_recv(cx)
        {
            return Poll::Ready(Some(Ok(event(&n))));
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
            return Poll::Ready(Some(Ok(event(&reply))));
        }
        if this.keep_alive.poll_tick(cx).is_ready() {
            return Poll::Ready(Some(Ok(Bytes::from_static(b": keep-alive\n\n"))));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_decode_as_the_spec_says() {
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(decode_header(&v("us-west1")).unwrap(), "us-west1");
        assert_eq!(decode_header(&v("  padded  ")).unwrap(), "padded");
        assert_eq!(decode_header(&v("=?base64?w6lsw6hu?=")).unwrap(), "élèn");
        assert!(decode_header(&v("=?base64?!!!?=")).is_err());
        assert!(decode_header(&HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap()).is_err());
    }

    #[test]
    fn loopback_origins_and_hosts() {
        let allow = Allow::Loopback(vec!["https://app.example.com".into()]);
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "http://[::1]:8080",
            "https://app.example.com",
        ] {
            assert!(allow.origin_ok(ok), "{ok}");
        }
        for bad in [
            "http://evil.example.com",
            "null",
            "http://localhost.evil.com",
            "http://[::1].evil.example",
            "http://[::1]evil.example:80",
            "http://127.0.0.1@evil.example",
            "http://localhost/path",
            "http://localhost:80:80",
            "http://[::1",
            "://localhost",
        ] {
            assert!(!allow.origin_ok(bad), "{bad}");
        }
        assert!(
            allow.host_ok("localhost:3000")
                && allow.host_ok("127.0.0.1:1")
                && allow.host_ok("[::1]:9")
                && allow.host_ok("[::1]")
        );
        for bad in [
            "evil.example.com",
            "[::1].evil.example",
            "[::1]x",
            "[::1]:x",
            "[127.0.0.1]",
            "127.0.0.1:",
            "127.0.0.1:123456",
            "user@127.0.0.1",
            "localhost/..",
            "",
        ] {
            assert!(!allow.host_ok(bad), "{bad:?}");
        }
        assert!(Allow::Any.host_ok("evil.example.com"));
    }
}
