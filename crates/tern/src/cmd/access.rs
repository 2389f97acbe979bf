//! Who may call a server `tern` serves over HTTP: bearer tokens from a file,
//! OAuth access tokens of an issuer, and the trusted proxies in front. The
//! flags of `tern serve demo` and `tern gateway`, declared once.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use clap::Args;
use tern_server::Principal;
use tern_server::transport::accept::ServeOptions;
use tern_server::transport::forwarded::{ForwardedHeader, TrustedProxies};
use tern_server::transport::http::{Bearer, Http};

/// The access flags, flattened into a command that has `--http`.
#[derive(Debug, Args)]
pub(crate) struct AccessArgs {
    /// Over HTTP, require `Authorization: Bearer TOKEN`: the file has one
    /// `TOKEN PRINCIPAL` per line, the token naming the principal (who owns
    /// tasks and binds requestStates). A gateway never passes a client's
    /// token to an upstream. Without it the server is open on loopback.
    #[arg(long, value_name = "FILE", requires = "http")]
    tokens: Option<PathBuf>,
    /// Over HTTP, require OAuth access tokens (JWTs) of this issuer, checked
    /// against its JWKS; the server serves its Protected Resource Metadata
    /// naming it. The principal is the token's issuer and subject.
    #[arg(long, value_name = "URL", conflicts_with = "tokens", requires = "http")]
    issuer: Option<String>,
    /// The audience the tokens must carry, and the resource the metadata
    /// names (default: the served URL, `http://ADDR/mcp`).
    #[arg(long, value_name = "AUD", requires = "issuer")]
    audience: Option<String>,
    /// A scope every request's token must carry (repeatable).
    #[arg(long = "scope", value_name = "SCOPE", requires = "issuer")]
    scopes: Vec<String>,
    /// A scope one tool (its served name) needs besides any `--scope`
    /// (repeatable): a token without it gets 403 `insufficient_scope` for
    /// that tool.
    #[arg(long = "tool-scope", value_name = "TOOL=SCOPE", requires = "issuer", value_parser = tool_scope)]
    tool_scopes: Vec<(String, String)>,
    /// Accept access tokens whose JWT `typ` is `JWT` or absent, for issuers
    /// that do not mint RFC 9068 `at+jwt` tokens (weaker: an ID token of the
    /// issuer for this audience would pass too).
    #[arg(long, requires = "issuer")]
    accept_plain_jwt: bool,
    /// Trust the CA certificates of this PEM file when fetching the issuer's
    /// metadata and keys (besides the built-in roots).
    #[arg(long, value_name = "FILE", requires = "issuer")]
    ca_file: Option<PathBuf>,
    /// Over HTTP, a proxy network in front (a CIDR or an address;
    /// repeatable): its connections count only against the totals, and each
    /// request's client is read from the --forwarded-header it sets (the
    /// right-most address not in a trusted network).
    #[arg(long = "trusted-proxy", value_name = "CIDR", requires_all = ["http", "forwarded_header"])]
    trusted_proxies: Vec<String>,
    /// The one header the trusted proxies set: `x-forwarded-for` (nginx's
    /// `$proxy_add_x_forwarded_for`) or `forwarded` (RFC 7239).
    #[arg(long, value_name = "HEADER", requires = "trusted_proxies")]
    forwarded_header: Option<ForwardedHeader>,
}

impl AccessArgs {
    /// The first access flag given, for refusing it over stdio: clap's
    /// `requires = "http"` holds only while `--stdio`, which conflicts with
    /// `--http`, is absent, and a guard the user asked for must never be
    /// dropped in silence (stdio has no HTTP authorization: the client that
    /// starts the process is the one caller).
    pub(crate) fn given(&self) -> Option<&'static str> {
        [
            (self.tokens.is_some(), "--tokens"),
            (self.issuer.is_some(), "--issuer"),
            (!self.trusted_proxies.is_empty(), "--trusted-proxy"),
        ]
        .into_iter()
        .find_map(|(given, flag)| given.then_some(flag))
    }

    /// The flags read: the token file loaded, the proxies parsed. `name` is
    /// the `resource_name` of the OAuth metadata.
    pub(crate) fn access(&self, name: &'static str) -> Result<Access, String> {
        let tokens = self.tokens.as_deref().map(read_tokens).transpose()?;
        let proxies = self
            .forwarded_header
            .map(|h| TrustedProxies::new(&self.trusted_proxies, h))
            .transpose()
            .map_err(|e| format!("--trusted-proxy: {e}"))?;
        Ok(Access {
            tokens,
            proxies,
            oauth: self.issuer.clone().map(|issuer| OAuth {
                issuer,
                audience: self.audience.clone(),
                scopes: self.scopes.clone(),
                tool_scopes: self.tool_scopes.clone(),
                accept_plain_jwt: self.accept_plain_jwt,
                ca_file: self.ca_file.clone(),
                name,
            }),
        })
    }
}

