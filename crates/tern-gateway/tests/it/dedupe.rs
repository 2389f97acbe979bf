//! Exactly once through the gateway (`dedupe`), and fleet mode's lists.

use serde_json::json;
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::error::code;
use tern_server::error::codes;

use crate::child::FAIL_IF;
use crate::gateway::{accept, all_tools, bounded, client, upstream};

pub async fn start(servers: serde_json::Value, options: GatewayOptions) -> Gateway {
    let file = json!({"mcpServers": servers}).to_string();
    bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        options,
    ))
    .await
    .unwrap()
}

pub fn go() -> serde_json::Value {
    json!({"go": accept(json!({"go": true}))})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dedupe_relays_a_duplicated_retry_once_and_without_it_every_retry_goes() {
    let gateway = start(
        json!({
            "a": upstream("a", json!({"dedupe": true})),
            "b": upstream("b", json!({})),
        }),
        GatewayOptions::default(),
    )
    .await;
    let c = client(&gateway);

    // With dedupe: the same retry twice at once, then once more, makes
    // one effect, and every duplicate gets the first reply.
    let first = bounded(c.call_tool("a__effect", json!({}))).await;
    assert_eq!(first.input_keys(), ["go"], "{:?}", first.outcome);
    let state = first.request_state();
    let (one, two) = bounded(async {
        tokio::join!(
            c.retry_tool("a__effect", json!({}), go(), state),
            c.retry_tool("a__effect", json!({}), go(), state),
        )
    })
    .await;
    assert_eq!(one.text(), Some("effect #1"), "{:?}", one.outcome);
    assert_eq!(two.text(), Some("effect #1"), "{:?}", two.outcome);
    let again = bounded(c.retry_tool("a__effect", json!({}), go(), state)).await;
    assert_eq!(again.text(), Some("effect #1"), "{:?}", again.outcome);
    let count = bounded(c.call_tool("a__effects", json!({}))).await;
    assert_eq!(count.text(), Some("1"));

    // Without it the gateway forwards each retry, with the same upstream
    // state: an upstream that does not guard its legs runs both.
    let first = bounded(c.call_tool("b__effect", json!({}))).await;
    let state = first.request_state();
    let one = bounded(c.retry_tool("b__effect", json!({}), go(), state)).await;
    let two = bounded(c.retry_tool("b__effect", json!({}), go(), state)).await;
    assert_eq!(one.text(), Some("effect #1"), "{:?}", one.outcome);
    assert_eq!(two.text(), Some("effect #2"), "{:?}", two.outcome);

    // A state-only duplicate of another round is not confused with it: a
    // fresh call gets a fresh id.
    let next = bounded(c.call_tool("a__effect", json!({}))).await;
    let done = bounded(c.retry_tool("a__effect", json!({}), go(), next.request_state())).await;
    assert_eq!(done.text(), Some("effect #2"), "{:?}", done.outcome);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_lost_after_the_leg_was_sent_is_outcome_unknown_never_a_second_send() {
    let gateway = start(
        json!({"a": upstream("a", json!({"dedupe": true}))}),
        GatewayOptions::default(),
    )
    .await;
    let c = client(&gateway);
    let mut generations = gateway.generations();
    let first = bounded(c.call_tool("a__effect_then_die", json!({}))).await;
    assert_eq!(first.input_keys(), ["go"], "{:?}", first.outcome);
    let state = first.request_state();
    let lost = bounded(c.retry_tool("a__effect_then_die", json!({}), go(), state)).await;
    assert_eq!(
        lost.error_code(),
        Some(codes::OUTCOME_UNKNOWN),
        "{:?}",
        lost.outcome
    );
    let not_again = |duplicate: &tern_server::testing::Exchange| {
        let error = duplicate.outcome.as_ref().unwrap_err();
        assert_eq!(error.code, codes::OUTCOME_UNKNOWN, "{}", error.message);
        assert!(
            error.message.contains("will not be sent again"),
            "{}",
            error.message
        );
    };
    // At once, while the upstream is down or starting again: answered from
    // the record, not "unavailable, try again".
    not_again(&bounded(c.retry_tool("a__effect_then_die", json!({}), go(), state)).await);
    // Restarted (a new process, which would refuse the old state with
    // -32602 if the retry reached it): the duplicate is not sent again.
    bounded(generations.wait_for(|_| gateway.upstreams()[0].is_up()))
        .await
        .unwrap();
    not_again(&bounded(c.retry_tool("a__effect_then_die", json!({}), go(), state)).await);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_fleet_mode_a_down_upstream_stays_listed_and_its_calls_fail_fast() {
    let dir = std::env::temp_dir().join(format!("tern-gateway-fleet-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("fail");
    let gateway = start(
        json!({
            "a": upstream("a", json!({"env": {FAIL_IF: marker.display().to_string()}})),
            "b": upstream("b", json!({})),
        }),
        GatewayOptions::default().fleet(true),
    )
    .await;
    let c = client(&gateway);
    let before = bounded(all_tools(&c)).await;
    let mut generations = gateway.generations();
    std::fs::write(&marker, b"").unwrap();
    let crashed = bounded(c.call_tool("a__crash", json!({}))).await;
    assert_eq!(crashed.error_code(), Some(codes::OUTCOME_UNKNOWN));
    bounded(generations.wait_for(|g| *g >= 1)).await.unwrap();
    assert!(!gateway.upstreams()[0].is_up());
    // The same pages as before: another replica, with `a` up, lists them.
    assert_eq!(bounded(all_tools(&c)).await, before);
    let down = bounded(c.call_tool("a__ask_name", json!({}))).await;
    let error = down.outcome.unwrap_err();
    assert_eq!(error.code, code::INTERNAL_ERROR);
    assert!(
        error.message.contains("`a` is unavailable"),
        "{}",
        error.message
    );
    assert!(error.data.unwrap()["retryAfterMs"].as_u64().unwrap() >= 1);
    std::fs::remove_file(&marker).unwrap();
    gateway.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
