//! OAuth end to end, over HTTPS with a test CA on loopback: a small
//! authorization server of the test's own (metadata, JWKS, dynamic
//! registration, an authorization endpoint that consents at once, a token
//! endpoint issuing ES256 JWTs and refreshing them), tern's server as the
//! resource server (`Http::oauth`: PRM, JWT checks, 401 / 403 challenges,
//! per-tool scopes) and tern's client running the flow
//! (`HttpTransport::with_oauth`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use sha2::Digest as _;
use tern_client::auth::{FollowRedirect, OAuth, OAuthConfig};
use tern_client::tls::TlsOptions;
use tern_client::transport::http::HttpTransport;
use tern_client::{CallOptions, Client, ErrorKind, Round, Started};
use tern_server::auth::{Introspection, JwtVerifier, ResourceServer};
use tern_server::transport::http::Http;

use crate::handlers::Elicit;
use crate::harness::bounded;
use crate::server;
use crate::tls::{TestCa, serve_https_on};

const REDIRECT: &str = "http://localhost:1/callback";

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// One signing key: its JWK and its encoder.
struct Key {
    kid: String,
    pair: rcgen::KeyPair,
}

impl Key {
    fn new(kid: &str) -> Self {
        Self {
            kid: kid.to_owned(),
            pair: rcgen::KeyPair::generate().unwrap(),
        }
    }

    fn jwk(&self) -> Value {
        let raw = self.pair.public_key_raw();
        json!({
            "kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": self.kid,
            "x": URL_SAFE_NO_PAD.encode(&raw[1..33]),
            "y": URL_SAFE_NO_PAD.encode(&raw[33..65]),
        })
    }

    /// An RFC 9068 access token: `typ` is `at+jwt`.
    fn sign(&self, claims: &Value) -> String {
        self.sign_typ(claims, Some("at+jwt"))
    }

    fn sign_typ(&self, claims: &Value, typ: Option<&str>) -> String {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        header.typ = typ.map(str::to_owned);
        let key = jsonwebtoken::EncodingKey::from_ec_der(&self.pair.serialize_der());
        jsonwebtoken::encode(&header, claims, &key).unwrap()
    }
}

#[derive(Default)]
struct AsLog {
    registrations: u32,
    /// The `scope` of each authorization request ("" when absent).
    authorizations: Vec<String>,
    /// The `resource` of each token request.
    token_resources: Vec<String>,
    refreshes: u32,
    jwks_fetches: u32,
    introspections: u32,
    /// The `client_id` of each authorization request.
    authorize_clients: Vec<String>,
    /// How each authorization-code token request named its client:
    /// `basic:ID:SECRET` or `form:ID`.
    token_clients: Vec<String>,
    /// code → (`code_challenge`, scope, resource)
    codes: HashMap<String, (String, String, String)>,
    next: u32,
}

/// The test's authorization server.
struct TestAs {
    issuer: String,
    key: Key,
    /// Keys published besides `key` (a rotation).
    published: Mutex<Vec<Value>>,
    subject: Mutex<String>,
    /// `expires_in` of the token responses (the JWTs live 5 minutes).
    expires_in: u64,
    /// The resource (set once the MCP endpoint's port is known).
    resource: Mutex<String>,
    log: Mutex<AsLog>,
    /// While set, a JWKS request waits for a permit of it (a slow issuer).
    stall: Mutex<Option<Arc<tokio::sync::Semaphore>>>,
    /// JWKS requests received, stalled or not.
    jwks_requests: std::sync::atomic::AtomicUsize,
}

