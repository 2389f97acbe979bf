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

mod fetch;
mod jwt;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};

pub use jwt::{DEFAULT_LEEWAY, DEFAULT_REFETCH_INTERVAL, JwtVerifier};

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

/// Token introspection (RFC 7662) at `endpoint`, the resource server
/// authenticating with `client_id` / `client_secret` (HTTP Basic).
///
/// RFC 7662 §2.2 makes every member of the response but `active` optional;
/// this resource server is stricter, as its JWT checks are: a token is
/// accepted only when the response has `active: true` (the boolean),
/// `aud` equal to the audience or a list holding it (RFC 8707: a token
/// for another resource, or for no stated one, is not ours), an `exp` in
/// the future (no token lives for ever), and a `sub`; `iss`, when present,
/// must equal the issuer (absent, the token is taken to be the
/// configured issuer's, the endpoint being that issuer's).
pub struct Introspection {
    endpoint: String,
    issuer: String,
    audience: String,
    client_id: String,
    client_secret: String,
    http: Result<fetch::HttpClient, String>,
}

impl std::fmt::Debug for Introspection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Introspection")
            .field("endpoint", &self.endpoint)
            .field("issuer", &self.issuer)
            .finish_non_exhaustive()
    }
}

impl Introspection {
    /// Introspects at `endpoint` tokens of `issuer` for `audience`.
    pub fn new(
        endpoint: impl Into<String>,
        issuer: impl Into<String>,
        audience: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<String>,
    ) -> Self {
        Self {
            endpoint: endpoint.into(),
            issuer: issuer.into(),
            audience: audience.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            http: fetch::client(None),
        }
    }

    /// Trusts the CA certificates of the PEM file `path` too.
    #[must_use]
    pub fn ca_file(mut self, path: &std::path::Path) -> Self {
        self.http = fetch::client(Some(path));
        self
    }

    async fn check(&self, token: &str) -> Result<AccessToken, VerifyError> {
        let http = self
            .http
            .as_ref()
            .map_err(|e| VerifyError::Unavailable(e.clone()))?;
        let form = url_form(&[("token", token), ("token_type_hint", "access_token")]);
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!(
                "{}:{}",
                url_form_value(&self.client_id),
                url_form_value(&self.client_secret)
            ))
        );
        let (status, body) = fetch::json(http, &self.endpoint, Some((form, Some(basic))))
            .await
            .map_err(VerifyError::Unavailable)?;
        if status != 200 {
            return Err(VerifyError::Unavailable(format!(
                "the introspection endpoint answered {status}"
            )));
        }
        if body["active"] != Value::Bool(true) {
            return Err(VerifyError::Invalid("the token is not active".into()));
        }
        match &body["iss"] {
            Value::Null => {}
            Value::String(iss) if *iss == self.issuer => {}
            other => {
                return Err(VerifyError::Invalid(format!(
                    "the token's issuer is {other}"
                )));
            }
        }
        let aud_ok = match &body["aud"] {
            Value::String(a) => *a == self.audience,
            Value::Array(a) => a.iter().any(|a| a.as_str() == Some(self.audience.as_str())),
            Value::Null => {
                return Err(VerifyError::Invalid(
                    "the introspection response has no aud".into(),
                ));
            }
            _ => false,
        };
        if !aud_ok {
            return Err(VerifyError::Invalid(
                "the token is for another audience".into(),
            ));
        }
        let Some(exp) = body["exp"].as_u64() else {
            return Err(VerifyError::Invalid(
                "the introspection response has no exp".into(),
            ));
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        if exp <= now {
            return Err(VerifyError::Invalid("the token expired".into()));
        }
        let Some(subject) = body["sub"].as_str() else {
            return Err(VerifyError::Invalid(
                "the introspection response has no sub".into(),
            ));
        };
        let mut token = AccessToken::new(
            self.issuer.clone(),
            subject,
            body["scope"]
                .as_str()
                .unwrap_or_default()
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
        );
        token.client_id = body["client_id"].as_str().map(str::to_owned);
        token.expires_at = Some(exp);
        if let Value::Object(claims) = body {
            token.claims = claims;
        }
        Ok(token)
    }
}

