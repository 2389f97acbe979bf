//! What a crate pulls in under a set of features, read from `cargo tree`
//! (the lock file, offline): the check behind each crate's feature test
//! ("a stdio-only server builds without axum, hyper, rustls or
//! jsonwebtoken").

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// The names of every crate `package` depends on (normal edges, build
/// scripts' and dev-dependencies left out) with `--no-default-features` and
/// `features`. `workspace` is the workspace root (its `Cargo.toml`).
///
/// # Panics
///
/// When `cargo tree` cannot run or fails: the test that asked fails, saying
/// why.
#[must_use]
pub fn normal_deps(workspace: &Path, package: &str, features: &[&str]) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["tree", "--offline", "--locked", "-q", "-e", "normal"])
        .args(["--prefix", "none", "--format", "{p}"])
        .args(["-p", package, "--no-default-features"]);
    if !features.is_empty() {
        command.args(["--features", &features.join(",")]);
    }
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cargo tree -p {package}: {e}"));
    assert!(
        output.status.success(),
        "cargo tree -p {package} --features {features:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}
