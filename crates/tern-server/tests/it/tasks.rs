//! The Tasks extension
//! (<https://modelcontextprotocol.io/extensions/tasks/overview>), each rule a
//! test named after it.

#![allow(
    clippy::many_single_char_names,
    clippy::too_many_lines,
    reason = "s/c/t/id read best in these short protocol exchanges; the fixture server is one list"
)]

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tern_protocol::ClientCapabilities;
use tern_protocol::task::TASKS_EXTENSION;
use tern_server::error::codes;
use tern_server::testing::{ManualClock, TestClient};
use tern_server::{
    Answer, Args, Ctx, Elicit, Principal, Server, TaskConfig, TaskSupport, ToolDef, ToolError,
};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

fn with_tasks() -> ClientCapabilities {
    ClientCapabilities::default()
        .with_elicitation_form()
        .with_extension(TASKS_EXTENSION)
}

#[derive(Deserialize, JsonSchema)]
struct Choice {
    on_error: String,
}

impl tern_server::Asks for Choice {
    fn question(_parts: &tern_server::handler::CallParts) -> Elicit<Self> {
        Elicit::form("Skip or abort?")
    }
}

#[derive(Deserialize, JsonSchema)]
struct Count {
    n: u32,
}

/// A gate the test opens: bodies wait on it, so the test decides when a
/// task may end (no sleeps).
#[derive(Clone, Default)]
struct Gate(Arc<Notify>);

impl Gate {
    async fn wait(&self) {
        self.0.notified().await;
    }
    fn open(&self) {
        self.0.notify_one();
    }
}

fn server_with(config: TaskConfig, clock: Option<Arc<ManualClock>>, gate: &Gate) -> Server {
    let g = gate.clone();
    let gated = move |ctx: Ctx| {
        let g = g.clone();
        async move {
            ctx.into_task().await;
            ctx.progress(1.0, Some(2.0), Some("half way"));
            tokio::select! {
                () = g.wait() => Ok("gated done".to_owned()),
                () = ctx.cancelled() => Err(ToolError::new("stopped")),
            }
        }
    };
    let g = gate.clone();
    let finish_anyway = move |ctx: Ctx| {
        let g = g.clone();
        async move {
            ctx.into_task().await;
            g.wait().await;
            Ok::<_, ToolError>(format!("finished; cancelled = {}", ctx.is_cancelled()))
        }
    };
    let asks = |ctx: Ctx| async move {
        ctx.into_task().await;
        let a = ctx
            .ask(Elicit::<Count>::form("How many?").key("count"))
            .await?;
        let Answer::Accept(Count { n }) = a else {
            return Ok("declined".to_owned());
        };
        Ok::<_, ToolError>(format!("n = {n}"))
    };
    let two = |ctx: Ctx| async move {
        ctx.into_task().await;
        let (a, b) = tokio::join!(
            ctx.ask(Elicit::<Choice>::form("First").key("a")),
            ctx.ask(Elicit::<Choice>::form("Second").key("b")),
        );
        let pick = |x: Answer<Choice>| match x {
            Answer::Accept(c) => c.on_error,
            _ => "-".to_owned(),
        };
        Ok::<_, ToolError>(format!("{} {}", pick(a?), pick(b?)))
    };
    let mrtr_then_task = |ctx: Ctx| async move {
        let a = ctx
            .ask(Elicit::<Choice>::form("Before").key("before"))
            .await?;
        let became = ctx.into_task().await;
        let Answer::Accept(Choice { on_error }) = a else {
            return Ok("declined".to_owned());
        };
        Ok::<_, ToolError>(format!("{on_error}; task = {became}"))
    };
    let mut builder = Server::builder("tasks-test", "1")
        .task_config(config)
        .tool(ToolDef::new("gated", "", gated).task(TaskSupport::Optional))
        .tool(ToolDef::new("finish_anyway", "", finish_anyway).task(TaskSupport::Optional))
        .tool(
            ToolDef::new("asks", "", asks)
                .task(TaskSupport::Optional)
                .elicits::<Count>(),
        )
        .tool(
            ToolDef::new("two", "", two)
                .task(TaskSupport::Optional)
                .elicits::<Choice>(),
        )
        .tool(
            ToolDef::new("mrtr_then_task", "", mrtr_then_task)
                .task(TaskSupport::Optional)
                .elicits::<Choice>(),
        )
        .tool(
            ToolDef::new("required", "", || async { "ran" })
                .task(TaskSupport::Required)
                .task_from_start(),
        )
        .tool(
            ToolDef::new(
                "asked",
                "",
                |tern_server::Asked(choice): tern_server::Asked<Choice>| async move {
                    match choice {
                        Answer::Accept(c) => c.on_error,
                        _ => "-".to_owned(),
                    }
                },
            )
            .task(TaskSupport::Required)
            .task_from_start(),
        )
        .tool(
            ToolDef::new("panics", "", |ctx: Ctx| async move {
                ctx.into_task().await;
                assert!(!ctx.is_task(), "the body panics");
                "unreachable"
            })
            .task(TaskSupport::Optional),
        )
        .tool(
            ToolDef::new("tool_error", "", || async {
                Err::<String, _>(ToolError::new("it broke"))
            })
            .task_from_start(),
        )
        .tool(ToolDef::new("plain", "", || async { "plain" }))
        .tool(
            ToolDef::new(
                "echo",
                "",
                |Args(c): Args<Count>| async move { c.n.to_string() },
            )
            .task_from_start(),
        );
    if let Some(clock) = clock {
        builder = builder.clock(clock);
    }
    builder.build().unwrap()
}

