//! The client subcommands without a terminal (standard input is not a TTY,
//! so tern never prompts): preset answers, `--no-input`, `--json`, exit
//! codes, and each way of naming the server.

use std::process::{Command, Stdio};

use crate::served::{code, stderr, stdout, tern};
use serde_json::{Value, json};

const REGION: &str = r#"region={"action":"accept","content":{"region":"eu-west-1"}}"#;

/// Runs `tern args` without a terminal and without the era cache (each
/// test sees a server afresh).

#[test]
fn a_preset_answer_creates_the_database_and_exits_0() {
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        REGION,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in eu-west-1.\n");
}

#[test]
fn the_declarative_twin_asks_the_same_question_and_gives_the_same_result() {
    let twin = tern(&["questions", "--demo", "provision_database", "name=orders"]);
    let asked = tern(&[
        "questions",
        "--demo",
        "provision_database_asked",
        "name=orders",
    ]);
    assert_eq!(code(&asked), 0, "{}", stderr(&asked));
    assert_eq!(stdout(&asked), stdout(&twin), "the same answers file");
    for tool in ["provision_database", "provision_database_asked"] {
        let o = tern(&["call", "--demo", tool, "name=orders", "--answer", REGION]);
        assert_eq!(code(&o), 0, "{tool}: {}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "Created database orders in eu-west-1.\n",
            "{tool}"
        );
    }
    // Over Streamable HTTP too, and a decline reaches the body as a value.
    let demo = super::park::Demo::start(&[]);
    for tool in ["provision_database", "provision_database_asked"] {
        let o = tern(&[
            "call",
            "--url",
            &demo.url,
            tool,
            "name=orders",
            "--answer",
            REGION,
        ]);
        assert_eq!(code(&o), 0, "{tool}: {}", stderr(&o));
        assert_eq!(
            stdout(&o),
            "Created database orders in eu-west-1.\n",
            "{tool}"
        );
        let o = tern(&[
            "call",
            "--url",
            &demo.url,
            tool,
            "name=orders",
            "--answer",
            r#"region={"action":"decline"}"#,
        ]);
        assert_eq!(
            stdout(&o),
            "Provisioning cancelled.\n",
            "{tool}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn no_input_on_a_tool_that_needs_elicitation_exits_5_with_a_clear_error() {
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--no-input",
    ]);
    assert_eq!(code(&o), 5);
    assert_eq!(stdout(&o), "");
    let err = stderr(&o);
    assert!(err.contains("-32021"), "{err}");
    assert!(err.contains("elicitation"), "{err}");
    assert!(err.contains("--answer KEY=VALUE"), "{err}");
}

