//! Fuzzing on the stable toolchain: structure-aware random testing of the
//! HTTP header decoder (through the real `McpService`, in process) and of
//! the elicitation schema checker (`form::flatten`). The property: a clear
//! answer, never a panic or a 500; a header that does not match the body is
//! never served. Case counts are fixed; failures proptest finds are kept in
//! `proptest-regressions/` beside this file and replayed first.

use axum::body::Body;
use http::{Request, StatusCode};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tern_server::transport::http::Http;
use tern_server::{Server, ToolDef};

async fn echo(tern_server::Args(v): tern_server::Args<Value>) -> String {
    v.to_string()
}

fn server() -> Server {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "n": {"type": "integer", "x-mcp-header": "N"}
    }});
    Server::builder("fuzz", "1")
        .tool(
            ToolDef::new("place", "Echoes", echo).input_schema(schema.as_object().unwrap().clone()),
        )
        .build()
        .unwrap()
}

/// Header values: plain tokens, the spec's base64 form (valid and broken),
/// control and non-ASCII bytes, numbers, empty.
fn header_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"place".to_vec()),
        Just(b"eu-west-1".to_vec()),
        "[a-zA-Z0-9_./-]{0,12}".prop_map(String::into_bytes),
        "=\\?base64\\?[A-Za-z0-9+/=]{0,16}\\?=".prop_map(String::into_bytes),
        Just(b"=?base64?ZXUtd2VzdC0x?=".to_vec()),
        Just(b"=?base64?cGxhY2U=?=".to_vec()),
        Just(b"=?base64?/w==?=".to_vec()),
        (-5i64..5).prop_map(|n| n.to_string().into_bytes()),
        prop::collection::vec(any::<u8>(), 0..12),
        Just(Vec::new()),
    ]
}

fn header_name() -> impl Strategy<Value = &'static str> {
    prop_oneof![
        Just("mcp-name"),
        Just("mcp-method"),
        Just("mcp-protocol-version"),
        Just("mcp-param-region"),
        Just("mcp-param-n"),
        Just("host"),
        Just("origin"),
    ]
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"))), ..ProptestConfig::default() })]

    /// Target `http-headers`: random values (and repeats) for every header
    /// the transport reads, against one tools/call.
    #[test]
    fn the_header_decoder_answers_every_header_clearly(
        headers in prop::collection::vec((header_name(), header_value()), 0..6),
        drop_standard in any::<bool>(),
        region in prop_oneof![Just(json!("eu-west-1")), Just(json!("place")), Just(json!(3)), Just(Value::Null)],
        n in prop_oneof![Just(json!(3)), Just(json!(-1)), Just(json!("3")), Just(Value::Null)],
    ) {
        let rt = runtime();
        let service = Http::new(server()).into_service();
        let mut args = Map::new();
        if !region.is_null() { args.insert("region".into(), region); }
        if !n.is_null() { args.insert("n".into(), n); }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "place", "arguments": args, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}});
        let mut request = Request::post("/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream");
        if !drop_standard {
            request = request
                .header("host", "127.0.0.1:1")
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", "tools/call")
                .header("mcp-name", "place");
        }
        // Only the values HTTP can carry are sent (the others are skipped,
        // so they are not what the check below reads).
        let mut sent = Vec::new();
        for (name, value) in &headers {
            if let Ok(v) = http::HeaderValue::from_bytes(value) {
                request = request.header(*name, v);
                sent.push((*name, value.clone()));
            }
        }
        let Ok(request) = request.body(Body::from(body.to_string())) else {
            return Ok(());
        };
        let response = rt.block_on(tower::ServiceExt::oneshot(service, request)).unwrap();
        let status = response.status();
        prop_assert!(status != StatusCode::INTERNAL_SERVER_ERROR, "no 500");
        let bytes = rt.block_on(axum::body::to_bytes(response.into_body(), 1 << 20)).unwrap();
        if status == StatusCode::OK && sent.iter().any(|(n, v)| *n == "mcp-name" && v.as_slice() != b"place" && v.as_slice() != b"=?base64?cGxhY2U=?=") {
            prop_assert!(false, "a second or different Mcp-Name was served: {}", String::from_utf8_lossy(&bytes));
        }
        if status == StatusCode::BAD_REQUEST {
            let v: Value = serde_json::from_slice(&bytes).unwrap();
            prop_assert!(v["error"]["code"].is_i64(), "a JSON-RPC error: {v}");
            prop_assert!(v["error"]["message"].as_str().is_some_and(|m| m.len() < 600), "a short message");
        }
    }
}

/// Random JSON Schemas: the keywords a form may use and many it may not,
/// nested.
fn schema_tree() -> impl Strategy<Value = Value> {
    let keyword = prop_oneof![
        Just("type"),
        Just("properties"),
        Just("required"),
        Just("enum"),
        Just("oneOf"),
        Just("anyOf"),
        Just("const"),
        Just("title"),
        Just("items"),
        Just("minLength"),
        Just("maxLength"),
        Just("minimum"),
        Just("maximum"),
        Just("format"),
        Just("default"),
        Just("$ref"),
        Just("$defs"),
        Just("allOf"),
        Just("description"),
        Just("enumNames"),
        Just("minItems"),
        Just("maxItems"),
        Just("x"),
    ];
    let leaf = prop_oneof![
        Just(json!("object")),
        Just(json!("string")),
        Just(json!("integer")),
        Just(json!("number")),
        Just(json!("boolean")),
        Just(json!("array")),
        Just(json!("null")),
        Just(json!("#/$defs/a")),
        any::<i64>().prop_map(|n| json!(n)),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::Null),
        "[a-c]{0,3}".prop_map(Value::String),
    ];
    leaf.prop_recursive(5, 64, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((keyword.clone(), inner.clone()), 0..6).prop_map(|kv| {
                Value::Object(kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
            }),
            prop::collection::vec(("[a-c]{1,2}", inner), 0..4)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::SourceParallel("proptest-regressions"))), ..ProptestConfig::default() })]

    /// Target `schema-checker`: `flatten` on random schemas never panics,
    /// and what it accepts is a flat form whose required fields exist.
    #[test]
    fn the_schema_checker_accepts_only_flat_forms(props in prop::collection::vec(("[a-d]{1,2}", schema_tree()), 0..5), required in prop::collection::vec("[a-d]{1,2}", 0..3), noise in schema_tree()) {
        let mut schema = json!({"type": "object", "properties": props.into_iter().collect::<Map<String, Value>>(), "required": required});
        if let (Some(s), Value::Object(extra)) = (schema.as_object_mut(), noise) {
            for (k, v) in extra {
                if k != "type" {
                    s.entry(k).or_insert(v);
                }
            }
        }
        if let Ok(form) = tern_server::form::flatten(&schema) {
            for r in form.required.iter().flatten() {
                prop_assert!(form.properties.contains_key(r), "required {r} is a field");
            }
            // What was accepted serialises as the flat subset and reads back.
            let again: tern_protocol::elicitation::RequestedSchema =
                serde_json::from_value(serde_json::to_value(&form).unwrap()).unwrap();
            prop_assert_eq!(again, form);
        }
    }
}
