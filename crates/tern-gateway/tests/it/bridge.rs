//! The era bridge: a 2026-07-28 client through the gateway to a raw
//! 2025-11-25 upstream that asks live (`legacy_child`). Its questions held
//! and resumed by the retry, the held call's cap and TTL ending it upstream
//! (its question answered `cancel`, then `notifications/cancelled`), the
//! questions the request did not declare answered by the gateway, what
//! `initialize` declared, `-32042`, and `logging/setLevel` merged.

use std::time::Duration;

use serde_json::{Value, json};
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::ClientCapabilities;
use tern_protocol::error::code;
use tern_server::testing::TestClient;
use tern_server::{KeyRing, Principal};

use crate::child::ROLE;
use crate::gateway::{accept, bounded, left_unanswered};

fn legacy(extra: Value) -> Value {
    let exe = std::env::current_exe().unwrap();
    let mut entry = json!({
        "command": exe.display().to_string(),
        "args": ["--exact", "legacy_child::legacy_entry", "--quiet", "--test-threads=1"],
        "env": {ROLE: "legacy"},
        "era": "2025-11-25",
        "prefix": "",
    });
    for (k, v) in extra.as_object().unwrap() {
        entry[k] = v.clone();
    }
    entry
}

async fn start(extra: Value, options: GatewayOptions) -> Gateway {
    let file = json!({"mcpServers": {"old": legacy(extra)}}).to_string();
    bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        options,
    ))
    .await
    .unwrap()
}

fn client(gateway: &Gateway) -> TestClient {
    TestClient::new(
        gateway
            .server_builder()
            .keys(KeyRing::generate())
            .build()
            .unwrap(),
    )
}

/// Every message the upstream received so far.
async fn seen(c: &TestClient) -> Vec<Value> {
    let out = bounded(c.call_tool("seen", json!({}))).await;
    serde_json::from_str(
        out.text()
            .unwrap_or_else(|| panic!("seen: {:?}", out.outcome)),
    )
    .unwrap()
}

