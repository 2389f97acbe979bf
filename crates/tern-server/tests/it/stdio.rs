//! The stdio transport, in process over an in-memory pipe: framing, limits,
//! concurrency, cancellation and end of input.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::{Value, json};
use tern_server::transport::stdio::{StdioOptions, serve};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use crate::fixture::{Counters, ManualClock, builder};

struct Pipe {
    server_handle: tern_server::Server,
    input: DuplexStream,
    output: tokio::io::Lines<BufReader<DuplexStream>>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
}

fn start(options: StdioOptions) -> (Pipe, Arc<Counters>) {
    let counters = Arc::new(Counters::default());
    let server = builder(&counters, ManualClock::new()).build().unwrap();
    let (input, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, output) = tokio::io::duplex(1 << 16);
    let server_handle = server.clone();
    let server = tokio::spawn(serve(server, server_in, server_out, options));
    (
        Pipe {
            server_handle,
            input,
            output: BufReader::new(output).lines(),
            server,
        },
        counters,
    )
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
}

impl Pipe {
    async fn send(&mut self, line: &str) {
        self.input.write_all(line.as_bytes()).await.unwrap();
        self.input.write_all(b"\n").await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = self
            .output
            .next_line()
            .await
            .unwrap()
            .expect("the server answers");
        serde_json::from_str(&line).unwrap()
    }

    /// Closes input and collects everything the server still writes.
    async fn finish(mut self) -> Vec<Value> {
        self.input.shutdown().await.unwrap();
        drop(self.input);
        let mut rest = Vec::new();
        while let Some(line) = self.output.next_line().await.unwrap() {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        self.server.await.unwrap().unwrap();
        rest
    }
}

#[tokio::test]
async fn malformed_lines_get_parse_errors_and_the_stream_goes_on() {
    let (mut p, _) = start(StdioOptions::default());
    p.send("{not json").await;
    let e = p.recv().await;
    assert_eq!(e["error"]["code"], -32700);
    assert!(e.get("id").is_none());
    p.send(r#"{"jsonrpc":"1.0","id":1,"method":"tools/list"}"#)
        .await;
    assert_eq!(p.recv().await["error"]["code"], -32600);
    p.send("").await;
    p.send(
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta()}})
            .to_string(),
    )
    .await;
    let r = p.recv().await;
    assert_eq!(r["id"], 2);
    assert!(r["result"]["tools"].is_array());
    assert!(p.finish().await.is_empty());
}

#[tokio::test]
async fn an_oversized_line_is_refused_without_being_kept() {
    let (mut p, _) = start(StdioOptions {
        max_line_len: 1024,
        ..StdioOptions::default()
    });
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "typed", "arguments": {"pad": "x".repeat(100_000)}, "_meta": meta()}});
    p.send(&huge.to_string()).await;
    let e = p.recv().await;
    assert_eq!(e["error"]["code"], -32600);
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("1024 byte limit")
    );
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": meta()}}).to_string()).await;
    assert_eq!(p.recv().await["id"], 2);
    p.finish().await;
}

#[tokio::test]
async fn no_server_requests_the_server_writes_none_and_mrtr_works_over_stdio() {
    let (mut p, _) = start(StdioOptions::default());
    p.send(&json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "greet", "arguments": {}, "_meta": meta()}}).to_string()).await;
    let r1 = p.recv().await;
    assert_eq!(r1["result"]["resultType"], "input_required");
    let state = r1["result"]["requestState"].clone();
    let retry = json!({"jsonrpc": "2.0", "id": "b", "method": "tools/call", "params": {
        "name": "greet", "arguments": {}, "requestState": state,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Ann"}}}, "_meta": meta()}});
    p.send(&retry.to_string()).await;
    let r2 = p.recv().await;
    assert_eq!(r2["id"], "b");
    assert_eq!(r2["result"]["content"][0]["text"], "Hello, Ann!");
    for msg in [&r1, &r2] {
        assert!(
            !(msg.get("method").is_some() && msg.get("id").is_some()),
            "no server-to-client request"
        );
    }
    p.finish().await;
}

#[tokio::test]
async fn requests_are_served_concurrently_and_duplicate_ids_refused() {
    let (mut p, counters) = start(StdioOptions::default());
    let slow = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": meta()}});
    p.send(&slow.to_string()).await;
    p.send(&slow.to_string()).await;
    let dup = p.recv().await;
    assert_eq!(dup["id"], 1);
    assert_eq!(dup["error"]["code"], -32600, "an id still in flight");
    // A quick request is answered while the slow one runs.
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": meta()}}).to_string()).await;
    assert_eq!(p.recv().await["id"], 2);
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"test"}}"#).await;
    counters.cancel_seen.notified().await;
    assert!(
        p.finish().await.iter().all(|m| m["id"] != 1),
        "nothing more for a cancelled request"
    );
}