fn query(uri: &http::Uri) -> HashMap<String, String> {
    url::form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

fn json_response(status: StatusCode, body: &Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

impl TestAs {
    fn audience(&self) -> String {
        self.resource.lock().unwrap().clone()
    }

    fn claims(&self, audience: &str, scope: &str) -> Value {
        json!({
            "iss": self.issuer, "aud": audience, "sub": *self.subject.lock().unwrap(),
            "scope": scope, "exp": now() + 300, "iat": now(), "client_id": "c1",
        })
    }

    fn token_response(&self, audience: &str, scope: &str, log: &mut AsLog) -> Response<Body> {
        log.next += 1;
        // A `jti` of its own: two tokens of one second differ.
        let mut claims = self.claims(audience, scope);
        claims["jti"] = json!(log.next);
        let body = json!({
            "access_token": self.key.sign(&claims),
            "token_type": "Bearer",
            "expires_in": self.expires_in,
            "refresh_token": format!("refresh-{}", log.next),
            "scope": scope,
        });
        json_response(StatusCode::OK, &body)
    }

    /// RFC 7662: the resource server authenticates as `rs`.
    fn introspect(
        &self,
        headers: &http::HeaderMap,
        form: &HashMap<String, String>,
        log: &mut AsLog,
    ) -> Response<Body> {
        log.introspections += 1;
        let basic = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Basic "))
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        if basic.as_deref() != Some(b"rs:rs+secret".as_slice()) {
            return json_response(
                StatusCode::UNAUTHORIZED,
                &json!({"error": "invalid_client"}),
            );
        }
        let body = match form["token"].as_str() {
            "opaque-alice" => json!({
                "active": true, "sub": "alice", "iss": self.issuer,
                "aud": form.get("resource").cloned().unwrap_or_else(|| self.audience()),
                "scope": "mcp:basic", "exp": now() + 300,
            }),
            "opaque-other-audience" => json!({
                "active": true, "sub": "alice", "iss": self.issuer,
                "aud": "https://other.example/mcp", "scope": "mcp:basic", "exp": now() + 300,
            }),
            // RFC 7662 §2.2 makes every member but `active` optional; the
            // resource server requires `aud` and `exp` all the same.
            "opaque-no-aud" => json!({
                "active": true, "sub": "alice", "iss": self.issuer,
                "scope": "mcp:basic", "exp": now() + 300,
            }),
            "opaque-no-exp" => json!({
                "active": true, "sub": "alice", "iss": self.issuer,
                "aud": self.audience(), "scope": "mcp:basic",
            }),
            "opaque-other-issuer" => json!({
                "active": true, "sub": "alice", "iss": "https://evil.example",
                "aud": self.audience(), "scope": "mcp:basic", "exp": now() + 300,
            }),
            "opaque-no-issuer" => json!({
                "active": true, "sub": "alice",
                "aud": [self.audience(), "https://other.example/mcp"],
                "scope": "mcp:basic", "exp": now() + 300,
            }),
            "opaque-active-as-string" => json!({
                "active": "true", "sub": "alice", "iss": self.issuer,
                "aud": self.audience(), "scope": "mcp:basic", "exp": now() + 300,
            }),
            "opaque-expired" => json!({
                "active": true, "sub": "alice", "iss": self.issuer,
                "aud": self.audience(), "scope": "mcp:basic", "exp": now() - 10,
            }),
            _ => json!({"active": false}),
        };
        json_response(StatusCode::OK, &body)
    }

    #[allow(
        clippy::too_many_lines,
        reason = "the test server's endpoints, one match arm each"
    )]
    async fn handle(self: Arc<Self>, request: Request<Body>) -> Response<Body> {
        let (parts, body) = request.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        let form: HashMap<String, String> =
            url::form_urlencoded::parse(&bytes).into_owned().collect();
        if parts.uri.path() == "/jwks" {
            self.jwks_requests
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let stall = self.stall.lock().unwrap().clone();
            if let Some(gate) = stall {
                let _ =
                    tokio::time::timeout(std::time::Duration::from_secs(60), gate.acquire()).await;
            }
        }
        let mut log = self.log.lock().unwrap();
        match parts.uri.path() {
            "/.well-known/oauth-authorization-server" => json_response(
                StatusCode::OK,
                &json!({
                    "issuer": self.issuer,
                    "authorization_endpoint": format!("{}/authorize", self.issuer),
                    "token_endpoint": format!("{}/token", self.issuer),
                    "registration_endpoint": format!("{}/register", self.issuer),
                    "jwks_uri": format!("{}/jwks", self.issuer),
                    "response_types_supported": ["code"],
                    "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"],
                    "scopes_supported": ["mcp:basic", "mcp:write", "offline_access"],
                    "authorization_response_iss_parameter_supported": true,
                    "client_id_metadata_document_supported": true,
                }),
            ),
            "/jwks" => {
                log.jwks_fetches += 1;
                let mut keys = vec![self.key.jwk()];
                keys.extend(self.published.lock().unwrap().iter().cloned());
                json_response(StatusCode::OK, &json!({ "keys": keys }))
            }
            "/introspect" => self.introspect(&parts.headers, &form, &mut log),
            "/register" => {
                log.registrations += 1;
                let body: Value = serde_json::from_slice(&bytes).unwrap();
                assert_eq!(body["application_type"], "native");
                assert!(body["grant_types"].to_string().contains("refresh_token"));
                json_response(StatusCode::CREATED, &json!({"client_id": "c1"}))
            }
            "/authorize" => {
                let q = query(&parts.uri);
                assert_eq!(q["code_challenge_method"], "S256");
                let scope = q.get("scope").cloned().unwrap_or_default();
                log.authorizations.push(scope.clone());
                log.authorize_clients.push(q["client_id"].clone());
                log.next += 1;
                let code = format!("code-{}", log.next);
                log.codes.insert(
                    code.clone(),
                    (q["code_challenge"].clone(), scope, q["resource"].clone()),
                );
                let mut to = url::Url::parse(&q["redirect_uri"]).unwrap();
                to.query_pairs_mut()
                    .append_pair("code", &code)
                    .append_pair("state", &q["state"])
                    .append_pair("iss", &self.issuer);
                Response::builder()
                    .status(StatusCode::FOUND)
                    .header("location", to.as_str())
                    .body(Body::empty())
                    .unwrap()
            }
            "/token" => match form["grant_type"].as_str() {
                "authorization_code" => {
                    let Some((challenge, scope, resource)) = log.codes.remove(&form["code"]) else {
                        return json_response(
                            StatusCode::BAD_REQUEST,
                            &json!({"error": "invalid_grant"}),
                        );
                    };
                    let computed = URL_SAFE_NO_PAD
                        .encode(sha2::Sha256::digest(form["code_verifier"].as_bytes()));
                    if computed != challenge || form["resource"] != resource {
                        return json_response(
                            StatusCode::BAD_REQUEST,
                            &json!({"error": "invalid_grant"}),
                        );
                    }
                    log.token_resources.push(resource.clone());
                    let basic = parts
                        .headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.strip_prefix("Basic "))
                        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
                    let client = match basic {
                        Some(b) => format!("basic:{}", String::from_utf8_lossy(&b)),
                        None => format!(
                            "form:{}",
                            form.get("client_id").cloned().unwrap_or_default()
                        ),
                    };
                    log.token_clients.push(client);
                    self.token_response(&resource, &scope, &mut log)
                }
                "client_credentials" => {
                    let basic = parts
                        .headers
                        .get("authorization")
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.strip_prefix("Basic "))
                        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
                    if basic.as_deref() != Some(b"m2m:m2m-secret".as_slice()) {
                        return json_response(
                            StatusCode::UNAUTHORIZED,
                            &json!({"error": "invalid_client"}),
                        );
                    }
                    log.token_resources.push(form["resource"].clone());
                    let scope = form.get("scope").cloned().unwrap_or_default();
                    let resource = form["resource"].clone();
                    self.token_response(&resource, &scope, &mut log)
                }
                "refresh_token" => {
                    log.refreshes += 1;
                    log.token_resources.push(form["resource"].clone());
                    let resource = form["resource"].clone();
                    self.token_response(&resource, "mcp:basic offline_access", &mut log)
                }
                _ => json_response(
                    StatusCode::BAD_REQUEST,
                    &json!({"error": "unsupported_grant_type"}),
                ),
            },
            _ => json_response(StatusCode::NOT_FOUND, &json!({"error": "not_found"})),
        }
    }
}

