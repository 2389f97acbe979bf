//! tern's accept loop (`transport::accept`) over real loopback TCP: slow
//! headers, idle connections, bodies that never finish, and the caps on
//! connections and requests in flight — each as a client would cause it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tern_server::transport::http::{Http, ServeOptions, serve_with};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::fixture::{Counters, ManualClock, builder};

struct Running {
    port: u16,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
    counters: Arc<Counters>,
}

async fn start(options: ServeOptions) -> Running {
    let counters = Arc::new(Counters::default());
    let server = builder(&counters, ManualClock::new()).build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(serve_with(
        listener,
        Http::new(server),
        "/mcp",
        options,
        async move {
            let _ = stopped.await;
        },
    ));
    Running {
        port,
        stop: Some(stop),
        done,
        counters,
    }
}

fn request(port: u16, body: &Value, keep_alive: bool) -> String {
    let body = body.to_string();
    let method = body_method(&body);
    let name = serde_json::from_str::<Value>(&body).unwrap()["params"]["name"]
        .as_str()
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {method}\r\n{name}Content-Length: {}\r\n\r\n{body}",
        if keep_alive { "keep-alive" } else { "close" },
        body.len()
    )
}

fn body_method(body: &str) -> String {
    serde_json::from_str::<Value>(body).unwrap()["method"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}})
}

fn list_tools() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}})
}

/// Reads until the server closes the connection; a bound, not a timing
/// claim: a server that never closes fails the test instead of hanging it.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw))
        .await
        .expect("the server closes the connection")
        .unwrap();
    String::from_utf8_lossy(&raw).into_owned()
}

