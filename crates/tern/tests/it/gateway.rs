//! `tern gateway` in front of the demo (stdio upstream): `--check`, `tern
//! call` through it over stdio and over HTTP answering the demo's
//! questions, `/healthz` and `/readyz`.

use std::io::{Read as _, Write as _};

use crate::served::tern;

const REGION: &str = r#"region={"action":"accept","content":{"region":"eu-west-1"}}"#;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A servers file with the demo as upstream `demo` (its entries under
/// `demo__`) and `extra` more upstreams.
fn config(extra: &str) -> tempfile_path::Path {
    let file = serde_json::json!({"mcpServers": {
        "demo": {"command": env!("CARGO_BIN_EXE_tern"), "args": ["serve", "demo", "--stdio"]},
    }});
    let mut file = file;
    if !extra.is_empty() {
        let more: serde_json::Value = serde_json::from_str(extra).unwrap();
        for (k, v) in more.as_object().unwrap() {
            file["mcpServers"][k] = v.clone();
        }
    }
    tempfile_path::Path::with(&file.to_string())
}

/// A file removed when dropped (the other gateway tests' too).
pub mod tempfile_path {
    pub struct Path(pub std::path::PathBuf);

    impl Path {
        pub fn with(text: &str) -> Self {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "tern-gateway-{}-{}.json",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            std::fs::write(&path, text).unwrap();
            Self(path)
        }

        pub fn as_str(&self) -> &str {
            self.0.to_str().unwrap()
        }
    }

