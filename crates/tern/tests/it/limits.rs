//! The demo's limits from outside: with `--tokens` two principals share the
//! server, and one filling its share of listen streams (16, below the
//! server's 64 and its own 32 requests in flight) does not refuse the other.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::demo_tasks::serve_http;

async fn listen(authority: &str, token: &str, id: u32) -> (TcpStream, String) {
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": true}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}).to_string();
    let text = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAuthorization: Bearer {token}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let mut s = TcpStream::connect(authority).await.unwrap();
    s.write_all(text.as_bytes()).await.unwrap();
    // The head and the first event (the ack), or a whole refusal.
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(20), s.read(&mut buf))
            .await
            .expect("an answer")
            .unwrap();
        raw.extend_from_slice(&buf[..n]);
        let t = String::from_utf8_lossy(&raw).into_owned();
        if n == 0 || t.split_once("\r\n\r\n").is_some_and(|(_, b)| !b.is_empty()) {
            return (s, t);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_principal_at_its_cap_does_not_refuse_another() {
    let dir = std::env::temp_dir().join(format!("tern-demo-limits-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("tokens");
    std::fs::write(&file, "alice-token alice\nbob-token bob\n").unwrap();
    let server = serve_http(&["--tokens", &file.display().to_string()]);
    let authority = server
        .1
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let share = u32::try_from(tern_server::builder::DEFAULT_MAX_LISTENS_PER_CALLER).unwrap();
    let mut open = Vec::new();
    for id in 0..share {
        let (s, head) = listen(&authority, "alice-token", id).await;
        assert!(head.starts_with("HTTP/1.1 200"), "listen {id}: {head}");
        open.push(s);
    }
    let (_s, head) = listen(&authority, "alice-token", 99).await;
    assert!(head.starts_with("HTTP/1.1 503"), "alice's one more: {head}");
    assert!(head.to_ascii_lowercase().contains("retry-after"), "{head}");
    let (_s, head) = listen(&authority, "bob-token", 100).await;
    assert!(head.starts_with("HTTP/1.1 200"), "bob is served: {head}");
    assert!(
        head.contains("notifications/subscriptions/acknowledged"),
        "{head}"
    );
    drop(open);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
