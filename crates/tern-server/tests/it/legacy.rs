//! Two eras, one handler: a scripted 2025-11-25 client drives the fixture's
//! handlers over real stdio framing (an in-memory pipe) and over real HTTP
//! (loopback TCP), and answers the server's live requests; plus the HTTP
//! session rules and the routing table of `legacy::http`, row by row.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use tern_server::legacy::LegacyOptions;
use tern_server::transport::http::{Bearer, Http};
use tern_server::transport::stdio::{StdioOptions, serve};
use tern_server::{Answer, Args, Ctx, Elicit, Principal, PromptDef, Server, ToolDef, ToolError};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use crate::fixture::{Counters, ManualClock, Name, TwoTokens, Who, builder};

/// What the scripted client answers to one server-to-client request: the
/// `result` / `error` members, or `None` to leave it unanswered.
type Answerer<'a> = &'a (dyn Fn(&Value) -> Option<Value> + Sync);

/// Everything one call saw: the server's requests and notifications, in
/// order, and the final response.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub(crate) requests: Vec<Value>,
    pub(crate) notifications: Vec<Value>,
    pub(crate) response: Value,
}

impl Seen {
    pub(crate) fn text(&self) -> &str {
        self.response["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("a text result: {}", self.response))
    }

    fn methods(&self) -> Vec<&str> {
        self.notifications
            .iter()
            .filter_map(|n| n["method"].as_str())
            .collect()
    }
}

fn initialize(version: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities,
        "clientInfo": {"name": "legacy-test", "version": "1.0"}}})
}

pub(crate) fn all_capabilities() -> Value {
    json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {"listChanged": true}})
}

