//! The Streamable HTTP transport over real loopback TCP: every status code of
//! the module's table, SSE, disconnect cancellation, the cross-principal
//! refusal, and `subscriptions/listen`.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tern_server::transport::http::{Bearer, Http};
use tern_server::{Principal, Server, ToolDef};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::fixture::{Counters, ManualClock, builder};

struct Endpoint {
    port: u16,
    server: Server,
    counters: Arc<Counters>,
}

async fn start(configure: impl FnOnce(Http) -> Http) -> Endpoint {
    let counters = Arc::new(Counters::default());
    let server = builder(&counters, ManualClock::new()).build().unwrap();
    let mut e = start_server(server, configure).await;
    e.counters = counters;
    e
}

async fn start_server(server: Server, configure: impl FnOnce(Http) -> Http) -> Endpoint {
    let counters = Arc::new(Counters::default());
    let http = configure(Http::new(server.clone()));
    let app = axum::Router::new().route_service("/mcp", http.into_service());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Endpoint {
        port,
        server,
        counters,
    }
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
}

/// A response: status, lower-cased headers, and the body (de-chunked).
#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The `data:` events of an SSE body.
    fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).unwrap())
            .collect()
    }
}

fn request_text(method: &str, port: u16, headers: &[(&str, String)], body: &str) -> String {
    let mut text = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        text.push_str(k);
        text.push_str(": ");
        text.push_str(v);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    text.push_str(body);
    text
}

fn parse(raw: &[u8]) -> Reply {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, rest) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let chunked = headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && v.contains("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Reply {
        status,
        headers,
        body,
    }
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        body.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    body
}

async fn send(port: u16, method: &str, headers: &[(&str, String)], body: &str) -> Reply {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    stream
        .write_all(request_text(method, port, headers, body).as_bytes())
        .await
        .unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    parse(&raw)
}

/// The headers a correct client sends for `body`.
fn mcp_headers(body: &Value) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("Content-Type", "application/json".to_owned()),
        ("Accept", "application/json, text/event-stream".to_owned()),
        ("MCP-Protocol-Version", "2026-07-28".to_owned()),
    ];
    if let Some(m) = body["method"].as_str() {
        h.push(("Mcp-Method", m.to_owned()));
    }
    let params = &body["params"];
    if let Some(name) = params["name"].as_str().or_else(|| params["uri"].as_str()) {
        h.push(("Mcp-Name", name.to_owned()));
    }
    h
}

async fn post(e: &Endpoint, body: &Value) -> Reply {
    send(e.port, "POST", &mcp_headers(body), &body.to_string()).await
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name, "arguments": arguments, "_meta": meta()}})
}

#[tokio::test]
async fn json_results_and_the_status_of_each_error() {
    let e = start(|h| h).await;
    let ok = post(&e, &call("greet", json!({}))).await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("content-type"), Some("application/json"));
    assert_eq!(ok.json()["result"]["resultType"], "input_required");

    let unknown = post(
        &e,
        &json!({"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"_meta": meta()}}),
    )
    .await;
    assert_eq!(
        (unknown.status, unknown.json()["error"]["code"].clone()),
        (404, json!(-32601))
    );
    assert_eq!(unknown.json()["id"], 2, "the id is echoed");

    let no_meta = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {}});
    let r = post(&e, &no_meta).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32602))
    );

    let mut v999 =
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {"_meta": meta()}});
    v999["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("v999.0.0");
    let mut headers = mcp_headers(&v999);
    headers[2].1 = "v999.0.0".into();
    let r = send(e.port, "POST", &headers, &v999.to_string()).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32022))
    );
    assert_eq!(
        r.json()["error"]["data"],
        json!({"supported": ["2026-07-28"], "requested": "v999.0.0"})
    );
    // Header and body disagree: the mismatch is reported, not the version.
    let r = send(e.port, "POST", &mcp_headers(&v999), &v999.to_string()).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32020))
    );

    let mut no_sampling = call("sample", json!({}));
    no_sampling["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({});
    let r = post(&e, &no_sampling).await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32021))
    );
    assert_eq!(
        r.json()["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );

    let tool_error = post(&e, &call("nope", json!({}))).await;
    assert_eq!(
        (
            tool_error.status,
            tool_error.json()["error"]["code"].clone()
        ),
        (200, json!(-32602)),
        "unknown tool: status unspecified, 200"
    );

    let h = mcp_headers(&call("greet", json!({})));
    let r = send(e.port, "POST", &h, "{not json").await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32700))
    );
    let r = send(
        e.port,
        "POST",
        &h,
        r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(
        (r.status, r.json()["error"]["code"].clone()),
        (400, json!(-32600))
    );

    let notification =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    let r = send(e.port, "POST", &h, &notification.to_string()).await;
    assert_eq!((r.status, r.body.as_str()), (202, ""));
}

