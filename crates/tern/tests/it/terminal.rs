//! The interactive command in a real terminal: `tern call --demo ...` runs in
//! a tmux session, the test reads the screen, presses keys and reads the
//! result: arrow-key selection, the summary, Esc, Ctrl-C at a question and
//! in flight, a server that dies while a question is on screen, and the
//! line prompts (`TERN_PROMPTS=lines`). tmux must be installed (CI:
//! `apt-get install -y tmux`).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long to wait for something to appear on the screen.
const PATIENCE: Duration = Duration::from_secs(10);

/// A tmux server of its own (`-L`), killed when dropped (the login test
/// drives `tern login` with it too).
pub(crate) struct Tmux {
    socket: String,
}

impl Tmux {
    /// Runs `shell` (a `sh -c` line) in a new detached session.
    pub(crate) fn start(name: &str, shell: &str) -> Self {
        match Command::new("tmux").arg("-V").output() {
            Ok(o) if o.status.success() => {}
            Ok(o) => panic!(
                "`tmux -V` failed ({}); the terminal tests need a working tmux",
                o.status
            ),
            Err(e) => panic!(
                "tmux is not installed ({e}): the terminal tests drive `tern` in tmux. Install it (apt-get install -y tmux); CI must install it too."
            ),
        }
        let me = Self {
            socket: format!("tern-test-{}-{name}", std::process::id()),
        };
        let o = me.tmux(&[
            "new-session",
            "-d",
            "-s",
            "t",
            "-x",
            "120",
            "-y",
            "50",
            shell,
        ]);
        assert!(
            o.status.success(),
            "tmux new-session failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        me
    }

    pub(crate) fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .unwrap()
    }

    /// The screen and its history, wrapped lines joined.
    pub(crate) fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .tmux(&["capture-pane", "-p", "-J", "-t", "t", "-S", "-500"])
                .stdout,
        )
        .into_owned()
    }

    /// Polls the screen until it shows `needle` (at most [`PATIENCE`]).
    pub(crate) fn wait_for(&self, needle: &str) -> String {
        let start = Instant::now();
        loop {
            let screen = self.screen();
            if screen.contains(needle) {
                return screen;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "{needle:?} did not appear within {PATIENCE:?}; the screen:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Presses `keys` (tmux key names: `Down`, `Enter`, `Escape`, `C-c`).
    pub(crate) fn keys(&self, keys: &[&str]) {
        for k in keys {
            assert!(self.tmux(&["send-keys", "-t", "t", k]).status.success());
        }
    }

    /// Polls until `done` says yes (at most [`PATIENCE`]).
    pub(crate) fn until(&self, what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(
                start.elapsed() < PATIENCE,
                "{what} did not happen within {PATIENCE:?}; the screen:\n{}",
                self.screen()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Types `text` and Enter.
    pub(crate) fn type_line(&self, text: &str) {
        assert!(
            self.tmux(&["send-keys", "-t", "t", "-l", text])
                .status
                .success()
        );
        assert!(
            self.tmux(&["send-keys", "-t", "t", "Enter"])
                .status
                .success()
        );
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.tmux(&["kill-server"]);
    }
}

/// `tern ARGS; echo EXIT=$?`, kept on screen afterwards.
pub(crate) fn shell(args: &str) -> String {
    format!(
        "'{}' {args}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_tern")
    )
}

/// A scratch folder of this test process.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tern-term-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn the_readme_command_chooses_with_the_arrow_keys_and_sends_after_the_summary() {
    let t = Tmux::start(
        "select",
        &shell("call --demo provision_database name=orders"),
    );
    let screen = t.wait_for("> 1) Ireland (eu-west-1)");
    // Who asks, the question, one hint, the titled options.
    assert!(
        screen.contains(
            "-- the demo server asks, for provision_database; it calls itself \"tern demo\" (tern-demo 0.1.0) --"
        ),
        "{screen}"
    );
    assert!(
        screen.contains("Which region should orders live in?"),
        "{screen}"
    );
    assert!(screen.contains("Arrow keys choose"), "{screen}");
    assert!(screen.contains("  2) Virginia (us-east-1)"), "{screen}");
    t.keys(&["Down"]);
    let screen = t.wait_for("> 2) Virginia (us-east-1)");
    assert!(!screen.contains("^[[B"), "arrow keys are keys: {screen}");
    t.keys(&["Enter"]);
    let screen = t.wait_for("> Send these answers");
    assert!(
        screen.contains("Your answers: region: region = us-east-1"),
        "{screen}"
    );
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("Created database orders in us-east-1."),
        "{screen}"
    );
    assert_eq!(
        screen.matches("Sending your answers.").count(),
        1,
        "{screen}"
    );
    assert!(screen.contains("EXIT=0"), "{screen}");
}

#[test]
fn the_summary_changes_one_answer_before_sending() {
    let t = Tmux::start(
        "change",
        &shell("call --demo provision_database name=orders"),
    );
    t.wait_for("> 1) Ireland (eu-west-1)");
    t.keys(&["Enter"]);
    t.wait_for("> Send these answers");
    t.keys(&["Down"]);
    t.wait_for("> Change region: region = eu-west-1");
    t.keys(&["Enter"]);
    // The question again, then the summary with the new answer.
    t.until("the question asked again", || {
        t.screen()
            .matches("Which region should orders live in?")
            .count()
            == 2
    });
    // A typed number filters to its option.
    t.keys(&["3"]);
    t.until("the filter keeping option 3 only", || {
        let screen = t.screen();
        let last = &screen[screen.rfind("Which region").unwrap_or(0)..];
        last.contains("> 3) Mumbai (ap-south-1)") && !last.contains("2) Virginia")
    });
    t.keys(&["Enter"]);
    t.wait_for("Your answers: region: region = ap-south-1");
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("Created database orders in ap-south-1."),
        "{screen}"
    );
    assert!(screen.contains("EXIT=0"), "{screen}");
}

