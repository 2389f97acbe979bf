//! A tool that requires a task (`taskSupport: "required"`), called through
//! the gateway by a client that did not declare the Tasks extension: the
//! gateway declares it upstream, creates the task, follows it and relays its
//! question — asked live under the *await* strategy (as on a 2025-11-25
//! session), or as `input_required` under MRTR — and answers the result.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::InputRequests;
use tern_protocol::error::ErrorObject;
use tern_protocol::mrtr::{InputKind, InputResponse};
use tern_server::AnswerSource;
use tern_server::replay::BoxFuture;

use crate::gateway::{accept, bounded, client, upstream};

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
    let file = json!({"mcpServers": {"a": upstream("a", json!({}))}}).to_string();
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
async fn a_task_only_tool_runs_for_an_mrtr_client_without_the_extension() {
    let gateway = start().await;
    let c = client(&gateway);
    let first = bounded(c.call_tool("a__task_ask", json!({}))).await;
    assert_eq!(first.input_keys().len(), 1, "{:?}", first.outcome);
    let key = first.input_keys()[0].clone();
    let mut answers = json!({});
    answers[&key] = accept(json!({"name": "Bo"}));
    let done =
        bounded(c.retry_tool("a__task_ask", json!({}), answers, first.request_state())).await;
    assert_eq!(
        done.text(),
        Some("a: hello Bo (task true)"),
        "{:?}",
        done.outcome
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
