//! The gateway in front of two real upstream processes.

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::ClientCapabilities;
use tern_protocol::error::code;
use tern_server::KeyRing;
use tern_server::testing::TestClient;

use crate::child::{FAIL_IF, ROLE, WHO};

/// A hang guard, not a timing assertion: a broken test fails instead of
/// stalling the suite.
pub async fn bounded<T>(f: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("the gateway test stalled")
}

/// Asked, never answers: the client of a 2025 session that leaves.
#[derive(Default)]
struct Leaving {
    asked: tokio::sync::Notify,
}

impl tern_server::AnswerSource for Leaving {
    fn answers(
        &self,
        _questions: tern_protocol::InputRequests,
    ) -> tern_server::replay::BoxFuture<
        'static,
        Result<
            Vec<(String, tern_protocol::mrtr::InputResponse)>,
            tern_protocol::error::ErrorObject,
        >,
    > {
        self.asked.notify_one();
        Box::pin(std::future::pending())
    }

    fn question_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

/// Calls `tool` as a 2025 session whose client never answers, and drops
/// the call once it is asked (as the client's `notifications/cancelled`
/// drops it).
pub async fn left_unanswered(c: &TestClient, tool: &str) {
    let leaving = std::sync::Arc::new(Leaving::default());
    let session: std::sync::Arc<dyn tern_server::AnswerSource> = leaving.clone();
    let calling = c.send_awaiting(
        "tools/call",
        json!({"name": tool, "arguments": {}}),
        session,
    );
    bounded(async {
        tokio::select! {
            done = calling => panic!("{tool} ended unanswered: {:?}", done.outcome),
            () = leaving.asked.notified() => {}
        }
    })
    .await;
}

/// An upstream entry: this test binary as `who`, with `extra` keys.
pub fn upstream(who: &str, extra: Value) -> Value {
    let exe = std::env::current_exe().unwrap();
    let mut entry = json!({
        "command": exe.display().to_string(),
        "args": ["--exact", "child::entry", "--quiet", "--test-threads=1"],
        "env": {ROLE: "upstream", WHO: who},
    });
    for (k, v) in extra.as_object().unwrap() {
        if k == "env" {
            for (ek, ev) in v.as_object().unwrap() {
                entry["env"][ek] = ev.clone();
            }
        } else {
            entry[k] = v.clone();
        }
    }
    entry
}

async fn start(servers: Value) -> Result<Gateway, String> {
    let file = json!({"mcpServers": servers}).to_string();
    Gateway::start(
        GatewayConfig::parse(&file)?,
        GatewayOptions::default().page_size(4),
    )
    .await
}

pub fn client(gateway: &Gateway) -> TestClient {
    TestClient::new(
        gateway
            .server_builder()
            .keys(KeyRing::generate())
            .build()
            .unwrap(),
    )
}

pub async fn all_tools(c: &TestClient) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let params = cursor.map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let page = c.send("tools/list", params).await.result().unwrap();
        names.extend(
            page["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_owned()),
        );
        match page["nextCursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return names,
        }
    }
}

