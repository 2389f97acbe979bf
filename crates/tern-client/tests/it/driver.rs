//! The driver beyond the numbered rules: load shedding, capabilities,
//! manual rounds resumed elsewhere, cancellation, progress, subscriptions,
//! and every method — each in process, over stdio and over HTTP.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tern_client::{CallOptions, Client, PendingRound, Round, StaticRoots};
use tern_protocol::ServerNotification;
use tern_protocol::completion::{PromptReference, Reference};
use tern_protocol::elicitation::ElicitResult;
use tern_protocol::roots::Root;
use tern_protocol::subscription::SubscriptionFilter;
use tokio::sync::Notify;

use crate::child::{RESULT_MARK, ROLE, ROUND, URL};
use crate::handlers::{Elicit, Paris};
use crate::harness::{Kind, Way, bounded, start, text};
use crate::server;

/// Empty tool arguments.
fn empty() -> Value {
    json!({})
}

fn work_root() -> StaticRoots {
    StaticRoots(vec![Root {
        uri: "file:///work".into(),
        name: Some("work".into()),
        meta: None,
    }])
}

fn capabilities_sent(request: &Value) -> Value {
    request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"].clone()
}

each_way! {
    /// A per-call ceiling cuts the declared capabilities member by member
    /// (a gateway forwarding its own client's): URL-mode elicitation only
    /// makes the form-asking tool take its fallback, and the request says
    /// so on the wire; a ceiling never adds what no handler answers.
    async fn a_capability_ceiling_cuts_what_a_call_declares(way) {
        let conn = start(way, Kind::Fixture).await;
        let elicit = Elicit::fill(&[("name", "ada")])
            .with_url(|_q, _p| async { Ok(ElicitResult::consent()) });
        let client = conn.client(Client::builder().elicitation(elicit.clone()).sampling(Paris));
        let url_only = CallOptions::default().with_ceiling(
            tern_protocol::ClientCapabilities::default()
                .with_elicitation_url()
                .with_roots(),
        );
        let fell_back = bounded(client.call_tool_with("fallback", Some(empty()), &url_only))
            .await
            .unwrap();
        assert_eq!(text(&fell_back), "fallback: no elicitation", "{way:?}");
        assert!(elicit.asked().is_empty(), "{way:?}");
        let calls = conn.log.requests("tools/call");
        assert_eq!(capabilities_sent(&calls[0]), json!({"elicitation": {"url": {}}}), "{way:?}");
        let form_only = CallOptions::default().with_ceiling(
            tern_protocol::ClientCapabilities::default().with_elicitation_form(),
        );
        let asked = bounded(client.call_tool_with("fallback", Some(empty()), &form_only))
            .await
            .unwrap();
        assert_eq!(text(&asked), "asked: ada", "{way:?}");
        let calls = conn.log.requests("tools/call");
        assert_eq!(capabilities_sent(&calls[1]), json!({"elicitation": {"form": {}}}), "{way:?}");
    }
}

each_way! {
    /// Load shedding: a tool answers with state-only rounds three times; the
    /// driver retries each with the state, no answers, and a growing pause
    /// (50, 100, 200 ms), tells `on_round`, and gets the result.
    async fn load_shedding_is_retried_with_backoff_until_complete(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder());
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&rounds);
        let options = CallOptions::default().with_rounds(Arc::new(move |n, keys: &[String]| {
            seen.lock().unwrap().push((n, keys.len()));
        }));
        let began = Instant::now();
        let result = bounded(client.call_tool_with(
            "shed",
            Some(json!({"tag": "t", "times": 3})),
            &options,
        ))
        .await
        .unwrap();
        let took = began.elapsed();
        assert_eq!(text(&result), "ready after 3 retries", "{way:?}");
        assert_eq!(*rounds.lock().unwrap(), [(1, 0), (2, 0), (3, 0)], "{way:?}");
        assert!(took >= Duration::from_millis(350), "{way:?}: no backoff, {took:?}");
        let calls = conn.log.requests("tools/call");
        assert_eq!(calls.len(), 4, "{way:?}");
        for pair in calls.windows(2) {
            let sent = &conn.log.response(&pair[0]["id"]).unwrap()["result"];
            assert_eq!(sent["resultType"], "input_required", "{way:?}");
            assert!(sent.get("inputRequests").is_none_or(|r| r == &json!({})), "{way:?}");
            assert_eq!(pair[1]["params"]["requestState"], sent["requestState"], "{way:?}");
            assert!(pair[1]["params"].get("inputResponses").is_none(), "{way:?}");
        }
    }
}