#[tokio::test]
async fn methods_media_types_and_body_size() {
    let e = start(|h| h.body_limit(1024)).await;
    let body = call("greet", json!({}));
    for method in ["GET", "DELETE", "PUT"] {
        let r = send(e.port, method, &mcp_headers(&body), "").await;
        assert_eq!(r.status, 405, "{method}");
        assert_eq!(r.header("allow"), Some("POST"));
    }
    // Accept must list both media types (either alone is 406), in any
    // case, with parameters, over one or several header lines.
    for accept in [
        "application/json",
        "text/event-stream",
        "application/jsonx, text/event-stream",
    ] {
        let mut h = mcp_headers(&body);
        h[1].1 = accept.into();
        assert_eq!(
            send(e.port, "POST", &h, &body.to_string()).await.status,
            406,
            "{accept}"
        );
    }
    let mut h = mcp_headers(&body);
    h[1].1 = "Application/JSON;q=0.9 , TEXT/event-stream; q=0.5".into();
    assert_eq!(
        send(e.port, "POST", &h, &body.to_string()).await.status,
        200
    );
    let mut h = mcp_headers(&body);
    h[1].1 = "text/event-stream".into();
    h.push(("Accept", "application/json".into()));
    assert_eq!(
        send(e.port, "POST", &h, &body.to_string()).await.status,
        200
    );
    let mut h = mcp_headers(&body);
    h[0].1 = "text/plain".into();
    assert_eq!(
        send(e.port, "POST", &h, &body.to_string()).await.status,
        415
    );
    let mut big = call("typed", json!({"pad": "x".repeat(2000)}));
    big["id"] = json!(9);
    assert_eq!(post(&e, &big).await.status, 413);
    // Without a length, the limit holds while reading.
    let mut stream = TcpStream::connect(("127.0.0.1", e.port)).await.unwrap();
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    for _ in 0..4 {
        let _ = stream
            .write_all(format!("{:x}\r\n{}\r\n", 512, "y".repeat(512)).as_bytes())
            .await;
    }
    let _ = stream.write_all(b"0\r\n\r\n").await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    assert_eq!(parse(&raw).status, 413);
}

#[tokio::test]
async fn origins_and_hosts_are_checked_against_dns_rebinding() {
    let e = start(|h| h.allow_origin("https://app.example.com")).await;
    let body = call("greet", json!({}));
    let with = |name: &'static str, value: &str| {
        let mut h = mcp_headers(&body);
        h.push((name, value.to_owned()));
        h
    };
    for (origin, want) in [
        ("http://evil.example.com", 403),
        ("http://localhost:9999", 200),
        ("https://app.example.com", 200),
    ] {
        let r = send(e.port, "POST", &with("Origin", origin), &body.to_string()).await;
        assert_eq!(r.status, want, "{origin}");
    }
    let mut stream = TcpStream::connect(("127.0.0.1", e.port)).await.unwrap();
    let text = request_text("POST", e.port, &mcp_headers(&body), &body.to_string()).replacen(
        &format!("Host: 127.0.0.1:{}", e.port),
        "Host: evil.example.com",
        1,
    );
    stream.write_all(text.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    assert_eq!(parse(&raw).status, 403, "a foreign Host");
}

#[tokio::test]
async fn mcp_headers_are_validated_against_the_body() {
    let e = start(|h| h).await;
    let body = call("greet", json!({}));
    type Edit = Box<dyn Fn(&mut Vec<(&'static str, String)>)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "no MCP-Protocol-Version",
            Box::new(|h| h.retain(|(k, _)| *k != "MCP-Protocol-Version")),
        ),
        (
            "no Mcp-Method",
            Box::new(|h| h.retain(|(k, _)| *k != "Mcp-Method")),
        ),
        (
            "wrong Mcp-Method",
            Box::new(|h| {
                h.iter_mut()
                    .filter(|(k, _)| *k == "Mcp-Method")
                    .for_each(|(_, v)| *v = "tools/list".into());
            }),
        ),
        (
            "no Mcp-Name",
            Box::new(|h| h.retain(|(k, _)| *k != "Mcp-Name")),
        ),
        (
            "wrong Mcp-Name",
            Box::new(|h| {
                h.iter_mut()
                    .filter(|(k, _)| *k == "Mcp-Name")
                    .for_each(|(_, v)| *v = "Greet".into());
            }),
        ),
        (
            "bad base64 Mcp-Name",
            Box::new(|h| {
                h.iter_mut()
                    .filter(|(k, _)| *k == "Mcp-Name")
                    .for_each(|(_, v)| *v = "=?base64?%%%?=".into());
            }),
        ),
    ];
    for (what, edit) in cases {
        let mut h = mcp_headers(&body);
        edit(&mut h);
        let r = send(e.port, "POST", &h, &body.to_string()).await;
        assert_eq!(
            (r.status, r.json()["error"]["code"].clone()),
            (400, json!(-32020)),
            "{what}: {}",
            r.body
        );
    }
    // Encoded and padded values are accepted.
    let mut h = mcp_headers(&body);
    h.iter_mut()
        .filter(|(k, _)| *k == "Mcp-Name")
        .for_each(|(_, v)| *v = "=?base64?Z3JlZXQ=?=".into());
    h.iter_mut()
        .filter(|(k, _)| *k == "Mcp-Method")
        .for_each(|(_, v)| *v = " tools/call ".into());
    assert_eq!(
        send(e.port, "POST", &h, &body.to_string()).await.status,
        200
    );
}

