//! The gateway's spans and counters per upstream (its `metrics` module),
//! read from what a global DEBUG subscriber writes: every request sent to
//! an upstream counted by upstream, method and outcome, timed, and run in
//! an `upstream` span under tern-server's `relay` span; a down upstream
//! counted.

use serde_json::json;
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::error::code;
use tern_test_support::logs::Captured;

use crate::child::FAIL_IF;
use crate::gateway::{accept, bounded, client, upstream};

/// The lines that name the upstream `metered` (the other tests' upstreams
/// have other names).
fn lines(captured: &Captured) -> Vec<String> {
    captured
        .text()
        .lines()
        .filter(|l| l.contains("upstream=metered") || l.contains("upstream=\"metered\""))
        .map(str::to_owned)
        .collect()
}

fn counted(lines: &[String], outcome: &str) -> bool {
    lines.iter().any(|l| {
        l.contains("monotonic_counter.tern.gateway.upstream_requests=1")
            && l.contains("method=\"tools/call\"")
            && l.contains(&format!("outcome=\"{outcome}\""))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_request_is_counted_timed_and_spanned_by_upstream_and_outcome() {
    let captured = tern_test_support::logs::global();
    let dir = std::env::temp_dir().join(format!("tern-gateway-metrics-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("fail");
    let file = json!({"mcpServers": {
        "metered": upstream("metered", json!({"env": {FAIL_IF: marker.display().to_string()}})),
    }});
    let gateway = bounded(Gateway::start(
        GatewayConfig::parse(&file.to_string()).unwrap(),
        GatewayOptions::default(),
    ))
    .await
    .unwrap();
    let c = client(&gateway);
    let asked = bounded(c.call_tool("metered__ask_name", json!({}))).await;
    assert_eq!(asked.input_keys(), ["name"], "{:?}", asked.outcome);
    let done = bounded(c.retry_tool(
        "metered__ask_name",
        json!({}),
        json!({"name": accept(json!({"name": "Ann"}))}),
        asked.request_state(),
    ))
    .await;
    assert_eq!(
        done.text(),
        Some("metered: hello Ann"),
        "{:?}",
        done.outcome
    );
    // Killed mid-call (its restarts fail while the marker is there): the
    // outcome is unknown, then its calls are refused while it is down.
    std::fs::write(&marker, b"").unwrap();
    let mut generations = gateway.generations();
    let crashed = bounded(c.call_tool("metered__crash", json!({}))).await;
    assert_eq!(
        crashed.error_code(),
        Some(tern_server::error::codes::OUTCOME_UNKNOWN),
        "{:?}",
        crashed.outcome
    );
    bounded(generations.wait_for(|g| *g >= 1)).await.unwrap();
    let down = bounded(c.call_tool("metered__ask_name", json!({}))).await;
    assert_eq!(
        down.error_code(),
        Some(code::INTERNAL_ERROR),
        "{:?}",
        down.outcome
    );
    gateway.close().await;
    let _ = std::fs::remove_dir_all(&dir);

    let lines = lines(&captured);
    for outcome in ["input_required", "ok", "unknown", "unavailable"] {
        assert!(
            counted(&lines, outcome),
            "no {outcome} counted for metered in:\n{}",
            lines.join("\n")
        );
    }
    assert!(
        lines
            .iter()
            .any(|l| l.contains("histogram.tern.gateway.upstream_ms=")
                && l.contains("method=\"tools/call\"")),
        "no latency for metered in:\n{}",
        lines.join("\n")
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("monotonic_counter.tern.gateway.upstream_down=1")),
        "its going down was not counted:\n{}",
        lines.join("\n")
    );
    // The span of each request, under the leg's `relay` span, closed with
    // its outcome.
    assert!(
        lines.iter().any(|l| l.contains("relay{")
            && l.contains("upstream{upstream=metered method=\"tools/call\" outcome=\"ok\"}")
            && l.contains("close")),
        "no closed upstream span under a relay span in:\n{}",
        lines.join("\n")
    );
}
