//! `--park FILE` and `tern resume FILE`: a round parked by one `tern`
//! process and continued by another, over HTTP (one demo process) and over
//! stdio (each run starts its own demo child, sharing a key file); a
//! single-use tool resumed twice; a changed `requestState`; no secrets in
//! the file; a 2025 server refused.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

const REGION: &str = r#"region={"action":"accept","content":{"region":"eu-west-1"}}"#;

/// `tern args` without a terminal, without the era cache, with `env` added.
fn tern_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tern"));
    cmd.args(args)
        .env("TERN_ERA_CACHE", "off")
        .env_remove("TERN_HEADER_AUTHORIZATION")
        .stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn tern(args: &[&str]) -> Output {
    tern_env(args, &[])
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

/// A folder of its own for one test's files.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tern-park-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn text(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}

fn parked(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// `tern serve demo --http 127.0.0.1:0 EXTRA...`, killed on drop (also
/// the listen tests' server).
pub struct Demo {
    child: Child,
    /// Its MCP endpoint.
    pub url: String,
}

impl Demo {
    /// Starts it and waits (bounded) for the line that says where it serves.
    pub fn start(extra: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["serve", "demo", "--http", "127.0.0.1:0"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        // Bounded: the demo says where it serves within its first lines.
        let url = (0..20)
            .find_map(|_| {
                let line = lines.next()?.ok()?;
                line.split("serving the demo at ")
                    .nth(1)
                    .map(|u| u.trim().to_owned())
            })
            .expect("the demo says where it serves");
        Self { child, url }
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_round_parked_over_http_is_resumed_by_another_process() {
    let demo = Demo::start(&[]);
    let dir = folder("http");
    let file = dir.join("round.json");
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "provision_database",
        "name=orders",
        "--park",
        &text(&file),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "the result is not printed: nothing ran");
    assert!(stderr(&o).contains("tern resume"), "{}", stderr(&o));
    let round = parked(&file);
    assert_eq!(round["tern"], "pending-round/1");
    assert_eq!(round["server"]["url"], demo.url.as_str());
    assert_eq!(round["method"], "tools/call");
    assert_eq!(round["params"]["name"], "provision_database");
    assert_eq!(round["params"]["arguments"]["name"], "orders");
    assert_eq!(round["round"], 1);
    assert!(round["requestState"].is_string(), "{round}");
    assert!(round["inputRequests"]["region"].is_object(), "{round}");

    // An answer that does not fit the question in the file stops before
    // anything is sent; the round is still there to resume.
    let o = tern(&["resume", &text(&file), "--answer", "region=mars"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("not an option"), "{}", stderr(&o));

    let o = tern(&["resume", &text(&file), "--answer", REGION]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in eu-west-1.\n");

    // A prompt, parked to standard output, and a resource read.
    let o = tern(&[
        "prompt",
        "--url",
        &demo.url,
        "incident_report",
        "service=api",
        "--park",
        "-",
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let prompt = dir.join("prompt.json");
    std::fs::write(&prompt, &o.stdout).unwrap();
    assert_eq!(parked(&prompt)["method"], "prompts/get");
    let o = tern(&["resume", &text(&prompt), "--answer", "severity=major"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(stdout(&o).contains("api"), "{}", stdout(&o));

    let read = dir.join("read.json");
    let o = tern(&[
        "read",
        "--url",
        &demo.url,
        "demo://greeting",
        "--park",
        &text(&read),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let o = tern(&["resume", &text(&read), "--answer", "reader=Ada"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hello, Ada! You are reading demo://greeting.\n");
}

#[test]
fn a_call_that_becomes_a_task_parks_the_task_and_resume_answers_it_once() {
    let demo = Demo::start(&[]);
    let dir = folder("task");
    let file = dir.join("task.json");
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "import_dataset",
        "rows=4",
        "--park",
        &text(&file),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    assert_eq!(stdout(&o), "");
    let parked_task = parked(&file);
    assert_eq!(parked_task["tern"], "pending-task/1");
    assert_eq!(parked_task["tool"], "import_dataset");
    assert!(
        parked_task["inputRequests"]["on_error"].is_object(),
        "{parked_task}"
    );
    let id = parked_task["task"].as_str().unwrap().to_owned();
    // Parked, not cancelled: the task waits for its answer.
    let got = tern(&["task", "get", &id, "--url", &demo.url, "--json"]);
    assert_eq!(code(&got), 0, "{}", stderr(&got));
    let task: Value = serde_json::from_str(&stdout(&got)).unwrap();
    assert_eq!(task["status"], "input_required", "{task}");

    // An answer that does not fit stops before anything is sent.
    let o = tern(&["resume", &text(&file), "--answer", "on_error=maybe"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let got = tern(&["task", "get", &id, "--url", &demo.url, "--json"]);
    let task: Value = serde_json::from_str(&stdout(&got)).unwrap();
    assert_eq!(task["status"], "input_required", "{task}");

    // Resumed from another process; twice, one import.
    for _ in 0..2 {
        let o = tern(&["resume", &text(&file), "--answer", "on_error=skip"]);
        assert_eq!(code(&o), 0, "{}", stderr(&o));
        assert_eq!(stdout(&o), "Imported 2 rows (skipped 2).\n");
    }
}

#[test]
fn a_resumed_round_that_asks_again_parks_again() {
    let demo = Demo::start(&[]);
    let dir = folder("again");
    let (first, second) = (dir.join("1.json"), dir.join("2.json"));
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "deploy",
        "service=api",
        "--park",
        &text(&first),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let o = tern(&[
        "resume",
        &text(&first),
        "--answer",
        "region=eu-west-1",
        "--park",
        &text(&second),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let round = parked(&second);
    assert_eq!(round["round"], 2);
    assert!(round["inputRequests"]["plan"].is_object(), "{round}");
    let o = tern(&["resume", &text(&second), "--answer", "plan=true"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Deployed api to eu-west-1.\n");
}

#[test]
fn a_round_parked_over_stdio_is_resumed_by_another_process() {
    let dir = folder("stdio");
    // Each run starts its own demo child: they share a key, so the second
    // opens the state the first sealed.
    let keys = dir.join("keys.txt");
    let o = tern(&["keys", "generate"]);
    std::fs::write(&keys, &o.stdout).unwrap();
    let file = dir.join("round.json");
    let server = [
        "--",
        env!("CARGO_BIN_EXE_tern"),
        "serve",
        "demo",
        "--stdio",
        "--keys",
        keys.to_str().unwrap(),
    ];
    let mut args = vec![
        "call",
        "provision_database",
        "name=orders",
        "--park",
        file.to_str().unwrap(),
    ];
    args.extend(server);
    let o = tern(&args);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let round = parked(&file);
    assert_eq!(round["server"]["command"][1], "serve");
    let o = tern(&["resume", &text(&file), "--answer", REGION]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in eu-west-1.\n");
}

#[test]
fn a_single_use_round_resumed_twice_has_one_effect() {
    let demo = Demo::start(&[]);
    let dir = folder("once");
    let file = dir.join("transfer.json");
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "transfer_funds",
        "to=bob",
        "amount=500",
        "--park",
        &text(&file),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let o = tern(&["resume", &text(&file), "--answer", "confirm=true"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Transferred 5.00 to bob (transfer #1).\n");
    // The same file again: the server answers the duplicate with the
    // outcome it stored, and does not run the transfer again.
    let o = tern(&["resume", &text(&file), "--answer", "confirm=true"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Transferred 5.00 to bob (transfer #1).\n");
    // One effect: the next transfer of this server is its second.
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "transfer_funds",
        "to=eve",
        "amount=100",
        "--answer",
        "confirm=true",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Transferred 1.00 to eve (transfer #2).\n");
}

#[test]
fn a_changed_request_state_is_refused_by_the_server() {
    let demo = Demo::start(&[]);
    let dir = folder("tampered");
    let file = dir.join("round.json");
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "transfer_funds",
        "to=bob",
        "amount=500",
        "--park",
        &text(&file),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let mut round = parked(&file);
    let state = round["requestState"].as_str().unwrap().to_owned();
    let mid = state.len() / 2;
    let flipped = if &state[mid..=mid] == "A" { "B" } else { "A" };
    round["requestState"] = format!("{}{flipped}{}", &state[..mid], &state[mid + 1..]).into();
    std::fs::write(&file, round.to_string()).unwrap();
    let o = tern(&["resume", &text(&file), "--answer", "confirm=true"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("requestState"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
}

#[test]
fn a_parked_round_names_its_bearer_header_and_keeps_no_secret() {
    let dir = folder("secret");
    let token = "tok-8c1f0e2d9b7a";
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{token} alice\n")).unwrap();
    let demo = Demo::start(&["--tokens", tokens.to_str().unwrap()]);
    let file = dir.join("round.json");
    let header = format!("Authorization: Bearer {token}");
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "--header",
        &header,
        "provision_database",
        "name=orders",
        "--park",
        &text(&file),
    ]);
    assert_eq!(code(&o), 6, "{}", stderr(&o));
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(
        !written.contains(token),
        "the token is not stored: {written}"
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the file is its owner's only");
    assert_eq!(
        parked(&file)["server"]["headers"],
        serde_json::json!(["Authorization"])
    );

    // Without its value the resume stops before connecting, naming how to
    // give it.
    let o = tern(&["resume", &text(&file), "--answer", REGION]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("TERN_HEADER_AUTHORIZATION"),
        "{}",
        stderr(&o)
    );
    // From the environment.
    let bearer = format!("Bearer {token}");
    let o = tern_env(
        &["resume", &text(&file), "--answer", REGION],
        &[("TERN_HEADER_AUTHORIZATION", &bearer)],
    );
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in eu-west-1.\n");
}

#[test]
fn a_2025_server_is_refused_a_park_with_the_reason() {
    let dir = folder("legacy");
    let file = dir.join("round.json");
    let server = format!(
        "{}/../tern-client/tests/it/peers/legacy_stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    );
    let o = tern(&[
        "call",
        "provision_database",
        "name=orders",
        "--park",
        &text(&file),
        "--",
        "python3",
        &server,
    ]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("a live session cannot be parked"),
        "{}",
        stderr(&o)
    );
    assert!(!file.exists(), "nothing is parked");
    assert!(
        stdout(&o).is_empty(),
        "the tool did not run: {}",
        stdout(&o)
    );
}

#[test]
fn a_file_that_is_not_a_parked_round_is_refused() {
    let dir = folder("format");
    let file = dir.join("other.json");
    std::fs::write(&file, r#"{"tern": "pending-round/9", "round": 1}"#).unwrap();
    let o = tern(&["resume", &text(&file)]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("pending-round/1"), "{}", stderr(&o));
}
