//! A relay (`tern_server::relay`): lists paged through from another server
//! and its questions passed on, with the relay's own sealed state — here in
//! front of a real tern server, as a gateway stands in front of its
//! upstreams.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::mrtr::InputResponse;
use tern_protocol::result::CacheScope;
use tern_protocol::{ClientCapabilities, InputRequests};
use tern_server::relay::{ListKind, ListPage, ListRequest, Relay, RelayLeg, RelayOutcome};
use tern_server::replay::BoxFuture;
use tern_server::testing::TestClient;
use tern_server::{
    Answer, AnswerSource, AskInput, CacheHints, Ctx, Elicit, KeyRing, Principal, PromptDef, Server,
    ToolDef, ToolError,
};

use crate::fixture::ManualClock;

#[derive(Deserialize, JsonSchema)]
struct Name {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct Color {
    color: String,
}

async fn ask_name(ctx: Ctx) -> Result<String, ToolError> {
    let ticket: u32 = ctx.once("ticket", async { 7 }).await;
    let Answer::Accept(Name { name }) = ctx.ask(Elicit::<Name>::form("Your name?")).await? else {
        return Ok("declined".into());
    };
    Ok(format!("hello {name} #{ticket}"))
}

async fn two_rounds(ctx: Ctx) -> Result<String, ToolError> {
    let Answer::Accept(Name { name }) = ctx.ask(Elicit::<Name>::form("Your name?")).await? else {
        return Ok("declined".into());
    };
    let Answer::Accept(Color { color }) = ctx
        .ask(Elicit::<Color>::form(format!("{name}'s colour?")))
        .await?
    else {
        return Ok("declined".into());
    };
    Ok(format!("{name}/{color}"))
}

async fn ask_url(ctx: Ctx) -> Result<String, ToolError> {
    ctx.ask(Elicit::url("Sign in", "https://example.com/login"))
        .await?;
    Ok("signed in".into())
}

async fn big_state(ctx: Ctx) -> Result<String, ToolError> {
    let blob: String = ctx.once("blob", async { "x".repeat(12_000) }).await;
    ctx.ask(Elicit::<Name>::form("Your name?")).await?;
    Ok(blob.len().to_string())
}

/// The upstream: a real tern server, three tools per page.
fn upstream() -> Server {
    let mut meta = tern_protocol::JsonObject::new();
    meta.insert("com.example/owner".into(), json!("team-a"));
    Server::builder("upstream", "1")
        .tool(
            ToolDef::new("ask_name", "Asks a name", ask_name)
                .elicits::<Name>()
                .icons(vec![
                    serde_json::from_value(json!({"src": "https://example.com/i.png"})).unwrap(),
                ])
                .meta(meta.clone()),
        )
        .tool(ToolDef::new("two_rounds", "Two questions", two_rounds))
        .tool(ToolDef::new("ask_url", "Asks to sign in", ask_url))
        .tool(ToolDef::new("big_state", "A large state", big_state))
        .prompt(PromptDef::new("p", "A prompt", || async { "hi".to_owned() }).meta(meta))
        .page_size(3)
        .list_cache(CacheHints::new(Duration::from_secs(5), CacheScope::Private))
        .build()
        .unwrap()
}

/// A relay to one upstream: tools under `up__`, the upstream's own state
/// as the routing, every upstream call recorded.
struct ToUpstream {
    upstream: Arc<TestClient>,
    /// Each upstream `tools/call`'s params.
    sent: Mutex<Vec<Value>>,
    /// Each upstream `tools/call`'s result.
    got: Arc<Mutex<Vec<Value>>>,
    /// The routing of each live round left unanswered (`Relay::abandon`).
    abandoned: Mutex<Vec<Value>>,
}

const PREFIX: &str = "up__";

impl ToUpstream {
    fn new() -> Arc<Self> {
        Arc::new(Self {
            upstream: Arc::new(TestClient::new(upstream())),
            sent: Mutex::default(),
            got: Arc::default(),
            abandoned: Mutex::default(),
        })
    }

