//! JWT access tokens (RFC 9068 profile) checked against the issuer's JWKS.
//!
//! - **Algorithms**: asymmetric only (RS256/384/512, PS256/384/512, ES256/384,
//!   `EdDSA` by default); `alg: none` does not parse, HS* is never accepted, and
//!   the key's family must match the header's algorithm (so an RSA or EC
//!   public key can never serve as an HMAC secret). `oct` keys of the JWKS are
//!   ignored.
//! - **Type**: the header's `typ` must be `at+jwt` (or `application/at+jwt`),
//!   case aside (RFC 9068 §2.1, §4), so an ID token or another JWT of the
//!   same issuer and audience is not taken for an access token. For an
//!   issuer that mints plain JWT access tokens,
//!   [`JwtVerifier::accept_plain_jwt`] also accepts `JWT` or no `typ`.
//! - **Claims**: `iss` equal to the configured issuer, `aud` containing the
//!   resource (RFC 8707), `exp` required, `nbf` honoured, `sub` required;
//!   [`DEFAULT_LEEWAY`] of clock skew on `exp` and `nbf`. Scopes from `scope`
//!   (space-separated) or `scp` (an array).
//! - **Keys**: the JWKS is fetched on first use (from `jwks_uri`, configured
//!   or read from the issuer's metadata, RFC 8414 then `OpenID`), kept, and
//!   fetched again when a token names an unknown `kid`, at most once per
//!   [`DEFAULT_REFETCH_INTERVAL`] (configurable), so a flood of made-up kids
//!   cannot turn into a flood of fetches; a failed fetch is not tried again
//!   within that interval either. One fetch is in flight at a time: checks
//!   needing one wait for it and use what it brought; checks whose key is
//!   cached never wait for a fetch. A key of the set that the verifier
//!   cannot read (an unknown `kty` or curve, a malformed member) is skipped,
//!   and logged once per fetch: it is never fatal to the rest of the set.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jsonwebtoken::jwk::{AlgorithmParameters, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::Value;

use super::fetch::{self, HttpClient};
use super::{AccessToken, TokenVerifier, VerifyError};
use crate::future::BoxFuture;

/// Clock skew allowed on `exp` and `nbf`: 60 s.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
/// The least time between two JWKS fetches caused by unknown `kid`s: 30 s.
pub const DEFAULT_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

const ASYMMETRIC: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

#[derive(Default)]
struct Keys {
    jwks_uri: Option<String>,
    set: Option<Arc<JwkSet>>,
    last_refetch: Option<Instant>,
    /// When a fetch last failed: no other is tried within the refetch
    /// interval (an issuer that is down is not hammered).
    last_failure: Option<Instant>,
    fetches: u64,
    /// Counts fetch attempts, so a check that waited for another's fetch
    /// knows one happened and does not start its own.
    attempts: u64,
}

/// Checks JWT access tokens of one issuer for one audience.
pub struct JwtVerifier {
    issuer: String,
    audience: String,
    leeway: Duration,
    refetch_interval: Duration,
    algorithms: Vec<Algorithm>,
    ca_file: Option<PathBuf>,
    plain_jwt: bool,
    http: std::sync::OnceLock<Result<HttpClient, String>>,
    /// The cached keys: held for reads and updates only, never across a
    /// fetch, so checks of tokens whose key is known never wait.
    keys: std::sync::Mutex<Keys>,
    /// Held by the one fetch in flight; a check needing a fetch waits on it,
    /// then uses what it fetched.
    fetching: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("leeway", &self.leeway)
            .finish_non_exhaustive()
    }
}

