//! The findings of issue 10, each reproduced as it was seen from outside:
//! multibyte text behind a re-chunking nginx, unbounded reads (a body, an
//! SSE event, a stdio line, a list that never ends), an answer that does not
//! fit its question, manual rounds of prompts and resources, and a preset
//! answer reused for another question under the same key.

use std::sync::{Arc, Mutex};

use axum::body::Body;
use serde_json::json;
use tern_client::transport::http::HttpTransport;
use tern_client::{
    CallOptions, Client, Completed, ErrorKind, HandlerError, Limit, Limits, PendingRound, Round,
};
use tern_protocol::InputResponses;
use tern_protocol::elicitation::{ElicitResult, ElicitValue};
use tern_server::transport::http::Http;
use tern_server::{Ctx, Server, ToolDef};

use crate::child::{RESULT_MARK, ROLE, ROUND, URL};
use crate::handlers::Elicit;
use crate::harness::{Kind, Way, bounded, serve_http, start, text};
use tern_test_support::nginx::Nginx;

/// Ten Thai characters, thirty bytes.
const THAI: &str = "สวัสดีครับ";

/// 36,000 Thai characters (108,000 bytes).
fn thai_text() -> String {
    THAI.repeat(3_600)
}

/// A server with one tool, `thai`, that reports progress (so its result
/// travels on an SSE stream) and returns [`thai_text`].
fn thai_server() -> Server {
    async fn thai(ctx: Ctx) -> String {
        ctx.progress(1.0, Some(1.0), Some("writing"));
        thai_text()
    }
    Server::builder("thai", "1.0.0")
        .progress_interval(std::time::Duration::ZERO)
        .tool(ToolDef::new("thai", "36,000 Thai characters", thai))
        .build()
        .unwrap()
}

/// Serves the Thai server on loopback; its address.
async fn serve_thai() -> std::net::SocketAddr {
    let url = serve_http(
        axum::Router::new().route_service("/mcp", Http::new(thai_server()).into_service()),
    )
    .await;
    url.trim_start_matches("http://")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap()
}

fn with_progress() -> CallOptions {
    CallOptions::default().with_progress(Arc::new(|_| {}))
}

/// A 36,000-character Thai result comes back intact through a real nginx
/// that re-chunks the stream (the old reader decoded each frame on its own
/// and returned U+FFFD where a character was cut), as SSE and as JSON.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thai_text_survives_a_rechunking_nginx() {
    let upstream = serve_thai().await;
    let nginx = tokio::task::spawn_blocking(move || Nginx::rechunking(upstream))
        .await
        .unwrap();
    let client = Client::builder().build(HttpTransport::new(&nginx.url("/mcp")).unwrap());
    let expected = thai_text();
    for options in [with_progress(), CallOptions::default()] {
        let result = bounded(client.call_tool_with("thai", None, &options))
            .await
            .unwrap();
        let got = text(&result);
        assert!(
            !got.contains('\u{FFFD}'),
            "{} replacement characters",
            got.matches('\u{FFFD}').count()
        );
        assert_eq!(got.chars().count(), 36_000);
        assert_eq!(got, expected);
    }
}

/// An SSE event larger than the event limit is refused with that limit's
/// error, not read into an ever-growing buffer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_event_over_the_limit_is_refused() {
    let upstream = serve_thai().await;
    let limits = Limits::default().with_max_event_bytes(8 << 10);
    let transport = HttpTransport::new(&format!("http://{upstream}/mcp"))
        .unwrap()
        .with_limits(limits);
    let client = Client::builder().limits(limits).build(transport);
    let err = bounded(client.call_tool_with("thai", None, &with_progress()))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Limit(Limit::EventBytes), "{err:#}");
    // The JSON path has its own limit, which this result is within.
    let result = bounded(client.call_tool("thai", None)).await.unwrap();
    assert_eq!(text(&result), thai_text());
}

