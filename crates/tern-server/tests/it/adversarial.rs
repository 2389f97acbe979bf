//! A hostile client: every way of presenting a `requestState` that is not the
//! one its retry earned is refused with the same `-32602` (the `requestState`
//! rules of docs/rules.md, `state-untrusted` to `state-single-use`), each test
//! named after its rule.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::error::code;
use tern_server::Principal;
use tern_server::testing::TestClient;
use tokio_util::sync::CancellationToken;

use crate::fixture::{Counters, ManualClock, builder, client};

const UNIFORM: &str = "Invalid or expired requestState";

fn accept_name(name: &str) -> Value {
    json!({"user_name": {"action": "accept", "content": {"name": name}}})
}

fn assert_refused(e: &tern_server::testing::Exchange, what: &str) {
    let err = e.outcome.as_ref().expect_err(what);
    assert_eq!(err.code, code::INVALID_PARAMS, "{what}");
    assert_eq!(
        err.message, UNIFORM,
        "{what}: one message for every failure"
    );
}

#[tokio::test]
async fn state_integrity_every_byte_of_a_real_token_is_protected() {
    let (c, _, _) = client();
    let state = c
        .call_tool("greet", json!({}))
        .await
        .request_state()
        .unwrap()
        .to_owned();
    let bytes = state.as_bytes();
    for i in 0..bytes.len() {
        let mut tampered = bytes.to_vec();
        // Swap for another character of the same alphabet class.
        tampered[i] = match tampered[i] {
            b'A' => b'B',
            b'.' | b'-' => b'_',
            b'_' => b'-',
            _ => b'A',
        };
        let tampered = String::from_utf8(tampered).unwrap();
        let e = c
            .retry_tool("greet", json!({}), accept_name("Mallory"), Some(&tampered))
            .await;
        assert_refused(&e, &format!("byte {i}"));
    }
    let ok = c
        .retry_tool("greet", json!({}), accept_name("Ann"), Some(&state))
        .await;
    assert_eq!(
        ok.text(),
        Some("Hello, Ann!"),
        "the untouched token still works"
    );
}