#[test]
fn escape_twice_dismisses_the_question_and_exits_1() {
    let t = Tmux::start(
        "escape",
        &shell("call --demo provision_database name=orders"),
    );
    t.wait_for("> 1) Ireland (eu-west-1)");
    // One Esc asks; it dismisses nothing yet.
    t.keys(&["Escape"]);
    let screen = t.wait_for("Esc: leave the question?");
    assert!(screen.contains("> Back to the question"), "{screen}");
    assert!(!screen.contains("EXIT="), "{screen}");
    t.keys(&["Escape"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("Provisioning cancelled."), "{screen}");
    assert!(screen.contains("EXIT=1"), "{screen}");
}

#[test]
fn escape_keeps_the_answers_and_the_text_already_typed() {
    let t = Tmux::start("keep", &shell("call --demo book_table restaurant=Noma"));
    // The first question of the round, answered.
    t.wait_for("> 1) 4 people");
    t.keys(&["Enter"]);
    // The second: half typed, then Esc, then back to it.
    t.wait_for("What time should the table be booked for?");
    t.wait_for("? When (required)");
    assert!(
        t.tmux(&["send-keys", "-t", "t", "-l", "2026-12-24 19"])
            .status
            .success()
    );
    t.wait_for("2026-12-24 19");
    t.keys(&["Escape"]);
    t.wait_for("Esc: leave the question?");
    t.keys(&["Enter"]);
    // Asked again, with what was typed: the rest completes it.
    t.until("the question asked again", || {
        t.screen().matches("When (required)").count() >= 2
    });
    t.type_line(":30");
    let screen = t.wait_for("> Send these answers");
    assert!(
        screen.contains("party: size = 4"),
        "the first answer is kept: {screen}"
    );
    assert!(
        screen.contains("time: at = 2026-12-24T19:30:00Z"),
        "{screen}"
    );
    assert!(!screen.contains("Cancelled."), "{screen}");
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("Booked a table for 4 at Noma for 2026-12-24T19:30:00Z."),
        "{screen}"
    );
    assert!(screen.contains("EXIT=0"), "{screen}");
}

#[test]
fn a_yes_no_field_says_y_n() {
    let t = Tmux::start(
        "yesno",
        &shell("call --demo transfer_funds to=bob amount=100"),
    );
    let screen = t.wait_for("[y/n]");
    assert!(screen.contains("Confirm (required) [y/n]"), "{screen}");
    t.type_line("y");
    t.wait_for("> Send these answers");
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
}

#[test]
fn line_prompts_ask_again_after_a_wrong_choice_and_cancel_exits_1() {
    let t = Tmux::start(
        "lines",
        &format!(
            "TERN_PROMPTS=lines {}",
            shell("call --demo provision_database name=orders")
        ),
    );
    let screen = t.wait_for("Choose [1-3]: ");
    assert!(screen.contains("  2) Virginia (us-east-1)"), "{screen}");
    assert!(
        screen.contains(":decline") && screen.contains(":cancel"),
        "{screen}"
    );
    t.type_line("7");
    t.wait_for("choose a number from 1 to 3");
    t.type_line(":cancel");
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("Provisioning cancelled."), "{screen}");
    assert!(screen.contains("EXIT=1"), "{screen}");
}

#[test]
fn two_rounds_then_a_progress_bar() {
    let t = Tmux::start("deploy", &shell("call --demo deploy service=api"));
    t.wait_for("> 1) Ireland (eu-west-1)");
    t.keys(&["Enter"]);
    t.wait_for("> Send these answers");
    t.keys(&["Enter"]);
    t.wait_for("Go ahead");
    t.type_line("y");
    t.wait_for("plan: proceed = true");
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("round 2"), "{screen}");
    assert!(
        screen.contains("[####################] 100% done"),
        "{screen}"
    );
    assert!(screen.contains("Deployed api to eu-west-1."), "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
}