impl JwtVerifier {
    /// Tokens of `issuer` (its `jwks_uri` read from its metadata) for
    /// `audience` (the resource's URL, as its PRM names it).
    pub fn new(issuer: impl Into<String>, audience: impl Into<String>) -> Self {
        Self {
            issuer: issuer.into(),
            audience: audience.into(),
            leeway: DEFAULT_LEEWAY,
            refetch_interval: DEFAULT_REFETCH_INTERVAL,
            algorithms: ASYMMETRIC.to_vec(),
            ca_file: None,
            plain_jwt: false,
            http: std::sync::OnceLock::new(),
            keys: std::sync::Mutex::new(Keys::default()),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// Takes the keys from `url` instead of the issuer's metadata.
    #[must_use]
    pub fn jwks_uri(mut self, url: impl Into<String>) -> Self {
        self.keys
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .jwks_uri = Some(url.into());
        self
    }

    /// Allows `leeway` of clock skew (default [`DEFAULT_LEEWAY`]).
    #[must_use]
    pub fn leeway(mut self, leeway: Duration) -> Self {
        self.leeway = leeway;
        self
    }

    /// Fetches the JWKS again for an unknown `kid` at most once per
    /// `interval` (default [`DEFAULT_REFETCH_INTERVAL`]).
    #[must_use]
    pub fn refetch_interval(mut self, interval: Duration) -> Self {
        self.refetch_interval = interval;
        self
    }

    /// Accepts only `algorithms` (asymmetric ones; HS* are dropped).
    #[must_use]
    pub fn algorithms(mut self, algorithms: &[Algorithm]) -> Self {
        self.algorithms = algorithms
            .iter()
            .copied()
            .filter(|a| ASYMMETRIC.contains(a))
            .collect();
        self
    }

    /// Also accepts tokens whose `typ` is `JWT` or absent, for issuers that
    /// mint plain JWT access tokens rather than RFC 9068's `at+jwt`. It
    /// weakens the check: an ID token of the same issuer naming this
    /// resource as its audience would then pass as an access token.
    #[must_use]
    pub fn accept_plain_jwt(mut self) -> Self {
        self.plain_jwt = true;
        self
    }

    /// Trusts the CA certificates of the PEM file `path` for the fetches.
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// How many times the JWKS was fetched (for tests and metrics).
    pub fn jwks_fetches(&self) -> u64 {
        self.keys().fetches
    }

    fn keys(&self) -> std::sync::MutexGuard<'_, Keys> {
        self.keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn http(&self) -> Result<&HttpClient, VerifyError> {
        self.http
            .get_or_init(|| fetch::client(self.ca_file.as_deref()))
            .as_ref()
            .map_err(|e| VerifyError::Unavailable(e.clone()))
    }

    async fn discover_jwks_uri(&self) -> Result<String, VerifyError> {
        let http = self.http()?;
        let base = self.issuer.trim_end_matches('/');
        let (origin, path) = match base
            .find("://")
            .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
        {
            Some(split) => (&base[..split], &base[split..]),
            None => (base, ""),
        };
        let candidates = [
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{base}/.well-known/openid-configuration"),
        ];
        for url in candidates {
            let (status, body) = fetch::json(http, &url, None)
                .await
                .map_err(VerifyError::Unavailable)?;
            if status != 200 {
                continue;
            }
            if body["issuer"].as_str() != Some(self.issuer.as_str()) {
                return Err(VerifyError::Unavailable(format!(
                    "the metadata at {url} is not the issuer {}'s",
                    self.issuer
                )));
            }
            if let Some(uri) = body["jwks_uri"].as_str() {
                return Ok(uri.to_owned());
            }
        }
        Err(VerifyError::Unavailable(format!(
            "no jwks_uri found for issuer {}",
            self.issuer
        )))
    }

    /// One fetch of the JWKS (the `jwks_uri` discovered first when not
    /// known), the cache updated; called with `fetching` held.
    async fn fetch(&self) -> Result<(), VerifyError> {
        let known = {
            let mut keys = self.keys();
            if keys
                .last_failure
                .is_some_and(|at| at.elapsed() < self.refetch_interval)
            {
                return Err(VerifyError::Unavailable(
                    "the issuer's keys could not be fetched a moment ago; not trying again yet"
                        .into(),
                ));
            }
            keys.attempts += 1;
            keys.jwks_uri.clone()
        };
        let outcome = self.fetch_now(known).await;
        let mut keys = self.keys();
        keys.last_failure = outcome.is_err().then(Instant::now);
        let (uri, set) = outcome?;
        keys.jwks_uri = Some(uri);
        keys.set = Some(Arc::new(set));
        Ok(())
    }

    async fn fetch_now(&self, known: Option<String>) -> Result<(String, JwkSet), VerifyError> {
        let uri = match known {
            Some(u) => u,
            None => self.discover_jwks_uri().await?,
        };
        self.keys().fetches += 1;
        let (status, body) = fetch::json(self.http()?, &uri, None)
            .await
            .map_err(VerifyError::Unavailable)?;
        if status != 200 {
            return Err(VerifyError::Unavailable(format!("{uri} answered {status}")));
        }
        Ok((uri.clone(), read_set(&uri, body)?))
    }

    /// The key for `kid` (or the only key, when the token names none).
    fn find(set: &JwkSet, kid: Option<&str>) -> Option<DecodingKey> {
        let usable =
            |j: &&jsonwebtoken::jwk::Jwk| !matches!(j.algorithm, AlgorithmParameters::OctetKey(_));
        let jwk = if let Some(kid) = kid {
            set.keys
                .iter()
                .filter(usable)
                .find(|j| j.common.key_id.as_deref() == Some(kid))
        } else {
            let mut keys = set.keys.iter().filter(usable);
            match (keys.next(), keys.next()) {
                (Some(only), None) => Some(only),
                _ => None,
            }
        }?;
        DecodingKey::from_jwk(jwk).ok()
    }

    async fn key(&self, kid: Option<&str>) -> Result<DecodingKey, VerifyError> {
        let no_key = || {
            VerifyError::Invalid(format!(
                "no key {} in the issuer's JWKS",
                kid.unwrap_or("(no kid)")
            ))
        };
        let seen = {
            let keys = self.keys();
            if let Some(key) = keys.set.as_deref().and_then(|s| Self::find(s, kid)) {
                return Ok(key);
            }
            keys.attempts
        };
        // A fetch is needed: one at a time. Whoever waited for another's
        // fetch uses its outcome rather than fetching again.
        let _flight = self.fetching.lock().await;
        {
            let mut keys = self.keys();
            let found = keys.set.as_deref().and_then(|s| Self::find(s, kid));
            if let Some(key) = found {
                return Ok(key);
            }
            if keys.attempts != seen {
                return Err(if keys.set.is_some() {
                    no_key()
                } else {
                    VerifyError::Unavailable(
                        "the issuer's keys could not be fetched a moment ago; not trying again yet"
                            .into(),
                    )
                });
            }
            if keys.set.is_some() {
                // An unknown kid: the keys may have rotated. Fetch again, at
                // a bounded rate.
                let may = keys
                    .last_refetch
                    .is_none_or(|at| at.elapsed() >= self.refetch_interval);
                if !may {
                    return Err(no_key());
                }
                keys.last_refetch = Some(Instant::now());
            }
        }
        self.fetch().await?;
        self.keys()
            .set
            .as_deref()
            .and_then(|s| Self::find(s, kid))
            .ok_or_else(no_key)
    }

    async fn check(&self, token: &str) -> Result<AccessToken, VerifyError> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|e| VerifyError::Invalid(format!("not a JWT: {e}")))?;
        if !typ_accepted(header.typ.as_deref(), self.plain_jwt) {
            return Err(VerifyError::Invalid(format!(
                "typ {:?} is not an access token's (at+jwt, RFC 9068)",
                header.typ.as_deref().unwrap_or("(none)")
            )));
        }
        if !self.algorithms.contains(&header.alg) {
            return Err(VerifyError::Invalid(format!(
                "algorithm {:?} is not accepted",
                header.alg
            )));
        }
        let key = self.key(header.kid.as_deref()).await?;
        let mut validation = Validation::new(header.alg);
        validation.algorithms = vec![header.alg];
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = self.leeway.as_secs();
        let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key, &validation)
            .map_err(|e| VerifyError::Invalid(format!("the token is refused: {e}")))?;
        let claims = data.claims;
        let scopes = match (claims.get("scope"), claims.get("scp")) {
            (Some(Value::String(s)), _) => s
                .split(' ')
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect(),
            (_, Some(Value::Array(a))) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        };
        let mut token = AccessToken::new(
            self.issuer.clone(),
            claims["sub"].as_str().unwrap_or_default(),
            scopes,
        );
        token.client_id = claims
            .get("client_id")
            .or_else(|| claims.get("azp"))
            .and_then(Value::as_str)
            .map(str::to_owned);
        token.expires_at = claims.get("exp").and_then(Value::as_u64);
        token.claims = claims;
        Ok(token)
    }
}

