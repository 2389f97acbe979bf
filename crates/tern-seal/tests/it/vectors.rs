//! Known-answer vectors: fixed key, nonce, time and claims give one exact
//! token, so any silent change to the `t1` format fails here. Vector 1 was
//! also reproduced with an independent implementation (Python: HKDF, HMAC,
//! SHA-256, `HChaCha20` + `ChaCha20-Poly1305` from the `cryptography` package).

use std::fmt::Write as _;

use serde_json::json;
use tern_seal::{Claims, Expect, OpenFailure, arguments_digest};

use crate::common::{arguments, claims, expect, nonce, sealer, secs, t0};

/// Key "k1" = bytes 1..=32, audience `https://mcp.example.com`, nonce bytes
/// 0..24, now = 1 800 000 000 s, principal "user-42", `tools/call`
/// `provision_database` `{"size":3,"name":"orders"}`, state id a0..af,
/// round 2, payload "answers: region=eu-west-1".
const VECTOR_1: &str = "t1.k1.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXN9MK783frocAg-Psbsb43cSQMhu6ykIcTEMQEEcXSl34Wk0KdWul7TRZroKea3c20T4tuyV0XeKY3ZvdihRjSaFq1MH9IJsklTYNT2Bd6BHI4aj1tGGZpd_-1UHOoK4XewP8hWdEByzm44Ro0LlxYFpPgZ5xxG0WG0oaSZdppcPyV04tFVCDnHPaS9zFbgI-fMOn4-uNBiVv8mIBT_73Cwr9nvxCVigoCCnodrUDOMu-Hoicwu3iH8JFrVmjeVXZ7_jytU_6pTAYg8eF9mf9ORb8yP5Zc9dOxbbDcPI";

/// Same key, audience and time; nonce 24 × 0xff, anonymous, `prompts/get`
/// `greet`, no arguments, state id zero, round 0, empty payload.
const VECTOR_2: &str = "t1.k1.________________________________nmgLM3Zyn_zDwjsAK2MV9TdiMTAtbwsNe81jrMCmYz6tor7_Czyqkf_hgBu6pSaSnbHFNmh9d4NlK6NAp-q_tmGHrWLdaZybsJWIfht_CL3g9pBMujM5guvz8FBonTJTfWjsuAvC02eHNBY-iIXevZaQ8BGLmhGZtAud1azXpwdgknvBxynBloh8e_zWaPLRfUQa0FUrObkdHTGVcvmO7clQwTIeER4K3sDPhy6JUjSNFr-vEufzlRQBXun9QcmVz8KeAVk";

const PAYLOAD_1: &[u8] = b"answers: region=eu-west-1";

fn claims_2() -> Claims<'static> {
    Claims {
        principal: None,
        method: "prompts/get",
        target: "greet",
        arguments: None,
        state_id: [0; 16],
        round: 0,
        payload: b"",
    }
}

const EXPECT_2: Expect<'static> = Expect {
    principal: None,
    method: "prompts/get",
    target: "greet",
    arguments: None,
};

#[test]
fn vector_1_seals_exactly() {
    let arguments = arguments();
    let token = sealer()
        .seal(&claims(&arguments, PAYLOAD_1), t0(), nonce())
        .unwrap();
    assert_eq!(token, VECTOR_1);
}

#[test]
fn vector_1_opens() {
    let arguments = arguments();
    let opened = sealer()
        .open(VECTOR_1, &expect(&arguments), t0() + secs(1))
        .unwrap();
    assert_eq!(*opened.payload, PAYLOAD_1);
    assert_eq!(opened.round, 2);
    assert_eq!(opened.state_id, claims(&arguments, b"").state_id);
    assert_eq!(opened.issued_at, t0());
    assert_eq!(opened.expires_at, t0() + secs(600));
}

#[test]
fn vector_2_seals_exactly_and_opens() {
    let sealer = sealer();
    let token = sealer.seal(&claims_2(), t0(), [0xff; 24]).unwrap();
    assert_eq!(token, VECTOR_2);
    let opened = sealer.open(VECTOR_2, &EXPECT_2, t0()).unwrap();
    assert_eq!(*opened.payload, b"");
    assert_eq!(opened.round, 0);
    // `{}` stands for absent arguments.
    let empty = json!({});
    let with_empty = Expect {
        arguments: Some(&empty),
        ..EXPECT_2
    };
    assert!(sealer.open(VECTOR_2, &with_empty, t0()).is_ok());
    // The anonymous marker is not the empty principal.
    let named = Expect {
        principal: Some(""),
        ..EXPECT_2
    };
    let error = sealer.open(VECTOR_2, &named, t0()).unwrap_err();
    assert_eq!(error.reason(), OpenFailure::Principal);
}

#[test]
fn arguments_digest_vector() {
    // `printf '%s' '{"name":"orders","size":3}' | sha256sum`
    assert_eq!(
        hex(&arguments_digest(Some(&arguments())).unwrap()),
        "0da38c868eb59d1b729cf687f8bc73b9ae54376aea7fea2d0c195a60fca7c33f"
    );
}

#[test]
fn arguments_digest_is_canonical() {
    let digest = |value: serde_json::Value| arguments_digest(Some(&value));
    // Member order does not matter.
    assert_eq!(
        digest(json!({"a": 1, "b": 2})),
        digest(json!({"b": 2, "a": 1}))
    );
    assert_eq!(
        digest(serde_json::from_str(r#"{"b":{"y":1,"x":2},"a":[1,2]}"#).unwrap()),
        digest(serde_json::from_str(r#"{"a":[1,2],"b":{"x":2,"y":1}}"#).unwrap())
    );
    // Numbers have one form: 1.0 is 1, 1e2 is 100.
    assert_eq!(digest(json!({"a": 1.0})), digest(json!({"a": 1})));
    assert_eq!(
        digest(serde_json::from_str(r#"{"a":1e2}"#).unwrap()),
        digest(json!({"a": 100}))
    );
    // Values and array order do matter.
    assert_ne!(digest(json!({"a": 1})), digest(json!({"a": 2})));
    assert_ne!(digest(json!({"a": 1})), digest(json!({"a": "1"})));
    assert_ne!(digest(json!([1, 2])), digest(json!([2, 1])));
    // Absent arguments and `{}` are the same request; `null` is not.
    assert_eq!(digest(json!({})), arguments_digest(None));
    assert_ne!(digest(json!(null)), arguments_digest(None));
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}