#[tokio::test]
async fn mcp_param_headers_mirror_annotated_arguments() {
    async fn region(tern_server::Args(a): tern_server::Args<Value>) -> String {
        a.to_string()
    }
    let e = start(|h| h).await;
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "replicas": {"type": "integer", "x-mcp-header": "Replicas"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}});
    e.server
        .add_tool(
            ToolDef::new("place", "Places things", region)
                .input_schema(schema.as_object().unwrap().clone()),
        )
        .unwrap();
    let body = call(
        "place",
        json!({"region": "eu-west-1", "replicas": 3, "dry": false}),
    );
    let with = |extra: &[(&'static str, &str)]| {
        let mut h = mcp_headers(&body);
        h.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        h
    };
    let good = [
        ("Mcp-Param-Region", "eu-west-1"),
        ("Mcp-Param-Replicas", "3"),
        ("mcp-param-dry-run", "false"),
    ];
    assert_eq!(
        send(e.port, "POST", &with(&good), &body.to_string())
            .await
            .status,
        200
    );
    let encoded = [
        ("Mcp-Param-Region", "=?base64?ZXUtd2VzdC0x?="),
        ("Mcp-Param-Replicas", "3"),
        ("Mcp-Param-Dry-Run", "false"),
    ];
    assert_eq!(
        send(e.port, "POST", &with(&encoded), &body.to_string())
            .await
            .status,
        200
    );
    for bad in [
        vec![("Mcp-Param-Replicas", "3"), ("Mcp-Param-Dry-Run", "false")],
        vec![
            ("Mcp-Param-Region", "us-east-1"),
            ("Mcp-Param-Replicas", "3"),
            ("Mcp-Param-Dry-Run", "false"),
        ],
        vec![
            ("Mcp-Param-Region", "eu-west-1"),
            ("Mcp-Param-Replicas", "4"),
            ("Mcp-Param-Dry-Run", "false"),
        ],
        vec![
            ("Mcp-Param-Region", "eu-west-1"),
            ("Mcp-Param-Replicas", "3"),
            ("Mcp-Param-Dry-Run", "False"),
        ],
    ] {
        let r = send(e.port, "POST", &with(&bad), &body.to_string()).await;
        assert_eq!(
            (r.status, r.json()["error"]["code"].clone()),
            (400, json!(-32020)),
            "{bad:?}"
        );
    }
}

#[tokio::test]
async fn progress_streams_as_sse_and_ends_with_the_result() {
    let e = start(|h| h).await;
    let mut body = call("progress", json!({}));
    body["params"]["_meta"]["progressToken"] = json!("p1");
    let r = post(&e, &body).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("x-accel-buffering"), Some("no"));
    let events = r.events();
    let last = events.last().unwrap();
    assert_eq!(
        last["result"]["resultType"], "complete",
        "resultType on the SSE path too"
    );
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|n| n["method"] == "notifications/progress")
    );
    crate::schema::assert_valid("CallToolResult", &last["result"]);
    // A request whose result comes before any notification is answered JSON.
    let mut quick = call("greet", json!({}));
    quick["params"]["_meta"]["progressToken"] = json!("p2");
    let r = post(&e, &quick).await;
    assert_eq!(r.header("content-type"), Some("application/json"));
}

#[tokio::test]
async fn a_client_that_disconnects_cancels_its_request() {
    let e = start(|h| h).await;
    let mut body = call("slow", json!({}));
    body["params"]["_meta"]["progressToken"] = json!("s");
    let mut stream = TcpStream::connect(("127.0.0.1", e.port)).await.unwrap();
    stream
        .write_all(request_text("POST", e.port, &mcp_headers(&body), &body.to_string()).as_bytes())
        .await
        .unwrap();
    let mut first = vec![0u8; 512];
    let n = stream.read(&mut first).await.unwrap();
    assert!(String::from_utf8_lossy(&first[..n]).contains("text/event-stream"));
    drop(stream);
    e.counters.cancel_seen.notified().await;
    assert_eq!(
        e.counters.cancelled_seen.load(Ordering::SeqCst),
        1,
        "ctx.cancelled() fired"
    );
}