fn server(gate: &Gate) -> Server {
    server_with(TaskConfig::default(), None, gate)
}

fn client(server: &Server) -> TestClient {
    TestClient::new(server.clone()).with_capabilities(with_tasks())
}

async fn create(client: &TestClient, tool: &str) -> String {
    let ex = client.call_tool(tool, json!({})).await;
    let r = ex.result().unwrap();
    assert_eq!(r["resultType"], "task", "{r}");
    r["taskId"].as_str().unwrap().to_owned()
}

async fn get(client: &TestClient, id: &str) -> Result<Value, tern_protocol::ErrorObject> {
    client
        .send("tasks/get", json!({"taskId": id}))
        .await
        .result()
}

/// Polls `tasks/get` until `done` holds: at most 500 polls, 10 ms apart.
async fn until(client: &TestClient, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    for _ in 0..500 {
        let t = get(client, id).await.unwrap();
        if done(&t) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("task {id} never reached the expected state");
}

fn terminal(t: &Value) -> bool {
    matches!(
        t["status"].as_str(),
        Some("completed" | "failed" | "cancelled")
    )
}

#[tokio::test]
async fn a_required_task_tool_without_the_extension_gets_32021_with_the_extension() {
    let s = server(&Gate::default());
    let plain = TestClient::new(s);
    let err = plain
        .call_tool("required", json!({}))
        .await
        .result()
        .unwrap_err();
    assert_eq!(err.code, -32021);
    let data = err.data.unwrap();
    assert!(
        data["requiredCapabilities"]["extensions"][TASKS_EXTENSION].is_object(),
        "{data}"
    );
}

#[tokio::test]
async fn an_optional_task_tool_without_the_extension_runs_inline() {
    let s = server(&Gate::default());
    let plain = TestClient::new(s);
    let ex = plain.call_tool("echo", json!({"n": 7})).await;
    assert_eq!(ex.result_type(), Some("complete"));
    assert_eq!(ex.text(), Some("7"));
}

#[tokio::test]
async fn create_task_result_is_stored_before_it_is_sent_and_flat() {
    let gate = Gate::default();
    let s = server(&gate);
    let c = client(&s);
    let r = c.call_tool("gated", json!({})).await.result().unwrap();
    for absent in [
        "requestState",
        "result",
        "error",
        "inputRequests",
        "task",
        "ttl",
        "pollInterval",
    ] {
        assert!(
            r.get(absent).is_none(),
            "CreateTaskResult carries {absent}: {r}"
        );
    }
    let id = r["taskId"].as_str().unwrap();
    assert_eq!(id.len(), 32, "128 random bits, hex");
    assert!(r["createdAt"].as_str().unwrap().ends_with('Z'));
    assert!(r["ttlMs"].as_u64().unwrap() > 0);
    assert_eq!(r["pollIntervalMs"], 500);
    let t = get(&c, id).await.unwrap();
    assert_eq!(t["taskId"], id, "tasks/get right after resolves");
    assert_eq!(t["resultType"], "complete");
    gate.open();
    let done = until(&c, id, terminal).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"]["content"][0]["text"], "gated done");
}

#[tokio::test]
async fn tasks_methods_without_the_extension_get_32021() {
    let s = server(&Gate::default());
    let plain = TestClient::new(s);
    for (m, p) in [
        ("tasks/get", json!({"taskId": "x"})),
        ("tasks/update", json!({"taskId": "x", "inputResponses": {}})),
        ("tasks/cancel", json!({"taskId": "x"})),
    ] {
        let err = plain.send(m, p).await.result().unwrap_err();
        assert_eq!(err.code, -32021, "{m}");
    }
}

#[tokio::test]
async fn tasks_result_and_tasks_list_are_method_not_found_whatever_the_capabilities() {
    let s = server(&Gate::default());
    let c = client(&s);
    for m in ["tasks/result", "tasks/list", "tasks/other"] {
        let err = c
            .send(m, json!({"taskId": "x"}))
            .await
            .result()
            .unwrap_err();
        assert_eq!(err.code, -32601, "{m}");
    }
}

#[tokio::test]
async fn the_extension_is_advertised_only_when_tasks_can_be_created() {
    let s = server(&Gate::default());
    let caps = s.capabilities();
    assert!(caps.extension(TASKS_EXTENSION));
    let none = Server::builder("n", "1")
        .tool(ToolDef::new("plain", "", || async { "x" }))
        .build()
        .unwrap();
    assert!(!none.capabilities().extension(TASKS_EXTENSION));
    let err = TestClient::new(none)
        .with_capabilities(with_tasks())
        .send("tasks/get", json!({"taskId": "x"}))
        .await
        .result()
        .unwrap_err();
    assert_eq!(
        err.code, -32601,
        "no tasks here: the methods are not served"
    );
}

#[tokio::test]
async fn unknown_and_foreign_ids_get_the_same_32602() {
    let gate = Gate::default();
    let s = server(&gate);
    let alice = client(&s).with_principal(Principal::new("alice"));
    let bob = client(&s).with_principal(Principal::new("bob"));
    let id = create(&alice, "gated").await;
    let unknown = get(&bob, "0123456789abcdef0123456789abcdef")
        .await
        .unwrap_err();
    assert_eq!(unknown.code, -32602);
    for (m, p) in [
        ("tasks/get", json!({"taskId": id})),
        ("tasks/update", json!({"taskId": id, "inputResponses": {}})),
        ("tasks/cancel", json!({"taskId": id})),
    ] {
        let foreign = bob.send(m, p).await.result().unwrap_err();
        assert_eq!(foreign.code, unknown.code, "{m}");
        assert_eq!(
            foreign.message, unknown.message,
            "{m}: no difference to probe"
        );
    }
    // Bob's cancel did nothing: Alice's task still ends normally.
    gate.open();
    assert_eq!(until(&alice, &id, terminal).await["status"], "completed");
}

#[tokio::test]
async fn an_expired_task_gets_32602() {
    let clock = ManualClock::new();
    let gate = Gate::default();
    let s = server_with(
        TaskConfig::default()
            .ttl(Duration::from_secs(60))
            .retention(Duration::from_secs(60)),
        Some(Arc::clone(&clock)),
        &gate,
    );
    let c = client(&s);
    let id = create(&c, "required").await;
    until(&c, &id, terminal).await;
    clock.tick(Duration::from_secs(121));
    assert_eq!(get(&c, &id).await.unwrap_err().code, -32602);
}

#[tokio::test]
async fn update_applies_answers_before_the_ack_accepts_a_partial_set_and_ignores_other_keys() {
    let s = server(&Gate::default());
    let c = client(&s);
    let id = create(&c, "two").await;
    let t = until(&c, &id, |t| {
        t["inputRequests"].as_object().is_some_and(|m| m.len() == 2)
    })
    .await;
    assert_eq!(t["status"], "input_required");
    let ack = c
        .send(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {
                "a": {"action": "accept", "content": {"on_error": "skip"}},
                "nonsense": {"whatever": true}
            }}),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(ack, json!({"resultType": "complete"}));
    // Applied before the ack: the very next poll no longer lists `a`.
    let t = get(&c, &id).await.unwrap();
    assert_eq!(t["status"], "input_required");
    let keys: Vec<&String> = t["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["b"]);
    // An answered key again is ignored.
    c.send(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"a": {"action": "accept", "content": {"on_error": "abort"}}}}),
    )
    .await
    .result()
    .unwrap();
    c.send(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"b": {"action": "accept", "content": {"on_error": "abort"}}}}),
    )
    .await
    .result()
    .unwrap();
    let done = until(&c, &id, terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "skip abort");
}