    fn got(&self) -> Vec<Value> {
        self.got.lock().unwrap().clone()
    }

    fn sent(&self) -> Vec<Value> {
        self.sent.lock().unwrap().clone()
    }
}

impl Relay for ToUpstream {
    fn lists(&self) -> &[ListKind] {
        &[ListKind::Tools]
    }

    fn abandon(&self, _ctx: &Ctx, routing: Value) {
        self.abandoned.lock().unwrap().push(routing);
    }

    fn list(
        &self,
        _kind: ListKind,
        request: ListRequest,
    ) -> BoxFuture<'static, Result<ListPage, ErrorObject>> {
        let upstream = Arc::clone(&self.upstream);
        let params = request
            .cursor
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        Box::pin(async move {
            let result = upstream.send("tools/list", params).await.result()?;
            let items = result["tools"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| {
                    let mut t = t.clone();
                    t["name"] = json!(format!("{PREFIX}{}", t["name"].as_str().unwrap()));
                    t
                })
                .collect();
            let mut page = ListPage::new(items).cache(
                result["ttlMs"].as_u64().unwrap(),
                serde_json::from_value(result["cacheScope"].clone()).unwrap(),
            );
            if let Some(next) = result["nextCursor"].as_str() {
                page = page.next_cursor(next);
            }
            Ok(page)
        })
    }

    fn call(&self, leg: RelayLeg) -> BoxFuture<'static, Result<RelayOutcome, ErrorObject>> {
        let Some(name) = leg.target.strip_prefix(PREFIX) else {
            return Box::pin(std::future::ready(Err(ErrorObject::invalid_params(
                "Unknown tool",
            ))));
        };
        let mut params = json!({"name": name, "arguments": *leg.arguments});
        if let Some(responses) = &leg.input_responses {
            params["inputResponses"] = serde_json::to_value(responses).unwrap();
        }
        if let Some(state) = leg.routing.as_ref().and_then(|r| r.get("s")) {
            params["requestState"] = state.clone();
        }
        self.sent.lock().unwrap().push(params.clone());
        let upstream = Arc::clone(&self.upstream);
        let got = Arc::clone(&self.got);
        Box::pin(async move {
            let result = upstream.send("tools/call", params).await.result()?;
            got.lock().unwrap().push(result.clone());
            if result["resultType"] == "input_required" {
                let requests: InputRequests =
                    serde_json::from_value(result["inputRequests"].clone()).unwrap_or_default();
                let mut routing = json!({"u": "up"});
                if let Some(state) = result.get("requestState") {
                    routing["s"] = state.clone();
                }
                return Ok(RelayOutcome::InputRequired { requests, routing });
            }
            Ok(RelayOutcome::Complete(result))
        })
    }
}

fn gateway(relay: Arc<ToUpstream>) -> (TestClient, Arc<ManualClock>) {
    let clock = ManualClock::new();
    let server = Server::builder("gateway", "2")
        .keys(KeyRing::generate())
        .clock(clock.clone())
        .max_state_len(16 * 1024)
        .relay(relay)
        .build()
        .unwrap();
    (TestClient::new(server), clock)
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test]
async fn questions_pass_through_and_the_state_wraps_the_upstreams_byte_for_byte() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    let first = client.call_tool("up__ask_name", json!({})).await;
    assert_eq!(first.result_type(), Some("input_required"));
    let asked = first.clone().result().unwrap();
    // The upstream's own answer, asked directly, for comparison.
    let direct = relay
        .upstream
        .call_tool("ask_name", json!({}))
        .await
        .result()
        .unwrap();
    assert_eq!(asked["inputRequests"], direct["inputRequests"]);
    assert_eq!(
        asked["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gateway"
    );
    let state = first.request_state().unwrap();
    assert_eq!(relay.sent().len(), 1);
    assert!(
        relay.sent()[0].get("requestState").is_none(),
        "no state invented upstream"
    );

    let done = client
        .retry_tool(
            "up__ask_name",
            json!({}),
            json!({"name": accept(json!({"name": "Ann"}))}),
            Some(state),
        )
        .await;
    let result = done.clone().result().unwrap();
    assert_eq!(done.text(), Some("hello Ann #7"), "{result}");
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gateway"
    );
    assert_eq!(result["resultType"], "complete");
    let sent = relay.sent();
    assert_eq!(sent.len(), 2);
    // The upstream got back the state it issued, exactly, and the answers as sent.
    let issued = relay.got()[0]["requestState"].clone();
    assert!(issued.is_string());
    assert_eq!(sent[1]["requestState"], issued);
    assert_ne!(
        issued.as_str(),
        Some(state),
        "the client holds the gateway's envelope"
    );
    assert_eq!(
        sent[1]["inputResponses"],
        json!({"name": accept(json!({"name": "Ann"}))})
    );
}

