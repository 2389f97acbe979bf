//! The *await* strategy (docs/design.md, "One leg runner, three ways of
//! asking"): the same handlers MRTR runs, driven by
//! an answer source while they keep running — as a task or a 2025-11-25
//! session will drive them.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::mrtr::InputResponse;
use tern_protocol::{ClientCapabilities, InputRequests};
use tern_server::error::codes;
use tern_server::replay::BoxFuture;
use tern_server::testing::TestClient;
use tern_server::{AnswerSource, CallLimits};

use crate::fixture::{Counters, ManualClock, builder, client};

type Script = dyn Fn(&InputRequests) -> Vec<(String, Value)> + Send + Sync;

/// Answers from a script; an empty answer means nobody answers.
struct Scripted {
    script: Box<Script>,
    published: Mutex<Vec<Vec<String>>>,
    timeout: Duration,
    fail: Option<ErrorObject>,
}

impl Scripted {
    fn new(
        script: impl Fn(&InputRequests) -> Vec<(String, Value)> + Send + Sync + 'static,
    ) -> Arc<Self> {
        Arc::new(Self {
            script: Box::new(script),
            published: Mutex::default(),
            timeout: Duration::from_secs(30),
            fail: None,
        })
    }

    fn published(&self) -> Vec<Vec<String>> {
        self.published.lock().unwrap().clone()
    }
}

