//! The `decode` example as a process: it accepts every official example and
//! rejects every negative fixture, with the documented exit codes.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::schema::{json_eq, spec_dir, typed_files};

/// The example binary, which `cargo test` builds beside the test binaries.
fn decoder() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().and_then(|deps| deps.parent()).unwrap();
    let path = dir
        .join("examples")
        .join(format!("decode{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: build it first: `cargo build -p tern-protocol --example decode` (scripts/test does)",
        path.display()
    );
    path
}

fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(decoder())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A usage error exits before reading: a broken pipe is then expected.
    let written = child.stdin.take().unwrap().write_all(stdin.as_bytes());
    if let Err(e) = written {
        assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe, "{e}");
    }
    let out = child.wait_with_output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn decoder_accepts_every_official_example() {
    for (type_name, path) in typed_files(&spec_dir().join("examples")) {
        let text = std::fs::read_to_string(&path).unwrap();
        let (status, stdout, stderr) = run(&["--type", &type_name], &text);
        assert_eq!(status, 0, "{}: {stderr}", path.display());
        let printed: serde_json::Value = serde_json::from_str(&stdout).unwrap();
        assert!(
            json_eq(&printed, &serde_json::from_str(&text).unwrap()),
            "{}",
            path.display()
        );
    }
}

#[test]
fn decoder_rejects_every_negative_fixture() {
    for (path, type_name, tasks, text, want) in crate::negative::cases() {
        let mut args = vec!["--type", type_name.as_str()];
        if tasks {
            args.push("--tasks");
        }
        let (status, stdout, stderr) = run(&args, &text);
        assert_eq!(status, 1, "{}: printed {stdout}", path.display());
        assert!(stdout.is_empty(), "{}", path.display());
        assert!(
            stderr.contains(&want),
            "{}: {stderr:?} does not say {want:?}",
            path.display()
        );
    }
}

#[test]
fn decoder_usage_errors() {
    assert_eq!(run(&[], "{}").0, 2);
    let (status, _, stderr) = run(&["--type", "NoSuchType"], "{}");
    assert_eq!(status, 2);
    assert!(stderr.contains("unknown schema type"));
    let (status, _, stderr) = run(&["--type", "JSONRPCMessage"], "{not json");
    assert_eq!(status, 1);
    assert!(stderr.contains("JSONRPCMessage"));
}