each_way! {
    /// The capabilities a request declares are those of the installed
    /// handlers; a call can drop elicitation (a headless run) and the server
    /// then takes its fallback; a client without handlers declares nothing.
    async fn capabilities_follow_the_handlers_and_calls_can_drop_them(way) {
        let conn = start(way, Kind::Fixture).await;
        let elicit = Elicit::fill(&[("name", "ada")])
            .with_url(|_q, _p| async { Ok(ElicitResult::consent()) });
        let client = conn.client(
            Client::builder()
                .elicitation(elicit.clone())
                .sampling(Paris)
                .roots(work_root()),
        );
        let all = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}});
        let headless = CallOptions::default().without_elicitation();
        let without_elicitation = json!({"sampling": {}, "roots": {}});
        let everything_dropped = CallOptions::default()
            .without_elicitation()
            .without_sampling()
            .without_roots();
        let caps = |o: &CallOptions| serde_json::to_value(client.capabilities(o)).unwrap();
        assert_eq!(caps(&CallOptions::default()), all, "{way:?}");
        assert_eq!(caps(&headless), without_elicitation, "{way:?}");
        assert_eq!(caps(&everything_dropped), json!({}), "{way:?}");

        let asked = bounded(client.call_tool("fallback", Some(empty()))).await.unwrap();
        assert_eq!(text(&asked), "asked: ada", "{way:?}");
        let fell_back = bounded(client.call_tool_with("fallback", Some(empty()), &headless))
            .await
            .unwrap();
        assert_eq!(text(&fell_back), "fallback: no elicitation", "{way:?}");
        assert_eq!(elicit.asked().len(), 1, "{way:?}");
        let calls = conn.log.requests("tools/call");
        assert_eq!(calls.len(), 3, "{way:?}");
        assert_eq!(capabilities_sent(&calls[0]), all, "{way:?}");
        assert_eq!(capabilities_sent(&calls[1]), all, "{way:?}");
        assert_eq!(capabilities_sent(&calls[2]), without_elicitation, "{way:?}");

        let sampled = bounded(client.call_tool("sample", Some(empty()))).await.unwrap();
        assert_eq!(text(&sampled), "test-model: Paris", "{way:?}");
        let roots = bounded(client.call_tool("roots", Some(empty()))).await.unwrap();
        assert_eq!(text(&roots), "file:///work", "{way:?}");

        let bare = conn.client(Client::builder());
        assert_eq!(
            serde_json::to_value(bare.capabilities(&CallOptions::default())).unwrap(),
            json!({}),
            "{way:?}"
        );
        let fell_back = bounded(bare.call_tool("fallback", Some(empty()))).await.unwrap();
        assert_eq!(text(&fell_back), "fallback: no elicitation", "{way:?}");
    }
}

each_way! {
    /// tern never invents an answer: a question of a kind no installed
    /// handler answers (or one the call dropped) stops the call.
    async fn questions_without_a_handler_stop_the_call(way) {
        let stub = start(way, Kind::Stub).await;
        let client = stub.client(Client::builder().elicitation(Elicit::fill(&[])));
        let err = bounded(client.call_tool("asks_sampling", None)).await.unwrap_err();
        assert!(err.is_unanswerable(), "{way:?}: {err}");

        let client = stub.client(Client::builder().sampling(Paris));
        let dropped = CallOptions::default().without_sampling();
        let err = bounded(client.call_tool_with("asks_sampling", None, &dropped))
            .await
            .unwrap_err();
        assert!(err.is_unanswerable(), "{way:?}: {err}");
    }
}