#[tokio::test]
async fn a_refused_answer_is_acked_retired_and_asked_again_under_a_new_key() {
    let s = server(&Gate::default());
    let c = client(&s);
    let id = create(&c, "asks").await;
    let t = until(&c, &id, |t| t["status"] == "input_required").await;
    assert!(t["inputRequests"]["count"].is_object(), "{t}");
    let ack = c
        .send(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"count": {"action": "accept", "content": {"n": "not a number"}}}}),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(ack["resultType"], "complete");
    let again = until(&c, &id, |t| {
        t["status"] == "input_required" && t["inputRequests"].get("count").is_none()
    })
    .await;
    let keys: Vec<String> = again["inputRequests"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys.len(), 1);
    assert_ne!(keys[0], "count", "a key is never reused");
    // The old key is retired: answering it does nothing.
    c.send(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"count": {"action": "accept", "content": {"n": 1}}}}),
    )
    .await
    .result()
    .unwrap();
    assert_eq!(
        get(&c, &id).await.unwrap()["inputRequests"][&keys[0]]["method"],
        "elicitation/create"
    );
    c.send(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {&keys[0]: {"action": "accept", "content": {"n": 5}}}}),
    )
    .await
    .result()
    .unwrap();
    assert_eq!(
        until(&c, &id, terminal).await["result"]["content"][0]["text"],
        "n = 5"
    );
}