#[tokio::test]
async fn the_upstream_state_reaches_it_exactly_as_it_issued_it() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    let first = client.call_tool("up__two_rounds", json!({})).await;
    let second = client
        .retry_tool(
            "up__two_rounds",
            json!({}),
            json!({"name": accept(json!({"name": "Bo"}))}),
            first.request_state(),
        )
        .await;
    assert_eq!(second.input_keys(), ["color"]);
    // What the upstream answered the second leg with is what it gets on the third.
    let upstream_second = relay
        .upstream
        .retry_tool(
            "two_rounds",
            json!({}),
            json!({"name": accept(json!({"name": "Bo"}))}),
            relay.sent()[1]["requestState"].as_str(),
        )
        .await;
    assert_eq!(upstream_second.input_keys(), ["color"]);
    let third = client
        .retry_tool(
            "up__two_rounds",
            json!({}),
            json!({"color": accept(json!({"color": "red"}))}),
            second.request_state(),
        )
        .await;
    assert_eq!(third.text(), Some("Bo/red"), "{:?}", third.outcome);
    let sent = relay.sent();
    assert_eq!(sent.len(), 3);
    let got = relay.got();
    assert_eq!(sent[1]["requestState"], got[0]["requestState"]);
    assert_eq!(sent[2]["requestState"], got[1]["requestState"]);
    assert_ne!(
        sent[2]["requestState"], sent[1]["requestState"],
        "each round its own upstream state"
    );
}

#[tokio::test]
async fn a_relay_state_is_bound_as_the_engines_own() {
    let relay = ToUpstream::new();
    let (client, clock) = gateway(Arc::clone(&relay));
    let first = client.call_tool("up__ask_name", json!({})).await;
    let state = first.request_state().unwrap().to_owned();
    let answers = json!({"name": accept(json!({"name": "Ann"}))});
    let refused = |e: &tern_server::testing::Exchange| {
        assert_eq!(
            e.error_code(),
            Some(code::INVALID_PARAMS),
            "{:?}",
            e.outcome
        );
        assert_eq!(
            e.outcome.as_ref().unwrap_err().message,
            "Invalid or expired requestState"
        );
    };
    // Other arguments, another tool, another principal, a changed byte.
    refused(
        &client
            .retry_tool(
                "up__ask_name",
                json!({"x": 1}),
                answers.clone(),
                Some(&state),
            )
            .await,
    );
    refused(
        &client
            .retry_tool("up__two_rounds", json!({}), answers.clone(), Some(&state))
            .await,
    );
    let mut params = json!({"name": "up__ask_name", "arguments": {}, "inputResponses": answers, "requestState": state});
    params = client.with_meta(params);
    let other = client
        .send_as(
            "tools/call",
            Some(params),
            &Principal::new("mallory"),
            tokio_util::sync::CancellationToken::new(),
        )
        .await;
    refused(&other);
    let mut tampered = state.clone().into_bytes();
    let at = tampered.len() / 2;
    tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
    let tampered = String::from_utf8(tampered).unwrap();
    refused(
        &client
            .retry_tool("up__ask_name", json!({}), answers.clone(), Some(&tampered))
            .await,
    );
    // A state of the engine's own format is no relay state, and the other way round.
    let engine_state = relay.upstream.call_tool("ask_name", json!({})).await;
    refused(
        &client
            .retry_tool(
                "up__ask_name",
                json!({}),
                answers.clone(),
                engine_state.request_state(),
            )
            .await,
    );
    // Nothing refused reached the upstream.
    assert_eq!(relay.sent().len(), 1);
    // Past its expiry.
    clock.tick(Duration::from_secs(601));
    refused(
        &client
            .retry_tool("up__ask_name", json!({}), answers, Some(&state))
            .await,
    );
    assert_eq!(relay.sent().len(), 1);
}

