//! `examples/fleet_replica` run as a user runs it: two replicas on one real
//! `redis-server` with a shared key file; a round asked by one is finished
//! by the other, and the same final leg sent to both runs once.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;
use tern_client::transport::BoxFuture;
use tern_client::transport::http::HttpTransport;
use tern_client::{CallOptions, Client, Elicitation, HandlerError, Question, Round};
use tern_protocol::InputResponses;
use tern_protocol::elicitation::{ElicitRequestFormParams, ElicitResult};
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

use tern_test_support::redis_server::RedisServer;

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

async fn bounded<F: Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(60), f)
        .await
        .expect("no answer within 60 s")
}

/// A replica on a free port; its endpoint's URL.
async fn replica(redis: &str, keys: &std::path::Path) -> (Child, String) {
    let mut child = Command::new(example("fleet_replica"))
        .args(["127.0.0.1:0", redis])
        .arg(keys)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let line = bounded(lines.next_line())
        .await
        .unwrap()
        .expect("the replica exited");
    (
        child,
        line.strip_prefix("listening on ").unwrap().to_owned(),
    )
}

/// Declares form elicitation; the test answers the rounds itself (manual
/// mode never calls a handler).
struct AnsweredByTheTest;

impl Elicitation for AnsweredByTheTest {
    fn form(
        &self,
        _: Question,
        _: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        Box::pin(async { Err(HandlerError("the test answers the rounds itself".into())) })
    }
}

fn text(result: &tern_protocol::tool::CallToolResult) -> String {
    result.content.iter().filter_map(|c| c.as_text()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_rounds_and_run_a_guarded_leg_once() {
    let redis = RedisServer::start().await;
    let keys = std::env::temp_dir().join(format!("fleet-example-keys-{}", std::process::id()));
    // A fixed test secret: 43 characters of base64url (32 bytes).
    std::fs::write(
        &keys,
        "fleet-1:q3Vx8mZ0b1Lp4Rt7Yc2Nf5Hd9Kg6Ws0Ja3Ue8Io1Pk4\n",
    )
    .unwrap();
    let (mut a, url_a) = replica(&redis.url(), &keys).await;
    let (mut b, url_b) = replica(&redis.url(), &keys).await;
    let client = |url: &str| {
        Client::builder()
            .elicitation(AnsweredByTheTest)
            .build(HttpTransport::new(url).unwrap())
    };
    let (first, second) = (client(&url_a), client(&url_b));
    let options = CallOptions::default();

    let round = bounded(first.call_tool_once("transfer", Some(json!({"cents": 500})), &options))
        .await
        .unwrap();
    let Round::InputRequired(pending) = round else {
        panic!("the first leg did not ask: {round:?}");
    };
    let key = pending.input_requests.keys().next().unwrap().clone();
    let answers: InputResponses =
        serde_json::from_value(json!({ key: {"action": "accept", "content": {"confirm": true}} }))
            .unwrap();

    // The same final leg on both replicas at once: one runs it, the other
    // serves its stored outcome.
    let (on_b, on_a) = bounded(async {
        tokio::join!(
            second.resume_tool(&pending, &answers, &options),
            first.resume_tool(&pending, &answers, &options)
        )
    })
    .await;
    let (Round::Complete(on_b), Round::Complete(on_a)) = (on_b.unwrap(), on_a.unwrap()) else {
        panic!("the final leg did not complete on both");
    };
    assert!(
        text(&on_b).starts_with("Transferred 500 cents"),
        "{}",
        text(&on_b)
    );
    assert_eq!(text(&on_a), text(&on_b), "the duplicate ran the leg again");

    first.close().await;
    second.close().await;
    for child in [&mut a, &mut b] {
        let pid = child.id().unwrap().to_string();
        std::process::Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .unwrap();
        let exit = bounded(child.wait()).await.unwrap();
        assert!(exit.success(), "{exit:?}");
    }
    let _ = std::fs::remove_file(&keys);
}
