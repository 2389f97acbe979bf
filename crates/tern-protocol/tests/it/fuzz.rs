//! Fuzzing on the stable toolchain: structure-aware random testing of the
//! message decoder and the form-answer validator. Inputs are the committed
//! seeds (`tests/fuzz-seeds/*.json`, valid messages of every kind) mutated
//! byte-wise, and envelopes built from random JSON trees. The property is
//! always the same: a clear `Ok` or `Err`, never a panic (everything from
//! the peer is attacker-controlled, as rule `state-untrusted` says of
//! `requestState`). Case counts are fixed so the set
//! runs in seconds; a failure proptest finds is kept in
//! `proptest-regressions/` beside this file and replayed first.

use std::path::PathBuf;

use indexmap::IndexMap;
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tern_protocol::ClientRequest;
use tern_protocol::elicitation::{ElicitValue, RequestedSchema};
use tern_protocol::jsonrpc::Message;

/// The committed seed messages.
fn seeds() -> Vec<Vec<u8>> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz-seeds");
    let mut out: Vec<Vec<u8>> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    out.sort();
    assert!(out.len() >= 8, "the seed corpus is there");
    out
}

/// Decodes `bytes` as the server does: the envelope, then a request's
/// params by its method. Returns whether it decoded as a request.
fn decode(bytes: &[u8]) -> bool {
    match Message::from_slice(bytes) {
        Ok(Message::Request(r)) => {
            let _ = ClientRequest::from_request(&r);
            true
        }
        Ok(_) | Err(_) => false,
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Insert(usize, u8),
    Delete(usize, usize),
    Duplicate(usize, usize),
    Truncate(usize),
}

const JSONISH: &[u8] = b"{}[]\",:\\ 0123456789.eE+-truefalsnl\x00\xff\xc3\xa9u";

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), 0..JSONISH.len()).prop_map(|(i, b)| Mutation::Insert(i, JSONISH[b])),
        (any::<usize>(), 1..16usize).prop_map(|(i, n)| Mutation::Delete(i, n)),
        (any::<usize>(), 1..64usize).prop_map(|(i, n)| Mutation::Duplicate(i, n)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    if bytes.is_empty() {
        return;
    }
    let at = |i: usize, len: usize| i % len;
    match *m {
        Mutation::Flip(i, b) => {
            let i = at(i, bytes.len());
            bytes[i] ^= b;
        }
        Mutation::Insert(i, b) => {
            let i = at(i, bytes.len() + 1);
            bytes.insert(i, b);
        }
        Mutation::Delete(i, n) => {
            let i = at(i, bytes.len());
            let end = (i + n).min(bytes.len());
            bytes.drain(i..end);
        }
        Mutation::Duplicate(i, n) => {
            let i = at(i, bytes.len());
            let end = (i + n).min(bytes.len());
            let slice: Vec<u8> = bytes[i..end].to_vec();
            bytes.splice(end..end, slice);
        }
        Mutation::Truncate(i) => {
            let i = at(i, bytes.len());
            bytes.truncate(i);
        }
    }
}

/// Random JSON trees: every type, deep and wide enough to reach nested
/// members, with keys that collide with the protocol's own.
fn json_tree() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("_meta".to_string()),
        Just("name".to_string()),
        Just("uri".to_string()),
        Just("arguments".to_string()),
        Just("requestState".to_string()),
        Just("inputResponses".to_string()),
        Just("io.modelcontextprotocol/protocolVersion".to_string()),
        Just("io.modelcontextprotocol/clientCapabilities".to_string()),
        Just("action".to_string()),
        Just("content".to_string()),
        "[a-z]{0,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        Just(json!("2026-07-28")),
        ".{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 96, 8, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..8)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

fn method() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("tools/call".to_string()),
        Just("tools/list".to_string()),
        Just("prompts/get".to_string()),
        Just("resources/read".to_string()),
        Just("server/discover".to_string()),
        Just("subscriptions/listen".to_string()),
        Just("completion/complete".to_string()),
        Just("tasks/get".to_string()),
        Just("tasks/update".to_string()),
        Just("notifications/cancelled".to_string()),
        Just("initialize".to_string()),
        ".{0,20}",
    ]
}