#[tokio::test]
async fn cancellation_mid_progress_stops_the_handler_and_its_messages() {
    let (mut p, counters) = start(StdioOptions::default());
    let mut m = meta();
    m["progressToken"] = json!("t");
    p.send(&json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": m}}).to_string()).await;
    let first = p.recv().await;
    assert_eq!(first["method"], "notifications/progress");
    assert_eq!(first["params"]["progressToken"], "t");
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#)
        .await;
    counters.cancel_seen.notified().await;
    assert_eq!(
        counters.cancelled_seen.load(Ordering::SeqCst),
        1,
        "ctx.cancelled() fired"
    );
    // Unknown and malformed cancellations are ignored.
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":12345}}"#)
        .await;
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{}}"#)
        .await;
    let rest = p.finish().await;
    assert!(
        rest.iter().all(|m| m["id"] != 7),
        "no result after cancellation: {rest:?}"
    );
    // Progress written before the cancel may still be in the pipe, but not
    // after: the count is far below the 1000 a full run sends.
    assert!(rest.len() < 1000);
}

#[tokio::test]
async fn end_of_input_drains_requests_in_flight() {
    let (mut p, _) = start(StdioOptions::default());
    let mut m = meta();
    m["progressToken"] = json!(9);
    p.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "progress", "arguments": {}, "_meta": m}}).to_string()).await;
    p.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "typed", "arguments": {"count": 2}, "_meta": meta()}}).to_string()).await;
    let rest = p.finish().await;
    let results: Vec<&Value> = rest.iter().filter(|m| m.get("result").is_some()).collect();
    assert_eq!(results.len(), 2, "{rest:?}");
    // Notifications of a request come before its result.
    let result_at = rest.iter().position(|m| m["id"] == 3).unwrap();
    assert!(
        rest[..result_at]
            .iter()
            .any(|m| m["method"] == "notifications/progress")
    );
    assert!(
        rest[result_at..]
            .iter()
            .all(|m| m["method"] != "notifications/progress")
    );
}

#[tokio::test]
async fn a_panicking_handler_still_gets_an_answer_and_frees_its_id() {
    let (mut p, _) = start(StdioOptions::default());
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "panics", "arguments": {}, "_meta": meta()}});
    p.send(&call.to_string()).await;
    let e = p.recv().await;
    assert_eq!(e["id"], 5);
    assert_eq!(e["error"]["code"], -32603);
    p.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": meta()}})
            .to_string(),
    )
    .await;
    assert!(
        p.recv().await["result"]["tools"].is_array(),
        "the id is free again"
    );
    p.finish().await;
}

#[tokio::test]
async fn cancellation_reaches_requests_waiting_for_a_slot() {
    let (mut p, counters) = start(StdioOptions {
        max_concurrent: 1,
        ..StdioOptions::default()
    });
    let mut m = meta();
    m["progressToken"] = json!("one");
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": m}}).to_string()).await;
    assert_eq!(
        p.recv().await["method"],
        "notifications/progress",
        "request 1 holds the only slot"
    );
    p.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": meta()}}).to_string()).await;
    // Request 2 waits for the slot; its cancellation is still read and acted on.
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#)
        .await;
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#)
        .await;
    counters.cancel_seen.notified().await;
    let rest = p.finish().await;
    assert!(
        rest.iter().all(|m| m["id"] != 1 && m["id"] != 2),
        "{rest:?}"
    );
    assert_eq!(
        counters.cancelled_seen.load(Ordering::SeqCst),
        1,
        "request 2 never ran"
    );
}