#[tokio::test]
async fn progress_sets_the_status_message_and_sends_no_notification() {
    let gate = Gate::default();
    let s = server(&gate);
    let c = client(&s);
    let ex = c
        .send(
            "tools/call",
            json!({"name": "gated", "arguments": {}, "_meta": {"progressToken": "p"}}),
        )
        .await;
    assert!(ex.notifications.is_empty(), "{:?}", ex.notifications);
    let id = ex.result().unwrap()["taskId"].as_str().unwrap().to_owned();
    let t = until(&c, &id, |t| t["statusMessage"] == "half way").await;
    assert_eq!(t["status"], "working");
    gate.open();
    until(&c, &id, terminal).await;
}

#[tokio::test]
async fn cancel_fires_ctx_cancelled_and_on_a_terminal_task_is_an_empty_ack() {
    let s = server(&Gate::default());
    let c = client(&s);
    let id = create(&c, "gated").await;
    let ack = c
        .send("tasks/cancel", json!({"taskId": id}))
        .await
        .result()
        .unwrap();
    assert_eq!(ack, json!({"resultType": "complete"}));
    let t = until(&c, &id, terminal).await;
    assert_eq!(t["status"], "cancelled");
    assert!(t.get("result").is_none() && t.get("error").is_none(), "{t}");
    let again = c
        .send("tasks/cancel", json!({"taskId": id}))
        .await
        .result()
        .unwrap();
    assert_eq!(again, json!({"resultType": "complete"}));
}

#[tokio::test]
async fn cancel_is_cooperative_a_task_may_still_end_completed() {
    let gate = Gate::default();
    let s = server(&gate);
    let c = client(&s);
    let id = create(&c, "finish_anyway").await;
    c.send("tasks/cancel", json!({"taskId": id}))
        .await
        .result()
        .unwrap();
    until(&c, &id, |t| t["statusMessage"] == "Cancelling").await;
    gate.open();
    let t = until(&c, &id, terminal).await;
    assert_eq!(t["status"], "completed");
}

#[tokio::test]
async fn cancel_while_input_required_ends_cancelled() {
    let s = server(&Gate::default());
    let c = client(&s);
    let id = create(&c, "asks").await;
    until(&c, &id, |t| t["status"] == "input_required").await;
    c.send("tasks/cancel", json!({"taskId": id}))
        .await
        .result()
        .unwrap();
    assert_eq!(until(&c, &id, terminal).await["status"], "cancelled");
}

