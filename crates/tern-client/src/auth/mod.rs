//! OAuth 2.1 for Streamable HTTP (MCP authorization): what the client does
//! when a server answers 401 or 403.
//!
//! [`OAuth`] is bound to one MCP endpoint; give it to
//! [`HttpTransport::with_oauth`](crate::transport::http::HttpTransport::with_oauth).
//! The flow:
//!
//! 1. **401** → the `WWW-Authenticate` `Bearer` challenge ([`Challenge`]);
//!    the Protected Resource Metadata (RFC 9728) from its `resource_metadata`,
//!    else the path-based, else the root well-known URL. Its `resource` must
//!    be the endpoint's origin and a path prefix of it, or the flow stops
//!    (tokens are never sent to another resource).
//! 2. The first authorization server's metadata: RFC 8414, then `OpenID
//!    Connect` Discovery, path-inserted then path-appended; its `issuer` must
//!    equal the PRM's entry byte for byte. Every authorization-server URL
//!    must be HTTPS, except on loopback.
//! 3. Registration, per issuer: a [`PreRegistered`] client, else the
//!    Client ID Metadata Document URL of [`OAuthConfig::client_metadata_url`]
//!    when the server supports CIMD, else Dynamic Client Registration
//!    (`application_type`, `refresh_token` in `grant_types`). A change of the
//!    PRM's authorization server means a registration with the new one;
//!    credentials are never carried across servers.
//! 4. Scopes: the challenge's `scope`, else the PRM's `scopes_supported`,
//!    else none; `offline_access` added only when the authorization server
//!    lists it.
//! 5. The authorization request with PKCE S256 (refused if not advertised),
//!    `state` and `resource`, through a [`Browser`]; the redirect's `state`
//!    must match and its `iss` (RFC 9207) equal the issuer exactly — required
//!    when advertised, checked whenever present.
//! 6. The token request (`client_secret_basic`, `_post` or `none`, as the
//!    registration and the server say) with the PRM's `resource` verbatim;
//!    the grant goes to the [`TokenStore`]. Expired tokens are refreshed
//!    before use; a 401 with a token refreshes it once, then starts over.
//! 7. **403** `insufficient_scope` → step-up: a new authorization with the
//!    union of the scopes held and those challenged, only if that union
//!    grows; the transport bounds the attempts per request
//!    ([`MAX_AUTH_ATTEMPTS`]).

mod challenge;
mod discovery;
mod flow;
mod net;
mod store;

use std::collections::HashMap;
use std::sync::Arc;

pub use url::Url;

pub use challenge::Challenge;
pub use net::is_local;
pub use store::{EXPIRY_MARGIN, Grant, MemoryTokenStore, TokenKey, TokenStore};

use self::discovery::ServerMetadata;
use self::flow::Registration;
use crate::error::ClientError;
use crate::future::BoxFuture;
use crate::tls::{self, HttpClient, TlsOptions};

/// Authorizations one request may go through (the first 401, then
/// step-ups) before its refusal is the answer: 3.
pub const MAX_AUTH_ATTEMPTS: usize = 3;

/// A client registered out of band with an authorization server.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PreRegistered {
    /// The issuer it is registered with (`None`: any).
    pub issuer: Option<String>,
    /// Its client id.
    pub client_id: String,
    /// Its secret, for a confidential client.
    pub client_secret: Option<String>,
}

impl std::fmt::Debug for PreRegistered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreRegistered")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

impl PreRegistered {
    /// `client_id` (with `client_secret`), for `issuer` or any.
    pub fn new(
        issuer: Option<String>,
        client_id: impl Into<String>,
        client_secret: Option<String>,
    ) -> Self {
        Self {
            issuer,
            client_id: client_id.into(),
            client_secret,
        }
    }
}

/// How the client presents itself to authorization servers.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct OAuthConfig {
    /// `client_name` of a dynamic registration.
    pub client_name: String,
    /// `client_uri` of a dynamic registration.
    pub client_uri: Option<String>,
    /// `application_type` of a dynamic registration (SEP-837): `native`
    /// by default (a loopback redirect).
    pub application_type: String,
    /// Clients registered out of band, tried first.
    pub pre_registered: Vec<PreRegistered>,
    /// The HTTPS URL of this client's Client ID Metadata Document, used as
    /// its client id where the server supports CIMD.
    pub client_metadata_url: Option<String>,
    /// Whether to ask for `offline_access` (a refresh token) when the server
    /// lists it: yes by default.
    pub offline_access: bool,
    /// Machine to machine: the `client_credentials` grant with the
    /// registered client's secret instead of a user's authorization (the
    /// OAuth client credentials extension); no browser. Off by default.
    pub client_credentials: bool,
}