pub fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_catalogue_over_two_upstreams_routes_every_call() {
    let gateway = bounded(start(json!({
        "a": upstream("a", json!({})),
        "b": upstream("b", json!({"prefix": "", "deny": ["crash", "effect", "effect_then_die", "effects", "hold", "held", "touch", "relist", "task_ask", "task_go", "task_hold", "task_held", "task_ask_hold", "task_ask_held"]})),
    })))
    .await
    .unwrap();
    assert!(gateway.ready());
    let c = client(&gateway);
    let mut tools = bounded(all_tools(&c)).await;
    tools.sort();
    assert_eq!(
        tools,
        [
            "a__ask_name",
            "a__caps",
            "a__crash",
            "a__effect",
            "a__effect_then_die",
            "a__effects",
            "a__held",
            "a__hold",
            "a__relist",
            "a__task_ask",
            "a__task_ask_held",
            "a__task_ask_hold",
            "a__task_go",
            "a__task_held",
            "a__task_hold",
            "a__touch",
            "ask_name",
            "caps"
        ]
    );
    let page = c.send("tools/list", json!({})).await.result().unwrap();
    assert_eq!(page["tools"].as_array().unwrap().len(), 4, "paged by 4");
    assert_eq!(
        page["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "tern-gateway"
    );
    // A changed cursor is refused.
    let bad = c.send("tools/list", json!({"cursor": "AAAA"})).await;
    assert_eq!(bad.error_code(), Some(code::INVALID_PARAMS));

    // A question relayed from each, answered through the gateway.
    for (name, who) in [("a__ask_name", "a"), ("ask_name", "b")] {
        let first = bounded(c.call_tool(name, json!({}))).await;
        assert_eq!(first.input_keys(), ["name"], "{:?}", first.outcome);
        let done = bounded(c.retry_tool(
            name,
            json!({}),
            json!({"name": accept(json!({"name": "Ann"}))}),
            first.request_state(),
        ))
        .await;
        assert_eq!(
            done.text(),
            Some(format!("{who}: hello Ann").as_str()),
            "{:?}",
            done.outcome
        );
    }
    // A state of one tool does not open for another.
    let first = bounded(c.call_tool("a__ask_name", json!({}))).await;
    let crossed = bounded(c.retry_tool(
        "ask_name",
        json!({}),
        json!({"name": accept(json!({"name": "Ann"}))}),
        first.request_state(),
    ))
    .await;
    assert_eq!(crossed.error_code(), Some(code::INVALID_PARAMS));

    // Prompts by name, resources by who lists them, then by template.
    let prompt = bounded(c.send("prompts/get", json!({"name": "a__greeting"})))
        .await
        .result()
        .unwrap();
    assert_eq!(prompt["messages"][0]["content"]["text"], "greetings from a");
    let readme = bounded(c.send("resources/read", json!({"uri": "b://readme"})))
        .await
        .result()
        .unwrap();
    assert_eq!(readme["contents"][0]["text"], "readme of b");
    let file = bounded(c.send("resources/read", json!({"uri": "a-files://x"})))
        .await
        .result()
        .unwrap();
    assert_eq!(file["contents"][0]["text"], "file a-files://x");
    let none = bounded(c.send("resources/read", json!({"uri": "c://nothing"}))).await;
    assert_eq!(none.error_code(), Some(code::INVALID_PARAMS));
    // A denied tool is neither listed nor callable; nor is a name nobody has.
    for name in ["crash", "nope"] {
        let unknown = bounded(c.call_tool(name, json!({}))).await;
        assert_eq!(unknown.error_code(), Some(code::INVALID_PARAMS), "{name}");
    }
    let report = gateway.report();
    assert!(
        report.contains("a: up, 2026-07-28") && report.contains("  tool a__ask_name"),
        "{report}"
    );
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collision_is_refused_at_start_naming_both() {
    let err = bounded(start(json!({
        "a": upstream("a", json!({"prefix": ""})),
        "b": upstream("b", json!({"prefix": ""})),
    })))
    .await
    .unwrap_err();
    assert!(err.contains("comes from both `a` and `b`"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clients_capabilities_are_forwarded_never_more() {
    let gateway = bounded(start(json!({"a": upstream("a", json!({}))})))
        .await
        .unwrap();
    let form_only = client(&gateway).with_capabilities(
        ClientCapabilities::default()
            .with_elicitation_form()
            .with_extension(tern_protocol::task::TASKS_EXTENSION),
    );
    let seen = bounded(form_only.call_tool("a__caps", json!({}))).await;
    let declared: Value = serde_json::from_str(seen.text().unwrap()).unwrap();
    assert_eq!(
        declared,
        json!({"elicitation": {"form": {}}, "extensions": {"io.modelcontextprotocol/tasks": {}}})
    );
    let none = client(&gateway).with_capabilities(ClientCapabilities::default());
    let seen = bounded(none.call_tool("a__caps", json!({}))).await;
    assert_eq!(seen.text(), Some("{}"));
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_upstream_leaves_the_lists_fails_fast_and_comes_back() {
    let dir = std::env::temp_dir().join(format!("tern-gateway-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let marker = dir.join("fail");
    let gateway = bounded(start(json!({
        "a": upstream("a", json!({"env": {FAIL_IF: marker.display().to_string()}})),
        "b": upstream("b", json!({})),
    })))
    .await
    .unwrap();
    let c = client(&gateway);
    let mut generations = gateway.generations();
    // Its restarts fail until the marker goes.
    std::fs::write(&marker, b"").unwrap();
    let crashed = bounded(c.call_tool("a__crash", json!({}))).await;
    assert_eq!(
        crashed.error_code(),
        Some(tern_server::error::codes::OUTCOME_UNKNOWN),
        "{:?}",
        crashed.outcome
    );
    bounded(generations.wait_for(|g| *g >= 1)).await.unwrap();
    let tools = bounded(all_tools(&c)).await;
    assert!(tools.iter().all(|t| t.starts_with("b__")), "{tools:?}");
    assert!(gateway.ready(), "b is still up");
    // Its calls fail at once, with when to come back.
    let down = bounded(c.call_tool("a__ask_name", json!({}))).await;
    let error = down.outcome.unwrap_err();
    assert_eq!(error.code, code::INTERNAL_ERROR);
    assert!(
        error.message.contains("`a` is unavailable"),
        "{}",
        error.message
    );
    assert!(error.data.unwrap()["retryAfterMs"].as_u64().unwrap() >= 1);
    // Restarted, it is listed again and answers.
    std::fs::remove_file(&marker).unwrap();
    bounded(generations.wait_for(|_| gateway.upstreams()[0].is_up()))
        .await
        .unwrap();
    let tools = bounded(all_tools(&c)).await;
    assert!(tools.contains(&"a__ask_name".to_owned()), "{tools:?}");
    let back = bounded(c.call_tool("a__ask_name", json!({}))).await;
    assert_eq!(back.input_keys(), ["name"], "{:?}", back.outcome);
    gateway.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