#[test]
fn ctrl_c_at_a_question_abandons_the_call_and_restores_the_terminal() {
    let t = Tmux::start(
        "ctrlc-question",
        &shell("call --demo provision_database name=orders"),
    );
    t.wait_for("> 1) Ireland (eu-west-1)");
    t.keys(&["C-c"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains(
            "tern: interrupted at the question region: abandoned the call, nothing was sent"
        ),
        "{screen}"
    );
    assert!(screen.contains("EXIT=130"), "{screen}");
    // The terminal is cooked again (raw mode off): what is typed now is
    // echoed by the terminal itself.
    t.type_line("typed-after-exit");
    t.wait_for("typed-after-exit");
}

#[test]
fn ctrl_c_in_flight_sends_notifications_cancelled() {
    let dir = scratch("ctrlc-flight");
    let log = dir.join("server-input.log");
    // A server that reads and records every line and never answers.
    let t = Tmux::start(
        "ctrlc-flight",
        &shell(&format!("tools -- sh -c 'cat > {}'", log.to_str().unwrap())),
    );
    t.wait_for("waiting for");
    // Its first request is the era probe (stdio › Backward Compatibility), in
    // flight like any other.
    t.until("the request reaching the server", || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("server/discover"))
    });
    t.keys(&["C-c"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("interrupted: cancelled tools/list in flight (told the server with notifications/cancelled)"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=130"), "{screen}");
    t.until("notifications/cancelled reaching the server", || {
        std::fs::read_to_string(&log)
            .is_ok_and(|l| l.contains("\"method\":\"notifications/cancelled\""))
    });
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_server_that_dies_while_a_question_is_on_screen_is_reported_at_once() {
    let dir = scratch("dies");
    let pid = dir.join("pid");
    let t = Tmux::start(
        "dies",
        &shell(&format!(
            "call provision_database name=orders -- sh -c 'echo $$ > {}; echo the demo is starting >&2; exec \"{}\" serve demo --stdio'",
            pid.to_str().unwrap(),
            env!("CARGO_BIN_EXE_tern")
        )),
    );
    t.wait_for("> 1) Ireland (eu-west-1)");
    let id = std::fs::read_to_string(&pid).unwrap();
    assert!(
        Command::new("kill")
            .args(["-KILL", id.trim()])
            .status()
            .unwrap()
            .success()
    );
    // Nothing typed: tern notices the death on its own.
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains(
            "went away while tern was asking you; nothing was sent. the server process exited (signal: 9 (SIGKILL))"
        ),
        "{screen}"
    );
    assert!(screen.contains("| the demo is starting"), "{screen}");
    assert!(
        !screen.contains("> 1) Ireland (eu-west-1)"),
        "the prompt is cleared: {screen}"
    );
    assert!(screen.contains("EXIT=4"), "{screen}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ctrl_c_at_a_line_prompt_is_the_signal_and_abandons_the_call() {
    let t = Tmux::start(
        "ctrlc-lines",
        &format!(
            "TERN_PROMPTS=lines {}",
            shell("call --demo provision_database name=orders")
        ),
    );
    t.wait_for("Choose [1-3]: ");
    t.keys(&["C-c"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains(
            "tern: interrupted at the question region: abandoned the call, nothing was sent"
        ),
        "{screen}"
    );
    assert!(screen.contains("EXIT=130"), "{screen}");
}

#[test]
fn ctrl_c_in_flight_over_http_closes_the_stream() {
    let fake = crate::fake::Fake::start(crate::fake::black_hole);
    let t = Tmux::start(
        "ctrlc-http",
        &shell(&format!("tools --url http://{}/mcp", fake.addr)),
    );
    t.wait_for("waiting for");
    t.keys(&["C-c"]);
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("interrupted: cancelled tools/list in flight (closed its HTTP stream)"),
        "{screen}"
    );
    assert!(screen.contains("EXIT=130"), "{screen}");
}

/// The closing transcript of issue 11: `import_dataset` runs as a task, its
/// question is asked like any other, `skip` is chosen with Enter, sent
/// after the summary, and the task's result printed.
#[test]
fn a_task_asks_its_question_and_ends_with_its_result() {
    let t = Tmux::start("task-import", &shell("call --demo import_dataset rows=20"));
    let screen = t.wait_for("> 1) Skip them and import the rest (skip)");
    assert!(
        screen.contains("tern: import_dataset runs as task "),
        "{screen}"
    );
    assert!(
        screen.contains("2 rows failed validation. Skip them, or abort the import?"),
        "{screen}"
    );
    t.keys(&["Enter"]);
    t.wait_for("> Send these answers");
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("Imported 18 rows (skipped 2)."), "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
}

/// Ctrl-C while a task runs offers to cancel it; answering no leaves it
/// running and prints its id, answering yes cancels it.
#[test]
fn ctrl_c_on_a_task_offers_to_cancel_it_or_leave_it_running() {
    for (answer, said) in [
        ("n", "is left running; `tern task wait "),
        ("y", "interrupted: asked the server to cancel task "),
    ] {
        let t = Tmux::start(
            &format!("task-ctrlc-{answer}"),
            &shell("call --demo import_dataset rows=400"),
        );
        t.wait_for("runs as task ");
        t.keys(&["C-c"]);
        t.wait_for("Cancel it? [y/N]");
        t.type_line(answer);
        let screen = t.wait_for("EXIT=");
        assert!(screen.contains(said), "{answer}: {screen}");
        assert!(screen.contains("EXIT=130"), "{screen}");
    }
}
