//! The client rules of docs/rules.md, one test module per rule (named after its
//! id), each run in process, over stdio and over HTTP. What the server received
//! is read from the connection's log, not inferred from the client.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tern_client::{CallOptions, Client, HandlerError, PendingRound, Round};
use tern_protocol::InputResponses;
use tern_protocol::elicitation::{ElicitResult, ElicitValue};
use tokio::sync::{Barrier, Notify, oneshot};

use crate::handlers::{DropSignal, Elicit, fill};
use crate::harness::{Kind, Log, bounded, start, text};
use crate::server;

/// Empty tool arguments.
fn empty() -> Value {
    json!({})
}

/// The keys of the `inputResponses` a request carried.
fn answered_keys(request: &Value) -> Vec<String> {
    request["params"]["inputResponses"]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default()
}

/// The `requestState` the server sent in response to `request`.
fn state_sent_for(log: &Log, request: &Value) -> Value {
    log.response(&request["id"]).unwrap()["result"]["requestState"].clone()
}

fn answers(value: Value) -> InputResponses {
    serde_json::from_value(value).unwrap()
}

each_way! {
    /// Rule `answer-before-retry`: the questions are answered by the installed
    /// handler before the retry is sent; the first leg carries no answers, the
    /// retry carries the answer under the key asked.
    async fn answer_before_retry_questions_are_answered_first(way) {
        let conn = start(way, Kind::Fixture).await;
        let log = conn.log.clone();
        let elicit = Elicit::form(move |_q, params| {
            let sent = log.requests("tools/call").len();
            let answer = fill(&params, &[("name".into(), "alice".into())]);
            async move {
                if sent == 1 {
                    Ok(answer)
                } else {
                    Err(HandlerError(format!("{sent} requests sent before the answer")))
                }
            }
        });
        let client = conn.client(Client::builder().elicitation(elicit.clone()));
        let result = bounded(client.call_tool("greet", Some(empty()))).await.unwrap();
        assert_eq!(text(&result), "Hello, alice!", "{way:?}");
        let calls = conn.log.requests("tools/call");
        assert_eq!(calls.len(), 2, "{way:?}");
        assert!(calls[0]["params"].get("inputResponses").is_none(), "{way:?}");
        assert_eq!(
            calls[1]["params"]["inputResponses"],
            json!({"user_name": {"action": "accept", "content": {"name": "alice"}}}),
            "{way:?}"
        );
        assert_eq!(elicit.asked().len(), 1, "{way:?}");
    }
}

each_way! {
    /// Rule `echo-state-exactly`: every round's `requestState` goes back
    /// exactly as the server sent it (tern's sealed state over three rounds),
    /// and so does a state no sealing codec would make (the stub's: whitespace,
    /// escapes, non-ASCII).
    async fn echo_state_exactly_request_state_is_echoed_byte_for_byte(way) {
        let conn = start(way, Kind::Fixture).await;
        let elicit = Elicit::fill(&[("name", "ada"), ("color", "red")]);
        let client = conn.client(Client::builder().elicitation(elicit));
        let result = bounded(client.call_tool("three_rounds", Some(empty()))).await.unwrap();
        assert_eq!(text(&result), "ada/red/true", "{way:?}");
        let calls = conn.log.requests("tools/call");
        assert_eq!(calls.len(), 4, "{way:?}");
        for pair in calls.windows(2) {
            let sent = state_sent_for(&conn.log, &pair[0]);
            assert!(sent.as_str().is_some_and(|s| !s.is_empty()), "{way:?}: {sent}");
            assert_eq!(pair[1]["params"]["requestState"], sent, "{way:?}");
        }

        let stub = start(way, Kind::Stub).await;
        let client = stub.client(Client::builder().elicitation(Elicit::fill(&[])));
        let result = bounded(client.call_tool("odd_state", None)).await.unwrap();
        assert_eq!(text(&result), "echoed", "{way:?}");
    }
}