#[tokio::test]
async fn a_relayed_question_beyond_the_requests_capabilities_is_32021() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    let client = client.with_capabilities(ClientCapabilities::default().with_elicitation_form());
    // The relay here forwards more than the client declared (the upstream
    // test client declares everything): the server's own check catches it.
    let asked = client.call_tool("up__ask_url", json!({})).await;
    assert_eq!(
        asked.error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY),
        "{:?}",
        asked.outcome
    );
    let data = asked.outcome.unwrap_err().data.unwrap();
    assert!(data.to_string().contains("url"), "{data}");
    // What the client declared passes.
    let form = client.call_tool("up__ask_name", json!({})).await;
    assert_eq!(form.result_type(), Some("input_required"));
}

#[tokio::test]
async fn an_upstream_state_too_large_to_wrap_is_32603_naming_the_limit() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    let big = client.call_tool("up__big_state", json!({})).await;
    assert_eq!(
        big.error_code(),
        Some(code::INTERNAL_ERROR),
        "{:?}",
        big.outcome
    );
    let message = big.outcome.unwrap_err().message;
    assert!(message.contains("16384 bytes"), "{message}");
}

#[tokio::test]
async fn lists_are_paged_through_with_every_member_and_the_pages_hints() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    let first = client.send("tools/list", json!({})).await.result().unwrap();
    let names: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["up__ask_name", "up__two_rounds", "up__ask_url"]);
    let tool = &first["tools"][0];
    assert_eq!(tool["_meta"]["com.example/owner"], "team-a", "{tool}");
    assert_eq!(tool["icons"][0]["src"], "https://example.com/i.png");
    assert!(tool["inputSchema"].is_object());
    assert_eq!(
        (first["ttlMs"].as_u64(), first["cacheScope"].as_str()),
        (Some(5000), Some("private"))
    );
    assert_eq!(
        first["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gateway"
    );
    let next = first["nextCursor"].as_str().unwrap();
    let second = client
        .send("tools/list", json!({"cursor": next}))
        .await
        .result()
        .unwrap();
    assert_eq!(second["tools"][0]["name"], "up__big_state");
    assert!(second.get("nextCursor").is_none());
    // A cursor the relay cannot read is its error, passed on.
    let bad = client.send("tools/list", json!({"cursor": "nope"})).await;
    assert_eq!(bad.error_code(), Some(code::INVALID_PARAMS));
    // Only what the relay lists is served.
    let server = Server::builder("g", "1").relay(relay).build().unwrap();
    assert!(server.serves("tools/call") && server.serves("tools/list"));
    assert!(!server.serves("prompts/get") && !server.serves("resources/read"));
}

