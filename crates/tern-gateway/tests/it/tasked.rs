//! A tool that requires a task (`taskSupport: "required"`), called through
//! the gateway on a 2025-11-25 session (the *await* strategy, no Tasks
//! extension): the gateway declares it upstream, creates the task, follows
//! it, asks its question live and answers the result; the request dropped
//! while the task is followed cancels the task. A 2026-07-28 client
//! without the extension gets the `-32021` the extension requires.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::InputRequests;
use tern_protocol::error::ErrorObject;
use tern_protocol::mrtr::{InputKind, InputResponse};
use tern_server::AnswerSource;
use tern_server::replay::BoxFuture;

use crate::gateway::{accept, bounded, client, left_unanswered, upstream};

/// Answers every question with a name, recording the messages asked.
#[derive(Default)]
struct Session {
    asked: Mutex<Vec<String>>,
}

impl AnswerSource for Session {
    fn answers(
        &self,
        questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>> {
        let mut answers = Vec::new();
        for (key, request) in &questions {
            let asked = serde_json::to_value(request).unwrap();
            self.asked
                .lock()
                .unwrap()
                .push(asked["params"]["message"].as_str().unwrap_or("").to_owned());
            let answer =
                InputResponse::decode_as(InputKind::Elicitation, &accept(json!({"name": "Ann"})))
                    .unwrap();
            answers.push((key.clone(), answer));
        }
        Box::pin(std::future::ready(Ok(answers)))
    }

    fn question_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

async fn start() -> Gateway {
    start_with(json!({})).await
}

async fn start_with(extra: Value) -> Gateway {
    let file = json!({"mcpServers": {"a": upstream("a", extra)}}).to_string();
    bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        GatewayOptions::default(),
    ))
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_only_tool_runs_for_a_session_client_its_question_asked_live() {
    let gateway = start().await;
    let c = client(&gateway);
    let session = Arc::new(Session::default());
    let source: Arc<dyn AnswerSource> = Arc::clone(&session) as Arc<dyn AnswerSource>;
    let done = bounded(c.send_awaiting(
        "tools/call",
        json!({"name": "a__task_ask", "arguments": {}}),
        source,
    ))
    .await;
    assert_eq!(
        done.text(),
        Some("a: hello Ann (task true)"),
        "{:?}",
        done.outcome
    );
    assert_eq!(*session.asked.lock().unwrap(), ["Your name?"]);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mrtr_client_without_the_extension_gets_the_32021_the_tasks_extension_requires() {
    let gateway = start().await;
    let c = client(&gateway);
    let refused = bounded(c.call_tool("a__task_ask", json!({}))).await;
    assert_eq!(
        refused.error_code(),
        Some(tern_protocol::error::code::MISSING_REQUIRED_CLIENT_CAPABILITY),
        "{:?}",
        refused.outcome
    );
    // With the extension declared, the client gets the task itself.
    let tasks = client(&gateway).with_capabilities(
        tern_protocol::ClientCapabilities::default()
            .with_elicitation_form()
            .with_extension(tern_protocol::task::TASKS_EXTENSION),
    );
    let created = bounded(tasks.call_tool("a__task_ask", json!({}))).await;
    let created: Value = created.result().unwrap();
    assert_eq!(created["resultType"], "task", "{created}");
    gateway.close().await;
}

/// `a__task_held` reads `want` (polled; the caller bounds the wait).
async fn until_held(c: &tern_server::testing::TestClient, want: &str) {
    loop {
        let seen = c.call_tool("a__task_held", json!({})).await;
        if seen.text() == Some(want) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A 2025 session's call of `task_hold`, dropped once its task began.
async fn held_then_dropped(c: &tern_server::testing::TestClient) {
    let session: Arc<dyn AnswerSource> = Arc::new(Session::default());
    let calling = c.send_awaiting(
        "tools/call",
        json!({"name": "a__task_hold", "arguments": {}}),
        session,
    );
    bounded(async {
        tokio::select! {
            done = calling => panic!("task_hold ended on its own: {:?}", done.outcome),
            () = until_held(c, "began 1, cancelled 0") => {}
        }
    })
    .await;
}

/// A 2025 session's call of a task-only tool, dropped while the gateway
/// follows the task (as its client's `notifications/cancelled` or a closed
/// connection drops the relayed leg): the gateway cancels the upstream
/// task rather than leave it running for no one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_dropped_while_its_task_is_followed_cancels_the_task() {
    let gateway = start().await;
    let c = client(&gateway);
    held_then_dropped(&c).await;
    // The call was dropped: the task is cancelled upstream.
    bounded(until_held(&c, "began 1, cancelled 1")).await;
    gateway.close().await;
}

/// The gateway closed the moment a followed call is dropped (a shutdown
/// with calls in flight): the task's `tasks/cancel`, sent in the background
/// by the drop, still reaches the upstream before its link is closed, so the
/// task is not left running upstream until its TTL.
#[tokio::test]
async fn a_gateway_closed_as_a_followed_call_is_dropped_still_cancels_the_task() {
    let dir = std::env::temp_dir().join(format!("tern-gateway-cancelled-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let record = dir.join("cancelled");
    let _ = std::fs::remove_file(&record);
    let gateway =
        start_with(json!({"env": {crate::child::CANCELLED_TO: record.display().to_string()}}))
            .await;
    let c = client(&gateway);
    held_then_dropped(&c).await;
    // Dropped; closed at once, the upstream child with it.
    bounded(gateway.close()).await;
    let recorded = std::fs::read_to_string(&record).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        recorded, "cancelled\n",
        "the upstream's task was not cancelled before the gateway closed"
    );
}

/// A 2025 session's call of a task-only tool whose task asks: the gateway
/// asks the client live, and the client leaves (the call dropped, as its
/// `notifications/cancelled` drops it) before it answers. The upstream
/// task, waiting in `input_required`, is cancelled then, not left to its
/// TTL ([`tern_server::relay::Relay::abandon`]).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_question_of_a_followed_task_left_unanswered_cancels_the_task() {
    let gateway = start().await;
    let c = client(&gateway);
    left_unanswered(&c, "a__task_ask_hold").await;
    let held = || async {
        let seen = c.call_tool("a__task_ask_held", json!({})).await;
        seen.text().map(str::to_owned)
    };
    bounded(async {
        while held().await.as_deref() != Some("asked 1, cancelled 1") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    gateway.close().await;
}