/// RFC 9068 §2.1: `typ` is `at+jwt`; §4: `application/at+jwt` is the same
/// media type, compared case-insensitively. `plain` also takes `JWT` and no
/// `typ` ([`JwtVerifier::accept_plain_jwt`]).
fn typ_accepted(typ: Option<&str>, plain: bool) -> bool {
    match typ {
        Some(t) => {
            let t = match t.get(..12) {
                Some(head) if head.eq_ignore_ascii_case("application/") => &t[12..],
                _ => t,
            };
            t.eq_ignore_ascii_case("at+jwt") || (plain && t.eq_ignore_ascii_case("jwt"))
        }
        None => plain,
    }
}

/// The keys of a JWKS document: each key read on its own, so one the
/// verifier cannot use (an unknown `kty`, a curve it lacks, a malformed
/// member) is skipped and logged, not fatal to the set.
fn read_set(uri: &str, mut body: Value) -> Result<JwkSet, VerifyError> {
    let Some(Value::Array(keys)) = body.get_mut("keys").map(Value::take) else {
        return Err(VerifyError::Unavailable(format!(
            "{uri} is not a JWKS: no \"keys\" array"
        )));
    };
    let mut set = JwkSet { keys: Vec::new() };
    for key in keys {
        let kid = key.get("kid").and_then(Value::as_str).map(str::to_owned);
        match serde_json::from_value::<jsonwebtoken::jwk::Jwk>(key) {
            Ok(jwk) => set.keys.push(jwk),
            Err(e) => tracing::warn!(
                %uri,
                kid = kid.as_deref().unwrap_or("(none)"),
                error = %e,
                "a key of the JWKS cannot be read; skipped"
            ),
        }
    }
    Ok(set)
}

