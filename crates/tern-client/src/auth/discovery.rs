//! Discovery: the Protected Resource Metadata (RFC 9728) of the MCP server,
//! then its authorization server's metadata (RFC 8414, then `OpenID Connect`
//! Discovery), in the orders of the MCP authorization spec.

use serde_json::Value;
use url::Url;

use super::challenge::Challenge;
use super::net::{self, secure_url};
use crate::error::ClientError;
use crate::tls::HttpClient;

/// What the MCP server says of itself (RFC 9728 §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourceMetadata {
    /// `resource`, verbatim (it is sent back exactly so, RFC 8707).
    pub(crate) resource: String,
    pub(crate) authorization_servers: Vec<String>,
    pub(crate) scopes_supported: Option<Vec<String>>,
}

/// What the authorization server says of itself (RFC 8414 §2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerMetadata {
    pub(crate) issuer: String,
    pub(crate) authorization_endpoint: Url,
    pub(crate) token_endpoint: Url,
    pub(crate) registration_endpoint: Option<Url>,
    pub(crate) scopes_supported: Option<Vec<String>>,
    pub(crate) code_challenge_methods: Option<Vec<String>>,
    pub(crate) token_auth_methods: Option<Vec<String>>,
    pub(crate) cimd_supported: bool,
    pub(crate) iss_parameter_supported: bool,
}

fn strings(v: &Value) -> Option<Vec<String>> {
    v.as_array().map(|a| {
        a.iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect()
    })
}

/// `origin` + `path`, the origin taken from `url`.
fn at(url: &Url, path: &str) -> Url {
    let mut u = url.clone();
    u.set_query(None);
    u.set_fragment(None);
    u.set_path(path);
    u
}

/// The PRM locations to try, in order: the challenge's `resource_metadata`,
/// then the path-based well-known URL, then the root one (RFC 9728 §3.1;
/// MCP authorization, "Protected Resource Metadata Discovery").
pub(crate) fn resource_metadata_urls(mcp: &Url, challenge: Option<&Challenge>) -> Vec<String> {
    let mut urls = Vec::new();
    if let Some(u) = challenge.and_then(|c| c.resource_metadata.clone()) {
        urls.push(u);
    }
    let path = mcp.path().trim_end_matches('/');
    if !path.is_empty() {
        urls.push(at(mcp, &format!("/.well-known/oauth-protected-resource{path}")).to_string());
    }
    urls.push(at(mcp, "/.well-known/oauth-protected-resource").to_string());
    urls.dedup();
    urls
}

