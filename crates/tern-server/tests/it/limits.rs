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

use crate::fixture::{Counters, ManualClock, builder};

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
    let server = configure(builder(&counters, ManualClock::new()))
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
    post_via(from, port, body, token, None).await
}

/// [`post_from`], with `X-Forwarded-For: forwarded` when given.
async fn post_via(
    from: [u8; 4],
    port: u16,
    body: &Value,
    token: Option<&str>,
    forwarded: Option<&str>,
) -> TcpStream {
    let body = body.to_string();
    let v: Value = serde_json::from_str(&body).unwrap();
    let name = v["params"]["name"]
        .as_str()
        .or_else(|| v["params"]["taskId"].as_str())
        .map(|n| format!("Mcp-Name: {n}\r\n"))
        .unwrap_or_default();
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default()
        + &forwarded
            .map(|xff| format!("X-Forwarded-For: {xff}\r\n"))
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
    exchange_via(from, port, body, token, None).await
}

async fn exchange_via(
    from: [u8; 4],
    port: u16,
    body: &Value,
    token: Option<&str>,
    forwarded: Option<&str>,
) -> Value {
    let mut s = post_via(from, port, body, token, forwarded).await;
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
    single_use_flow_via(from, port, token, None, action).await
}

/// [`single_use_flow`] through a proxy at `from` forwarding for `client`.
async fn single_use_flow_via(
    from: [u8; 4],
    port: u16,
    token: Option<&str>,
    client: Option<&str>,
    action: &str,
) -> Value {
    let first = exchange_via(from, port, &once_only(1, None), token, client).await;
    let state = first["result"]["requestState"]
        .as_str()
        .unwrap_or_else(|| panic!("a question: {first}"))
        .to_owned();
    exchange_via(
        from,
        port,
        &once_only(2, Some((&state, action))),
        token,
        client,
    )
    .await
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

/// A kept-alive connection from `from` that has been served one `ping`
/// (so it is known to be admitted, not refused).
async fn kept_alive(from: [u8; 4], port: u16) -> Result<TcpStream, String> {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    let mut stream = socket
        .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap();
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}})
            .to_string();
    let text = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // A refused connection may be closed before the request is written.
    if stream.write_all(text.as_bytes()).await.is_err() {
        return Err("closed".into());
    }
    let response = head(&mut stream).await;
    match status(&response) {
        200 => Ok(stream),
        _ => Err(response),
    }
}

/// One address holding its share of connections (kept alive, idle) cannot
/// take the rest: its next connection is refused with 503 before a request
/// is read, while another address is still served. Before, one peer could
/// hold all 512 and every other caller got 503.
#[tokio::test]
async fn one_peer_holding_its_connection_share_leaves_connections_for_others() {
    let r = start_as(
        true,
        |b| b,
        |h| h,
        ServeOptions::default()
            .max_connections(16)
            .max_connections_per_peer(3),
    )
    .await;
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(
            kept_alive([127, 0, 0, 2], r.port)
                .await
                .expect("within the share"),
        );
    }
    let refused = kept_alive([127, 0, 0, 2], r.port).await.unwrap_err();
    assert!(
        refused == "closed" || status(&refused) == 503,
        "the fourth connection of one peer: {refused}"
    );
    assert!(
        refused == "closed" || refused.to_ascii_lowercase().contains("retry-after: 1"),
        "{refused}"
    );
    // Another peer is served, while the first still holds its three.
    kept_alive([127, 0, 0, 3], r.port)
        .await
        .expect("another peer is admitted");
    // Closing one gives its slot back.
    drop(held.pop());
    let mut again = Err(String::new());
    for _ in 0..100 {
        again = kept_alive([127, 0, 0, 2], r.port).await;
        if again.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    again.expect("a slot given back is taken again");
}

/// A connection kept alive by a trickle of requests is closed once it is
/// past its age: the next read sees the end of the stream.
#[tokio::test]
async fn a_connection_past_its_age_is_closed_between_requests() {
    let r = start_as(
        true,
        |b| b,
        |h| h,
        ServeOptions::default().max_connection_age(Duration::from_millis(300)),
    )
    .await;
    let mut stream = kept_alive([127, 0, 0, 4], r.port).await.unwrap();
    let mut buf = [0u8; 256];
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the connection outlived its age");
}

/// `Content-Length` with `Transfer-Encoding: chunked` (RFC 9112 §6.1): hyper
/// drops the length and would serve the chunked body; tern answers 400 and
/// closes the connection, and the handler never runs.
#[tokio::test]
async fn content_length_with_transfer_encoding_is_400_and_the_connection_closes() {
    let r = start_as(true, |b| b, |h| h, ServeOptions::default()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "pay", "arguments": {"amount": 1}, "_meta": meta()}})
        .to_string();
    for (first, second) in [
        ("Content-Length: 4", "Transfer-Encoding: chunked"),
        ("transfer-encoding: chunked", "content-length: 4"),
    ] {
        let text = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: pay\r\n{first}\r\n{second}\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
            r.port,
            body.len()
        );
        let mut stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
        stream.write_all(text.as_bytes()).await.unwrap();
        let mut raw = Vec::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
            .await
            .expect("the connection is closed")
            .unwrap();
        let response = String::from_utf8_lossy(&raw);
        assert_eq!(status(&response), 400, "{response}");
        assert!(
            response.to_ascii_lowercase().contains("connection: close"),
            "{response}"
        );
    }
    assert_eq!(
        r.counters
            .payments
            .load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the handler never ran"
    );
}