each_way! {
    /// Manual mode: a round parked as JSON is resumed by a second client over
    /// a second transport (over stdio: a second server process with the same
    /// keys), round after round, until it completes.
    async fn pending_round_is_resumed_by_a_second_client(way) {
        let conn = start(way, Kind::Fixture).await;
        let first = conn.client(Client::builder().elicitation(Elicit::fill(&[])));
        let Round::InputRequired(pending) =
            bounded(first.call_tool_once("three_rounds", Some(empty()), &CallOptions::default()))
                .await
                .unwrap()
        else {
            panic!("{way:?}: three_rounds asks first");
        };
        assert_eq!(pending.method(), "tools/call", "{way:?}");
        assert_eq!(pending.round, 1, "{way:?}");
        assert_eq!(pending.input_requests.keys().collect::<Vec<_>>(), ["step1"], "{way:?}");
        let parked = serde_json::to_string(&pending).unwrap();
        bounded(first.close()).await;
        drop(first);

        let elicit = Elicit::fill(&[("name", "ada"), ("color", "red")]);
        let second = conn.client(Client::builder().elicitation(elicit.clone()));
        let mut pending: PendingRound = serde_json::from_str(&parked).unwrap();
        let options = CallOptions::default();
        let result = loop {
            let answers = bounded(second.answer(&pending, &options)).await.unwrap();
            match bounded(second.resume_tool(&pending, &answers, &options)).await.unwrap() {
                Round::Complete(result) => break result,
                Round::InputRequired(next) => {
                    assert_eq!(next.round, pending.round + 1, "{way:?}");
                    pending = next;
                }
                other => panic!("{way:?}: {other:?}"),
            }
        };
        assert_eq!(text(&result), "ada/red/true", "{way:?}");
        assert_eq!(pending.round, 3, "{way:?}");
        let keys: Vec<String> = elicit.asked().into_iter().map(|q| q.key).collect();
        assert_eq!(keys, ["step1", "step2", "step3"], "{way:?}");
    }
}

/// Manual mode across processes: this process parks a round; a second
/// process (this test binary re-run) reads it from its environment, answers
/// it with its own handler and resumes it against the same HTTP server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pending_round_is_resumed_in_a_second_process() {
    let conn = start(Way::Http, Kind::Fixture).await;
    let client = conn.client(Client::builder().elicitation(Elicit::fill(&[])));
    let Round::InputRequired(pending) =
        bounded(client.call_tool_once("greet", Some(empty()), &CallOptions::default()))
            .await
            .unwrap()
    else {
        panic!("greet asks first");
    };
    let parked = serde_json::to_string(&pending).unwrap();
    let output = bounded(
        tokio::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "child::entry", "--nocapture", "--quiet"])
            .env(ROLE, "resume")
            .env(URL, conn.url().unwrap())
            .env(ROUND, &parked)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains(&format!("{RESULT_MARK}Hello, second process!")),
        "{stdout}"
    );
    let calls = conn.log.requests("tools/call");
    assert_eq!(calls.len(), 2);
    assert_eq!(
        calls[1]["params"]["requestState"],
        json!(pending.request_state)
    );
    assert_eq!(
        calls[1]["params"]["inputResponses"]["user_name"]["content"]["name"],
        "second process"
    );
}

each_way! {
    /// Dropping a call's future cancels the request: the server's handler
    /// sees `ctx.cancelled()`. Over stdio the client says so with
    /// `notifications/cancelled`; over HTTP it closes the response stream.
    async fn dropping_a_call_cancels_it(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder());
        let started = Arc::new(Notify::new());
        let on_start = Arc::clone(&started);
        let options = CallOptions::default().with_progress(Arc::new(move |_| on_start.notify_one()));
        let call = client.call_tool_with("hang", Some(empty()), &options);
        let ended = Box::pin(bounded(async {
            tokio::select! {
                result = call => Some(result),
                () = started.notified() => None,
            }
        }))
        .await;
        assert!(ended.is_none(), "{way:?}: hang ended by itself: {ended:?}");
        // The call's future is gone: the server must learn it.
        let seen = bounded(client.call_tool("cancellations", Some(json!({"at_least": 1}))))
            .await
            .unwrap();
        assert_eq!(text(&seen), "1", "{way:?}");
        let hang = conn.log.requests("tools/call")[0].clone();
        assert_eq!(hang["params"]["name"], "hang", "{way:?}");
        let cancelled = conn.log.notifications("notifications/cancelled");
        if way == Way::Stdio {
            assert_eq!(
                cancelled,
                [json!({
                    "jsonrpc": "2.0",
                    "method": "notifications/cancelled",
                    "params": {"requestId": hang["id"]}
                })],
                "{way:?}"
            );
        } else {
            assert!(cancelled.is_empty(), "{way:?}: {cancelled:?}");
        }
    }
}

each_way! {
    /// Progress notifications reach the call's callback, in order, before
    /// the result; the request carried a progress token.
    async fn progress_reaches_the_callback(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&seen);
        let options = CallOptions::default().with_progress(Arc::new(move |p| {
            sink.lock().unwrap().push((p.progress, p.total, p.message.clone()));
        }));
        let result = bounded(client.call_tool_with("progress", Some(empty()), &options))
            .await
            .unwrap();
        assert_eq!(text(&result), "done", "{way:?}");
        let expected: Vec<(f64, Option<f64>, Option<String>)> = (1..=4u8)
            .map(|i| (f64::from(i), Some(4.0), Some("working".to_owned())))
            .collect();
        assert_eq!(*seen.lock().unwrap(), expected, "{way:?}");
        let call = &conn.log.requests("tools/call")[0];
        assert!(call["params"]["_meta"]["progressToken"].is_string(), "{way:?}");
    }
}

