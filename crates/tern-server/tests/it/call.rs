//! The logical call (docs/design.md, "One leg runner, three ways of asking"): a
//! call id stable over its rounds, its limits, the versioned payload, the
//! uniform refusals, and what logs and `Debug` never show.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::error::code;
use tern_seal::{Claims, Expect, KeyRing, Sealer, SealerOptions};
use tern_server::error::codes;
use tern_server::testing::TestClient;
use tern_server::{CallLimits, Clock, Principal};

use crate::fixture::{Counters, KEYS, ManualClock, builder, client};

const UNIFORM: &str = "Invalid or expired requestState";

fn name(n: &str) -> Value {
    json!({"name": {"action": "accept", "content": {"name": n}}})
}

#[tokio::test]
async fn the_call_id_is_the_same_in_every_round_and_new_for_every_call() {
    let (c, counters, _) = client();
    let r1 = c.call_tool("call_info", json!({})).await;
    let r2 = c
        .retry_tool("call_info", json!({}), name("Ann"), r1.request_state())
        .await;
    let r3 = c
        .retry_tool(
            "call_info",
            json!({}),
            json!({"color": {"action": "accept", "content": {"color": "red"}}}),
            r2.request_state(),
        )
        .await;
    let id = r3.text().unwrap().to_owned();
    assert_eq!(id.len(), 32);
    let legs = counters.call_ids.lock().unwrap().clone();
    assert_eq!(
        legs,
        [format!("{id}@1"), format!("{id}@2"), format!("{id}@3")]
    );
    let other = c.call_tool("call_info", json!({})).await;
    assert!(other.request_state().is_some());
    let fourth = counters.call_ids.lock().unwrap()[3].clone();
    assert!(!fourth.starts_with(&id), "a new call has a new id");
}

#[tokio::test]
async fn a_call_past_its_lifetime_is_refused_like_an_expired_state() {
    let counters = Arc::new(Counters::default());
    let clock = ManualClock::new();
    let c = TestClient::new(
        builder(&counters, Arc::clone(&clock))
            .call_limits(CallLimits::default().max_lifetime(Duration::from_secs(60)))
            .build()
            .unwrap(),
    );
    let r1 = c.call_tool("call_info", json!({})).await;
    clock.tick(Duration::from_secs(40));
    let r2 = c
        .retry_tool("call_info", json!({}), name("Ann"), r1.request_state())
        .await;
    assert_eq!(
        r2.result_type(),
        Some("input_required"),
        "within the lifetime"
    );
    // Each round's token is fresh (10 minutes), but the call started 61 s ago.
    clock.tick(Duration::from_secs(21));
    let r3 = c
        .retry_tool("call_info", json!({}), json!({}), r2.request_state())
        .await;
    assert_eq!(r3.outcome.unwrap_err().message, UNIFORM);
}

#[tokio::test]
async fn a_call_may_take_only_so_many_rounds() {
    let counters = Arc::new(Counters::default());
    let c = TestClient::new(
        builder(&counters, ManualClock::new())
            .call_limits(CallLimits::default().max_rounds(1))
            .build()
            .unwrap(),
    );
    let r1 = c.call_tool("call_info", json!({})).await;
    assert_eq!(r1.result_type(), Some("input_required"));
    let r2 = c
        .retry_tool("call_info", json!({}), name("Ann"), r1.request_state())
        .await;
    let error = r2.outcome.unwrap_err();
    assert_eq!(error.code, codes::CALL_LIMIT);
    assert_eq!(error.data.unwrap()["maxRounds"], 1);
}

fn fixture_sealer() -> Sealer {
    Sealer::new(
        KeyRing::parse(KEYS).unwrap(),
        SealerOptions {
            audience: "fixture".into(),
            ..SealerOptions::default()
        },
    )
}

/// Rolling upgrade: a state sealed with the first wave's payload (no version,
/// call id or start) opens on this build and the call goes on.
#[tokio::test]
async fn a_state_sealed_by_the_previous_payload_version_still_opens() {
    let (c, _, clock) = client();
    let r1 = c.call_tool("greet", json!({})).await;
    let arguments = json!({});
    let expect = Expect {
        principal: None,
        method: "tools/call",
        target: "greet",
        arguments: Some(&arguments),
    };
    let sealer = fixture_sealer();
    let opened = sealer
        .open(r1.request_state().unwrap(), &expect, clock.now())
        .unwrap();
    let mut payload: Value = serde_json::from_slice(&opened.payload).unwrap();
    assert_eq!(payload["v"], 2, "this build seals version 2");
    for member in ["v", "c", "t"] {
        payload.as_object_mut().unwrap().remove(member);
    }
    let v1 = serde_json::to_vec(&payload).unwrap();
    let old = sealer
        .seal(
            &Claims {
                principal: None,
                method: "tools/call",
                target: "greet",
                arguments: Some(&arguments),
                state_id: opened.state_id,
                round: opened.round,
                payload: &v1,
            },
            clock.now(),
            [7; 24],
        )
        .unwrap();
    let user_name = json!({"user_name": {"action": "accept", "content": {"name": "Ann"}}});
    let done = c
        .retry_tool("greet", json!({}), user_name, Some(&old))
        .await;
    assert_eq!(done.text(), Some("Hello, Ann!"), "{done:?}");
}