#[tokio::test]
async fn a_registered_entry_beside_the_relays_list_is_refused_at_build() {
    async fn own() -> &'static str {
        "own"
    }
    let err = Server::builder("g", "1")
        .tool(ToolDef::new("own", "", own))
        .relay(ToUpstream::new())
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("the relay serves the tools list"),
        "{err}"
    );
    // A prompt beside a tools relay is fine, and is served by the registry.
    let server = Server::builder("g", "1")
        .prompt(PromptDef::new("mine", "", || async { "mine".to_owned() }))
        .relay(ToUpstream::new())
        .build()
        .unwrap();
    let c = TestClient::new(server);
    let got = c
        .send("prompts/get", json!({"name": "mine"}))
        .await
        .result()
        .unwrap();
    assert_eq!(got["messages"][0]["content"]["text"], "mine");
}

/// Answers every question from a table, recording what was published.
struct Answers {
    table: Vec<(&'static str, Value)>,
    published: Mutex<Vec<Vec<String>>>,
}

impl AnswerSource for Answers {
    fn answers(
        &self,
        questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>> {
        self.published
            .lock()
            .unwrap()
            .push(questions.keys().cloned().collect());
        let answers = questions
            .iter()
            .map(|(key, request)| {
                let message =
                    serde_json::to_value(request).unwrap()["params"]["message"].to_string();
                let (_, answer) = self
                    .table
                    .iter()
                    .find(|(m, _)| message.contains(m))
                    .unwrap_or_else(|| panic!("unexpected question {message}"));
                (key.clone(), serde_json::from_value(answer.clone()).unwrap())
            })
            .collect();
        Box::pin(std::future::ready(Ok(answers)))
    }

    fn question_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

#[tokio::test]
async fn under_await_each_relayed_round_is_asked_on_the_session() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    let source = Arc::new(Answers {
        table: vec![
            ("Your name?", accept(json!({"name": "Cy"}))),
            ("Cy's colour?", accept(json!({"color": "teal"}))),
        ],
        published: Mutex::default(),
    });
    let done = client
        .send_awaiting(
            "tools/call",
            json!({"name": "up__two_rounds", "arguments": {}}),
            source.clone(),
        )
        .await;
    assert_eq!(done.text(), Some("Cy/teal"), "{:?}", done.outcome);
    assert_eq!(
        done.clone().result().unwrap()["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gateway"
    );
    assert_eq!(source.published.lock().unwrap().len(), 2);
    assert!(
        relay.abandoned.lock().unwrap().is_empty(),
        "answered rounds are not left"
    );
    let sent = relay.sent();
    assert_eq!(sent.len(), 3, "one upstream leg per round");
    assert_eq!(
        sent[1]["inputResponses"]["name"],
        accept(json!({"name": "Cy"}))
    );
    assert_eq!(
        sent[2]["inputResponses"]["color"],
        accept(json!({"color": "teal"}))
    );
    assert!(sent[2]["requestState"].is_string());
    // A request that cannot answer what the upstream asks ends -32021.
    let form_only = client.with_capabilities(ClientCapabilities::default().with_elicitation_form());
    let refused = form_only
        .send_awaiting(
            "tools/call",
            json!({"name": "up__ask_url", "arguments": {}}),
            source,
        )
        .await;
    assert_eq!(
        refused.error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY)
    );
}

/// Asked, never answers: a session's client that leaves.
#[derive(Default)]
struct Leaving {
    asked: tokio::sync::Notify,
}

impl AnswerSource for Leaving {
    fn answers(
        &self,
        _questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>> {
        self.asked.notify_one();
        Box::pin(std::future::pending())
    }

    fn question_timeout(&self) -> Duration {
        Duration::from_secs(30)
    }
}

/// A live round whose client leaves before it answers (the request
/// dropped): the relay is told, with the routing of the leg that asked, so
/// it can let go of what that routing holds upstream.
#[tokio::test]
async fn under_await_a_round_left_unanswered_is_handed_back_to_the_relay() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    let leaving = Arc::new(Leaving::default());
    let source: Arc<dyn AnswerSource> = leaving.clone();
    let calling = client.send_awaiting(
        "tools/call",
        json!({"name": "up__ask_name", "arguments": {}}),
        source,
    );
    tokio::select! {
        done = calling => panic!("ended unanswered: {:?}", done.outcome),
        () = leaving.asked.notified() => {}
    }
    let abandoned = relay.abandoned.lock().unwrap().clone();
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    // The routing the relay answered with: the upstream's own state.
    assert_eq!(abandoned[0]["u"], "up");
    assert_eq!(abandoned[0]["s"], relay.got()[0]["requestState"]);
}

/// A live call that runs past the round limit (its answers always of the
/// wrong shape, so the upstream asks again): it ends `-31004` and the relay
/// is handed the last round's routing, so what it holds is let go.
#[tokio::test]
async fn under_await_a_call_past_the_round_limit_hands_its_last_routing_back() {
    let relay = ToUpstream::new();
    let (client, _) = gateway(Arc::clone(&relay));
    // An answer of the wrong shape: the upstream asks again.
    let source = Arc::new(Answers {
        table: vec![("Your name?", accept(json!({"name": 5})))],
        published: Mutex::default(),
    });
    let done = client
        .send_awaiting(
            "tools/call",
            json!({"name": "up__ask_name", "arguments": {}}),
            source,
        )
        .await;
    assert_eq!(
        done.error_code(),
        Some(tern_server::error::codes::CALL_LIMIT)
    );
    let abandoned = relay.abandoned.lock().unwrap().clone();
    assert_eq!(abandoned.len(), 1, "{abandoned:?}");
    let last = relay.got().last().cloned().unwrap();
    assert_eq!(abandoned[0]["s"], last["requestState"]);
}

/// `AskInput`: any input request, answered with the raw response.
async fn relay_by_hand(ctx: Ctx) -> Result<String, ToolError> {
    let request = serde_json::from_value(json!({
        "method": "elicitation/create",
        "params": {"mode": "form", "message": "Pick", "requestedSchema": {
            "type": "object", "properties": {"pick": {"type": "string"}}}}
    }))
    .map_err(ToolError::internal)?;
    let answer = ctx.ask(AskInput::new("upstream_key", request)).await?;
    serde_json::to_string(&answer).map_err(ToolError::internal)
}

#[tokio::test]
async fn an_input_request_asked_as_it_is_gets_the_raw_response() {
    let server = Server::builder("g", "1")
        .tool(ToolDef::new("by_hand", "", relay_by_hand))
        .build()
        .unwrap();
    let c = TestClient::new(server);
    let first = c.call_tool("by_hand", json!({})).await;
    assert_eq!(first.input_keys(), ["upstream_key"]);
    let done = c
        .retry_tool(
            "by_hand",
            json!({}),
            json!({"upstream_key": accept(json!({"pick": "b"}))}),
            first.request_state(),
        )
        .await;
    let text: Value = serde_json::from_str(done.text().unwrap()).unwrap();
    assert_eq!(text, accept(json!({"pick": "b"})));
    // A prompt's `_meta` is listed as given.
    let upstream = TestClient::new(upstream());
    let prompts = upstream
        .send("prompts/list", json!({}))
        .await
        .result()
        .unwrap();
    assert_eq!(
        prompts["prompts"][0]["_meta"]["com.example/owner"],
        "team-a"
    );
}

#[tokio::test]
async fn a_2025_session_answers_the_relayed_rounds_live() {
    use crate::legacy::{Stdio, all_capabilities, answer_all, call};
    let relay = ToUpstream::new();
    let server = Server::builder("gateway", "2")
        .keys(KeyRing::generate())
        .relay(Arc::clone(&relay) as Arc<dyn Relay>)
        .build()
        .unwrap();
    let (mut session, init) = Stdio::open(server, all_capabilities()).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "gateway");
    let list = session
        .call(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}),
            &answer_all,
        )
        .await;
    assert_eq!(list.response["result"]["tools"][0]["name"], "up__ask_name");
    let seen = session
        .call(&call(2, "up__two_rounds", json!({})), &answer_all)
        .await;
    assert_eq!(seen.text(), "Ada/blue");
    let asked: Vec<&str> = seen
        .requests
        .iter()
        .map(|r| r["method"].as_str().unwrap())
        .collect();
    assert_eq!(asked, ["elicitation/create", "elicitation/create"]);
    assert!(
        seen.requests[1]["params"]["message"]
            .as_str()
            .unwrap()
            .contains("Ada")
    );
    // The upstream saw three MRTR legs: its own rounds, driven by the relay.
    let sent = relay.sent();
    assert_eq!(sent.len(), 3);
    assert_eq!(sent[2]["requestState"], relay.got()[1]["requestState"]);
}

