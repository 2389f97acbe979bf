//! This test binary as a second process. The parent re-runs it as
//! `--exact child::entry` with a role in the environment: a stdio server (the
//! fixture, or the stub), recording what it receives and sends, or a second
//! client resuming a serialised round. Without a role, `entry` does nothing.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tern_client::transport::http::HttpTransport;
use tern_client::{CallOptions, Client, Completed, PendingRound, Round};
use tern_server::transport::stdio::{StdioOptions, serve};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::handlers::Elicit;
use crate::harness::text;
use crate::{server, stub};

/// The environment variable naming the role.
pub const ROLE: &str = "TERN_CLIENT_IT_ROLE";
/// Where a server child records the messages (`>` in, `<` out).
pub const RECORD: &str = "TERN_CLIENT_IT_RECORD";
/// The server a resuming child calls.
pub const URL: &str = "TERN_CLIENT_IT_URL";
/// The serialised `PendingRound` a resuming child resumes.
pub const ROUND: &str = "TERN_CLIENT_IT_ROUND";
/// What the resuming child prints before the result's text.
pub const RESULT_MARK: &str = "TERN-CLIENT-IT-RESULT ";

#[test]
fn entry() {
    let Ok(role) = std::env::var(ROLE) else {
        return; // an ordinary test run
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let record = std::env::var(RECORD).map(PathBuf::from);
    match role.as_str() {
        "server" => runtime.block_on(serve_recorded(record.unwrap(), false)),
        "stub" => runtime.block_on(serve_recorded(record.unwrap(), true)),
        "resume" => runtime.block_on(resume()),
        other => panic!("unknown role {other}"),
    }
    runtime.shutdown_timeout(Duration::from_secs(1));
}

fn append(file: &Mutex<std::fs::File>, mark: char, line: &str) {
    let mut file = file.lock().unwrap();
    file.write_all(format!("{mark}{line}\n").as_bytes())
        .unwrap();
}

/// Serves on stdio, copying every line in and out to `record` first.
async fn serve_recorded(record: PathBuf, stub: bool) {
    let file = Arc::new(Mutex::new(
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(record)
            .unwrap(),
    ));
    let (mut to_server, server_in) = tokio::io::duplex(1 << 20);
    let (server_out, from_server) = tokio::io::duplex(1 << 20);
    let input_file = Arc::clone(&file);
    let input = tokio::spawn(async move {
        let mut lines = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            append(&input_file, '>', &line);
            let line = format!("{line}\n");
            if to_server.write_all(line.as_bytes()).await.is_err() {
                break;
            }
        }
        // Dropping `to_server` is the end of input for the server.
    });
    let output = tokio::spawn(async move {
        let mut lines = BufReader::new(from_server).lines();
        let mut stdout = tokio::io::stdout();
        while let Ok(Some(line)) = lines.next_line().await {
            append(&file, '<', &line);
            let line = format!("{line}\n");
            if stdout.write_all(line.as_bytes()).await.is_err() || stdout.flush().await.is_err() {
                break;
            }
        }
    });
    if stub {
        serve_stub(server_in, server_out).await;
    } else {
        let options = StdioOptions {
            drain_timeout: Duration::from_secs(1),
            ..StdioOptions::default()
        };
        serve(server::build(), server_in, server_out, options)
            .await
            .unwrap();
    }
    let _ = output.await;
    input.abort();
}

async fn serve_stub(input: tokio::io::DuplexStream, mut output: tokio::io::DuplexStream) {
    let mut lines = BufReader::new(input).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let message = serde_json::from_str(&line).unwrap();
        if let Some(reply) = stub::reply(&message) {
            let reply = format!("{reply}\n");
            output.write_all(reply.as_bytes()).await.unwrap();
        }
    }
}

/// A second client, in this second process, resumes the round the parent
/// parked (of whichever method), answering with its own handler.
async fn resume() {
    let url = std::env::var(URL).unwrap();
    let pending: PendingRound = serde_json::from_str(&std::env::var(ROUND).unwrap()).unwrap();
    let client = Client::builder()
        .elicitation(Elicit::fill(&[("name", "second process")]))
        .build(HttpTransport::new(&url).unwrap());
    let options = CallOptions::default();
    let answers = client.answer(&pending, &options).await.unwrap();
    let result = match client.resume(&pending, &answers, &options).await.unwrap() {
        Round::Complete(Completed::Tool(r)) => text(&r),
        Round::Complete(Completed::Prompt(r)) => text(&r),
        Round::Complete(Completed::Resource(r)) => text(&r),
        other => panic!("the resumed round did not complete: {other:?}"),
    };
    #[allow(clippy::print_stdout, reason = "the parent reads the result here")]
    {
        println!("{RESULT_MARK}{result}");
    }
}
