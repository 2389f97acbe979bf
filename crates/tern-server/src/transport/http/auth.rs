//! The authentication and authorization stages: who the caller is (a
//! bearer token, OAuth), and whether its scopes allow the tool it calls
//! (checked on the decoded request, of either era).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};

use axum::body::Body;
use http::header::WWW_AUTHENTICATE;
use http::{HeaderValue, Request, Response, StatusCode};
use tern_protocol::RequestId;
use tern_protocol::error::{ErrorObject, code};

use crate::principal::Principal;
use crate::replay::BoxFuture;

use super::{error_response, plain};

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
/// their extensions, where [`McpService`](super::McpService) finds it; refusals are 401. Use it
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

pub(super) fn unauthorized(refused: &Unauthorized) -> Response<Body> {
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
pub(super) fn insufficient_scope(
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