#[tokio::test]
async fn a_payload_of_an_unknown_version_is_refused() {
    let (c, _, clock) = client();
    let arguments = json!({});
    let token = fixture_sealer()
        .seal(
            &Claims {
                principal: None,
                method: "tools/call",
                target: "greet",
                arguments: Some(&arguments),
                state_id: [3; 16],
                round: 1,
                payload: br#"{"v":3,"c":"00000000000000000000000000000000","t":1}"#,
            },
            clock.now(),
            [8; 24],
        )
        .unwrap();
    let r = c
        .retry_tool("greet", json!({}), json!({}), Some(&token))
        .await;
    assert_eq!(r.outcome.unwrap_err().message, UNIFORM);
}

#[tokio::test]
async fn every_refused_state_gets_the_one_uniform_refusal() {
    let (c, _, _) = client();
    for state in [
        json!(42),
        json!({"t": 1}),
        json!(["t1.k1.x"]),
        json!(null),
        json!(true),
    ] {
        let r = c
            .send(
                "tools/call",
                json!({"name": "greet", "arguments": {}, "requestState": state}),
            )
            .await;
        if state.is_null() {
            // An explicit null is an absent optional member: a first leg.
            assert_eq!(r.result_type(), Some("input_required"));
            continue;
        }
        let error = r.outcome.unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (code::INVALID_PARAMS, UNIFORM),
            "{state}"
        );
    }
    // An answer that does not decode as its question's kind, after a good
    // open, is not a state problem: -32602 naming the (server's own) key,
    // so the client looks at its answer.
    let r1 = c.call_tool("greet", json!({})).await;
    let wrong = c
        .retry_tool(
            "greet",
            json!({}),
            json!({"user_name": {"roots": "no"}}),
            r1.request_state(),
        )
        .await;
    let error = wrong.outcome.unwrap_err();
    assert_eq!(error.code, code::INVALID_PARAMS);
    assert_ne!(error.message, UNIFORM);
    assert!(error.message.contains("`user_name`"), "{}", error.message);
}

#[tokio::test]
async fn arguments_that_cannot_be_bound_exactly_are_refused_before_any_question() {
    let (c, _, _) = client();
    for arguments in [
        json!({"id": 1e20}),
        json!({"n": [18_446_744_073_709_551_615_u64, 1.8e19]}),
    ] {
        let r = c.call_tool("debug_ctx", arguments.clone()).await;
        let error = r.outcome.unwrap_err();
        assert_eq!(error.code, code::INVALID_PARAMS, "{arguments}");
        assert!(
            error.message.contains("cannot be represented exactly"),
            "{error:?}"
        );
    }
    let fine = c
        .call_tool("debug_ctx", json!({"id": 18_446_744_073_709_551_615_u64}))
        .await;
    assert_eq!(fine.result_type(), Some("input_required"));
}

#[tokio::test]
async fn debug_of_a_context_shows_no_answer_and_no_principal() {
    let (c, _, _) = client();
    let c = c.with_principal(Principal::new("alice-the-principal"));
    let r1 = c.call_tool("debug_ctx", json!({})).await;
    let r2 = c
        .retry_tool(
            "debug_ctx",
            json!({}),
            name("Zed-the-answer"),
            r1.request_state(),
        )
        .await;
    let shown = r2.text().unwrap();
    assert!(shown.starts_with("Ctx {"), "{shown}");
    assert!(shown.contains("call_id"), "{shown}");
    for secret in ["alice-the-principal", "Zed-the-answer", "t1."] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
}

#[tokio::test]
async fn every_leg_has_a_span_with_its_call_and_none_of_its_secrets() {
    let captured = tern_test_support::logs::global();
    let (c, _, _) = client();
    let c = c.with_principal(Principal::new("alice-the-principal"));
    let r1 = c.call_tool("call_info", json!({})).await;
    let state = r1.request_state().unwrap().to_owned();
    let r2 = c
        .retry_tool("call_info", json!({}), name("Zed-the-answer"), Some(&state))
        .await;
    let color = json!({"color": {"action": "accept", "content": {"color": "red"}}});
    let r3 = c
        .retry_tool("call_info", json!({}), color, r2.request_state())
        .await;
    let call_id = r3.text().unwrap().to_owned();
    let refused = c
        .retry_tool("greet", json!({}), name("x"), Some(&state))
        .await;
    assert!(refused.outcome.is_err());
    let log = captured.text();
    let ours: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(&format!("call_id={call_id}")))
        .collect();
    for round in 1..=3 {
        assert!(
            ours.iter().any(|l| l.contains(&format!("round={round} "))
                && l.contains("method=\"tools/call\"")
                && l.contains("target=call_info")
                && l.contains("outcome=\"ok\"")),
            "round {round} of {call_id} missing from:\n{log}"
        );
    }
    assert!(
        log.lines()
            .any(|l| l.contains("target=greet") && l.contains("outcome=\"error\"")),
        "the refused leg's outcome:\n{log}"
    );
    for secret in ["alice-the-principal", "Zed-the-answer", &state[6..30]] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
}