/// A form field's schema as JSON, every keyword the flat subset knows, with
/// values of the right and of the wrong types.
fn field_schema() -> impl Strategy<Value = Value> {
    let kind = prop_oneof![
        Just(json!("string")),
        Just(json!("number")),
        Just(json!("integer")),
        Just(json!("boolean")),
        Just(json!("array")),
        Just(json!(7)),
    ];
    (
        kind,
        prop::option::of(0..8u64),
        prop::option::of(0..8u64),
        prop::option::of(-5..5i64),
        prop::option::of(-5..5i64),
        prop::option::of(prop::collection::vec("[a-c]{0,2}", 0..4)),
        prop::option::of(prop_oneof![
            Just("email"),
            Just("uri"),
            Just("date"),
            Just("date-time"),
            Just("bogus")
        ]),
    )
        .prop_map(|(kind, min_len, max_len, min, max, options, format)| {
            let mut f = Map::new();
            f.insert("type".into(), kind.clone());
            if let Some(n) = min_len {
                f.insert("minLength".into(), json!(n));
            }
            if let Some(n) = max_len {
                f.insert("maxLength".into(), json!(n));
            }
            if let Some(n) = min {
                f.insert("minimum".into(), json!(n));
            }
            if let Some(n) = max {
                f.insert("maximum".into(), json!(n));
            }
            if let Some(o) = options {
                if kind == json!("array") {
                    f.insert("items".into(), json!({"type": "string", "enum": o}));
                } else {
                    f.insert("enum".into(), json!(o));
                }
            }
            if let Some(fmt) = format {
                f.insert("format".into(), json!(fmt));
            }
            Value::Object(f)
        })
}

fn elicit_value() -> impl Strategy<Value = ElicitValue> {
    prop_oneof![
        ".{0,10}".prop_map(ElicitValue::String),
        "[a-c]{0,2}".prop_map(ElicitValue::String),
        Just(ElicitValue::String("audit@example.com".into())),
        Just(ElicitValue::String("2030-01-01T09:00:00Z".into())),
        any::<i32>().prop_map(|n| ElicitValue::Number(n.into())),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f)
            .map_or(ElicitValue::Bool(false), ElicitValue::Number)),
        any::<bool>().prop_map(ElicitValue::Bool),
        prop::collection::vec("[a-c]{0,2}", 0..4).prop_map(ElicitValue::Strings),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"))), ..ProptestConfig::default() })]

    /// Target `decoder-mutated`: the seeds, damaged byte-wise.
    #[test]
    fn the_decoder_survives_damaged_messages(seed in any::<prop::sample::Index>(), mutations in prop::collection::vec(mutation(), 1..8)) {
        let seeds = seeds();
        let mut bytes = seeds[seed.index(seeds.len())].clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        decode(&bytes);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"))), ..ProptestConfig::default() })]

    /// Target `decoder-structured`: envelopes of random JSON trees.
    #[test]
    fn the_decoder_survives_random_envelopes(
        jsonrpc in prop_oneof![Just(json!("2.0")), Just(json!("1.0")), Just(json!(2)), Just(Value::Null)],
        id in prop_oneof![Just(Value::Null), any::<i64>().prop_map(|n| json!(n)), ".{0,8}".prop_map(Value::String), Just(json!({"a": 1})), Just(json!(1.5))],
        has_id in any::<bool>(),
        method in method(),
        params in json_tree(),
        meta in json_tree(),
    ) {
        let mut params = params;
        if let Some(p) = params.as_object_mut() {
            p.insert("_meta".into(), meta);
        }
        let mut envelope = Map::new();
        envelope.insert("jsonrpc".into(), jsonrpc);
        if has_id {
            envelope.insert("id".into(), id.clone());
        }
        envelope.insert("method".into(), json!(method));
        envelope.insert("params".into(), params);
        let bytes = Value::Object(envelope).to_string().into_bytes();
        let request = decode(&bytes);
        // A null id never makes a request (spec: Base Protocol overview ›
        // Messages › Requests).
        if request {
            prop_assert!(has_id && !id.is_null());
        }
    }

    /// Target `answer-validator`: random flat schemas against random
    /// answers; a required field left out is always refused.
    #[test]
    fn the_answer_validator_never_panics_and_refuses_missing_required(
        fields in prop::collection::vec(("[a-e]{1,2}", field_schema()), 0..6),
        required in prop::collection::vec("[a-e]{1,2}", 0..4),
        content in prop::collection::vec(("[a-e]{1,2}", elicit_value()), 0..6),
    ) {
        let schema = json!({
            "type": "object",
            "properties": fields.into_iter().collect::<Map<String, Value>>(),
            "required": required,
        });
        let Ok(schema) = serde_json::from_value::<RequestedSchema>(schema) else {
            return Ok(());
        };
        let content: IndexMap<String, ElicitValue> = content.into_iter().collect();
        let verdict = schema.check(&content);
        let missing = schema.required.iter().flatten().any(|r| !content.contains_key(r));
        if missing {
            prop_assert!(verdict.is_err(), "a required field is missing: {content:?}");
        }
        prop_assert_eq!(verdict, schema.check(&content), "the verdict is deterministic");
    }
}
