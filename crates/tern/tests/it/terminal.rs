//! The interactive command in a real terminal: `tern call --demo ...` runs in
//! a tmux session, the test reads the screen, types an answer and reads the
//! result. tmux must be installed (CI: `apt-get install -y tmux`).

use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// How long to wait for something to appear on the screen.
const PATIENCE: Duration = Duration::from_secs(10);

/// A tmux server of its own (`-L`), killed when dropped.
struct Tmux {
    socket: String,
}

impl Tmux {
    /// Runs `shell` (a `sh -c` line) in a new detached session.
    fn start(name: &str, shell: &str) -> Self {
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

    fn tmux(&self, args: &[&str]) -> Output {
        Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .env("TERM", "xterm-256color")
            .output()
            .unwrap()
    }

    /// The screen and its history, wrapped lines joined.
    fn screen(&self) -> String {
        String::from_utf8_lossy(
            &self
                .tmux(&["capture-pane", "-p", "-J", "-t", "t", "-S", "-500"])
                .stdout,
        )
        .into_owned()
    }

    /// Polls the screen until it shows `needle` (at most [`PATIENCE`]).
    fn wait_for(&self, needle: &str) -> String {
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

    /// Types `text` and Enter.
    fn type_line(&self, text: &str) {
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
fn shell(args: &str) -> String {
    format!(
        "'{}' {args}; echo EXIT=$?; sleep 60",
        env!("CARGO_BIN_EXE_tern")
    )
}

#[test]
fn the_readme_command_asks_a_select_in_the_terminal_and_prints_the_result() {
    let t = Tmux::start(
        "select",
        &shell("call --demo provision_database name=orders"),
    );
    let screen = t.wait_for("Region [1-3]: ");
    // Who asks, the question, how to decline or cancel, the titled options.
    assert!(
        screen.contains("-- tern demo (tern-demo 0.1.0) asks, for provision_database --"),
        "{screen}"
    );
    assert!(
        screen.contains("Which region should orders live in?"),
        "{screen}"
    );
    assert!(
        screen.contains(":decline") && screen.contains(":cancel"),
        "{screen}"
    );
    assert!(screen.contains("  2) Virginia (us-east-1)"), "{screen}");
    t.type_line("2");
    let screen = t.wait_for("EXIT=");
    assert!(
        screen.contains("Created database orders in us-east-1."),
        "{screen}"
    );
    assert!(screen.contains("EXIT=0"), "{screen}");
}

#[test]
fn a_wrong_choice_is_asked_again_and_cancel_exits_1() {
    let t = Tmux::start(
        "cancel",
        &shell("call --demo provision_database name=orders"),
    );
    t.wait_for("Region [1-3]: ");
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
    t.wait_for("Region [1-3]: ");
    t.type_line("1");
    t.wait_for("Go ahead");
    t.type_line("y");
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("round 2"), "{screen}");
    assert!(
        screen.contains("[####################] 100% done"),
        "{screen}"
    );
    assert!(screen.contains("Deployed api to eu-west-1."), "{screen}");
    assert!(screen.contains("EXIT=0"), "{screen}");
}
