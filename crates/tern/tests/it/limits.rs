//! The demo's limits from outside: with `--tokens` two principals share the
//! server, and one filling its share of listen streams (16, below the
//! server's 64 and its own 32 requests in flight) does not refuse the other;
//! behind a real nginx declared trusted, two anonymous clients are two
//! callers, each with its own share.

use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::demo_tasks::serve_http;

async fn listen(authority: &str, token: &str, id: u32) -> (TcpStream, String) {
    listen_from(None, authority, Some(token), id).await
}

/// A listen from the loopback address `from` (default 127.0.0.1), with a
/// bearer `token` or anonymously: the response head and its first event.
async fn listen_from(
    from: Option<[u8; 4]>,
    authority: &str,
    token: Option<&str>,
    id: u32,
) -> (TcpStream, String) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": true}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}).to_string();
    let text = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\n{auth}Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from((
            from.unwrap_or([127, 0, 0, 1]),
            0,
        )))
        .unwrap();
    let mut s = socket.connect(authority.parse().unwrap()).await.unwrap();
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

/// Behind the nginx of docs/DEPLOYMENT.md (`X-Forwarded-For
/// $proxy_add_x_forwarded_for`) every client was one peer, the proxy: one
/// anonymous client filling its listen share refused them all. Declared
/// trusted (`--trusted-proxy 127.0.0.1 --forwarded-header x-forwarded-for`),
/// nginx's clients are told apart: 127.0.0.2 at its share, 127.0.0.3 is
/// still served, through the same nginx.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn behind_a_trusted_nginx_each_client_has_its_own_share() {
    let server = serve_http(&[
        "--trusted-proxy",
        "127.0.0.1",
        "--forwarded-header",
        "x-forwarded-for",
    ]);
    let upstream = server
        .1
        .trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .to_string();
    let dir = crate::fleet::Scratch::new("trusted-nginx");
    let nginx = crate::fleet::Nginx::start(&[upstream], &dir.0);
    let authority = format!("127.0.0.1:{}", nginx.port);
    let share = u32::try_from(tern_server::builder::DEFAULT_MAX_LISTENS_PER_CALLER).unwrap();
    let mut open = Vec::new();
    for id in 0..share {
        let (s, head) = listen_from(Some([127, 0, 0, 2]), &authority, None, id).await;
        assert!(head.starts_with("HTTP/1.1 200"), "listen {id}: {head}");
        open.push(s);
    }
    let (_s, head) = listen_from(Some([127, 0, 0, 2]), &authority, None, 99).await;
    assert!(
        head.starts_with("HTTP/1.1 503"),
        "one more of 127.0.0.2: {head}"
    );
    let (_s, head) = listen_from(Some([127, 0, 0, 3]), &authority, None, 100).await;
    assert!(
        head.starts_with("HTTP/1.1 200"),
        "127.0.0.3 through the same nginx: {head}"
    );
}
