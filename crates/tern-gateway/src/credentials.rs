//! An upstream's credentials: the gateway's own, per upstream, never the
//! client's (spec: Authorization › Access Token Privilege Restriction — a
//! server must not pass the token it was given through to another
//! resource).
//!
//! - `headers` (HTTP) and `env` (stdio) of the servers file, each value
//!   with `${NAME}` (or VS Code's `${env:NAME}`) replaced by the gateway's
//!   environment variable `NAME` when the file is loaded (a variable that is
//!   not set is an error naming it, never its value); `$$` is a `$`.
//! - `"auth": "login"` (HTTP): the grant `tern login URL` stored for the
//!   upstream's URL, sent as its bearer token and refreshed when it expires
//!   ([`crate::GatewayOptions::logins`] names the store). The gateway never
//!   opens a browser: without a grant the upstream is down, saying to run
//!   `tern login`.
//!
//! The client's `Authorization` header ends at the gateway: the upstream
//! requests are the gateway's own, with only the headers above.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tern_client::ClientError;
use tern_client::auth::{Browser, OAuth, OAuthConfig, TokenStore, Url};

/// `text` with its `${NAME}` and `${env:NAME}` replaced by the environment
/// variables, `$$` by `$`; `what` names the value in errors.
pub(crate) fn expand(text: &str, what: &str) -> Result<String, String> {
    expand_with(text, what, |name| std::env::var(name).ok())
}

fn expand_with(
    text: &str,
    what: &str,
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        }
        let Some(inner) = after.strip_prefix('{') else {
            out.push('$');
            rest = after;
            continue;
        };
        let Some(end) = inner.find('}') else {
            return Err(format!("{what}: `${{` without its `}}`"));
        };
        let name = inner[..end].strip_prefix("env:").unwrap_or(&inner[..end]);
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !valid {
            return Err(format!(
                "{what}: `${{{}}}` is not an environment variable's name",
                &inner[..end]
            ));
        }
        let value = lookup(name)
            .ok_or_else(|| format!("{what}: the environment variable {name} is not set"))?;
        out.push_str(&value);
        rest = &inner[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The gateway has no user to send to an authorization server: a flow it
/// would start fails, naming the command that makes the grant.
#[derive(Debug)]
struct NoBrowser {
    url: String,
}

impl Browser for NoBrowser {
    fn redirect_uri(&self) -> String {
        "http://127.0.0.1/callback".into()
    }

    fn authorize(
        &self,
        _url: Url,
    ) -> Pin<Box<dyn Future<Output = Result<String, ClientError>> + Send + '_>> {
        let message = format!(
            "the upstream {} needs a login: run `tern login {}` where the gateway runs",
            self.url, self.url
        );
        Box::pin(async move { Err(ClientError::authorization(message)) })
    }
}

/// OAuth for the upstream at `url` from the grants in `store` (`tern
/// login`'s), refreshed when they expire, never a browser.
pub(crate) fn login(
    url: &str,
    store: Arc<dyn TokenStore>,
    tls: Option<&tern_client::tls::TlsOptions>,
) -> Result<OAuth, ClientError> {
    let browser = NoBrowser {
        url: url.to_owned(),
    };
    let mut oauth = OAuth::new(url, OAuthConfig::new("tern"), browser)?.with_shared_store(store);
    if let Some(tls) = tls {
        oauth = oauth.with_tls(tls)?;
    }
    Ok(oauth)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn variables_are_replaced_and_a_missing_one_is_named_never_valued() {
        let x = |t: &str| expand_with(t, "demo.headers.Authorization", env);
        assert_eq!(x("Bearer ${TOKEN}").unwrap(), "Bearer s3cret");
        assert_eq!(x("Bearer ${env:TOKEN}").unwrap(), "Bearer s3cret");
        assert_eq!(x("a${EMPTY}b").unwrap(), "ab");
        assert_eq!(x("cost $5, $${TOKEN}").unwrap(), "cost $5, ${TOKEN}");
        assert_eq!(x("no variables").unwrap(), "no variables");
        let missing = x("Bearer ${NOPE}").unwrap_err();
        assert_eq!(
            missing,
            "demo.headers.Authorization: the environment variable NOPE is not set"
        );
        assert!(x("${TOKEN").unwrap_err().contains("without its"));
        assert!(
            x("${1X}")
                .unwrap_err()
                .contains("not an environment variable")
        );
        assert!(
            x("${}")
                .unwrap_err()
                .contains("not an environment variable")
        );
        assert!(!x("${A-B}").unwrap_err().contains("s3cret"));
    }
}