#[tokio::test]
async fn state_minted_for_one_principal_is_refused_for_another() {
    let e = start(|h| {
        h.authenticate(Bearer(|token: &str| match token {
            "alice-token" => Some(Principal::new("alice")),
            "bob-token" => Some(Principal::new("bob")),
            _ => None,
        }))
    })
    .await;
    let as_user = |token: &str, body: &Value| {
        let mut h = mcp_headers(body);
        h.push(("Authorization", format!("Bearer {token}")));
        h
    };
    let body = call("greet", json!({}));
    let r = send(e.port, "POST", &mcp_headers(&body), &body.to_string()).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("www-authenticate"), Some("Bearer"));
    assert_eq!(
        send(
            e.port,
            "POST",
            &as_user("mallory", &body),
            &body.to_string()
        )
        .await
        .status,
        401
    );
    let r1 = send(
        e.port,
        "POST",
        &as_user("alice-token", &body),
        &body.to_string(),
    )
    .await
    .json();
    let mut retry = call("greet", json!({}));
    retry["params"]["requestState"] = r1["result"]["requestState"].clone();
    retry["params"]["inputResponses"] =
        json!({"user_name": {"action": "accept", "content": {"name": "Alice"}}});
    let bob = send(
        e.port,
        "POST",
        &as_user("bob-token", &retry),
        &retry.to_string(),
    )
    .await
    .json();
    assert_eq!(bob["error"]["code"], -32602, "{bob}");
    let alice = send(
        e.port,
        "POST",
        &as_user("alice-token", &retry),
        &retry.to_string(),
    )
    .await
    .json();
    assert_eq!(alice["result"]["content"][0]["text"], "Hello, Alice!");
}

/// Reads from `stream` into `buf` until it contains `needle` (bounded: 10 s).
async fn read_until(stream: &mut TcpStream, buf: &mut String, needle: &str) {
    tokio::time::timeout(Duration::from_secs(10), async {
        let mut chunk = [0u8; 4096];
        while !buf.contains(needle) {
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "stream ended before {needle:?}: {buf}");
            buf.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in {buf}"));
}

#[tokio::test]
async fn subscriptions_acknowledge_filter_tag_keep_alive_and_close() {
    let e = start(|h| h.keep_alive(Duration::from_millis(30))).await;
    let listen = json!({"jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen", "params": {
        "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["res://ask"]}, "_meta": meta()}});
    let mut stream = TcpStream::connect(("127.0.0.1", e.port)).await.unwrap();
    stream
        .write_all(
            request_text("POST", e.port, &mcp_headers(&listen), &listen.to_string()).as_bytes(),
        )
        .await
        .unwrap();
    let mut buf = String::new();
    read_until(&mut stream, &mut buf, "subscriptions/acknowledged").await;
    assert!(
        buf.contains("text/event-stream")
            && buf.to_ascii_lowercase().contains("x-accel-buffering: no")
    );
    // Changes: one asked for, two not.
    e.server.changes().prompts_changed();
    e.server.changes().resource_updated("res://other");
    async fn extra() -> &'static str {
        "x"
    }
    e.server
        .add_tool(ToolDef::new("extra", "Added at run time", extra))
        .unwrap();
    e.server.changes().resource_updated("res://ask");
    read_until(&mut stream, &mut buf, "notifications/resources/updated").await;
    read_until(&mut stream, &mut buf, ": keep-alive").await;
    e.server.shutdown();
    read_until(&mut stream, &mut buf, "\"result\"").await;
    let mut rest = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut rest)).await;
    buf.push_str(&String::from_utf8_lossy(&rest));
    let reply = parse(buf.as_bytes());
    let events = reply.events();
    let ack = &events[0];
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "the ack comes first"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["res://ask"]}),
        "the honoured subset"
    );
    let methods: Vec<&str> = events.iter().filter_map(|e| e["method"].as_str()).collect();
    assert_eq!(
        methods,
        [
            "notifications/subscriptions/acknowledged",
            "notifications/tools/list_changed",
            "notifications/resources/updated"
        ]
    );
    for n in events.iter().filter(|e| e.get("method").is_some()) {
        assert_eq!(
            n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
            "listen-1"
        );
    }
    let last = events.last().unwrap();
    assert_eq!(last["id"], "listen-1");
    assert_eq!(
        last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    crate::schema::assert_valid("SubscriptionsListenResult", &last["result"]);
    let tools = post(
        &e,
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": meta()}}),
    )
    .await
    .json();
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "extra")
    );
}

