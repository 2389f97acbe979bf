//! `tern login` / `tern call` / `tern logout` against the demo behind OAuth
//! (`tern serve demo --http … --issuer …`), with an authorization server of
//! the test's own on loopback (plain HTTP, allowed on loopback) issuing
//! ES256 JWTs, and a "browser" (`TERN_BROWSER`, a Python one-liner) that
//! follows the authorization URL to tern's loopback redirect, as a person's
//! browser would.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use sha2::Digest as _;

const REGION: &str = r#"region={"action":"accept","content":{"region":"eu-west-1"}}"#;

struct As {
    issuer: String,
    key: rcgen::KeyPair,
    codes: Mutex<HashMap<String, (String, String)>>,
    authorizations: Mutex<u32>,
}

fn reply(status: u16, body: &Value) -> axum::response::Response {
    axum::response::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap()
}

impl As {
    fn jwt(&self, audience: &str) -> String {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.kid = Some("k1".into());
        let claims = json!({"iss": self.issuer, "aud": audience, "sub": "ada", "exp": now + 600});
        let key = jsonwebtoken::EncodingKey::from_ec_der(&self.key.serialize_der());
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }

    async fn handle(self: Arc<Self>, request: axum::extract::Request) -> axum::response::Response {
        let (parts, body) = request.into_parts();
        let bytes = body.collect().await.unwrap().to_bytes();
        let form: HashMap<String, String> =
            url::form_urlencoded::parse(&bytes).into_owned().collect();
        let query: HashMap<String, String> =
            url::form_urlencoded::parse(parts.uri.query().unwrap_or("").as_bytes())
                .into_owned()
                .collect();
        let i = &self.issuer;
        match parts.uri.path() {
            "/.well-known/oauth-authorization-server" => reply(
                200,
                &json!({
                    "issuer": i, "authorization_endpoint": format!("{i}/authorize"),
                    "token_endpoint": format!("{i}/token"), "registration_endpoint": format!("{i}/register"),
                    "jwks_uri": format!("{i}/jwks"), "code_challenge_methods_supported": ["S256"],
                    "token_endpoint_auth_methods_supported": ["none"], "response_types_supported": ["code"],
                }),
            ),
            "/jwks" => {
                let raw = self.key.public_key_raw();
                reply(
                    200,
                    &json!({"keys": [{"kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256",
                    "x": URL_SAFE_NO_PAD.encode(&raw[1..33]), "y": URL_SAFE_NO_PAD.encode(&raw[33..65])}]}),
                )
            }
            "/register" => reply(201, &json!({"client_id": "tern-cli"})),
            "/authorize" => {
                *self.authorizations.lock().unwrap() += 1;
                let code = format!("code-{}", self.codes.lock().unwrap().len());
                self.codes.lock().unwrap().insert(
                    code.clone(),
                    (query["code_challenge"].clone(), query["resource"].clone()),
                );
                let mut to = url::Url::parse(&query["redirect_uri"]).unwrap();
                to.query_pairs_mut()
                    .append_pair("code", &code)
                    .append_pair("state", &query["state"]);
                axum::response::Response::builder()
                    .status(302)
                    .header("location", to.as_str())
                    .body(Body::empty())
                    .unwrap()
            }
            "/token" => {
                let Some((challenge, resource)) = self.codes.lock().unwrap().remove(&form["code"])
                else {
                    return reply(400, &json!({"error": "invalid_grant"}));
                };
                let computed =
                    URL_SAFE_NO_PAD.encode(sha2::Sha256::digest(form["code_verifier"].as_bytes()));
                if computed != challenge || form["resource"] != resource {
                    return reply(400, &json!({"error": "invalid_grant"}));
                }
                reply(
                    200,
                    &json!({"access_token": self.jwt(&resource), "token_type": "Bearer", "expires_in": 600}),
                )
            }
            _ => reply(404, &json!({"error": "not_found"})),
        }
    }
}

/// The authorization server on a thread of its own; its issuer URL.
fn start_as() -> (String, Arc<As>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let issuer = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    let server = Arc::new(As {
        issuer: issuer.clone(),
        key: rcgen::KeyPair::generate().unwrap(),
        codes: Mutex::default(),
        authorizations: Mutex::default(),
    });
    let s = Arc::clone(&server);
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            let app = axum::Router::new().fallback(move |r| Arc::clone(&s).handle(r));
            axum::serve(listener, app).await.unwrap();
        });
    });
    (issuer, server)
}

struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn serve_demo(issuer: &str) -> (Served, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["serve", "demo", "--http", "127.0.0.1:0", "--issuer", issuer])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let served = Served(child);
    let url = loop {
        let line = lines
            .next()
            .expect("the server says where it serves")
            .unwrap();
        if let Some(url) = line.split("serving the demo at ").nth(1) {
            break url.trim().to_owned();
        }
    };
    // Keep reading its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || lines.for_each(drop));
    (served, url)
}

struct Home(PathBuf);

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn home(name: &str) -> Home {
    let dir = std::env::temp_dir().join(format!("tern-login-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The browser: follows the authorization URL, its redirect included.
    std::fs::write(
        dir.join("browser.py"),
        "import sys, urllib.request\nurllib.request.urlopen(sys.argv[1], timeout=20).read()\n",
    )
    .unwrap();
    Home(dir)
}

fn tern(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .env("XDG_CONFIG_HOME", home)
        .env("HOME", home)
        .env(
            "TERN_BROWSER",
            format!("python3 {}", home.join("browser.py").display()),
        )
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn login_then_call_then_logout() {
    let (issuer, auth) = start_as();
    let (_served, url) = serve_demo(&issuer);
    let h = home("flow");
    let call = [
        "call",
        "--url",
        &url,
        "provision_database",
        "name=orders",
        "--answer",
        REGION,
    ];

    // Not logged in: the 401 comes with advice.
    let o = tern(&h.0, &call);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        text(&o.stderr).contains("tern login --url"),
        "{}",
        text(&o.stderr)
    );

    let o = tern(&h.0, &["login", "--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!("logged in to {url}")),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(*auth.authorizations.lock().unwrap(), 1);
    let tokens = h.0.join("tern/tokens.json");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&tokens), 0o600);
        assert_eq!(mode(&h.0.join("tern")), 0o700);
    }
    let kept: Value = serde_json::from_slice(&std::fs::read(&tokens).unwrap()).unwrap();
    assert_eq!(kept[0]["key"]["issuer"], json!(issuer));

    // Every --url command sends the kept token, with no new authorization.
    let o = tern(&h.0, &call);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "Created database orders in eu-west-1.\n");
    let o = tern(&h.0, &["tools", "--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(*auth.authorizations.lock().unwrap(), 1);

    let o = tern(&h.0, &["logout", "--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("logged out"),
        "{}",
        text(&o.stderr)
    );
    let o = tern(&h.0, &call);
    assert_ne!(o.status.code(), Some(0), "logged out: {}", text(&o.stdout));
}
