//! The server rules of Multi Round-Trip Requests (docs/rules.md), one test or
//! more per rule, named after its id.

use serde_json::{Value, json};
use tern_protocol::ClientCapabilities;
use tern_protocol::error::code;

use crate::fixture::client;
use crate::schema::assert_valid;

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test]
async fn input_required_methods_tools_call_prompts_get_and_resources_read_may_ask() {
    let (c, _, _) = client();
    let tool = c.call_tool("greet", json!({})).await;
    assert_eq!(tool.result_type(), Some("input_required"));
    let prompt = c
        .send(
            "prompts/get",
            json!({"name": "ask_prompt", "arguments": {"who": "Ann"}}),
        )
        .await;
    assert_eq!(prompt.result_type(), Some("input_required"));
    let read = c.send("resources/read", json!({"uri": "res://ask"})).await;
    assert_eq!(read.result_type(), Some("input_required"));
    for r in [&tool, &prompt, &read] {
        assert_valid("InputRequiredResult", r.outcome.as_ref().unwrap());
    }
}

#[tokio::test]
async fn input_required_methods_no_other_method_answers_input_required() {
    let (c, _, _) = client();
    for (m, p) in [
        ("server/discover", json!({})),
        ("tools/list", json!({})),
        ("prompts/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        (
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "ask_prompt"}, "argument": {"name": "who", "value": "a"}}),
        ),
    ] {
        let e = c.send(m, p).await;
        assert_eq!(e.result_type(), Some("complete"), "{m}: {:?}", e.outcome);
    }
}

#[tokio::test]
async fn asked_parameters_take_the_rounds_of_their_ctx_ask_twins() {
    let (c, _, _) = client();
    // One question: the same key, message and outcome as `greet`.
    let twin = c.call_tool("greet", json!({})).await;
    let r = c.call_tool("greet_asked", json!({})).await;
    assert_eq!(r.input_keys(), twin.input_keys());
    let asked = r.outcome.as_ref().unwrap();
    assert_eq!(
        asked["inputRequests"]["user_name"]["params"]["message"],
        "What is your name?"
    );
    for (answer, text) in [
        (accept(json!({"name": "Ada"})), "Hello, Ada!"),
        (json!({"action": "decline"}), "declined"),
        (json!({"action": "cancel"}), "cancelled"),
    ] {
        let done = c
            .retry_tool(
                "greet_asked",
                json!({}),
                json!({"user_name": answer}),
                r.request_state(),
            )
            .await;
        assert_eq!(done.text(), Some(text));
    }
    // Two parameters: both questions in one round, the body after both.
    let r = c.call_tool("batch_asked", json!({})).await;
    assert_eq!(r.input_keys(), ["user_name", "favourite_color"]);
    let done = c
        .retry_tool(
            "batch_asked",
            json!({}),
            json!({"user_name": accept(json!({"name": "Ada"})), "favourite_color": accept(json!({"color": "blue"}))}),
            r.request_state(),
        )
        .await;
    assert_eq!(done.text(), Some("Ada likes blue"));
    // No elicitation declared: -32021, as ctx.ask, never a decline.
    let plain = client().0.with_capabilities(ClientCapabilities::default());
    let refused = plain.call_tool("greet_asked", json!({})).await;
    assert_eq!(
        refused.error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY)
    );
}