/// A response body longer than the response limit is refused, whether the
/// server announced its length or streamed it without one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_over_the_limit_is_refused_announced_or_streamed() {
    async fn streamed() -> axum::response::Response {
        let reply = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [
            {"type": "text", "text": "y".repeat(100_000)}]}})
        .to_string()
        .into_bytes();
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
            reply.chunks(1_000).map(|c| Ok(c.to_vec())).collect();
        axum::response::Response::builder()
            .header("content-type", "application/json")
            .body(Body::from_stream(futures_util::stream::iter(chunks)))
            .unwrap()
    }
    let url = serve_http(axum::Router::new().route("/mcp", axum::routing::post(streamed))).await;
    let limits = Limits::default().with_max_response_bytes(16 << 10);
    let client = Client::builder()
        .limits(limits)
        .build(HttpTransport::new(&url).unwrap().with_limits(limits));
    let err = bounded(client.call_tool("anything", None))
        .await
        .unwrap_err();
    assert_eq!(err.limit_reached(), Some(Limit::ResponseBytes), "{err:#}");
    // Within the default limit, the same body reads.
    let client = Client::builder().build(HttpTransport::new(&url).unwrap());
    let result = bounded(client.call_tool("anything", None)).await.unwrap();
    assert_eq!(text(&result).len(), 100_000);
}

/// A result over the response limit, over HTTP (a JSON body with its
/// length) and over stdio (one long line: every waiting request learns it,
/// none waits for ever).
async fn a_result_over_the_limit_is_refused(way: Way) {
    let stub = start(way, Kind::Stub).await;
    let limits = Limits::default().with_max_response_bytes(16 << 10);
    let client = stub.client_with(Client::builder(), limits);
    let err = bounded(client.call_tool("big", None)).await.unwrap_err();
    assert_eq!(
        err.limit_reached(),
        Some(Limit::ResponseBytes),
        "{way:?}: {err:#}"
    );
    let roomy = stub.client(Client::builder());
    let result = bounded(roomy.call_tool("big", None)).await.unwrap();
    assert_eq!(text(&result).len(), crate::stub::BIG, "{way:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_limit_is_refused_over_http() {
    a_result_over_the_limit_is_refused(Way::Http).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_limit_is_refused_over_stdio() {
    a_result_over_the_limit_is_refused(Way::Stdio).await;
}

each_way! {
    /// A server that always returns `nextCursor` is stopped at the page
    /// limit, after exactly that many requests; one whose pages hold more
    /// items than the item limit is stopped there.
    async fn a_list_that_never_ends_stops_at_its_limits(way) {
        let stub = start(way, Kind::Stub).await;
        let client = stub.client_with(Client::builder(), Limits::default().with_max_pages(4));
        let err = bounded(client.list_tools()).await.unwrap_err();
        assert_eq!(err.limit_reached(), Some(Limit::Pages), "{way:?}: {err:#}");
        assert_eq!(stub.log.requests("tools/list").len(), 4, "{way:?}");

        let client = stub.client_with(Client::builder(), Limits::default().with_max_items(5));
        let err = bounded(client.list_tools()).await.unwrap_err();
        assert_eq!(err.limit_reached(), Some(Limit::Items), "{way:?}: {err:#}");
        assert_eq!(stub.log.requests("tools/list").len(), 4 + 2, "{way:?}: 3 + 3 > 5");
    }
}

/// With the default limits, too, an endless list ends: after 1,000 pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_list_ends_at_the_default_page_limit() {
    let stub = start(Way::InProcess, Kind::Stub).await;
    let client = stub.client(Client::builder());
    let err = bounded(client.list_tools()).await.unwrap_err();
    assert_eq!(err.limit_reached(), Some(Limit::Pages), "{err:#}");
    assert_eq!(stub.log.requests("tools/list").len(), 1_000);
}

each_way! {
    /// An answer to a manual round that does not fit its question (a roots
    /// answer to a form) is an error, and nothing is sent; it used to be
    /// dropped without a word, and the retry went out without it.
    async fn a_manual_answer_that_does_not_fit_is_an_error(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder().elicitation(Elicit::fill(&[])));
        let Round::InputRequired(pending) =
            bounded(client.call_tool_once("greet", Some(json!({})), &CallOptions::default()))
                .await
                .unwrap()
        else {
            panic!("{way:?}: greet asks first");
        };
        let wrong: InputResponses = serde_json::from_value(json!({"user_name": {"roots": []}})).unwrap();
        let err = bounded(client.resume_tool(&pending, &wrong, &CallOptions::default()))
            .await
            .unwrap_err();
        assert!(err.is_answer(), "{way:?}: {err:#}");
        assert!(format!("{err:#}").contains("user_name"), "{way:?}: {err:#}");
        assert_eq!(conn.log.requests("tools/call").len(), 1, "{way:?}: no retry");
    }
}

