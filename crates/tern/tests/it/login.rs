//! `tern login` / `tern call` / `tern logout` against the demo behind OAuth
//! (`tern serve demo --http … --issuer …`), with an authorization server of
//! the test's own on loopback issuing ES256 JWTs, over HTTPS with a test CA
//! the demo (`--ca-file`) and `tern` (`TERN_CA_FILE`) trust, and a
//! "browser" (`TERN_BROWSER`, a Python one-liner trusting the CA too) that
//! follows the authorization URL to tern's loopback redirect, as a person's
//! browser would. Also: a login that does not trust the CA fails cleanly,
//! and the login in a terminal (tmux) with no browser prints the URL.
//!
//! Run with `--nocapture` to see each command and its output (the closing
//! transcript of issue 16 comes from it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Body;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use http_body_util::BodyExt as _;
use serde_json::{Value, json};
use sha2::Digest as _;
use tern_test_support::ca::TestCa;

/// The answer to the demo's region question, in its short form.
const REGION: &str = "region=eu-west-1";

struct As {
    issuer: String,
    key: rcgen::KeyPair,
    codes: Mutex<HashMap<String, (String, String)>>,
    authorizations: Mutex<u32>,
    /// Every request it was sent, whatever its path.
    requests: AtomicU32,
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
        header.typ = Some("at+jwt".into());
        let claims = json!({"iss": self.issuer, "aud": audience, "sub": "ada", "exp": now + 600});
        let key = jsonwebtoken::EncodingKey::from_ec_der(&self.key.serialize_der());
        jsonwebtoken::encode(&header, &claims, &key).unwrap()
    }

    async fn handle(self: Arc<Self>, request: axum::extract::Request) -> axum::response::Response {
        self.requests.fetch_add(1, Ordering::SeqCst);
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

/// The running authorization server, its test CA and a TLS client config
/// trusting that CA.
struct AuthServer {
    issuer: String,
    state: Arc<As>,
    /// The CA certificate (PEM).
    ca_file: PathBuf,
    tls: Arc<rustls::ClientConfig>,
}

impl AuthServer {
    fn requests(&self) -> u32 {
        self.state.requests.load(Ordering::SeqCst)
    }

    fn authorizations(&self) -> u32 {
        *self.state.authorizations.lock().unwrap()
    }
}

/// A test CA (tern-test-support's): its certificate in `dir/ca.pem`, the
/// servers it signs certificates for.
struct Ca(TestCa);

impl Ca {
    fn new(dir: &Path) -> Self {
        Self(TestCa::new("tern login test CA", dir))
    }

    /// A TLS client config trusting this CA.
    fn client(&self) -> rustls::ClientConfig {
        self.0.client_config()
    }

    /// Serves `app` over HTTPS on `listener`, on a thread of its own, with
    /// a certificate for `names` this CA signed.
    fn serve(&self, listener: std::net::TcpListener, names: &[&str], app: axum::Router) {
        let server_tls = self.0.server_config(names);
        listener.set_nonblocking(true).unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(server_tls);
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let acceptor = acceptor.clone();
                    let app = app.clone();
                    tokio::spawn(async move {
                        // A client that refuses the certificate ends the handshake.
                        let Ok(tls) = acceptor.accept(tcp).await else {
                            return;
                        };
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(
                                hyper_util::rt::TokioIo::new(tls),
                                hyper_util::service::TowerToHyperService::new(app),
                            )
                            .await;
                    });
                }
            });
        });
    }
}

/// The authorization server on a thread of its own, over HTTPS: a test CA
/// (its certificate written to `dir/ca.pem`) signed the server's
/// certificate for 127.0.0.1 and localhost.
fn start_as(dir: &Path) -> AuthServer {
    start_as_with(&Ca::new(dir))
}