/// The authorization server and tern's protected fixture, both on HTTPS.
struct World {
    ca: TestCa,
    auth: Arc<TestAs>,
    verifier: Arc<JwtVerifier>,
    /// The MCP endpoint (`https://localhost:PORT/mcp`), the resource.
    url: String,
}

async fn world(expires_in: u64) -> World {
    world_with(expires_in, false).await
}

/// [`world`], the resource server checking tokens by introspection when
/// `introspect`.
async fn world_with(expires_in: u64, introspect: bool) -> World {
    let ca = TestCa::new();
    let as_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!(
        "https://localhost:{}",
        as_listener.local_addr().unwrap().port()
    );
    let auth = Arc::new(TestAs {
        issuer: issuer.clone(),
        key: Key::new("k1"),
        published: Mutex::default(),
        subject: Mutex::new("alice".into()),
        expires_in,
        resource: Mutex::default(),
        log: Mutex::default(),
        stall: Mutex::default(),
        jwks_requests: std::sync::atomic::AtomicUsize::new(0),
    });
    let a = Arc::clone(&auth);
    let app = axum::Router::new().fallback(move |r: Request<Body>| Arc::clone(&a).handle(r));
    serve_https_on(as_listener, app, Arc::clone(&ca.server));

    let mcp_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}/mcp",
        mcp_listener.local_addr().unwrap().port()
    );
    auth.resource.lock().unwrap().clone_from(&url);
    let verifier = Arc::new(JwtVerifier::new(&issuer, &url).ca_file(&ca.ca_file));
    let resource = if introspect {
        let introspection = Introspection::new(
            format!("{issuer}/introspect"),
            &issuer,
            &url,
            "rs",
            "rs secret",
        )
        .ca_file(&ca.ca_file);
        ResourceServer::new(&url, &issuer, introspection)
    } else {
        ResourceServer::new(&url, &issuer, Arc::clone(&verifier))
    };
    let resource = resource
        .scopes_supported(&["mcp:basic", "mcp:write"])
        .required_scopes(&["mcp:basic"])
        .tool_scopes("greet", &["mcp:write"]);
    let app = axum::Router::new()
        .route_service(
            "/mcp",
            Http::new(server::build())
                .oauth(resource.clone())
                .into_service(),
        )
        .merge(resource.metadata_router());
    serve_https_on(mcp_listener, app, Arc::clone(&ca.server));
    World {
        ca,
        auth,
        verifier,
        url,
    }
}

impl World {
    fn tls(&self) -> TlsOptions {
        TlsOptions::new().with_ca_file(&self.ca.ca_file)
    }

    fn oauth(&self) -> OAuth {
        self.oauth_with(OAuthConfig::new("tern-test"))
    }

    fn oauth_with(&self, config: OAuthConfig) -> OAuth {
        let browser = FollowRedirect::new(REDIRECT)
            .unwrap()
            .with_tls(&self.tls())
            .unwrap();
        OAuth::new(&self.url, config, browser)
            .unwrap()
            .with_tls(&self.tls())
            .unwrap()
    }

    fn client(&self, oauth: &OAuth) -> Client {
        let transport = HttpTransport::new(&self.url)
            .unwrap()
            .with_tls(&self.tls())
            .unwrap()
            .with_oauth(oauth.clone())
            .unwrap();
        Client::builder()
            .elicitation(Elicit::fill(&[("name", "Grace")]))
            .tasks(true)
            .build(transport)
    }

    /// A client sending `token` as it is, no OAuth.
    fn client_with_token(&self, token: &str) -> Client {
        let transport = HttpTransport::new(&self.url)
            .unwrap()
            .with_tls(&self.tls())
            .unwrap()
            .with_header("Authorization", format!("Bearer {token}"));
        Client::builder()
            .elicitation(Elicit::fill(&[("name", "Grace")]))
            .tasks(true)
            .build(transport)
    }

    /// A raw POST of `tools/list` with `authorization`: status and
    /// `WWW-Authenticate`.
    async fn raw(&self, authorization: Option<String>) -> (StatusCode, String) {
        let client = self.https_client();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        let mut request = Request::post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/list");
        if let Some(a) = authorization {
            request = request.header("authorization", a);
        }
        let response = bounded(
            client.request(
                request
                    .body(Full::new(Bytes::from(body.to_string())))
                    .unwrap(),
            ),
        )
        .await
        .unwrap();
        let challenge = response
            .headers()
            .get("www-authenticate")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (response.status(), challenge)
    }

    /// A GET of `url`: status, `Content-Type` and the body as JSON.
    async fn get_json(&self, url: &str) -> (StatusCode, String, Value) {
        let response = bounded(
            self.https_client()
                .request(Request::get(url).body(Full::new(Bytes::new())).unwrap()),
        )
        .await
        .unwrap();
        let status = response.status();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let bytes = bounded(response.into_body().collect())
            .await
            .unwrap()
            .to_bytes();
        (
            status,
            content_type,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        )
    }