each_way! {
    /// A preset that does not satisfy its form (a number for a text field)
    /// is an error before anything is sent, not an answer the server refuses
    /// round after round.
    async fn a_preset_that_breaks_its_form_is_an_error_before_sending(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder().elicitation(Elicit::fill(&[])));
        let presets: InputResponses = serde_json::from_value(
            json!({"user_name": {"action": "accept", "content": {"name": 7}}}),
        )
        .unwrap();
        let options = CallOptions::default().with_answers(presets);
        let err = bounded(client.call_tool_with("greet", Some(json!({})), &options))
            .await
            .unwrap_err();
        assert!(err.is_answer(), "{way:?}: {err:#}");
        assert!(format!("{err:#}").contains("field `name`: wrong type"), "{way:?}: {err:#}");
        assert_eq!(conn.log.requests("tools/call").len(), 1, "{way:?}");
        assert_eq!(options.answers.unused(), ["user_name"], "{way:?}");
    }
}

each_way! {
    /// A server asks the key `confirm` twice, with two different questions.
    /// The preset answers the question it was first given for; the second
    /// goes to the handler (which declines), and the presets that were never
    /// used are reported.
    async fn a_preset_answers_only_the_question_it_was_given_for(way) {
        let stub = start(way, Kind::Stub).await;
        let asked = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&asked);
        let elicit = Elicit::form(move |_q, params| {
            seen.lock().unwrap().push(params.message);
            async { Ok(ElicitResult::decline()) }
        });
        let client = stub.client(Client::builder().elicitation(elicit));
        let presets: InputResponses = serde_json::from_value(json!({
            "confirm": {"action": "accept", "content": {"ok": true}},
            "never_asked": {"action": "decline"},
        }))
        .unwrap();
        let options = CallOptions::default().with_answers(presets);
        let result = bounded(client.call_tool_with("reasks", None, &options)).await.unwrap();
        assert_eq!(text(&result), "orders-accept, backups-decline", "{way:?}");
        assert_eq!(*asked.lock().unwrap(), ["Delete the backups too?"], "{way:?}");
        assert_eq!(options.answers.unused(), ["never_asked"], "{way:?}");
    }
}