/// [`start_as`] with the CA `ca`.
fn start_as_with(ca: &Ca) -> AuthServer {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let issuer = format!(
        "https://127.0.0.1:{}",
        listener.local_addr().unwrap().port()
    );
    let state = Arc::new(As {
        issuer: issuer.clone(),
        key: rcgen::KeyPair::generate().unwrap(),
        codes: Mutex::default(),
        authorizations: Mutex::default(),
        requests: AtomicU32::new(0),
    });
    let s = Arc::clone(&state);
    let app = axum::Router::new().fallback(move |r| Arc::clone(&s).handle(r));
    ca.serve(listener, &["127.0.0.1", "localhost"], app);
    AuthServer {
        issuer,
        state,
        ca_file: ca.0.file.clone(),
        tls: Arc::new(ca.client()),
    }
}

/// One HTTP/1.1 exchange with a loopback server on a connection of its own
/// (TLS with `tls` for `https://`), every read and write bounded: the
/// status, the headers (names lowercased) and the body as sent.
fn exchange(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
    tls: &Arc<rustls::ClientConfig>,
) -> (u16, Vec<(String, String)>, String) {
    use std::fmt::Write as _;
    use std::io::{Read as _, Write as _};
    let u = url::Url::parse(url).unwrap();
    let host = u.host_str().unwrap().to_owned();
    let port = u.port_or_known_default().unwrap();
    let tcp = std::net::TcpStream::connect_timeout(
        &format!("{host}:{port}").parse().unwrap(),
        Duration::from_secs(10),
    )
    .unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    tcp.set_write_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    trait Duplex: std::io::Read + std::io::Write {}
    impl<T: std::io::Read + std::io::Write> Duplex for T {}
    let mut stream: Box<dyn Duplex> = if u.scheme() == "https" {
        let name = rustls::pki_types::ServerName::try_from(host.clone()).unwrap();
        let conn = rustls::ClientConnection::new(Arc::clone(tls), name).unwrap();
        Box::new(rustls::StreamOwned::new(conn, tcp))
    } else {
        Box::new(tcp)
    };
    let mut head = format!(
        "{method} {}{} HTTP/1.1\r\nhost: {host}:{port}\r\nconnection: close\r\ncontent-length: {}\r\n",
        u.path(),
        u.query().map(|q| format!("?{q}")).unwrap_or_default(),
        body.len()
    );
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body.as_bytes()).unwrap();
    stream.flush().unwrap();
    let mut raw = Vec::new();
    // A TLS peer may close without close_notify once it has answered.
    match stream.read_to_end(&mut raw) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => {}
        Err(e) => panic!("reading the answer of {url}: {e}"),
    }
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = raw.split_once("\r\n\r\n").expect("an HTTP answer");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// `tern serve demo --http 127.0.0.1:0 --issuer ISSUER --ca-file CA`: the
/// child and the MCP URL it serves.
fn serve_demo(auth: &AuthServer) -> (crate::served::Served, String) {
    serve_demo_with(auth, &[])
}

/// [`serve_demo`] with `extra` flags.
fn serve_demo_with(auth: &AuthServer, extra: &[&str]) -> (crate::served::Served, String) {
    let ca = auth.ca_file.to_str().unwrap();
    let mut args = vec![
        "serve",
        "demo",
        "--http",
        "127.0.0.1:0",
        "--issuer",
        &auth.issuer,
        "--ca-file",
        ca,
    ];
    args.extend_from_slice(extra);
    let (served, url, said) = crate::served::serve(&args, "serving the demo at ");
    eprintln!("$ tern {} &\n{}", args.join(" "), said.join("\n"));
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
    // The browser: follows the authorization URL (its last argument), its
    // redirect included, trusting the test CA (its first).
    std::fs::write(
        dir.join("browser.py"),
        "import ssl, sys, urllib.request\n\
         ctx = ssl.create_default_context(cafile=sys.argv[1])\n\
         urllib.request.urlopen(sys.argv[-1], timeout=20, context=ctx).read()\n",
    )
    .unwrap();
    Home(dir)
}

