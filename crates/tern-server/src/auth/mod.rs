//! OAuth 2.1 resource server (MCP authorization): the server side of the
//! flow tern's client runs.
//!
//! [`ResourceServer`] is given to [`Http::oauth`](crate::transport::http::Http::oauth):
//!
//! - **Protected Resource Metadata** (RFC 9728): [`ResourceServer::metadata_router`]
//!   serves it at the path-based `/.well-known/oauth-protected-resource{path}`
//!   and at the root `/.well-known/oauth-protected-resource`
//!   ([`serve`](crate::transport::http::serve) mounts both).
//! - **Every request** (there is no session; `server/discover` included)
//!   carries `Authorization: Bearer …`, checked by a [`TokenVerifier`]:
//!   [`JwtVerifier`] (JWTs against the issuer's JWKS) or [`Introspection`]
//!   (RFC 7662). The [`Bearer`](crate::transport::http::Bearer) callback of
//!   the HTTP transport stays for custom schemes.
//! - **401** when the token is missing or refused:
//!   `WWW-Authenticate: Bearer resource_metadata="…", scope="…"` (plus
//!   `error="invalid_token"` when one was sent), and no body. A missing token
//!   is refused without contacting the issuer.
//! - **403** when the token lacks a scope the request needs (the resource's
//!   [`ResourceServer::required_scopes`], plus a tool's
//!   [`ResourceServer::tool_scopes`]): `WWW-Authenticate: Bearer
//!   error="insufficient_scope", scope="<every scope needed>",
//!   resource_metadata="…"`. A tool's 403 has a JSON-RPC error body
//!   (`-32600`, the request's id, `data.requiredScopes`) so a client without
//!   OAuth still reads why; the resource's own scopes are checked before the
//!   body is read, so that 403 has no body. Per-tool scopes apply on both
//!   wires: a 2025-11-25 session's `tools/call` is checked before the
//!   session sees it (one request per POST, so no SSE stream is open yet)
//!   and answered with the same 403, challenge and JSON-RPC body; the
//!   session lives on.
//! - **The principal** is `"{iss} {sub}"` (the issuer has no space, being a
//!   URL): the sealed state's principal binding (rule `state-bound-principal`)
//!   and task ownership use it, so two users of one issuer, or one subject of
//!   two issuers, never share a `requestState` or a task. The client id does
//!   not join it: a user keeps their tasks across the clients they use.
//! - **Handlers and the token**: by default a handler sees the principal
//!   only. [`ResourceServer::token_in_context`] gives it the verified
//!   [`AccessToken`] (issuer, subject, client id, scopes, claims) through
//!   [`crate::Ctx::access_token`]; the raw token is in it only under
//!   [`ResourceServer::raw_token_in_context`].
//! - **No token passthrough**: tern sends the access token nowhere (only to
//!   a configured introspection endpoint), and a handler given the raw
//!   token must not either.
//! - **Caching of list results** (`ttlMs` + `cacheScope`, spec: Caching › Cache
//!   Scope Field: `public` may be shared across users, `private` is per
//!   authorization context): tern's list results (`tools/list`, `prompts/list`,
//!   `resources/list`, `resources/templates/list`) are the server's
//!   registrations, the same for every caller: no list handler sees the
//!   principal or the token, so none depends on the caller and none needs
//!   `cacheScope: "private"` ([`crate::ServerBuilder::list_cache`], default
//!   public). A `resources/read` handler does see the caller: its results are
//!   private by default ([`crate::ServerBuilder::read_cache`]).

#[cfg(feature = "auth")]
mod fetch;
#[cfg(feature = "auth")]
mod introspection;
#[cfg(feature = "auth")]
mod jws;
#[cfg(feature = "auth")]
mod jwt;
#[cfg(feature = "http")]
mod resource;

use serde_json::Value;

#[cfg(feature = "auth")]
pub use introspection::Introspection;
#[cfg(feature = "auth")]
pub use jws::Algorithm;
#[cfg(feature = "auth")]
pub use jwt::{DEFAULT_LEEWAY, DEFAULT_REFETCH_INTERVAL, JwtVerifier};
#[cfg(feature = "http")]
pub use resource::ResourceServer;

use crate::future::BoxFuture;
use crate::principal::Principal;

/// A verified access token.
///
/// `Debug` never shows the raw token.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AccessToken {
    /// Who issued it.
    pub issuer: String,
    /// Whom it stands for.
    pub subject: String,
    /// The client it was issued to, if it says.
    pub client_id: Option<String>,
    /// Its scopes.
    pub scopes: Vec<String>,
    /// When it expires (seconds since the Unix epoch).
    pub expires_at: Option<u64>,
    /// Every claim the verifier read: a JWT's payload, or the introspection
    /// response (RFC 7662 §2.2). Empty for tokens built with [`Self::new`].
    pub claims: serde_json::Map<String, Value>,
    /// The token as sent: only under [`ResourceServer::raw_token_in_context`]
    /// (read it with [`Self::raw`]).
    raw: Option<String>,
}

impl std::fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessToken")
            .field("issuer", &self.issuer)
            .field("subject", &self.subject)
            .field("client_id", &self.client_id)
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .field("raw", &self.raw.as_ref().map(|_| "…"))
            .finish_non_exhaustive()
    }
}

impl AccessToken {
    /// A token of `issuer` for `subject` with `scopes`.
    pub fn new(issuer: impl Into<String>, subject: impl Into<String>, scopes: Vec<String>) -> Self {
        Self {
            issuer: issuer.into(),
            subject: subject.into(),
            client_id: None,
            scopes,
            expires_at: None,
            claims: serde_json::Map::new(),
            raw: None,
        }
    }

    /// The token as the client sent it, when the resource server was told
    /// to keep it ([`ResourceServer::raw_token_in_context`]). Never pass
    /// it to another service: MCP forbids token passthrough; ask for a
    /// token of that service's own (RFC 8693 exchange) instead.
    pub fn raw(&self) -> Option<&str> {
        self.raw.as_deref()
    }

    /// The principal: `"{issuer} {subject}"`.
    pub fn principal(&self) -> Principal {
        Principal::new(format!("{} {}", self.issuer, self.subject))
    }
}

/// Why a token was not accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum VerifyError {
    /// The token is refused (expired, wrong audience or issuer, bad
    /// signature, unknown key): 401 `invalid_token`.
    Invalid(String),
    /// The keys or the introspection endpoint could not be reached: 401 too
    /// (logged as a warning), the client may retry.
    Unavailable(String),
}

impl std::fmt::Display for VerifyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Invalid(m) | Self::Unavailable(m) => f.write_str(m),
        }
    }
}

/// Checks an access token.
pub trait TokenVerifier: Send + Sync + 'static {
    /// The token's identity and scopes, or why it is refused.
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, VerifyError>>;
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principal_is_issuer_and_subject() {
        let a = AccessToken::new("https://as.example", "alice", vec![]);
        let b = AccessToken::new("https://other.example", "alice", vec![]);
        assert_eq!(a.principal().id(), Some("https://as.example alice"));
        assert_ne!(a.principal(), b.principal());
    }
}