/// Whether the PRM's `resource` may stand for the MCP endpoint `mcp`: the
/// same origin, and a path that is a prefix of the endpoint's at a segment
/// boundary (so tokens for it are never sent to another resource).
pub(crate) fn resource_matches(resource: &str, mcp: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if r.fragment().is_some()
        || r.scheme() != mcp.scheme()
        || r.host() != mcp.host()
        || r.port_or_known_default() != mcp.port_or_known_default()
    {
        return false;
    }
    let prefix = r.path().trim_end_matches('/');
    let path = mcp.path();
    prefix.is_empty()
        || path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Fetches the PRM of the MCP endpoint `mcp`, and checks its `resource`.
pub(crate) async fn protected_resource(
    http: &HttpClient,
    mcp: &Url,
    challenge: Option<&Challenge>,
) -> Result<ResourceMetadata, ClientError> {
    let mut tried = Vec::new();
    for candidate in resource_metadata_urls(mcp, challenge) {
        let url = secure_url(&candidate, "protected resource metadata URL")?;
        net::within_reach(&url, mcp, "protected resource metadata URL")?;
        // An unreachable location (the challenge's, say) is one more tried.
        let reply = match net::get(http, &url).await {
            Ok(reply) => reply,
            Err(e) => {
                tried.push(format!("{url} ({e:#})"));
                continue;
            }
        };
        if !reply.status.is_success() {
            tried.push(format!("{url} ({})", reply.status));
            continue;
        }
        let body = reply.json("protected resource metadata")?;
        let Some(resource) = body.get("resource").and_then(Value::as_str) else {
            return Err(ClientError::unauthorized(format!(
                "the protected resource metadata at {url} has no `resource`"
            )));
        };
        if !resource_matches(resource, mcp) {
            return Err(ClientError::unauthorized(format!(
                "the protected resource metadata at {url} names resource {resource}, \
                 which is not {mcp} nor a prefix of it on the same origin: refused"
            )));
        }
        let authorization_servers = body
            .get("authorization_servers")
            .and_then(strings)
            .unwrap_or_default();
        if authorization_servers.is_empty() {
            return Err(ClientError::unauthorized(format!(
                "the protected resource metadata at {url} names no authorization server"
            )));
        }
        return Ok(ResourceMetadata {
            resource: resource.to_owned(),
            authorization_servers,
            scopes_supported: body.get("scopes_supported").and_then(strings),
        });
    }
    Err(ClientError::unauthorized(format!(
        "no protected resource metadata found (tried {})",
        tried.join(", ")
    )))
}

/// The metadata locations of `issuer`, in order: RFC 8414 §3.1 with the
/// path inserted, then `OpenID Connect` Discovery with the path inserted, then
/// appended (MCP authorization, "Authorization Server Metadata Discovery").
pub(crate) fn server_metadata_urls(issuer: &Url) -> Vec<Url> {
    let path = issuer.path().trim_end_matches('/');
    let paths = if path.is_empty() {
        vec![
            "/.well-known/oauth-authorization-server".to_owned(),
            "/.well-known/openid-configuration".to_owned(),
        ]
    } else {
        vec![
            format!("/.well-known/oauth-authorization-server{path}"),
            format!("/.well-known/openid-configuration{path}"),
            format!("{path}/.well-known/openid-configuration"),
        ]
    };
    paths.iter().map(|p| at(issuer, p)).collect()
}

/// Fetches `issuer`'s metadata; its `issuer` must be `issuer` exactly
/// (RFC 8414 §3.3), and its endpoints HTTPS (or loopback), and within
/// reach of the MCP endpoint `mcp` ([`net::within_reach`]).
pub(crate) async fn authorization_server(
    http: &HttpClient,
    issuer: &str,
    mcp: &Url,
) -> Result<ServerMetadata, ClientError> {
    let issuer_url = secure_url(issuer, "authorization server")?;
    net::within_reach(&issuer_url, mcp, "authorization server")?;
    let mut tried = Vec::new();
    for url in server_metadata_urls(&issuer_url) {
        // An unreachable location is one more tried, as for the PRM.
        let reply = match net::get(http, &url).await {
            Ok(reply) => reply,
            Err(e) => {
                tried.push(format!("{url} ({e:#})"));
                continue;
            }
        };
        if !reply.status.is_success() {
            tried.push(format!("{url} ({})", reply.status));
            continue;
        }
        let body = reply.json("authorization server metadata")?;
        let claimed = body
            .get("issuer")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if claimed != issuer {
            return Err(ClientError::unauthorized(format!(
                "the authorization server metadata at {url} names issuer {claimed:?}, \
                 not {issuer:?}: refused (RFC 8414 §3.3)"
            )));
        }
        let endpoint = |name: &str| -> Result<Option<Url>, ClientError> {
            body.get(name)
                .and_then(Value::as_str)
                .map(|u| {
                    let u = secure_url(u, name)?;
                    net::within_reach(&u, mcp, name)?;
                    Ok(u)
                })
                .transpose()
        };
        let required = |name: &str| -> Result<Url, ClientError> {
            endpoint(name)?.ok_or_else(|| {
                ClientError::unauthorized(format!(
                    "the authorization server metadata at {url} has no {name}"
                ))
            })
        };
        return Ok(ServerMetadata {
            issuer: issuer.to_owned(),
            authorization_endpoint: required("authorization_endpoint")?,
            token_endpoint: required("token_endpoint")?,
            registration_endpoint: endpoint("registration_endpoint")?,
            scopes_supported: body.get("scopes_supported").and_then(strings),
            code_challenge_methods: body
                .get("code_challenge_methods_supported")
                .and_then(strings),
            token_auth_methods: body
                .get("token_endpoint_auth_methods_supported")
                .and_then(strings),
            cimd_supported: body
                .get("client_id_metadata_document_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            iss_parameter_supported: body
                .get("authorization_response_iss_parameter_supported")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        });
    }
    Err(ClientError::unauthorized(format!(
        "no metadata found for authorization server {issuer} (tried {})",
        tried.join(", ")
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn prm_locations_in_order() {
        let mcp = url("https://h.example/a/mcp?x=1");
        assert_eq!(
            resource_metadata_urls(&mcp, None),
            [
                "https://h.example/.well-known/oauth-protected-resource/a/mcp",
                "https://h.example/.well-known/oauth-protected-resource"
            ]
        );
        let root = url("https://h.example/");
        assert_eq!(
            resource_metadata_urls(&root, None),
            ["https://h.example/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn metadata_locations_in_order() {
        let with_path: Vec<String> = server_metadata_urls(&url("https://as.example/tenant1"))
            .iter()
            .map(Url::to_string)
            .collect();
        assert_eq!(
            with_path,
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
        assert_eq!(server_metadata_urls(&url("https://as.example")).len(), 2);
    }

    #[test]
    fn resource_must_be_same_origin_and_a_path_prefix() {
        let mcp = url("https://h.example:8443/api/mcp");
        assert!(resource_matches("https://h.example:8443/api/mcp", &mcp));
        assert!(resource_matches("https://h.example:8443/api", &mcp));
        assert!(resource_matches("https://h.example:8443", &mcp));
        assert!(resource_matches("https://h.example:8443/", &mcp));
        assert!(!resource_matches("https://h.example:8443/ap", &mcp));
        assert!(!resource_matches(
            "https://h.example:8443/api/mcp/more",
            &mcp
        ));
        assert!(!resource_matches("https://evil.example/api/mcp", &mcp));
        assert!(!resource_matches("http://h.example:8443/api/mcp", &mcp));
        assert!(!resource_matches("https://h.example/api/mcp", &mcp));
        assert!(!resource_matches("https://h.example:8443/api/mcp#x", &mcp));
        assert!(!resource_matches("not a url", &mcp));
    }

    /// A loopback plain-HTTP authorization server: the RFC 8414 location
    /// drops the connection unanswered, the `OpenID` one answers.
    async fn flaky_issuer() -> String {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
        let doc = serde_json::json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
        })
        .to_string();
        tokio::spawn(async move {
            for _ in 0..16 {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                let mut buf = vec![0; 4096];
                let n = stream.read(&mut buf).await.unwrap_or(0);
                let head = String::from_utf8_lossy(&buf[..n]).into_owned();
                if head.starts_with("GET /.well-known/openid-configuration ") {
                    let reply = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n{doc}",
                        doc.len()
                    );
                    let _ = stream.write_all(reply.as_bytes()).await;
                }
                // Any other location: closed unanswered.
            }
        });
        issuer
    }

    #[tokio::test]
    async fn an_unreachable_metadata_location_is_one_more_tried() {
        let issuer = flaky_issuer().await;
        let http = crate::tls::client(&crate::tls::TlsOptions::new()).unwrap();
        let meta = tokio::time::timeout(
            std::time::Duration::from_secs(30),
            authorization_server(&http, &issuer, &url(&issuer)),
        )
        .await
        .expect("bounded")
        .unwrap();
        assert_eq!(meta.issuer, issuer);
        assert_eq!(meta.token_endpoint.as_str(), format!("{issuer}/token"));
    }

    #[test]
    fn a_remote_server_never_sends_the_client_to_a_local_address() {
        let remote = url("https://mcp.example/mcp");
        for local in [
            "http://127.0.0.1:9/",
            "http://localhost:9/",
            "http://app.localhost/",
            "http://[::1]:9/",
            "http://[::ffff:127.0.0.1]/",
            "https://10.1.2.3/",
            "https://172.16.0.1/",
            "https://192.168.1.1/",
            "https://169.254.169.254/latest/meta-data",
            "https://100.64.0.1/",
            "https://[fd00::1]/",
            "https://[fe80::1]/",
            "https://0.0.0.0/",
            // Other spellings of 127.0.0.1, as the URL parser reads them.
            "http://2130706433/",
            "http://0x7f.1/",
        ] {
            assert!(net::is_local(&url(local)), "{local}");
            assert!(
                net::within_reach(&url(local), &remote, "t").is_err(),
                "{local}"
            );
        }
        for public in [
            "https://as.example/",
            "https://8.8.8.8/",
            "https://[2001:db8::1]/",
        ] {
            assert!(!net::is_local(&url(public)), "{public}");
            assert!(net::within_reach(&url(public), &remote, "t").is_ok());
        }
        // A local MCP server may use a local authorization server.
        let local = url("http://127.0.0.1:8080/mcp");
        assert!(net::within_reach(&url("http://127.0.0.1:9/"), &local, "t").is_ok());
    }

    #[test]
    fn only_https_or_loopback_http() {
        assert!(secure_url("https://as.example/x", "t").is_ok());
        assert!(secure_url("http://localhost:9/x", "t").is_ok());
        assert!(secure_url("http://127.0.0.2:9/x", "t").is_ok());
        assert!(secure_url("http://[::1]:9/x", "t").is_ok());
        assert!(secure_url("http://as.example/x", "t").is_err());
        assert!(secure_url("ftp://localhost/x", "t").is_err());
    }
}
