//! The stream and principal limits, each caused from outside over loopback
//! TCP: URIs per listen (only known ones, none twice), listen streams, SSE
//! streams, one principal's requests in flight (another principal is not
//! affected), and a reader that stops reading (dropped after the write
//! timeout, its request cancelled).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tern_server::transport::http::{Bearer, Http, ServeOptions, serve_with};
use tern_server::{Ctx, Principal, ServerBuilder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use crate::fixture::{Counters, TestClock, builder};

struct Running {
    port: u16,
    _stop: oneshot::Sender<()>,
    counters: Arc<Counters>,
}

async fn start(
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
    http: impl FnOnce(Http) -> Http,
    options: ServeOptions,
) -> Running {
    start_as(false, configure, http, options).await
}

/// [`start`], with no authentication when `anonymous` (callers then count
/// by their address).
async fn start_as(
    anonymous: bool,
    configure: impl FnOnce(ServerBuilder) -> ServerBuilder,
    http: impl FnOnce(Http) -> Http,
    options: ServeOptions,
) -> Running {
    let counters = Arc::new(Counters::default());
    let server = configure(builder(&counters, TestClock::new()))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (stop, stopped) = oneshot::channel::<()>();
    let endpoint = if anonymous {
        Http::new(server)
    } else {
        Http::new(server).authenticate(Bearer(|token: &str| match token {
            "alice" => Some(Principal::new("alice")),
            "bob" => Some(Principal::new("bob")),
            "carol" => Some(Principal::new("carol")),
            _ => None,
        }))
    };
    tokio::spawn(serve_with(
        listener,
        http(endpoint),
        "/mcp",
        options,
        async move {
            let _ = stopped.await;
        },
    ));
    Running {
        port,
        _stop: stop,
        counters,
    }
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}})
}

fn listen(id: u64, uris: &[String]) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": true, "resourceSubscriptions": uris}, "_meta": meta()}})
}

fn slow(id: u64) -> Value {
    let mut m = meta();
    m["progressToken"] = json!(id);
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": m}})
}

/// Sends `body` as `token` (default alice) on a new connection.
async fn post(port: u16, body: &Value, token: Option<&str>) -> TcpStream {
    post_from([127, 0, 0, 1], port, body, Some(token.unwrap_or("alice"))).await
}

/// Sends `body` from the loopback address `from` (any of 127.0.0.0/8), as
/// `token` or anonymously.
async fn post_from(from: [u8; 4], port: u16, body: &Value, token: Option<&str>) -> TcpStream {
    let body = body.to_string();
    let v: Value = serde_json::from_str(&body).unwrap();
    let name = v["params"]["name"]
        .as_str()
        .or_else(|| v["params"]["taskId"].as_str())
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let text = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: {}\r\n{name}{auth}Content-Length: {}\r\n\r\n{body}",
        v["method"].as_str().unwrap(),
        body.len()
    );
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    let mut stream = socket
        .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap();
    stream.write_all(text.as_bytes()).await.unwrap();
    stream
}

/// Reads until the response head and its first body bytes are in (an SSE
/// stream stays open: this does not wait for its end).
async fn head(stream: &mut TcpStream) -> String {
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(20), stream.read(&mut buf))
            .await
            .expect("a response")
            .unwrap();
        raw.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&raw).into_owned();
        if n == 0
            || text
                .split_once("\r\n\r\n")
                .is_some_and(|(_, b)| !b.is_empty())
        {
            return text;
        }
    }
}

