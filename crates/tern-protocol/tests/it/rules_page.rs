//! The rule ids `docs/rules.md` defines: one `### id` heading each. Shared
//! by the house check (`house.rs`) and `tern`'s audit tests, which include
//! this file by path.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The repository's root, two folders above a crate's manifest.
pub fn repository(manifest_dir: &str) -> PathBuf {
    Path::new(manifest_dir).join("../..")
}

/// Whether `id` has the shape of a rule id: lowercase words of letters and
/// digits joined by single hyphens, two words at least.
pub fn is_rule_id(id: &str) -> bool {
    id.contains('-')
        && id.split('-').all(|w| {
            !w.is_empty()
                && w.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        })
}

/// Every rule id `docs/rules.md` defines, in order; panics on a heading of
/// that level that is not a well-formed id, or on an id defined twice.
pub fn defined_rules(root: &Path) -> Vec<String> {
    let path = root.join("docs/rules.md");
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let mut seen = BTreeSet::new();
    let mut ids = Vec::new();
    for line in text.lines() {
        let Some(id) = line.strip_prefix("### ") else {
            continue;
        };
        let id = id.trim();
        assert!(is_rule_id(id), "docs/rules.md: `### {id}` is not a rule id");
        assert!(
            seen.insert(id.to_owned()),
            "docs/rules.md defines {id} twice"
        );
        ids.push(id.to_owned());
    }
    ids
}