each_way! {
    /// `listen` delivers the acknowledgement first, then the changes asked
    /// for; dropping the subscription ends it.
    async fn listen_receives_the_ack_then_a_change(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder());
        let filter = SubscriptionFilter {
            tools_list_changed: Some(true),
            ..SubscriptionFilter::default()
        };
        let mut subscription = bounded(client.listen(filter)).await.unwrap();
        let Some(Ok(ServerNotification::SubscriptionsAcknowledged(ack))) =
            bounded(subscription.next()).await
        else {
            panic!("{way:?}: the acknowledgement comes first");
        };
        assert_eq!(ack.notifications.tools_list_changed, Some(true), "{way:?}");
        let touched = bounded(client.call_tool("touch", Some(empty()))).await.unwrap();
        assert_eq!(text(&touched), "touched", "{way:?}");
        let change = bounded(subscription.next()).await;
        assert!(
            matches!(change, Some(Ok(ServerNotification::ToolListChanged(_)))),
            "{way:?}: {change:?}"
        );
        drop(subscription);
        // The connection still serves requests.
        assert_eq!(bounded(client.list_prompts()).await.unwrap().len(), 1, "{way:?}");
    }
}

/// How a listen stream ends (Subscriptions › Cancellation; Cancellation ›
/// Behavior Requirements): a server's `notifications/cancelled`
/// for the listen request ends the subscription, as a result or a closed
/// stream does; over stdio the route is released, not left waiting.
async fn a_server_cancellation_ends_the_subscription(way: Way) {
    let stub = start(way, Kind::Stub).await;
    let client = stub.client(Client::builder());
    let mut subscription = bounded(client.listen(SubscriptionFilter::default()))
        .await
        .unwrap();
    let end = bounded(subscription.next()).await;
    assert!(end.is_none(), "{way:?}: {end:?}");
    assert!(bounded(subscription.next()).await.is_none(), "{way:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cancellation_ends_the_subscription_in_process() {
    a_server_cancellation_ends_the_subscription(Way::InProcess).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_cancellation_ends_the_subscription_over_stdio() {
    a_server_cancellation_ends_the_subscription(Way::Stdio).await;
}

each_way! {
    /// Every method: discover, the lists, a prompt and a resource that ask
    /// first (the driver answers for them too), completion; the server's
    /// self-description is kept.
    async fn every_method_round_trips(way) {
        let conn = start(way, Kind::Fixture).await;
        let elicit = Elicit::fill(&[("name", "ada"), ("color", "red")]);
        let client = conn.client(Client::builder().elicitation(elicit));
        let discovered = bounded(client.discover()).await.unwrap();
        assert!(discovered.supported_versions.iter().any(|v| v == "2026-07-28"), "{way:?}");
        assert_eq!(client.server_info().map(|s| s.name).as_deref(), Some(server::NAME));
        let tools: Vec<String> = bounded(client.list_tools())
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.name)
            .collect();
        assert!(tools.iter().any(|t| t == "three_rounds"), "{way:?}: {tools:?}");
        assert_eq!(tools.len(), 18, "{way:?}: {tools:?}");
        let prompts = bounded(client.list_prompts()).await.unwrap();
        assert_eq!(prompts[0].name, "ask_prompt", "{way:?}");
        let resources = bounded(client.list_resources()).await.unwrap();
        assert_eq!(resources[0].uri, "res://ask", "{way:?}");

        let arguments = json!({"who": "bo"}).as_object().cloned();
        let prompt = bounded(client.get_prompt("ask_prompt", arguments, &CallOptions::default()))
            .await
            .unwrap();
        assert_eq!(text(&prompt), "bo likes red", "{way:?}");
        let read = bounded(client.read_resource("res://ask", &CallOptions::default()))
            .await
            .unwrap();
        assert_eq!(text(&read), "res://ask for ada", "{way:?}");
        assert_eq!(conn.log.requests("prompts/get").len(), 2, "{way:?}");
        assert_eq!(conn.log.requests("resources/read").len(), 2, "{way:?}");

        let reference = Reference::Prompt(PromptReference {
            name: "ask_prompt".into(),
            title: None,
        });
        let completed = bounded(client.complete(reference, "who", "b", None)).await.unwrap();
        assert_eq!(completed.completion.values, ["bob"], "{way:?}");
    }
}