pub(crate) fn call(id: i64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

fn reply_to(request: &Value, body: Value) -> Value {
    let mut out = json!({"jsonrpc": "2.0", "id": request["id"].clone()});
    for (k, v) in body.as_object().expect("result or error") {
        out[k] = v.clone();
    }
    out
}

/// Answers every question the fixture asks with fixed values.
#[allow(clippy::unnecessary_wraps, reason = "an Answerer")]
pub(crate) fn answer_all(request: &Value) -> Option<Value> {
    let params = &request["params"];
    Some(match request["method"].as_str()? {
        "elicitation/create" if params["mode"] == "url" => json!({"result": {"action": "accept"}}),
        "elicitation/create" => {
            let props = &params["requestedSchema"]["properties"];
            let content = if props.get("color").is_some() {
                json!({"color": "blue"})
            } else if props.get("ok").is_some() {
                json!({"ok": true})
            } else {
                json!({"name": "Ada"})
            };
            json!({"result": {"action": "accept", "content": content}})
        }
        "sampling/createMessage" => json!({"result": {"role": "assistant",
            "content": {"type": "text", "text": "Paris"}, "model": "test-model", "stopReason": "endTurn"}}),
        "roots/list" => json!({"result": {"roots": [{"uri": "file:///work", "name": "work"}]}}),
        "ping" => json!({"result": {}}),
        _ => json!({"error": {"code": -32601, "message": "Method not found"}}),
    })
}

// ---------------------------------------------------------------- stdio

pub(crate) struct Stdio {
    input: DuplexStream,
    output: tokio::io::Lines<BufReader<DuplexStream>>,
}

impl Stdio {
    fn start(server: Server) -> Self {
        let (input, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, output) = tokio::io::duplex(1 << 16);
        tokio::spawn(serve(
            server,
            server_in,
            server_out,
            StdioOptions::default(),
        ));
        Self {
            input,
            output: BufReader::new(output).lines(),
        }
    }

    pub(crate) async fn open(server: Server, capabilities: Value) -> (Self, Value) {
        let mut s = Self::start(server);
        s.send(&initialize("2025-11-25", capabilities)).await;
        let init = s.recv().await;
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        (s, init)
    }

    async fn send(&mut self, message: &Value) {
        self.send_text(&serde_json::to_string(message).unwrap())
            .await;
    }

    /// One line as written (JSON a `Value` cannot hold: repeated names).
    async fn send_text(&mut self, text: &str) {
        let mut line = text.as_bytes().to_vec();
        line.push(b'\n');
        self.input.write_all(&line).await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        let line = self.output.next_line().await.unwrap().expect("a line");
        serde_json::from_str(&line).unwrap()
    }

    /// Sends `request` and plays the client until its response.
    pub(crate) async fn call(&mut self, request: &Value, answer: Answerer<'_>) -> Seen {
        self.send(request).await;
        let mut seen = Seen::default();
        for _ in 0..200 {
            let message = self.recv().await;
            if message.get("method").is_some() && message.get("id").is_some() {
                if let Some(body) = answer(&message) {
                    self.send(&reply_to(&message, body)).await;
                }
                seen.requests.push(message);
            } else if message.get("method").is_some() {
                seen.notifications.push(message);
            } else if message["id"] == request["id"] {
                seen.response = message;
                return seen;
            }
        }
        panic!("no response within 200 messages: {seen:?}");
    }
}

// ---------------------------------------------------------------- HTTP

struct Endpoint {
    url: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// A response, with the body read whole (JSON) or as SSE messages.
struct Response {
    status: u16,
    headers: http::HeaderMap,
    body: String,
}

impl Response {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

async fn endpoint(server: Server, configure: impl FnOnce(Http) -> Http) -> Endpoint {
    let app =
        axum::Router::new().route_service("/mcp", configure(Http::new(server)).into_service());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    Endpoint {
        url: format!("http://127.0.0.1:{port}/mcp"),
        client: Client::builder(TokioExecutor::new()).build_http(),
    }
}

impl Endpoint {
    fn request(
        &self,
        method: &str,
        headers: &[(&str, &str)],
        body: Option<&Value>,
    ) -> http::Request<Full<Bytes>> {
        let bytes = body
            .map(|b| serde_json::to_vec(b).unwrap())
            .unwrap_or_default();
        self.request_bytes(method, headers, bytes)
    }

    /// A request whose body is `bytes` as they are.
    fn request_bytes(
        &self,
        method: &str,
        headers: &[(&str, &str)],
        bytes: Vec<u8>,
    ) -> http::Request<Full<Bytes>> {
        let mut b = http::Request::builder()
            .method(method)
            .uri(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(Full::new(Bytes::from(bytes))).unwrap()
    }

    /// One exchange, the body read to its end.
    async fn send(&self, method: &str, headers: &[(&str, &str)], body: Option<&Value>) -> Response {
        self.exchange(self.request(method, headers, body)).await
    }

    async fn exchange(&self, request: http::Request<Full<Bytes>>) -> Response {
        let response = self.client.request(request).await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Response {
            status,
            headers,
            body: String::from_utf8(body.to_vec()).unwrap(),
        }
    }

    async fn post(&self, headers: &[(&str, &str)], body: &Value) -> Response {
        self.send("POST", headers, Some(body)).await
    }

    /// `initialize` + `notifications/initialized`: the session id.
    async fn open(&self, capabilities: Value) -> Session<'_> {
        let init = self
            .post(&[], &initialize("2025-11-25", capabilities))
            .await;
        assert_eq!(init.status, 200, "{}", init.body);
        let id = init.headers["mcp-session-id"].to_str().unwrap().to_owned();
        let s = Session {
            http: self,
            id,
            token: None,
        };
        let ack = s
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(ack.status, 202);
        s
    }
}

struct Session<'a> {
    http: &'a Endpoint,
    id: String,
    token: Option<String>,
}

impl Session<'_> {
    fn headers(&self) -> Vec<(&str, &str)> {
        let mut h = vec![
            ("mcp-session-id", self.id.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        if let Some(t) = &self.token {
            h.push(("authorization", t.as_str()));
        }
        h
    }

    async fn post(&self, body: &Value) -> Response {
        self.http.post(&self.headers(), body).await
    }

    /// POSTs `text` as it is (JSON a `Value` cannot hold: repeated names).
    async fn post_text(&self, text: &str) -> Response {
        let request = self
            .http
            .request_bytes("POST", &self.headers(), text.as_bytes().to_vec());
        self.http.exchange(request).await
    }

    /// POSTs `request` and plays the client until its response: SSE
    /// events are read as they come, and answers are posted back (202).
    async fn call(&self, request: &Value, answer: Answerer<'_>) -> Seen {
        let response = self
            .http
            .client
            .request(self.http.request("POST", &self.headers(), Some(request)))
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let sse = response.headers()["content-type"] == "text/event-stream";
        let mut body = response.into_body();
        let mut seen = Seen::default();
        if !sse {
            let bytes = body.collect().await.unwrap().to_bytes();
            seen.response = serde_json::from_slice(&bytes).unwrap();
            return seen;
        }
        let mut buf = String::new();
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame.unwrap().into_data() else {
                continue;
            };
            buf.push_str(std::str::from_utf8(&data).unwrap());
            while let Some(end) = buf.find("\n\n") {
                let event: String = buf.drain(..end + 2).collect();
                let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) else {
                    continue;
                };
                let message: Value = serde_json::from_str(data).unwrap();
                if message.get("method").is_some() && message.get("id").is_some() {
                    if let Some(reply) = answer(&message) {
                        let ack = self.post(&reply_to(&message, reply)).await;
                        assert_eq!(ack.status, 202);
                    }
                    seen.requests.push(message);
                } else if message.get("method").is_some() {
                    seen.notifications.push(message);
                } else {
                    seen.response = message;
                }
            }
        }
        assert!(
            seen.response.is_object(),
            "the stream ended without a response: {seen:?}"
        );
        seen
    }
}

fn fixture() -> Server {
    builder(&Arc::new(Counters::default()), ManualClock::new())
        .build()
        .unwrap()
}

/// The scenarios both transports run: every kind of question the fixture's
/// handlers ask, answered live.
#[derive(Clone, Copy, Debug)]
enum Wire {
    Stdio,
    Http,
}

/// Runs `request` on a fresh session of `server` over `wire`.
async fn on_session(
    wire: Wire,
    server: Server,
    caps: Value,
    requests: &[Value],
    answer: Answerer<'_>,
) -> Vec<Seen> {
    let mut out = Vec::new();
    match wire {
        Wire::Stdio => {
            let (mut s, _) = Stdio::open(server, caps).await;
            for r in requests {
                out.push(s.call(r, answer).await);
            }
        }
        Wire::Http => {
            let http = endpoint(server, |h| h).await;
            let s = http.open(caps).await;
            for r in requests {
                out.push(s.call(r, answer).await);
            }
        }
    }
    out
}

#[tokio::test]
async fn initialize_negotiates_2025_versions_and_advertises_the_legacy_capabilities() {
    for (asked, got) in [
        ("2025-11-25", "2025-11-25"),
        ("2025-06-18", "2025-06-18"),
        ("2025-03-26", "2025-03-26"),
        ("2026-07-28", "2025-11-25"),
        ("1999-01-01", "2025-11-25"),
    ] {
        let mut s = Stdio::start(fixture());
        s.send(&initialize(asked, json!({}))).await;
        let init = s.recv().await;
        let result = &init["result"];
        assert_eq!(result["protocolVersion"], got, "{asked}");
        assert_eq!(result["serverInfo"]["name"], "fixture");
        let caps = &result["capabilities"];
        assert_eq!(caps["logging"], json!({}));
        assert_eq!(caps["tools"]["listChanged"], true);
        assert_eq!(caps["resources"]["subscribe"], true);
        assert!(
            caps.get("extensions").is_none() && caps.get("tasks").is_none(),
            "no tasks on a legacy session: {caps}"
        );
        assert!(result.get("resultType").is_none());

        let http = endpoint(fixture(), |h| h).await;
        let init = http.post(&[], &initialize(asked, json!({}))).await;
        assert_eq!(init.status, 200);
        assert_eq!(init.json()["result"]["protocolVersion"], got);
        let id = init.headers["mcp-session-id"].to_str().unwrap();
        assert_eq!(id.len(), 32, "128 random bits, hex");
        assert!(id.bytes().all(|b| b.is_ascii_hexdigit()));
    }
}

#[tokio::test]
async fn results_follow_the_2025_schema() {
    for wire in [Wire::Stdio, Wire::Http] {
        let seen = on_session(
            wire,
            fixture(),
            all_capabilities(),
            &[
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                json!({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "res://item/7"}}),
                json!({"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "res://none"}}),
                json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}),
                call(5, "no_args", json!({})),
            ],
            &answer_all,
        )
        .await;
        let list = &seen[0].response["result"];
        assert!(list["tools"].as_array().unwrap().len() > 10, "{wire:?}");
        for r in [
            list,
            &seen[1].response["result"],
            &seen[4].response["result"],
        ] {
            for field in ["resultType", "ttlMs", "cacheScope", "_meta"] {
                assert!(r.get(field).is_none(), "{wire:?}: {field} in {r}");
            }
        }
        assert_eq!(seen[1].response["result"]["contents"][0]["text"], "item 7");
        assert_eq!(
            seen[2].response["error"]["code"], -32002,
            "2025's resource not found"
        );
        assert_eq!(seen[3].response["result"], json!({}));
    }
}

