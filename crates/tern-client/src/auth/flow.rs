//! The steps after discovery: registration (pre-registered, Client ID
//! Metadata Document, Dynamic Client Registration — in that order), the
//! authorization request with PKCE S256 and `state`, the redirect's checks
//! (`state`, RFC 9207 `iss`), and the token endpoint (code and refresh
//! grants, `client_secret_basic` / `_post` / `none`, RFC 8707 `resource`).

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use http::Method;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

use super::discovery::ServerMetadata;
use super::net::{self, Body};
use super::store::{Grant, TokenKey};
use super::{OAuthConfig, PreRegistered};
use crate::error::ClientError;
use crate::tls::HttpClient;

/// The client id (and secret) an authorization server knows us by.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Registration {
    pub(crate) client_id: String,
    pub(crate) client_secret: Option<String>,
    /// `client_secret_basic`, `client_secret_post` or `none`.
    pub(crate) auth_method: String,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("client_id", &self.client_id)
            .field("auth_method", &self.auth_method)
            .finish_non_exhaustive()
    }
}

/// RFC 8414 §2: absent means `client_secret_basic` only.
fn supported_methods(meta: &ServerMetadata) -> Vec<String> {
    meta.token_auth_methods
        .clone()
        .unwrap_or_else(|| vec!["client_secret_basic".to_owned()])
}

/// How a client with (or without) a secret authenticates, given what the
/// server supports: basic before post; `none` without a secret.
fn method_for(secret: bool, supported: &[String]) -> String {
    let has = |m: &str| supported.iter().any(|s| s == m);
    if !secret {
        "none"
    } else if has("client_secret_basic") {
        "client_secret_basic"
    } else if has("client_secret_post") {
        "client_secret_post"
    } else {
        "client_secret_basic"
    }
    .to_owned()
}

/// Registers, or finds the registration to use, in the spec's order: a
/// pre-registered client for this issuer; the configured Client ID
/// Metadata Document URL when the server supports it; Dynamic Client
/// Registration (RFC 7591) with `application_type` (SEP-837) and
/// `refresh_token` among the grant types (SEP-2207).
pub(crate) async fn register(
    http: &HttpClient,
    meta: &ServerMetadata,
    config: &OAuthConfig,
    redirect_uri: &str,
) -> Result<Registration, ClientError> {
    let supported = supported_methods(meta);
    let pre = config
        .pre_registered
        .iter()
        .find(|p: &&PreRegistered| p.issuer.as_deref().is_none_or(|i| i == meta.issuer));
    if let Some(p) = pre {
        return Ok(Registration {
            client_id: p.client_id.clone(),
            client_secret: p.client_secret.clone(),
            auth_method: method_for(p.client_secret.is_some(), &supported),
        });
    }
    if meta.cimd_supported
        && let Some(url) = &config.client_metadata_url
    {
        return Ok(Registration {
            client_id: url.clone(),
            client_secret: None,
            auth_method: "none".to_owned(),
        });
    }
    let Some(endpoint) = &meta.registration_endpoint else {
        return Err(ClientError::unauthorized(format!(
            "authorization server {} offers no registration endpoint, and no client is \
             pre-registered for it",
            meta.issuer
        )));
    };
    // A public client when the server allows it (a native app keeps no
    // secret); else the secret method it supports.
    let asked = if supported.iter().any(|m| m == "none") {
        "none".to_owned()
    } else {
        method_for(true, &supported)
    };
    let mut body = json!({
        "client_name": config.client_name,
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": asked,
        "application_type": config.application_type,
    });
    if let Some(uri) = &config.client_uri {
        body["client_uri"] = Value::String(uri.clone());
    }
    let reply = net::send(http, Method::POST, endpoint, Body::Json(body), None).await?;
    if !reply.status.is_success() {
        return Err(ClientError::unauthorized(format!(
            "dynamic client registration at {endpoint} failed: {}",
            reply.oauth_error()
        )));
    }
    let answer = reply.json("client registration response")?;
    let Some(client_id) = answer.get("client_id").and_then(Value::as_str) else {
        return Err(ClientError::unauthorized(format!(
            "the client registration response of {endpoint} has no client_id"
        )));
    };
    let client_secret = answer
        .get("client_secret")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let auth_method = match answer
        .get("token_endpoint_auth_method")
        .and_then(Value::as_str)
    {
        Some(m) if m == "none" || client_secret.is_some() => m.to_owned(),
        _ => method_for(client_secret.is_some(), &supported),
    };
    Ok(Registration {
        client_id: client_id.to_owned(),
        client_secret,
        auth_method,
    })
}

