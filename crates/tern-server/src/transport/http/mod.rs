//! Streamable HTTP, 2026-07-28 form (spec: Streamable HTTP,
//! <https://modelcontextprotocol.io/specification/2026-07-28/basic/transports/streamable-http>):
//! one POST endpoint, served by tern's own accept loop ([`serve`]), or as a
//! tower [`tower::Service`] you mount in your own axum `Router` and serve with
//! [`serve_service`].
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
//! ## One pipeline for both eras
//!
//! Every request, 2026-07-28 or of a 2025-11-25 session, passes the same
//! stages in one order; the era only decides the route at the end, after
//! the one strict decode, so no request skips a defence the other era has:
//!
//! ```text
//!  accept loop (transport::accept)  connection share per peer, connection age,
//!       │                           requests in flight (all, per peer), ambiguous framing
//!  pipeline.rs  method ─ POST; GET / DELETE only for a 2025 session
//!       │
//!  authority.rs ─ Host and Origin, parsed as authorities, compared exactly
//!       │
//!  auth.rs ─ authentication (Authenticate, OAuth); the resource's scopes;
//!       │    the principal's requests in flight
//!  body.rs ─ Accept / Content-Type, size, time, byte budget, heavy permit
//!       │
//!  decode ─ the JSON-RPC envelope, then the params, strictly and once
//!       │   (repeated names, JSON limits, the typed request): Server::decode
//!       │   on the 2026 route, Session::prepare on a session, same decoder
//!       ├─────────────────────────────┐
//!  2026-07-28 route                   2025-11-25 session (crate::legacy::http)
//!  headers.rs ─ MCP-Protocol-Version, │
//!    Mcp-Method, Mcp-Name, Mcp-Param-*│
//!    against the decoded body         │
//!  auth.rs ─ the tool's scopes, on the decoded request (both routes)
//!       │                             │
//!  response.rs / sse.rs ─ JSON, or SSE under Http::max_streams and the caller's
//!                         share (one SSE writer for both eras)
//! ```
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

use std::sync::Arc;
use std::time::Duration;

pub use super::forwarded::{ForwardedHeader, InvalidNetwork, TrustedProxies};
use crate::principal::Principal;
use crate::server::Server;
use crate::share::{ShareSlot, Shares};

mod auth;
mod authority;
mod body;
mod headers;
mod pipeline;
mod response;
mod serve;
pub(crate) mod sse;
pub use crate::transport::accept::{ServeOptions, serve_service};
pub use auth::{AuthLayer, AuthService, Authenticate, Bearer, Unauthorized};
use auth::{insufficient_scope, unauthorized};
use authority::Allow;
pub use body::{
    DEFAULT_BODY_BUDGET, DEFAULT_BODY_BUDGET_PER_CALLER, DEFAULT_HEAVY_BODY, DEFAULT_MAX_HEAVY,
    DEFAULT_MAX_HEAVY_PER_CALLER,
};
use headers::header_lists;
use response::{First, SseStream, error_response, overloaded, plain, reply_response, sse_response};
pub use serve::{McpService, serve, serve_with};

/// Default body limit: 4 MiB.
pub const DEFAULT_BODY_LIMIT: usize = 4 * 1024 * 1024;
/// Default interval of SSE keep-alive comments: 15 s.
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Configures the HTTP endpoint of a [`Server`].
///
/// ```
/// use axum::Router;
/// use tern_server::transport::http::Http;
/// use tern_server::{Server, ToolDef};
///
/// async fn ping() -> &'static str { "pong" }
///
/// let server = Server::builder("app", "1.0.0").tool(ToolDef::new("ping", "Answers pong", ping)).build()?;
/// // The endpoint is a tower service: mount it in your application.
/// let app: Router = Router::new().route_service("/mcp", Http::new(server).into_service());
/// # drop(app);
/// # Ok::<(), tern_server::BuildError>(())
/// ```
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