impl AnswerSource for Scripted {
    fn answers(
        &self,
        questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>> {
        self.published
            .lock()
            .unwrap()
            .push(questions.keys().cloned().collect());
        if let Some(e) = &self.fail {
            return Box::pin(std::future::ready(Err(e.clone())));
        }
        let answers: Vec<(String, InputResponse)> = (self.script)(&questions)
            .into_iter()
            .map(|(k, v)| (k, serde_json::from_value(v).unwrap()))
            .collect();
        if answers.is_empty() {
            return Box::pin(std::future::pending());
        }
        Box::pin(std::future::ready(Ok(answers)))
    }

    fn question_timeout(&self) -> Duration {
        self.timeout
    }
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

fn call(name: &str) -> Value {
    json!({"name": name, "arguments": {}})
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap()
}

#[tokio::test]
async fn dependent_questions_are_answered_while_the_handler_keeps_running() {
    let (c, _, _) = client();
    let source = Scripted::new(|q| {
        let (key, request) = q.first().unwrap();
        let message = serde_json::to_value(request).unwrap()["params"]["message"]
            .as_str()
            .unwrap()
            .to_owned();
        let answer = match key.as_str() {
            "step1" => accept(json!({"name": "Ann"})),
            // The second question names the first answer: the same handler,
            // still running, rendered it.
            "step2" if message.contains("Ann") => accept(json!({"color": "red"})),
            "step3" => accept(json!({"ok": true})),
            other => panic!("unexpected question {other}: {message}"),
        };
        vec![(key.clone(), answer)]
    });
    let r = c
        .send_awaiting("tools/call", call("three_rounds"), source.clone())
        .await;
    assert_eq!(text(&r.result().unwrap()), "Ann/red/true");
    assert_eq!(source.published(), [["step1"], ["step2"], ["step3"]]);
}

#[tokio::test]
async fn the_handler_runs_once_and_once_round_trips_its_value() {
    let (c, counters, _) = client();
    let answers = |q: &InputRequests| {
        q.keys()
            .map(|k| (k.clone(), accept(json!({"name": "Bo", "color": "blue"}))))
            .collect()
    };
    let r = c
        .send_awaiting("tools/call", call("greet"), Scripted::new(answers))
        .await;
    assert_eq!(text(&r.result().unwrap()), "Hello, Bo!");
    assert_eq!(
        counters.greet_runs.load(Ordering::SeqCst),
        1,
        "no re-run under await"
    );
    let r = c
        .send_awaiting("tools/call", call("once"), Scripted::new(answers))
        .await;
    let result = r.result().unwrap();
    assert!(text(&result).starts_with("ticket 100 for Bo"), "{result}");
    assert_eq!(counters.once_runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn independent_questions_are_published_together_and_may_be_answered_in_parts() {
    let (c, _, _) = client();
    // One answer per publication: the rest stay outstanding and go out again.
    let source = Scripted::new(|q| {
        let (key, _) = q.first().unwrap();
        vec![(key.clone(), accept(json!({"name": key.to_uppercase()})))]
    });
    let r = c
        .send_awaiting("tools/call", call("ask_all"), source.clone())
        .await;
    assert_eq!(text(&r.result().unwrap()), "A,B,C");
    assert_eq!(
        source.published(),
        [vec!["a", "b", "c"], vec!["b", "c"], vec!["c"]]
    );
    let both = Scripted::new(|q| {
        q.keys()
            .map(|k| (k.clone(), accept(json!({"name": "Cy", "color": "green"}))))
            .collect()
    });
    let r = c
        .send_awaiting("tools/call", call("batch"), both.clone())
        .await;
    assert_eq!(text(&r.result().unwrap()), "Cy likes green");
    assert_eq!(
        both.published(),
        [["name", "color"]],
        "one publication for join!"
    );
}

#[tokio::test]
async fn an_answer_that_does_not_satisfy_its_question_is_asked_again() {
    let (c, _, _) = client();
    let tries = Arc::new(Mutex::new(0));
    let seen = Arc::clone(&tries);
    let source = Scripted::new(move |q| {
        let mut n = seen.lock().unwrap();
        *n += 1;
        let name = if *n == 1 { "al" } else { "alice" };
        q.keys()
            .map(|k| (k.clone(), accept(json!({"name": name}))))
            .collect()
    });
    let r = c
        .send_awaiting("tools/call", call("until_valid"), source.clone())
        .await;
    assert_eq!(text(&r.result().unwrap()), "alice");
    assert_eq!(source.published(), [["name"], ["name#2"]]);
}

#[tokio::test]
async fn answers_of_another_kind_or_key_are_ignored() {
    let (c, _, _) = client();
    let tries = Arc::new(Mutex::new(0));
    let seen = Arc::clone(&tries);
    let source = Scripted::new(move |_| {
        let mut n = seen.lock().unwrap();
        *n += 1;
        match *n {
            1 => vec![("user_name".into(), json!({"roots": []}))],
            2 => vec![("nobody_asked".into(), accept(json!({"name": "x"})))],
            _ => vec![("user_name".into(), accept(json!({"name": "Dee"})))],
        }
    });
    let r = c
        .send_awaiting("tools/call", call("greet"), source.clone())
        .await;
    assert_eq!(text(&r.result().unwrap()), "Hello, Dee!");
    assert_eq!(source.published().len(), 3);
}

#[tokio::test]
async fn a_question_nobody_answers_ends_the_call_with_the_timeout_error() {
    let (c, counters, _) = client();
    let mut silent = Scripted::new(|_| Vec::new());
    Arc::get_mut(&mut silent).unwrap().timeout = Duration::from_millis(30);
    let r = c.send_awaiting("tools/call", call("greet"), silent).await;
    let error = r.outcome.unwrap_err();
    assert_eq!(error.code, codes::QUESTION_TIMEOUT, "{error:?}");
    assert_eq!(error.data.unwrap()["timeoutSeconds"], json!(0.03));
    assert_eq!(
        counters.greet_runs.load(Ordering::SeqCst),
        1,
        "never an invented decline"
    );
}

#[tokio::test]
async fn a_source_that_fails_ends_the_call_with_its_error() {
    let (c, _, _) = client();
    let mut gone = Scripted::new(|_| Vec::new());
    Arc::get_mut(&mut gone).unwrap().fail =
        Some(ErrorObject::new(code::INTERNAL_ERROR, "the session closed"));
    let r = c.send_awaiting("tools/call", call("greet"), gone).await;
    assert_eq!(r.outcome.unwrap_err().message, "the session closed");
}

#[tokio::test]
async fn capability_gating_and_round_limits_hold_under_await_too() {
    let (c, _, _) = client();
    let undeclared = c.with_capabilities(ClientCapabilities::default());
    let never = Scripted::new(|_| panic!("an undeclared question is never published"));
    let r = undeclared
        .send_awaiting("tools/call", call("greet"), never)
        .await;
    assert_eq!(
        r.error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY)
    );

    let counters = Arc::new(Counters::default());
    let two = TestClient::new(
        builder(&counters, ManualClock::new())
            .call_limits(CallLimits::default().max_rounds(2))
            .build()
            .unwrap(),
    );
    let answer_all = Scripted::new(|q| {
        q.keys()
            .map(|k| {
                (
                    k.clone(),
                    accept(json!({"name": "E", "color": "c", "ok": true})),
                )
            })
            .collect()
    });
    let r = two
        .send_awaiting("tools/call", call("three_rounds"), answer_all)
        .await;
    assert_eq!(r.error_code(), Some(codes::CALL_LIMIT), "{r:?}");
}

#[tokio::test]
async fn prompts_and_resources_run_under_await() {
    let (c, _, _) = client();
    let answers = |q: &InputRequests| {
        q.keys()
            .map(|k| (k.clone(), accept(json!({"name": "Flo"}))))
            .collect()
    };
    let p = c
        .send_awaiting(
            "prompts/get",
            json!({"name": "guarded_prompt"}),
            Scripted::new(answers),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(p["messages"][0]["content"]["text"], "prompt run #1 for Flo");
    let r = c
        .send_awaiting(
            "resources/read",
            json!({"uri": "res://guarded"}),
            Scripted::new(answers),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(r["contents"][0]["text"], "read #1 for Flo");
}

#[tokio::test]
async fn asked_parameters_are_awaited_in_one_round_as_their_twins() {
    let (c, _, _) = client();
    let answers = |q: &InputRequests| {
        q.keys()
            .map(|k| (k.clone(), accept(json!({"name": "Bo", "color": "blue"}))))
            .collect()
    };
    let source = Scripted::new(answers);
    let r = c
        .send_awaiting("tools/call", call("greet_asked"), source.clone())
        .await;
    assert_eq!(text(&r.result().unwrap()), "Hello, Bo!");
    let r = c
        .send_awaiting("tools/call", call("batch_asked"), source.clone())
        .await;
    assert_eq!(text(&r.result().unwrap()), "Bo likes blue");
    // The two parameters' questions went out together.
    assert_eq!(
        source.published(),
        [vec!["user_name"], vec!["user_name", "favourite_color"]]
    );
}