#[tokio::test]
async fn every_kind_of_question_is_a_live_request_on_the_session() {
    for wire in [Wire::Stdio, Wire::Http] {
        let seen = on_session(
            wire,
            fixture(),
            all_capabilities(),
            &[
                call(1, "greet", json!({})),
                call(2, "batch", json!({})),
                call(3, "three_rounds", json!({})),
                call(4, "sample", json!({})),
                call(5, "roots", json!({})),
                json!({"jsonrpc": "2.0", "id": 6, "method": "prompts/get", "params": {"name": "ask_prompt", "arguments": {"who": "Bo"}}}),
                json!({"jsonrpc": "2.0", "id": 7, "method": "resources/read", "params": {"uri": "res://ask"}}),
                call(8, "ask_all", json!({})),
                call(9, "greet_asked", json!({})),
                call(10, "batch_asked", json!({})),
            ],
            &answer_all,
        )
        .await;
        assert_eq!(seen[0].text(), "Hello, Ada!", "{wire:?}");
        assert_eq!(seen[0].requests[0]["method"], "elicitation/create");
        assert_eq!(
            seen[0].requests[0]["params"]["message"],
            "What is your name?"
        );
        assert!(
            seen[0].requests[0]["params"].get("_meta").is_none()
                || seen[0].requests[0]["params"]["_meta"].is_object()
        );
        // Two questions in one round: both were out before either answer
        // could have re-run the handler.
        assert_eq!(seen[1].text(), "Ada likes blue");
        assert_eq!(seen[1].requests.len(), 2);
        // Dependent rounds: the second question carries the first answer.
        assert_eq!(seen[2].text(), "Ada/blue/true");
        assert_eq!(seen[2].requests.len(), 3);
        assert_eq!(
            seen[2].requests[1]["params"]["message"],
            "Step 2: Ada's colour?"
        );
        assert_eq!(seen[3].text(), "test-model: Paris");
        assert_eq!(seen[3].requests[0]["method"], "sampling/createMessage");
        assert_eq!(seen[4].text(), "file:///work");
        assert_eq!(seen[4].requests[0]["method"], "roots/list");
        assert_eq!(
            seen[5].response["result"]["messages"][0]["content"]["text"],
            "Bo likes blue"
        );
        assert_eq!(
            seen[6].response["result"]["contents"][0]["text"],
            "res://ask for Ada"
        );
        assert_eq!(seen[7].text(), "Ada,Ada,Ada");
        assert_eq!(seen[7].requests.len(), 3);
        // `Asked` parameters: live requests as their `ctx.ask` twins'.
        assert_eq!(seen[8].text(), seen[0].text(), "{wire:?}");
        assert_eq!(
            seen[8].requests[0]["params"]["message"],
            "What is your name?"
        );
        assert_eq!(seen[9].text(), "Ada likes blue", "{wire:?}");
        assert_eq!(seen[9].requests.len(), 2);
        // Server request ids are unique on the session.
        let mut ids: Vec<String> = seen
            .iter()
            .flat_map(|s| s.requests.iter().map(|r| r["id"].to_string()))
            .collect();
        let n = ids.len();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), n, "{wire:?}");
        // Nothing is left outstanding: no cancellation was sent.
        assert!(
            seen.iter()
                .all(|s| !s.methods().contains(&"notifications/cancelled"))
        );
    }
}

#[tokio::test]
async fn decline_and_cancel_reach_the_handler_as_such() {
    let decline = |r: &Value| {
        (r["method"] == "elicitation/create").then(|| json!({"result": {"action": "decline"}}))
    };
    let cancel = |r: &Value| {
        (r["method"] == "elicitation/create").then(|| json!({"result": {"action": "cancel"}}))
    };
    for wire in [Wire::Stdio, Wire::Http] {
        let d = on_session(
            wire,
            fixture(),
            all_capabilities(),
            &[call(1, "greet", json!({}))],
            &decline,
        )
        .await;
        assert_eq!(d[0].text(), "declined", "{wire:?}");
        let c = on_session(
            wire,
            fixture(),
            all_capabilities(),
            &[call(1, "greet", json!({})), call(2, "login", json!({}))],
            &cancel,
        )
        .await;
        assert_eq!(c[0].text(), "cancelled");
        assert_eq!(c[1].text(), "cancelled");
        assert!(
            !c[1]
                .methods()
                .contains(&"notifications/elicitation/complete"),
            "not completed when not accepted"
        );
    }
}

#[tokio::test]
async fn url_mode_gets_an_elicitation_id_and_its_completion() {
    for wire in [Wire::Stdio, Wire::Http] {
        let seen = on_session(
            wire,
            fixture(),
            all_capabilities(),
            &[call(1, "login", json!({}))],
            &answer_all,
        )
        .await;
        assert_eq!(seen[0].text(), "consented", "{wire:?}");
        let params = &seen[0].requests[0]["params"];
        assert_eq!(params["mode"], "url");
        assert_eq!(params["url"], "https://example.com/login?flow=1");
        let id = params["elicitationId"].as_str().expect("an elicitationId");
        let done: Vec<&Value> = seen[0]
            .notifications
            .iter()
            .filter(|n| n["method"] == "notifications/elicitation/complete")
            .collect();
        assert_eq!(done.len(), 1);
        assert_eq!(done[0]["params"]["elicitationId"], id);
    }
}

#[tokio::test]
async fn a_question_the_session_cannot_receive_fails_the_call_with_a_documented_error() {
    for wire in [Wire::Stdio, Wire::Http] {
        let seen = on_session(
            wire,
            fixture(),
            json!({}),
            &[
                call(1, "greet", json!({})),
                call(2, "sample", json!({})),
                call(3, "fallback", json!({})),
            ],
            &answer_all,
        )
        .await;
        for s in &seen[..2] {
            assert!(s.requests.is_empty(), "{wire:?}: nothing is sent");
            let e = &s.response["error"];
            assert_eq!(
                e["code"],
                tern_server::error::codes::QUESTION_UNDELIVERABLE,
                "{wire:?}: {e}"
            );
            assert!(e["data"]["requiredCapabilities"].is_object(), "{e}");
        }
        // can_ask sees the session's capabilities.
        assert_eq!(seen[2].text(), "fallback: no elicitation");
    }
}

#[tokio::test]
async fn logging_waits_for_set_level_and_progress_follows_the_token() {
    for wire in [Wire::Stdio, Wire::Http] {
        let with_token = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "progress", "arguments": {}, "_meta": {"progressToken": "p1"}}});
        let seen = on_session(
            wire,
            fixture(),
            all_capabilities(),
            &[
                call(1, "progress", json!({})),
                json!({"jsonrpc": "2.0", "id": 2, "method": "logging/setLevel", "params": {"level": "info"}}),
                with_token,
                json!({"jsonrpc": "2.0", "id": 4, "method": "logging/setLevel", "params": {"level": "loud"}}),
            ],
            &answer_all,
        )
        .await;
        assert!(
            seen[0].notifications.is_empty(),
            "{wire:?}: nothing before setLevel: {:?}",
            seen[0]
        );
        assert_eq!(seen[1].response["result"], json!({}));
        let methods = seen[2].methods();
        assert_eq!(
            methods
                .iter()
                .filter(|m| **m == "notifications/message")
                .count(),
            5,
            "{wire:?}"
        );
        let progress: Vec<&Value> = seen[2]
            .notifications
            .iter()
            .filter(|n| n["method"] == "notifications/progress")
            .collect();
        assert!(!progress.is_empty());
        assert!(
            progress
                .iter()
                .all(|p| p["params"]["progressToken"] == "p1")
        );
        assert_eq!(seen[3].response["error"]["code"], -32602);
    }
}