fn random(bytes: usize) -> Result<String, ClientError> {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf)
        .map_err(|e| ClientError::unauthorized(format!("no randomness for PKCE: {e}")))?;
    Ok(URL_SAFE_NO_PAD.encode(buf))
}

/// One authorization request in flight: what its redirect is checked
/// against and what the token request needs.
#[derive(Debug)]
pub(crate) struct Pending {
    pub(crate) url: Url,
    verifier: String,
    state: String,
}

/// The authorization request (OAuth 2.1 §4.1.1): PKCE S256 (refused when
/// the server does not advertise it, as MCP authorization requires),
/// `state`, `resource` (RFC 8707) and the scopes, if any.
pub(crate) fn authorization_request(
    meta: &ServerMetadata,
    registration: &Registration,
    redirect_uri: &str,
    resource: &str,
    scopes: &[String],
) -> Result<Pending, ClientError> {
    let s256 = meta
        .code_challenge_methods
        .as_ref()
        .is_some_and(|m| m.iter().any(|m| m == "S256"));
    if !s256 {
        return Err(ClientError::unauthorized(format!(
            "authorization server {} does not advertise PKCE S256 \
             (code_challenge_methods_supported): refused",
            meta.issuer
        )));
    }
    let verifier = random(32)?;
    let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
    let state = random(16)?;
    let mut url = meta.authorization_endpoint.clone();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &registration.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", &challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", &state)
            .append_pair("resource", resource);
        if !scopes.is_empty() {
            q.append_pair("scope", &scopes.join(" "));
        }
    }
    Ok(Pending {
        url,
        verifier,
        state,
    })
}

/// Reads the redirect the browser came back with: the server's error, or
/// the code once `state` matches and `iss` (RFC 9207 §2.4) is the issuer
/// byte for byte — required when the server advertises it, and checked
/// whenever present even when it does not.
pub(crate) fn read_redirect(
    meta: &ServerMetadata,
    pending: &Pending,
    redirect: &str,
) -> Result<String, ClientError> {
    let url = Url::parse(redirect).map_err(|e| {
        ClientError::unauthorized(format!(
            "the authorization redirect {redirect:?} is not a URL"
        ))
        .because(e)
    })?;
    let param = |name: &str| {
        url.query_pairs()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.into_owned())
    };
    if param("state").as_deref() != Some(pending.state.as_str()) {
        return Err(ClientError::unauthorized(
            "the authorization response's state is not the one sent: refused",
        ));
    }
    match param("iss") {
        Some(iss) if iss != meta.issuer => {
            return Err(ClientError::unauthorized(format!(
                "the authorization response's iss {iss:?} is not the issuer {:?}: refused \
                 (RFC 9207)",
                meta.issuer
            )));
        }
        None if meta.iss_parameter_supported => {
            return Err(ClientError::unauthorized(format!(
                "authorization server {} advertises the iss parameter but its response has \
                 none: refused (RFC 9207)",
                meta.issuer
            )));
        }
        _ => {}
    }
    if let Some(error) = param("error") {
        let description = param("error_description").unwrap_or_default();
        return Err(ClientError::unauthorized(format!(
            "the authorization server refused: {error} {description}"
        )));
    }
    param("code").ok_or_else(|| ClientError::unauthorized("the authorization response has no code"))
}

/// RFC 6749 §2.3.1: the id and secret are form-encoded before Basic.
fn basic(id: &str, secret: &str) -> String {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!(
        "Basic {}",
        STANDARD.encode(format!("{}:{}", enc(id), enc(secret)))
    )
}