/// A task nobody answers ends `failed` with -31003 after the input timeout
/// (not its whole ttl), and its quota slot is free again: a caller's
/// waiting tasks cannot hold the quota for an hour.
#[tokio::test]
async fn a_task_left_unanswered_ends_failed_after_the_input_timeout() {
    let gate = Gate::default();
    let s = server_with(
        TaskConfig::default()
            .quota(1, 1 << 20)
            .input_timeout(Duration::from_millis(200)),
        None,
        &gate,
    );
    let c = client(&s);
    let id = create(&c, "asks").await;
    until(&c, &id, |t| t["status"] == "input_required").await;
    // At its quota of one, a second task is refused while the first waits.
    let refused = c.call_tool("asks", json!({})).await;
    assert!(refused.result().is_err(), "the quota holds while it waits");
    let ended = until(&c, &id, terminal).await;
    assert_eq!(ended["status"], "failed", "{ended}");
    let result = c
        .send("tasks/get", json!({"taskId": id}))
        .await
        .result()
        .unwrap();
    assert_eq!(result["error"]["code"], -31003, "{result}");
    // The slot is free again.
    let again = create(&c, "asks").await;
    assert_ne!(again, id);
}

#[tokio::test]
async fn a_panicking_body_ends_failed_and_a_tool_error_ends_completed_with_is_error() {
    let s = server(&Gate::default());
    let c = client(&s);
    let id = create(&c, "panics").await;
    let t = until(&c, &id, terminal).await;
    assert_eq!(t["status"], "failed");
    assert_eq!(t["error"]["code"], -32603);
    assert!(t["statusMessage"].as_str().unwrap().contains("panicked"));
    assert!(t.get("result").is_none());
    let id = create(&c, "tool_error").await;
    let t = until(&c, &id, terminal).await;
    assert_eq!(t["status"], "completed");
    assert_eq!(t["result"]["isError"], true);
    assert!(t.get("error").is_none());
}

#[tokio::test]
async fn mrtr_before_the_task_then_a_duplicate_of_the_creating_retry_gets_the_same_task_id() {
    let s = server(&Gate::default());
    let c = client(&s);
    let first = c.call_tool("mrtr_then_task", json!({})).await;
    assert_eq!(first.result_type(), Some("input_required"));
    let state = first.request_state().unwrap().to_owned();
    let answer = json!({"before": {"action": "accept", "content": {"on_error": "skip"}}});
    let a = c
        .retry_tool("mrtr_then_task", json!({}), answer.clone(), Some(&state))
        .await
        .result()
        .unwrap();
    let b = c
        .retry_tool("mrtr_then_task", json!({}), answer, Some(&state))
        .await
        .result()
        .unwrap();
    assert_eq!(a["resultType"], "task");
    assert_eq!(a["taskId"], b["taskId"], "one task per logical call");
    let id = a["taskId"].as_str().unwrap();
    let t = until(&c, id, terminal).await;
    assert_eq!(t["result"]["content"][0]["text"], "skip; task = true");
}

#[tokio::test]
async fn without_the_extension_into_task_returns_false_and_the_call_stays_mrtr() {
    let s = server(&Gate::default());
    let plain = TestClient::new(s);
    let first = plain.call_tool("mrtr_then_task", json!({})).await;
    let state = first.request_state().unwrap().to_owned();
    let done = plain
        .retry_tool(
            "mrtr_then_task",
            json!({}),
            json!({"before": {"action": "accept", "content": {"on_error": "abort"}}}),
            Some(&state),
        )
        .await;
    assert_eq!(done.result_type(), Some("complete"));
    assert_eq!(done.text(), Some("abort; task = false"));
}

#[tokio::test]
async fn a_disconnect_after_into_task_no_longer_cancels_it() {
    let gate = Gate::default();
    let s = server(&gate);
    let c = client(&s);
    let cancel = CancellationToken::new();
    let params = c.with_meta(json!({"name": "gated", "arguments": {}}));
    let r = c
        .send_as(
            "tools/call",
            Some(params),
            &Principal::anonymous(),
            cancel.clone(),
        )
        .await
        .result()
        .unwrap();
    cancel.cancel();
    let id = r["taskId"].as_str().unwrap();
    gate.open();
    let t = until(&c, id, terminal).await;
    assert_eq!(t["status"], "completed", "{t}");
}

