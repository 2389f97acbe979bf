//! The Cargo features of `tern-client` (its `Cargo.toml` explains each): a
//! stdio-only client (`default-features = false`) builds neither the HTTP
//! nor the TLS stack; `http` brings both, `auth` the OAuth client's crates.

use std::collections::BTreeSet;
use std::path::Path;

use tern_test_support::deps::normal_deps;

fn deps(features: &[&str]) -> BTreeSet<String> {
    let workspace = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."));
    normal_deps(workspace, "tern-client", features)
}

const HTTPS: [&str; 5] = [
    "hyper",
    "hyper-util",
    "rustls",
    "hyper-rustls",
    "webpki-roots",
];
// (sha2 is no marker: tern-protocol hashes Skills files with it.)
const OAUTH: [&str; 1] = ["url"];

#[test]
fn a_stdio_only_client_builds_no_http_or_tls_stack() {
    let deps = deps(&[]);
    let found: Vec<_> = HTTPS
        .iter()
        .chain(&OAUTH)
        .filter(|n| deps.contains(**n))
        .collect();
    assert!(found.is_empty(), "stdio-only tern-client pulls {found:?}");
    assert!(
        deps.contains("tern-protocol") && deps.contains("tokio"),
        "{deps:?}"
    );
}

#[test]
fn http_brings_https_and_auth_the_oauth_crates() {
    let http = deps(&["http"]);
    for name in HTTPS {
        assert!(http.contains(name), "`http` without {name}");
    }
    assert!(!http.contains("url"), "`http` pulls the OAuth client's url");
    let auth = deps(&["auth"]);
    for name in HTTPS.iter().chain(&OAUTH) {
        assert!(auth.contains(*name), "`auth` without {name}");
    }
}