#[tokio::test]
async fn modern_only_methods_and_tasks_are_not_on_a_legacy_session() {
    for wire in [Wire::Stdio, Wire::Http] {
        let seen = on_session(
            wire,
            fixture(),
            all_capabilities(),
            &[
                json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover"}),
                json!({"jsonrpc": "2.0", "id": 2, "method": "tasks/get", "params": {"taskId": "t"}}),
                json!({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}}),
                json!({"jsonrpc": "2.0", "id": 4, "method": "resources/subscribe", "params": {"uri": "res://ask"}}),
                json!({"jsonrpc": "2.0", "id": 5, "method": "resources/unsubscribe", "params": {"uri": "res://ask"}}),
            ],
            &answer_all,
        )
        .await;
        assert_eq!(seen[0].response["error"]["code"], -32601, "{wire:?}");
        assert_eq!(seen[1].response["error"]["code"], -32601);
        assert_eq!(seen[2].response["error"]["code"], -32600);
        assert_eq!(seen[3].response["result"], json!({}));
        assert_eq!(seen[4].response["result"], json!({}));
    }
}

#[tokio::test(start_paused = true)]
async fn an_unanswered_question_times_out_and_is_cancelled() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .legacy(LegacyOptions::default().question_timeout(Duration::from_secs(30)))
        .build()
        .unwrap();
    let (mut s, _) = Stdio::open(server, all_capabilities()).await;
    let seen = s.call(&call(1, "greet", json!({})), &|_| None).await;
    assert_eq!(seen.requests.len(), 1);
    assert_eq!(
        seen.response["error"]["code"],
        tern_server::error::codes::QUESTION_TIMEOUT
    );
    // The void request is cancelled: before the response, or right after.
    let cancelled = match seen
        .notifications
        .iter()
        .find(|n| n["method"] == "notifications/cancelled")
    {
        Some(n) => n.clone(),
        None => s.recv().await,
    };
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], seen.requests[0]["id"]);
    // A late answer is ignored; the session goes on.
    s.send(&reply_to(
        &seen.requests[0],
        json!({"result": {"action": "accept", "content": {"name": "Late"}}}),
    ))
    .await;
    let ping = s
        .call(
            &json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
            &answer_all,
        )
        .await;
    assert_eq!(ping.response["result"], json!({}));
}

#[tokio::test(start_paused = true)]
async fn no_request_reaches_the_client_before_initialized() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .legacy(LegacyOptions::default().question_timeout(Duration::from_secs(30)))
        .build()
        .unwrap();
    let mut s = Stdio::start(server);
    s.send(&initialize("2025-11-25", all_capabilities())).await;
    s.recv().await;
    let seen = s.call(&call(1, "greet", json!({})), &answer_all).await;
    assert!(seen.requests.is_empty(), "{seen:?}");
    assert_eq!(
        seen.response["error"]["code"],
        tern_server::error::codes::QUESTION_TIMEOUT
    );
}

#[tokio::test]
async fn notifications_cancelled_ends_the_call_and_its_questions_over_stdio() {
    let (mut s, _) = Stdio::open(fixture(), all_capabilities()).await;
    s.send(&call(1, "greet", json!({}))).await;
    let question = s.recv().await;
    assert_eq!(question["method"], "elicitation/create");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user"}})).await;
    s.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    let (mut cancelled, mut pong) = (None, None);
    for _ in 0..4 {
        let m = s.recv().await;
        assert_ne!(m["id"], 1, "no response to a cancelled request: {m}");
        if m["method"] == "notifications/cancelled" {
            cancelled = Some(m);
        } else if m["id"] == 2 {
            pong = Some(m);
        }
        if cancelled.is_some() && pong.is_some() {
            break;
        }
    }
    assert_eq!(cancelled.unwrap()["params"]["requestId"], question["id"]);
    assert_eq!(pong.unwrap()["result"], json!({}));
}

/// A server whose one tool signals when its handler gets past its
/// question.
fn recorder() -> (Server, Arc<tokio::sync::Notify>) {
    let done = Arc::new(tokio::sync::Notify::new());
    let d = Arc::clone(&done);
    let tool = move |ctx: Ctx| {
        let d = Arc::clone(&d);
        async move {
            let answer = ctx.ask(Elicit::<Name>::form("Name?").key("name")).await?;
            d.notify_one();
            Ok::<_, ToolError>(matches!(answer, Answer::Accept(_)).to_string())
        }
    };
    let server = Server::builder("recorder", "1")
        .tool(ToolDef::new("record", "Asks, then records", tool).elicits::<Name>())
        .build()
        .unwrap();
    (server, done)
}

#[tokio::test]
async fn over_http_a_disconnect_is_not_a_cancellation_but_notifications_cancelled_is() {
    let (server, done) = recorder();
    let http = endpoint(server, |h| h).await;
    let s = http.open(all_capabilities()).await;
    // The client reads the question, then goes away.
    let response = http
        .client
        .request(http.request("POST", &s.headers(), Some(&call(1, "record", json!({})))))
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let question = loop {
        let frame = body.frame().await.unwrap().unwrap();
        if let Ok(data) = frame.into_data() {
            let text = String::from_utf8(data.to_vec()).unwrap();
            if let Some(line) = text.lines().find_map(|l| l.strip_prefix("data: ")) {
                break serde_json::from_str::<Value>(line).unwrap();
            }
        }
    };
    drop(body);
    // Its answer still reaches the running handler, which goes on; its
    // result has nowhere to go and is dropped.
    let ack = s
        .post(&reply_to(
            &question,
            json!({"result": {"action": "accept", "content": {"name": "Ada"}}}),
        ))
        .await;
    assert_eq!(ack.status, 202);
    done.notified().await;

    // notifications/cancelled ends a call: its question is cancelled.
    let second = http
        .client
        .request(http.request("POST", &s.headers(), Some(&call(2, "record", json!({})))))
        .await
        .unwrap();
    let mut body = second.into_body();
    let mut buf = String::new();
    let mut messages = Vec::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.unwrap().into_data() else {
            continue;
        };
        buf.push_str(std::str::from_utf8(&data).unwrap());
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            if let Some(line) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                let m: Value = serde_json::from_str(line).unwrap();
                if m["method"] == "elicitation/create" {
                    let ack = s.post(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}})).await;
                    assert_eq!(ack.status, 202);
                }
                messages.push(m);
            }
        }
    }
    assert_eq!(messages[0]["method"], "elicitation/create");
    assert!(
        messages.iter().all(|m| m["id"] != 2),
        "no response to a cancelled request: {messages:?}"
    );
}