/// The network breaks during a guarded leg, after its effect: the run goes
/// on without its client, and the retry gets its outcome (one effect).
#[tokio::test]
async fn a_guarded_leg_survives_its_client_disconnecting() {
    let e = start(|h| h).await;
    let first = post(&e, &call("transfer", json!({}))).await.json();
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let mut retry = call("transfer", json!({}));
    retry["params"]["inputResponses"] =
        json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    retry["params"]["requestState"] = json!(state);
    let mut streaming = retry.clone();
    streaming["params"]["_meta"]["progressToken"] = json!("audit");
    let mut stream = TcpStream::connect(("127.0.0.1", e.port)).await.unwrap();
    stream
        .write_all(
            request_text(
                "POST",
                e.port,
                &mcp_headers(&streaming),
                &streaming.to_string(),
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    e.counters.transfer_started.notified().await;
    let mut head = vec![0u8; 512];
    let n = stream.read(&mut head).await.unwrap();
    assert!(String::from_utf8_lossy(&head[..n]).contains("text/event-stream"));
    drop(stream);
    e.counters.transfer_done.notified().await;
    let again = post(&e, &retry).await;
    assert_eq!(again.status, 200);
    assert_eq!(
        again.json()["result"]["content"][0]["text"],
        "transfer #1, audited"
    );
    assert_eq!(e.counters.transfers.load(Ordering::SeqCst), 1);
}

/// The header checks cannot be bypassed by a body two readers read
/// differently: a repeated member name is refused wherever it is.
#[tokio::test]
async fn a_repeated_member_cannot_slip_past_the_header_checks() {
    let e = start(|h| h).await;
    let m = meta().to_string();
    let cases = [
        // taskId twice, and a Mcp-Name naming another tool.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"transfer","taskId":1,"taskId":2,"arguments":{{}},"_meta":{m}}}}}"#
        ),
        // The tool's name twice.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"greet","name":"transfer","arguments":{{}},"_meta":{m}}}}}"#
        ),
        // A doubled uri on a read.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{{"uri":"res://ask","uri":"res://guarded","_meta":{m}}}}}"#
        ),
        // Inside arguments, too.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"debug_ctx","arguments":{{"to":"a","to":"b"}},"_meta":{m}}}}}"#
        ),
        // A doubled uri on prompts/get (a member it does not read), and
        // its name twice.
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{{"name":"guarded_prompt","uri":"res://ask","uri":"res://guarded","_meta":{m}}}}}"#
        ),
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{{"name":"greet","name":"guarded_prompt","_meta":{m}}}}}"#
        ),
    ];
    // With the right version header and with a lying one (the issue's
    // 1999-01-01): refused either way.
    for (body, version) in cases
        .iter()
        .flat_map(|b| [(b, "2026-07-28"), (b, "1999-01-01")])
    {
        for name in ["greet", "transfer", "guarded_prompt", ""] {
            let mut headers = vec![
                ("Content-Type", "application/json".to_owned()),
                ("Accept", "application/json, text/event-stream".to_owned()),
                ("MCP-Protocol-Version", version.to_owned()),
                (
                    "Mcp-Method",
                    serde_json::from_str::<Value>(
                        &body
                            .replace(r#""taskId":1,"#, "")
                            .replace(r#""name":"greet","#, "")
                            .replace(r#""uri":"res://ask","#, "")
                            .replace(r#""to":"a","#, ""),
                    )
                    .unwrap()["method"]
                        .as_str()
                        .unwrap()
                        .to_owned(),
                ),
            ];
            if !name.is_empty() {
                headers.push(("Mcp-Name", name.to_owned()));
            }
            let r = send(e.port, "POST", &headers, body).await;
            assert_eq!(r.status, 400, "{body} with Mcp-Name {name:?}: {}", r.body);
            let error = &r.json()["error"];
            assert_eq!(error["code"], -32602, "{body}: {}", r.body);
            assert!(
                error["message"].as_str().unwrap().contains("appears twice"),
                "{}",
                r.body
            );
        }
    }
    assert_eq!(e.counters.transfers.load(Ordering::SeqCst), 0);
    assert_eq!(e.counters.prompt_runs.load(Ordering::SeqCst), 0);
}

/// Params nested past the server's JSON limit (64 levels by default) are
/// refused `-32602` before any handler reads them, and a long array (a
/// legitimate tool may take 100,000 elements) is not.
#[tokio::test]
async fn params_past_the_json_limits_are_refused_and_long_arrays_are_not() {
    let e = start(|h| h).await;
    let m = meta().to_string();
    let headers = |name: &str| {
        vec![
            ("Content-Type", "application/json".to_owned()),
            ("Accept", "application/json, text/event-stream".to_owned()),
            ("MCP-Protocol-Version", "2026-07-28".to_owned()),
            ("Mcp-Method", "tools/call".to_owned()),
            ("Mcp-Name", name.to_owned()),
        ]
    };
    let deep = format!("{}1{}", "[".repeat(70), "]".repeat(70));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"debug_ctx","arguments":{{"x":{deep}}},"_meta":{m}}}}}"#
    );
    let r = send(e.port, "POST", &headers("debug_ctx"), &body).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let error = &r.json()["error"];
    assert_eq!(error["code"], -32602, "{}", r.body);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("deeper than 64"),
        "{}",
        r.body
    );
    let long = format!("[{}]", vec!["7"; 100_000].join(","));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"debug_ctx","arguments":{{"x":{long}}},"_meta":{m}}}}}"#
    );
    let r = send(e.port, "POST", &headers("debug_ctx"), &body).await;
    assert_eq!(
        r.status,
        200,
        "a 100,000-element array: {}",
        &r.body[..r.body.len().min(300)]
    );
}