/// Waits (bounded) until the upstream received a message `matches` says
/// it was waiting for; returns every message so far.
async fn until_seen(c: &TestClient, matches: impl Fn(&[Value]) -> bool) -> Vec<Value> {
    bounded(async {
        loop {
            let all = seen(c).await;
            if matches(&all) {
                return all;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

/// The response the upstream got to its question `id`.
fn answer_to<'a>(all: &'a [Value], id: &str) -> Option<&'a Value> {
    all.iter()
        .find(|m| m["id"] == id && m.get("method").is_none())
}

fn cancelled(all: &[Value]) -> Vec<Value> {
    all.iter()
        .filter(|m| m["method"] == "notifications/cancelled")
        .map(|m| m["params"]["requestId"].clone())
        .collect()
}

async fn calls(c: &TestClient, tool: &str) -> u64 {
    let out = bounded(c.call_tool("calls", json!({}))).await;
    let counts: Value = serde_json::from_str(out.text().unwrap()).unwrap();
    counts[tool].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_question_is_held_and_resumed_by_the_retry_never_repeated() {
    let gateway = start(json!({}), GatewayOptions::default()).await;
    let c = client(&gateway);
    // initialize declared what the gateway can relay.
    let all = seen(&c).await;
    let init = all.iter().find(|m| m["method"] == "initialize").unwrap();
    let caps = &init["params"]["capabilities"];
    assert!(caps["elicitation"]["form"].is_object(), "{caps}");
    assert!(caps["elicitation"]["url"].is_object(), "{caps}");
    assert!(caps["sampling"].is_object(), "{caps}");
    assert!(caps["roots"].is_object(), "{caps}");

    let first = bounded(c.call_tool("ask", json!({}))).await;
    assert_eq!(first.input_keys(), ["elicitation_1"], "{:?}", first.outcome);
    let asked = &first.outcome.as_ref().unwrap()["inputRequests"]["elicitation_1"];
    assert_eq!(asked["method"], "elicitation/create");
    assert_eq!(asked["params"]["message"], "Your name?");
    assert_eq!(gateway.held(), 1);
    // A retry without the answer is asked again; the call stays held.
    let again = bounded(c.retry_tool("ask", json!({}), json!({}), first.request_state())).await;
    assert_eq!(again.input_keys(), ["elicitation_1"], "{:?}", again.outcome);
    assert_eq!(gateway.held(), 1);
    let done = bounded(c.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": accept(json!({"name": "Ann"}))}),
        again.request_state(),
    ))
    .await;
    assert_eq!(done.text(), Some("hello Ann"), "{:?}", done.outcome);
    assert_eq!(gateway.held(), 0);
    // The same retry again: the held call is gone, and nothing is sent.
    let twice = bounded(c.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": accept(json!({"name": "Bob"}))}),
        again.request_state(),
    ))
    .await;
    assert_eq!(
        twice.error_code(),
        Some(code::INVALID_PARAMS),
        "{:?}",
        twice.outcome
    );
    assert_eq!(
        calls(&c, "ask").await,
        1,
        "the upstream call was never repeated"
    );
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn questions_the_request_did_not_declare_are_answered_by_the_gateway() {
    let gateway = start(
        json!({"roots": ["file:///srv/one", "file:///srv/two"]}),
        GatewayOptions::default(),
    )
    .await;
    let none = client(&gateway).with_capabilities(ClientCapabilities::default());
    let out = bounded(none.call_tool("ask", json!({}))).await;
    assert_eq!(out.text(), Some("declined: cancel"), "{:?}", out.outcome);
    let out = bounded(none.call_tool("sample", json!({}))).await;
    let text = out.text().unwrap();
    assert!(text.starts_with("sampling error:"), "{text}");
    let out = bounded(none.call_tool("roots", json!({}))).await;
    assert_eq!(out.text(), Some("roots: file:///srv/one,file:///srv/two"));
    assert_eq!(gateway.held(), 0);
    // Declared, each is relayed instead: sampling and roots as input
    // requests of their kind.
    let all = client(&gateway);
    let out = bounded(all.call_tool("sample", json!({}))).await;
    assert_eq!(out.input_keys(), ["sampling_1"], "{:?}", out.outcome);
    let done = bounded(all.retry_tool(
        "sample",
        json!({}),
        json!({"sampling_1": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}}),
        out.request_state(),
    ))
    .await;
    assert_eq!(done.text(), Some("sampled: hi"), "{:?}", done.outcome);
    let out = bounded(all.call_tool("roots", json!({}))).await;
    assert_eq!(out.input_keys(), ["roots_1"], "{:?}", out.outcome);
    let done = bounded(all.retry_tool(
        "roots",
        json!({}),
        json!({"roots_1": {"roots": [{"uri": "file:///client"}]}}),
        out.request_state(),
    ))
    .await;
    assert_eq!(
        done.text(),
        Some("roots: file:///client"),
        "{:?}",
        done.outcome
    );
    // A malformed answer is refused; the call stays held for a good one.
    let out = bounded(all.call_tool("ask", json!({}))).await;
    let bad = bounded(all.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": {"action": "maybe"}}),
        out.request_state(),
    ))
    .await;
    assert_eq!(
        bad.error_code(),
        Some(code::INVALID_PARAMS),
        "{:?}",
        bad.outcome
    );
    let good = bounded(all.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": {"action": "decline"}}),
        out.request_state(),
    ))
    .await;
    assert_eq!(good.text(), Some("declined: decline"), "{:?}", good.outcome);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_the_cap_the_oldest_held_call_is_answered_cancel_and_cancelled_upstream() {
    let gateway = start(
        json!({}),
        GatewayOptions::default().held(tern_server::DEFAULT_STATE_TTL, 1),
    )
    .await;
    let ann = client(&gateway).with_principal(Principal::new("ann"));
    let first = bounded(ann.call_tool("ask", json!({}))).await;
    assert_eq!(first.input_keys(), ["elicitation_1"]);
    // Another principal has a cap of its own.
    let bob = client(&gateway).with_principal(Principal::new("bob"));
    let other = bounded(bob.call_tool("ask", json!({}))).await;
    assert_eq!(other.input_keys(), ["elicitation_1"]);
    assert_eq!(gateway.held(), 2);
    // Ann's second held call evicts her first.
    let second = bounded(ann.call_tool("ask", json!({}))).await;
    assert_eq!(second.input_keys(), ["elicitation_1"]);
    assert_eq!(gateway.held(), 2);
    let all = until_seen(&ann, |all| {
        answer_to(all, "q1").is_some() && !cancelled(all).is_empty()
    })
    .await;
    assert_eq!(answer_to(&all, "q1").unwrap()["result"]["action"], "cancel");
    let call_ids: Vec<Value> = all
        .iter()
        .filter(|m| m["method"] == "tools/call" && m["params"]["name"] == "ask")
        .map(|m| m["id"].clone())
        .collect();
    assert_eq!(
        cancelled(&all),
        [call_ids[0].clone()],
        "only the evicted call"
    );
    // Its retry finds nothing: never sent again.
    let late = bounded(ann.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": accept(json!({"name": "Ann"}))}),
        first.request_state(),
    ))
    .await;
    assert_eq!(
        late.error_code(),
        Some(code::INVALID_PARAMS),
        "{:?}",
        late.outcome
    );
    // The others still resume.
    let done = bounded(bob.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": accept(json!({"name": "Bob"}))}),
        other.request_state(),
    ))
    .await;
    assert_eq!(done.text(), Some("hello Bob"), "{:?}", done.outcome);
    assert_eq!(calls(&ann, "ask").await, 3);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_ttl_a_held_call_is_answered_cancel_and_cancelled_upstream() {
    let gateway = start(
        json!({}),
        GatewayOptions::default().held(Duration::from_secs(1), 16),
    )
    .await;
    let c = client(&gateway);
    let first = bounded(c.call_tool("ask", json!({}))).await;
    assert_eq!(first.input_keys(), ["elicitation_1"]);
    let all = until_seen(&c, |all| {
        answer_to(all, "q1").is_some() && !cancelled(all).is_empty()
    })
    .await;
    assert_eq!(answer_to(&all, "q1").unwrap()["result"]["action"], "cancel");
    assert_eq!(gateway.held(), 0);
    let late = bounded(c.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": accept(json!({"name": "Ann"}))}),
        first.request_state(),
    ))
    .await;
    assert_eq!(
        late.error_code(),
        Some(code::INVALID_PARAMS),
        "{:?}",
        late.outcome
    );
    assert_eq!(calls(&c, "ask").await, 1);
    gateway.close().await;
}