#[tokio::test]
async fn a_questions_default_key_is_its_form_type_not_its_wording() {
    let (c, _, _) = client();
    for text in ["What is your name?", "Your name, please?"] {
        let r = c.call_tool("derived_key", json!({"text": text})).await;
        assert_eq!(r.input_keys(), ["name"], "{text}");
    }
    // The answer under that key finishes the call.
    let r = c.call_tool("derived_key", json!({"text": "Name?"})).await;
    let done = c
        .retry_tool(
            "derived_key",
            json!({"text": "Name?"}),
            json!({"name": accept(json!({"name": "Ada"}))}),
            r.request_state(),
        )
        .await;
    assert_eq!(done.text(), Some("Ada"));
    // ask_all numbers the derived keys it shares.
    let r = c.call_tool("ask_all_derived", json!({})).await;
    assert_eq!(r.input_keys(), ["name", "name_2", "name_3"]);
    // One type asked twice in turn: `confirm`, then `confirm#2`.
    let r1 = c.call_tool("confirm_twice", json!({})).await;
    assert_eq!(r1.input_keys(), ["confirm"]);
    let r2 = c
        .retry_tool(
            "confirm_twice",
            json!({}),
            json!({"confirm": accept(json!({"ok": true}))}),
            r1.request_state(),
        )
        .await;
    assert_eq!(r2.input_keys(), ["confirm#2"]);
    // Two of one type in one round, no keys: an error naming both.
    let clash = c.call_tool("derived_clash", json!({})).await;
    assert_eq!(clash.error_code(), Some(code::INTERNAL_ERROR));
    let message = &clash.outcome.as_ref().unwrap_err().message;
    assert!(
        message.contains("`confirm`")
            && message.contains("Delete the database?")
            && message.contains("Empty the bin?")
            && message.contains(".key("),
        "{message}"
    );
}

#[tokio::test]
async fn an_answer_of_the_wrong_kind_is_named_by_its_key_not_blamed_on_the_state() {
    let (c, _, _) = client();
    let r = c.call_tool("derived_key", json!({"text": "Name?"})).await;
    let bad = c
        .retry_tool(
            "derived_key",
            json!({"text": "Name?"}),
            json!({"name": {"roots": "<script>"}}),
            r.request_state(),
        )
        .await;
    assert_eq!(bad.error_code(), Some(code::INVALID_PARAMS));
    let message = &bad.outcome.as_ref().unwrap_err().message;
    assert!(
        message.contains("`name`") && message.contains("elicitation result"),
        "{message}"
    );
    assert!(
        !message.contains("requestState") && !message.contains("<script>"),
        "{message}"
    );
}

#[tokio::test]
async fn input_request_keys_are_the_servers_and_a_clash_is_an_internal_error() {
    let (c, _, _) = client();
    assert_eq!(
        c.call_tool("greet", json!({})).await.input_keys(),
        ["user_name"]
    );
    let clash = c.call_tool("key_clash", json!({})).await;
    assert_eq!(clash.error_code(), Some(code::INTERNAL_ERROR));
    // Asking a key again after it was answered is a new question.
    let r1 = c.call_tool("until_valid", json!({})).await;
    let short = c
        .retry_tool(
            "until_valid",
            json!({}),
            json!({"name": accept(json!({"name": "Al"}))}),
            r1.request_state(),
        )
        .await;
    assert_eq!(short.input_keys(), ["name#2"]);
    let long = c
        .retry_tool(
            "until_valid",
            json!({}),
            json!({"name#2": accept(json!({"name": "Alice"}))}),
            short.request_state(),
        )
        .await;
    assert_eq!(long.text(), Some("Alice"));
}

#[tokio::test]
async fn input_request_kinds_are_elicitation_sampling_or_roots() {
    let (c, _, _) = client();
    for (tool, method) in [
        ("greet", "elicitation/create"),
        ("sample", "sampling/createMessage"),
        ("roots", "roots/list"),
        ("login", "elicitation/create"),
    ] {
        let e = c.call_tool(tool, json!({})).await;
        let result = e.outcome.as_ref().unwrap();
        let request = result["inputRequests"]
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap();
        assert_eq!(request["method"], method, "{tool}");
        assert!(
            request.get("id").is_none() && request.get("jsonrpc").is_none(),
            "not JSON-RPC messages"
        );
        assert_valid("InputRequiredResult", result);
    }
}