#[tokio::test]
async fn http_session_rules() {
    let http = endpoint(fixture(), |h| h).await;
    let s = http.open(all_capabilities()).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    // A 2025 request without a session id: 400.
    let r = http
        .post(&[("mcp-protocol-version", "2025-11-25")], &list)
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    // An unknown session: 404.
    let r = http
        .post(
            &[
                ("mcp-session-id", "0123"),
                ("mcp-protocol-version", "2025-11-25"),
            ],
            &list,
        )
        .await;
    assert_eq!(r.status, 404);
    let r = http.post(&[("mcp-session-id", "0123")], &list).await;
    assert_eq!(r.status, 404);
    // Another version than the negotiated one: 400.
    let r = http
        .post(
            &[
                ("mcp-session-id", &s.id),
                ("mcp-protocol-version", "2025-06-18"),
            ],
            &list,
        )
        .await;
    assert_eq!(r.status, 400);
    // Without the version header the session's is assumed.
    let r = http.post(&[("mcp-session-id", &s.id)], &list).await;
    assert_eq!(r.status, 200);
    // GET opens the standalone stream (one at a time); GET without a session is 405.
    let get = http
        .client
        .request(http.request("GET", &s.headers(), None))
        .await
        .unwrap();
    assert_eq!(get.status(), 200);
    assert_eq!(get.headers()["content-type"], "text/event-stream");
    let again = http.send("GET", &s.headers(), None).await;
    assert_eq!(again.status, 409);
    assert_eq!(http.send("GET", &[], None).await.status, 405);
    // DELETE ends the session; then it is 404, and the stream ends.
    assert_eq!(http.send("DELETE", &s.headers(), None).await.status, 200);
    assert_eq!(s.post(&list).await.status, 404);
    assert_eq!(http.send("DELETE", &s.headers(), None).await.status, 404);
    let rest = get.into_body().collect().await.unwrap().to_bytes();
    assert!(!String::from_utf8_lossy(&rest).contains("data:"));
}

#[tokio::test]
async fn the_standalone_stream_carries_list_changes_and_subscribed_updates() {
    let server = fixture();
    let http = endpoint(server.clone(), |h| h).await;
    let s = http.open(all_capabilities()).await;
    let sub = s.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "res://ask"}})).await;
    assert_eq!(sub.json()["result"], json!({}));
    let get = http
        .client
        .request(http.request("GET", &s.headers(), None))
        .await
        .unwrap();
    let mut body = get.into_body();
    // The forwarder subscribes when the stream opens; announce until the
    // first change arrives (bounded).
    let mut buf = String::new();
    let mut got = Vec::new();
    for round in 0..50 {
        server.changes().resource_updated("res://other");
        server.changes().resource_updated("res://ask");
        server.changes().tools_changed();
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame()).await;
        let Ok(Some(Ok(frame))) = frame else {
            panic!("round {round}: no event")
        };
        if let Ok(data) = frame.into_data() {
            buf.push_str(std::str::from_utf8(&data).unwrap());
        }
        for line in buf.lines().filter_map(|l| l.strip_prefix("data: ")) {
            got.push(serde_json::from_str::<Value>(line).unwrap());
        }
        buf.clear();
        if got.len() >= 2 {
            break;
        }
    }
    assert!(
        got.iter()
            .any(|m| m["method"] == "notifications/resources/updated"
                && m["params"]["uri"] == "res://ask"),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|m| m["method"] == "notifications/tools/list_changed")
    );
    assert!(
        got.iter().all(|m| m["params"]["uri"] != "res://other"),
        "only subscribed URIs"
    );
}

#[tokio::test]
async fn sessions_are_bound_to_their_principal() {
    let http = endpoint(fixture(), |h| {
        h.authenticate(Bearer(|t: &str| Some(Principal::new(t))))
    })
    .await;
    let init = http
        .post(
            &[("authorization", "Bearer alice")],
            &initialize("2025-11-25", json!({})),
        )
        .await;
    let id = init.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let alice = http
        .post(
            &[("authorization", "Bearer alice"), ("mcp-session-id", &id)],
            &list,
        )
        .await;
    assert_eq!(alice.status, 200);
    let bob = http
        .post(
            &[("authorization", "Bearer bob"), ("mcp-session-id", &id)],
            &list,
        )
        .await;
    assert_eq!(bob.status, 404, "another principal cannot use the session");
}

#[tokio::test]
async fn sessions_are_bounded_in_number() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .legacy(LegacyOptions::default().max_sessions(2))
        .build()
        .unwrap();
    let http = endpoint(server, |h| h).await;
    for _ in 0..2 {
        assert_eq!(
            http.post(&[], &initialize("2025-11-25", json!({})))
                .await
                .status,
            200
        );
    }
    let third = http.post(&[], &initialize("2025-11-25", json!({}))).await;
    assert_eq!(third.status, 503);
    assert!(
        third.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Too many sessions")
    );
}

#[tokio::test(start_paused = true)]
async fn idle_sessions_expire() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .legacy(LegacyOptions::default().session_idle(Duration::from_secs(60)))
        .build()
        .unwrap();
    let http = endpoint(server, |h| h).await;
    let s = http.open(json!({})).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(s.post(&ping).await.status, 200);
    tokio::time::advance(Duration::from_secs(61)).await;
    assert_eq!(s.post(&ping).await.status, 404);
}

/// The routing table of `legacy::http`, row by row, with both eras on one
/// endpoint.
#[tokio::test]
async fn both_eras_on_one_endpoint_routing_row_by_row() {
    let http = endpoint(fixture(), |h| h).await;
    let s = http.open(all_capabilities()).await;
    let modern_meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}});
    let modern_headers = [
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    let modern_list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": modern_meta}});
    // 1. A live session id: the session (a legacy result, no resultType).
    let r = s
        .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .await;
    assert!(r.json()["result"].get("resultType").is_none());
    // 2. A modern header or _meta: the stateless path, even with a stale id.
    let r = http.post(&modern_headers, &modern_list).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["result"]["resultType"], "complete");
    let mut stale = modern_headers.to_vec();
    stale.push(("mcp-session-id", "not-a-session"));
    assert_eq!(
        http.post(&stale, &modern_list).await.json()["result"]["resultType"],
        "complete"
    );
    //    `initialize` with modern metadata is 404 / -32601 there.
    let init_modern = json!({"jsonrpc": "2.0", "id": 2, "method": "initialize", "params": {"_meta": modern_meta,
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}});
    let r = http
        .post(
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "initialize"),
            ],
            &init_modern,
        )
        .await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["code"], -32601);
    let r = http
        .post(
            &[
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "initialize"),
            ],
            &initialize("2025-11-25", json!({})),
        )
        .await;
    assert_eq!(
        r.status, 404,
        "a modern header alone selects the modern path"
    );
    //    A malformed modern discover still gets 400 / -32602.
    let r = http.post(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "server/discover")],
        &json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}})).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32602);
    // 3. An unknown id without modern markers: 404.
    assert_eq!(
        http.post(
            &[("mcp-session-id", "nope")],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        )
        .await
        .status,
        404
    );
    // 4. `initialize` with neither: a new session, and a fresh id.
    let r = http.post(&[], &initialize("2025-06-18", json!({}))).await;
    assert_eq!(r.status, 200);
    assert_ne!(r.headers["mcp-session-id"].to_str().unwrap(), s.id);
    // 5. A 2025 header without a session: 400 (covered above); 6. anything
    //    else is modern: a bare request is refused by the modern checks.
    let r = http
        .post(
            &[],
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json()["error"]["code"], -32020);
}

