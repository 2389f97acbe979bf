//! The `tern` command's Cargo features (its `Cargo.toml` explains each):
//! the default build is lean — no Redis client, no SQLite, no JSON Schema
//! validator, no OpenTelemetry, no regex engine — and each feature brings
//! its own stack.

use std::path::Path;

use tern_test_support::deps::normal_deps;

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// Each optional part and a crate only it brings.
const PARTS: [(&str, &str); 4] = [
    ("fleet", "redis"),
    ("sqlite", "rusqlite"),
    ("validate", "jsonschema"),
    ("otel", "opentelemetry"),
];

#[test]
fn the_default_build_leaves_every_optional_stack_out() {
    let deps = normal_deps(workspace(), "tern", &["default"]);
    let heavy = [
        "tern-redis",
        "tern-sqlite",
        "libsqlite3-sys",
        "regex",
        "regex-automata",
    ];
    let found: Vec<_> = PARTS
        .iter()
        .map(|(_, name)| name)
        .chain(&heavy)
        .filter(|name| deps.contains(**name))
        .collect();
    assert!(found.is_empty(), "the default tern pulls {found:?}");
    // What the lean build keeps: the check reads a real tree.
    for name in [
        "tern-server",
        "tern-client",
        "tern-gateway",
        "inquire",
        "rustls",
    ] {
        assert!(deps.contains(name), "the default tern lacks {name}");
    }
}

#[test]
fn each_feature_brings_its_own_stack_and_no_other() {
    for (feature, brings) in PARTS {
        let deps = normal_deps(workspace(), "tern", &[feature]);
        assert!(deps.contains(brings), "`{feature}` without {brings}");
        for (other, its) in PARTS.iter().filter(|(f, _)| *f != feature) {
            assert!(
                !deps.contains(*its),
                "`{feature}` pulls {its} (of `{other}`)"
            );
        }
    }
}