#[tokio::test]
async fn questions_are_checked_against_the_capabilities_of_the_creating_request() {
    let s = server(&Gate::default());
    let no_elicitation = TestClient::new(s)
        .with_capabilities(ClientCapabilities::default().with_extension(TASKS_EXTENSION));
    let id = create(&no_elicitation, "asks").await;
    let t = until(&no_elicitation, &id, terminal).await;
    assert_eq!(t["status"], "failed");
    assert_eq!(t["error"]["code"], -32021, "{t}");
}

#[tokio::test]
async fn a_lapsed_lease_reads_failed_with_outcome_unknown_working_or_input_required() {
    let clock = ManualClock::new();
    let gate = Gate::default();
    let s = server_with(
        TaskConfig::default()
            .ttl(Duration::from_secs(36_000))
            .lease(Duration::from_secs(3600)),
        Some(Arc::clone(&clock)),
        &gate,
    );
    let c = client(&s);
    let working = create(&c, "gated").await;
    let asking = create(&c, "asks").await;
    until(&c, &asking, |t| t["status"] == "input_required").await;
    // No renewal within the injected clock's two hours: the runner is gone
    // as far as the store can tell.
    clock.tick(Duration::from_secs(7200));
    for id in [&working, &asking] {
        let t = get(&c, id).await.unwrap();
        assert_eq!(t["status"], "failed", "{t}");
        assert_eq!(t["error"]["code"], codes::OUTCOME_UNKNOWN);
        assert!(t.get("inputRequests").is_none());
    }
    // The fenced runner cannot overwrite it when its body ends.
    gate.open();
    let again = get(&c, &working).await.unwrap();
    assert_eq!(again["status"], "failed");
}

#[tokio::test]
async fn a_task_failed_by_its_lapsed_lease_leaves_after_the_configured_retention() {
    let clock = ManualClock::new();
    let gate = Gate::default();
    let s = server_with(
        TaskConfig::default()
            .ttl(Duration::from_secs(36_000))
            .lease(Duration::from_secs(3600))
            .retention(Duration::from_secs(60)),
        Some(Arc::clone(&clock)),
        &gate,
    );
    let c = client(&s);
    let id = create(&c, "gated").await;
    clock.tick(Duration::from_secs(7200));
    assert_eq!(get(&c, &id).await.unwrap()["status"], "failed");
    // Kept 60 s from the read that failed it, not the default hour.
    clock.tick(Duration::from_secs(61));
    assert_eq!(get(&c, &id).await.unwrap_err().code, -32602);
    gate.open();
}

#[tokio::test]
async fn a_clean_shutdown_marks_running_tasks_failed_at_once() {
    let s = server(&Gate::default());
    let c = client(&s);
    let working = create(&c, "gated").await;
    let asking = create(&c, "asks").await;
    until(&c, &asking, |t| t["status"] == "input_required").await;
    s.stop_tasks().await;
    for id in [&working, &asking] {
        let t = get(&c, id).await.unwrap();
        assert_eq!(t["status"], "failed", "{t}");
        assert_eq!(t["error"]["code"], codes::OUTCOME_UNKNOWN);
        assert!(t["error"]["message"].as_str().unwrap().contains("stopped"));
    }
}

#[tokio::test]
async fn live_tasks_are_bounded_per_principal() {
    let gate = Gate::default();
    let s = server_with(TaskConfig::default().quota(2, 1 << 20), None, &gate);
    let alice = client(&s).with_principal(Principal::new("alice"));
    let bob = client(&s).with_principal(Principal::new("bob"));
    create(&alice, "gated").await;
    create(&alice, "gated").await;
    let err = alice
        .call_tool("gated", json!({}))
        .await
        .result()
        .unwrap_err();
    assert_eq!(err.code, codes::STORE_FULL);
    create(&bob, "gated").await;
}

#[tokio::test]
async fn finished_tasks_with_tiny_results_still_count_against_the_byte_quota() {
    // Each kept record is charged RECORD_CHARGE beside its result: room for
    // three records. Without the charge, tiny results never filled it and
    // finished tasks piled up until their retention ran out.
    let quota = 3 * tern_server::task::RECORD_CHARGE;
    let s = server_with(
        TaskConfig::default().quota(64, quota),
        None,
        &Gate::default(),
    );
    let alice = client(&s).with_principal(Principal::new("alice"));
    let mut refused = None;
    for i in 0..6 {
        match alice.call_tool("required", json!({})).await.result() {
            Ok(created) => {
                let id = created["taskId"].as_str().unwrap().to_owned();
                let done = until(&alice, &id, terminal).await;
                assert_eq!(done["status"], "completed", "{done}");
            }
            Err(e) => {
                assert_eq!(e.code, codes::STORE_FULL);
                refused = Some(i);
                break;
            }
        }
    }
    assert_eq!(refused, Some(3), "the fourth record does not fit");
    let bob = client(&s).with_principal(Principal::new("bob"));
    create(&bob, "required").await;
}