impl TokenVerifier for JwtVerifier {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, VerifyError>> {
        Box::pin(self.check(token))
    }
}

/// A shared verifier is a verifier.
impl<T: TokenVerifier + ?Sized> TokenVerifier for Arc<T> {
    fn verify<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<AccessToken, VerifyError>> {
        (**self).verify(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typ_is_an_access_token_s_unless_plain_jwt_is_allowed() {
        for ok in [
            "at+jwt",
            "AT+JWT",
            "application/at+jwt",
            "Application/At+Jwt",
        ] {
            assert!(typ_accepted(Some(ok), false), "{ok}");
        }
        for bad in [
            None,
            Some("JWT"),
            Some("jwt"),
            Some("id_token+jwt"),
            Some(""),
        ] {
            assert!(!typ_accepted(bad, false), "{bad:?}");
        }
        for ok in [None, Some("JWT"), Some("application/jwt"), Some("at+jwt")] {
            assert!(typ_accepted(ok, true), "{ok:?}");
        }
        assert!(!typ_accepted(Some("dpop+jwt"), true));
    }

    #[test]
    fn an_unreadable_key_is_skipped_and_the_others_kept() {
        let body = serde_json::json!({"keys": [
            {"kty": "EC", "crv": "P-256", "kid": "good", "alg": "ES256",
             "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
             "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"},
            {"kty": "PQC", "kid": "future"},
            {"kty": "EC", "crv": "P-256", "kid": "broken", "x": 7},
        ]});
        let set = read_set("https://as.example/jwks", body).unwrap();
        let kids: Vec<_> = set
            .keys
            .iter()
            .filter_map(|k| k.common.key_id.as_deref())
            .collect();
        assert_eq!(kids, ["good"]);
        assert!(JwtVerifier::find(&set, Some("good")).is_some());
        assert!(read_set("u", serde_json::json!({"nokeys": []})).is_err());
    }
}
