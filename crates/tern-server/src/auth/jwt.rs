//! JWT access tokens (RFC 9068 profile) checked against the issuer's JWKS.
//!
//! - **Algorithms**: asymmetric only (RS256/384/512, PS256/384/512, ES256/384,
//!   `EdDSA` by default); `alg: none` does not parse, HS* is never accepted, and
//!   the key's family must match the header's algorithm (so an RSA or EC
//!   public key can never serve as an HMAC secret), and a key naming its own
//!   `alg` serves only that one. `oct` and encryption keys of the JWKS are
//!   ignored. Signatures are checked by ring (see `jws.rs`), the provider
//!   rustls already builds: no other cryptographic crate is linked.
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

use serde_json::Value;

use super::fetch::{self, HttpClient};
use super::jws::{Algorithm, Jwk, Token, Unusable};
use super::{AccessToken, TokenVerifier, VerifyError};
use crate::future::BoxFuture;

/// Clock skew allowed on `exp` and `nbf`: 60 s.
pub const DEFAULT_LEEWAY: Duration = Duration::from_secs(60);
/// The least time between two JWKS fetches caused by unknown `kid`s: 30 s.
pub const DEFAULT_REFETCH_INTERVAL: Duration = Duration::from_secs(30);

#[derive(Default)]
struct Keys {
    jwks_uri: Option<String>,
    set: Option<Arc<[Jwk]>>,
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
            algorithms: Algorithm::ALL.to_vec(),
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

    /// Accepts only `algorithms` (all of [`Algorithm`] by default; there
    /// is no symmetric one to add).
    #[must_use]
    pub fn algorithms(mut self, algorithms: &[Algorithm]) -> Self {
        self.algorithms = algorithms.to_vec();
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
        keys.set = Some(set.into());
        Ok(())
    }