/// Behind a trusted proxy every request comes from the proxy's address, so
/// one client's declined single-use retries filled the share of every
/// client of the proxy (behind nginx, ~10 minutes for all). With the proxy
/// trusted, its clients are told apart by `X-Forwarded-For`: one client
/// filling its share leaves another's calls running, and a peer that is no
/// proxy cannot spend another client's share by naming it.
#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_share() {
    use tern_server::transport::http::{ForwardedHeader, TrustedProxies};
    let proxies = TrustedProxies::new(["127.0.0.10"], ForwardedHeader::XForwardedFor).unwrap();
    let r = start_as(
        true,
        |b| {
            b.replay_store_limits(
                tern_server::replay::StoreLimits::default().per_anonymous_bytes(2048),
            )
        },
        |h| h,
        ServeOptions::default().trusted_proxies(proxies),
    )
    .await;
    let proxy = [127, 0, 0, 10];
    // A spoofer (not a proxy) names client B: it fills its own share.
    let mut full = false;
    for _ in 0..200 {
        let reply =
            single_use_flow_via([127, 0, 0, 11], r.port, None, Some("192.0.2.2"), "decline").await;
        if reply["error"]["code"] == -31002 {
            full = true;
            break;
        }
    }
    assert!(full, "the spoofer's share fills");
    // Client A, through the proxy, fills its share (a client's own
    // made-up element left of the proxy's is not believed).
    let mut full = false;
    for _ in 0..200 {
        let reply =
            single_use_flow_via(proxy, r.port, None, Some("192.0.2.2, 192.0.2.1"), "decline").await;
        if reply["error"]["code"] == -31002 {
            full = true;
            break;
        }
    }
    assert!(full, "client A's share fills");
    // Client B, through the same proxy, still runs its single-use call.
    let reply = single_use_flow_via(proxy, r.port, None, Some("192.0.2.2"), "accept").await;
    assert_eq!(
        reply["result"]["content"][0]["text"], "went: true",
        "{reply}"
    );
    // And client A is still refused.
    let reply = single_use_flow_via(proxy, r.port, None, Some("192.0.2.1"), "decline").await;
    assert_eq!(reply["error"]["code"], -31002, "{reply}");
}

/// Opens a POST from `from` declaring a `len`-byte body and sends only its
/// first bytes: a parked body. Returns the stream, still open.
async fn park(from: [u8; 4], port: u16, len: usize) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(std::net::SocketAddr::from((from, 0))).unwrap();
    let mut stream = socket
        .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)))
        .await
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: {len}\r\n\r\n{{\"jsonrpc\""
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
}

/// A small `tools/list` from `from`: its status.
async fn small_request(from: [u8; 4], port: u16) -> u16 {
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta()}});
    let mut s = post_from(from, port, &body, None).await;
    status(&head(&mut s).await)
}

/// A parked body holds its declared bytes: whoever is over its share of the
/// byte budget, or over the total, gets 503 + Retry-After at once, while a
/// small body is still served. Before, 128 parked 4 MiB bodies held 521 MiB.
#[tokio::test]
async fn parked_bodies_are_held_to_the_byte_budget_and_small_ones_still_pass() {
    let r = start_as(
        true,
        |b| b,
        |h| {
            h.body_budget(1_000_000, 500_000)
                .heavy_bodies(4 * 1024 * 1024, 64, 64)
        },
        ServeOptions::default(),
    )
    .await;
    let mut parked = vec![park([127, 0, 0, 2], r.port, 400_000).await];
    // A second parked body of the same peer passes its share: refused.
    let mut over_share = park([127, 0, 0, 2], r.port, 400_000).await;
    let refused = head(&mut over_share).await;
    assert_eq!(status(&refused), 503, "{refused}");
    assert!(
        refused.to_ascii_lowercase().contains("retry-after"),
        "{refused}"
    );
    // Another peer parks within its share; a third would pass the total.
    parked.push(park([127, 0, 0, 3], r.port, 400_000).await);
    let mut over_total = park([127, 0, 0, 4], r.port, 400_000).await;
    assert_eq!(status(&head(&mut over_total).await), 503);
    // A small body of that third peer is still served.
    assert_eq!(small_request([127, 0, 0, 4], r.port).await, 200);
    // The parked bodies, closed, give their bytes back.
    drop(parked);
    let mut status_after = 0;
    for _ in 0..100 {
        let mut again = park([127, 0, 0, 4], r.port, 400_000).await;
        // A parked body that is admitted answers nothing yet.
        let answered =
            tokio::time::timeout(Duration::from_millis(200), again.read(&mut [0u8; 64])).await;
        if answered.is_err() {
            status_after = 200;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status_after, 200, "the budget came back");
}

/// Heavy bodies (over the threshold) take a permit: one caller with its two
/// in flight gets 503 for a third, another caller's heavy and small ones
/// pass.
#[tokio::test]
async fn one_caller_s_heavy_bodies_do_not_take_every_heavy_permit() {
    let r = start_as(
        true,
        |b| b,
        |h| h.heavy_bodies(1024, 3, 2),
        ServeOptions::default(),
    )
    .await;
    let _held = [
        park([127, 0, 0, 2], r.port, 10_000).await,
        park([127, 0, 0, 2], r.port, 10_000).await,
    ];
    let mut third = park([127, 0, 0, 2], r.port, 10_000).await;
    let refused = head(&mut third).await;
    assert_eq!(status(&refused), 503, "{refused}");
    assert!(
        body_json(&refused)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("large requests")
    );
    assert_eq!(small_request([127, 0, 0, 3], r.port).await, 200);
    // A heavy body of another caller, sent whole, is served.
    let big = "x".repeat(4000);
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta(), "pad": big}});
    let mut s = post_from([127, 0, 0, 3], r.port, &body, None).await;
    let answer = head(&mut s).await;
    assert_ne!(status(&answer), 503, "{answer}");
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