impl OAuthConfig {
    /// A client named `client_name`, registered dynamically.
    pub fn new(client_name: impl Into<String>) -> Self {
        Self {
            client_name: client_name.into(),
            client_uri: None,
            application_type: "native".to_owned(),
            pre_registered: Vec::new(),
            client_metadata_url: None,
            offline_access: true,
            client_credentials: false,
        }
    }

    /// Adds a pre-registered client.
    #[must_use]
    pub fn pre_registered(mut self, client: PreRegistered) -> Self {
        self.pre_registered.push(client);
        self
    }

    /// Uses `url` as the client id where CIMD is supported.
    #[must_use]
    pub fn client_metadata_url(mut self, url: impl Into<String>) -> Self {
        self.client_metadata_url = Some(url.into());
        self
    }
}

/// The user's side of the authorization request: sends them to the
/// authorization URL and brings back the URL the server redirected to.
pub trait Browser: Send + Sync + std::fmt::Debug + 'static {
    /// The redirect URI registered and sent (a loopback URL for a CLI).
    fn redirect_uri(&self) -> String;

    /// Visits `url`; the redirect (with `code`, `state`, maybe `iss`).
    fn authorize(&self, url: Url) -> BoxFuture<'_, Result<String, ClientError>>;
}

/// A [`Browser`] with no user: it `GET`s the authorization URL and reads the
/// `Location` of the server's redirect (for servers that consent by
/// themselves, such as test and conformance servers).
#[derive(Debug, Clone)]
pub struct FollowRedirect {
    redirect_uri: String,
    http: HttpClient,
}

impl FollowRedirect {
    /// Registers `redirect_uri`; trusts the built-in roots.
    pub fn new(redirect_uri: impl Into<String>) -> Result<Self, ClientError> {
        Ok(Self {
            redirect_uri: redirect_uri.into(),
            http: tls::client(&TlsOptions::default())?,
        })
    }

    /// Trusts the CAs `options` names too.
    pub fn with_tls(mut self, options: &TlsOptions) -> Result<Self, ClientError> {
        self.http = tls::client(options)?;
        Ok(self)
    }
}

impl Browser for FollowRedirect {
    fn redirect_uri(&self) -> String {
        self.redirect_uri.clone()
    }

    fn authorize(&self, url: Url) -> BoxFuture<'_, Result<String, ClientError>> {
        Box::pin(async move {
            let reply = net::get(&self.http, &url).await?;
            let Some(location) = reply.location.filter(|_| reply.status.is_redirection()) else {
                return Err(ClientError::unauthorized(format!(
                    "the authorization endpoint answered {} without a redirect",
                    reply.status
                )));
            };
            url.join(&location)
                .map(|u| u.to_string())
                .map_err(|e| ClientError::unauthorized("the redirect is not a URL").because(e))
        })
    }
}

/// The authorization in use: which server, which registration, which
/// scopes.
#[derive(Debug, Clone)]
struct Session {
    key: TokenKey,
    scopes: Vec<String>,
}

#[derive(Debug, Default)]
struct State {
    session: Option<Session>,
    /// Registrations by issuer: one per authorization server, never shared.
    registrations: HashMap<String, Registration>,
}

struct Inner {
    mcp: Url,
    config: OAuthConfig,
    browser: Arc<dyn Browser>,
    store: Arc<dyn TokenStore>,
    http: HttpClient,
    /// One flow at a time: concurrent 401s wait for the first one's token.
    state: tokio::sync::Mutex<State>,
}

/// OAuth for one MCP endpoint. Cheap to clone (shared state).
#[derive(Clone)]
pub struct OAuth(Arc<Inner>);

impl std::fmt::Debug for OAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuth")
            .field("mcp", &self.0.mcp.as_str())
            .field("store", &self.0.store)
            .finish_non_exhaustive()
    }
}

/// Whether an HTTP status and its challenge call for the flow.
pub(crate) fn wants_flow(status: u16, challenge: Option<&Challenge>) -> bool {
    status == 401 || (status == 403 && challenge.is_some_and(Challenge::insufficient_scope))
}

impl OAuth {
    /// OAuth for the MCP endpoint `mcp_url`, presenting itself as `config`
    /// says, the user reached through `browser`; tokens in memory.
    pub fn new(
        mcp_url: &str,
        config: OAuthConfig,
        browser: impl Browser,
    ) -> Result<Self, ClientError> {
        let mcp = Url::parse(mcp_url)
            .map_err(|e| ClientError::request(format!("invalid URL {mcp_url}")).because(e))?;
        Ok(Self(Arc::new(Inner {
            mcp,
            config,
            browser: Arc::new(browser),
            store: Arc::new(MemoryTokenStore::new()),
            http: tls::client(&TlsOptions::default())?,
            state: tokio::sync::Mutex::new(State::default()),
        })))
    }

