//! Many requests at once over one stdio child, as a gateway's callers share
//! one: the transport writes them in bursts, and every line still reaches the
//! child whole, each answer reaches its own caller, and a child that dies in
//! the middle of a burst fails every caller at once.

use std::collections::HashSet;

use futures_util::future::join_all;
use serde_json::json;
use tern_client::transport::stdio::ChildProcess;
use tern_client::{Client, ErrorKind};

use crate::harness::{Kind, Way, bounded, start, text};

/// How many calls are in flight together.
const CALLS: usize = 200;

#[tokio::test]
async fn a_burst_of_concurrent_calls_over_one_child_is_answered_call_by_call() {
    let conn = start(Way::Stdio, Kind::Fixture).await;
    let client = conn.client(Client::builder());
    let calls = (0..CALLS).map(|i| {
        let client = &client;
        async move {
            // The calls come over a few turns of the scheduler, as a
            // gateway's callers do: some join a burst already being written.
            for _ in 0..i % 7 {
                tokio::task::yield_now().await;
            }
            // `fallback` answers with its own words when it may not ask.
            (i, client.call_tool("fallback", Some(json!({}))).await)
        }
    });
    let results = Box::pin(bounded(join_all(calls))).await;
    for (i, result) in results {
        let result = result.unwrap_or_else(|e| panic!("call {i}: {e:#}"));
        assert_eq!(text(&result), "fallback: no elicitation", "call {i}");
    }
    // The child read each request once, whole: as many as were sent, each
    // with its own id.
    let received = conn.log.requests("tools/call");
    assert_eq!(received.len(), CALLS);
    let ids: HashSet<String> = received.iter().map(|c| c["id"].to_string()).collect();
    assert_eq!(ids.len(), CALLS, "{ids:?}");
    client.close().await;
}

#[tokio::test]
async fn a_child_that_dies_in_a_burst_fails_every_caller_at_once() {
    // The child reads two lines of the burst and exits.
    let child = ChildProcess::spawn(
        "sh",
        &[
            "-c".into(),
            "read a; read b; echo 'gone mid-burst' >&2; exit 3".into(),
        ],
    )
    .unwrap();
    let client = Client::builder().build(child);
    let calls = (0..CALLS).map(|_| client.list_tools());
    let results = Box::pin(bounded(join_all(calls))).await;
    for result in results {
        let e = result.expect_err("no answer came");
        assert_eq!(e.kind(), ErrorKind::Transport);
        let text = format!("{e:#}");
        assert!(text.contains("exit status: 3"), "{text}");
        assert!(text.contains("| gone mid-burst"), "{text}");
    }
    client.close().await;
}
