//! tern's own fixtures (`tests/fixtures/valid/<Type>/*.json`): each is valid
//! against the official schema, decodes, and re-encodes to an equal value
//! that the schema also accepts.

use std::path::PathBuf;

use crate::registry::{self, Options};
use crate::schema::{all_type_names, json_eq, typed_files, validate};

fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/valid")
}

#[test]
fn every_fixture_is_schema_valid_and_round_trips() {
    let files = typed_files(&fixture_dir());
    assert!(files.len() > 250, "fixtures missing: found {}", files.len());
    let mut failures = Vec::new();
    for (type_name, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let original: serde_json::Value = serde_json::from_str(&text).unwrap();
        let errors = validate(type_name, &original);
        if !errors.is_empty() {
            failures.push(format!(
                "{}: not valid against the schema: {errors:?}",
                path.display()
            ));
            continue;
        }
        // Types whose tasks context matters are decoded as the caller would.
        let is_task = |v: &serde_json::Value| {
            v.get("resultType").and_then(serde_json::Value::as_str) == Some("task")
        };
        let opts = Options {
            tasks: is_task(&original) || original.get("result").is_some_and(is_task),
        };
        match registry::decode(type_name, &text, opts) {
            None => failures.push(format!("{}: no tern type for {type_name}", path.display())),
            Some(Err(e)) => failures.push(format!("{}: {e}", path.display())),
            Some(Ok(encoded)) => {
                if !json_eq(&original, &encoded) {
                    failures.push(format!(
                        "{}: re-encoded differently:\n  was {original}\n  now {encoded}",
                        path.display()
                    ));
                }
                let errors = validate(type_name, &encoded);
                if !errors.is_empty() {
                    failures.push(format!(
                        "{}: re-encoding not schema-valid: {errors:?}",
                        path.display()
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}

/// Every request method, notification and result type of both schemas has at
/// least one fixture.
#[test]
fn fixtures_cover_every_message_and_result_type() {
    let covered: std::collections::BTreeSet<String> = typed_files(&fixture_dir())
        .into_iter()
        .map(|(t, _)| t)
        .collect();
    let abstract_or_union = [
        "Request",
        "Notification",
        "Result",
        "ClientRequest",
        "ClientNotification",
        "ClientResult",
        "ServerNotification",
        "ServerResult",
        "PaginatedRequest",
        "PaginatedResult",
        "CacheableResult",
        "EmptyResult",
        "JSONRPCRequest",
        "JSONRPCNotification",
        "JSONRPCResponse",
        "JSONRPCResultResponse",
        "JSONRPCMessage",
    ];
    let missing: Vec<String> = all_type_names()
        .into_iter()
        .filter(|n| {
            n.ends_with("Request")
                || n.ends_with("Notification")
                || n.ends_with("Result")
                || n.ends_with("Response")
        })
        .filter(|n| !abstract_or_union.contains(&n.as_str()) && !covered.contains(n))
        .collect();
    assert!(missing.is_empty(), "no fixture for {missing:?}");
}

/// The decoder knows every `$defs` name of both schemas.
#[test]
fn every_schema_type_has_a_tern_type() {
    let unknown: Vec<String> = all_type_names()
        .into_iter()
        .filter(|n| registry::decode(n, "null", Options::default()).is_none())
        .collect();
    assert!(unknown.is_empty(), "no tern type for {unknown:?}");
}