#[tokio::test]
async fn a_modern_only_server_refuses_initialize_on_both_transports() {
    let server = || {
        builder(&Arc::new(Counters::default()), ManualClock::new())
            .modern_only()
            .build()
            .unwrap()
    };
    let mut s = Stdio::start(server());
    s.send(&initialize("2025-11-25", json!({}))).await;
    assert_eq!(s.recv().await["error"]["code"], -32601);
    let http = endpoint(server(), |h| h).await;
    let r = http
        .post(
            &[("mcp-protocol-version", "2025-11-25")],
            &initialize("2025-11-25", json!({})),
        )
        .await;
    assert_eq!(r.status, 400, "the modern checks answer: {}", r.body);
    assert!(r.headers.get("mcp-session-id").is_none());
    assert_eq!(
        http.send("GET", &[("mcp-session-id", "x")], None)
            .await
            .status,
        405
    );
}

/// A server whose descriptors and results carry what each 2025 version
/// added: titles, icons, an output schema, structured content, a resource
/// link, `lastModified`.
fn rich() -> Server {
    let icons = json!([{"src": "https://example.com/i.png"}]);
    let info: tern_protocol::Implementation = serde_json::from_value(json!({
        "name": "rich", "version": "1", "title": "Rich", "websiteUrl": "https://example.com",
        "description": "has everything", "icons": icons}))
    .unwrap();
    let result = || async {
        serde_json::from_value::<tern_protocol::tool::CallToolResult>(json!({
            "content": [
                {"type": "text", "text": "{\"n\":1}",
                 "annotations": {"priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"}},
                {"type": "resource_link", "uri": "res://item/1", "name": "item", "title": "Item one",
                 "icons": [{"src": "https://example.com/i.png"}]}
            ],
            "structuredContent": {"n": 1}
        }))
        .unwrap()
    };
    let prompt = |_: Ctx, Args(w): Args<Who>| async move { Ok::<_, ToolError>(w.who) };
    let prompt = PromptDef::new("greet", "Greets", prompt)
        .title("Greeting")
        .icons(serde_json::from_value(icons.clone()).unwrap());
    Server::builder("rich", "1")
        .info(info)
        .tool(
            ToolDef::new("rich", "Everything", result)
                .title("Rich tool")
                .output_schema(serde_json::from_value(json!({"type": "object"})).unwrap())
                .icons(serde_json::from_value(icons).unwrap()),
        )
        .prompt(prompt)
        .build()
        .unwrap()
}

#[tokio::test]
async fn results_follow_the_schema_of_the_negotiated_version() {
    for version in ["2025-11-25", "2025-06-18", "2025-03-26"] {
        let mut s = Stdio::start(rich());
        s.send(&initialize(version, json!({}))).await;
        let init = s.recv().await;
        s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        let info = &init["result"]["serverInfo"];
        let tools = s
            .call(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
                &answer_all,
            )
            .await;
        let tool = &tools.response["result"]["tools"][0];
        let prompts = s
            .call(
                &json!({"jsonrpc": "2.0", "id": 2, "method": "prompts/list"}),
                &answer_all,
            )
            .await;
        let prompt = &prompts.response["result"]["prompts"][0];
        let called = s.call(&call(3, "rich", json!({})), &answer_all).await;
        let result = &called.response["result"];

        let has_icons = version == "2025-11-25";
        for (what, value) in [("serverInfo", info), ("tool", tool), ("prompt", prompt)] {
            assert_eq!(
                value.get("icons").is_some(),
                has_icons,
                "{version}: {what} {value}"
            );
        }
        assert_eq!(
            info.get("websiteUrl").is_some(),
            has_icons,
            "{version}: {info}"
        );
        assert_eq!(
            info.get("description").is_some(),
            has_icons,
            "{version}: {info}"
        );

        let modern = version != "2025-03-26";
        for (what, value) in [("serverInfo", info), ("tool", tool), ("prompt", prompt)] {
            assert_eq!(
                value.get("title").is_some(),
                modern,
                "{version}: {what} {value}"
            );
        }
        assert_eq!(
            tool.get("outputSchema").is_some(),
            modern,
            "{version}: {tool}"
        );
        assert_eq!(
            result.get("structuredContent").is_some(),
            modern,
            "{version}: {result}"
        );
        let text = &result["content"][0];
        assert_eq!(text["text"], "{\"n\":1}", "the structured text stays");
        assert_eq!(text["annotations"]["priority"], 0.5);
        assert_eq!(
            text["annotations"].get("lastModified").is_some(),
            modern,
            "{version}: {text}"
        );
        let link = &result["content"][1];
        if modern {
            assert_eq!(link["type"], "resource_link", "{version}");
            assert_eq!(link.get("icons").is_some(), has_icons, "{version}: {link}");
        } else {
            assert_eq!(
                link,
                &json!({"type": "text", "text": "Resource: Item one (res://item/1)"}),
                "a 2025-03-26 client has no resource links"
            );
        }
        assert!(tool.get("execution").is_none() && result.get("resultType").is_none());
    }
}

fn pinging(interval: Duration) -> Server {
    builder(&Arc::new(Counters::default()), ManualClock::new())
        .legacy(LegacyOptions::default().ping_interval(interval))
        .build()
        .unwrap()
}