    async fn fetch_now(&self, known: Option<String>) -> Result<(String, Vec<Jwk>), VerifyError> {
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
    fn find(set: &[Jwk], kid: Option<&str>) -> Option<Jwk> {
        if let Some(kid) = kid {
            set.iter().find(|j| j.kid.as_deref() == Some(kid)).cloned()
        } else {
            match set {
                [only] => Some(only.clone()),
                _ => None,
            }
        }
    }

    async fn key(&self, kid: Option<&str>) -> Result<Jwk, VerifyError> {
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
        let jws = Token::parse(token).map_err(VerifyError::Invalid)?;
        if !typ_accepted(jws.typ.as_deref(), self.plain_jwt) {
            return Err(VerifyError::Invalid(format!(
                "typ {:?} is not an access token's (at+jwt, RFC 9068)",
                jws.typ.as_deref().unwrap_or("(none)")
            )));
        }
        if !self.algorithms.contains(&jws.alg) {
            return Err(VerifyError::Invalid(format!(
                "algorithm {} is not accepted",
                jws.alg
            )));
        }
        let key = self.key(jws.kid.as_deref()).await?;
        let claims = jws
            .verify(&key)
            .and_then(|claims| self.claims_valid(claims))
            .map_err(|e| VerifyError::Invalid(format!("the token is refused: {e}")))?;
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

impl JwtVerifier {
    /// RFC 9068 §4 (and RFC 7519 §4.1): `iss` is the issuer, `aud` names
    /// this resource, `sub` is present, `exp` is not past and `nbf` (when
    /// present) not ahead, give or take the leeway.
    fn claims_valid(
        &self,
        claims: serde_json::Map<String, Value>,
    ) -> Result<serde_json::Map<String, Value>, String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let leeway = self.leeway.as_secs_f64();
        let date = |name: &str| match claims.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_f64()
                .map(Some)
                .ok_or_else(|| format!("\"{name}\" is not a NumericDate")),
        };
        match date("exp")? {
            None => return Err("no \"exp\"".into()),
            Some(exp) if now > exp + leeway => return Err("it expired".into()),
            Some(_) => {}
        }
        if date("nbf")?.is_some_and(|nbf| now + leeway < nbf) {
            return Err("it is not valid yet (\"nbf\")".into());
        }
        if claims.get("iss").and_then(Value::as_str) != Some(self.issuer.as_str()) {
            return Err(format!("\"iss\" is not {}", self.issuer));
        }
        let audience = Value::String(self.audience.clone());
        let named = match claims.get("aud") {
            Some(Value::String(_)) => claims.get("aud") == Some(&audience),
            Some(Value::Array(list)) => list.contains(&audience),
            _ => false,
        };
        if !named {
            return Err(format!("\"aud\" does not name {}", self.audience));
        }
        if !claims.get("sub").is_some_and(Value::is_string) {
            return Err("no \"sub\"".into());
        }
        Ok(claims)
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
fn read_set(uri: &str, mut body: Value) -> Result<Vec<Jwk>, VerifyError> {
    let Some(Value::Array(keys)) = body.get_mut("keys").map(Value::take) else {
        return Err(VerifyError::Unavailable(format!(
            "{uri} is not a JWKS: no \"keys\" array"
        )));
    };
    let mut set = Vec::with_capacity(keys.len());
    for key in keys {
        let kid = key.get("kid").and_then(Value::as_str).unwrap_or("(none)");
        match Jwk::read(&key) {
            Ok(jwk) => set.push(jwk),
            Err(Unusable::NotForSignatures) => {}
            Err(Unusable::Malformed(e)) => tracing::warn!(
                %uri,
                kid,
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
        let kids: Vec<_> = set.iter().filter_map(|k| k.kid.as_deref()).collect();
        assert_eq!(kids, ["good"]);
        assert!(JwtVerifier::find(&set, Some("good")).is_some());
        assert!(read_set("u", serde_json::json!({"nokeys": []})).is_err());
    }

    #[test]
    fn claims_name_the_issuer_the_audience_a_subject_and_a_live_window() {
        let v = JwtVerifier::new("https://as.example", "https://mcp.example/mcp");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let good = serde_json::json!({"iss": "https://as.example", "sub": "grace",
            "aud": "https://mcp.example/mcp", "exp": now + 300.5});
        let claims = |changes: Value| {
            let mut c = good.clone();
            for (k, v) in changes.as_object().unwrap() {
                if v.is_null() {
                    c.as_object_mut().unwrap().remove(k);
                } else {
                    c[k] = v.clone();
                }
            }
            c.as_object().unwrap().clone()
        };
        let ok = |changes: Value| v.claims_valid(claims(changes)).is_ok();
        assert!(ok(serde_json::json!({})));
        assert!(ok(
            serde_json::json!({"aud": ["https://other.example", "https://mcp.example/mcp"]})
        ));
        // Within the leeway (60 s) either side.
        assert!(ok(
            serde_json::json!({"exp": now - 30.0, "nbf": now + 30.0})
        ));
        for (what, changes) in [
            ("expired", serde_json::json!({"exp": now - 120.0})),
            ("not yet valid", serde_json::json!({"nbf": now + 120.0})),
            ("exp a string", serde_json::json!({"exp": "tomorrow"})),
            ("no exp", serde_json::json!({"exp": null})),
            (
                "other issuer",
                serde_json::json!({"iss": "https://evil.example"}),
            ),
            ("no issuer", serde_json::json!({"iss": null})),
            (
                "other audience",
                serde_json::json!({"aud": "https://other.example"}),
            ),
            (
                "audience list without it",
                serde_json::json!({"aud": ["https://other.example"]}),
            ),
            (
                "audience a prefix",
                serde_json::json!({"aud": "https://mcp.example"}),
            ),
            ("no audience", serde_json::json!({"aud": null})),
            ("no subject", serde_json::json!({"sub": null})),
            ("subject a number", serde_json::json!({"sub": 7})),
        ] {
            assert!(!ok(changes), "{what}");
        }
    }
}
