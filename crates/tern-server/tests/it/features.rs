//! The Cargo features of `tern-server` (its `Cargo.toml` explains each): a
//! stdio-only server (`default-features = false`) builds none of the HTTP,
//! TLS and JWT stacks; each feature brings its own and no more.

use std::path::Path;

use tern_test_support::deps::normal_deps;

fn workspace() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

const HTTP: [&str; 4] = ["axum", "hyper", "hyper-util", "tower"];
const TLS_AND_JWT: [&str; 4] = ["rustls", "hyper-rustls", "webpki-roots", "ring"];
/// What a JWT library's `RustCrypto` backend would add: the verifier checks
/// signatures with ring, which TLS builds anyway.
const SECOND_CRYPTO_STACK: [&str; 6] = [
    "jsonwebtoken",
    "rsa",
    "p256",
    "p384",
    "ed25519-dalek",
    "aws-lc-rs",
];

fn has(deps: &std::collections::BTreeSet<String>, name: &str) -> bool {
    deps.contains(name)
}

#[test]
fn a_stdio_only_server_builds_no_http_tls_or_jwt_stack() {
    let deps = normal_deps(workspace(), "tern-server", &[]);
    let found: Vec<_> = HTTP
        .iter()
        .chain(&TLS_AND_JWT)
        .filter(|name| has(&deps, name))
        .collect();
    assert!(found.is_empty(), "stdio-only tern-server pulls {found:?}");
    // The core itself is there: the check reads a real tree.
    assert!(
        has(&deps, "tern-protocol") && has(&deps, "tokio"),
        "{deps:?}"
    );
}

#[test]
fn http_brings_the_http_stack_but_no_tls_or_jwt() {
    let deps = normal_deps(workspace(), "tern-server", &["http"]);
    for name in HTTP {
        assert!(has(&deps, name), "`http` without {name}");
    }
    for name in TLS_AND_JWT {
        assert!(!has(&deps, name), "`http` pulls {name}");
    }
}

#[test]
fn auth_brings_tls_and_jwt() {
    let deps = normal_deps(workspace(), "tern-server", &["auth"]);
    for name in HTTP.iter().chain(&TLS_AND_JWT) {
        assert!(has(&deps, name), "`auth` without {name}");
    }
    for name in SECOND_CRYPTO_STACK {
        assert!(!has(&deps, name), "`auth` pulls {name}");
    }
}