    impl Drop for Path {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[test]
fn check_probes_every_upstream_and_prints_the_catalogue() {
    let file = config("");
    let o = tern(&["gateway", "--config", file.as_str(), "--check"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.starts_with("demo: up, 2026-07-28\n"), "{out}");
    assert!(out.contains("  tool demo__provision_database\n"), "{out}");
    assert!(out.contains("  prompt demo__incident_report\n"), "{out}");
    assert!(out.contains("  resource demo://greeting\n"), "{out}");
    // An upstream that cannot start is reported, and the exit says so.
    let file = config(r#"{"gone": {"command": "/nonexistent/tern-gateway-upstream"}}"#);
    let o = tern(&["gateway", "--config", file.as_str(), "--check"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("gone: down:"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn a_bad_file_or_a_collision_exits_2_naming_it() {
    let file =
        tempfile_path::Path::with(r#"{"mcpServers": {"x": {"command": "a", "timeout": "soon"}}}"#);
    let o = tern(&["gateway", "--config", file.as_str(), "--check"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("mcpServers.x.timeout"),
        "{}",
        text(&o.stderr)
    );
    let tern_bin = env!("CARGO_BIN_EXE_tern");
    let twice = config(&format!(
        r#"{{"again": {{"command": "{tern_bin}", "args": ["serve", "demo", "--stdio"], "prefix": "demo"}}}}"#
    ));
    let o = tern(&["gateway", "--config", twice.as_str(), "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stdout));
    assert!(
        text(&o.stderr).contains("comes from both `demo` and `again`"),
        "{}",
        text(&o.stderr)
    );
    let o = tern(&["gateway", "--config", twice.as_str()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        text(&o.stderr).contains("--stdio or --http"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn tern_call_through_the_gateway_answers_the_demos_question_over_stdio() {
    let file = config("");
    let o = tern(&[
        "call",
        "demo__provision_database",
        "name=orders",
        "--answer",
        REGION,
        "--",
        env!("CARGO_BIN_EXE_tern"),
        "gateway",
        "--config",
        file.as_str(),
        "--stdio",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "Created database orders in eu-west-1.\n");
    // Without an answer (and no terminal) tern declares no elicitation, the
    // gateway forwards exactly that, and the upstream's -32021 comes back.
    let o = tern(&[
        "call",
        "demo__provision_database",
        "name=orders",
        "--",
        env!("CARGO_BIN_EXE_tern"),
        "gateway",
        "--config",
        file.as_str(),
        "--stdio",
    ]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("[-32021]"), "{}", text(&o.stderr));
}

fn get(addr: &str, path: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn over_http_the_gateway_relays_rounds_and_says_it_is_ready() {
    let file = config("");
    let (served, url, _) = crate::served::serve(
        &[
            "gateway",
            "--config",
            file.as_str(),
            "--http",
            "127.0.0.1:0",
        ],
        "serving the gateway at ",
    );
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    assert!(get(&addr, "/healthz").starts_with("HTTP/1.1 200"));
    let ready = get(&addr, "/readyz");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    assert!(ready.contains("ready demo=up"), "{ready}");
    let o = tern(&[
        "call",
        "--url",
        &url,
        "demo__provision_database",
        "name=orders",
        "--answer",
        REGION,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "Created database orders in eu-west-1.\n");
    let o = tern(&["tools", "--url", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains("demo__transfer_funds"),
        "{}",
        text(&o.stdout)
    );
    drop(served);
}

/// A tokens file (`TOKEN PRINCIPAL` per line), removed when dropped.
fn tokens(lines: &str) -> tempfile_path::Path {
    tempfile_path::Path::with(lines)
}

#[test]
fn an_upstream_gets_its_credential_from_the_environment_and_never_the_clients_token() {
    // The upstream admits only the gateway's own token.
    let upstream_tokens = tokens("up-secret gateway-svc\n");
    let (_demo, demo_url) = crate::served::demo_over_http(&["--tokens", upstream_tokens.as_str()]);
    // The file names the variable; the gateway's environment holds it.
    let file = tempfile_path::Path::with(
        &serde_json::json!({"mcpServers": {"api": {
            "url": demo_url,
            "headers": {"Authorization": "Bearer ${TERN_GATEWAY_IT_UP_TOKEN}"},
        }}})
        .to_string(),
    );
    let client_tokens = tokens("client-token alice\n");
    let (_gateway, url, _) = crate::served::serve_with_env(
        &[
            "gateway",
            "--config",
            file.as_str(),
            "--http",
            "127.0.0.1:0",
            "--tokens",
            client_tokens.as_str(),
        ],
        &[("TERN_GATEWAY_IT_UP_TOKEN", "up-secret")],
        "serving the gateway at ",
    );
    let o = tern(&[
        "call",
        "--url",
        &url,
        "--header",
        "Authorization:Bearer client-token",
        "api__provision_database",
        "name=orders",
        "--answer",
        REGION,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "Created database orders in eu-west-1.\n");
    // The client's token is the gateway's to check, not the upstream's:
    // sent straight to the upstream it is refused.
    let o = tern(&[
        "tools",
        "--url",
        &demo_url,
        "--header",
        "Authorization:Bearer client-token",
    ]);
    assert_ne!(
        o.status.code(),
        Some(0),
        "the upstream took the client's token"
    );
    // Without the variable the file does not load, naming it (not a value).
    let o = tern(&["gateway", "--config", file.as_str(), "--check"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("the environment variable TERN_GATEWAY_IT_UP_TOKEN is not set"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn with_an_issuer_the_gateway_is_an_oauth_resource_server() {
    let file = config("");
    let (_served, url, _) = crate::served::serve(
        &[
            "gateway",
            "--config",
            file.as_str(),
            "--http",
            "127.0.0.1:0",
            "--issuer",
            "https://issuer.example",
            "--scope",
            "mcp:tools",
        ],
        "serving the gateway at ",
    );
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_owned();
    // Its Protected Resource Metadata names the issuer and the gateway.
    let metadata = get(&addr, "/.well-known/oauth-protected-resource/mcp");
    assert!(metadata.starts_with("HTTP/1.1 200"), "{metadata}");
    let body: serde_json::Value =
        serde_json::from_str(metadata.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["authorization_servers"][0], "https://issuer.example");
    assert_eq!(body["resource"], url);
    assert_eq!(body["resource_name"], "tern gateway");
    // No token: 401 with the challenge pointing at the metadata.
    let mut stream = std::net::TcpStream::connect(&addr).unwrap();
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#;
    write!(
        stream,
        "POST /mcp HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    stream.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 401"), "{out}");
    let challenge = out
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("www-authenticate:"))
        .unwrap_or_default()
        .to_owned();
    assert!(
        challenge.contains("resource_metadata=") && challenge.contains("mcp:tools"),
        "{out}"
    );
    // And the health routes stay open.
    assert!(get(&addr, "/healthz").starts_with("HTTP/1.1 200"));
}

/// `tern call ARGS -- tern gateway --config FILE --stdio`.
fn through_the_gateway(file: &tempfile_path::Path, args: &[&str]) -> std::process::Output {
    let mut all = vec!["call"];
    all.extend_from_slice(args);
    all.extend_from_slice(&[
        "--",
        env!("CARGO_BIN_EXE_tern"),
        "gateway",
        "--config",
        file.as_str(),
        "--stdio",
    ]);
    tern(&all)
}

#[test]
fn the_deprecated_sampling_and_roots_are_relayed_where_the_client_declares_them() {
    let file = config("");
    // Sampling: the upstream's request reaches tern's --sampler.
    let o = through_the_gateway(
        &file,
        &[
            "demo__summarize",
            "text=hello world",
            "--sampler",
            "tr a-z A-Z",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(
        text(&o.stdout),
        "Summary (tr a-z A-Z): SUMMARISE IN ONE SENTENCE:\n\nHELLO WORLD\n"
    );
    // Roots: the client's folders, as it declared them.
    let dir = std::env::temp_dir().join(format!("tern-gateway-roots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = through_the_gateway(
        &file,
        &["demo__workspace_files", "--root", dir.to_str().unwrap()],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert!(
        text(&o.stdout).contains(&format!("file://{}", dir.display())),
        "{}",
        text(&o.stdout)
    );
    let _ = std::fs::remove_dir(&dir);
    // Undeclared (no --sampler, no terminal): not forwarded, and the
    // upstream's -32021 comes back naming what it needs.
    let o = through_the_gateway(&file, &["demo__summarize", "text=hi"]);
    assert_eq!(o.status.code(), Some(5), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("[-32021]"), "{}", text(&o.stderr));
    assert!(text(&o.stderr).contains("sampling"), "{}", text(&o.stderr));
}