#[tokio::test]
async fn state_opaque_request_state_is_a_string_that_changes_every_round() {
    let (c, _, _) = client();
    let r1 = c.call_tool("three_rounds", json!({})).await;
    let s1 = r1.request_state().unwrap().to_owned();
    // The fixture's key file names no `seal=`: the default version.
    assert!(s1.starts_with("t1."), "{s1}");
    let r2 = c
        .retry_tool(
            "three_rounds",
            json!({}),
            json!({"step1": accept(json!({"name": "Ann"}))}),
            Some(&s1),
        )
        .await;
    let s2 = r2.request_state().unwrap().to_owned();
    assert_ne!(s1, s2);
    assert_eq!(r2.input_keys(), ["step2"]);
    let r3 = c
        .retry_tool(
            "three_rounds",
            json!({}),
            json!({"step2": accept(json!({"color": "red"}))}),
            Some(&s2),
        )
        .await;
    assert_eq!(r3.input_keys(), ["step3"]);
    assert_ne!(r3.request_state().unwrap(), s2);
    let r4 = c
        .retry_tool(
            "three_rounds",
            json!({}),
            json!({"step3": accept(json!({"ok": true}))}),
            r3.request_state(),
        )
        .await;
    assert_eq!(r4.text(), Some("Ann/red/true"));
}

#[tokio::test]
async fn input_required_not_empty_every_input_required_carries_requests_and_state() {
    let (c, _, _) = client();
    let e = c.call_tool("batch", json!({})).await;
    let r = e.outcome.as_ref().unwrap();
    assert!(r["inputRequests"].is_object() && r["requestState"].is_string());
}

#[tokio::test]
async fn ask_declared_only_undeclared_kinds_are_never_sent_and_end_with_32021() {
    let (c, _, _) = client();
    let forms_only = c.with_capabilities(ClientCapabilities::default().with_elicitation_form());
    for (tool, needs) in [
        ("sample", json!({"sampling": {}})),
        ("roots", json!({"roots": {}})),
        ("login", json!({"elicitation": {"url": {}}})),
    ] {
        let e = forms_only.call_tool(tool, json!({})).await;
        let err = e.outcome.as_ref().unwrap_err();
        assert_eq!(err.code, code::MISSING_REQUIRED_CLIENT_CAPABILITY, "{tool}");
        assert_eq!(
            err.data.as_ref().unwrap()["requiredCapabilities"],
            needs,
            "{tool}"
        );
    }
    // `elicitation: {}` means form mode.
    assert_eq!(
        forms_only.call_tool("greet", json!({})).await.result_type(),
        Some("input_required")
    );
    // Sampling with tools needs sampling.tools.
    let plain_sampling = client()
        .0
        .with_capabilities(ClientCapabilities::default().with_sampling());
    let e = plain_sampling.call_tool("sample_tools", json!({})).await;
    assert_eq!(
        e.outcome.unwrap_err().data.unwrap()["requiredCapabilities"],
        json!({"sampling": {"tools": {}}})
    );
    // A URL-only client cannot get a form.
    let url_only = client()
        .0
        .with_capabilities(ClientCapabilities::default().with_elicitation_url());
    assert_eq!(
        url_only.call_tool("greet", json!({})).await.error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY)
    );
}

#[tokio::test]
async fn ask_declared_only_a_handler_can_take_another_path_when_it_cannot_ask() {
    let (c, _, _) = client();
    let none = c.with_capabilities(ClientCapabilities::default());
    assert_eq!(
        none.call_tool("fallback", json!({})).await.text(),
        Some("fallback: no elicitation")
    );
    let (c, _, _) = client();
    assert_eq!(
        c.call_tool("fallback", json!({})).await.result_type(),
        Some("input_required")
    );
}

#[tokio::test]
async fn ask_declared_only_capabilities_come_from_this_request_only() {
    let (c, _, _) = client();
    let r1 = c.call_tool("sample", json!({})).await;
    assert_eq!(r1.result_type(), Some("input_required"));
    let no_sampling = client()
        .0
        .with_capabilities(ClientCapabilities::default().with_elicitation_form());
    assert_eq!(
        no_sampling
            .call_tool("sample", json!({}))
            .await
            .error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY)
    );
}

#[tokio::test]
async fn no_assumed_retry_an_abandoned_round_leaves_nothing_behind() {
    let (c, counters, _) = client();
    let first = c.call_tool("greet", json!({})).await;
    assert!(first.request_state().is_some());
    // The client never retries; a fresh call starts over.
    let again = c.call_tool("greet", json!({})).await;
    assert_eq!(again.input_keys(), ["user_name"]);
    assert_eq!(
        counters
            .greet_runs
            .load(std::sync::atomic::Ordering::SeqCst),
        2
    );
}