/// `tern ARGS` with `home` as its config folder, the browser (which trusts
/// the test CA), and, if `trusted`, the test CA as `TERN_CA_FILE` (else the
/// built-in roots only). Prints the command and its output (tokens never
/// appear in either).
fn tern_with(home: &Path, auth: &AuthServer, args: &[&str], trusted: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tern"));
    command
        .args(args)
        .env("XDG_CONFIG_HOME", home)
        .env("HOME", home)
        .env_remove("TERN_CA_FILE")
        .stdin(Stdio::null());
    command.env(
        "TERN_BROWSER",
        format!(
            "python3 {} {}",
            home.join("browser.py").display(),
            auth.ca_file.display()
        ),
    );
    if trusted {
        command.env("TERN_CA_FILE", &auth.ca_file);
    }
    let o = bounded_output(&mut command);
    let quoted: Vec<String> = args
        .iter()
        .map(|a| {
            if a.contains(['"', '{', ' ']) {
                format!("'{a}'")
            } else {
                (*a).to_owned()
            }
        })
        .collect();
    eprintln!(
        "$ tern {}\n{}{}(exit {})\n",
        quoted.join(" "),
        text(&o.stdout),
        text(&o.stderr),
        o.status.code().map_or("signal".into(), |c| c.to_string())
    );
    o
}

/// How long one `tern` command may take (its own login timeout is 300 s; a
/// browser that fails would otherwise hold the test that long).
const COMMAND_PATIENCE: Duration = Duration::from_secs(60);

/// `command`'s output, the process killed if it runs longer than
/// [`COMMAND_PATIENCE`].
fn bounded_output(command: &mut Command) -> Output {
    use std::io::Read as _;
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut pipe: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = pipe.read_to_end(&mut bytes);
            bytes
        })
    };
    let stdout = drain(Box::new(child.stdout.take().unwrap()));
    let stderr = drain(Box::new(child.stderr.take().unwrap()));
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > COMMAND_PATIENCE {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "tern did not finish within {COMMAND_PATIENCE:?}; its stderr: {}",
                text(&stderr.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap(),
        stderr: stderr.join().unwrap(),
    }
}

fn tern(home: &Path, auth: &AuthServer, args: &[&str]) -> Output {
    tern_with(home, auth, args, true)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// An unauthenticated MCP request (`tools/list`) straight to the demo.
fn unauthenticated(url: &str, auth: &AuthServer) -> (u16, Vec<(String, String)>, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    exchange(
        "POST",
        url,
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2026-07-28"),
        ],
        &body.to_string(),
        &auth.tls,
    )
}

#[test]
fn login_then_call_then_logout() {
    let h = home("flow");
    let auth = start_as(&h.0);
    let (_served, url) = serve_demo(&auth);
    let call = [
        "call",
        "--url",
        &url,
        "provision_database",
        "name=orders",
        "--answer",
        REGION,
    ];

    // The demo answers an unauthenticated call with its challenge without
    // asking the issuer anything (issue 16 §4; RFC 6750 §3, RFC 9728 §5.1).
    let before = auth.requests();
    let (status, headers, _) = unauthenticated(&url, &auth);
    assert_eq!(status, 401, "{headers:?}");
    let challenge = header(&headers, "www-authenticate").expect("a challenge");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(
        challenge.contains("resource_metadata=\"http://127.0.0.1:"),
        "{challenge}"
    );
    assert_eq!(auth.requests(), before, "the demo contacted the issuer");

    // Not logged in: the 401 comes with advice.
    let o = tern(&h.0, &auth, &call);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        text(&o.stderr).contains("tern login --url"),
        "{}",
        text(&o.stderr)
    );
    // The preset answer is not blamed: no question could be asked.
    assert!(
        !text(&o.stderr).contains("was not used"),
        "{}",
        text(&o.stderr)
    );

    let o = tern(&h.0, &auth, &["login", "--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains(&format!(
            "logged in to {url} (authorization server {})",
            auth.issuer
        )),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(auth.authorizations(), 1);
    let tokens = h.0.join("tern/tokens.json");
    assert_private(&tokens);
    let kept: Value = serde_json::from_slice(&std::fs::read(&tokens).unwrap()).unwrap();
    assert_eq!(kept[0]["key"]["issuer"], json!(auth.issuer));

    // Every --url command sends the kept token, with no new authorization.
    let o = tern(&h.0, &auth, &call);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "Created database orders in eu-west-1.\n");
    let o = tern(&h.0, &auth, &["tools", "--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(auth.authorizations(), 1);

    let o = tern(&h.0, &auth, &["logout", "--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("logged out"),
        "{}",
        text(&o.stderr)
    );
    let o = tern(&h.0, &auth, &call);
    assert_ne!(o.status.code(), Some(0), "logged out: {}", text(&o.stdout));
}

/// The token file is 0600 in a 0700 folder (issue 16 §3).
fn assert_private(tokens: &Path) {
    assert!(tokens.is_file(), "no token file at {}", tokens.display());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(tokens), 0o600);
        assert_eq!(mode(tokens.parent().unwrap()), 0o700);
    }
}