/// A token request to `endpoint` with `form`, the client authenticated as
/// `auth_method` says; the grant it gives.
#[allow(clippy::too_many_arguments, reason = "one request's parts, named")]
async fn token_request(
    http: &HttpClient,
    endpoint: &Url,
    mut form: Vec<(String, String)>,
    key: TokenKey,
    client_secret: Option<&str>,
    auth_method: &str,
    scopes: Vec<String>,
    old_refresh: Option<String>,
) -> Result<Grant, ClientError> {
    let mut authorization = None;
    match (auth_method, client_secret) {
        ("client_secret_basic", Some(secret)) => {
            authorization = Some(basic(&key.client_id, secret));
        }
        ("client_secret_post", Some(secret)) => {
            form.push(("client_id".into(), key.client_id.clone()));
            form.push(("client_secret".into(), secret.to_owned()));
        }
        _ => form.push(("client_id".into(), key.client_id.clone())),
    }
    let reply = net::send(
        http,
        Method::POST,
        endpoint,
        Body::Form(form),
        authorization,
    )
    .await?;
    if !reply.status.is_success() {
        return Err(ClientError::unauthorized(format!(
            "the token endpoint {endpoint} refused: {}",
            reply.oauth_error()
        )));
    }
    let body = reply.json("token response")?;
    let Some(access_token) = body.get("access_token").and_then(Value::as_str) else {
        return Err(ClientError::unauthorized(
            "the token response has no access_token",
        ));
    };
    let token_type = body.get("token_type").and_then(Value::as_str).unwrap_or("");
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(ClientError::unauthorized(format!(
            "the token endpoint gave a {token_type:?} token; only Bearer is supported"
        )));
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    Ok(Grant {
        key,
        endpoint: String::new(),
        access_token: access_token.to_owned(),
        // A refresh response without a new refresh token keeps the old one
        // (RFC 6749 §6).
        refresh_token: body
            .get("refresh_token")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .or(old_refresh),
        expires_at: body
            .get("expires_in")
            .and_then(Value::as_u64)
            .map(|s| now.saturating_add(s)),
        scopes,
        token_endpoint: endpoint.to_string(),
        client_secret: client_secret.map(str::to_owned),
        auth_method: auth_method.to_owned(),
    })
}

#[allow(clippy::too_many_arguments, reason = "one request's parts, named")]
/// Exchanges the code (OAuth 2.1 §4.1.3) with the PKCE verifier and the
/// PRM's `resource`, verbatim.
pub(crate) async fn exchange_code(
    http: &HttpClient,
    meta: &ServerMetadata,
    registration: &Registration,
    pending: Pending,
    code: String,
    redirect_uri: &str,
    resource: &str,
    scopes: Vec<String>,
) -> Result<Grant, ClientError> {
    let form = vec![
        ("grant_type".into(), "authorization_code".into()),
        ("code".into(), code),
        ("redirect_uri".into(), redirect_uri.to_owned()),
        ("code_verifier".into(), pending.verifier),
        ("resource".into(), resource.to_owned()),
    ];
    let key = TokenKey::new(resource, &meta.issuer, &registration.client_id);
    token_request(
        http,
        &meta.token_endpoint,
        form,
        key,
        registration.client_secret.as_deref(),
        &registration.auth_method,
        scopes,
        None,
    )
    .await
}

/// The `client_credentials` grant (OAuth 2.1 §4.2): the client's own
/// authority, for a confidential client only.
pub(crate) async fn client_credentials(
    http: &HttpClient,
    meta: &ServerMetadata,
    registration: &Registration,
    resource: &str,
    scopes: Vec<String>,
) -> Result<Grant, ClientError> {
    if registration.client_secret.is_none() {
        return Err(ClientError::unauthorized(
            "the client_credentials grant needs a pre-registered client with a secret",
        ));
    }
    let mut form = vec![
        ("grant_type".into(), "client_credentials".into()),
        ("resource".into(), resource.to_owned()),
    ];
    if !scopes.is_empty() {
        form.push(("scope".into(), scopes.join(" ")));
    }
    let key = TokenKey::new(resource, &meta.issuer, &registration.client_id);
    token_request(
        http,
        &meta.token_endpoint,
        form,
        key,
        registration.client_secret.as_deref(),
        &registration.auth_method,
        scopes,
        None,
    )
    .await
}