/// Reads one response head and body (Content-Length framed).
async fn read_response(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf))
            .await
            .expect("a response")
            .unwrap();
        assert!(
            n > 0,
            "closed before a response: {}",
            String::from_utf8_lossy(&raw)
        );
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let len = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().unwrap())
                })
                .unwrap_or(0);
            if body.len() >= len {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn headers_sent_too_slowly_close_the_connection() {
    let r = start(ServeOptions::new().header_timeout(Duration::from_millis(200))).await;
    let mut stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // …and nothing more: the connection is given up.
    let answer = read_to_close(&mut stream).await;
    assert!(!answer.contains("200 OK"), "{answer}");
}

#[tokio::test]
async fn an_idle_kept_alive_connection_is_closed() {
    let r = start(ServeOptions::new().header_timeout(Duration::from_millis(200))).await;
    let mut stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    stream
        .write_all(request(r.port, &list_tools(), true).as_bytes())
        .await
        .unwrap();
    let first = read_response(&mut stream).await;
    assert!(first.starts_with("HTTP/1.1 200"), "{first}");
    // Idle after its request: closed by the server, not held for ever.
    let rest = read_to_close(&mut stream).await;
    assert!(rest.is_empty(), "{rest}");
}

#[tokio::test]
async fn a_body_that_never_finishes_fails_its_request() {
    let r = start(ServeOptions::new().body_timeout(Duration::from_millis(200))).await;
    let mut stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    let full = request(r.port, &list_tools(), false);
    let (head, body) = full.split_once("\r\n\r\n").unwrap();
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(b"\r\n\r\n").await.unwrap();
    stream.write_all(&body.as_bytes()[..10]).await.unwrap();
    let answer = read_to_close(&mut stream).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
}

#[tokio::test]
async fn connections_over_the_cap_get_503_and_are_closed() {
    let r = start(ServeOptions::new().max_connections(2)).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
        // A complete request proves the connection is accepted and counted.
        s.write_all(request(r.port, &list_tools(), true).as_bytes())
            .await
            .unwrap();
        assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
        held.push(s);
    }
    let mut third = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    let answer = read_to_close(&mut third).await;
    assert!(answer.starts_with("HTTP/1.1 503"), "{answer}");
    assert!(answer.contains("Retry-After: 1"), "{answer}");
    // A slot frees when a connection closes.
    drop(held.pop());
    let mut again = None;
    for _ in 0..100 {
        let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
        s.write_all(request(r.port, &list_tools(), false).as_bytes())
            .await
            .unwrap();
        let answer = read_to_close(&mut s).await;
        if answer.starts_with("HTTP/1.1 200") {
            again = Some(answer);
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(again.is_some(), "a closed connection gives its slot back");
}

/// A streaming call holds its slot while it streams; a second request is
/// refused with 503 and a JSON-RPC body saying when to come back; the slot
/// frees when the stream's client goes away.
#[tokio::test]
async fn requests_over_the_in_flight_caps_get_503_with_retry_after() {
    for options in [
        ServeOptions::new().max_in_flight(1),
        ServeOptions::new().max_in_flight_per_peer(1),
    ] {
        let r = start(options).await;
        let mut m = meta();
        m["progressToken"] = json!("p");
        let slow = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": m}});
        let mut streaming = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
        streaming
            .write_all(request(r.port, &slow, false).as_bytes())
            .await
            .unwrap();
        let mut head = [0u8; 256];
        let n = streaming.read(&mut head).await.unwrap();
        assert!(String::from_utf8_lossy(&head[..n]).contains("text/event-stream"));
        let mut second = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
        second
            .write_all(request(r.port, &list_tools(), false).as_bytes())
            .await
            .unwrap();
        let refused = read_to_close(&mut second).await;
        assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
        assert!(
            refused.contains("retry-after: 1") || refused.contains("Retry-After: 1"),
            "{refused}"
        );
        assert!(refused.contains(r#""retryAfterMs":1000"#), "{refused}");
        drop(streaming);
        r.counters.cancel_seen.notified().await;
        let mut served = None;
        for _ in 0..100 {
            let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
            s.write_all(request(r.port, &list_tools(), false).as_bytes())
                .await
                .unwrap();
            let answer = read_to_close(&mut s).await;
            if answer.starts_with("HTTP/1.1 200") {
                served = Some(answer);
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(served.is_some(), "the stream's slot came back");
    }
}

#[tokio::test]
async fn shutdown_stops_accepting_and_drains() {
    let mut r = start(ServeOptions::new().drain_timeout(Duration::from_secs(5))).await;
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    s.write_all(request(r.port, &list_tools(), true).as_bytes())
        .await
        .unwrap();
    assert!(read_response(&mut s).await.starts_with("HTTP/1.1 200"));
    r.stop.take().unwrap().send(()).unwrap();
    // The idle kept-alive connection is closed, and serve returns.
    assert!(read_to_close(&mut s).await.is_empty());
    tokio::time::timeout(Duration::from_secs(20), &mut r.done)
        .await
        .expect("serve returns after draining")
        .unwrap()
        .unwrap();
    assert!(
        TcpStream::connect(("127.0.0.1", r.port)).await.is_err(),
        "no longer accepting"
    );
}

/// `serve_with` finds its endpoint by path alone (no router): `/mcp`
/// answers whatever its query, anything else is `404`, the OAuth metadata
/// is served beside it when configured, and a path that cannot match is
/// refused before anything listens.
#[tokio::test]
async fn serve_with_routes_the_endpoint_the_metadata_and_nothing_else() {
    let counters = Arc::new(Counters::default());
    let server = builder(&counters, ManualClock::new()).build().unwrap();
    let resource = tern_server::auth::ResourceServer::new(
        "http://127.0.0.1/mcp",
        "https://as.example",
        crate::fixture::TwoTokens,
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(serve_with(
        listener,
        Http::new(server).oauth(resource),
        "/mcp",
        ServeOptions::new(),
        async move {
            let _ = stopped.await;
        },
    ));
    let exchange = |text: String| async move {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(text.as_bytes()).await.unwrap();
        read_to_close(&mut stream).await
    };
    let get = |path: &str| {
        format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")
    };
    // The endpoint itself (here it wants a token: 401 with the challenge).
    let text = request(port, &list_tools(), false);
    let at_query = text.replacen("POST /mcp ", "POST /mcp?trace=1 ", 1);
    for request in [text, at_query] {
        let answer = exchange(request).await;
        assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
        assert!(
            answer.contains("resource_metadata="),
            "the endpoint's challenge: {answer}"
        );
    }
    let metadata = exchange(get("/.well-known/oauth-protected-resource/mcp")).await;
    assert!(metadata.starts_with("HTTP/1.1 200"), "{metadata}");
    assert!(
        metadata.contains(r#""resource":"http://127.0.0.1/mcp""#),
        "{metadata}"
    );
    for path in ["/", "/mcp/", "/mcpx", "/MCP", "/other/mcp"] {
        let answer = exchange(get(path)).await;
        assert!(answer.starts_with("HTTP/1.1 404"), "{path}: {answer}");
    }
    let _ = stop.send(());
    done.await.unwrap().unwrap();

    for path in ["mcp", "", "/mcp/{tenant}", "/{*rest}"] {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = builder(&counters, ManualClock::new()).build().unwrap();
        let refused = serve_with(
            listener,
            Http::new(server),
            path,
            ServeOptions::new(),
            std::future::ready(()),
        )
        .await
        .unwrap_err();
        assert_eq!(
            refused.kind(),
            std::io::ErrorKind::InvalidInput,
            "{path}: {refused}"
        );
    }
}