fn status(response: &str) -> u16 {
    response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn body_json(response: &str) -> Value {
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let body = body.strip_prefix("data: ").unwrap_or(body);
    serde_json::from_str(body.lines().next().unwrap_or("")).unwrap_or(Value::Null)
}

#[tokio::test]
async fn listen_uris_must_be_known_unique_and_few() {
    let r = start(|b| b.max_listen_uris(3), |h| h, ServeOptions::default()).await;
    let known = |s: &str| s.to_string();
    // Known: a resource and a URI a template matches.
    let mut ok = post(
        r.port,
        &listen(1, &[known("res://ask"), known("res://item/7")]),
        None,
    )
    .await;
    let ack = head(&mut ok).await;
    assert_eq!(status(&ack), 200, "{ack}");
    assert!(
        ack.contains("notifications/subscriptions/acknowledged"),
        "{ack}"
    );
    for (uris, says) in [
        (
            vec![known("res://ask"), known("res://nope-secret-text")],
            "resourceSubscriptions[1] names no resource",
        ),
        (
            vec![known("res://ask"), known("res://ask")],
            "resourceSubscriptions[1] repeats",
        ),
        (
            vec![
                known("res://item/1"),
                known("res://item/2"),
                known("res://item/3"),
                known("res://item/4"),
            ],
            "at most 3",
        ),
    ] {
        let mut s = post(r.port, &listen(2, &uris), None).await;
        let response = head(&mut s).await;
        let v = body_json(&response);
        assert_eq!(v["error"]["code"], -32602, "{response}");
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
        assert!(
            !response.contains("nope-secret-text"),
            "the URI is not echoed"
        );
    }
}

#[tokio::test]
async fn listen_streams_over_the_cap_get_503_with_retry_after() {
    let r = start(|b| b.max_listens(2), |h| h, ServeOptions::default()).await;
    let mut open = Vec::new();
    for id in 0..2 {
        let mut s = post(r.port, &listen(id, &[]), None).await;
        assert_eq!(status(&head(&mut s).await), 200);
        open.push(s);
    }
    let mut third = post(r.port, &listen(9, &[]), None).await;
    let response = head(&mut third).await;
    assert_eq!(status(&response), 503, "{response}");
    assert!(
        response.to_ascii_lowercase().contains("retry-after: 1"),
        "{response}"
    );
    assert_eq!(body_json(&response)["error"]["data"]["retryAfterMs"], 1000);
    drop(open);
}

/// Opens `body(id)` streams from `from` as `token` until one is refused
/// (at most `bound`), keeping the open ones in `open`; how many opened.
async fn fill(
    port: u16,
    from: [u8; 4],
    token: Option<&str>,
    bound: u64,
    body: impl Fn(u64) -> Value,
    open: &mut Vec<TcpStream>,
) -> u64 {
    for id in 0..bound {
        let mut s = post_from(from, port, &body(id), token).await;
        let response = head(&mut s).await;
        if status(&response) != 200 {
            assert_eq!(status(&response), 503, "{response}");
            assert_eq!(body_json(&response)["error"]["code"], -32603, "{response}");
            return id;
        }
        assert!(response.contains("text/event-stream"), "{response}");
        open.push(s);
    }
    bound
}

#[tokio::test]
async fn one_anonymous_peer_filling_its_listen_share_leaves_listens_for_another() {
    // The defaults: 64 listens server-wide, 64 requests in flight per peer
    // address. One peer alone could hold every listen; its share (16)
    // leaves the rest to others.
    let r = start_as(true, |b| b, |h| h, ServeOptions::default()).await;
    let mut open = Vec::new();
    let took = fill(
        r.port,
        [127, 0, 0, 1],
        None,
        80,
        |id| listen(id, &[]),
        &mut open,
    )
    .await;
    assert_eq!(
        took,
        tern_server::builder::DEFAULT_MAX_LISTENS_PER_CALLER as u64,
        "one peer holds its share of listens, no more"
    );
    let mut other = post_from([127, 0, 0, 2], r.port, &listen(99, &[]), None).await;
    let response = head(&mut other).await;
    assert_eq!(
        status(&response),
        200,
        "another peer still listens: {response}"
    );
    assert!(
        response.contains("notifications/subscriptions/acknowledged"),
        "{response}"
    );
    drop(open);
}

#[tokio::test]
async fn principals_filling_their_listen_shares_leave_listens_for_another() {
    // 32 requests in flight per principal: before the per-caller share, two
    // principals held all 64 listens and a third was refused.
    let r = start(|b| b, |h| h, ServeOptions::default()).await;
    let mut open = Vec::new();
    for who in ["alice", "bob"] {
        let took = fill(
            r.port,
            [127, 0, 0, 1],
            Some(who),
            80,
            |id| listen(id, &[]),
            &mut open,
        )
        .await;
        assert_eq!(
            took,
            tern_server::builder::DEFAULT_MAX_LISTENS_PER_CALLER as u64,
            "{who} holds her share of listens, no more"
        );
    }
    let mut carol = post_from([127, 0, 0, 1], r.port, &listen(99, &[]), Some("carol")).await;
    let response = head(&mut carol).await;
    assert_eq!(status(&response), 200, "carol still listens: {response}");
    drop(open);
}

#[tokio::test]
async fn peers_filling_their_sse_shares_leave_streams_for_another() {
    // 128 SSE responses server-wide, 64 requests in flight per peer: before
    // the per-caller share two peers held every stream.
    let r = start_as(true, |b| b, |h| h, ServeOptions::default()).await;
    let mut open = Vec::new();
    for from in [[127, 0, 0, 1], [127, 0, 0, 2]] {
        let took = fill(r.port, from, None, 80, slow, &mut open).await;
        assert_eq!(
            took,
            tern_server::transport::http::DEFAULT_MAX_STREAMS_PER_CALLER as u64,
            "a peer holds its share of SSE responses, no more"
        );
    }
    let mut third = post_from([127, 0, 0, 3], r.port, &slow(99), None).await;
    let response = head(&mut third).await;
    assert_eq!(
        status(&response),
        200,
        "a third peer still streams: {response}"
    );
    assert!(response.contains("text/event-stream"), "{response}");
    drop(open);
}

#[tokio::test]
async fn sse_streams_over_the_cap_get_503() {
    let r = start(|b| b, |h| h.max_streams(1), ServeOptions::default()).await;
    let mut first = post(r.port, &slow(1), None).await;
    let response = head(&mut first).await;
    assert!(response.contains("text/event-stream"), "{response}");
    let mut second = post(r.port, &slow(2), None).await;
    let response = head(&mut second).await;
    assert_eq!(status(&response), 503, "{response}");
    assert_eq!(body_json(&response)["error"]["code"], -32603);
    // A plain call (no stream) still goes through.
    let list =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": meta()}});
    let mut plain = post(r.port, &list, None).await;
    assert_eq!(status(&head(&mut plain).await), 200);
}

#[tokio::test]
async fn one_principal_filling_its_share_does_not_refuse_another() {
    let r = start(
        |b| b,
        |h| h.max_in_flight_per_principal(2),
        ServeOptions::default(),
    )
    .await;
    let mut alice = Vec::new();
    for id in 0..2 {
        let mut s = post(r.port, &slow(id), Some("alice")).await;
        assert!(head(&mut s).await.contains("text/event-stream"));
        alice.push(s);
    }
    let mut more = post(r.port, &slow(5), Some("alice")).await;
    let response = head(&mut more).await;
    assert_eq!(status(&response), 503, "{response}");
    assert!(
        response.to_ascii_lowercase().contains("retry-after"),
        "{response}"
    );
    let mut bob = post(r.port, &slow(6), Some("bob")).await;
    let response = head(&mut bob).await;
    assert_eq!(status(&response), 200, "bob is served: {response}");
    assert!(response.contains("text/event-stream"));
}

#[tokio::test]
async fn a_reader_that_stops_reading_is_dropped_and_its_request_cancelled() {
    // The `flood` tool writes large progress messages until it is
    // cancelled; the client never reads. The socket buffers fill, the
    // write stalls past the timeout, the connection is dropped, and the
    // handler sees the cancellation.
    async fn flood(ctx: Ctx, counters: Arc<Counters>) -> String {
        let watcher = ctx.clone();
        tokio::spawn(async move {
            watcher.cancelled().await;
            counters.cancel_seen.notify_one();
        });
        let big = "x".repeat(64 * 1024);
        // About a minute of work at most: far past the write timeout.
        for i in 0..60_000u32 {
            ctx.progress(f64::from(i), None, Some(&big));
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        "never read".into()
    }
    let counters = Arc::new(Counters::default());
    let c = Arc::clone(&counters);
    let r = start(
        move |b| {
            b.tool(tern_server::ToolDef::new(
                "flood",
                "Floods",
                move |ctx: Ctx| flood(ctx, Arc::clone(&c)),
            ))
            .progress_interval(Duration::ZERO)
        },
        |h| h.stream_buffer(4),
        ServeOptions::default().write_timeout(Duration::from_millis(300)),
    )
    .await;
    let mut m = meta();
    m["progressToken"] = json!("f");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "flood", "arguments": {}, "_meta": m}});
    let stalled = post(r.port, &body, None).await;
    tokio::time::timeout(Duration::from_secs(30), counters.cancel_seen.notified())
        .await
        .expect("the handler is cancelled once the stalled reader is dropped");
    drop(stalled);
    let _ = r.counters;
}

