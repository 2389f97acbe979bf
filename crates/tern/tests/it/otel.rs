//! The `otel` feature: a real `tern serve demo` exports its per-leg spans
//! and counters over OTLP/HTTP to a receiver on loopback, the replica named
//! in the resource. The receiver keeps every body it is sent; protobuf
//! keeps strings verbatim, so the names are looked for in the bytes.

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::fleet::{Reply, call, free_port, get};

/// Bodies posted to the receiver, by path.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An OTLP/HTTP receiver: reads each request (`Content-Length` bodies,
/// keep-alive), answers 200 with an empty body.
async fn receiver() -> (String, Received) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let got: Received = Arc::default();
    let keep = Arc::clone(&got);
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let keep = Arc::clone(&keep);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 8192];
                loop {
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    while buf.len() < end + 4 + len {
                        match conn.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let body = buf[end + 4..end + 4 + len].to_vec();
                    buf.drain(..end + 4 + len);
                    keep.lock().unwrap().push((path, body));
                    if conn
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    (url, got)
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[tokio::test]
async fn spans_and_counters_reach_an_otlp_receiver_with_the_replica_named() {
    let (endpoint, got) = receiver().await;
    let port = free_port();
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["serve", "demo", "--http", &format!("127.0.0.1:{port}")])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_SERVICE_NAME", "tern-demo-fleet")
        .env("TERN_REPLICA", "replica-otel-7")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..400 {
        if get(&format!("{base}/mcp")).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(up, "the demo serves");
    guarded_leg_and_task(&base).await;
    // SIGINT: the demo stops, and leaving flushes both exporters.
    let status = tokio::process::Command::new("kill")
        .args(["-INT", &child.id().unwrap().to_string()])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exited = tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .expect("the demo exits on SIGINT")
        .unwrap();
    assert!(exited.success(), "{exited}");
    let got = got.lock().unwrap();
    let traces: Vec<&Vec<u8>> = got
        .iter()
        .filter(|(p, _)| p == "/v1/traces")
        .map(|(_, b)| b)
        .collect();
    let metrics: Vec<&Vec<u8>> = got
        .iter()
        .filter(|(p, _)| p == "/v1/metrics")
        .map(|(_, b)| b)
        .collect();
    assert!(
        traces
            .iter()
            .any(|b| contains(b, "leg") && contains(b, "provision_database")),
        "a leg span was exported"
    );
    assert!(
        traces
            .iter()
            .any(|b| contains(b, "replica-otel-7") && contains(b, "tern-demo-fleet")),
        "the replica and service are named"
    );
    assert!(
        metrics.iter().any(|b| contains(b, "tern.rounds_per_call")),
        "rounds per call counted"
    );
    assert!(
        metrics.iter().any(|b| contains(b, "tern.refused_states")),
        "refused states counted"
    );
    assert!(
        metrics.iter().any(|b| contains(b, "tern.replay_outcomes")),
        "replay outcomes counted"
    );
    assert!(
        metrics
            .iter()
            .any(|b| contains(b, "tern.task_states") && contains(b, "completed")),
        "task states counted"
    );
    assert!(
        metrics.iter().any(|b| contains(b, "replica-otel-7")),
        "counters carry the replica"
    );
}

/// A two-leg call (rounds counted), a refused state, a guarded final leg
/// (a replay outcome counted) and a task run to its end (a task state
/// counted; at most 200 polls).
async fn guarded_leg_and_task(base: &str) {
    let args = json!({"name": "orders"});
    let first = call(
        base,
        "o",
        "tools/call",
        json!({"name": "provision_database", "arguments": args}),
        Duration::from_secs(10),
    )
    .await;
    let state = first.result()["requestState"].clone();
    let done = call(
        base,
        "o",
        "tools/call",
        json!({"name": "provision_database", "arguments": args, "requestState": state,
            "inputResponses": {"region": {"action": "accept", "content": {"region": "eu-west-1"}}}}),
        Duration::from_secs(10),
    )
    .await;
    assert!(matches!(done, Reply::Result(_)), "{done:?}");
    // A state that does not open: a refused state counted by reason.
    let refused = call(
        base,
        "o",
        "tools/call",
        json!({"name": "provision_database", "arguments": args, "requestState": "garbage",
            "inputResponses": {}}),
        Duration::from_secs(10),
    )
    .await;
    assert!(matches!(refused, Reply::Error(..)), "{refused:?}");
    // A guarded final leg: a replay outcome counted.
    let args = json!({"to": "olga", "amount": 5});
    let first = call(
        base,
        "t",
        "tools/call",
        json!({"name": "transfer_funds", "arguments": args}),
        Duration::from_secs(10),
    )
    .await;
    let state = first.result()["requestState"].clone();
    let paid = call(
        base,
        "t",
        "tools/call",
        json!({"name": "transfer_funds", "arguments": args, "requestState": state,
            "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}}),
        Duration::from_secs(10),
    )
    .await;
    assert!(matches!(paid, Reply::Result(_)), "{paid:?}");
    // A task run to its end: a task state counted (at most 200 polls).
    let created = call(
        base,
        "n",
        "tools/call",
        json!({"name": "nightly_report", "arguments": {}}),
        Duration::from_secs(10),
    )
    .await;
    let task_id = created.result()["taskId"].as_str().unwrap().to_owned();
    let mut status = String::new();
    for _ in 0..200 {
        let got = call(
            base,
            "n",
            "tasks/get",
            json!({"taskId": task_id}),
            Duration::from_secs(10),
        )
        .await;
        status = got.result()["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if status == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(status, "completed");
}