#[test]
fn a_login_that_does_not_trust_the_authorization_server_fails_and_keeps_nothing() {
    let h = home("untrusted");
    let auth = start_as(&h.0);
    let (_served, url) = serve_demo(&auth);
    // No TERN_CA_FILE, no --ca-file: the built-in roots do not know the
    // test CA, so the authorization server's certificate is refused.
    let o = tern_with(&h.0, &auth, &["login", "--url", &url], false);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert!(stderr.starts_with("tern login: "), "{stderr}");
    assert!(stderr.contains(&auth.issuer), "names the server: {stderr}");
    assert!(
        stderr.contains("invalid peer certificate: UnknownIssuer"),
        "says why: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(auth.authorizations(), 0, "no browser was sent anywhere");
    assert!(!h.0.join("tern/tokens.json").exists(), "a token was kept");

    // With the CA file given, the same login works.
    let ca = auth.ca_file.to_str().unwrap();
    let o = tern_with(
        &h.0,
        &auth,
        &["login", "--url", &url, "--ca-file", ca],
        false,
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
}

/// This machine's name: a DNS name (so remote to tern, which reads a host
/// as written) that `/etc/hosts` resolves to this machine.
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

/// A remote-looking MCP server whose metadata names the loopback
/// authorization server: `tern login` reads the metadata and sends the
/// authorization server nothing (it counts every request).
#[test]
fn login_to_a_remote_server_naming_a_loopback_authorization_server_sends_it_nothing() {
    let h = home("remote");
    let ca = Ca::new(&h.0);
    let auth = start_as_with(&ca);
    let name = machine_name();
    // On every address: the name may resolve to 127.0.x.x or to the
    // machine's own address.
    let listener = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let url = format!(
        "https://{name}:{}/mcp",
        listener.local_addr().unwrap().port()
    );
    let prm = json!({"resource": url, "authorization_servers": [auth.issuer]});
    let read = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&read);
    let app = axum::Router::new().route(
        "/.well-known/oauth-protected-resource/mcp",
        axum::routing::get(move || {
            counted.fetch_add(1, Ordering::SeqCst);
            let prm = prm.clone();
            async move { reply(200, &prm) }
        }),
    );
    ca.serve(listener, &[&name], app);
    let o = tern(&h.0, &auth, &["login", "--url", &url]);
    let stderr = text(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{stderr}");
    assert_eq!(
        read.load(Ordering::SeqCst),
        1,
        "the metadata was read: {stderr}"
    );
    assert_eq!(
        auth.requests(),
        0,
        "nothing reached the loopback authorization server: {stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "the authorization server {}/ is on this machine or a private network",
            auth.issuer
        )),
        "{stderr}"
    );
    assert!(!h.0.join("tern/tokens.json").exists(), "a token was kept");
}