each_way! {
    /// Rule `no-invented-state`: a round without `requestState` is retried
    /// without one, by the driver and in manual mode (the parked round has none
    /// either).
    async fn no_invented_state_absent_request_state_is_not_sent(way) {
        let stub = start(way, Kind::Stub).await;
        let client = stub.client(Client::builder().elicitation(Elicit::fill(&[])));
        let result = bounded(client.call_tool("stateless", None)).await.unwrap();
        assert_eq!(text(&result), "no state", "{way:?}");

        let options = CallOptions::default();
        let Round::InputRequired(pending) =
            bounded(client.call_tool_once("stateless", None, &options)).await.unwrap()
        else {
            panic!("{way:?}: the stub asks first");
        };
        assert_eq!(pending.request_state, None, "{way:?}");
        let parked = serde_json::to_value(&pending).unwrap();
        assert!(parked.get("requestState").is_none(), "{way:?}: {parked}");
        let answers = bounded(client.answer(&pending, &options)).await.unwrap();
        let Round::Complete(result) =
            bounded(client.resume_tool(&pending, &answers, &options)).await.unwrap()
        else {
            panic!("{way:?}: one round only");
        };
        assert_eq!(text(&result), "no state", "{way:?}");
    }
}

each_way! {
    /// Rule `retry-new-id`: every leg of a call, and every call, has its own
    /// JSON-RPC id.
    async fn retry_new_id_every_retry_has_a_new_id(way) {
        let conn = start(way, Kind::Fixture).await;
        let elicit = Elicit::fill(&[("name", "ada"), ("color", "red")]);
        let client = conn.client(Client::builder().elicitation(elicit));
        bounded(client.call_tool("three_rounds", Some(empty()))).await.unwrap();
        bounded(client.call_tool("greet", Some(empty()))).await.unwrap();
        let calls = conn.log.requests("tools/call");
        assert_eq!(calls.len(), 6, "{way:?}");
        let ids: HashSet<String> = calls.iter().map(|c| c["id"].to_string()).collect();
        assert_eq!(ids.len(), calls.len(), "{way:?}: {ids:?}");
    }
}

each_way! {
    /// Rule `round-isolated`: two calls of one client run their rounds at the
    /// same time (both are asked before either answers) with different answers;
    /// each retry carries its own call's state and answer, and a plain request
    /// made meanwhile carries neither.
    async fn round_isolated_rounds_do_not_leak_across_concurrent_calls(way) {
        let conn = start(way, Kind::Fixture).await;
        // Two handlers and this test meet twice: once both calls are
        // mid-round, and again once the plain call is done.
        let asked = Arc::new(Barrier::new(3));
        let answer = Arc::new(Barrier::new(3));
        let (handler_asked, handler_answer) = (Arc::clone(&asked), Arc::clone(&answer));
        let elicit = Elicit::form(move |_q, params| {
            let asked = Arc::clone(&handler_asked);
            let answer = Arc::clone(&handler_answer);
            async move {
                bounded(asked.wait()).await;
                bounded(answer.wait()).await;
                let tag = params
                    .message
                    .trim_start_matches("Name for ")
                    .trim_end_matches('?')
                    .to_owned();
                let content = [("name".to_owned(), ElicitValue::from(format!("name-of-{tag}")))];
                Ok(ElicitResult::accept(content.into_iter().collect()))
            }
        });
        let client = conn.client(Client::builder().elicitation(elicit));
        let a = client.call_tool("name_for", Some(json!({"tag": "a"})));
        let b = client.call_tool("name_for", Some(json!({"tag": "b"})));
        let plain = async {
            asked.wait().await;
            let touched = client.call_tool("touch", Some(empty())).await.unwrap();
            answer.wait().await;
            touched
        };
        let (a, b, touched) = Box::pin(bounded(async { tokio::join!(a, b, plain) })).await;
        assert_eq!(text(&a.unwrap()), "a: name-of-a", "{way:?}");
        assert_eq!(text(&b.unwrap()), "b: name-of-b", "{way:?}");
        assert_eq!(text(&touched), "touched", "{way:?}");

        let calls = conn.log.requests("tools/call");
        assert_eq!(calls.len(), 5, "{way:?}");
        let (retries, firsts): (Vec<&Value>, Vec<&Value>) = calls
            .iter()
            .partition(|c| c["params"].get("requestState").is_some());
        assert_eq!(retries.len(), 2, "{way:?}");
        for retry in retries {
            let tag = &retry["params"]["arguments"]["tag"];
            let first = firsts
                .iter()
                .find(|f| f["params"]["arguments"]["tag"] == *tag)
                .unwrap();
            assert_eq!(
                retry["params"]["requestState"],
                state_sent_for(&conn.log, first),
                "{way:?}"
            );
            assert_eq!(
                retry["params"]["inputResponses"]["user_name"]["content"]["name"],
                format!("name-of-{}", tag.as_str().unwrap()),
                "{way:?}"
            );
        }
        let touch = firsts.iter().find(|c| c["params"]["name"] == "touch").unwrap();
        assert!(touch["params"].get("inputResponses").is_none(), "{way:?}");
    }
}

