//! Validation against the official 2026-07-28 schema (the copy vendored in
//! the repository's `spec/`, or `TERN_SPEC_DIR`).

use std::path::PathBuf;
use std::sync::OnceLock;

use serde_json::{Value, json};

fn core() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let dir = std::env::var_os("TERN_SPEC_DIR").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec"),
            PathBuf::from,
        );
        let text = std::fs::read_to_string(dir.join("schema-2026-07-28.json"))
            .expect("the official schema is readable");
        serde_json::from_str(&text).unwrap()
    })
}

/// Panics unless `value` is valid as `$defs/<name>`.
pub fn assert_valid(name: &str, value: &Value) {
    let schema = json!({"$ref": format!("#/$defs/{name}"), "$defs": core()["$defs"]});
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let errors: Vec<String> = validator
        .iter_errors(value)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name} rejected by the official schema: {errors:?}\n{value:#}"
    );
}