#[tokio::test]
async fn state_integrity_truncated_extended_and_foreign_tokens_are_refused() {
    let (c, _, _) = client();
    let state = c
        .call_tool("greet", json!({}))
        .await
        .request_state()
        .unwrap()
        .to_owned();
    for (what, token) in [
        ("truncated", state[..state.len() - 1].to_owned()),
        ("half", state[..state.len() / 2].to_owned()),
        ("extended", format!("{state}A")),
        (
            "suffixed as the conformance suite does",
            format!("{state}-TAMPERED"),
        ),
        ("empty", String::new()),
        ("plain JSON", r#"{"step":2}"#.to_owned()),
        (
            "another version",
            match state.strip_prefix("t2.") {
                Some(rest) => format!("t1.{rest}"),
                None => state.replacen("t1.", "t2.", 1),
            },
        ),
    ] {
        let e = c
            .retry_tool("greet", json!({}), accept_name("M"), Some(&token))
            .await;
        assert_refused(&e, what);
    }
    // A token sealed by another server (other keys) is refused too.
    let counters = Arc::new(Counters::default());
    let other = TestClient::new(
        builder(&counters, ManualClock::new())
            .keys(tern_server::KeyRing::generate())
            .build()
            .unwrap(),
    );
    let foreign = other
        .call_tool("greet", json!({}))
        .await
        .request_state()
        .unwrap()
        .to_owned();
    assert_refused(
        &c.retry_tool("greet", json!({}), accept_name("M"), Some(&foreign))
            .await,
        "other keys",
    );
}

#[tokio::test]
async fn state_expiry_expired_state_is_refused() {
    let (c, _, clock) = client();
    let state = c
        .call_tool("greet", json!({}))
        .await
        .request_state()
        .unwrap()
        .to_owned();
    clock.tick(Duration::from_secs(599));
    let fresh = c
        .call_tool("greet", json!({}))
        .await
        .request_state()
        .unwrap()
        .to_owned();
    assert_eq!(
        c.retry_tool("greet", json!({}), accept_name("A"), Some(&state))
            .await
            .text(),
        Some("Hello, A!")
    );
    clock.tick(Duration::from_secs(2));
    assert_refused(
        &c.retry_tool("greet", json!({}), accept_name("A"), Some(&state))
            .await,
        "expired",
    );
    assert_eq!(
        c.retry_tool("greet", json!({}), accept_name("B"), Some(&fresh))
            .await
            .text(),
        Some("Hello, B!"),
        "expiry is per round"
    );
}

#[tokio::test]
async fn state_bound_request_state_of_another_tool_or_other_arguments_is_refused() {
    let (c, _, _) = client();
    let greet_state = c
        .call_tool("greet", json!({}))
        .await
        .request_state()
        .unwrap()
        .to_owned();
    let e = c
        .retry_tool(
            "fallback",
            json!({}),
            json!({"name": {"action": "accept", "content": {"name": "M"}}}),
            Some(&greet_state),
        )
        .await;
    assert_refused(&e, "another tool");
    let prompt = c
        .send("prompts/get", json!({"name": "greet", "inputResponses": accept_name("M"), "requestState": greet_state}))
        .await;
    assert!(prompt.outcome.is_err(), "another method");
    let state = c
        .call_tool("confirm_for", json!({"who": "alice"}))
        .await
        .request_state()
        .unwrap()
        .to_owned();
    let yes = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let other_args = c
        .retry_tool(
            "confirm_for",
            json!({"who": "mallory"}),
            yes.clone(),
            Some(&state),
        )
        .await;
    assert_refused(&other_args, "other arguments");
    let same = c
        .retry_tool("confirm_for", json!({"who": "alice"}), yes, Some(&state))
        .await;
    assert_eq!(same.text(), Some("alice: true"));
}

#[tokio::test]
async fn state_bound_request_the_argument_digest_ignores_key_order_only() {
    let (c, _, _) = client();
    let r = c
        .send(
            "prompts/get",
            json!({"name": "ask_prompt", "arguments": {"who": "Ann"}}),
        )
        .await;
    let state = r.request_state().unwrap().to_owned();
    let answer = json!({"color": {"action": "accept", "content": {"color": "red"}}});
    let other = c
        .send("prompts/get", json!({"name": "ask_prompt", "arguments": {"who": "Bob"}, "inputResponses": answer, "requestState": state}))
        .await;
    assert_refused(&other, "other prompt arguments");
}

#[tokio::test]
async fn state_bound_principal_state_minted_for_one_principal_is_refused_for_another() {
    let (c, _, _) = client();
    let alice = Principal::new("alice");
    let first = c
        .send_as(
            "tools/call",
            Some(c.with_meta(json!({"name": "greet", "arguments": {}}))),
            &alice,
            CancellationToken::new(),
        )
        .await;
    let state = first.request_state().unwrap().to_owned();
    let retry = |p: Principal| {
        let params = c.with_meta(json!({"name": "greet", "arguments": {}, "inputResponses": accept_name("X"), "requestState": state}));
        let c = &c;
        async move {
            c.send_as("tools/call", Some(params), &p, CancellationToken::new())
                .await
        }
    };
    assert_refused(&retry(Principal::new("mallory")).await, "another principal");
    assert_refused(&retry(Principal::anonymous()).await, "anonymous");
    assert_eq!(retry(alice).await.text(), Some("Hello, X!"));
}

#[tokio::test]
async fn state_single_use_a_state_is_redeemed_once_and_an_idempotent_retry_repeats_its_result() {
    let (c, counters, _) = client();
    let r1 = c.call_tool("pay", json!({})).await;
    let state = r1.request_state().unwrap().to_owned();
    let confirm = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let first = c
        .retry_tool("pay", json!({}), confirm.clone(), Some(&state))
        .await;
    assert_eq!(first.text(), Some("payment #1"));
    // The same final retry arrives again (a network break): same answer,
    // no second payment.
    let duplicate = c
        .retry_tool("pay", json!({}), confirm.clone(), Some(&state))
        .await;
    assert_eq!(
        duplicate.outcome.as_ref().unwrap(),
        first.outcome.as_ref().unwrap()
    );
    assert_eq!(counters.payments.load(Ordering::SeqCst), 1);
    // A duplicate of a leg that asked again gets the same round back.
    let r1 = c.call_tool("pay", json!({})).await;
    let state = r1.request_state().unwrap().to_owned();
    let wrong = c
        .retry_tool(
            "pay",
            json!({}),
            json!({"other": {"action": "cancel"}}),
            Some(&state),
        )
        .await;
    assert_eq!(wrong.input_keys(), ["confirm"]);
    let again = c
        .retry_tool("pay", json!({}), confirm.clone(), Some(&state))
        .await;
    assert_eq!(
        again.outcome.as_ref().unwrap(),
        wrong.outcome.as_ref().unwrap()
    );
    assert_eq!(counters.payments.load(Ordering::SeqCst), 1);
    // A single-use tool refuses any second redemption.
    let r1 = c.call_tool("once_only", json!({})).await;
    let go = json!({"go": {"action": "accept", "content": {"ok": true}}});
    let first = c
        .retry_tool("once_only", json!({}), go.clone(), r1.request_state())
        .await;
    assert_eq!(first.text(), Some("went: true"));
    assert_refused(
        &c.retry_tool("once_only", json!({}), go, r1.request_state())
            .await,
        "replayed single-use state",
    );
}

#[tokio::test]
async fn an_oversized_state_is_an_internal_error_not_a_truncation() {
    let counters = Arc::new(Counters::default());
    let small = TestClient::new(
        builder(&counters, ManualClock::new())
            .max_state_len(1024)
            .build()
            .unwrap(),
    );
    let e = small.call_tool("big_state", json!({})).await;
    assert_eq!(e.error_code(), Some(code::INTERNAL_ERROR));
    let roomy = TestClient::new(builder(&counters, ManualClock::new()).build().unwrap());
    assert!(
        roomy
            .call_tool("big_state", json!({}))
            .await
            .request_state()
            .is_some()
    );
}

#[tokio::test]
async fn an_oversized_token_is_refused_before_it_is_decoded() {
    let (c, _, _) = client();
    let huge = format!("t1.k1.{}", "A".repeat(200_000));
    assert_refused(
        &c.retry_tool("greet", json!({}), accept_name("M"), Some(&huge))
            .await,
        "oversized",
    );
}

#[tokio::test]
async fn an_answer_to_a_changed_question_does_not_count() {
    let (c, _, _) = client();
    let r1 = c.call_tool("three_rounds", json!({})).await;
    let r2 = c
        .retry_tool(
            "three_rounds",
            json!({}),
            json!({"step1": {"action": "accept", "content": {"name": "Ann"}}}),
            r1.request_state(),
        )
        .await;
    // Answer step2 and, in the same retry, *change* step1 to another name:
    // step1 is not pending, so the new answer is ignored (rule
    // `answers-unknown-ignored`) and step2's question (which names Ann) stays
    // the one answered.
    let r3 = c
        .retry_tool(
            "three_rounds",
            json!({}),
            json!({"step1": {"action": "accept", "content": {"name": "Eve"}}, "step2": {"action": "accept", "content": {"color": "red"}}}),
            r2.request_state(),
        )
        .await;
    let message = r3.outcome.as_ref().unwrap()["inputRequests"]["step3"]["params"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("Ann likes red"), "{message}");
}

#[tokio::test]
async fn a_nested_form_is_an_internal_error_and_fails_registration() {
    let (c, _, _) = client();
    assert_eq!(
        c.call_tool("nested", json!({})).await.error_code(),
        Some(code::INTERNAL_ERROR)
    );
    async fn nested() -> &'static str {
        "x"
    }
    let err = tern_server::Server::builder("x", "1")
        .tool(tern_server::ToolDef::new("n", "d", nested).elicits::<crate::fixture::Nested>())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("field `inner`"), "{err}");
}

