//! Where tokens live between requests (and, with a store of your own,
//! between processes): [`TokenStore`], keyed by [`TokenKey`]; in memory by
//! default ([`MemoryTokenStore`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::future::BoxFuture;

/// Whose tokens: the protected resource (the PRM's `resource`, verbatim),
/// the authorization server's issuer and the client id it knows us by. A
/// token is only ever sent to the resource it is keyed by.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub struct TokenKey {
    /// The protected resource.
    pub resource: String,
    /// The authorization server.
    pub issuer: String,
    /// The client id.
    pub client_id: String,
}

impl TokenKey {
    /// The key of `resource`'s tokens from `issuer` for `client_id`.
    pub fn new(
        resource: impl Into<String>,
        issuer: impl Into<String>,
        client_id: impl Into<String>,
    ) -> Self {
        Self {
            resource: resource.into(),
            issuer: issuer.into(),
            client_id: client_id.into(),
        }
    }
}

/// A grant: the tokens, and what refreshing them needs (the token endpoint
/// and how the client authenticates there), so a grant loaded by another
/// process can be refreshed without discovery.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Grant {
    /// Whose grant.
    pub key: TokenKey,
    /// The MCP endpoint it was obtained for (what [`TokenStore::find`]
    /// looks for).
    pub endpoint: String,
    /// The access token.
    pub access_token: String,
    /// The refresh token, if the authorization server gave one.
    pub refresh_token: Option<String>,
    /// When the access token expires (seconds since the Unix epoch), if the
    /// server said.
    pub expires_at: Option<u64>,
    /// The scopes asked for.
    pub scopes: Vec<String>,
    /// The token endpoint.
    pub token_endpoint: String,
    /// The client secret, for a confidential client.
    pub client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post` or `none`.
    pub auth_method: String,
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a credential.
        f.debug_struct("Grant")
            .field("key", &self.key)
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("refreshable", &self.refresh_token.is_some())
            .finish_non_exhaustive()
    }
}

/// Tokens older than this before their expiry are refreshed first: 30 s.
pub const EXPIRY_MARGIN: Duration = Duration::from_secs(30);

impl Grant {
    /// Whether the access token is expired, or will be within
    /// [`EXPIRY_MARGIN`].
    pub fn expired(&self) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        self.expires_at
            .is_some_and(|at| at <= now + EXPIRY_MARGIN.as_secs())
    }
}

/// Keeps grants. Implement it to keep them on disk (the `tern` command
/// does, in the user's config folder).
pub trait TokenStore: Send + Sync + std::fmt::Debug + 'static {
    /// The grant for `key`.
    fn get(&self, key: &TokenKey) -> Option<Grant>;
    /// Any grant obtained for the MCP endpoint `endpoint` (a new process
    /// knows the endpoint only).
    fn find(&self, endpoint: &str) -> Option<Grant>;
    /// Keeps `grant` (replacing the one of its key).
    fn put(&self, grant: Grant);
    /// Forgets the grant of `key`.
    fn remove(&self, key: &TokenKey);

    /// Holds other processes off `key`'s grant while it is refreshed (a
    /// rotated refresh token must not be used twice): the guard, dropped
    /// when the refresh is stored. `None` (the default): one process only.
    /// Waiting for the lock must not block the async runtime (sleep with
    /// `tokio::time`, or wait in `spawn_blocking`) and must be bounded.
    fn lock<'a>(&'a self, key: &'a TokenKey) -> BoxFuture<'a, Option<Box<dyn Send>>> {
        let _ = key;
        Box::pin(async { None })
    }
}

/// Grants in memory, for the life of the process: the default.
#[derive(Debug, Default)]
pub struct MemoryTokenStore(Mutex<HashMap<TokenKey, Grant>>);

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<TokenKey, Grant>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TokenStore for MemoryTokenStore {
    fn get(&self, key: &TokenKey) -> Option<Grant> {
        self.map().get(key).cloned()
    }

    fn find(&self, endpoint: &str) -> Option<Grant> {
        self.map()
            .values()
            .find(|g| g.endpoint == endpoint)
            .cloned()
    }

    fn put(&self, grant: Grant) {
        self.map().insert(grant.key.clone(), grant);
    }

    fn remove(&self, key: &TokenKey) {
        self.map().remove(key);
    }
}