#[test]
fn without_a_terminal_tern_behaves_as_no_input() {
    let o = tern(&["call", "--demo", "provision_database", "name=orders"]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    assert!(stderr(&o).contains("-32021"));
}

#[test]
fn a_question_without_a_preset_answer_names_its_key() {
    // Elicitation is declared (answers are preset), but `plan` has none.
    let o = tern(&[
        "call",
        "--demo",
        "deploy",
        "service=api",
        "--answer",
        REGION,
    ]);
    assert_eq!(code(&o), 5);
    assert!(stderr(&o).contains("--answer plan=VALUE"), "{}", stderr(&o));
}

#[test]
fn a_task_tool_without_a_terminal_exits_5_with_the_hint_a_plain_call_gets() {
    // import_dataset runs as a task; its question finds no elicitation
    // declared, so the task fails -32021 — the same exit and advice as
    // provision_database's plain call above.
    let o = tern(&["call", "--demo", "import_dataset", "rows=4"]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("failed: the server needs input"), "{err}");
    assert!(err.contains("-32021"), "{err}");
    assert!(err.contains("--answer KEY=VALUE"), "{err}");
}

#[test]
fn a_task_question_without_a_preset_names_its_key_and_cancels_the_task() {
    let demo = super::park::Demo::start(&[]);
    let o = tern(&[
        "call",
        "--url",
        &demo.url,
        "import_dataset",
        "rows=4",
        "--answer",
        "unrelated=x",
    ]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("--answer on_error=VALUE"), "{err}");
    let id = err
        .split("(task ")
        .nth(1)
        .and_then(|rest| rest.strip_suffix(" was cancelled)\n"))
        .unwrap_or_else(|| panic!("the task is said to be cancelled: {err}"));
    // Left waiting, the task would hold its answers' slot until it expires.
    let got = tern(&["task", "get", id, "--url", &demo.url, "--json"]);
    assert_eq!(code(&got), 0, "{}", stderr(&got));
    let task: Value = serde_json::from_str(&stdout(&got)).unwrap();
    assert_eq!(task["status"], "cancelled", "{task}");
}

#[test]
fn json_output_is_the_result() {
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        REGION,
        "--json",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["resultType"], "complete");
    assert_eq!(
        v["content"][0]["text"],
        "Created database orders in eu-west-1."
    );
    assert_eq!(
        v["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "tern-demo"
    );
}

#[test]
fn tools_lists_the_demo_tools() {
    let o = tern(&["tools", "--demo"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let text = stdout(&o);
    for tool in [
        "provision_database",
        "book_table",
        "transfer_funds",
        "deploy",
        "connect_account",
        "summarize",
        "workspace_files",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(tool)),
            "{tool} missing from:\n{text}"
        );
    }
    assert!(
        text.contains("    name*: string  Name of the database to create."),
        "{text}"
    );

    let o = tern(&["tools", "--demo", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let names: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 10);
    assert!(names.contains(&"import_dataset") && names.contains(&"nightly_report"));
    assert!(names.contains(&"provision_database_asked"));
    assert!(names.contains(&"provision_database"));
}

#[test]
fn discover_prompts_resources_prompt_and_read() {
    let o = tern(&["discover", "--demo"]);
    assert_eq!(code(&o), 0);
    assert!(stdout(&o).starts_with("tern-demo "), "{}", stdout(&o));
    assert!(stdout(&o).contains("protocol versions: 2026-07-28"));

    let o = tern(&["prompts", "--demo"]);
    assert!(stdout(&o).starts_with("incident_report"), "{}", stdout(&o));

    let o = tern(&["resources", "--demo", "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["resources"][0]["uri"], "demo://greeting");

    let o = tern(&[
        "prompt",
        "--demo",
        "incident_report",
        "service=api",
        "--answer",
        r#"severity={"action":"accept","content":{"severity":"major"}}"#,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("[user]\nWrite a Major incident report for api"),
        "{}",
        stdout(&o)
    );

    let o = tern(&[
        "read",
        "--demo",
        "demo://greeting",
        "--answer",
        r#"reader={"action":"accept","content":{"name":"Ada"}}"#,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hello, Ada! You are reading demo://greeting.\n");
}

#[test]
fn a_preset_decline_prints_the_fallback_and_exits_1() {
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        r#"region={"action":"decline"}"#,
    ]);
    assert_eq!(code(&o), 1);
    assert_eq!(stdout(&o), "Provisioning cancelled.\n");
    assert!(stderr(&o).contains("declined or cancelled"));
}

#[test]
fn answers_come_from_a_file() {
    let dir = std::env::temp_dir().join(format!("tern-answers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("answers.json");
    std::fs::write(
        &file,
        json!({
            "party": {"action": "accept", "content": {"size": "4"}},
            "time": {"action": "accept", "content": {"at": "2026-12-24T19:30:00Z"}}
        })
        .to_string(),
    )
    .unwrap();
    let o = tern(&[
        "call",
        "--demo",
        "book_table",
        "restaurant=Chez Ada",
        "--answers",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "Booked a table for 4 at Chez Ada for 2026-12-24T19:30:00Z.\n"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_sampler_command_writes_the_reply() {
    let o = tern(&[
        "call",
        "--demo",
        "summarize",
        "text=hello world",
        "--sampler",
        "tr a-z A-Z",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "Summary (tr a-z A-Z): SUMMARISE IN ONE SENTENCE:\n\nHELLO WORLD\n"
    );
}

#[test]
fn roots_are_the_given_folders_as_file_uris() {
    let dir = std::env::temp_dir().join(format!("tern roots {}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let o = tern(&[
        "call",
        "--demo",
        "workspace_files",
        "--root",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let expected = format!("tern%20roots%20{}", std::process::id());
    assert!(
        stdout(&o).contains("The client shares 1 folder(s)"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains(&expected), "{}", stdout(&o));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn usage_errors_exit_2() {
    assert_eq!(code(&tern(&["tools"])), 2, "no server named");
    assert_eq!(
        code(&tern(&[
            "tools",
            "--demo",
            "--url",
            "http://127.0.0.1:9/mcp"
        ])),
        2
    );
    assert_eq!(
        code(&tern(&["call", "--demo", "provision_database", "orders"])),
        2
    );
    assert_eq!(
        code(&tern(&[
            "call",
            "--demo",
            "provision_database",
            "--args",
            "[1]"
        ])),
        2
    );
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        "region",
    ]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("--answer expects KEY=VALUE"),
        "{}",
        stderr(&o)
    );
    assert_eq!(code(&tern(&["frobnicate"])), 2);
}

#[test]
fn help_documents_the_exit_codes() {
    let o = tern(&["call", "--help"]);
    assert_eq!(code(&o), 0);
    let text = stdout(&o);
    assert!(text.contains("Exit codes:"), "{text}");
    assert!(text.contains("-32021"), "{text}");
    assert!(text.contains("KEY=VALUE"), "{text}");
}

#[test]
fn transport_errors_exit_4() {
    let o = tern(&["tools", "--", "/nonexistent/server"]);
    assert_eq!(code(&o), 4);
    let o = tern(&["tools", "--url", "http://127.0.0.1:9/mcp"]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
}

#[test]
fn arguments_are_checked_against_the_schema_and_unknown_names_get_a_suggestion() {
    // Arguments failing the input schema stop before the call, in the
    // form's words (before: the server's isError after a round trip).
    let o = tern(&[
        "call",
        "--demo",
        "transfer_funds",
        "to=bob",
        "amount=0",
        "--no-input",
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("`amount`: at least 1, please"),
        "{}",
        stderr(&o)
    );
    let o = tern(&["call", "--demo", "transfer_funds", "amount=5", "--no-input"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("the required argument `to` (string) is missing: add to=VALUE"),
        "{}",
        stderr(&o)
    );
    // A wrong tool name: "did you mean" (before: a bare JSON-RPC error).
    let o = tern(&["call", "--demo", "provision_databse", "name=orders"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("no tool `provision_databse` (did you mean `provision_database`?)"),
        "{}",
        stderr(&o)
    );
    let o = tern(&["prompt", "--demo", "incident_reprot"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("(did you mean `incident_report`?)"),
        "{}",
        stderr(&o)
    );
    // `name=123` for a string argument is the string typed.
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=123",
        "--answer",
        "region=us-east-1",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database 123 in us-east-1.\n");
}

#[test]
fn a_child_named_after_the_double_dash_is_the_server() {
    let o = tern(&[
        "call",
        "provision_database",
        "name=orders",
        "--answer",
        REGION,
        "--",
        env!("CARGO_BIN_EXE_tern"),
        "serve",
        "demo",
        "--stdio",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in eu-west-1.\n");
}

#[test]
fn a_url_names_an_http_server() {
    let (served, url) = crate::served::demo_over_http(&[]);
    let o = tern(&[
        "call",
        "--url",
        &url,
        "provision_database",
        "name=orders",
        "--answer",
        REGION,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in eu-west-1.\n");
    drop(served);
}

#[test]
fn a_key_value_preset_answers_a_one_field_form() {
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        "region=us-east-1",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in us-east-1.\n");
    // KEY.FIELD=VALUE, typed by the schema (a boolean).
    let o = tern(&[
        "call",
        "--demo",
        "transfer_funds",
        "to=bob",
        "amount=250",
        "--answer",
        "confirm.confirm=yes",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("Transferred 2.50 to bob"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn a_preset_not_in_the_list_stops_at_once_naming_the_field_and_the_allowed_values() {
    // Before: re-sent round after round until "more than 10 rounds".
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        "region=mars",
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("nothing was sent"), "{err}");
    assert!(
        err.contains(
            "`region.region`: `mars` is not an option; allowed: eu-west-1, us-east-1, ap-south-1"
        ),
        "{err}"
    );
    assert!(!err.contains("rounds"), "{err}");
    // A misspelt field in a whole JSON answer: the client library's check,
    // then what the form has.
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        r#"region={"action":"accept","content":{"regoin":"eu-west-1"}}"#,
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("required field `region` is missing"), "{err}");
    assert!(
        err.contains("region (required): one of: eu-west-1, us-east-1, ap-south-1"),
        "{err}"
    );
}

#[test]
fn a_preset_key_never_asked_is_warned_about() {
    let o = tern(&[
        "call",
        "--demo",
        "provision_database",
        "name=orders",
        "--answer",
        "region=eu-west-1",
        "--answer",
        "regoin=eu-west-1",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "warning: the preset answer for `regoin` was not used: no question was asked under that key (did you mean `region`?) (asked: region)"
        ),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_question_asked_again_after_its_preset_stops_instead_of_looping() {
    let fake = crate::fake::Fake::start(crate::fake::asks_again);
    let url = format!("http://{}/mcp", fake.addr);
    let o = tern(&["call", "--url", &url, "ask", "--answer", "region=eu"]);
    assert_eq!(code(&o), 5, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("asked `region` again after tern sent its preset answer"),
        "{err}"
    );
    assert!(!err.contains("more than 10 rounds"), "{err}");
}

#[test]
fn questions_prints_an_answers_file_that_answers_them() {
    let o = tern(&["questions", "--demo", "book_table", "restaurant=Chez"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("book_table asks 2 questions in its first round"),
        "{err}"
    );
    assert!(err.contains("size (required): one of:"), "{err}");
    assert!(
        err.contains("at (required): string (date-time, RFC 3339)"),
        "{err}"
    );
    assert!(
        err.contains("Later rounds depend on these answers"),
        "{err}"
    );
    let file: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(file["time"]["action"], "accept");
    let dir = std::env::temp_dir().join(format!("tern-questions-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("answers.json");
    std::fs::write(&path, stdout(&o)).unwrap();
    let o = tern(&[
        "call",
        "--demo",
        "book_table",
        "restaurant=Chez",
        "--answers",
        path.to_str().unwrap(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with("Booked a table for"),
        "{}",
        stdout(&o)
    );
    // --json: the questions themselves.
    let o = tern(&[
        "questions",
        "--demo",
        "provision_database",
        "name=x",
        "--json",
    ]);
    let q: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(q["region"]["method"], "elicitation/create");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_server_that_fails_to_start_shows_its_exit_status_and_stderr() {
    // Before: only "the server process closed its output".
    let o = tern(&[
        "tools",
        "--",
        "sh",
        "-c",
        "echo 'config.toml: no such file' >&2; exit 3",
    ]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("the server process exited (exit status: 3)"),
        "{err}"
    );
    assert!(err.contains("| config.toml: no such file"), "{err}");
    // -v shows it as it comes; -e reaches the child's environment.
    let o = tern(&[
        "tools",
        "-v",
        "-e",
        "GREETING=hello",
        "--",
        "sh",
        "-c",
        "echo \"$GREETING from the server\" >&2; exit 1",
    ]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("server: hello from the server"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_server_that_dies_in_flight_fails_the_request_at_once() {
    let o = tern(&[
        "call",
        "x",
        "--",
        "sh",
        "-c",
        "read line; echo 'crashed on the request' >&2; exit 7",
    ]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(stderr(&o).contains("exit status: 7"), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("| crashed on the request"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_server_that_never_answers_times_out() {
    // A TCP black hole: accepts, reads, never answers (before: a hang).
    let fake = crate::fake::Fake::start(crate::fake::black_hole);
    let url = format!("http://{}/mcp", fake.addr);
    let o = tern(&["tools", "--url", &url, "--timeout", "0.5"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("did not answer tools/list within 0.5 s (--timeout SECONDS to wait longer)"),
        "{}",
        stderr(&o)
    );
    // A child that never answers.
    let o = tern(&["tools", "--timeout", "0.5", "--", "sleep", "30"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did not answer tools/list"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn url_mistakes_name_the_fix() {
    // No scheme: a usage error (before: exit 4).
    let o = tern(&["tools", "--url", "127.0.0.1:8080/mcp"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--url needs a scheme: http://127.0.0.1:8080/mcp"),
        "{}",
        stderr(&o)
    );
    // Nothing listening (before: "client error (Connect)").
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = free.local_addr().unwrap().to_string();
    drop(free);
    let o = tern(&["tools", "--url", &format!("http://{addr}/mcp")]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!(
            "nothing is listening at {addr} (connection refused)"
        )),
        "{}",
        stderr(&o)
    );
    // Without /mcp (before: "HTTP 404 Not Found:").
    let fake = crate::fake::Fake::start(crate::fake::asks_again);
    let o = tern(&["tools", "--url", &format!("http://{}", fake.addr)]);
    assert_eq!(code(&o), 4, "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("try http://{}/mcp", fake.addr)),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_mistyped_flag_gets_no_double_dash_tip() {
    let o = tern(&["tools", "--demo", "--verbsoe"]);
    assert_eq!(code(&o), 2);
    assert!(stderr(&o).contains("--verbsoe"), "{}", stderr(&o));
    assert!(!stderr(&o).contains("-- --verbsoe"), "{}", stderr(&o));
}

#[test]
fn completions_are_printed_for_each_shell() {
    for shell in ["bash", "zsh", "fish"] {
        let o = tern(&["completions", shell]);
        assert_eq!(code(&o), 0, "{shell}: {}", stderr(&o));
        assert!(stdout(&o).contains("questions"), "{shell}");
    }
    assert_eq!(code(&tern(&["completions", "tcsh"])), 2);
}

#[test]
fn servers_come_from_a_host_config_file_by_name() {
    let dir = std::env::temp_dir().join(format!("tern-config-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("claude_desktop_config.json");
    let config = json!({"mcpServers": {
        "demo": {"command": env!("CARGO_BIN_EXE_tern"), "args": ["serve", "demo", "--stdio"],
                 "env": {"API_TOKEN": "s3cret"}},
        "remote": {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer s3cret"}}
    }});
    std::fs::write(&path, config.to_string()).unwrap();
    let p = path.to_str().unwrap();
    let o = tern(&["servers", "--config", p]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("demo: ") && out.contains("serve demo --stdio  [API_TOKEN=***]"),
        "{out}"
    );
    assert!(
        out.contains("remote: http://127.0.0.1:9/mcp  [Authorization: ***]"),
        "{out}"
    );
    assert!(!out.contains("s3cret"), "{out}");
    let o = tern(&[
        "call",
        "--config",
        p,
        "--server",
        "demo",
        "provision_database",
        "name=orders",
        "--answer",
        "region=eu-west-1",
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created database orders in eu-west-1.\n");
    // VS Code's `servers`, and a name that is not there.
    std::fs::write(
        &path,
        json!({"servers": {"demo": config["mcpServers"]["demo"]}}).to_string(),
    )
    .unwrap();
    let o = tern(&["tools", "--config", p, "--server", "dmeo"]);
    assert_eq!(code(&o), 2);
    assert!(
        stderr(&o).contains("no server `dmeo` (did you mean `demo`?)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        code(&tern(&["tools", "--config", p, "--server", "demo"])),
        0
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `tern task get|wait|cancel ID`: over stdio each run starts a new server,
/// so with `--tasks sqlite:PATH` a task made by `tern call` is read by a
/// later run (`get`, `--json`, `wait`, `cancel` on an ended task); with the
/// demo's memory store the id is unknown, and tern says why.
#[cfg(feature = "sqlite")]
#[test]
fn tern_task_reads_a_durable_store_across_runs() {
    let dir = std::env::temp_dir().join(format!("tern-cli-tasks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = format!("sqlite:{}", dir.join("tasks.db").display());
    let exe = env!("CARGO_BIN_EXE_tern");
    let server = ["--", exe, "serve", "demo", "--stdio", "--tasks", &store];
    let with = |head: &[&str]| -> std::process::Output {
        let mut args: Vec<&str> = head.to_vec();
        args.extend_from_slice(&server);
        tern(&args)
    };
    let o = with(&["call", "nightly_report"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Nightly report ready.\n");
    let err = stderr(&o);
    let id = err
        .lines()
        .find_map(|l| l.strip_prefix("tern: task ")?.split(':').next())
        .unwrap_or_else(|| panic!("no task id in {err}"))
        .to_owned();

    let o = with(&["task", "get", &id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stdout(&o).starts_with(&format!("task {id}: completed")),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("Nightly report ready."),
        "{}",
        stdout(&o)
    );
    let o = with(&["task", "get", &id, "--json"]);
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["taskId"], json!(id));
    assert_eq!(v["status"], "completed");
    let o = with(&["task", "wait", &id]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Nightly report ready.\n");
    let o = with(&["task", "cancel", &id]);
    assert_eq!(
        code(&o),
        0,
        "cancel on an ended task is an empty ack: {}",
        stderr(&o)
    );

    let o = tern(&["task", "get", &id, "--demo"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("knows only the tasks of a durable store"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A 2025 stdio server written from the 2025 spec (no SDK): its
/// `provision_database` asks for a region with a live `elicitation/create`.
fn legacy_server() -> String {
    format!(
        "{}/../tern-client/tests/it/peers/legacy_stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn presets_answer_a_2025_servers_live_questions_in_order() {
    let server = legacy_server();
    let o = tern(&[
        "call",
        "provision_database",
        "name=orders",
        "--no-input",
        "--answer",
        "live-1=eu-north-1",
        "--",
        "python3",
        &server,
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "Created orders in eu-north-1\n");
    assert!(
        !stderr(&o).contains("was not used"),
        "the preset was used: {}",
        stderr(&o)
    );

    // A preset that does not fit is never sent as an answer: the server is
    // told no, and says so.
    let o = tern(&[
        "call",
        "provision_database",
        "name=orders",
        "--no-input",
        "--answer",
        r#"live-1={"action":"accept","content":{"region":5}}"#,
        "--",
        "python3",
        &server,
    ]);
    assert_eq!(stdout(&o), "Provisioning cancelled.\n", "{}", stderr(&o));
}

#[test]
fn the_era_a_server_spoke_is_remembered_so_the_next_run_does_not_probe() {
    let dir = std::env::temp_dir().join(format!("tern-eras-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("eras.json");
    let log = dir.join("methods.log");
    let server = legacy_server();
    let run = || {
        Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["call", "provision_database", "name=orders", "--no-input"])
            .args(["--answer", "live-1=eu-west-1", "--", "python3", &server])
            .arg("--log")
            .arg(&log)
            .env("TERN_ERA_CACHE", &cache)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let methods = || std::fs::read_to_string(&log).unwrap();

    let first = run();
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    assert!(
        methods().starts_with("server/discover\ninitialize\n"),
        "the first run probes: {}",
        methods()
    );
    let cached: Value = serde_json::from_slice(&std::fs::read(&cache).unwrap()).unwrap();
    let entries = cached.as_object().unwrap();
    assert_eq!(entries.len(), 1, "{cached}");
    let (key, entry) = entries.iter().next().unwrap();
    assert!(key.contains("legacy_stdio_server.py"), "{key}");
    assert_eq!(entry[0], "2025-06-18");

    std::fs::remove_file(&log).unwrap();
    let second = run();
    assert_eq!(code(&second), 0, "{}", stderr(&second));
    assert_eq!(stdout(&second), "Created orders in eu-west-1\n");
    assert!(
        methods().starts_with("initialize\n"),
        "the second run initializes at once: {}",
        methods()
    );

    // Turned off: the probe again, and nothing written.
    std::fs::remove_file(&log).unwrap();
    let off = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["call", "provision_database", "name=orders", "--no-input"])
        .args(["--answer", "live-1=eu-west-1", "--", "python3", &server])
        .arg("--log")
        .arg(&log)
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(code(&off), 0, "{}", stderr(&off));
    assert!(methods().starts_with("server/discover\n"), "{}", methods());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn questions_follow_a_demo_task_until_it_asks_then_cancel_it() {
    let o = tern(&["questions", "--demo", "import_dataset", "rows=20"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("import_dataset runs as a task"), "{err}");
    assert!(
        err.contains("2 rows failed validation. Skip them, or abort the import?"),
        "{err}"
    );
    let answers: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(answers.as_object().unwrap().len(), 1, "{answers}");
}

/// clap lets `--tokens`, `--issuer` and `--trusted-proxy` through beside
/// `--stdio` (it conflicts with the `--http` they require): both serving
/// commands refuse them there, before reading any file, rather than serve
/// unguarded while the user believes otherwise.
#[test]
fn an_http_guard_beside_stdio_is_refused_not_dropped() {
    let guards: [&[&str]; 3] = [
        &["--tokens", "no-such-file"],
        &["--issuer", "https://issuer.invalid"],
        &[
            "--trusted-proxy",
            "10.0.0.0/8",
            "--forwarded-header",
            "forwarded",
        ],
    ];
    for guard in guards {
        let flag = guard[0];
        let demo = tern(&[&["serve", "demo", "--stdio"], guard].concat());
        let gateway = tern(&[&["gateway", "--config", "no-such-file", "--stdio"], guard].concat());
        for (what, o) in [("serve demo", demo), ("gateway", gateway)] {
            assert_eq!(code(&o), 2, "tern {what} {flag}: {}", stderr(&o));
            assert!(
                stderr(&o).contains(&format!("{flag} guards HTTP only")),
                "tern {what} {flag}: {}",
                stderr(&o)
            );
        }
    }
}
