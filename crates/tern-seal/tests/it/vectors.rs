//! Known-answer vectors: fixed key, nonce, time and claims give one exact
//! token, so any silent change to the `t1` format fails here (the `t2`
//! vectors are in `t2.rs`). All four are reproduced by an independent
//! implementation, `tests/token_vectors.py` (Python: HKDF, HMAC and SHA-256,
//! `HChaCha20` written out, `ChaCha20-Poly1305` and `AES-256-GCM-SIV` from
//! the `cryptography` package): `python3 tests/token_vectors.py 5300ad88…37ec`
//! prints them.

use std::fmt::Write as _;

use serde_json::json;
use tern_seal::{Claims, Expect, OpenFailure, arguments_digest};

use crate::common::{arguments, claims, expect, nonce, sealer, secs, t0};

/// Key "k1" = [`SECRET_A`](crate::common::SECRET_A), audience `https://mcp.example.com`, nonce bytes
/// 0..24, now = 1 800 000 000 s, principal "user-42", `tools/call`
/// `provision_database` `{"size":3,"name":"orders"}`, state id a0..af,
/// round 2, payload "answers: region=eu-west-1".
pub(crate) const VECTOR_1: &str = "t1.k1.AAECAwQFBgcICQoLDA0ODxAREhMUFRYXcw-67cA70HE3ssWlreTrhJE30ODk5GK6S-fDWzbt3k5oazQZfFnfWTEQg2XiB1dDxDTY89IRuOt0ylPZULgByjNaHtFNlUL0HKe-JKbEU5Gfef6-6lvHCalidZ2AqJAYkeim8E7s7mEfvJpgGKbGrNOjS5l2jgb3ZrF8ZLoGs-KyiIW5Hmb4d-hgjFpmnspn0rgIg1ijmVmnSQElvCaOZdAQWuoYOKyRRq2BJJQ9kFEY0wdNgskieVwtdZ-V1f9nOWIV5hK35a1SGSr6_LfuYtZEjpLAFwlr7-mxMwk";

/// Same key, audience and time; nonce 24 × 0xff, anonymous, `prompts/get`
/// `greet`, no arguments, state id zero, round 0, empty payload.
const VECTOR_2: &str = "t1.k1.________________________________N_nJLB-c6nBllzAcUa6GGV-j7YbagmXvEsYMtSXposy_ddB274ciwVyFTsL9jnjofDl8u82X4i__DCtM4zIdIuElX9fBbL6vxwMVidHnR4yANREMgFsIHRdTUrfyEtX-ivtwgqtb4-11UZ6LeDM3F6SJRc1iSELkFg1tVcCNnU-mn74iAlxT1SRxIXTEE5tKzjPnXFOoJHb5eUvqGybq5ORq9ws1uA4SzDF65ngIZFEKS0gqQ0NK3FxcRD81miiRowMuxdA";

pub(crate) const PAYLOAD_1: &[u8] = b"answers: region=eu-west-1";

pub(crate) fn claims_2() -> Claims<'static> {
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

pub(crate) const EXPECT_2: Expect<'static> = Expect {
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
