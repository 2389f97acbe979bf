//! The demo's handlers, unchanged, under the *await* strategy: one run each,
//! its questions answered while it keeps running (as a task or a 2025-11-25
//! session will drive it), and a question nobody answers timing out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::InputRequests;
use tern_protocol::error::ErrorObject;
use tern_protocol::mrtr::InputResponse;
use tern_server::AnswerSource;
use tern_server::error::codes;
use tern_server::replay::BoxFuture;
use tern_server::testing::TestClient;

/// Answers each question by its key from a table; a key not in it is never
/// answered.
struct Table {
    answers: HashMap<&'static str, Value>,
    asked: Mutex<Vec<String>>,
    timeout: Duration,
}

fn table(answers: &[(&'static str, Value)]) -> Arc<Table> {
    Arc::new(Table {
        answers: answers.iter().cloned().collect(),
        asked: Mutex::default(),
        timeout: Duration::from_secs(30),
    })
}

impl AnswerSource for Table {
    fn answers(
        &self,
        questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>> {
        let mut asked = self.asked.lock().unwrap();
        let found: Vec<(String, InputResponse)> = questions
            .keys()
            .filter_map(|key| {
                asked.push(key.clone());
                let answer = self.answers.get(key.as_str())?;
                Some((key.clone(), serde_json::from_value(answer.clone()).unwrap()))
            })
            .collect();
        if found.is_empty() {
            return Box::pin(std::future::pending());
        }
        Box::pin(std::future::ready(Ok(found)))
    }

    fn question_timeout(&self) -> Duration {
        self.timeout
    }
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

async fn call(c: &TestClient, tool: &str, args: Value, source: &Arc<Table>) -> Value {
    c.send_awaiting(
        "tools/call",
        json!({"name": tool, "arguments": args}),
        source.clone(),
    )
    .await
    .result()
    .unwrap()
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn every_demo_tool_runs_once_with_its_answers_awaited() {
    let c = TestClient::new(tern::demo::server().unwrap());
    let region = table(&[("region", accept(json!({"region": "eu-west-1"})))]);
    let r = call(&c, "provision_database", json!({"name": "orders"}), &region).await;
    assert_eq!(text(&r), "Created database orders in eu-west-1.");

    let booking = table(&[
        ("party", accept(json!({"size": "6"}))),
        ("time", accept(json!({"at": "2026-12-24T19:30:00Z"}))),
    ]);
    let r = call(
        &c,
        "book_table",
        json!({"restaurant": "Chez Tern"}),
        &booking,
    )
    .await;
    assert_eq!(
        text(&r),
        "Booked a table for 6 at Chez Tern for 2026-12-24T19:30:00Z."
    );
    assert_eq!(
        *booking.asked.lock().unwrap(),
        ["party", "time"],
        "one round"
    );

    let deploy = table(&[
        ("region", accept(json!({"region": "us-east-1"}))),
        ("plan", accept(json!({"proceed": true}))),
    ]);
    let r = call(&c, "deploy", json!({"service": "api"}), &deploy).await;
    assert_eq!(text(&r), "Deployed api to us-east-1.");
    assert_eq!(
        *deploy.asked.lock().unwrap(),
        ["region", "plan"],
        "two rounds, in order"
    );

    // (transfer_funds pays into a process-wide counter another test reads:
    // only its declined path runs here.)
    let declined = table(&[("confirm", json!({"action": "decline"}))]);
    let r = call(
        &c,
        "transfer_funds",
        json!({"to": "acct-42", "amount": 1250}),
        &declined,
    )
    .await;
    assert_eq!(text(&r), "Transfer cancelled.");

    let signin = table(&[("signin", json!({"action": "decline"}))]);
    let r = call(&c, "connect_account", json!({"service": "github"}), &signin).await;
    assert_eq!(text(&r), "github was not connected.");

    let reply = json!({"role": "assistant", "content": {"type": "text", "text": "Short."}, "model": "m", "stopReason": "endTurn"});
    let summary = table(&[("summary", reply)]);
    let r = call(&c, "summarize", json!({"text": "A long text."}), &summary).await;
    assert_eq!(text(&r), "Summary (m): Short.");

    let roots = table(&[(
        "roots",
        json!({"roots": [{"uri": "file:///home/ann/proj", "name": "proj"}]}),
    )]);
    let r = call(&c, "workspace_files", json!({}), &roots).await;
    assert_eq!(
        text(&r),
        "The client shares 1 folder(s):\n- file:///home/ann/proj (proj)"
    );

    let severity = table(&[("severity", accept(json!({"severity": "critical"})))]);
    let p = c
        .send_awaiting(
            "prompts/get",
            json!({"name": "incident_report", "arguments": {"service": "api"}}),
            severity,
        )
        .await
        .result()
        .unwrap();
    assert!(
        p["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Write a Critical incident report for api")
    );
    let reader = table(&[("reader", accept(json!({"name": "Ann"})))]);
    let r = c
        .send_awaiting("resources/read", json!({"uri": "demo://greeting"}), reader)
        .await
        .result()
        .unwrap();
    assert_eq!(
        r["contents"][0]["text"],
        "Hello, Ann! You are reading demo://greeting."
    );
}

#[tokio::test]
async fn a_demo_question_nobody_answers_times_out() {
    let c = TestClient::new(tern::demo::server().unwrap());
    let mut only_region = table(&[("region", accept(json!({"region": "us-east-1"})))]);
    Arc::get_mut(&mut only_region).unwrap().timeout = Duration::from_millis(30);
    let r = c
        .send_awaiting(
            "tools/call",
            json!({"name": "deploy", "arguments": {"service": "api"}}),
            only_region.clone(),
        )
        .await;
    let error = r.outcome.unwrap_err();
    assert_eq!(error.code, codes::QUESTION_TIMEOUT, "{error:?}");
    assert_eq!(*only_region.asked.lock().unwrap(), ["region", "plan"]);

    let mut silent = table(&[]);
    Arc::get_mut(&mut silent).unwrap().timeout = Duration::from_millis(30);
    let r = c
        .send_awaiting(
            "tools/call",
            json!({"name": "transfer_funds", "arguments": {"to": "acct-7", "amount": 5}}),
            silent,
        )
        .await;
    // An error, never an invented answer: no "Transfer cancelled." result.
    assert_eq!(r.error_code(), Some(codes::QUESTION_TIMEOUT), "{r:?}");
}