each_way! {
    /// Rule `retry-repeats-request`: a retry repeats the method, name and
    /// arguments with the full `_meta`, and answers only the keys that round
    /// asked — not earlier rounds' keys, not stray answers given in advance; in
    /// manual mode too.
    async fn retry_repeats_request_retries_answer_only_the_keys_asked(way) {
        let conn = start(way, Kind::Fixture).await;
        let elicit = Elicit::fill(&[("color", "red")]);
        let client = conn.client(Client::builder().elicitation(elicit.clone()));
        let options = CallOptions::default().with_answers(answers(json!({
            "step1": {"action": "accept", "content": {"name": "ada"}},
            "stray": {"action": "accept", "content": {"name": "nobody"}},
        })));
        let args = json!({"label": "kept \"as is\" \u{e9}"});
        let result = bounded(client.call_tool_with("three_rounds", Some(args.clone()), &options))
            .await
            .unwrap();
        assert_eq!(text(&result), "ada/red/true", "{way:?}");
        let asked: Vec<String> = elicit.asked().into_iter().map(|q| q.key).collect();
        assert_eq!(asked, ["step2", "step3"], "{way:?}: step1 was answered in advance");
        let calls = conn.log.requests("tools/call");
        let keys: Vec<Vec<String>> = calls.iter().map(answered_keys).collect();
        assert_eq!(
            keys,
            [vec![], vec!["step1".to_owned()], vec!["step2".to_owned()], vec!["step3".to_owned()]],
            "{way:?}"
        );
        for call in &calls {
            assert_eq!(call["params"]["name"], "three_rounds", "{way:?}");
            assert_eq!(call["params"]["arguments"], args, "{way:?}");
            let meta = &call["params"]["_meta"];
            assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{way:?}");
            assert!(meta["io.modelcontextprotocol/clientCapabilities"]["elicitation"].is_object());
            assert!(meta["io.modelcontextprotocol/clientInfo"]["name"].is_string(), "{way:?}");
        }

        // Manual mode: responses for other keys are not sent either.
        let Round::InputRequired(pending) =
            bounded(client.call_tool_once("greet", Some(empty()), &CallOptions::default()))
                .await
                .unwrap()
        else {
            panic!("{way:?}: greet asks first");
        };
        let responses = answers(json!({
            "user_name": {"action": "accept", "content": {"name": "bo"}},
            "stray": {"action": "decline"},
        }));
        let Round::Complete(result) =
            bounded(client.resume_tool(&pending, &responses, &CallOptions::default()))
                .await
                .unwrap()
        else {
            panic!("{way:?}: one round only");
        };
        assert_eq!(text(&result), "Hello, bo!", "{way:?}");
        let last = conn.log.requests("tools/call").pop().unwrap();
        assert_eq!(answered_keys(&last), ["user_name"], "{way:?}");
    }
}