/// Host and Origin are parsed as authorities and compared exactly: names
/// that only start like a loopback literal, or hide one behind userinfo,
/// are DNS-rebinding hosts like any other (403). Before, `[::1].evil.example`
/// read as `::1` and passed.
#[tokio::test]
async fn lookalike_loopback_hosts_and_origins_are_refused() {
    let e = start(|h| h).await;
    let body = call("greet", json!({}));
    let text = body.to_string();
    let headers = mcp_headers(&body)
        .iter()
        .fold(String::new(), |mut out, (k, v)| {
            use std::fmt::Write as _;
            let _ = write!(out, "{k}: {v}\r\n");
            out
        });
    let exchange = |host: String, origin: Option<&'static str>| {
        let (headers, text) = (headers.clone(), text.clone());
        async move {
            let origin = origin
                .map(|o| format!("Origin: {o}\r\n"))
                .unwrap_or_default();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{origin}Connection: close\r\nContent-Length: {}\r\n{headers}\r\n{text}",
                text.len()
            );
            let mut stream = TcpStream::connect(("127.0.0.1", e.port)).await.unwrap();
            stream.write_all(request.as_bytes()).await.unwrap();
            let mut raw = Vec::new();
            stream.read_to_end(&mut raw).await.unwrap();
            parse(&raw).status
        }
    };
    for host in [
        "[::1].evil.example",
        "[::1]evil.example",
        "127.0.0.1@evil.example",
        "localhost.evil.example:80",
    ] {
        assert_eq!(exchange(host.to_owned(), None).await, 403, "Host {host}");
    }
    for origin in [
        "http://[::1].evil.example",
        "http://127.0.0.1@evil.example",
        "http://localhost/x",
    ] {
        assert_eq!(
            exchange(format!("127.0.0.1:{}", e.port), Some(origin)).await,
            403,
            "Origin {origin}"
        );
    }
    // The real loopback names still pass.
    assert_eq!(
        exchange(format!("[::1]:{}", e.port), Some("http://localhost:3000")).await,
        200
    );
}