    fn rebuild(self, f: impl FnOnce(&mut Inner)) -> Self {
        let inner = match Arc::try_unwrap(self.0) {
            Ok(mut inner) => {
                f(&mut inner);
                inner
            }
            Err(shared) => {
                let mut inner = Inner {
                    mcp: shared.mcp.clone(),
                    config: shared.config.clone(),
                    browser: Arc::clone(&shared.browser),
                    store: Arc::clone(&shared.store),
                    http: shared.http.clone(),
                    state: tokio::sync::Mutex::new(State::default()),
                };
                f(&mut inner);
                inner
            }
        };
        Self(Arc::new(inner))
    }

    /// Keeps grants in `store` instead of memory.
    #[must_use]
    pub fn with_store(self, store: impl TokenStore) -> Self {
        let store: Arc<dyn TokenStore> = Arc::new(store);
        self.rebuild(|i| i.store = store)
    }

    /// Keeps grants in a shared `store`.
    #[must_use]
    pub fn with_shared_store(self, store: Arc<dyn TokenStore>) -> Self {
        self.rebuild(|i| i.store = store)
    }

    /// Trusts the CAs `options` names for the authorization servers too.
    pub fn with_tls(self, options: &TlsOptions) -> Result<Self, ClientError> {
        let http = tls::client(options)?;
        Ok(self.rebuild(|i| i.http = http))
    }

    /// The MCP endpoint this authorizes.
    pub fn url(&self) -> &str {
        self.0.mcp.as_str()
    }

    /// Whether a grant for this endpoint is kept (in the store; a grant of
    /// another process included).
    pub fn has_grant(&self) -> bool {
        self.0.store.find(self.0.mcp.as_str()).is_some()
    }

    /// The grant in use, if any.
    pub async fn grant(&self) -> Option<Grant> {
        let state = self.0.state.lock().await;
        self.current(&state)
    }

    fn current(&self, state: &State) -> Option<Grant> {
        match &state.session {
            Some(s) => self.0.store.get(&s.key),
            // A grant another process stored for this endpoint.
            None => self.0.store.find(self.0.mcp.as_str()),
        }
    }

    /// The access token to send now (refreshed first if it expired), if
    /// there is one.
    pub async fn access_token(&self) -> Result<Option<String>, ClientError> {
        let mut state = self.0.state.lock().await;
        let Some(grant) = self.current(&state) else {
            return Ok(None);
        };
        if grant.expired() && grant.refresh_token.is_some() {
            // Another process may be refreshing the same grant: wait for it,
            // then use what it stored if that is fresh.
            let _guard = self.0.store.lock(&grant.key).await;
            if let Some(stored) = self.0.store.get(&grant.key)
                && !stored.expired()
            {
                self.adopt(&mut state, stored.clone());
                return Ok(Some(stored.access_token));
            }
            let grant = self.0.store.get(&grant.key).unwrap_or(grant);
            match flow::refresh(&self.0.http, &grant).await {
                Ok(fresh) => {
                    self.adopt(&mut state, fresh.clone());
                    return Ok(Some(fresh.access_token));
                }
                Err(e) => {
                    tracing::debug!("refresh failed, the next 401 starts over: {e}");
                    self.0.store.remove(&grant.key);
                    return Ok(None);
                }
            }
        }
        Ok(Some(grant.access_token))
    }

    fn adopt(&self, state: &mut State, grant: Grant) {
        state.session = Some(Session {
            key: grant.key.clone(),
            scopes: grant.scopes.clone(),
        });
        self.0.store.put(grant);
    }

    /// Forgets the grant in use (`tern logout`).
    pub async fn forget(&self) {
        let mut state = self.0.state.lock().await;
        if let Some(grant) = self.current(&state) {
            self.0.store.remove(&grant.key);
        }
        state.session = None;
    }

    /// Runs the whole flow now, without waiting for a 401 (`tern login`):
    /// discovery from the well-known locations, the PRM's scopes.
    pub async fn authorize(&self) -> Result<Grant, ClientError> {
        let mut state = self.0.state.lock().await;
        self.full_flow(&mut state, None, None).await
    }