each_way! {
    /// Rules `result-type-absent` and `result-type-unknown`: a result without
    /// `resultType` is complete; an unknown `resultType` is an error, not a
    /// result.
    async fn result_type_missing_is_complete_and_unknown_is_an_error(way) {
        let stub = start(way, Kind::Stub).await;
        let client = stub.client(Client::builder());
        let result = bounded(client.call_tool("implicit_complete", None)).await.unwrap();
        assert_eq!(text(&result), "no resultType", "{way:?}");
        let err = bounded(client.call_tool("unknown_result_type", None))
            .await
            .unwrap_err();
        assert!(err.is_protocol(), "{way:?}: {err}");
    }
}

each_way! {
    /// Versioning and Compatibility › Protocol Version Negotiation: after
    /// `-32022` a client retries only with a version both
    /// sides speak. tern speaks 2026-07-28 alone, so a server that does not
    /// list it gets one request and the caller the error, with its code; one
    /// that lists it gets one retry.
    async fn an_unsupported_version_is_returned_without_a_futile_retry(way) {
        let stub = start(way, Kind::Stub).await;
        let client = stub.client(Client::builder());
        let err = bounded(client.call_tool("old_versions_only", None))
            .await
            .unwrap_err();
        assert_eq!(err.rpc_error().map(|e| e.code), Some(-32022), "{way:?}: {err}");
        assert_eq!(stub.log.requests("tools/call").len(), 1, "{way:?}");

        // A `-32022` that lists 2026-07-28 (another replica answered) is
        // retried once, with a new id.
        let fresh = stub.client(Client::builder());
        let result = bounded(fresh.call_tool("replica_mismatch", None)).await.unwrap();
        assert_eq!(text(&result), "served", "{way:?}");
        assert_eq!(stub.log.requests("tools/call").len(), 3, "{way:?}");
    }
}

each_way! {
    /// Rule `no-cache-after-input`: the client has no result cache at all, so
    /// results of answered requests cannot be cached; shown here by the same
    /// call made twice reaching the server twice (both legs) with the second
    /// call's answer.
    async fn no_cache_after_input_answered_results_are_not_cached(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder().elicitation(Elicit::fill(&[])));
        for name in ["ann", "bob"] {
            let options = CallOptions::default().with_answers(answers(json!({
                "user_name": {"action": "accept", "content": {"name": name}}
            })));
            let result = bounded(client.call_tool_with("greet", Some(empty()), &options))
                .await
                .unwrap();
            assert_eq!(text(&result), format!("Hello, {name}!"), "{way:?}");
        }
        assert_eq!(conn.log.requests("tools/call").len(), 4, "{way:?}");
    }
}

each_way! {
    /// Rule `embedded-request-trust`: a handler is told which server asks, for
    /// which call and key, and decline and cancel are answers it can give (the
    /// server takes them).
    async fn embedded_request_trust_handlers_see_which_server_asks(way) {
        let conn = start(way, Kind::Fixture).await;
        let script = Arc::new(Mutex::new(VecDeque::from([
            ElicitResult::decline(),
            ElicitResult::cancel(),
        ])));
        let elicit = Elicit::form(move |_q, _params| {
            let next = script.lock().unwrap().pop_front();
            async move { next.ok_or_else(|| HandlerError("no more answers".into())) }
        });
        let client = conn.client(Client::builder().elicitation(elicit.clone()));
        let declined = bounded(client.call_tool("greet", Some(empty()))).await.unwrap();
        assert_eq!(text(&declined), "declined", "{way:?}");
        let cancelled = bounded(client.call_tool("greet", Some(empty()))).await.unwrap();
        assert_eq!(text(&cancelled), "cancelled", "{way:?}");
        let asked = elicit.asked();
        assert_eq!(asked.len(), 2, "{way:?}");
        for q in asked {
            assert_eq!(q.server.map(|s| s.name).as_deref(), Some(server::NAME), "{way:?}");
            assert_eq!(q.method, "tools/call", "{way:?}");
            assert_eq!(q.target, "greet", "{way:?}");
            assert_eq!(q.key, "user_name", "{way:?}");
        }
    }
}

