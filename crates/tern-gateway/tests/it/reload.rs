//! `Gateway::reload`: the servers file loaded again in place.

use serde_json::json;
use tern_gateway::{GatewayConfig, GatewayOptions};
use tern_protocol::error::code;

use crate::dedupe::{go, start};
use crate::gateway::{accept, all_tools, bounded, client, upstream};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_starts_new_upstreams_closes_removed_ones_and_keeps_the_rest() {
    let gateway = start(
        json!({"a": upstream("a", json!({})), "b": upstream("b", json!({}))}),
        GatewayOptions::default(),
    )
    .await;
    let c = client(&gateway);
    // An effect on `a`, to tell later whether it is the same process.
    let first = bounded(c.call_tool("a__effect", json!({}))).await;
    let done = bounded(c.retry_tool("a__effect", json!({}), go(), first.request_state())).await;
    assert_eq!(done.text(), Some("effect #1"));
    // A round of `a` asked before the reload.
    let pending = bounded(c.call_tool("a__ask_name", json!({}))).await;
    let generations = gateway.generations();
    let before = *generations.borrow();

    let file = json!({"mcpServers": {
        "a": upstream("a", json!({})),
        "c": upstream("c", json!({})),
    }})
    .to_string();
    bounded(gateway.reload(GatewayConfig::parse(&file).unwrap())).await;
    assert!(*generations.borrow() > before, "the catalogue was rebuilt");
    let names: Vec<String> = gateway
        .upstreams()
        .iter()
        .map(|u| u.name().to_owned())
        .collect();
    assert_eq!(names, ["a", "c"]);
    let tools = bounded(all_tools(&c)).await;
    assert!(tools.iter().any(|t| t == "c__ask_name"), "{tools:?}");
    assert!(tools.iter().all(|t| !t.starts_with("b__")), "{tools:?}");
    let gone = bounded(c.call_tool("b__ask_name", json!({}))).await;
    assert_eq!(gone.error_code(), Some(code::INVALID_PARAMS));
    let added = bounded(c.call_tool("c__ask_name", json!({}))).await;
    assert_eq!(added.input_keys(), ["name"], "{:?}", added.outcome);
    // `a` is unchanged: the same process (its effect counted), and the
    // round asked before the reload completes.
    let count = bounded(c.call_tool("a__effects", json!({}))).await;
    assert_eq!(count.text(), Some("1"));
    let finished = bounded(c.retry_tool(
        "a__ask_name",
        json!({}),
        json!({"name": accept(json!({"name": "Ann"}))}),
        pending.request_state(),
    ))
    .await;
    assert_eq!(
        finished.text(),
        Some("a: hello Ann"),
        "{:?}",
        finished.outcome
    );

    // A changed entry (a new prefix) is restarted with its new keys.
    let file = json!({"mcpServers": {
        "a": upstream("a", json!({"prefix": "x"})),
        "c": upstream("c", json!({})),
    }})
    .to_string();
    bounded(gateway.reload(GatewayConfig::parse(&file).unwrap())).await;
    let tools = bounded(all_tools(&c)).await;
    assert!(tools.iter().any(|t| t == "x__effects"), "{tools:?}");
    assert!(tools.iter().all(|t| !t.starts_with("a__")), "{tools:?}");
    let count = bounded(c.call_tool("x__effects", json!({}))).await;
    assert_eq!(count.text(), Some("0"), "a new process");
    gateway.close().await;
}