/// `tern login` in a terminal with no browser to open: it prints the
/// authorization URL; the test follows it as a person's browser would, and
/// the pane shows the login.
#[test]
fn login_in_a_terminal_without_a_browser_prints_the_url_to_follow() {
    let h = home("tmux");
    let auth = start_as(&h.0);
    let (_served, url) = serve_demo(&auth);
    // An empty PATH for tern: no xdg-open (nor any other browser) to run;
    // no display either.
    let nothing = h.0.join("empty-path");
    std::fs::create_dir_all(&nothing).unwrap();
    let env = format!(
        "env -u TERN_BROWSER -u DISPLAY -u WAYLAND_DISPLAY PATH='{}' HOME='{home}' XDG_CONFIG_HOME='{home}' TERN_CA_FILE='{}'",
        nothing.display(),
        auth.ca_file.display(),
        home = h.0.display(),
    );
    let t = crate::terminal::Tmux::start(
        "login",
        &format!(
            "{env} {}",
            crate::terminal::shell(&format!("login --url '{url}'"))
        ),
    );
    let screen = t.wait_for("open the URL above yourself");
    let shown = screen
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("{}/authorize?", auth.issuer)))
        .unwrap_or_else(|| panic!("no authorization URL on the screen:\n{screen}"))
        .to_owned();

    // The browser's part: the authorization server redirects to tern's
    // loopback listener, which says the login worked.
    let (status, headers, _) = exchange("GET", &shown, &[], "", &auth.tls);
    assert_eq!(status, 302, "{headers:?}");
    let back = header(&headers, "location").expect("a redirect").to_owned();
    assert!(back.starts_with("http://127.0.0.1:"), "{back}");
    let (status, _, page) = exchange("GET", &back, &[], "", &auth.tls);
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("tern is authorized"), "{page}");

    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains(&format!(
            "tern: logged in to {url} (authorization server {}",
            auth.issuer
        )),
        "{screen}"
    );
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert_eq!(auth.authorizations(), 1);
    assert_private(&h.0.join("tern/tokens.json"));
}

/// `--tool-scope deploy=mcp:admin`, tried from outside as the attacker did:
/// a token without `mcp:admin` is refused `deploy` on the 2026-07-28 wire
/// (403 `insufficient_scope`), and on a 2025-11-25 session naming an
/// allowed tool first and `deploy` second is refused as malformed
/// (`-32602`) instead of running `deploy`, as it did.
#[test]
fn a_tool_scope_holds_on_both_eras_against_a_repeated_name() {
    let dir = home("tool-scope");
    let auth = start_as(&dir.0);
    let (_served, url) = serve_demo_with(&auth, &["--tool-scope", "deploy=mcp:admin"]);
    let token = format!("Bearer {}", auth.state.jwt(&url));
    let json = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("authorization", token.as_str()),
    ];
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "deploy", "arguments": {"service": "web"}, "_meta": meta}});
    let mut modern = json.to_vec();
    modern.extend([
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "deploy"),
    ]);
    let (status, headers, body) = exchange("POST", &url, &modern, &call.to_string(), &auth.tls);
    assert_eq!(status, 403, "{body}");
    assert!(
        header(&headers, "www-authenticate").is_some_and(|c| c.contains("insufficient_scope")),
        "{headers:?}"
    );
    // The same token opens a 2025-11-25 session.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "attacker", "version": "1"}}});
    let (status, headers, body) = exchange("POST", &url, &json, &init.to_string(), &auth.tls);
    assert_eq!(status, 200, "{body}");
    let session = header(&headers, "mcp-session-id").unwrap().to_owned();
    let mut legacy = json.to_vec();
    legacy.extend([
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ]);
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(
        exchange("POST", &url, &legacy, initialized, &auth.tls).0,
        202
    );
    let smuggled = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"workspace_files","name":"deploy","arguments":{"service":"web"}}}"#;
    let (status, _, body) = exchange("POST", &url, &legacy, smuggled, &auth.tls);
    let reply: Value = serde_json::from_str(&body).unwrap_or_else(|_| panic!("{status}: {body}"));
    assert_eq!(reply["error"]["code"], -32602, "{body}");
    assert!(reply.get("result").is_none(), "{body}");
    // deploy alone on the session: the scope check, as on the 2026 wire.
    let direct = r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"deploy","arguments":{"service":"web"}}}"#;
    let (status, _, body) = exchange("POST", &url, &legacy, direct, &auth.tls);
    assert_eq!(status, 403, "{body}");
}