each_way! {
    /// Rule `url-elicitation-consent`: a URL-mode question reaches the handler
    /// with the full URL; `accept` is consent only (no content), and the
    /// outcome comes from the retry. The client declares URL mode only because
    /// its handler has it.
    async fn url_elicitation_consent_accept_is_consent_and_the_outcome_comes_later(way) {
        let conn = start(way, Kind::Fixture).await;
        let urls = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&urls);
        let elicit = Elicit::form(|_q, _p| async { Err(HandlerError("no form here".into())) })
            .with_url(move |_q, params| {
                seen.lock().unwrap().push(params.url);
                async { Ok(ElicitResult::consent()) }
            });
        let client = conn.client(Client::builder().elicitation(elicit.clone()));
        let result = bounded(client.call_tool("login", Some(empty()))).await.unwrap();
        assert_eq!(text(&result), "consented", "{way:?}");
        assert_eq!(*urls.lock().unwrap(), ["https://example.com/login?flow=1"], "{way:?}");
        assert_eq!(
            elicit.asked()[0].server.as_ref().map(|s| s.name.as_str()),
            Some(server::NAME),
            "{way:?}"
        );
        let calls = conn.log.requests("tools/call");
        assert_eq!(calls.len(), 2, "{way:?}");
        assert_eq!(
            calls[1]["params"]["inputResponses"],
            json!({"login": {"action": "accept"}}),
            "{way:?}"
        );
        let declared = &calls[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"];
        assert_eq!(
            declared["elicitation"],
            json!({"form": {}, "url": {}}),
            "{way:?}"
        );
    }
}

each_way! {
    /// Rule `no-per-answer-error`: two questions of one round are answered
    /// concurrently; when one handler fails, the call stops at once (no retry
    /// is sent) and the other handler, which would wait forever, is cancelled.
    async fn no_per_answer_error_a_failing_handler_stops_the_call_and_its_siblings(way) {
        let conn = start(way, Kind::Fixture).await;
        let sibling_asked = Arc::new(Notify::new());
        let (dropped_tx, dropped_rx) = oneshot::channel();
        let dropped_tx = Arc::new(Mutex::new(Some(dropped_tx)));
        let elicit = Elicit::form(move |q, _params| {
            let sibling_asked = Arc::clone(&sibling_asked);
            let signal = if q.key == "color" {
                dropped_tx.lock().unwrap().take()
            } else {
                None
            };
            async move {
                if q.key == "name" {
                    // Fail only once the sibling is underway.
                    bounded(sibling_asked.notified()).await;
                    return Err(HandlerError("the user closed the terminal".into()));
                }
                let _cancelled = DropSignal(signal);
                sibling_asked.notify_one();
                std::future::pending::<Result<ElicitResult, HandlerError>>().await
            }
        });
        let client = conn.client(Client::builder().elicitation(elicit.clone()));
        let err = bounded(client.call_tool("batch", Some(empty()))).await.unwrap_err();
        assert!(err.is_handler(), "{way:?}: {err}");
        assert!(format!("{err:#}").contains("closed the terminal"), "{way:?}: {err:#}");
        bounded(dropped_rx).await.unwrap();
        assert_eq!(elicit.asked().len(), 2, "{way:?}: both questions were asked at once");
        assert_eq!(conn.log.requests("tools/call").len(), 1, "{way:?}: no retry");
    }
}