/// A 2025 server that asks twice at once: the first question is held for
/// the client, the second waits behind it. Past the TTL both are answered
/// `cancel`, the queued one too (it was dropped, which answers the server
/// with an error, as if the client had failed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_ttl_a_held_calls_queued_question_is_answered_cancel_too() {
    let gateway = start(
        json!({}),
        GatewayOptions::default().held(Duration::from_secs(1), 16),
    )
    .await;
    let c = client(&gateway);
    let first = bounded(c.call_tool("ask_twice", json!({}))).await;
    assert_eq!(first.input_keys().len(), 1, "{:?}", first.outcome);
    // No other call until the held one is gone: over a 2025 stdio link a
    // question is routed to the one call that can have asked it, and a
    // second call in flight would make the queued question ambiguous.
    bounded(async {
        while gateway.held() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let all = until_seen(&c, |all| {
        answer_to(all, "q1-a").is_some() && answer_to(all, "q1-b").is_some()
    })
    .await;
    for id in ["q1-a", "q1-b"] {
        let answer = answer_to(&all, id).unwrap();
        assert_eq!(answer["result"]["action"], "cancel", "{id}: {answer}");
    }
    assert_eq!(gateway.held(), 0);
    gateway.close().await;
}

/// The upstream's `timeout` bounds its own work, not the held TTL added
/// to it (which a question may wait for its client): a 2025 call that asks
/// nothing and does not answer ends "outcome unknown" after the timeout,
/// cancelled upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridged_call_that_asks_nothing_ends_at_the_upstreams_timeout_not_the_held_ttl() {
    let gateway = start(json!({"timeout": 1}), GatewayOptions::default()).await;
    let c = client(&gateway);
    let started = std::time::Instant::now();
    let out = bounded(c.call_tool("slow", json!({}))).await;
    let took = started.elapsed();
    assert_eq!(
        out.error_code(),
        Some(tern_server::error::codes::OUTCOME_UNKNOWN),
        "{:?}",
        out.outcome
    );
    assert!(took < Duration::from_secs(10), "ended after {took:?}");
    let all = until_seen(&c, |all| !cancelled(all).is_empty()).await;
    assert_eq!(cancelled(&all).len(), 1, "{all:?}");
    gateway.close().await;
}