#[tokio::test]
async fn end_of_input_cancels_what_outlives_the_drain_timeout() {
    let (mut p, counters) = start(StdioOptions {
        drain_timeout: std::time::Duration::from_millis(50),
        ..StdioOptions::default()
    });
    p.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": meta()}}).to_string()).await;
    p.send(&json!({"jsonrpc": "2.0", "id": 10, "method": "server/discover", "params": {"_meta": meta()}}).to_string()).await;
    let rest = p.finish().await;
    assert!(rest.iter().any(|m| m["id"] == 10));
    assert!(
        rest.iter().all(|m| m["id"] != 9),
        "the slow request was cancelled, not answered"
    );
    assert_eq!(counters.cancelled_seen.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn subscriptions_over_stdio_are_tagged_and_end_on_cancel_or_shutdown() {
    let (mut p, _) = start(StdioOptions::default());
    let listen = |id: &str| json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": true}, "_meta": meta()}});
    p.send(&listen("a").to_string()).await;
    let ack = p.recv().await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "a"
    );
    p.server_handle.changes().prompts_changed();
    p.server_handle.changes().tools_changed();
    let n = p.recv().await;
    assert_eq!(n["method"], "notifications/tools/list_changed");
    assert_eq!(
        n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "a"
    );
    // The client ends it with notifications/cancelled: nothing more for "a".
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#)
        .await;
    p.send(&listen("b").to_string()).await;
    assert_eq!(
        p.recv().await["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "b"
    );
    // A graceful server shutdown closes "b" with its result.
    p.server_handle.shutdown();
    let closed = p.recv().await;
    assert_eq!(closed["id"], "b");
    assert_eq!(
        closed["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "b"
    );
    let rest = p.finish().await;
    assert!(rest.iter().all(|m| m["id"] != "a"), "{rest:?}");
}

/// `notifications/cancelled` during a guarded leg, after its effect: nothing
/// more is written for that id, the run finishes, and the retry under a new
/// id gets its outcome (one effect).
#[tokio::test]
async fn a_cancelled_guarded_leg_finishes_and_its_retry_gets_the_outcome() {
    let (mut p, counters) = start(StdioOptions::default());
    p.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "transfer", "arguments": {}, "_meta": meta()}}).to_string()).await;
    let first = p.recv().await;
    let state = first["result"]["requestState"].as_str().unwrap().to_owned();
    let retry = |id: u32| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "transfer", "arguments": {}, "_meta": meta(), "requestState": state,
            "inputResponses": {"confirm": {"action": "accept", "content": {"ok": true}}}}})
        .to_string()
    };
    p.send(&retry(2)).await;
    counters.transfer_started.notified().await;
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":2}}"#)
        .await;
    counters.transfer_done.notified().await;
    p.send(&retry(3)).await;
    let answer = p.recv().await;
    assert_eq!(answer["id"], 3, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"],
        "transfer #1, audited"
    );
    let rest = p.finish().await;
    assert!(
        rest.iter().all(|m| m["id"] != 2),
        "nothing for the cancelled id: {rest:?}"
    );
    assert_eq!(counters.transfers.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn overload_is_answered_32603_with_a_retry_hint() {
    // One slot, a queue of 16: the 17th request beyond the running one is
    // refused as overload (-32603 + data.retryAfterMs), not -32600.
    let (mut p, _) = start(StdioOptions {
        max_concurrent: 1,
        retry_after: std::time::Duration::from_millis(250),
        ..StdioOptions::default()
    });
    for id in 0..16 {
        p.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "slow", "arguments": {}, "_meta": meta()}}).to_string()).await;
    }
    p.send(&json!({"jsonrpc": "2.0", "id": 99, "method": "server/discover", "params": {"_meta": meta()}}).to_string()).await;
    let e = p.recv().await;
    assert_eq!(e["id"], 99);
    assert_eq!(e["error"]["code"], -32603);
    assert_eq!(e["error"]["data"]["retryAfterMs"], 250);
    for id in 0..16 {
        p.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}}).to_string()).await;
    }
    let rest = p.finish().await;
    assert!(rest.iter().all(|m| m.get("error").is_none()), "{rest:?}");
}

#[tokio::test]
async fn a_listen_over_the_cap_is_32603_with_a_retry_hint_over_stdio() {
    let counters = Arc::new(Counters::default());
    let server = builder(&counters, ManualClock::new())
        .max_listens(1)
        .build()
        .unwrap();
    let (input, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, output) = tokio::io::duplex(1 << 16);
    let server_handle = server.clone();
    let task = tokio::spawn(serve(
        server,
        server_in,
        server_out,
        StdioOptions {
            // The listen refusal says the transport's configured hint.
            retry_after: std::time::Duration::from_millis(2500),
            ..StdioOptions::default()
        },
    ));
    let mut p = Pipe {
        server_handle,
        input,
        output: BufReader::new(output).lines(),
        server: task,
    };
    let listen = |id: u32| json!({"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": {"notifications": {"toolsListChanged": true}, "_meta": meta()}});
    p.send(&listen(1).to_string()).await;
    assert_eq!(
        p.recv().await["method"],
        "notifications/subscriptions/acknowledged"
    );
    p.send(&listen(2).to_string()).await;
    let e = p.recv().await;
    assert_eq!(e["id"], 2);
    assert_eq!(e["error"]["code"], -32603);
    assert_eq!(e["error"]["data"]["retryAfterMs"], 2500);
    // Cancelling the open one frees its slot: the next listen is served.
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#)
        .await;
    p.send(&listen(3).to_string()).await;
    let freed = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let m = p.recv().await;
            if m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 3 {
                assert_eq!(m["method"], "notifications/subscriptions/acknowledged");
                break;
            }
            // The first listen's close, or the refusal of a third that came
            // before the slot was given back, is all that may come first.
            assert!(
                m["id"] == 1 || m["id"] == 3 || m["method"] == "notifications/cancelled",
                "{m}"
            );
            if m["id"] == 3 {
                p.send(&listen(3).to_string()).await;
            }
        }
    })
    .await;
    assert!(freed.is_ok(), "the cancelled listen's slot is given back");
    p.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3}}"#)
        .await;
    p.finish().await;
}
