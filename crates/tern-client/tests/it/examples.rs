//! `examples/answering_client` run as a user runs it, against tern's test
//! server over HTTP: it answers the question from its command line, or
//! declines when the field is not given.

use std::path::PathBuf;
use std::time::Duration;

use tern_server::transport::http::Http;

use crate::harness::serve_http;
use crate::server;

/// `target/<profile>/examples/NAME`, beside this test's `deps/` folder, where
/// `cargo build --examples` puts it (scripts/test builds them before the
/// tests; `cargo test` itself leaves only hashed test-harness copies).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let path = exe
        .parent()
        .and_then(|deps| deps.parent())
        .unwrap()
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is not built (scripts/test builds the examples first: cargo build --workspace --examples)",
        path.display()
    );
    path
}

async fn run(args: &[&str]) -> std::process::Output {
    let run = tokio::process::Command::new(example("answering_client"))
        .args(args)
        .kill_on_drop(true)
        .output();
    tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("answering_client did not finish within 60 s")
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answering_client_answers_from_its_arguments() {
    let app = axum::Router::new().route_service("/mcp", Http::new(server::build()).into_service());
    let url = serve_http(app).await;

    let answered = run(&["greet", "{}", "name=Ada", "--url", &url]).await;
    assert!(answered.status.success(), "{answered:?}");
    assert_eq!(String::from_utf8_lossy(&answered.stdout), "Hello, Ada!\n");
    let asked = String::from_utf8_lossy(&answered.stderr);
    assert!(
        asked.contains("What is your name?") && asked.contains("name = Ada"),
        "{asked}"
    );

    let declined = run(&["greet", "{}", "--url", &url]).await;
    assert!(declined.status.success(), "{declined:?}");
    assert_eq!(String::from_utf8_lossy(&declined.stdout), "declined\n");

    let usage = run(&["greet"]).await;
    assert!(!usage.status.success());
    assert!(String::from_utf8_lossy(&usage.stderr).contains("usage: answering_client"));
}