#[tokio::test]
async fn over_stdio_the_server_pings_and_a_client_that_stops_answering_is_let_go() {
    let (mut s, _) = Stdio::open(pinging(Duration::from_millis(50)), all_capabilities()).await;
    // Three pings answered, then a call still works on the same session.
    for _ in 0..3 {
        let ping = tokio::time::timeout(Duration::from_secs(10), s.recv())
            .await
            .expect("a ping");
        assert_eq!(ping["method"], "ping", "{ping}");
        assert!(ping["id"].is_string());
        s.send(&reply_to(&ping, json!({"result": {}}))).await;
    }
    let seen = s
        .call(&call(1, "no_args", json!({})), &|m| {
            (m["method"] == "ping").then(|| json!({"result": {}}))
        })
        .await;
    assert!(seen.response["result"].is_object(), "{:?}", seen.response);
    // The next ping goes unanswered: the server ends the session and stops
    // serving (its output closes).
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match s.output.next_line().await {
                Ok(Some(line)) => {
                    let m: Value = serde_json::from_str(&line).unwrap();
                    assert_eq!(m["method"], "ping", "only pings: {m}");
                }
                Ok(None) | Err(_) => return,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stale session was not let go");
}

#[tokio::test]
async fn over_http_pings_go_on_the_get_stream_and_an_unanswered_one_ends_the_session() {
    let http = endpoint(pinging(Duration::from_millis(50)), |h| h).await;
    let s = http.open(all_capabilities()).await;
    let get = http
        .client
        .request(http.request("GET", &s.headers(), None))
        .await
        .unwrap();
    assert_eq!(get.status(), 200);
    let mut body = get.into_body();
    let mut buf = String::new();
    let mut answered = 0;
    while answered < 2 {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame())
            .await
            .expect("a ping on the stream")
            .expect("the stream is open")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            buf.push_str(std::str::from_utf8(&data).unwrap());
        }
        while let Some(end) = buf.find("\n\n") {
            let event: String = buf.drain(..end + 2).collect();
            if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")) {
                let ping: Value = serde_json::from_str(data).unwrap();
                assert_eq!(ping["method"], "ping", "{ping}");
                let ack = s.post(&reply_to(&ping, json!({"result": {}}))).await;
                assert_eq!(ack.status, 202);
                answered += 1;
            }
        }
    }
    assert_eq!(
        s.post(&json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
            .await
            .status,
        200,
        "answered pings keep the session"
    );
    // Stop answering: the session is closed, and later requests get 404.
    let mut status = 200;
    for _ in 0..200 {
        status = s
            .post(&json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
            .await
            .status;
        if status == 404 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 404, "a session whose client stopped answering ends");
}

#[tokio::test]
async fn without_a_ping_interval_the_server_sends_no_ping() {
    let (mut s, _) = Stdio::open(fixture(), all_capabilities()).await;
    let seen = s.call(&call(1, "no_args", json!({})), &|_| None).await;
    assert!(seen.requests.is_empty(), "{:?}", seen.requests);
    // Nothing arrives unasked within several would-be intervals.
    let quiet = tokio::time::timeout(Duration::from_millis(300), s.recv()).await;
    assert!(quiet.is_err(), "unexpected message: {quiet:?}");
}

/// A legacy session is held to per-tool scopes as the stateless wire is: a
/// `tools/call` of a tool whose scopes the token lacks is answered 403
/// `insufficient_scope` before the session sees it (the same challenge and
/// JSON-RPC body as on the 2026-07-28 wire); other requests still pass.
#[tokio::test]
async fn a_legacy_session_is_held_to_per_tool_scopes() {
    let counters = Arc::new(Counters::default());
    let server = builder(&counters, ManualClock::new()).build().unwrap();
    let resource = tern_server::auth::ResourceServer::new(
        "http://127.0.0.1/mcp",
        "https://as.example",
        TwoTokens,
    )
    .required_scopes(&["mcp:basic"])
    .tool_scopes("no_args", &["mcp:write"]);
    let http = endpoint(server, |h| h.oauth(resource)).await;
    for (token, allowed) in [("Bearer basic", false), ("Bearer write", true)] {
        let init = http
            .post(
                &[("authorization", token)],
                &initialize("2025-11-25", json!({})),
            )
            .await;
        assert_eq!(init.status, 200, "{token}: {}", init.body);
        let s = Session {
            http: &http,
            id: init.headers["mcp-session-id"].to_str().unwrap().to_owned(),
            token: Some(token.to_owned()),
        };
        let ack = s
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(ack.status, 202, "{token}");
        let list = s
            .post(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await;
        assert_eq!(list.status, 200, "{token}: the resource's scopes suffice");
        let called = s.post(&call(2, "no_args", json!({}))).await;
        if allowed {
            assert_eq!(called.status, 200, "{token}: {}", called.body);
            assert!(called.body.contains("\"result\""), "{}", called.body);
            continue;
        }
        assert_eq!(called.status, 403, "{token}: {}", called.body);
        let challenge = called.headers["www-authenticate"].to_str().unwrap();
        assert!(
            challenge
                .starts_with("Bearer error=\"insufficient_scope\", scope=\"mcp:basic mcp:write\""),
            "{challenge}"
        );
        let body = called.json();
        assert_eq!(body["id"], 2);
        assert_eq!(
            body["error"]["data"]["requiredScopes"],
            json!(["mcp:basic", "mcp:write"])
        );
        // The session lives on: a later request of the same token is served.
        let again = s
            .post(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
            .await;
        assert_eq!(again.status, 200, "{}", again.body);
    }
}

/// A 2025-11-25 session's handlers see the token as the stateless ones do
/// (under `token_in_context`), the raw token left out.
#[tokio::test]
async fn a_legacy_session_handler_sees_the_token_when_asked() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .tool(ToolDef::new(
            "whoami",
            "The caller's token",
            crate::fixture::whoami,
        ))
        .build()
        .unwrap();
    let resource = tern_server::auth::ResourceServer::new(
        "http://127.0.0.1/mcp",
        "https://as.example",
        TwoTokens,
    )
    .token_in_context();
    let http = endpoint(server, |h| h.oauth(resource)).await;
    let token = "Bearer basic";
    let init = http
        .post(
            &[("authorization", token)],
            &initialize("2025-11-25", json!({})),
        )
        .await;
    let s = Session {
        http: &http,
        id: init.headers["mcp-session-id"].to_str().unwrap().to_owned(),
        token: Some(token.to_owned()),
    };
    s.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    let called = s.post(&call(1, "whoami", json!({}))).await;
    assert_eq!(called.status, 200, "{}", called.body);
    assert_eq!(
        called.json()["result"]["content"][0]["text"],
        "https://as.example alice [mcp:basic] tenant=acme raw=-"
    );
}

/// A repeated member name on a session is refused before anything reads
/// it, as on the 2026-07-28 wire: a map would keep the last `name` while a
/// scope check read the first, so a token without a tool's scope could
/// call it by naming an allowed tool first. Repeated argument names are
/// refused too (served last-wins before).
#[tokio::test]
async fn a_repeated_member_on_a_legacy_session_is_refused_not_read_last_wins() {
    let counters = Arc::new(Counters::default());
    let server = builder(&counters, ManualClock::new()).build().unwrap();
    let resource = tern_server::auth::ResourceServer::new(
        "http://127.0.0.1/mcp",
        "https://as.example",
        TwoTokens,
    )
    .required_scopes(&["mcp:basic"])
    .tool_scopes("no_args", &["mcp:write"]);
    let http = endpoint(server, |h| h.oauth(resource)).await;
    let token = "Bearer basic";
    let init = http
        .post(
            &[("authorization", token)],
            &initialize("2025-11-25", json!({})),
        )
        .await;
    assert_eq!(init.status, 200, "{}", init.body);
    let s = Session {
        http: &http,
        id: init.headers["mcp-session-id"].to_str().unwrap().to_owned(),
        token: Some(token.to_owned()),
    };
    s.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    // The scoped tool alone is refused by scope, as before.
    let direct = s.post(&call(1, "no_args", json!({}))).await;
    assert_eq!(direct.status, 403, "{}", direct.body);
    for (id, text) in [
        // The scoped tool named second: read last-wins, it ran.
        (
            2,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"failing","name":"no_args","arguments":{}}}"#,
        ),
        // A repeated argument.
        (
            3,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"typed","arguments":{"count":1,"count":2}}}"#,
        ),
        // Deeper down, in `_meta`.
        (
            4,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"failing","arguments":{},"_meta":{"a":1,"a":2}}}"#,
        ),
    ] {
        let called = s.post_text(text).await;
        let body = called.json();
        assert_eq!(body["id"], id, "{}", called.body);
        assert_eq!(body["error"]["code"], -32602, "{}", called.body);
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("appears twice"),
            "{}",
            called.body
        );
        assert!(body.get("result").is_none(), "{}", called.body);
    }
    // The session lives on and serves a well-formed call.
    let typed = s.post(&call(5, "typed", json!({"count": 7}))).await;
    assert_eq!(
        typed.json()["result"]["content"][0]["text"],
        "count 7",
        "{}",
        typed.body
    );
}