#[tokio::test]
async fn answers_validated_a_malformed_response_is_invalid_params() {
    let (c, _, _) = client();
    let r1 = c.call_tool("greet", json!({})).await;
    for bad in [
        json!(12345),
        json!({"action": "maybe"}),
        json!({"roots": []}),
        json!(null),
    ] {
        let e = c
            .retry_tool(
                "greet",
                json!({}),
                json!({"user_name": bad}),
                r1.request_state(),
            )
            .await;
        assert_eq!(e.error_code(), Some(code::INVALID_PARAMS), "{bad}");
    }
    let sample = c.call_tool("sample", json!({})).await;
    let e = c
        .retry_tool(
            "sample",
            json!({}),
            json!({"capital": {"action": "accept"}}),
            sample.request_state(),
        )
        .await;
    assert_eq!(e.error_code(), Some(code::INVALID_PARAMS));
}

#[tokio::test]
async fn answers_unknown_ignored_answers_for_keys_never_asked_are_ignored() {
    let (c, _, _) = client();
    let r1 = c.call_tool("greet", json!({})).await;
    let responses = json!({
        "user_name": accept(json!({"name": "Alice"})),
        "unknown_extra_key": 42,
        "another_unexpected": {"whatever": true},
    });
    let e = c
        .retry_tool("greet", json!({}), responses, r1.request_state())
        .await;
    assert_eq!(e.text(), Some("Hello, Alice!"));
    // Without state nothing was asked, so no answer counts.
    let cold = c
        .retry_tool(
            "greet",
            json!({}),
            json!({"user_name": accept(json!({"name": "Mallory"}))}),
            None,
        )
        .await;
    assert_eq!(cold.input_keys(), ["user_name"]);
}

#[tokio::test]
async fn answers_missing_ask_again_a_missing_or_unsatisfying_answer_asks_again() {
    let (c, _, _) = client();
    let r1 = c.call_tool("greet", json!({})).await;
    let wrong_key = c
        .retry_tool(
            "greet",
            json!({}),
            json!({"wrong_key": accept(json!({"data": "x"}))}),
            r1.request_state(),
        )
        .await;
    assert_eq!(wrong_key.input_keys(), ["user_name"]);
    // Content that does not satisfy the schema (no `name`) asks again.
    let r2 = c
        .retry_tool(
            "greet",
            json!({}),
            json!({"user_name": accept(json!({"nom": "x"}))}),
            r1.request_state(),
        )
        .await;
    assert_eq!(r2.input_keys(), ["user_name"]);
    let ok = c
        .retry_tool(
            "greet",
            json!({}),
            json!({"user_name": accept(json!({"name": "Bo"}))}),
            r2.request_state(),
        )
        .await;
    assert_eq!(ok.text(), Some("Hello, Bo!"));
}

#[tokio::test]
async fn input_required_uncached_interim_results_carry_no_caching_hints() {
    let (c, _, _) = client();
    let r = c.call_tool("greet", json!({})).await.outcome.unwrap();
    assert!(r.get("ttlMs").is_none() && r.get("cacheScope").is_none());
    let read = c
        .send("resources/read", json!({"uri": "res://ask"}))
        .await
        .outcome
        .unwrap();
    assert!(read.get("ttlMs").is_none());
}

#[tokio::test]
async fn batching_two_independent_questions_travel_in_one_round() {
    let (c, _, _) = client();
    let r1 = c.call_tool("batch", json!({})).await;
    assert_eq!(r1.input_keys(), ["name", "color"]);
    let done = c
        .retry_tool("batch", json!({}), json!({"name": accept(json!({"name": "Ann"})), "color": accept(json!({"color": "red"}))}), r1.request_state())
        .await;
    assert_eq!(done.text(), Some("Ann likes red"));
    let r = c.call_tool("ask_all", json!({})).await;
    assert_eq!(r.input_keys(), ["a", "b", "c"]);
    let partial = c
        .retry_tool(
            "ask_all",
            json!({}),
            json!({"a": accept(json!({"name": "A"})), "c": {"action": "decline"}}),
            r.request_state(),
        )
        .await;
    assert_eq!(
        partial.input_keys(),
        ["b"],
        "only the missing one is asked again"
    );
    let done = c
        .retry_tool(
            "ask_all",
            json!({}),
            json!({"b": accept(json!({"name": "B"}))}),
            partial.request_state(),
        )
        .await;
    assert_eq!(done.text(), Some("A,B,-"));
}