/// A relay that runs tasks and completes, answering with what it was given.
struct Tasks;

impl Relay for Tasks {
    fn lists(&self) -> &[ListKind] {
        &[ListKind::Tools]
    }

    fn list(
        &self,
        _kind: ListKind,
        _request: ListRequest,
    ) -> BoxFuture<'static, Result<ListPage, ErrorObject>> {
        Box::pin(std::future::ready(Ok(ListPage::new(Vec::new()))))
    }

    fn call(&self, _leg: RelayLeg) -> BoxFuture<'static, Result<RelayOutcome, ErrorObject>> {
        Box::pin(std::future::ready(Err(ErrorObject::invalid_params(
            "no tools",
        ))))
    }

    fn relays_tasks(&self) -> bool {
        true
    }

    fn task(
        &self,
        method: &'static str,
        params: Value,
        principal: Principal,
    ) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        let who = principal.id().unwrap_or("anonymous").to_owned();
        Box::pin(std::future::ready(Ok(json!({
            "taskId": params["taskId"], "status": "working", "method": method, "who": who,
        }))))
    }

    fn completes(&self) -> bool {
        true
    }

    fn complete(
        &self,
        params: Value,
        _principal: Principal,
    ) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        let value = params["argument"]["value"].clone();
        Box::pin(std::future::ready(Ok(json!({
            "completion": {"values": [format!("{}-done", value.as_str().unwrap_or(""))]}
        }))))
    }
}