    /// The server refused a request sent with `sent` (the access token, if
    /// any) with `status` and `challenge`: gets a token it may accept, or
    /// says why not. Returns once the request may be sent again.
    pub async fn challenged(
        &self,
        sent: Option<&str>,
        status: u16,
        challenge: Option<&Challenge>,
    ) -> Result<(), ClientError> {
        let mut state = self.0.state.lock().await;
        let current = self.current(&state);
        if status == 403 {
            let Some(challenge) = challenge.filter(|c| c.insufficient_scope()) else {
                return Err(ClientError::unauthorized(
                    "the server refused the request (HTTP 403)",
                ));
            };
            let held = state
                .session
                .as_ref()
                .map(|s| s.scopes.clone())
                .unwrap_or_default();
            let mut union = held.clone();
            for s in challenge.scope.iter().flatten() {
                if !union.contains(s) {
                    union.push(s.clone());
                }
            }
            if union.len() == held.len() {
                return Err(ClientError::unauthorized(format!(
                    "the server refuses the request for insufficient scope, though the token \
                     was asked with every scope it challenged ({})",
                    union.join(" ")
                )));
            }
            self.full_flow(&mut state, Some(challenge), Some(union))
                .await?;
            return Ok(());
        }
        // 401. Another request's flow already replaced the token: retry.
        if let Some(current) = &current
            && sent != Some(current.access_token.as_str())
        {
            return Ok(());
        }
        if let Some(grant) = current {
            // The lock first, then the grant read again: another process
            // may have refreshed it (spending the refresh token we hold) or
            // replaced it while we waited.
            let guard = self.0.store.lock(&grant.key).await;
            match self.0.store.get(&grant.key) {
                Some(stored) if stored.access_token != grant.access_token && !stored.expired() => {
                    // Newer than the token refused: retry with it.
                    self.adopt(&mut state, stored);
                    return Ok(());
                }
                Some(stored) => {
                    if stored.refresh_token.is_some() {
                        // Refresh only if the resource still trusts the same server.
                        let prm =
                            discovery::protected_resource(&self.0.http, &self.0.mcp, challenge)
                                .await?;
                        if prm.authorization_servers.first() == Some(&stored.key.issuer)
                            && let Ok(fresh) = flow::refresh(&self.0.http, &stored).await
                        {
                            self.adopt(&mut state, fresh);
                            return Ok(());
                        }
                    }
                    self.0.store.remove(&grant.key);
                }
                // Removed meanwhile (a logout, or a refresh that failed):
                // the full flow below.
                None => {}
            }
            // Not held through the full flow: it can wait on a browser.
            drop(guard);
        }
        let scopes = challenge.and_then(|c| c.scope.clone());
        self.full_flow(&mut state, challenge, scopes).await?;
        Ok(())
    }

    async fn full_flow(
        &self,
        state: &mut State,
        challenge: Option<&Challenge>,
        scopes: Option<Vec<String>>,
    ) -> Result<Grant, ClientError> {
        let inner = &self.0;
        let prm = discovery::protected_resource(&inner.http, &inner.mcp, challenge).await?;
        let issuer = prm.authorization_servers[0].clone();
        let meta = discovery::authorization_server(&inner.http, &issuer, &inner.mcp).await?;
        let redirect_uri = inner.browser.redirect_uri();
        let registration = if let Some(r) = state.registrations.get(&issuer) {
            r.clone()
        } else {
            let r = flow::register(&inner.http, &meta, &inner.config, &redirect_uri).await?;
            state.registrations.insert(issuer.clone(), r.clone());
            r
        };
        let scopes = self.scopes(scopes, &prm, &meta);
        if inner.config.client_credentials {
            let mut grant =
                flow::client_credentials(&inner.http, &meta, &registration, &prm.resource, scopes)
                    .await?;
            grant.endpoint = inner.mcp.to_string();
            if let Some(old) = state.session.take()
                && old.key != grant.key
            {
                inner.store.remove(&old.key);
            }
            self.adopt(state, grant.clone());
            return Ok(grant);
        }
        let pending = flow::authorization_request(
            &meta,
            &registration,
            &redirect_uri,
            &prm.resource,
            &scopes,
        )?;
        let redirect = inner.browser.authorize(pending.url.clone()).await?;
        let code = flow::read_redirect(&meta, &pending, &redirect)?;
        let mut grant = flow::exchange_code(
            &inner.http,
            &meta,
            &registration,
            pending,
            code,
            &redirect_uri,
            &prm.resource,
            scopes,
        )
        .await?;
        grant.endpoint = inner.mcp.to_string();
        // The previous grant (another server's, or fewer scopes) is done.
        if let Some(old) = state.session.take()
            && old.key != grant.key
        {
            inner.store.remove(&old.key);
        }
        self.adopt(state, grant.clone());
        Ok(grant)
    }

    /// The scopes to ask for: those given (a challenge's, or a step-up's
    /// union), else the PRM's `scopes_supported`, else none; plus
    /// `offline_access` when the server lists it.
    fn scopes(
        &self,
        given: Option<Vec<String>>,
        prm: &discovery::ResourceMetadata,
        meta: &ServerMetadata,
    ) -> Vec<String> {
        let mut scopes = given
            .or_else(|| prm.scopes_supported.clone())
            .unwrap_or_default();
        let offered = meta
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == "offline_access"));
        if self.0.config.offline_access && offered && !scopes.iter().any(|s| s == "offline_access")
        {
            scopes.push("offline_access".to_owned());
        }
        scopes
    }
}