/// The `--tokens` file: `TOKEN PRINCIPAL` per line.
fn read_tokens(path: &Path) -> Result<HashMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    tern::demo::tokens(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `TOOL=SCOPE` of `--tool-scope`.
fn tool_scope(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((tool, scope)) if !tool.is_empty() && !scope.is_empty() && !scope.contains(' ') => {
            Ok((tool.to_owned(), scope.to_owned()))
        }
        _ => Err(format!(
            "expected TOOL=SCOPE (one scope, no spaces), got {text:?}"
        )),
    }
}

/// Who may call: the `--tokens` file's bearer tokens, OAuth access tokens
/// of `--issuer`, and the trusted proxies.
pub(crate) struct Access {
    tokens: Option<HashMap<String, String>>,
    oauth: Option<OAuth>,
    proxies: Option<TrustedProxies>,
}

/// `--issuer URL [--audience AUD] [--scope S]... [--tool-scope TOOL=S]...
/// [--accept-plain-jwt] [--ca-file FILE]`.
struct OAuth {
    issuer: String,
    audience: Option<String>,
    scopes: Vec<String>,
    tool_scopes: Vec<(String, String)>,
    accept_plain_jwt: bool,
    ca_file: Option<PathBuf>,
    /// The `resource_name` of the metadata.
    name: &'static str,
}

impl Access {
    /// The accept loop's options: the defaults, and the trusted proxies.
    pub(crate) fn serve_options(&self) -> ServeOptions {
        let options = ServeOptions::default();
        match &self.proxies {
            Some(p) => options.trusted_proxies(p.clone()),
            None => options,
        }
    }

    /// `endpoint` guarded as asked; `local` names the default audience.
    pub(crate) fn apply(self, endpoint: Http, local: std::net::SocketAddr) -> Http {
        self.apply_with_metadata(endpoint, local).0
    }

    /// [`Self::apply`], and the Protected Resource Metadata routes to mount
    /// beside the endpoint under OAuth (for an app of one's own; `serve`
    /// mounts them itself).
    pub(crate) fn apply_with_metadata(
        self,
        mut endpoint: Http,
        local: std::net::SocketAddr,
    ) -> (Http, Option<axum::Router>) {
        if let Some(p) = self.proxies {
            endpoint = endpoint.trusted_proxies(p);
        }
        let mut metadata = None;
        if let Some(o) = self.oauth {
            let audience = o
                .audience
                .clone()
                .unwrap_or_else(|| format!("http://{local}/mcp"));
            let resource = o.resource_server(&audience);
            metadata = Some(resource.metadata_router());
            endpoint = endpoint.oauth(resource);
        }
        let endpoint = match self.tokens {
            Some(tokens) => endpoint.authenticate(Bearer(move |token: &str| {
                tokens.get(token).map(|p| Principal::new(p.as_str()))
            })),
            None => endpoint,
        };
        (endpoint, metadata)
    }
}

impl OAuth {
    /// The resource server: JWTs of the issuer for `audience`.
    fn resource_server(&self, audience: &str) -> tern_server::auth::ResourceServer {
        let issuer = self.issuer.as_str();
        let mut verifier = tern_server::auth::JwtVerifier::new(issuer, audience);
        if let Some(ca) = &self.ca_file {
            verifier = verifier.ca_file(ca);
        }
        if self.accept_plain_jwt {
            verifier = verifier.accept_plain_jwt();
        }
        let scopes: Vec<&str> = self.scopes.iter().map(String::as_str).collect();
        let mut supported = scopes.clone();
        for (_, scope) in &self.tool_scopes {
            if !supported.contains(&scope.as_str()) {
                supported.push(scope);
            }
        }
        let mut resource = tern_server::auth::ResourceServer::new(audience, issuer, verifier)
            .scopes_supported(&supported)
            .required_scopes(&scopes)
            .resource_name(self.name);
        // A tool named twice needs both scopes.
        let mut per_tool = BTreeMap::<&str, Vec<&str>>::new();
        for (tool, scope) in &self.tool_scopes {
            per_tool.entry(tool).or_default().push(scope);
        }
        for (tool, scopes) in per_tool {
            resource = resource.tool_scopes(tool, &scopes);
        }
        eprintln!(
            "tern: OAuth: tokens of {issuer} for {audience}; metadata at {}",
            resource.metadata_url()
        );
        resource
    }
}

#[cfg(test)]
mod tests {
    use super::tool_scope;

    #[test]
    fn a_tool_scope_is_one_tool_and_one_scope() {
        assert_eq!(
            tool_scope("deploy=mcp:admin"),
            Ok(("deploy".to_owned(), "mcp:admin".to_owned()))
        );
        for bad in ["deploy", "=mcp:admin", "deploy=", "deploy=a b"] {
            assert!(tool_scope(bad).is_err(), "{bad:?} was taken");
        }
    }
}