/// Sends `body` from `from` as `token` and reads the whole JSON reply.
async fn exchange(from: [u8; 4], port: u16, body: &Value, token: Option<&str>) -> Value {
    let mut s = post_from(from, port, body, token).await;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), s.read_to_end(&mut raw))
        .await
        .expect("a reply")
        .unwrap();
    body_json(&String::from_utf8_lossy(&raw))
}

fn once_only(id: u64, retry: Option<(&str, &str)>) -> Value {
    let mut m = meta();
    m["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {}});
    let mut params = json!({"name": "once_only", "arguments": {}, "_meta": m});
    if let Some((state, action)) = retry {
        params["requestState"] = json!(state);
        params["inputResponses"] = if action == "accept" {
            json!({"go": {"action": "accept", "content": {"ok": true}}})
        } else {
            json!({"go": {"action": action}})
        };
    }
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params})
}

/// One single-use flow from `from` as `token`, answered with `action`: the
/// final leg's reply.
async fn single_use_flow(from: [u8; 4], port: u16, token: Option<&str>, action: &str) -> Value {
    let first = exchange(from, port, &once_only(1, None), token).await;
    let state = first["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("a question: {first}"))
        .to_owned();
    exchange(from, port, &once_only(2, Some((&state, action))), token).await
}

/// Hole 3: declined single-use retries fill only the sender's share of the
/// replay store; another principal's single-use call still runs.
#[tokio::test]
async fn declined_single_use_retries_fill_only_their_senders_share() {
    for anonymous in [false, true] {
        let r = start_as(
            anonymous,
            |b| {
                b.replay_store_limits(
                    tern_server::replay::StoreLimits::default()
                        .per_principal_bytes(2048)
                        .per_anonymous_bytes(2048),
                )
            },
            |h| h,
            ServeOptions::default(),
        )
        .await;
        let (flooder, other) = if anonymous {
            (([127, 0, 0, 1], None), ([127, 0, 0, 2], None))
        } else {
            (
                ([127, 0, 0, 1], Some("alice")),
                ([127, 0, 0, 1], Some("bob")),
            )
        };
        let mut full = None;
        for n in 0..200 {
            let reply = single_use_flow(flooder.0, r.port, flooder.1, "decline").await;
            if reply["error"]["code"] == -31002 {
                full = Some(n);
                break;
            }
            assert_eq!(reply["result"]["content"][0]["text"], "no", "{reply}");
        }
        assert!(full.is_some_and(|n| n > 0), "the flooder's share fills");
        let reply = single_use_flow(other.0, r.port, other.1, "accept").await;
        assert_eq!(
            reply["result"]["content"][0]["text"], "went: true",
            "another caller's single-use call still runs (anonymous: {anonymous}): {reply}"
        );
    }
}

/// The `Retry-After` seconds and `data.retryAfterMs` of a 503.
fn retry_hint(response: &str) -> (Option<u64>, Value) {
    let secs = response
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("retry-after:")
                .map(str::to_owned)
        })
        .and_then(|v| v.trim().parse().ok());
    (
        secs,
        body_json(response)["error"]["data"]["retryAfterMs"].clone(),
    )
}