#[tokio::test]
async fn a_lying_protocol_version_header_is_refused_on_every_method() {
    let e = start(|h| h).await;
    for body in [
        json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "guarded_prompt", "_meta": meta()}}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "res://guarded", "_meta": meta()}}),
        call("transfer", json!({})),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}}),
    ] {
        let mut headers = mcp_headers(&body);
        headers.retain(|(k, _)| *k != "MCP-Protocol-Version");
        headers.push(("MCP-Protocol-Version", "1999-01-01".to_owned()));
        let r = send(e.port, "POST", &headers, &body.to_string()).await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
        assert_eq!(r.json()["error"]["code"], -32020, "{body}: {}", r.body);
    }
    assert_eq!(e.counters.prompt_runs.load(Ordering::SeqCst), 0);
    assert_eq!(e.counters.read_runs.load(Ordering::SeqCst), 0);
    assert_eq!(e.counters.transfers.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn repeated_or_missing_host_origin_and_mcp_headers_are_refused() {
    let e = start(|h| h).await;
    let body = call("greet", json!({}));
    let base = mcp_headers(&body);
    let with = |extra: &[(&'static str, &str)]| {
        let mut h = base.clone();
        h.extend(extra.iter().map(|(k, v)| (*k, (*v).to_owned())));
        h
    };
    let text = body.to_string();
    let twice_name = send(e.port, "POST", &with(&[("Mcp-Name", "transfer")]), &text).await;
    assert_eq!(
        (
            twice_name.status,
            twice_name.json()["error"]["code"].clone()
        ),
        (400, json!(-32020))
    );
    let twice_method = send(
        e.port,
        "POST",
        &with(&[("Mcp-Method", "tools/list")]),
        &text,
    )
    .await;
    assert_eq!(
        (
            twice_method.status,
            twice_method.json()["error"]["code"].clone()
        ),
        (400, json!(-32020))
    );
    let twice_host = send(
        e.port,
        "POST",
        &with(&[("Host", "evil.example.com")]),
        &text,
    )
    .await;
    assert_eq!(twice_host.status, 400);
    let twice_origin = send(
        e.port,
        "POST",
        &with(&[
            ("Origin", "http://localhost"),
            ("Origin", "http://evil.example.com"),
        ]),
        &text,
    )
    .await;
    assert_eq!(twice_origin.status, 403);
    // HTTP/1.0 without Host: refused, not served.
    let mut raw = format!("POST /mcp HTTP/1.0\r\nContent-Length: {}\r\n", text.len());
    for (k, v) in &base {
        raw.push_str(k);
        raw.push_str(": ");
        raw.push_str(v);
        raw.push_str("\r\n");
    }
    raw.push_str("\r\n");
    raw.push_str(&text);
    let mut stream = TcpStream::connect(("127.0.0.1", e.port)).await.unwrap();
    stream.write_all(raw.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    assert_eq!(
        parse(&answer).status,
        400,
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

#[tokio::test]
async fn attacker_text_is_not_echoed_at_full_size() {
    let e = start(|h| h).await;
    let method = "m".repeat(3 << 20);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": meta()}});
    let mut headers = mcp_headers(&json!({}));
    headers.push(("Mcp-Method", "x".repeat(2000)));
    let r = send(e.port, "POST", &headers, &body.to_string()).await;
    assert_eq!(r.status, 400, "{}", &r.body[..r.body.len().min(300)]);
    assert!(r.body.len() < 1000, "{} bytes back", r.body.len());
}

/// Handlers see the access token only when the resource server is told to
/// show it; the raw token only when told that too.
#[tokio::test]
async fn handlers_see_the_token_only_when_asked() {
    let cases = [
        (0, "no token"),
        (
            1,
            "https://as.example alice [mcp:basic mcp:write] tenant=acme raw=-",
        ),
        (
            2,
            "https://as.example alice [mcp:basic mcp:write] tenant=acme raw=write",
        ),
    ];
    for (exposure, expected) in cases {
        let counters = Arc::new(Counters::default());
        let server = builder(&counters, ManualClock::new())
            .tool(ToolDef::new(
                "whoami",
                "The caller's token",
                crate::fixture::whoami,
            ))
            .build()
            .unwrap();
        let resource = tern_server::auth::ResourceServer::new(
            "http://127.0.0.1/mcp",
            "https://as.example",
            crate::fixture::TwoTokens,
        );
        let resource = match exposure {
            0 => resource,
            1 => resource.token_in_context(),
            _ => resource.raw_token_in_context(),
        };
        let e = start_server(server, |h| h.oauth(resource)).await;
        let body = call("whoami", json!({}));
        let mut headers = mcp_headers(&body);
        headers.push(("Authorization", "Bearer write".to_owned()));
        let reply = send(e.port, "POST", &headers, &body.to_string()).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(
            reply.json()["result"]["content"][0]["text"],
            expected,
            "{}",
            reply.body
        );
    }
}

/// A durable task whose handler read the access token is not recoverable
/// (the raw token is never kept): its journal says so, and a lapsed lease
/// ends it `failed` as a task that is not durable.
#[tokio::test]
async fn a_durable_handler_that_read_the_access_token_is_not_recoverable() {
    use tern_server::task::TaskStore as _;
    let counters = Arc::new(Counters::default());
    let store = Arc::new(tern_server::task::MemoryTaskStore::new());
    let server = builder(&counters, ManualClock::new())
        .task_store(Arc::clone(&store) as Arc<dyn tern_server::task::TaskStore>)
        .tool(
            ToolDef::new("reads_token", "", |ctx: tern_server::Ctx| async move {
                let who = ctx.access_token().map(|t| t.subject.clone());
                ctx.into_task().await;
                // Still running when the test reads its record.
                ctx.cancelled().await;
                Ok::<_, tern_server::ToolError>(who.unwrap_or_default())
            })
            .durable("v1"),
        )
        .build()
        .unwrap();
    let resource = tern_server::auth::ResourceServer::new(
        "http://127.0.0.1/mcp",
        "https://as.example",
        crate::fixture::TwoTokens,
    )
    .token_in_context();
    let e = start_server(server, |h| h.oauth(resource)).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "reads_token", "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}}});
    let mut headers = mcp_headers(&body);
    headers.push(("Authorization", "Bearer write".to_owned()));
    let reply = send(e.port, "POST", &headers, &body.to_string()).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let id = reply.json()["result"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let record = store.load(&id, 0).await.unwrap().unwrap();
    assert_eq!(record.status, tern_protocol::task::TaskStatus::Working);
    let lapsed = record.lease.as_ref().unwrap().expires_at + 1;
    let journal = record
        .journal
        .clone()
        .expect("a durable task keeps a journal");
    assert!(
        journal
            .unrecoverable
            .as_deref()
            .is_some_and(|w| w.contains("access token")),
        "{journal:?}"
    );
    assert!(
        !record.recoverable(),
        "a task that read the token was left claimable"
    );
    let lease = tern_server::task::Lease::new("other", lapsed + 30_000);
    assert!(store.claim_lapsed(lapsed, lease).await.unwrap().is_none());
}

/// An error message fit to send back: short, no serde position, no Rust
/// type name or path.
fn assert_clean(what: &str, r: &Reply) {
    assert!(
        r.body.len() < 1000,
        "{what}: {} bytes back: {}",
        r.body.len(),
        &r.body[..r.body.len().min(300)]
    );
    for leak in [
        "line ", "column", "struct", "enum ", "::", "Params", "Request",
    ] {
        assert!(!r.body.contains(leak), "{what}: {leak:?} in {}", r.body);
    }
}

#[tokio::test]
async fn error_messages_are_short_and_free_of_positions_and_type_names() {
    let e = start(|h| h).await;
    let big = "s".repeat(3 << 20);
    // A wrong-type string argument (the tool wants an integer): a tool error.
    let r = post(&e, &call("typed", json!({"count": big}))).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["isError"], true, "{}", r.body);
    assert_clean("wrong-type argument", &r);
    // Arguments that are a string, not an object: the params decode.
    let body = call("typed", json!(big));
    let r = post(&e, &body).await;
    assert_eq!(r.json()["error"]["code"], -32602);
    assert_clean("arguments not an object", &r);
    // A wrong-type member the decoder reads (the tool's name).
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": {"x": big}, "_meta": meta()}});
    let r = send(e.port, "POST", &mcp_headers(&body), &body.to_string()).await;
    assert_eq!(
        r.json()["error"]["code"],
        -32602,
        "{}",
        &r.body[..r.body.len().min(300)]
    );
    assert_clean("name not a string", &r);
    // An unknown tool named as long as the header limit lets Mcp-Name be.
    let r = post(&e, &call(&"t".repeat(300 << 10), json!({}))).await;
    assert_eq!(r.json()["error"]["code"], -32602);
    assert_clean("unknown tool", &r);
    // Params that are a string: serde would name the Rust type it wanted.
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": big});
    let r = send(e.port, "POST", &mcp_headers(&body), &body.to_string()).await;
    assert_eq!(r.status, 400);
    assert_clean("params a string", &r);
    // An unsupported protocol version as long as the header limit lets
    // MCP-Protocol-Version be (header and body agree): -32022 names what
    // is supported, and the requested one only cut short.
    let version = "9".repeat(300 << 10);
    let mut m = meta();
    m["io.modelcontextprotocol/protocolVersion"] = json!(version);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": m}});
    let mut headers = mcp_headers(&body);
    headers.retain(|(k, _)| *k != "MCP-Protocol-Version");
    headers.push(("MCP-Protocol-Version", version));
    let r = send(e.port, "POST", &headers, &body.to_string()).await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json()["error"]["code"],
        -32022,
        "{}",
        &r.body[..r.body.len().min(300)]
    );
    assert_clean("long version", &r);
    // An Mcp-Param value as large as the header limit lets through, and a
    // 3 MiB argument under a short mismatching header: -32020, short.
    async fn region(tern_server::Args(a): tern_server::Args<Value>) -> String {
        a.to_string()
    }
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"}}});
    e.server
        .add_tool(
            ToolDef::new("place", "Places things", region)
                .input_schema(schema.as_object().unwrap().clone()),
        )
        .unwrap();
    for (argument, header) in [
        ("eu-west-1".to_owned(), "r".repeat(300 << 10)),
        (big.clone(), "eu-west-1".to_owned()),
    ] {
        let body = call("place", json!({"region": argument}));
        let mut headers = mcp_headers(&body);
        headers.push(("Mcp-Param-Region", header));
        let r = send(e.port, "POST", &headers, &body.to_string()).await;
        assert_eq!(
            r.json()["error"]["code"],
            -32020,
            "{}",
            &r.body[..r.body.len().min(300)]
        );
        assert_clean("Mcp-Param mismatch", &r);
    }
}