/// A structured value for the two ways of answering `Json`: nested objects
/// in field order, arrays, floats, escapes and non-ASCII text, a map, a
/// skipped `None`.
#[derive(serde::Serialize, Clone)]
struct Shaped {
    title: String,
    ratio: f64,
    count: u64,
    delta: i64,
    missing: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    skipped: Option<u8>,
    tags: Vec<String>,
    inner: Inner,
    by_key: std::collections::BTreeMap<String, Vec<u8>>,
}

#[derive(serde::Serialize, Clone)]
struct Inner {
    z: bool,
    a: Vec<Inner>,
}

fn shaped() -> Shaped {
    Shaped {
        title: "quote \" backslash \\ newline \n tab \t ünïcode ✓ \u{1f600} \u{7f}".into(),
        ratio: 0.1 + 0.2,
        count: u64::MAX,
        delta: i64::MIN,
        missing: None,
        skipped: None,
        tags: vec![String::new(), "</script>".into()],
        inner: Inner {
            z: true,
            a: vec![Inner {
                z: false,
                a: vec![],
            }],
        },
        by_key: [("b".to_owned(), vec![1, 2]), ("a".to_owned(), vec![])]
            .into_iter()
            .collect(),
    }
}

async fn fast() -> tern_server::Json<Shaped> {
    tern_server::Json(shaped())
}

async fn slow() -> Result<tern_protocol::tool::CallToolResult, tern_server::ToolError> {
    use tern_server::handler::IntoToolResult as _;
    tern_server::Json(shaped()).into_tool_result()
}

/// `Json` is written into the wire from its one serialisation; the result
/// is byte for byte the `CallToolResult` that `Json::into_tool_result`
/// builds through a value tree (field order, escapes, numbers, `_meta`).
#[tokio::test]
async fn json_written_once_is_the_same_result_as_through_a_value_tree() {
    let server = tern_server::Server::builder("shapes", "1.0.0")
        .tool(tern_server::ToolDef::new("fast", "", fast))
        .tool(tern_server::ToolDef::new("slow", "", slow))
        .build()
        .unwrap();
    let c = TestClient::new(server);
    let fast = c.call_tool("fast", json!({})).await.result().unwrap();
    let slow = c.call_tool("slow", json!({})).await.result().unwrap();
    assert_eq!(
        serde_json::to_string(&fast).unwrap(),
        serde_json::to_string(&slow).unwrap()
    );
    assert_eq!(fast["structuredContent"]["count"], json!(u64::MAX));
    assert_eq!(
        fast["content"][0]["text"],
        json!(serde_json::to_string(&shaped()).unwrap())
    );
    assert_eq!(
        fast["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "shapes"
    );
}

#[derive(serde::Serialize)]
struct Overlapping {
    a: u32,
    #[serde(flatten)]
    rest: std::collections::BTreeMap<String, u32>,
}

async fn overlapping() -> tern_server::Json<Overlapping> {
    tern_server::Json(Overlapping {
        a: 1,
        rest: [("a".to_owned(), 2), ("b".to_owned(), 3)]
            .into_iter()
            .collect(),
    })
}

/// A value whose serialisation repeats a member name is not sent as such
/// (a strict reader, tern's own among them, refuses it): it goes through
/// the value tree, which keeps one of each, as before `Json` was written
/// once.
#[tokio::test]
async fn json_that_repeats_a_member_is_sent_with_each_name_once() {
    let server = tern_server::Server::builder("shapes", "1.0.0")
        .tool(tern_server::ToolDef::new("overlapping", "", overlapping))
        .build()
        .unwrap();
    // The reply as it goes on the wire, not re-read into a value (which
    // would merge a repeated name itself).
    let params =
        TestClient::new(server.clone()).with_meta(json!({"name": "overlapping", "arguments": {}}));
    let request = tern_protocol::jsonrpc::Request {
        id: tern_protocol::RequestId::Number(1),
        method: "tools/call".to_owned(),
        params: Some(serde_json::value::to_raw_value(&params).unwrap()),
    };
    let reply = server
        .handle(
            &request,
            tern_server::CallContext::new(Principal::anonymous()),
        )
        .await;
    let wire = reply.outcome.unwrap();
    assert_eq!(
        tern_protocol::unique_members(wire.get()),
        Ok(()),
        "{}",
        wire.get()
    );
    let r: Value = serde_json::from_str(wire.get()).unwrap();
    let block = r["content"][0]["text"].as_str().unwrap();
    assert_eq!(tern_protocol::unique_members(block), Ok(()), "{block}");
    assert_eq!(r["structuredContent"], json!({"a": 2, "b": 3}));
}
