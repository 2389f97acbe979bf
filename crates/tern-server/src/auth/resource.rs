//! The protected resource ([`ResourceServer`]): its metadata, scopes and
//! challenges, on the HTTP transport.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Value, json};

use super::{AccessToken, TokenVerifier, VerifyError};

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
    use crate::future::BoxFuture;

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
}