/// Refreshes `grant` (OAuth 2.1 §4.3), with the same `resource`.
pub(crate) async fn refresh(http: &HttpClient, grant: &Grant) -> Result<Grant, ClientError> {
    let Some(refresh_token) = grant.refresh_token.clone() else {
        return Err(ClientError::unauthorized("no refresh token"));
    };
    let endpoint = net::secure_url(&grant.token_endpoint, "token endpoint")?;
    let form = vec![
        ("grant_type".into(), "refresh_token".into()),
        ("refresh_token".into(), refresh_token.clone()),
        ("resource".into(), grant.key.resource.clone()),
    ];
    let mut fresh = token_request(
        http,
        &endpoint,
        form,
        grant.key.clone(),
        grant.client_secret.as_deref(),
        &grant.auth_method,
        grant.scopes.clone(),
        Some(refresh_token),
    )
    .await?;
    fresh.endpoint.clone_from(&grant.endpoint);
    Ok(fresh)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(iss_supported: bool) -> ServerMetadata {
        ServerMetadata {
            issuer: "https://as.example".into(),
            authorization_endpoint: Url::parse("https://as.example/authorize?tenant=a").unwrap(),
            token_endpoint: Url::parse("https://as.example/token").unwrap(),
            registration_endpoint: None,
            scopes_supported: None,
            code_challenge_methods: Some(vec!["S256".into()]),
            token_auth_methods: None,
            cimd_supported: false,
            iss_parameter_supported: iss_supported,
        }
    }

    fn registration() -> Registration {
        Registration {
            client_id: "c".into(),
            client_secret: None,
            auth_method: "none".into(),
        }
    }

    fn pending(m: &ServerMetadata) -> Pending {
        authorization_request(
            m,
            &registration(),
            "http://localhost:1/cb",
            "https://r.example/mcp",
            &["a".into(), "b".into()],
        )
        .unwrap()
    }

    #[test]
    fn the_request_carries_pkce_state_resource_and_scope() {
        let m = meta(false);
        let p = pending(&m);
        let q: std::collections::HashMap<String, String> =
            p.url.query_pairs().into_owned().collect();
        assert_eq!(q["tenant"], "a");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(
            q["code_challenge"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(p.verifier.as_bytes()))
        );
        assert_eq!(p.verifier.len(), 43);
        assert_eq!(q["state"], p.state);
        assert_eq!(q["resource"], "https://r.example/mcp");
        assert_eq!(q["scope"], "a b");
    }

    #[test]
    fn no_s256_no_request() {
        let mut m = meta(false);
        m.code_challenge_methods = None;
        let e = authorization_request(&m, &registration(), "x", "y", &[]).unwrap_err();
        assert!(e.to_string().contains("S256"), "{e}");
        m.code_challenge_methods = Some(vec!["plain".into()]);
        assert!(authorization_request(&m, &registration(), "x", "y", &[]).is_err());
    }

    #[test]
    fn the_redirect_is_checked() {
        let m = meta(true);
        let p = pending(&m);
        let ok = format!(
            "http://localhost:1/cb?code=C&state={}&iss=https%3A%2F%2Fas.example",
            p.state
        );
        assert_eq!(read_redirect(&m, &p, &ok).unwrap(), "C");
        let wrong_state = "http://localhost:1/cb?code=C&state=x&iss=https%3A%2F%2Fas.example";
        assert!(
            read_redirect(&m, &p, wrong_state)
                .unwrap_err()
                .to_string()
                .contains("state")
        );
        let missing_iss = format!("http://localhost:1/cb?code=C&state={}", p.state);
        assert!(read_redirect(&m, &p, &missing_iss).is_err());
        let slash = format!(
            "http://localhost:1/cb?code=C&state={}&iss=https%3A%2F%2Fas.example%2F",
            p.state
        );
        assert!(read_redirect(&m, &p, &slash).is_err());
        let error = format!(
            "http://localhost:1/cb?error=access_denied&state={}&iss=https%3A%2F%2Fas.example",
            p.state
        );
        assert!(
            read_redirect(&m, &p, &error)
                .unwrap_err()
                .to_string()
                .contains("access_denied")
        );
        // Not advertised: absent is fine, a wrong one is not.
        let m = meta(false);
        let p = pending(&m);
        assert!(
            read_redirect(
                &m,
                &p,
                &format!("http://localhost:1/cb?code=C&state={}", p.state)
            )
            .is_ok()
        );
        let evil = format!(
            "http://localhost:1/cb?code=C&state={}&iss=https%3A%2F%2Fevil.example",
            p.state
        );
        assert!(read_redirect(&m, &p, &evil).is_err());
    }

    #[test]
    fn basic_encodes_before_base64() {
        assert_eq!(
            basic("a b", "p:w"),
            format!("Basic {}", STANDARD.encode("a+b:p%3Aw"))
        );
    }

    #[test]
    fn methods_follow_what_the_server_supports() {
        assert_eq!(
            method_for(true, &["client_secret_post".into()]),
            "client_secret_post"
        );
        assert_eq!(
            method_for(
                true,
                &["client_secret_basic".into(), "client_secret_post".into()]
            ),
            "client_secret_basic"
        );
        assert_eq!(method_for(false, &["client_secret_basic".into()]), "none");
    }
}