each_way! {
    /// Rule `bounded-rounds`: the driver stops at its round bound and at its
    /// total-time bound (while a handler answers, and while the server works),
    /// and manual mode opts out of answering altogether.
    async fn bounded_rounds_rounds_and_total_time_are_bounded(way) {
        let conn = start(way, Kind::Fixture).await;
        // Rounds: the server asks again after every "x".
        let elicit = Elicit::fill(&[("name", "x")]);
        let client = conn.client(Client::builder().elicitation(elicit.clone()).max_rounds(3));
        let err = bounded(client.call_tool("until_valid", Some(empty()))).await.unwrap_err();
        assert!(err.is_bounds(), "{way:?}: {err}");
        assert_eq!(conn.log.requests("tools/call").len(), 3, "{way:?}");
        assert_eq!(elicit.asked().len(), 2, "{way:?}: the last round is not answered");

        // Manual mode: the round comes back unanswered.
        let Round::InputRequired(pending) =
            bounded(client.call_tool_once("until_valid", Some(empty()), &CallOptions::default()))
                .await
                .unwrap()
        else {
            panic!("{way:?}: until_valid asks first");
        };
        assert_eq!(pending.round, 1, "{way:?}");
        assert_eq!(elicit.asked().len(), 2, "{way:?}: manual mode asks no handler");

        // Time, while a handler never answers: it is cancelled at the deadline.
        let (dropped_tx, dropped_rx) = oneshot::channel();
        let dropped_tx = Arc::new(Mutex::new(Some(dropped_tx)));
        let stuck = Elicit::form(move |_q, _p| {
            let signal = dropped_tx.lock().unwrap().take();
            async move {
                let _cancelled = DropSignal(signal);
                std::future::pending::<Result<ElicitResult, HandlerError>>().await
            }
        });
        let deadline = Duration::from_millis(300);
        let client = conn.client(Client::builder().elicitation(stuck).deadline(deadline));
        let began = Instant::now();
        let err = bounded(client.call_tool("greet", Some(empty()))).await.unwrap_err();
        assert!(err.is_bounds(), "{way:?}: {err}");
        assert!(began.elapsed() >= deadline, "{way:?}");
        bounded(dropped_rx).await.unwrap();

        // Time, while the server works (and never answers by itself).
        let began = Instant::now();
        let err = bounded(client.call_tool("hang", Some(empty()))).await.unwrap_err();
        assert!(err.is_bounds(), "{way:?}: {err}");
        assert!(began.elapsed() >= deadline, "{way:?}");
        // The request in flight at the deadline was cancelled, not left running.
        let seen = bounded(client.call_tool("cancellations", Some(json!({"at_least": 1}))))
            .await
            .unwrap();
        assert_eq!(text(&seen), "1", "{way:?}");
    }
}

/// Rule `bounded-rounds`: without `max_rounds`, the bound is 10 rounds.
#[tokio::test]
async fn bounded_rounds_the_default_bound_is_ten() {
    let conn = start(crate::harness::Way::InProcess, Kind::Fixture).await;
    let client = conn.client(Client::builder().elicitation(Elicit::fill(&[("name", "x")])));
    let err = bounded(client.call_tool("until_valid", Some(empty())))
        .await
        .unwrap_err();
    assert!(err.is_bounds(), "{err}");
    assert_eq!(conn.log.requests("tools/call").len(), 10);
}

/// A parked round is plain data: it survives JSON unchanged.
#[test]
fn pending_rounds_round_trip_through_json() {
    let pending: PendingRound = serde_json::from_value(json!({
        "method": "tools/call",
        "params": {"name": "greet", "arguments": {"a": 1}},
        "inputRequests": {"user_name": {"method": "elicitation/create", "params": {
            "mode": "form", "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
        }}},
        "requestState": crate::stub::ODD_STATE,
        "round": 2
    }))
    .unwrap();
    let again: PendingRound =
        serde_json::from_str(&serde_json::to_string(&pending).unwrap()).unwrap();
    assert_eq!(again, pending);
    assert_eq!(again.request_state.as_deref(), Some(crate::stub::ODD_STATE));
}
