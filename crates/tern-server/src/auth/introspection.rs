//! Token introspection (RFC 7662), a [`TokenVerifier`] asking the issuer.

use std::fmt::Write as _;

use base64::Engine as _;
use serde_json::Value;

use super::{AccessToken, TokenVerifier, VerifyError, fetch};
use crate::future::BoxFuture;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_are_encoded() {
        assert_eq!(url_form(&[("a b", "c&d=é")]), "a+b=c%26d%3D%C3%A9");
    }
}
