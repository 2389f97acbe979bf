//! Rules `state-expiry`, `state-bound-principal` and `state-bound-request`:
//! every binding sealed into a token is checked on the retry, each with
//! its own (log-only) reason, and the client always sees the same message.

use proptest::prelude::*;
use serde_json::{Value, json};
use tern_seal::{Expect, OpenError, OpenFailure, SealerOptions};

use crate::common::{
    SECRET_A, arguments, claims, expect, nonce, options, sealer, sealer_with, t0, token,
};

fn open_reason(token: &str, expect: &Expect<'_>) -> OpenFailure {
    let error = sealer()
        .open(token, expect, t0())
        .expect_err("a changed binding must be refused");
    assert_eq!(error.to_string(), OpenError::MESSAGE);
    error.reason()
}

#[test]
fn faithful_retry_opens() {
    let arguments = arguments();
    let opened = sealer()
        .open(&token(b"state"), &expect(&arguments), t0())
        .unwrap();
    assert_eq!(*opened.payload, b"state");
}

#[test]
fn principal_is_bound() {
    let arguments = arguments();
    let token = token(b"");
    for principal in [Some("user-43"), Some("USER-42"), Some(""), None] {
        let expect = Expect {
            principal,
            ..expect(&arguments)
        };
        assert_eq!(
            open_reason(&token, &expect),
            OpenFailure::Principal,
            "{principal:?}"
        );
    }
}

#[test]
fn principal_is_stored_as_a_fixed_size_mac() {
    // Rule `state-bound-principal` without leaking the identity: only a MAC is
    // sealed, so the token has the same length whatever the identity's length.
    let arguments = arguments();
    let sealer = sealer();
    let short = sealer
        .seal(&claims(&arguments, b""), t0(), nonce())
        .unwrap();
    let long_identity = "x".repeat(200);
    let long = sealer
        .seal(
            &tern_seal::Claims {
                principal: Some(&long_identity),
                ..claims(&arguments, b"")
            },
            t0(),
            nonce(),
        )
        .unwrap();
    assert_eq!(short.len(), long.len());
}

#[test]
fn method_is_bound() {
    let arguments = arguments();
    let expect = Expect {
        method: "prompts/get",
        ..expect(&arguments)
    };
    assert_eq!(open_reason(&token(b""), &expect), OpenFailure::Method);
}

#[test]
fn target_is_bound() {
    let arguments = arguments();
    let expect = Expect {
        target: "drop_database",
        ..expect(&arguments)
    };
    assert_eq!(open_reason(&token(b""), &expect), OpenFailure::Target);
}

#[test]
fn arguments_are_bound_canonically() {
    let token = token(b"");
    let changed = json!({"size": 4, "name": "orders"});
    let extra = json!({"size": 3, "name": "orders", "force": true});
    for other in [Some(&changed), Some(&extra), None] {
        let expect = Expect {
            arguments: other,
            ..expect(&changed)
        };
        assert_eq!(
            open_reason(&token, &expect),
            OpenFailure::Arguments,
            "{other:?}"
        );
    }
    // Reordered members and another spelling of the same number still match.
    let same: Value = serde_json::from_str(r#"{"name":"orders","size":3.0}"#).unwrap();
    assert!(sealer().open(&token, &expect(&same), t0()).is_ok());
}

#[test]
fn audience_is_bound() {
    let arguments = arguments();
    let other = sealer_with(
        &[("k1", SECRET_A)],
        SealerOptions {
            audience: "https://other.example.com".into(),
            ..options()
        },
    );
    let error = other
        .open(&token(b""), &expect(&arguments), t0())
        .unwrap_err();
    assert_eq!(error.reason(), OpenFailure::Audience);
}

#[test]
fn checks_run_in_the_documented_order() {
    // Everything is wrong at once: the first check in order wins.
    let wrong = json!({"other": true});
    let all_wrong = Expect {
        principal: Some("mallory"),
        method: "resources/read",
        target: "file:///etc/passwd",
        arguments: Some(&wrong),
    };
    assert_eq!(open_reason(&token(b""), &all_wrong), OpenFailure::Principal);
    let arguments = arguments();
    let late = sealer()
        .open(
            &token(b""),
            &expect(&arguments),
            t0() + crate::common::secs(600),
        )
        .unwrap_err();
    assert_eq!(late.reason(), OpenFailure::Expired);
    let late_and_wrong = sealer()
        .open(&token(b""), &all_wrong, t0() + crate::common::secs(600))
        .unwrap_err();
    assert_eq!(late_and_wrong.reason(), OpenFailure::Expired);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn any_other_binding_is_refused(
        sealed_principal in proptest::option::of("[a-z0-9@.]{0,24}"),
        other_principal in proptest::option::of("[a-z0-9@.]{0,24}"),
        target in "[a-z_]{1,20}",
        other_target in "[a-z_]{1,20}",
        // Integers JCS keeps exact (it compares numbers as doubles).
        n in -(1_i64 << 53)..(1_i64 << 53),
        other_n in -(1_i64 << 53)..(1_i64 << 53),
        state_id in any::<[u8; 16]>(),
        round in any::<u32>(),
        payload in proptest::collection::vec(any::<u8>(), 0..256),
    ) {
        let sealer = sealer();
        let arguments = json!({"n": n});
        let other_arguments = json!({"n": other_n});
        let claims = tern_seal::Claims {
            principal: sealed_principal.as_deref(),
            method: "tools/call",
            target: &target,
            arguments: Some(&arguments),
            state_id,
            round,
            payload: &payload,
        };
        let token = sealer.seal(&claims, t0(), nonce()).unwrap();
        let faithful = Expect {
            principal: sealed_principal.as_deref(),
            method: "tools/call",
            target: &target,
            arguments: Some(&arguments),
        };
        let opened = sealer.open(&token, &faithful, t0()).unwrap();
        prop_assert_eq!(opened.state_id, state_id);
        prop_assert_eq!(opened.round, round);
        prop_assert_eq!(&*opened.payload, &payload);

        let reason = |expect: &Expect<'_>| sealer.open(&token, expect, t0()).err().map(|e| e.reason());
        if other_principal != sealed_principal {
            let expect = Expect { principal: other_principal.as_deref(), ..faithful };
            prop_assert_eq!(reason(&expect), Some(OpenFailure::Principal));
        }
        if other_target != target {
            let expect = Expect { target: &other_target, ..faithful };
            prop_assert_eq!(reason(&expect), Some(OpenFailure::Target));
        }
        if other_n != n {
            let expect = Expect { arguments: Some(&other_arguments), ..faithful };
            prop_assert_eq!(reason(&expect), Some(OpenFailure::Arguments));
        }
        let expect = Expect { method: "prompts/get", ..faithful };
        prop_assert_eq!(reason(&expect), Some(OpenFailure::Method));
    }
}