/// A guarded leg that fails after its state was claimed has had its run: the
/// failure is its outcome, and the same retry never runs the handler again
/// (with `single_use` alone, a duplicate is the uniform refusal).
#[tokio::test]
async fn state_single_use_a_guarded_leg_that_fails_keeps_its_failure() {
    let (c, counters, _) = client();
    let r1 = c.call_tool("flaky", json!({})).await;
    let go = json!({"go": {"action": "accept", "content": {"ok": true}}});
    let failed = c
        .retry_tool("flaky", json!({}), go.clone(), r1.request_state())
        .await;
    assert_eq!(failed.error_code(), Some(code::INTERNAL_ERROR));
    let again = c
        .retry_tool("flaky", json!({}), go, r1.request_state())
        .await;
    assert_refused(&again, "a duplicate of a failed single-use leg");
    assert_eq!(counters.flaky_calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_single_use_concurrent_duplicate_retries_get_one_outcome() {
    let (c, counters, _) = client();
    let r1 = c.call_tool("slow_pay", json!({})).await;
    let go = json!({"go": {"action": "accept", "content": {"ok": true}}});
    let (a, b) = tokio::join!(
        c.retry_tool("slow_pay", json!({}), go.clone(), r1.request_state()),
        c.retry_tool("slow_pay", json!({}), go.clone(), r1.request_state()),
    );
    assert_eq!(a.text(), Some("slow payment #1"));
    assert_eq!(
        b.text(),
        a.text(),
        "the duplicate waited for the first outcome"
    );
    assert_eq!(counters.slow_payments.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn state_bound_request_large_integer_arguments_are_bound_exactly() {
    let (c, _, _) = client();
    let r1 = c
        .call_tool("delete", json!({"id": 4_611_686_018_427_387_904_u64}))
        .await;
    let yes = json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    let other = c
        .retry_tool(
            "delete",
            json!({"id": 4_611_686_018_427_387_905_u64}),
            yes.clone(),
            r1.request_state(),
        )
        .await;
    assert_refused(&other, "a neighbouring large id");
    let same = c
        .retry_tool(
            "delete",
            json!({"id": 4_611_686_018_427_387_904_u64}),
            yes,
            r1.request_state(),
        )
        .await;
    assert_eq!(same.text(), Some("deleted 4611686018427387904"));
}

#[tokio::test]
async fn an_oversized_answer_is_invalid_params() {
    let counters = Arc::new(Counters::default());
    let small = TestClient::new(
        builder(&counters, ManualClock::new())
            .max_state_len(4096)
            .build()
            .unwrap(),
    );
    let r1 = small.call_tool("greet", json!({})).await;
    let huge = json!({"user_name": {"action": "accept", "content": {"name": "x".repeat(5000)}}});
    let e = small
        .retry_tool("greet", json!({}), huge, r1.request_state())
        .await;
    assert_eq!(e.error_code(), Some(code::INVALID_PARAMS));
    assert!(
        e.outcome
            .unwrap_err()
            .message
            .contains("larger than 2048 bytes")
    );
}
