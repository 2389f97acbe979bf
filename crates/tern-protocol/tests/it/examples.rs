//! Every official example decodes into the tern type for the schema type its
//! folder names and re-encodes to an equal JSON value. The test walks the
//! folder: a new example file is tested without code changes.

use crate::registry::{self, Options};
use crate::schema::{json_eq, spec_dir, typed_files};

#[test]
fn every_official_example_round_trips() {
    let files = typed_files(&spec_dir().join("examples"));
    assert!(
        files.len() >= 129,
        "expected the 129 official examples, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for (type_name, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let original: serde_json::Value = serde_json::from_str(&text).unwrap();
        match registry::decode(type_name, &text, Options::default()) {
            None => failures.push(format!("{}: no tern type for {type_name}", path.display())),
            Some(Err(e)) => failures.push(format!("{}: {e}", path.display())),
            Some(Ok(encoded)) if !json_eq(&original, &encoded) => failures.push(format!(
                "{}: re-encoded differently:\n  was {original}\n  now {encoded}",
                path.display()
            )),
            Some(Ok(_)) => {}
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} examples failed:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
