//! Serving the endpoint: the tower service, and tern's accept loop in
//! front of it with the OAuth metadata routes beside it.

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use http::{Request, Response, StatusCode};

use crate::replay::BoxFuture;

use super::{Http, ServeOptions, plain, serve_service};

/// The MCP endpoint as a tower service (`Request<Body>` to `Response<Body>`).
#[derive(Clone, Debug)]
pub struct McpService {
    pub(super) inner: Arc<Http>,
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
pub(super) struct Endpoint {
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
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use tern_server::transport::http::{Http, serve};
/// use tern_server::{Server, ToolDef};
///
/// async fn ping() -> &'static str { "pong" }
///
/// let server = Server::builder("app", "1.0.0").tool(ToolDef::new("ping", "Answers pong", ping)).build()?;
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
/// let shutdown = async { let _ = tokio::signal::ctrl_c().await; };
/// serve(listener, Http::new(server), "/mcp", shutdown).await?;
/// # Ok(()) }
/// ```
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
