//! A stdio child that dies: every waiting request and every later one fails
//! at once with its exit status and its last lines of standard error (before:
//! a request sent after the death waited for ever), and the watch tells it
//! to whoever waits elsewhere.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern_client::transport::stdio::{ChildProcess, SpawnOptions};
use tern_client::{Client, ErrorKind};

/// A bound on each wait, so a regression fails instead of hanging.
const BOUND: Duration = Duration::from_secs(30);

fn sh(script: &str) -> Vec<String> {
    vec!["-c".into(), script.into()]
}

#[tokio::test]
async fn a_child_that_dies_on_a_request_fails_it_and_every_later_one_with_its_exit_status() {
    let child = ChildProcess::spawn(
        "sh",
        &sh("read line; echo 'first words' >&2; echo 'crashed on the request' >&2; exit 7"),
    )
    .unwrap();
    let mut watch = child.watch();
    let client = Client::builder().build(child);
    let e = tokio::time::timeout(BOUND, client.list_tools())
        .await
        .expect("the pending request fails, it does not wait")
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Transport);
    let text = format!("{e:#}");
    assert!(text.contains("exited (exit status: 7)"), "{text}");
    assert!(
        text.contains("| first words\n  | crashed on the request"),
        "{text}"
    );
    // A request sent after the death fails at once, with the same words.
    let later = tokio::time::timeout(BOUND, client.list_prompts())
        .await
        .expect("a later request fails, it does not wait")
        .unwrap_err();
    assert!(format!("{later:#}").contains("exit status: 7"), "{later:#}");
    let exit = tokio::time::timeout(BOUND, watch.exited()).await.unwrap();
    assert_eq!(exit.status.as_deref(), Some("exit status: 7"));
    assert_eq!(exit.stderr, ["first words", "crashed on the request"]);
    client.close().await;
}

#[tokio::test]
async fn the_watch_tells_a_death_while_nothing_is_in_flight() {
    // The child dies on its own, as one killed while a person answers.
    let child = ChildProcess::spawn("sh", &sh("echo 'out of memory' >&2; exit 137")).unwrap();
    let mut watch = child.watch();
    let exit = tokio::time::timeout(BOUND, watch.exited()).await.unwrap();
    assert_eq!(exit.status.as_deref(), Some("exit status: 137"));
    assert_eq!(exit.stderr, ["out of memory"]);
    assert!(watch.exit().is_some());
    let client = Client::builder().build(child);
    let e = tokio::time::timeout(BOUND, client.list_tools())
        .await
        .unwrap()
        .unwrap_err();
    assert!(format!("{e:#}").contains("| out of memory"), "{e:#}");
}

#[tokio::test]
async fn spawn_options_set_the_environment_and_see_stderr_as_it_comes() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = Arc::clone(&seen);
    let options = SpawnOptions::default()
        .env("TERN_TEST_GREETING", "hello")
        .own_process_group()
        .on_stderr(Arc::new(move |line: &str| {
            sink.lock().unwrap().push(line.to_owned());
        }));
    let child = ChildProcess::spawn_with_options(
        "sh",
        &sh("echo \"$TERN_TEST_GREETING from the child\" >&2; exit 1"),
        options,
    )
    .unwrap();
    let mut watch = child.watch();
    let exit = tokio::time::timeout(BOUND, watch.exited()).await.unwrap();
    assert_eq!(exit.stderr, ["hello from the child"]);
    assert_eq!(*seen.lock().unwrap(), ["hello from the child"]);
    assert!(format!("{:?}", SpawnOptions::default().env("K", "secret")).contains("\"K\""));
    assert!(!format!("{:?}", SpawnOptions::default().env("K", "secret")).contains("secret"));
}
