//! Negative fixtures (`tests/fixtures/invalid/*.json`): each holds a value, the
//! schema type to decode it as, and a fragment of the error that must say
//! what is wrong.

use std::path::PathBuf;

use serde::Deserialize;

use crate::registry::{self, Options};

#[derive(Deserialize)]
struct Case {
    #[serde(rename = "type")]
    type_name: String,
    #[serde(default)]
    tasks: bool,
    error: String,
    value: serde_json::Value,
}

pub fn cases() -> Vec<(PathBuf, String, bool, String, String)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/invalid");
    let mut out: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            let case: Case =
                serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            let text = serde_json::to_string(&case.value).unwrap();
            (path, case.type_name, case.tasks, text, case.error)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn every_negative_fixture_is_rejected_with_its_reason() {
    let cases = cases();
    assert!(
        cases.len() >= 40,
        "negative fixtures missing: {}",
        cases.len()
    );
    let mut failures = Vec::new();
    for (path, type_name, tasks, text, want) in &cases {
        match registry::decode(type_name, text, Options { tasks: *tasks }) {
            None => failures.push(format!("{}: unknown type {type_name}", path.display())),
            Some(Ok(v)) => failures.push(format!("{}: accepted as {v}", path.display())),
            Some(Err(e)) if !e.contains(want.as_str()) => {
                failures.push(format!(
                    "{}: error {e:?} does not say {want:?}",
                    path.display()
                ));
            }
            Some(Err(_)) => {}
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