#[tokio::test]
async fn every_refusal_says_the_one_configured_retry_hint() {
    // The accept loop's value, followed by the endpoint and by the
    // server's listen refusal.
    let r = start(
        |b| b.max_listens(1),
        |h| h.max_streams(2),
        ServeOptions::default().retry_after(Duration::from_secs(3)),
    )
    .await;
    let mut open = Vec::new();
    let mut first = post(r.port, &listen(1, &[]), None).await;
    assert_eq!(status(&head(&mut first).await), 200);
    open.push(first);
    let mut listen_refused = post(r.port, &listen(2, &[]), None).await;
    let response = head(&mut listen_refused).await;
    assert_eq!(status(&response), 503, "{response}");
    assert_eq!(retry_hint(&response), (Some(3), json!(3000)), "{response}");
    let mut stream = post(r.port, &slow(3), None).await;
    assert!(head(&mut stream).await.contains("text/event-stream"));
    open.push(stream);
    let mut sse_refused = post(r.port, &slow(4), None).await;
    let response = head(&mut sse_refused).await;
    assert_eq!(status(&response), 503, "{response}");
    assert_eq!(retry_hint(&response), (Some(3), json!(3000)), "{response}");
    drop(open);

    // The endpoint's own value wins over the loop's, for both.
    let r = start(
        |b| b.max_listens(1),
        |h| h.retry_after(Duration::from_secs(5)),
        ServeOptions::default().retry_after(Duration::from_secs(3)),
    )
    .await;
    let mut first = post(r.port, &listen(1, &[]), None).await;
    assert_eq!(status(&head(&mut first).await), 200);
    let mut refused = post(r.port, &listen(2, &[]), None).await;
    let response = head(&mut refused).await;
    assert_eq!(retry_hint(&response), (Some(5), json!(5000)), "{response}");
    drop(first);
}