impl TokenVerifier for Introspection {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, VerifyError>> {
        Box::pin(self.check(token))
    }
}

fn url_form_value(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else if b == b' ' {
            out.push('+');
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

fn url_form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", url_form_value(k), url_form_value(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The protected resource: its metadata, its scopes, its verifier.
#[derive(Clone)]
pub struct ResourceServer {
    resource: String,
    authorization_servers: Vec<String>,
    scopes_supported: Option<Vec<String>>,
    required_scopes: Vec<String>,
    tool_scopes: HashMap<String, Vec<String>>,
    resource_name: Option<String>,
    verifier: Arc<dyn TokenVerifier>,
    in_context: InContext,
}

/// What of the access token handlers see ([`crate::Ctx::access_token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum InContext {
    /// Nothing (the default).
    #[default]
    Nothing,
    /// The verified token: identity, scopes, claims.
    Verified,
    /// That, and the raw token.
    Raw,
}

impl std::fmt::Debug for ResourceServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceServer")
            .field("resource", &self.resource)
            .field("authorization_servers", &self.authorization_servers)
            .finish_non_exhaustive()
    }
}

/// `origin` and `path` of an absolute URL (`https://h:1/a/b` → `https://h:1`, `/a/b`).
fn split_url(url: &str) -> (&str, &str) {
    let start = url.find("://").map_or(0, |i| i + 3);
    match url[start..].find('/') {
        Some(i) => url.split_at(start + i),
        None => (url, ""),
    }
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

impl ResourceServer {
    /// The resource `resource` (its canonical URL, the MCP endpoint's),
    /// whose tokens come from `authorization_server` and are checked by
    /// `verifier`.
    pub fn new(
        resource: impl Into<String>,
        authorization_server: impl Into<String>,
        verifier: impl TokenVerifier,
    ) -> Self {
        Self {
            resource: resource.into(),
            authorization_servers: vec![authorization_server.into()],
            scopes_supported: None,
            required_scopes: Vec::new(),
            tool_scopes: HashMap::new(),
            resource_name: None,
            verifier: Arc::new(verifier),
            in_context: InContext::Nothing,
        }
    }

    /// Handlers see the verified token of each request: its issuer,
    /// subject, client id, scopes and claims, through
    /// [`crate::Ctx::access_token`] (default: they see only the principal).
    /// The raw token stays out of it; see [`Self::raw_token_in_context`].
    #[must_use]
    pub fn token_in_context(mut self) -> Self {
        if self.in_context == InContext::Nothing {
            self.in_context = InContext::Verified;
        }
        self
    }

    /// [`Self::token_in_context`], and [`AccessToken::raw`] holds the token
    /// as sent. Only for a handler that needs the bytes themselves (to
    /// exchange them, RFC 8693); forwarding them to another service is the
    /// token passthrough MCP forbids.
    #[must_use]
    pub fn raw_token_in_context(mut self) -> Self {
        self.in_context = InContext::Raw;
        self
    }

    /// What handlers get of `token` (a request's verified token), if
    /// anything.
    pub(crate) fn for_context(&self, token: &AccessToken) -> Option<Arc<AccessToken>> {
        match self.in_context {
            InContext::Nothing => None,
            // The raw token is kept at verification only under `Raw`.
            InContext::Verified | InContext::Raw => Some(Arc::new(token.clone())),
        }
    }

    /// The scopes the PRM lists (`scopes_supported`).
    #[must_use]
    pub fn scopes_supported(mut self, scopes: &[&str]) -> Self {
        self.scopes_supported = Some(scopes.iter().map(|s| (*s).to_owned()).collect());
        self
    }

    /// Scopes every request needs (named in the 401's `scope`).
    #[must_use]
    pub fn required_scopes(mut self, scopes: &[&str]) -> Self {
        self.required_scopes = scopes.iter().map(|s| (*s).to_owned()).collect();
        self
    }

    /// Scopes a call of tool `name` needs besides the required ones (a 403
    /// `insufficient_scope` asks for a step-up).
    #[must_use]
    pub fn tool_scopes(mut self, name: impl Into<String>, scopes: &[&str]) -> Self {
        self.tool_scopes.insert(
            name.into(),
            scopes.iter().map(|s| (*s).to_owned()).collect(),
        );
        self
    }

    /// The PRM's `resource_name`.
    #[must_use]
    pub fn resource_name(mut self, name: impl Into<String>) -> Self {
        self.resource_name = Some(name.into());
        self
    }

    /// The resource's URL.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The PRM's path-based URL (RFC 9728 §3.1), named in challenges.
    pub fn metadata_url(&self) -> String {
        let (origin, path) = split_url(&self.resource);
        format!(
            "{origin}/.well-known/oauth-protected-resource{}",
            path.trim_end_matches('/')
        )
    }

    /// The PRM document (RFC 9728 §2).
    pub fn metadata(&self) -> Value {
        let mut doc = json!({
            "resource": self.resource,
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if let Some(s) = &self.scopes_supported {
            doc["scopes_supported"] = json!(s);
        }
        if let Some(n) = &self.resource_name {
            doc["resource_name"] = json!(n);
        }
        doc
    }

    /// The PRM at the path-based and the root well-known locations.
    pub fn metadata_router(&self) -> axum::Router {
        let doc = axum::body::Bytes::from(self.metadata().to_string());
        let (_, path) = split_url(&self.resource);
        let path_based = format!(
            "/.well-known/oauth-protected-resource{}",
            path.trim_end_matches('/')
        );
        let handler = move || {
            let doc = doc.clone();
            async move { ([(http::header::CONTENT_TYPE, "application/json")], doc) }
        };
        let mut router = axum::Router::new().route(
            "/.well-known/oauth-protected-resource",
            axum::routing::get(handler.clone()),
        );
        if path_based != "/.well-known/oauth-protected-resource" {
            router = router.route(&path_based, axum::routing::get(handler));
        }
        router
    }

    /// The 401 challenge; `invalid` when a token was sent and refused.
    pub(crate) fn challenge(&self, invalid: bool) -> String {
        let mut c = format!("Bearer resource_metadata={}", quoted(&self.metadata_url()));
        if !self.required_scopes.is_empty() {
            let _ = write!(c, ", scope={}", quoted(&self.required_scopes.join(" ")));
        }
        if invalid {
            c.push_str(", error=\"invalid_token\"");
        }
        c
    }

    /// Verifies the request's bearer token: the token, or the 401 challenge.
    pub(crate) async fn authenticate(
        &self,
        headers: &http::HeaderMap,
    ) -> Result<AccessToken, String> {
        let mut values = headers.get_all(http::header::AUTHORIZATION).iter();
        let (Some(value), None) = (values.next(), values.next()) else {
            return Err(self.challenge(false));
        };
        let Some(token) = value.to_str().ok().and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        }) else {
            return Err(self.challenge(false));
        };
        match self.verifier.verify(token).await {
            Ok(t) if t.subject.is_empty() => {
                tracing::debug!("token refused: no subject");
                Err(self.challenge(true))
            }
            Ok(mut t) => {
                // Kept only when handlers are to see it.
                t.raw = (self.in_context == InContext::Raw).then(|| token.to_owned());
                Ok(t)
            }
            Err(VerifyError::Invalid(why)) => {
                tracing::debug!("token refused: {why}");
                Err(self.challenge(true))
            }
            Err(VerifyError::Unavailable(why)) => {
                tracing::warn!("tokens cannot be checked: {why}");
                Err(self.challenge(true))
            }
        }
    }

    /// Whether `token` lacks one of the resource's own scopes: then the
    /// request is refused with 403 and [`Self::insufficient`] for them.
    pub(crate) fn missing_required(&self, token: &AccessToken) -> Option<Vec<String>> {
        let lacks = self
            .required_scopes
            .iter()
            .any(|s| !token.scopes.contains(s));
        lacks.then(|| self.required_scopes.clone())
    }

    /// The scopes `token` lacks for a call of tool `tool` (empty: none):
    /// every scope the call needs, when one is missing, so the client's
    /// step-up asks for all of them.
    pub(crate) fn missing_for_tool(&self, token: &AccessToken, tool: &str) -> Vec<String> {
        let Some(needed) = self.tool_scopes.get(tool) else {
            return Vec::new();
        };
        if needed.iter().all(|s| token.scopes.contains(s)) {
            return Vec::new();
        }
        let mut all = self.required_scopes.clone();
        for s in needed {
            if !all.contains(s) {
                all.push(s.clone());
            }
        }
        all
    }

    /// The 403 step-up challenge for `scopes`.
    pub(crate) fn insufficient(&self, scopes: &[String]) -> String {
        format!(
            "Bearer error=\"insufficient_scope\", scope={}, resource_metadata={}",
            quoted(&scopes.join(" ")),
            quoted(&self.metadata_url())
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Never;
    impl TokenVerifier for Never {
        fn verify<'a>(&'a self, _: &'a str) -> BoxFuture<'a, Result<AccessToken, VerifyError>> {
            Box::pin(async { Err(VerifyError::Invalid("no".into())) })
        }
    }

    #[test]
    fn metadata_urls_and_challenges() {
        let rs = ResourceServer::new(
            "https://h.example:8443/api/mcp",
            "https://as.example",
            Never,
        )
        .required_scopes(&["mcp:basic"]);
        assert_eq!(
            rs.metadata_url(),
            "https://h.example:8443/.well-known/oauth-protected-resource/api/mcp"
        );
        assert_eq!(
            rs.challenge(false),
            "Bearer resource_metadata=\"https://h.example:8443/.well-known/oauth-protected-resource/api/mcp\", scope=\"mcp:basic\""
        );
        assert!(rs.challenge(true).ends_with(", error=\"invalid_token\""));
        let root = ResourceServer::new("https://h.example", "https://as.example", Never);
        assert_eq!(
            root.metadata_url(),
            "https://h.example/.well-known/oauth-protected-resource"
        );
        assert_eq!(root.metadata()["resource"], "https://h.example");
    }

    #[test]
    fn principal_is_issuer_and_subject() {
        let a = AccessToken::new("https://as.example", "alice", vec![]);
        let b = AccessToken::new("https://other.example", "alice", vec![]);
        assert_eq!(a.principal().id(), Some("https://as.example alice"));
        assert_ne!(a.principal(), b.principal());
    }

    #[test]
    fn tool_scopes_name_everything_needed() {
        let rs = ResourceServer::new("https://h.example/mcp", "https://as.example", Never)
            .required_scopes(&["mcp:basic"])
            .tool_scopes("admin", &["mcp:admin"]);
        let t = AccessToken::new("https://as.example", "a", vec!["mcp:basic".into()]);
        assert_eq!(rs.missing_for_tool(&t, "admin"), ["mcp:basic", "mcp:admin"]);
        assert!(rs.missing_for_tool(&t, "other").is_empty());
        let full = AccessToken::new(
            "https://as.example",
            "a",
            vec!["mcp:basic".into(), "mcp:admin".into()],
        );
        assert!(rs.missing_for_tool(&full, "admin").is_empty());
    }

    #[test]
    fn forms_are_encoded() {
        assert_eq!(url_form(&[("a b", "c&d=é")]), "a+b=c%26d%3D%C3%A9");
    }
}