/// A 2025 session's client (the gateway asks it live) that leaves before it
/// answers: the held upstream call is let go at once — its question
/// answered `cancel`, its request cancelled — not kept for the held TTL
/// (ten minutes here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_question_left_unanswered_lets_the_held_call_go_at_once() {
    let gateway = start(json!({}), GatewayOptions::default()).await;
    let c = client(&gateway);
    left_unanswered(&c, "ask").await;
    bounded(async {
        while gateway.held() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let all = until_seen(&c, |all| {
        answer_to(all, "q1").is_some() && !cancelled(all).is_empty()
    })
    .await;
    assert_eq!(answer_to(&all, "q1").unwrap()["result"]["action"], "cancel");
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_elicitation_required_error_becomes_a_url_round_and_a_new_call() {
    let gateway = start(json!({}), GatewayOptions::default()).await;
    let c = client(&gateway);
    let first = bounded(c.call_tool("url", json!({}))).await;
    assert_eq!(first.input_keys(), ["url_1"], "{:?}", first.outcome);
    let asked = &first.outcome.as_ref().unwrap()["inputRequests"]["url_1"];
    assert_eq!(asked["params"]["mode"], "url");
    assert_eq!(asked["params"]["url"], "https://auth.example.com/start");
    assert!(asked["params"].get("elicitationId").is_none(), "{asked}");
    let done = bounded(c.retry_tool(
        "url",
        json!({}),
        json!({"url_1": {"action": "accept"}}),
        first.request_state(),
    ))
    .await;
    assert_eq!(
        done.text(),
        Some("signed in, call #2"),
        "{:?}",
        done.outcome
    );
    assert_eq!(calls(&c, "url").await, 2);
    // Declined: the call ends, not sent again.
    let declined = bounded(c.retry_tool(
        "url",
        json!({}),
        json!({"url_1": {"action": "decline"}}),
        first.request_state(),
    ))
    .await;
    assert_eq!(
        declined.error_code(),
        Some(code::INVALID_REQUEST),
        "{:?}",
        declined.outcome
    );
    assert_eq!(calls(&c, "url").await, 2);
    // Without URL elicitation declared, the round is refused (-32021).
    let form_only =
        client(&gateway).with_capabilities(ClientCapabilities::default().with_elicitation_form());
    let refused = bounded(form_only.call_tool("url", json!({}))).await;
    assert_eq!(
        refused.error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY),
        "{:?}",
        refused.outcome
    );
    assert_eq!(calls(&c, "url").await, 3);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_level_is_the_most_verbose_of_the_requests_in_flight() {
    let gateway = start(json!({}), GatewayOptions::default()).await;
    let c = client(&gateway);
    let at = |level: &str| json!({"name": "ask", "arguments": {}, "_meta": {"io.modelcontextprotocol/logLevel": level}});
    let debug = bounded(c.send("tools/call", at("debug"))).await;
    assert_eq!(debug.input_keys(), ["elicitation_1"]);
    let error = bounded(c.send("tools/call", at("error"))).await;
    assert_eq!(error.input_keys(), ["elicitation_1"]);
    let levels = |all: &[Value]| -> Vec<String> {
        all.iter()
            .filter(|m| m["method"] == "logging/setLevel")
            .map(|m| m["params"]["level"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(levels(&seen(&c).await), ["debug"]);
    let answer = json!({"elicitation_1": accept(json!({"name": "Ann"}))});
    let done = bounded(c.retry_tool("ask", json!({}), answer.clone(), debug.request_state())).await;
    assert_eq!(done.text(), Some("hello Ann"));
    let all = until_seen(&c, |all| levels(all).len() == 2).await;
    assert_eq!(levels(&all), ["debug", "error"]);
    let done = bounded(c.retry_tool("ask", json!({}), answer, error.request_state())).await;
    assert_eq!(done.text(), Some("hello Ann"));
    let all = until_seen(&c, |all| levels(all).len() == 3).await;
    assert_eq!(levels(&all), ["debug", "error", "emergency"]);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_waiting_behind_held_calls_past_its_timeout_is_unavailable_not_stuck() {
    // One place: the held call keeps it while it waits for its client.
    let gateway = start(
        json!({"concurrency": 1, "timeout": 0.5}),
        GatewayOptions::default(),
    )
    .await;
    let c = client(&gateway);
    let held = bounded(c.call_tool("ask", json!({}))).await;
    assert_eq!(held.input_keys(), ["elicitation_1"], "{:?}", held.outcome);
    assert_eq!(gateway.held(), 1);
    let waiting = bounded(c.call_tool("calls", json!({}))).await;
    let error = waiting.outcome.unwrap_err();
    assert_eq!(error.code, code::INTERNAL_ERROR);
    assert!(
        error.message.contains("at its concurrency cap"),
        "{}",
        error.message
    );
    assert!(error.data.unwrap()["retryAfterMs"].as_u64().unwrap() >= 1);
    // Its place back (the held call answered), the next call goes.
    let done = bounded(c.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": accept(json!({"name": "Ann"}))}),
        held.request_state(),
    ))
    .await;
    assert_eq!(done.text(), Some("hello Ann"), "{:?}", done.outcome);
    let after = bounded(c.call_tool("calls", json!({}))).await;
    assert!(after.outcome.is_ok(), "{:?}", after.outcome);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_answer_leaves_the_call_held_for_a_corrected_retry() {
    let gateway = start(json!({}), GatewayOptions::default()).await;
    let c = client(&gateway);
    let held = bounded(c.call_tool("ask", json!({}))).await;
    assert_eq!(held.input_keys(), ["elicitation_1"], "{:?}", held.outcome);
    let wrong = bounded(c.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": {"action": "maybe"}}),
        held.request_state(),
    ))
    .await;
    let error = wrong.outcome.unwrap_err();
    assert_eq!(error.code, code::INVALID_PARAMS);
    assert!(
        error.message.contains("inputResponses.elicitation_1"),
        "{}",
        error.message
    );
    assert_eq!(gateway.held(), 1, "still held");
    let done = bounded(c.retry_tool(
        "ask",
        json!({}),
        json!({"elicitation_1": accept(json!({"name": "Ann"}))}),
        held.request_state(),
    ))
    .await;
    assert_eq!(done.text(), Some("hello Ann"), "{:?}", done.outcome);
    assert_eq!(gateway.held(), 0);
    gateway.close().await;
}
