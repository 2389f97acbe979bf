//! The official schemas, validators per `$defs` name, and JSON equality.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

/// The folder holding the official schemas and examples: the copy vendored
/// in the repository's `spec/`, or `TERN_SPEC_DIR`.
pub fn spec_dir() -> PathBuf {
    std::env::var_os("TERN_SPEC_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../spec"),
        PathBuf::from,
    )
}

fn load(name: &str) -> Value {
    let path = spec_dir().join(name);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    serde_json::from_str(&text).expect("the official schema is JSON")
}

fn schemas() -> &'static (Value, Value) {
    static SCHEMAS: OnceLock<(Value, Value)> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        (
            load("schema-2026-07-28.json"),
            load("tasks-extension-schema.json"),
        )
    })
}

/// Every `$defs` name of the two schemas.
pub fn all_type_names() -> Vec<String> {
    let (core, tasks) = schemas();
    let mut names: Vec<String> = core["$defs"].as_object().unwrap().keys().cloned().collect();
    for name in tasks["$defs"].as_object().unwrap().keys() {
        if !names.contains(name) {
            names.push(name.clone());
        }
    }
    names
}

/// Validates `instance` against `$defs/<name>` of the schema that defines it
/// (the core schema first, then the Tasks extension's); the errors, if any.
pub fn validate(name: &str, instance: &Value) -> Vec<String> {
    static CACHE: OnceLock<Mutex<HashMap<String, &'static jsonschema::Validator>>> =
        OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    let validator = *cache
        .lock()
        .unwrap()
        .entry(name.to_owned())
        .or_insert_with(|| {
            let (core, tasks) = schemas();
            let defs = if core["$defs"].get(name).is_some() {
                &core["$defs"]
            } else {
                &tasks["$defs"]
            };
            assert!(defs.get(name).is_some(), "{name} is in neither schema");
            let schema = json!({
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "$ref": format!("#/$defs/{name}"),
                "$defs": defs,
            });
            let validator =
                jsonschema::draft202012::new(&schema).expect("the official schema compiles");
            Box::leak(Box::new(validator))
        });
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// JSON equality where numbers compare by value (`50` equals `50.0`), as in
/// JSON Schema's `const` / `enum`.
pub fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(x), Some(y)) => x == y,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| json_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Every `*.json` file below `dir/<Type>/`, with its type name.
pub fn typed_files(dir: &std::path::Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("read {}: {e}", dir.display())) {
        let type_dir = entry.unwrap().path();
        if !type_dir.is_dir() {
            continue;
        }
        let type_name = type_dir.file_name().unwrap().to_string_lossy().into_owned();
        for file in std::fs::read_dir(&type_dir).unwrap() {
            let path = file.unwrap().path();
            if path.extension().is_some_and(|e| e == "json") {
                out.push((type_name.clone(), path));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn json_eq_compares_numbers_by_value_and_nothing_else_loosely() {
    assert!(json_eq(&json!({"a": [50]}), &json!({"a": [50.0]})));
    assert!(!json_eq(&json!({"a": 1}), &json!({"a": 2})));
    assert!(!json_eq(&json!({"a": 1}), &json!({"a": 1, "b": null})));
    assert!(!json_eq(&json!(["1"]), &json!([1])));
}