each_way! {
    /// Manual mode for `prompts/get` and `resources/read`: a round parked as
    /// JSON is resumed by a second client, of either method, and a round
    /// resumed as the wrong method is refused before anything is sent.
    async fn prompt_and_resource_rounds_are_parked_and_resumed(way) {
        let conn = start(way, Kind::Fixture).await;
        let first = conn.client(Client::builder().elicitation(Elicit::fill(&[])));
        let options = CallOptions::default();
        let arguments = json!({"who": "bo"}).as_object().cloned();
        let Round::InputRequired(prompt) =
            bounded(first.get_prompt_once("ask_prompt", arguments, &options)).await.unwrap()
        else {
            panic!("{way:?}: ask_prompt asks first");
        };
        let Round::InputRequired(resource) =
            bounded(first.read_resource_once("res://ask", &options)).await.unwrap()
        else {
            panic!("{way:?}: res://ask asks first");
        };
        assert_eq!((prompt.method(), resource.method()), ("prompts/get", "resources/read"));
        let parked = [
            serde_json::to_string(&prompt).unwrap(),
            serde_json::to_string(&resource).unwrap(),
        ];

        let elicit = Elicit::fill(&[("name", "ada"), ("color", "red")]);
        let second = conn.client(Client::builder().elicitation(elicit));
        let mut texts = Vec::new();
        for json in &parked {
            let pending: PendingRound = serde_json::from_str(json).unwrap();
            let wrong = bounded(second.resume_tool(&pending, &InputResponses::new(), &options))
                .await
                .unwrap_err();
            assert_eq!(wrong.kind(), ErrorKind::Request, "{way:?}: {wrong:#}");
            let answers = bounded(second.answer(&pending, &options)).await.unwrap();
            match bounded(second.resume(&pending, &answers, &options)).await.unwrap() {
                Round::Complete(Completed::Prompt(p)) => texts.push(text(&p)),
                Round::Complete(Completed::Resource(r)) => texts.push(text(&r)),
                other => panic!("{way:?}: {other:?}"),
            }
        }
        assert_eq!(texts, ["bo likes red", "res://ask for ada"], "{way:?}");
        assert_eq!(conn.log.requests("prompts/get").len(), 2, "{way:?}");
        assert_eq!(conn.log.requests("resources/read").len(), 2, "{way:?}");
        // The retry carried the parked state, byte for byte (rule
        // `echo-state-exactly`).
        let retry = conn.log.requests("prompts/get").pop().unwrap();
        assert_eq!(retry["params"]["requestState"], json!(prompt.request_state), "{way:?}");
    }
}

/// Manual mode across processes for a prompt and a resource: this process
/// parks each round; a second process (this test binary re-run) resumes it
/// with its own handler against the same HTTP server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prompt_and_resource_rounds_are_resumed_in_a_second_process() {
    let conn = start(Way::Http, Kind::Fixture).await;
    let client = conn.client(Client::builder().elicitation(Elicit::fill(&[])));
    let options = CallOptions::default();
    let arguments = json!({"who": "bo"}).as_object().cloned();
    let Round::InputRequired(prompt) =
        bounded(client.get_prompt_once("ask_prompt", arguments, &options))
            .await
            .unwrap()
    else {
        panic!("ask_prompt asks first");
    };
    let Round::InputRequired(resource) = bounded(client.read_resource_once("res://ask", &options))
        .await
        .unwrap()
    else {
        panic!("res://ask asks first");
    };
    for (pending, expected) in [
        (prompt, "bo likes x"),
        (resource, "res://ask for second process"),
    ] {
        let output = bounded(
            tokio::process::Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "child::entry", "--nocapture", "--quiet"])
                .env(ROLE, "resume")
                .env(URL, conn.url().unwrap())
                .env(ROUND, serde_json::to_string(&pending).unwrap())
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
            stdout.contains(&format!("{RESULT_MARK}{expected}")),
            "{stdout}"
        );
    }
}

/// The answers a handler gives travel as they were made: the retry carries
/// the typed answer's JSON exactly (a number stays a number, order kept).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handlers_answer_reaches_the_retry_as_made() {
    let conn = start(Way::InProcess, Kind::Fixture).await;
    let elicit = Elicit::form(|_q, _p| async {
        let content = [
            ("name".to_owned(), ElicitValue::from("zoë")),
            ("extra".to_owned(), ElicitValue::from(42)),
        ];
        Ok::<_, HandlerError>(ElicitResult::accept(content.into_iter().collect()))
    });
    let client = conn.client(Client::builder().elicitation(elicit));
    let result = bounded(client.call_tool("greet", Some(json!({}))))
        .await
        .unwrap();
    assert_eq!(text(&result), "Hello, zoë!");
    let retry = conn.log.requests("tools/call").pop().unwrap();
    assert_eq!(
        retry["params"]["inputResponses"]["user_name"],
        json!({"action": "accept", "content": {"name": "zoë", "extra": 42}})
    );
    let order: Vec<&String> = retry["params"]["inputResponses"]["user_name"]["content"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    assert_eq!(order, ["name", "extra"]);
}