#[tokio::test]
async fn tasks_and_completions_go_to_a_relay_that_runs_them() {
    let server = Server::builder("gateway", "2")
        .relay(Arc::new(Tasks))
        .build()
        .unwrap();
    let c = TestClient::new(server);
    let discover = c.send("server/discover", json!({})).await.result().unwrap();
    let caps = &discover["capabilities"];
    assert!(
        caps["extensions"]["io.modelcontextprotocol/tasks"].is_object(),
        "{caps}"
    );
    assert!(caps["completions"].is_object(), "{caps}");
    // A request that did not declare the extension: -32021 before the relay.
    let undeclared = c.send("tasks/get", json!({"taskId": "t1"})).await;
    assert_eq!(
        undeclared.error_code(),
        Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY)
    );
    let declared = TestClient::new(
        Server::builder("gateway", "2")
            .relay(Arc::new(Tasks))
            .build()
            .unwrap(),
    )
    .with_capabilities(
        ClientCapabilities::default().with_extension(tern_protocol::task::TASKS_EXTENSION),
    )
    .with_principal(Principal::new("ann"));
    for method in ["tasks/get", "tasks/cancel"] {
        let got = declared
            .send(method, json!({"taskId": "t1"}))
            .await
            .result()
            .unwrap();
        assert_eq!(
            (got["method"].as_str(), got["who"].as_str()),
            (Some(method), Some("ann"))
        );
        assert_eq!(
            got["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "gateway"
        );
    }
    let updated = declared
        .send(
            "tasks/update",
            json!({"taskId": "t1", "inputResponses": {}}),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(updated["method"], "tasks/update");
    let completed = c
        .send(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "p"}, "argument": {"name": "a", "value": "x"}}),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(completed["completion"]["values"][0], "x-done");
    assert_eq!(
        completed["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "gateway"
    );
}