#[tokio::test]
async fn once_runs_once_per_logical_call_across_rounds() {
    let (c, counters, _) = client();
    let r1 = c.call_tool("once", json!({})).await;
    let r2 = c
        .retry_tool(
            "once",
            json!({}),
            json!({"name": accept(json!({"name": "Ann"}))}),
            r1.request_state(),
        )
        .await;
    let r3 = c
        .retry_tool(
            "once",
            json!({}),
            json!({"color": accept(json!({"color": "blue"}))}),
            r2.request_state(),
        )
        .await;
    assert_eq!(r3.text(), Some("ticket 100 for Ann (blue)"));
    assert_eq!(
        counters.once_runs.load(std::sync::atomic::Ordering::SeqCst),
        1
    );
}

#[tokio::test]
async fn elicitation_decline_and_cancel_reach_the_handler() {
    let (c, _, _) = client();
    for (action, text) in [("decline", "declined"), ("cancel", "cancelled")] {
        let r1 = c.call_tool("greet", json!({})).await;
        let e = c
            .retry_tool(
                "greet",
                json!({}),
                json!({"user_name": {"action": action}}),
                r1.request_state(),
            )
            .await;
        assert_eq!(e.text(), Some(text));
    }
}

#[tokio::test]
async fn url_mode_accept_is_consent() {
    let (c, _, _) = client();
    let r1 = c.call_tool("login", json!({})).await;
    let params = &r1.outcome.as_ref().unwrap()["inputRequests"]["login"]["params"];
    assert_eq!(params["mode"], "url");
    let e = c
        .retry_tool(
            "login",
            json!({}),
            json!({"login": {"action": "accept"}}),
            r1.request_state(),
        )
        .await;
    assert_eq!(e.text(), Some("consented"));
}

#[tokio::test]
async fn sampling_and_roots_answers_are_typed() {
    let (c, _, _) = client();
    let r1 = c.call_tool("sample", json!({})).await;
    let answer = json!({"role": "assistant", "content": {"type": "text", "text": "Paris"}, "model": "m1", "stopReason": "endTurn"});
    assert_eq!(
        c.retry_tool(
            "sample",
            json!({}),
            json!({"capital": answer}),
            r1.request_state()
        )
        .await
        .text(),
        Some("m1: Paris")
    );
    let r1 = c.call_tool("roots", json!({})).await;
    let answer = json!({"roots": [{"uri": "file:///a"}, {"uri": "file:///b", "name": "B"}]});
    assert_eq!(
        c.retry_tool(
            "roots",
            json!({}),
            json!({"roots": answer}),
            r1.request_state()
        )
        .await
        .text(),
        Some("file:///a,file:///b")
    );
}

#[tokio::test]
async fn prompts_and_resources_resume_like_tools() {
    let (c, _, _) = client();
    let p1 = c
        .send(
            "prompts/get",
            json!({"name": "ask_prompt", "arguments": {"who": "Ann"}}),
        )
        .await;
    let p2 = c
        .send("prompts/get", json!({"name": "ask_prompt", "arguments": {"who": "Ann"}, "inputResponses": {"color": accept(json!({"color": "red"}))}, "requestState": p1.request_state()}))
        .await;
    let result = p2.outcome.unwrap();
    assert_eq!(result["messages"][0]["content"]["text"], "Ann likes red");
    assert_valid("GetPromptResult", &result);
    let r1 = c.send("resources/read", json!({"uri": "res://ask"})).await;
    let r2 = c
        .send("resources/read", json!({"uri": "res://ask", "inputResponses": {"reader": accept(json!({"name": "Bo"}))}, "requestState": r1.request_state()}))
        .await;
    let result = r2.outcome.unwrap();
    assert_eq!(result["contents"][0]["text"], "res://ask for Bo");
    assert_eq!(result["contents"][0]["mimeType"], "text/plain");
    assert_valid("ReadResourceResult", &result);
}