/// The same refusal over stdio, where a session has no scopes but a
/// handler must still not be served one of two readings.
#[tokio::test]
async fn a_repeated_argument_over_stdio_is_refused() {
    let (mut s, _) = Stdio::open(fixture(), all_capabilities()).await;
    s.send_text(
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"typed","arguments":{"count":1,"count":2}}}"#,
    )
    .await;
    let reply = s.recv().await;
    assert_eq!(reply["id"], 1, "{reply}");
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    let seen = s
        .call(&call(2, "typed", json!({"count": 3})), &|_| None)
        .await;
    assert_eq!(seen.response["result"]["content"][0]["text"], "count 3");
}

/// An endpoint whose bearer token is the principal's name.
async fn named_endpoint(server: Server, configure: impl FnOnce(Http) -> Http) -> Endpoint {
    endpoint(server, |h| {
        configure(h.authenticate(Bearer(|token: &str| Some(Principal::new(token)))))
    })
    .await
}

/// Opens an initialized session as `who`.
async fn open_as<'a>(http: &'a Endpoint, who: &str) -> Result<Session<'a>, u16> {
    let token = format!("Bearer {who}");
    let init = http
        .post(
            &[("authorization", token.as_str())],
            &initialize("2025-11-25", json!({})),
        )
        .await;
    if init.status != 200 {
        return Err(init.status);
    }
    let s = Session {
        http,
        id: init.headers["mcp-session-id"].to_str().unwrap().to_owned(),
        token: Some(token),
    };
    s.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    Ok(s)
}

fn ping(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

/// One caller's `initialize` storm cannot fill the session table: at its
/// share, its next session ends its own least recently used one, and the
/// other callers' sessions and initializes are untouched. Before, one
/// caller's 1,024 initializes held the table for 30 minutes.
#[tokio::test]
async fn a_caller_at_its_session_share_ends_its_own_oldest_session() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .legacy(
            LegacyOptions::default()
                .max_sessions(4)
                .max_sessions_per_caller(2),
        )
        .build()
        .unwrap();
    let http = named_endpoint(server, |h| h).await;
    let alice = open_as(&http, "alice").await.unwrap();
    let mut mallory = Vec::new();
    for _ in 0..10 {
        mallory.push(open_as(&http, "mallory").await.expect("never refused"));
    }
    // Only mallory's two newest sessions are alive.
    for (i, s) in mallory.iter().enumerate() {
        let status = s.post(&ping(1)).await.status;
        assert_eq!(status, if i >= 8 { 200 } else { 404 }, "session {i}");
    }
    // Alice's session lives, and bob still gets one.
    assert_eq!(alice.post(&ping(2)).await.status, 200);
    let bob = open_as(&http, "bob")
        .await
        .expect("room for another caller");
    assert_eq!(bob.post(&ping(3)).await.status, 200);
}

/// A session's standalone GET stream takes an SSE slot: one caller holding
/// its share of streams (through several sessions) gets 503 + Retry-After
/// for the next GET, and another caller's GET is still served. Before,
/// legacy GETs took no slot and four addresses took every request slot.
#[tokio::test]
async fn legacy_get_streams_take_a_slot_of_the_callers_stream_share() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .build()
        .unwrap();
    let http = named_endpoint(server, |h| h.max_streams_per_caller(2)).await;
    let mut open = Vec::new();
    for i in 0..3 {
        let s = open_as(&http, "mallory").await.unwrap();
        let get = http
            .client
            .request(http.request("GET", &s.headers(), None))
            .await
            .unwrap();
        if i < 2 {
            assert_eq!(get.status(), 200, "stream {i}");
            open.push((s, get));
        } else {
            assert_eq!(get.status(), 503, "the third stream of one caller");
            assert!(get.headers().contains_key("retry-after"));
        }
    }
    let alice = open_as(&http, "alice").await.unwrap();
    let get = http
        .client
        .request(http.request("GET", &alice.headers(), None))
        .await
        .unwrap();
    assert_eq!(get.status(), 200, "another caller's stream");
    // A stream given back is a slot again.
    drop(open.pop());
    let mut status = 0;
    for _ in 0..100 {
        let s = open_as(&http, "mallory").await.unwrap();
        status = http
            .client
            .request(http.request("GET", &s.headers(), None))
            .await
            .unwrap()
            .status()
            .as_u16();
        if status == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200, "the slot came back");
}

/// Each GET spawned a change forwarder that lived until the session ended:
/// 210,000 GETs grew a server to 446 MiB. Now a forwarder ends with its
/// stream: after 1,000 GETs, the last still open, one listens.
#[tokio::test]
async fn a_thousand_gets_leave_one_change_forwarder() {
    let server = builder(&Arc::new(Counters::default()), ManualClock::new())
        .build()
        .unwrap();
    let changes = server.changes().clone();
    let base = changes.listeners();
    // Keep-alive comments every 10 ms: a dropped stream is seen at once.
    let http = endpoint(server, |h| h.keep_alive(Duration::from_millis(10))).await;
    let s = http.open(all_capabilities()).await;
    let mut last = None;
    for i in 0..1000 {
        let mut get = None;
        // The previous stream's end is seen by its next write: until
        // then a GET is 409 (one stream at a time).
        for _ in 0..200 {
            let response = http
                .client
                .request(http.request("GET", &s.headers(), None))
                .await
                .unwrap();
            if response.status() == 200 {
                get = Some(response);
                break;
            }
            assert_eq!(response.status(), 409, "GET {i}");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        last = Some(get.unwrap_or_else(|| panic!("GET {i} never opened")));
        if i < 999 {
            drop(last.take());
        }
    }
    let mut listening = usize::MAX;
    for _ in 0..500 {
        listening = changes.listeners() - base;
        if listening <= 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(listening, 1, "forwarders left after 1,000 GETs");
    assert!(last.is_some());
}
