//! The `tern` binary over stdio, driven by JSON lines.

use std::process::Stdio;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

struct Tern {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
}

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}})
}

impl Tern {
    fn start(extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["serve", "demo", "--stdio"])
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Self {
            child,
            stdin,
            stdout,
        }
    }

    async fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    async fn recv(&mut self) -> Value {
        serde_json::from_str(
            &self
                .stdout
                .next_line()
                .await
                .unwrap()
                .expect("tern answers"),
        )
        .unwrap()
    }

    /// Closes stdin; returns what tern still writes and its exit status.
    async fn finish(mut self) -> (Vec<Value>, std::process::ExitStatus) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Some(line) = self.stdout.next_line().await.unwrap() {
            rest.push(serde_json::from_str(&line).unwrap());
        }
        (rest, self.child.wait().await.unwrap())
    }
}

#[tokio::test]
async fn the_demo_over_stdio_runs_a_whole_mrtr_call() {
    let mut t = Tern::start(&[]);
    t.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta()}})).await;
    let d = t.recv().await;
    assert_eq!(d["result"]["supportedVersions"], json!(["2026-07-28"]));
    t.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "provision_database", "arguments": {"name": "orders"}, "_meta": meta()}})).await;
    let r1 = t.recv().await;
    assert_eq!(r1["result"]["resultType"], "input_required");
    t.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "provision_database", "arguments": {"name": "orders"}, "requestState": r1["result"]["requestState"],
        "inputResponses": {"region": {"action": "accept", "content": {"region": "ap-south-1"}}}, "_meta": meta()}}))
    .await;
    let r2 = t.recv().await;
    assert_eq!(r2["id"], 3);
    assert_eq!(
        r2["result"]["content"][0]["text"],
        "Created database orders in ap-south-1."
    );
    t.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "ping", "params": {"_meta": meta()}}))
        .await;
    assert_eq!(t.recv().await["error"]["code"], -32601);
    let (rest, status) = t.finish().await;
    assert!(rest.is_empty());
    assert!(status.success(), "end of input ends the server cleanly");
}

#[tokio::test]
async fn cancellation_mid_progress_and_end_of_input() {
    let mut t = Tern::start(&[]);
    let args = json!({"service": "web"});
    t.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "deploy", "arguments": args, "_meta": meta()}})).await;
    let r1 = t.recv().await;
    t.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "deploy", "arguments": args,
        "requestState": r1["result"]["requestState"], "inputResponses": {"region": {"action": "accept", "content": {"region": "eu-west-1"}}}, "_meta": meta()}}))
    .await;
    let r2 = t.recv().await;
    let mut m = meta();
    m["progressToken"] = json!("deploy-1");
    t.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "deploy", "arguments": args,
        "requestState": r2["result"]["requestState"], "inputResponses": {"plan": {"action": "accept", "content": {"proceed": true}}}, "_meta": m}}))
    .await;
    let progress = t.recv().await;
    assert_eq!(progress["method"], "notifications/progress");
    assert_eq!(progress["params"]["progressToken"], "deploy-1");
    t.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "reason": "user"}})).await;
    // A request sent after the cancellation is still served.
    t.send(
        &json!({"jsonrpc": "2.0", "id": 5, "method": "tools/list", "params": {"_meta": meta()}}),
    )
    .await;
    let (rest, status) = t.finish().await;
    assert!(status.success());
    assert!(rest.iter().any(|m| m["id"] == 5), "{rest:?}");
    assert!(
        rest.iter().all(|m| m["id"] != 3),
        "nothing answers a cancelled request: {rest:?}"
    );
}

#[tokio::test]
async fn end_of_input_drains_a_running_request() {
    let mut t = Tern::start(&["--state-ttl", "30"]);
    t.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "provision_database", "arguments": {"name": "x"}, "_meta": meta()}})).await;
    let (rest, status) = t.finish().await;
    assert!(status.success());
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["result"]["resultType"], "input_required");
}

#[tokio::test]
async fn a_key_file_is_used_and_a_bad_one_refused() {
    let dir = std::env::temp_dir().join(format!("tern-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.keys");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["keys", "generate"])
        .output()
        .unwrap();
    assert!(output.status.success());
    std::fs::write(&good, &output.stdout).unwrap();
    let key_id = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .find(|l| !l.starts_with('#'))
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_owned();
    let mut t = Tern::start(&["--keys", good.to_str().unwrap()]);
    t.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "provision_database", "arguments": {"name": "x"}, "_meta": meta()}})).await;
    let r = t.recv().await;
    let state = r["result"]["requestState"].as_str().unwrap();
    assert!(
        state.starts_with(&format!("t1.{key_id}.")),
        "sealed with the file's key: {state}"
    );
    t.finish().await;
    let bad = dir.join("bad.keys");
    std::fs::write(&bad, "k1:not-base64\n").unwrap();
    let status = std::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["serve", "demo", "--stdio", "--keys", bad.to_str().unwrap()])
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `tern keys generate` writes a file for a fleet, so it keeps `t1` (every
/// release opens it) unless `--seal t2` asks for the faster version, which
/// the file then names and the demo then seals.
#[tokio::test]
async fn a_key_file_seals_t2_only_when_generated_so() {
    let dir = std::env::temp_dir().join(format!("tern-keys-t2-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let generate = |extra: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["keys", "generate"])
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success());
        String::from_utf8(output.stdout).unwrap()
    };
    assert!(!generate(&[]).contains("seal="), "the default is t1");
    assert!(!generate(&["--seal", "t1"]).contains("seal="));
    let text = generate(&["--seal", "t2"]);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("seal=t2"));
    let key_id = lines.next().unwrap().split(':').next().unwrap().to_owned();
    let file = dir.join("t2.keys");
    std::fs::write(&file, &text).unwrap();
    let mut t = Tern::start(&["--keys", file.to_str().unwrap()]);
    t.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "provision_database", "arguments": {"name": "x"}, "_meta": meta()}})).await;
    let r = t.recv().await;
    let state = r["result"]["requestState"].as_str().unwrap();
    assert!(state.starts_with(&format!("t2.{key_id}.")), "{state}");
    t.finish().await;
    // Without a key file the ring is the process's own: it seals `t2`.
    let mut t = Tern::start(&[]);
    t.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "provision_database", "arguments": {"name": "x"}, "_meta": meta()}})).await;
    let r = t.recv().await;
    let state = r["result"]["requestState"].as_str().unwrap();
    assert!(state.starts_with("t2.local-"), "{state}");
    t.finish().await;
    let refused = std::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["keys", "generate", "--seal", "t3"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    std::fs::remove_dir_all(&dir).unwrap();
}