#[tokio::test]
async fn progress_and_logs_only_when_asked_for() {
    let (c, _, _) = client();
    let quiet = c.call_tool("progress", json!({})).await;
    assert!(
        quiet.notifications.is_empty(),
        "no progressToken, no logLevel: nothing sent"
    );
    let e = c
        .send("tools/call", json!({"name": "progress", "arguments": {}, "_meta": {"progressToken": "p1", "io.modelcontextprotocol/logLevel": "info"}}))
        .await;
    let progress: Vec<&Value> = e
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty());
    let values: Vec<f64> = progress
        .iter()
        .map(|n| n["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(
        values.windows(2).all(|w| w[0] < w[1]),
        "strictly increasing: {values:?}"
    );
    assert_eq!(values.last(), Some(&4.0), "the final value is always sent");
    for n in &progress {
        assert_eq!(n["params"]["progressToken"], "p1");
        assert_valid("ProgressNotification", n);
    }
    let logs = e
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .count();
    assert_eq!(logs, 5);
    let warn_only = c
        .send("tools/call", json!({"name": "progress", "arguments": {}, "_meta": {"io.modelcontextprotocol/logLevel": "warning"}}))
        .await;
    assert!(
        warn_only.notifications.is_empty(),
        "info logs are below warning"
    );
}

#[tokio::test]
async fn input_required_not_empty_a_handler_can_ask_for_a_state_only_retry() {
    let (c, counters, _) = client();
    let r1 = c.call_tool("later", json!({})).await;
    let result = r1.outcome.as_ref().unwrap();
    assert_eq!(result["resultType"], "input_required");
    assert!(
        result.get("inputRequests").is_none() && result["requestState"].is_string(),
        "{result}"
    );
    assert_valid("InputRequiredResult", result);
    counters
        .ready
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let r2 = c
        .retry_tool("later", json!({}), json!({}), r1.request_state())
        .await;
    assert_eq!(r2.text(), Some("ready now"));
}

#[tokio::test]
async fn accept_unsealed_answers_count_only_where_the_tool_opted_in() {
    let (c, _, _) = client();
    let cold = c
        .retry_tool(
            "greet_unbound",
            json!({}),
            json!({"user_name": accept(json!({"name": "Alice"})), "extra": 1}),
            None,
        )
        .await;
    assert_eq!(cold.text(), Some("Hello, Alice!"));
    let bad = c
        .retry_tool(
            "greet_unbound",
            json!({}),
            json!({"user_name": 12345}),
            None,
        )
        .await;
    assert_eq!(
        bad.input_keys(),
        ["user_name"],
        "an answer of the wrong kind asks again"
    );
    let unsatisfying = c
        .retry_tool(
            "greet_unbound",
            json!({}),
            json!({"user_name": accept(json!({"nom": "x"}))}),
            None,
        )
        .await;
    assert_eq!(unsatisfying.input_keys(), ["user_name"]);
    let null = c
        .send(
            "tools/call",
            json!({"name": "greet_unbound", "arguments": {}, "inputResponses": null}),
        )
        .await;
    assert_eq!(
        null.error_code(),
        Some(code::INVALID_PARAMS),
        "inputResponses: null is malformed"
    );
}

#[tokio::test]
async fn roots_that_are_not_file_uris_ask_again() {
    let (c, _, _) = client();
    let r1 = c.call_tool("roots", json!({})).await;
    assert_eq!(
        r1.outcome.as_ref().unwrap()["inputRequests"]["roots"],
        json!({"method": "roots/list", "params": {}})
    );
    let e = c
        .retry_tool(
            "roots",
            json!({}),
            json!({"roots": {"roots": [{"uri": "https://x"}]}}),
            r1.request_state(),
        )
        .await;
    assert_eq!(e.input_keys(), ["roots"]);
}