    /// A bare HTTPS client trusting the test CA.
    fn https_client(
        &self,
    ) -> hyper_util::client::legacy::Client<
        hyper_rustls::HttpsConnector<hyper_util::client::legacy::connect::HttpConnector>,
        Full<Bytes>,
    > {
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .build::<_, Full<Bytes>>(
                hyper_rustls::HttpsConnectorBuilder::new()
                    .with_tls_config(
                        rustls::ClientConfig::builder_with_provider(Arc::new(
                            rustls::crypto::ring::default_provider(),
                        ))
                        .with_safe_default_protocol_versions()
                        .unwrap()
                        .with_root_certificates({
                            let mut roots = rustls::RootCertStore::empty();
                            let pem = std::fs::read(&self.ca.ca_file).unwrap();
                            use rustls::pki_types::pem::PemObject as _;
                            for c in rustls::pki_types::CertificateDer::pem_slice_iter(&pem) {
                                roots.add(c.unwrap()).unwrap();
                            }
                            roots
                        })
                        .with_no_client_auth(),
                    )
                    .https_only()
                    .enable_http1()
                    .build(),
            )
    }

    fn token(&self, claims: &Value) -> String {
        self.auth.key.sign(claims)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_flow_end_to_end_then_a_step_up_for_a_tool_needing_more_scope() {
    let w = world(3600).await;
    let oauth = w.oauth();
    let client = w.client(&oauth);
    let tools = bounded(client.list_tools()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "greet"));
    {
        let log = w.auth.log.lock().unwrap();
        assert_eq!(log.registrations, 1);
        // The challenge's scope, plus offline_access the server offers.
        assert_eq!(log.authorizations, ["mcp:basic offline_access"]);
        assert_eq!(log.token_resources, std::slice::from_ref(&w.url));
    }
    // greet needs mcp:write: 403, then one more authorization with the union.
    let result = bounded(client.call_tool("greet", None)).await.unwrap();
    assert_eq!(crate::harness::text(&result), "Hello, Grace!");
    let (authorizations, registrations) = {
        let log = w.auth.log.lock().unwrap();
        (log.authorizations.clone(), log.registrations)
    };
    assert_eq!(
        authorizations,
        [
            "mcp:basic offline_access",
            "mcp:basic offline_access mcp:write"
        ]
    );
    assert_eq!(
        registrations, 1,
        "one registration per authorization server"
    );
    let grant = oauth.grant().await.unwrap();
    assert!(grant.scopes.contains(&"mcp:write".to_owned()));
    assert_eq!(grant.key.resource, w.url);
}

/// A 2025-11-25 HTTP session runs the same OAuth step as the 2026 wire
/// (`transport::authorize`): the 401 on `initialize` starts the flow, the
/// session's requests carry the token, and the 403 of a tool needing more
/// scope steps up once, on the live session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_session_authorizes_and_steps_up_as_the_2026_wire_does() {
    let w = world(3600).await;
    let oauth = w.oauth();
    let transport = tern_client::legacy::DualEra::http(&w.url)
        .unwrap()
        .assume_legacy()
        .with_tls(&w.tls())
        .unwrap()
        .with_oauth(oauth)
        .unwrap();
    let transport = Arc::new(transport);
    let client = Client::builder()
        .elicitation(Elicit::fill(&[("name", "Grace")]))
        .build(Arc::clone(&transport));
    let result = bounded(client.call_tool("greet", None)).await.unwrap();
    assert_eq!(crate::harness::text(&result), "Hello, Grace!");
    assert!(
        matches!(transport.era(), Some(tern_client::legacy::Era::Legacy(_))),
        "the call went over a 2025 session: {:?}",
        transport.era()
    );
    let log = w.auth.log.lock().unwrap();
    assert_eq!(log.registrations, 1);
    assert_eq!(
        log.authorizations,
        [
            "mcp:basic offline_access",
            "mcp:basic offline_access mcp:write"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expiring_token_is_refreshed_before_it_is_used() {
    // expires_in under the client's margin: every request refreshes first.
    let w = world(5).await;
    let oauth = w.oauth();
    let client = w.client(&oauth);
    bounded(client.list_tools()).await.unwrap();
    bounded(client.list_tools()).await.unwrap();
    let log = w.auth.log.lock().unwrap();
    assert_eq!(log.authorizations.len(), 1, "one authorization");
    assert!(log.refreshes >= 1, "refreshed: {}", log.refreshes);
    assert!(log.token_resources.iter().all(|r| *r == w.url));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_token_is_a_401_naming_the_metadata_without_asking_the_issuer() {
    let w = world(3600).await;
    let (status, challenge) = w.raw(None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let prm = w
        .url
        .replace("/mcp", "/.well-known/oauth-protected-resource/mcp");
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{prm}\", scope=\"mcp:basic\"")
    );
    assert_eq!(w.auth.log.lock().unwrap().jwks_fetches, 0);
    assert_eq!(w.verifier.jwks_fetches(), 0);
    // The PRM itself, at the path-based location.
    let client = Client::builder().build(
        HttpTransport::new(&w.url)
            .unwrap()
            .with_tls(&w.tls())
            .unwrap(),
    );
    let e = bounded(client.list_tools()).await.unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_tokens_are_refused_with_invalid_token() {
    let w = world(3600).await;
    let good = w.auth.claims(&w.url, "mcp:basic");
    let (status, _) = w.raw(Some(format!("Bearer {}", w.token(&good)))).await;
    assert_eq!(status, StatusCode::OK, "the good token passes");

    let with = |k: &str, v: Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let mut cases = vec![
        ("expired", w.token(&with("exp", json!(now() - 3600)))),
        ("not yet valid", w.token(&with("nbf", json!(now() + 3600)))),
        (
            "wrong audience",
            w.token(&with("aud", json!("https://other.example/mcp"))),
        ),
        (
            "wrong issuer",
            w.token(&with("iss", json!("https://evil.example"))),
        ),
        ("no subject", {
            let mut c = good.clone();
            c.as_object_mut().unwrap().remove("sub");
            w.token(&c)
        }),
        ("no exp", {
            let mut c = good.clone();
            c.as_object_mut().unwrap().remove("exp");
            w.token(&c)
        }),
        (
            "signed by an unknown key",
            Key::new("k-unknown").sign(&good),
        ),
        ("garbage", "not.a.jwt".to_owned()),
        // RFC 9068 §4: not an access token's type (an ID token, say).
        ("typ JWT", w.auth.key.sign_typ(&good, Some("JWT"))),
        ("no typ", w.auth.key.sign_typ(&good, None)),
        (
            "typ id_token",
            w.auth.key.sign_typ(&good, Some("id_token+jwt")),
        ),
    ];
    // alg none: the header says so, no signature.
    let none_header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT","kid":"k1"}"#);
    let payload = URL_SAFE_NO_PAD.encode(good.to_string());
    cases.push(("alg none", format!("{none_header}.{payload}.")));
    // HS256 keyed with the public key's bytes (the RS/HS confusion).
    let mut hs = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256);
    hs.kid = Some("k1".into());
    let public = w.auth.key.pair.public_key_raw().to_vec();
    let confused =
        jsonwebtoken::encode(&hs, &good, &jsonwebtoken::EncodingKey::from_secret(&public)).unwrap();
    cases.push(("HS256 with the public key", confused));
    for (what, token) in cases {
        let (status, challenge) = w.raw(Some(format!("Bearer {token}"))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{what}");
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{what}: {challenge}"
        );
        assert!(
            challenge.contains("resource_metadata="),
            "{what}: {challenge}"
        );
    }
    // A valid token without the resource's own scope: 403, a step-up.
    let (status, challenge) = w
        .raw(Some(format!(
            "Bearer {}",
            w.token(&with("scope", json!("mcp:write")))
        )))
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(
        challenge.starts_with("Bearer error=\"insufficient_scope\", scope=\"mcp:basic\""),
        "{challenge}"
    );
    // Unknown kids were fetched for at a bounded rate: the first fetch,
    // one refetch, no more for the second unknown kid.
    assert!(
        w.verifier.jwks_fetches() <= 2,
        "{}",
        w.verifier.jwks_fetches()
    );
    let (status, _) = w.raw(Some("Basic abc".into())).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_is_fetched_once_its_kid_shows_up() {
    let w = world(3600).await;
    let good = w.auth.claims(&w.url, "mcp:basic");
    assert_eq!(
        w.raw(Some(format!("Bearer {}", w.token(&good)))).await.0,
        StatusCode::OK
    );
    let fetched = w.verifier.jwks_fetches();
    let rotated = Key::new("k2");
    w.auth.published.lock().unwrap().push(rotated.jwk());
    assert_eq!(
        w.raw(Some(format!("Bearer {}", rotated.sign(&good))))
            .await
            .0,
        StatusCode::OK
    );
    assert_eq!(w.verifier.jwks_fetches(), fetched + 1);
}

/// A key of the issuer's JWKS that the verifier cannot read (a key type
/// from the future, a malformed member) is skipped: the other keys still
/// verify. Before, one such key made every token fail (401).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_key_in_the_jwks_does_not_fail_the_others() {
    let w = world(3600).await;
    w.auth.published.lock().unwrap().extend([
        json!({"kty": "PQC", "kid": "pq1"}),
        json!({"kty": "EC", "kid": "bad", "crv": 5}),
    ]);
    let good = w.auth.claims(&w.url, "mcp:basic");
    let (status, challenge) = w.raw(Some(format!("Bearer {}", w.token(&good)))).await;
    assert_eq!(status, StatusCode::OK, "{challenge}");
}

/// An issuer that mints plain JWT access tokens is served once the
/// resource says so (`accept_plain_jwt`); at+jwt still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_jwt_access_tokens_pass_only_when_accepted() {
    use tern_server::auth::TokenVerifier as _;
    let w = world(3600).await;
    let good = w.auth.claims(&w.url, "mcp:basic");
    let verifier = JwtVerifier::new(&w.auth.issuer, &w.url)
        .ca_file(&w.ca.ca_file)
        .accept_plain_jwt();
    for typ in [Some("JWT"), None, Some("at+jwt")] {
        let token = w.auth.key.sign_typ(&good, typ);
        let checked = verifier.verify(&token).await;
        assert!(checked.is_ok(), "{typ:?}: {checked:?}");
    }
    let strict = JwtVerifier::new(&w.auth.issuer, &w.url).ca_file(&w.ca.ca_file);
    assert!(
        strict
            .verify(&w.auth.key.sign_typ(&good, Some("JWT")))
            .await
            .is_err()
    );
}

/// A JWKS fetch in flight (an unknown kid, the issuer slow to answer) holds
/// up no check of a token whose key is cached, and is the only one: a
/// second check needing it waits for it and uses what it brought.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_key_fetch_holds_up_only_the_checks_that_need_it() {
    use std::sync::atomic::Ordering::SeqCst;
    use tern_server::auth::TokenVerifier as _;
    let w = world(3600).await;
    let good = w.auth.claims(&w.url, "mcp:basic");
    let (status, _) = w.raw(Some(format!("Bearer {}", w.token(&good)))).await;
    assert_eq!(status, StatusCode::OK, "the keys are cached");
    let before = w.auth.jwks_requests.load(SeqCst);

    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    *w.auth.stall.lock().unwrap() = Some(Arc::clone(&gate));
    let rotated = Key::new("k2");
    w.auth.published.lock().unwrap().push(rotated.jwk());
    let new_kid = rotated.sign(&good);
    let checks: Vec<_> = (0..2)
        .map(|_| {
            let v = Arc::clone(&w.verifier);
            let t = new_kid.clone();
            tokio::spawn(async move { v.verify(&t).await })
        })
        .collect();
    for _ in 0..500 {
        if w.auth.jwks_requests.load(SeqCst) > before {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(
        w.auth.jwks_requests.load(SeqCst),
        before + 1,
        "the refetch is in flight"
    );
    // A token of the cached key is checked meanwhile.
    let (status, _) = w.raw(Some(format!("Bearer {}", w.token(&good)))).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        checks.iter().all(|c| !c.is_finished()),
        "the checks needing the fetch still wait for it"
    );
    gate.add_permits(16);
    for c in checks {
        let token = bounded(c).await.unwrap().expect("the rotated key is found");
        assert_eq!(token.subject, "alice");
        // The verified claims are kept (for `token_in_context`), the raw token not.
        assert_eq!(token.claims["scope"], "mcp:basic");
        assert_eq!(token.client_id.as_deref(), Some("c1"));
        assert_eq!(token.raw(), None);
    }
    assert_eq!(
        w.auth.jwks_requests.load(SeqCst),
        before + 1,
        "one fetch for both checks"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_principals_share_neither_request_state_nor_tasks() {
    let w = world(3600).await;
    let scopes = "mcp:basic mcp:write";
    let alice = w.client_with_token(&w.token(&w.auth.claims(&w.url, scopes)));
    let mut bob_claims = w.auth.claims(&w.url, scopes);
    bob_claims["sub"] = json!("bob");
    let bob = w.client_with_token(&w.token(&bob_claims));
    // The same subject at another issuer is another principal too: covered
    // by the resource's issuer check (a foreign iss is refused outright).

    let options = CallOptions::default();
    let Round::InputRequired(pending) = bounded(alice.call_tool_once("greet", None, &options))
        .await
        .unwrap()
    else {
        panic!("greet asks a name first")
    };
    let answers = bounded(alice.answer(&pending, &options)).await.unwrap();
    let stolen = bounded(bob.resume_tool(&pending, &answers, &options)).await;
    assert!(stolen.is_err(), "bob used alice's requestState: {stolen:?}");
    let Round::Complete(done) = bounded(alice.resume_tool(&pending, &answers, &options))
        .await
        .unwrap()
    else {
        panic!("alice's own round completes")
    };
    assert_eq!(crate::harness::text(&done), "Hello, Grace!");

    let Started::Task(handle) = bounded(alice.start_tool("task_greet", None, &options))
        .await
        .unwrap()
    else {
        panic!("task_greet becomes a task")
    };
    let id = handle.detach();
    let e = bounded(bob.task(id.clone()).get()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::TaskLost, "{e}");
    assert!(bounded(alice.task(id).get()).await.is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_403_for_scope_is_readable_without_oauth() {
    let w = world(3600).await;
    let client = w.client_with_token(&w.token(&w.auth.claims(&w.url, "mcp:basic")));
    let e = bounded(client.call_tool("greet", None)).await.unwrap_err();
    let rpc = e.rpc_error().expect("a JSON-RPC error body");
    assert_eq!(
        rpc.data.as_ref().unwrap()["requiredScopes"],
        json!(["mcp:basic", "mcp:write"])
    );
}

#[test]
fn oauth_is_only_given_to_its_own_endpoint() {
    let oauth = OAuth::new(
        "https://a.example/mcp",
        OAuthConfig::new("t"),
        FollowRedirect::new(REDIRECT).unwrap(),
    )
    .unwrap();
    let e = HttpTransport::new("https://b.example/mcp")
        .unwrap()
        .with_oauth(oauth)
        .unwrap_err();
    assert!(
        e.to_string().contains("only sent to its own resource"),
        "{e}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_server_over_plain_http_off_loopback_is_refused_unvisited() {
    let ca = TestCa::new();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!(
        "https://localhost:{}/mcp",
        listener.local_addr().unwrap().port()
    );
    // Never contacted: the client refuses the URL before any request.
    let insecure = "http://as.example";
    let resource = ResourceServer::new(&url, insecure, JwtVerifier::new(insecure, &url));
    let app = axum::Router::new()
        .route_service(
            "/mcp",
            Http::new(server::build())
                .oauth(resource.clone())
                .into_service(),
        )
        .merge(resource.metadata_router());
    serve_https_on(listener, app, Arc::clone(&ca.server));
    let tls = TlsOptions::new().with_ca_file(&ca.ca_file);
    let browser = FollowRedirect::new(REDIRECT)
        .unwrap()
        .with_tls(&tls)
        .unwrap();
    let oauth = OAuth::new(&url, OAuthConfig::new("t"), browser)
        .unwrap()
        .with_tls(&tls)
        .unwrap();
    let client = Client::builder().build(
        HttpTransport::new(&url)
            .unwrap()
            .with_tls(&tls)
            .unwrap()
            .with_oauth(oauth)
            .unwrap(),
    );
    let e = bounded(client.list_tools()).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert!(e.to_string().contains("is not HTTPS"), "{e}");
}

/// This machine's name: a DNS name (so the client reads it as remote) that
/// `/etc/hosts` resolves to this machine.
fn machine_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .expect("the machine's name (/proc/sys/kernel/hostname)")
        .trim()
        .to_owned();
    assert!(
        std::net::ToSocketAddrs::to_socket_addrs(&(name.as_str(), 1))
            .is_ok_and(|mut a| a.next().is_some()),
        "the machine's name {name:?} does not resolve: the test needs it in /etc/hosts"
    );
    name
}

/// A listener on 127.0.0.1 that counts the connections it is offered.
async fn counting_listener() -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&count);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    (format!("http://{addr}"), count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_server_naming_a_loopback_authorization_server_gets_no_request_sent_there() {
    let name = machine_name();
    let ca = TestCa::with_names(&[&name]);
    // Bound on every address: the name may resolve to 127.0.x.x or to the
    // machine's own address.
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let url = format!(
        "https://{name}:{}/mcp",
        listener.local_addr().unwrap().port()
    );
    let (loopback, requests) = counting_listener().await;
    let resource = ResourceServer::new(&url, &loopback, JwtVerifier::new(&loopback, &url));
    let app = axum::Router::new()
        .route_service(
            "/mcp",
            Http::new(server::build())
                .oauth(resource.clone())
                .into_service(),
        )
        .merge(resource.metadata_router());
    serve_https_on(listener, app, Arc::clone(&ca.server));
    let tls = TlsOptions::new().with_ca_file(&ca.ca_file);
    let browser = FollowRedirect::new(REDIRECT)
        .unwrap()
        .with_tls(&tls)
        .unwrap();
    let oauth = OAuth::new(&url, OAuthConfig::new("t"), browser)
        .unwrap()
        .with_tls(&tls)
        .unwrap();
    // `tern login`'s way in (the well-known PRM), then a request's (a 401).
    let e = bounded(oauth.authorize()).await.unwrap_err();
    let sent = || requests.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(sent(), 0, "nothing reached the loopback server: {e}");
    assert_eq!(e.kind(), ErrorKind::Unauthorized, "{e}");
    assert!(e.to_string().contains("private network"), "{e}");
    let e = bounded(oauth.challenged(None, 401, None))
        .await
        .unwrap_err();
    assert_eq!(sent(), 0, "nothing reached the loopback server: {e}");
    assert!(e.to_string().contains("private network"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn introspection_serves_behind_the_same_checks() {
    let w = world_with(3600, true).await;
    let (status, _) = w.raw(Some("Bearer opaque-alice".into())).await;
    assert_eq!(status, StatusCode::OK);
    // No `iss` is the configured issuer's; `aud` may be a list holding the resource.
    let (status, _) = w.raw(Some("Bearer opaque-no-issuer".into())).await;
    assert_eq!(status, StatusCode::OK);
    let refused = [
        "opaque-unknown",
        "opaque-other-audience",
        "opaque-expired",
        "opaque-no-aud",
        "opaque-no-exp",
        "opaque-other-issuer",
        "opaque-active-as-string",
    ];
    for token in refused {
        let (status, challenge) = w.raw(Some(format!("Bearer {token}"))).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{token}");
        assert!(
            challenge.contains("error=\"invalid_token\""),
            "{token}: {challenge}"
        );
    }
    // No token: refused without asking the introspection endpoint.
    let before = w.auth.log.lock().unwrap().introspections;
    assert_eq!(w.raw(None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(w.auth.log.lock().unwrap().introspections, before);
    assert_eq!(before as usize, 2 + refused.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_credentials_need_no_user_and_no_registration() {
    let w = world(3600).await;
    let mut config = OAuthConfig::new("m2m").pre_registered(tern_client::auth::PreRegistered::new(
        None,
        "m2m",
        Some("m2m-secret".into()),
    ));
    config.client_credentials = true;
    let browser = FollowRedirect::new(REDIRECT).unwrap();
    let oauth = OAuth::new(&w.url, config, browser)
        .unwrap()
        .with_tls(&w.tls())
        .unwrap();
    let client = w.client(&oauth);
    bounded(client.list_tools()).await.unwrap();
    let log = w.auth.log.lock().unwrap();
    assert!(log.authorizations.is_empty(), "no authorization request");
    assert_eq!(log.registrations, 0);
    assert_eq!(log.token_resources, std::slice::from_ref(&w.url));
}

#[test]
fn the_endpoint_check_normalises_as_urls_do() {
    let oauth = OAuth::new(
        "https://A.example:443/mcp",
        OAuthConfig::new("t"),
        FollowRedirect::new(REDIRECT).unwrap(),
    )
    .unwrap();
    assert!(
        HttpTransport::new("https://a.example/mcp")
            .unwrap()
            .with_oauth(oauth)
            .is_ok()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_issuer_is_not_asked_again_at_once() {
    // An issuer that accepts connections and drops them at once, counting
    // them: a fetch fails, and a second one within the interval is not tried.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let issuer = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let connections = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = Arc::clone(&connections);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(stream);
        }
    });
    let w = world(3600).await;
    let verifier = JwtVerifier::new(&issuer, &w.url);
    let token = w.token(&w.auth.claims(&w.url, "mcp:basic"));
    use tern_server::auth::TokenVerifier as _;
    assert!(bounded(verifier.verify(&token)).await.is_err());
    let asked = connections.load(std::sync::atomic::Ordering::SeqCst);
    assert!(asked > 0, "the issuer was asked once");
    let second = bounded(verifier.verify(&token)).await.unwrap_err();
    assert!(
        second.to_string().contains("not trying again yet"),
        "{second}"
    );
    assert_eq!(
        connections.load(std::sync::atomic::Ordering::SeqCst),
        asked,
        "not asked again within the interval"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metadata_is_served_at_the_root_location_too() {
    let w = world(3600).await;
    let origin = w.url.trim_end_matches("/mcp");
    let path_based = format!("{origin}/.well-known/oauth-protected-resource/mcp");
    let root = format!("{origin}/.well-known/oauth-protected-resource");
    for url in [&path_based, &root] {
        let (status, content_type, doc) = w.get_json(url).await;
        assert_eq!(status, StatusCode::OK, "{url}");
        assert_eq!(content_type, "application/json", "{url}");
        // RFC 9728 §3.3: `resource` is the MCP endpoint's URL.
        assert_eq!(doc["resource"], w.url, "{url}: {doc}");
        assert_eq!(
            doc["authorization_servers"],
            json!([w.auth.issuer]),
            "{url}"
        );
        assert_eq!(doc["scopes_supported"], json!(["mcp:basic", "mcp:write"]));
    }
    // Served without a token, and the issuer was not asked.
    assert_eq!(w.verifier.jwks_fetches(), 0);
}

/// A store two OAuth clients share, as two `tern` processes share the token
/// file: a real lock (held across tasks), and a count of lock requests.
#[derive(Debug, Default)]
struct SharedStore {
    grants: tern_client::auth::MemoryTokenStore,
    lock: Arc<tokio::sync::Mutex<()>>,
    lock_requests: std::sync::atomic::AtomicUsize,
}

impl tern_client::auth::TokenStore for SharedStore {
    fn get(&self, key: &tern_client::auth::TokenKey) -> Option<tern_client::auth::Grant> {
        self.grants.get(key)
    }
    fn find(&self, endpoint: &str) -> Option<tern_client::auth::Grant> {
        self.grants.find(endpoint)
    }
    fn put(&self, grant: tern_client::auth::Grant) {
        self.grants.put(grant);
    }
    fn remove(&self, key: &tern_client::auth::TokenKey) {
        self.grants.remove(key);
    }
    fn lock<'a>(
        &'a self,
        _key: &'a tern_client::auth::TokenKey,
    ) -> tern_client::transport::BoxFuture<'a, Option<Box<dyn Send>>> {
        self.lock_requests
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Box::pin(async move {
            let guard = Arc::clone(&self.lock).lock_owned().await;
            Some(Box::new(guard) as Box<dyn Send>)
        })
    }
}

/// On a 401 the client takes the refresh lock before touching the grant,
/// then reads it again: another process that rotated it meanwhile is
/// followed (its token used), its spent refresh token is not sent again,
/// and nothing was removed while the lock was waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_401_waits_for_the_lock_then_uses_the_grant_another_process_stored() {
    use tern_client::auth::TokenStore as _;
    let w = world(3600).await;
    let store = Arc::new(SharedStore::default());
    let shared: Arc<dyn tern_client::auth::TokenStore> = Arc::clone(&store) as _;
    let a = w.oauth().with_shared_store(Arc::clone(&shared));
    let b = w.oauth().with_shared_store(shared);
    let first = bounded(a.authorize()).await.unwrap();
    // b, another process, finds a's grant for the endpoint.
    assert_eq!(
        bounded(b.access_token()).await.unwrap().as_deref(),
        Some(first.access_token.as_str())
    );
    // a is refreshing: it holds the lock while b's request is refused.
    let held = Arc::clone(&store.lock).lock_owned().await;
    let b2 = b.clone();
    let sent = first.access_token.clone();
    let refused = tokio::spawn(async move { b2.challenged(Some(&sent), 401, None).await });
    for _ in 0..500 {
        if store
            .lock_requests
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        store
            .lock_requests
            .load(std::sync::atomic::Ordering::SeqCst)
            > 0,
        "b asks for the lock"
    );
    assert!(
        store.get(&first.key).is_some(),
        "b removed the grant before it held the lock"
    );
    // a stores its new grant, then lets go.
    let second = bounded(a.authorize()).await.unwrap();
    assert_eq!(second.key, first.key);
    assert_ne!(second.access_token, first.access_token);
    drop(held);
    bounded(refused).await.unwrap().unwrap();
    assert_eq!(
        bounded(b.access_token()).await.unwrap().as_deref(),
        Some(second.access_token.as_str())
    );
    let log = w.auth.log.lock().unwrap();
    assert_eq!(log.refreshes, 0, "b sent no refresh token");
    assert_eq!(log.authorizations.len(), 2, "b ran no flow of its own");
}

/// Registration in the spec's order, each branch through the code flow:
/// a pre-registered client of this issuer first (its secret sent as HTTP
/// Basic), else the Client ID Metadata Document's URL as the client id
/// when the server supports CIMD (a public client), else dynamic
/// registration; a client pre-registered for another issuer is not used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registration_goes_pre_registered_then_cimd_then_dynamic() {
    use tern_client::auth::PreRegistered;
    const CIMD: &str = "https://client.example/tern-client.json";
    let w = world(3600).await;
    let issuer = w.auth.issuer.clone();
    let pre = |for_issuer: &str| {
        PreRegistered::new(
            Some(for_issuer.to_owned()),
            "pre-1",
            Some("pre secret".into()),
        )
    };
    let mut both = OAuthConfig::new("t").pre_registered(pre(&issuer));
    both.client_metadata_url = Some(CIMD.to_owned());
    let mut cimd_only = OAuthConfig::new("t").pre_registered(pre("https://other.example"));
    cimd_only.client_metadata_url = Some(CIMD.to_owned());
    let dynamic = OAuthConfig::new("t").pre_registered(pre("https://other.example"));
    let cases = [
        // RFC 6749 §2.3.1: id and secret are form-encoded inside Basic.
        (both, "pre-1", "basic:pre-1:pre+secret", 0),
        (
            cimd_only,
            CIMD,
            "form:https://client.example/tern-client.json",
            0,
        ),
        (dynamic, "c1", "form:c1", 1),
    ];
    for (config, client_id, token_client, registrations) in cases {
        let before = {
            let mut log = w.auth.log.lock().unwrap();
            log.authorize_clients.clear();
            log.token_clients.clear();
            log.registrations
        };
        let oauth = w.oauth_with(config);
        let client = w.client(&oauth);
        bounded(client.list_tools()).await.unwrap();
        {
            let log = w.auth.log.lock().unwrap();
            assert_eq!(log.authorize_clients, [client_id], "{client_id}");
            assert_eq!(log.token_clients, [token_client], "{client_id}");
            assert_eq!(log.registrations - before, registrations, "{client_id}");
        }
        let grant = oauth.grant().await.unwrap();
        assert_eq!(grant.key.client_id, client_id);
    }
}
