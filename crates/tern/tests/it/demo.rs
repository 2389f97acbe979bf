//! The demo tools, driven in process through `tern_server::testing`.

use serde_json::{Value, json};
use tern_protocol::ClientCapabilities;
use tern_server::testing::{Exchange, TestClient};

fn client() -> TestClient {
    TestClient::new(tern::demo::server().unwrap())
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// Calls `tool`, answers each round from `answers` in turn, returns the last
/// exchange and the number of rounds that asked.
async fn run(c: &TestClient, tool: &str, args: Value, answers: &[Value]) -> (Exchange, usize) {
    let mut e = c.call_tool(tool, args.clone()).await;
    let mut rounds = 0;
    for answer in answers {
        assert_eq!(
            e.result_type(),
            Some("input_required"),
            "{tool}: {:?}",
            e.outcome
        );
        rounds += 1;
        let state = e.request_state().map(str::to_owned);
        e = c
            .retry_tool(tool, args.clone(), answer.clone(), state.as_deref())
            .await;
    }
    (e, rounds)
}

#[tokio::test]
async fn provision_database_accept_decline_cancel() {
    let c = client();
    let first = c
        .call_tool("provision_database", json!({"name": "orders"}))
        .await;
    let schema =
        &first.outcome.as_ref().unwrap()["inputRequests"]["region"]["params"]["requestedSchema"];
    assert_eq!(
        schema["properties"]["region"]["oneOf"]
            .as_array()
            .unwrap()
            .len(),
        3,
        "a select of three"
    );
    let (done, _) = run(
        &c,
        "provision_database",
        json!({"name": "orders"}),
        &[json!({"region": accept(json!({"region": "eu-west-1"}))})],
    )
    .await;
    assert_eq!(done.text(), Some("Created database orders in eu-west-1."));
    for action in ["decline", "cancel"] {
        let (done, _) = run(
            &c,
            "provision_database",
            json!({"name": "orders"}),
            &[json!({"region": {"action": action}})],
        )
        .await;
        assert_eq!(done.text(), Some("Provisioning cancelled."));
    }
    let (again, _) = run(
        &c,
        "provision_database",
        json!({"name": "orders"}),
        &[json!({"region": accept(json!({"region": "mars"}))})],
    )
    .await;
    assert_eq!(
        again.input_keys(),
        ["region"],
        "an answer outside the options asks again"
    );
}

#[tokio::test]
async fn book_table_asks_both_questions_in_one_round() {
    let c = client();
    let first = c
        .call_tool("book_table", json!({"restaurant": "Chez Tern"}))
        .await;
    assert_eq!(first.input_keys(), ["party", "time"]);
    let both = json!({"party": accept(json!({"size": "6"})), "time": accept(json!({"at": "2026-12-24T19:30:00Z"}))});
    let (done, rounds) = run(
        &c,
        "book_table",
        json!({"restaurant": "Chez Tern"}),
        &[both],
    )
    .await;
    assert_eq!(rounds, 1);
    assert_eq!(
        done.text(),
        Some("Booked a table for 6 at Chez Tern for 2026-12-24T19:30:00Z.")
    );
    let bad_time =
        json!({"party": accept(json!({"size": "4"})), "time": accept(json!({"at": "tonight"}))});
    let (e, _) = run(&c, "book_table", json!({"restaurant": "X"}), &[bad_time]).await;
    assert_eq!(
        e.input_keys(),
        ["time"],
        "only the unsatisfied question is asked again"
    );
    let declined = json!({"party": {"action": "decline"}, "time": {"action": "cancel"}});
    let (e, _) = run(&c, "book_table", json!({"restaurant": "X"}), &[declined]).await;
    assert_eq!(e.text(), Some("Booking cancelled."));
}

#[tokio::test]
async fn transfer_funds_confirms_once_and_a_duplicate_retry_does_not_pay_twice() {
    let c = client();
    let args = json!({"to": "acct-42", "amount": 1250});
    let first = c.call_tool("transfer_funds", args.clone()).await;
    let state = first.request_state().unwrap().to_owned();
    let yes = json!({"confirm": accept(json!({"confirm": true}))});
    let before = tern::demo::TRANSFERS.load(std::sync::atomic::Ordering::SeqCst);
    let done = c
        .retry_tool("transfer_funds", args.clone(), yes.clone(), Some(&state))
        .await;
    assert!(
        done.text()
            .unwrap()
            .starts_with("Transferred 12.50 to acct-42"),
        "{:?}",
        done.text()
    );
    let duplicate = c
        .retry_tool("transfer_funds", args.clone(), yes, Some(&state))
        .await;
    assert_eq!(duplicate.text(), done.text());
    assert_eq!(
        tern::demo::TRANSFERS.load(std::sync::atomic::Ordering::SeqCst),
        before + 1,
        "paid once"
    );
    for answer in [
        json!({"confirm": {"action": "decline"}}),
        json!({"confirm": {"action": "cancel"}}),
        json!({"confirm": accept(json!({"confirm": false}))}),
    ] {
        let (e, _) = run(&c, "transfer_funds", args.clone(), &[answer]).await;
        assert_eq!(e.text(), Some("Transfer cancelled."));
    }
}

#[tokio::test]
async fn deploy_takes_two_rounds_and_reports_progress() {
    let c = client();
    let args = json!({"service": "api"});
    let r1 = c.call_tool("deploy", args.clone()).await;
    assert_eq!(r1.input_keys(), ["region"]);
    let r2 = c
        .retry_tool(
            "deploy",
            args.clone(),
            json!({"region": accept(json!({"region": "us-east-1"}))}),
            r1.request_state(),
        )
        .await;
    assert_eq!(r2.input_keys(), ["plan"]);
    let plan = r2.outcome.as_ref().unwrap()["inputRequests"]["plan"]["params"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        plan.contains("us-east-1"),
        "the plan shows the first answer: {plan}"
    );
    let params = json!({
        "name": "deploy", "arguments": args, "requestState": r2.request_state(),
        "inputResponses": {"plan": accept(json!({"proceed": true}))},
        "_meta": {"progressToken": "d1"},
    });
    let done = c.send("tools/call", params).await;
    assert_eq!(done.text(), Some("Deployed api to us-east-1."));
    let progress: Vec<f64> = done
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .map(|n| n["params"]["progress"].as_f64().unwrap())
        .collect();
    assert_eq!(progress, [0.0, 1.0, 2.0, 3.0, 4.0]);
    let (stopped, _) = run(
        &c,
        "deploy",
        json!({"service": "api"}),
        &[json!({"region": {"action": "cancel"}})],
    )
    .await;
    assert_eq!(stopped.text(), Some("Deployment cancelled."));
    let r1 = c.call_tool("deploy", json!({"service": "api"})).await;
    let r2 = c
        .retry_tool(
            "deploy",
            json!({"service": "api"}),
            json!({"region": accept(json!({"region": "eu-west-1"}))}),
            r1.request_state(),
        )
        .await;
    let no = c
        .retry_tool(
            "deploy",
            json!({"service": "api"}),
            json!({"plan": {"action": "decline"}}),
            r2.request_state(),
        )
        .await;
    assert_eq!(no.text(), Some("Deployment cancelled."));
}

#[tokio::test]
async fn connect_account_uses_url_mode_with_one_flow_id_per_call() {
    let c = client();
    let r1 = c
        .call_tool("connect_account", json!({"service": "github"}))
        .await;
    let params = r1.outcome.as_ref().unwrap()["inputRequests"]["signin"]["params"].clone();
    assert_eq!(params["mode"], "url");
    let url = params["url"].as_str().unwrap().to_owned();
    assert!(url.starts_with("https://auth.example.com/connect/github?flow="));
    let flow = url.rsplit('=').next().unwrap().to_owned();
    let done = c
        .retry_tool(
            "connect_account",
            json!({"service": "github"}),
            json!({"signin": {"action": "accept"}}),
            r1.request_state(),
        )
        .await;
    assert_eq!(
        done.text(),
        Some(format!("Connected github (flow {flow}).").as_str()),
        "the flow id survived the round"
    );
    let declined = c
        .retry_tool(
            "connect_account",
            json!({"service": "github"}),
            json!({"signin": {"action": "decline"}}),
            r1.request_state(),
        )
        .await;
    assert_eq!(declined.text(), Some("github was not connected."));
    let forms_only =
        client().with_capabilities(ClientCapabilities::default().with_elicitation_form());
    let e = forms_only
        .call_tool("connect_account", json!({"service": "github"}))
        .await;
    assert_eq!(
        e.error_code(),
        Some(-32021),
        "URL mode needs elicitation.url"
    );
}

#[tokio::test]
async fn summarize_and_workspace_files_use_the_deprecated_kinds() {
    let c = client();
    let reply = json!({"role": "assistant", "content": {"type": "text", "text": "Short."}, "model": "m", "stopReason": "endTurn"});
    let (e, _) = run(
        &c,
        "summarize",
        json!({"text": "A long text."}),
        &[json!({"summary": reply})],
    )
    .await;
    assert_eq!(e.text(), Some("Summary (m): Short."));
    let roots = json!({"roots": [{"uri": "file:///home/ann/proj", "name": "proj"}]});
    let (e, _) = run(&c, "workspace_files", json!({}), &[json!({"roots": roots})]).await;
    assert_eq!(
        e.text(),
        Some("The client shares 1 folder(s):\n- file:///home/ann/proj (proj)")
    );
    let none = client().with_capabilities(ClientCapabilities::default().with_elicitation_form());
    assert_eq!(
        none.call_tool("summarize", json!({"text": "x"}))
            .await
            .error_code(),
        Some(-32021)
    );
    assert_eq!(
        none.call_tool("workspace_files", json!({}))
            .await
            .error_code(),
        Some(-32021)
    );
}

#[tokio::test]
async fn the_prompt_and_the_resource_ask_first() {
    let c = client();
    let p1 = c
        .send(
            "prompts/get",
            json!({"name": "incident_report", "arguments": {"service": "api"}}),
        )
        .await;
    assert_eq!(p1.input_keys(), ["severity"]);
    let p2 = c
        .send("prompts/get", json!({"name": "incident_report", "arguments": {"service": "api"}, "requestState": p1.request_state(),
            "inputResponses": {"severity": accept(json!({"severity": "critical"}))}}))
        .await;
    assert!(
        p2.outcome.unwrap()["messages"][0]["content"]["text"]
            .as_str()
            .unwrap()
            .starts_with("Write a Critical incident report for api")
    );
    let r1 = c
        .send("resources/read", json!({"uri": "demo://greeting"}))
        .await;
    let r2 = c
        .send("resources/read", json!({"uri": "demo://greeting", "requestState": r1.request_state(), "inputResponses": {"reader": {"action": "decline"}}}))
        .await;
    assert_eq!(
        r2.outcome.unwrap()["contents"][0]["text"],
        "Hello, stranger! You are reading demo://greeting."
    );
}

/// `import_dataset` without the Tasks extension runs inline through MRTR:
/// the first leg imports the first half and asks; the retry does not import
/// those rows again (`ctx.once`): its progress starts after them.
#[tokio::test]
async fn import_dataset_inline_does_not_import_the_first_half_twice() {
    let c = client();
    let progress = |e: &Exchange| -> Vec<String> {
        e.notifications
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .filter_map(|n| n["params"]["message"].as_str().map(str::to_owned))
            .collect()
    };
    let call = |responses: Option<(Value, String)>| {
        let mut params = json!({"name": "import_dataset", "arguments": {"rows": 4},
            "_meta": {"progressToken": "p"}});
        if let Some((answers, state)) = responses {
            params["inputResponses"] = answers;
            params["requestState"] = Value::String(state);
        }
        params
    };
    let first = c.send("tools/call", call(None)).await;
    assert_eq!(
        first.result_type(),
        Some("input_required"),
        "{:?}",
        first.outcome
    );
    let before = progress(&first);
    assert!(
        before
            .iter()
            .all(|m| m == "imported 1 of 4 rows" || m == "imported 2 of 4 rows"),
        "{before:?}"
    );
    let state = first.request_state().unwrap().to_owned();
    let answers = json!({"on_error": accept(json!({"on_error": "skip"}))});
    let done = c.send("tools/call", call(Some((answers, state)))).await;
    let after = progress(&done);
    assert!(!after.is_empty(), "the second half reports progress");
    assert!(
        after
            .iter()
            .all(|m| m == "imported 3 of 4 rows" || m == "imported 4 of 4 rows"),
        "the first half is not imported again: {after:?}"
    );
    let v = serde_json::to_value(done.outcome.as_ref().unwrap()).unwrap();
    assert_eq!(v["content"][0]["text"], "Imported 2 rows (skipped 2).");
}