#[tokio::test]
async fn a_tasks_result_larger_than_the_cap_ends_failed() {
    let s = server_with(
        TaskConfig::default().max_result_bytes(10),
        None,
        &Gate::default(),
    );
    let c = client(&s);
    let id = create(&c, "required").await;
    let t = until(&c, &id, terminal).await;
    assert_eq!(t["status"], "failed");
    assert_eq!(t["error"]["code"], codes::STORE_FULL);
}

#[tokio::test]
async fn a_finished_task_leaves_after_its_retention_even_when_shorter_than_its_ttl() {
    // ttl 1 h (the default), retention 60 s: a finished task is kept 60 s
    // past its end, not the hour. (It was kept the full ttl: the soak's
    // HTTP memory grew for its whole run with `--task-retention 120`.)
    let clock = ManualClock::new();
    let store = Arc::new(tern_server::task::MemoryTaskStore::new());
    let s = Server::builder("tasks-retention", "1")
        .task_config(TaskConfig::default().retention(Duration::from_secs(60)))
        .task_store(Arc::clone(&store) as Arc<dyn tern_server::task::TaskStore>)
        .clock(clock.clone())
        .tool(
            ToolDef::new("required", "", || async { "ran" })
                .task(TaskSupport::Required)
                .task_from_start(),
        )
        .build()
        .unwrap();
    let alice = client(&s).with_principal(Principal::new("alice"));
    let mut ids = Vec::new();
    for _ in 0..20 {
        let id = create(&alice, "required").await;
        let done = until(&alice, &id, terminal).await;
        assert_eq!(done["status"], "completed", "{done}");
        // ttlMs may change (Tasks extension › Tasks): it now says when the
        // record goes.
        assert!(done["ttlMs"].as_u64().unwrap() < 3_600_000, "{done}");
        ids.push(id);
    }
    assert_eq!(store.len(), 20);
    clock.tick(Duration::from_secs(30));
    assert_eq!(get(&alice, &ids[0]).await.unwrap()["status"], "completed");
    clock.tick(Duration::from_secs(31));
    for id in &ids {
        assert_eq!(get(&alice, id).await.unwrap_err().code, -32602);
    }
    // Gone from the store, not only hidden: the reads swept them.
    assert!(store.is_empty(), "{} records still held", store.len());
}

/// A task id is the bearer credential of an anonymous task: logs at info
/// level (what an operator ships to a log store) never carry it; the task's
/// life still shows there. Before, "task created" and every event of the
/// task's span named it.
#[test]
fn task_ids_stay_out_of_info_logs() {
    let logs = tern_test_support::logs::Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let id = tracing::subscriber::with_default(subscriber, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let s = server(&Gate::default());
            let c = client(&s);
            let ex = c.call_tool("echo", json!({"n": 7})).await;
            let id = ex.result().unwrap()["taskId"].as_str().unwrap().to_owned();
            until(&c, &id, terminal).await;
            id
        })
    });
    let text = logs.text();
    assert!(text.contains("task created"), "the capture works: {text}");
    assert!(!text.contains(&id), "a task id at info level: {text}");
}

#[tokio::test]
async fn an_asked_parameter_of_a_task_is_asked_through_the_task() {
    let s = server(&Gate::default());
    let c = client(&s);
    let id = create(&c, "asked").await;
    // The body has not run: the task asks first, under the type's key.
    let t = until(&c, &id, |t| t["status"] == "input_required").await;
    let keys: Vec<&String> = t["inputRequests"].as_object().unwrap().keys().collect();
    assert_eq!(keys, ["choice"]);
    c.send(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"choice": {"action": "accept", "content": {"on_error": "skip"}}}}),
    )
    .await
    .result()
    .unwrap();
    let done = until(&c, &id, terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "skip");
}