fn task_call(id: u64) -> Value {
    let mut m = meta();
    m["io.modelcontextprotocol/clientCapabilities"] = json!({
        "extensions": {tern_protocol::task::TASKS_EXTENSION: {}}
    });
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "wait", "arguments": {}, "_meta": m}})
}

/// Medium 1: anonymous callers each have a task quota of their own peer's.
/// Before, every anonymous caller shared one: one address's waiting tasks
/// (64 by default, 2 here) refused tasks to every other anonymous caller.
/// The task stays bearer-by-id: only the quota is per peer.
#[tokio::test]
async fn one_anonymous_peer_at_its_task_quota_leaves_tasks_for_another() {
    use tern_server::{TaskConfig, TaskSupport, ToolDef};
    let r = start_as(
        true,
        |b| {
            b.task_config(TaskConfig::default().quota(2, 1 << 20)).tool(
                ToolDef::new(
                    "wait",
                    "Waits as a task until cancelled",
                    |ctx: Ctx| async move {
                        ctx.into_task().await;
                        ctx.cancelled().await;
                        "cancelled"
                    },
                )
                .task(TaskSupport::Required),
            )
        },
        |h| h,
        ServeOptions::default(),
    )
    .await;
    let created = |reply: &Value| reply["result"]["taskId"].as_str().map(str::to_owned);
    let mut first_peers = Vec::new();
    for id in 1..=2 {
        let reply = exchange([127, 0, 0, 2], r.port, &task_call(id), None).await;
        first_peers.push(created(&reply).unwrap_or_else(|| panic!("a task: {reply}")));
    }
    let refused = exchange([127, 0, 0, 2], r.port, &task_call(3), None).await;
    assert_eq!(
        refused["error"]["code"],
        tern_server::error::codes::STORE_FULL,
        "one peer holds its quota of tasks, no more: {refused}"
    );
    let other = exchange([127, 0, 0, 3], r.port, &task_call(4), None).await;
    assert!(
        created(&other).is_some(),
        "another anonymous peer still creates a task: {other}"
    );
    // Bearer-by-id: the other peer reads the first peer's task by its id.
    let get = json!({"jsonrpc": "2.0", "id": 5, "method": "tasks/get", "params": {"taskId": first_peers[0], "_meta": task_call(0)["params"]["_meta"]}});
    let seen = exchange([127, 0, 0, 3], r.port, &get, None).await;
    assert_eq!(seen["result"]["taskId"], first_peers[0].as_str(), "{seen}");
}
