//! The OAuth flow's own HTTP requests: metadata `GET`s, form and JSON
//! `POST`s, each bounded in size and time, over the same rustls client as
//! MCP. Every URL must be `https://` unless its host is loopback (OAuth 2.1
//! §1.5; the MCP authorization spec's "Communication Security").

use std::time::Duration;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, LOCATION};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use serde_json::Value;
use url::Url;

use crate::error::ClientError;
use crate::tls::HttpClient;

/// The largest metadata or token response read: 1 MiB.
pub(crate) const MAX_BODY: usize = 1 << 20;
/// How long one OAuth HTTP request may take: 30 s.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(30);

/// Whether `url`'s host is loopback (`localhost`, 127.0.0.0/8, `[::1]`).
pub(crate) fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Whether `url`'s host is this machine or a private network: `localhost`
/// (and names under `.localhost`), loopback, unspecified, private (RFC
/// 1918, IPv6 unique local `fc00::/7`), shared (`100.64.0.0/10`) and
/// link-local (`169.254.0.0/16`, `fe80::/10`) addresses, IPv4 inside IPv6
/// included. The host is read as written: a DNS name is not resolved.
pub fn is_local(url: &Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            d == "localhost" || d.ends_with(".localhost")
        }
        Some(url::Host::Ipv4(ip)) => local_v4(ip),
        Some(url::Host::Ipv6(ip)) => {
            ip.to_ipv4_mapped().is_some_and(local_v4)
                || ip.is_loopback()
                || ip.is_unspecified()
                || (ip.segments()[0] & 0xfe00) == 0xfc00
                || (ip.segments()[0] & 0xffc0) == 0xfe80
        }
        None => false,
    }
}

fn local_v4(ip: std::net::Ipv4Addr) -> bool {
    let [a, b, ..] = ip.octets();
    ip.is_loopback()
        || ip.is_unspecified()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_broadcast()
        || (a == 100 && (64..128).contains(&b))
        || a == 0
}

/// Where the OAuth flow of the MCP endpoint `mcp` may send a request: a
/// remote MCP server (one whose host is not [`is_local`]) never gets the
/// client to reach this machine or a private network through the URLs its
/// metadata names; a local one may name a local authorization server.
pub(crate) fn within_reach(url: &Url, mcp: &Url, what: &str) -> Result<(), ClientError> {
    if is_local(url) && !is_local(mcp) {
        return Err(ClientError::unauthorized(format!(
            "the {what} {url} is on this machine or a private network, but the MCP server {mcp} \
             is not: refused (a remote server does not get requests sent to local addresses)"
        )));
    }
    Ok(())
}

/// Parses `url` and checks it is HTTPS, or HTTP on loopback.
pub(crate) fn secure_url(url: &str, what: &str) -> Result<Url, ClientError> {
    let parsed = Url::parse(url).map_err(|e| {
        ClientError::unauthorized(format!("the {what} {url:?} is not a URL")).because(e)
    })?;
    match parsed.scheme() {
        "https" => Ok(parsed),
        "http" if is_loopback(&parsed) => Ok(parsed),
        _ => Err(ClientError::unauthorized(format!(
            "the {what} {url} is not HTTPS (plain HTTP is allowed on loopback only)"
        ))),
    }
}

/// A response: its status, `Location`, and body.
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) location: Option<String>,
    pub(crate) body: Bytes,
}

impl Reply {
    /// The body as a JSON object.
    pub(crate) fn json(&self, what: &str) -> Result<serde_json::Map<String, Value>, ClientError> {
        match serde_json::from_slice(&self.body) {
            Ok(Value::Object(o)) => Ok(o),
            Ok(_) => Err(ClientError::unauthorized(format!(
                "the {what} is not a JSON object"
            ))),
            Err(e) => Err(ClientError::unauthorized(format!("the {what} is not JSON")).because(e)),
        }
    }

    /// An OAuth error response's `error` and `error_description`.
    pub(crate) fn oauth_error(&self) -> String {
        let body: Value = serde_json::from_slice(&self.body).unwrap_or(Value::Null);
        match (body["error"].as_str(), body["error_description"].as_str()) {
            (Some(e), Some(d)) => format!("HTTP {}: {e}: {d}", self.status),
            (Some(e), None) => format!("HTTP {}: {e}", self.status),
            _ => format!("HTTP {}", self.status),
        }
    }
}

/// How a request authenticates the client (RFC 6749 §2.3.1).
pub(crate) enum Body {
    Empty,
    Form(Vec<(String, String)>),
    Json(Value),
}

pub(crate) async fn send(
    client: &HttpClient,
    method: Method,
    url: &Url,
    body: Body,
    authorization: Option<String>,
) -> Result<Reply, ClientError> {
    let mut builder = Request::builder()
        .method(method)
        .uri(url.as_str())
        .header(ACCEPT, "application/json");
    let bytes = match body {
        Body::Empty => Bytes::new(),
        Body::Form(pairs) => {
            builder = builder.header(CONTENT_TYPE, "application/x-www-form-urlencoded");
            let mut form = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in &pairs {
                form.append_pair(k, v);
            }
            Bytes::from(form.finish())
        }
        Body::Json(v) => {
            builder = builder.header(CONTENT_TYPE, "application/json");
            Bytes::from(v.to_string())
        }
    };
    if let Some(a) = authorization {
        builder = builder.header(AUTHORIZATION, a);
    }
    let request = builder
        .body(Full::new(bytes))
        .map_err(|e| ClientError::request("the OAuth request cannot be built").because(e))?;
    let exchange = async {
        let response = client
            .request(request)
            .await
            .map_err(|e| ClientError::transport(format!("cannot reach {url}")).because(e))?;
        let status = response.status();
        let location = response
            .headers()
            .get(LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body = Limited::new(response.into_body(), MAX_BODY)
            .collect()
            .await
            .map_err(|e| {
                ClientError::transport(format!(
                    "the response of {url} broke off or is larger than {MAX_BODY} bytes"
                ))
                .because(e)
            })?
            .to_bytes();
        Ok(Reply {
            status,
            location,
            body,
        })
    };
    tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| ClientError::transport(format!("{url} did not answer within {TIMEOUT:?}")))?
}

/// `GET url`.
pub(crate) async fn get(client: &HttpClient, url: &Url) -> Result<Reply, ClientError> {
    send(client, Method::GET, url, Body::Empty, None).await
}
