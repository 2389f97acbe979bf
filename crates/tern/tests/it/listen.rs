//! `tern listen`: one process follows `demo://ledger` over HTTP while
//! another transfers money; the listener prints the update (as text, and
//! as JSON lines) and stops cleanly on SIGINT.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::Value;

use super::park::Demo;

/// A running `tern listen`, its output lines arriving on channels; killed
/// on drop if still running.
struct Listener {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
}

fn lines_of(pipe: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

impl Listener {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
            .arg("listen")
            .args(args)
            .env("TERN_ERA_CACHE", "off")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = lines_of(child.stdout.take().unwrap());
        let err = lines_of(child.stderr.take().unwrap());
        Self { child, out, err }
    }

    /// The first standard error line containing `text`, waiting at most
    /// 20 s for it.
    fn wait_err(&self, text: &str) -> String {
        let mut seen = Vec::new();
        loop {
            match self.err.recv_timeout(Duration::from_secs(20)) {
                Ok(line) if line.contains(text) => return line,
                Ok(line) => seen.push(line),
                Err(e) => panic!("no line with {text:?} on standard error ({e}); saw {seen:?}"),
            }
        }
    }

    /// The next line on standard output, waiting at most 20 s.
    fn next_out(&self) -> String {
        self.out
            .recv_timeout(Duration::from_secs(20))
            .expect("tern listen prints a line")
    }

    /// SIGINT, then its exit status (bounded wait).
    fn interrupt(&mut self) -> std::process::ExitStatus {
        let status = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("tern listen did not stop within 10 s of SIGINT");
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn transfer(url: &str, to: &str) {
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["call", "--url", url, "transfer_funds"])
        .arg(format!("to={to}"))
        .args(["amount=100", "--answer", "confirm=true"])
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn listen_hears_a_resource_update_and_stops_on_sigint() {
    let demo = Demo::start(&[]);
    let mut listener = Listener::start(&["demo://ledger", "--url", &demo.url]);
    // Subscribed (the server acknowledged) before the change is made.
    let ack = listener.wait_err("listening to");
    assert!(ack.contains("demo://ledger"), "{ack}");
    transfer(&demo.url, "bob");
    assert_eq!(listener.next_out(), "resource updated: demo://ledger");
    transfer(&demo.url, "eve");
    assert_eq!(listener.next_out(), "resource updated: demo://ledger");
    let status = listener.interrupt();
    assert_eq!(
        status.code(),
        Some(0),
        "a listen ends with Ctrl-C: {status}"
    );
    listener.wait_err("stopped listening");
}

#[test]
fn listen_json_writes_one_notification_a_line() {
    let demo = Demo::start(&[]);
    let mut listener = Listener::start(&["--json", "demo://ledger", "--url", &demo.url]);
    listener.wait_err("listening to");
    transfer(&demo.url, "bob");
    let line = listener.next_out();
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["method"], "notifications/resources/updated", "{line}");
    assert_eq!(v["params"]["uri"], "demo://ledger", "{line}");
    assert_eq!(listener.interrupt().code(), Some(0));
}

#[test]
fn listen_needs_something_to_follow() {
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["listen", "--demo"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("<URI>"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn listen_task_follows_a_tasks_status_to_its_end() {
    let demo = Demo::start(&[]);
    // A long import, as a task (tern declares the Tasks extension); its
    // id is on the caller's standard error.
    let mut caller = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["call", "--url", &demo.url, "import_dataset", "rows=4000"])
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let caller_err = lines_of(caller.stderr.take().unwrap());
    let id = loop {
        let line = caller_err
            .recv_timeout(Duration::from_secs(20))
            .expect("the caller names its task");
        if let Some(rest) = line.strip_prefix("tern: task ") {
            break rest.split(':').next().unwrap().to_owned();
        }
    };
    let mut listener = Listener::start(&["--task", &id, "--url", &demo.url]);
    listener.wait_err("listening to");
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["task", "cancel", &id, "--url", &demo.url])
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Status lines until the end (bounded: at most 200 lines).
    let end = (0..200)
        .map(|_| listener.next_out())
        .find(|l| !l.contains(": working"))
        .expect("the task ends");
    assert!(end.starts_with(&format!("task {id}: cancelled")), "{end}");
    assert_eq!(listener.interrupt().code(), Some(0));
    let _ = caller.kill();
    let _ = caller.wait();
}

fn legacy_server() -> String {
    format!(
        "{}/../tern-client/tests/it/peers/legacy_stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

#[test]
fn listen_on_a_2025_server_subscribes_on_its_session_and_hears_updates() {
    let server = legacy_server();
    let mut listener = Listener::start(&[
        "file:///tmp/x",
        "mem://refused",
        "--task",
        "t1",
        "--",
        "python3",
        &server,
        "--resources",
    ]);
    let note = listener.wait_err("no status stream");
    assert!(note.contains("2025-06-18"), "{note}");
    let ack = listener.wait_err("listening to");
    assert!(ack.contains("file:///tmp/x"), "{ack}");
    assert!(
        !ack.contains("mem://refused"),
        "the refused URI is not claimed: {ack}"
    );
    assert_eq!(listener.next_out(), "resource updated: file:///tmp/x");
    assert_eq!(listener.next_out(), "resource updated: file:///tmp/x");
    assert_eq!(listener.interrupt().code(), Some(0));
}

#[test]
fn listen_on_a_2025_server_that_honours_nothing_ends_with_the_reason() {
    // No `resources.subscribe` declared: nothing can come, so tern does
    // not wait for it.
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["listen", "file:///tmp/x", "--", "python3", &legacy_server()])
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(
        err.contains("honours none of what was asked (file:///tmp/x)"),
        "{err}"
    );
}
