//! The `tern` binary run by a test: [`tern`] once, to its end (no era cache,
//! no input), with readers of its output; or started as a server (`tern serve demo --http …`,
//! `tern gateway --http …`) on a free loopback port: its URL read from what
//! it says on standard error, its standard error drained after that so it
//! never blocks on a full pipe, the process killed on drop.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command, Output, Stdio};

/// `tern args` run to its end, without input and without the era cache.
pub fn tern(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .env("TERN_ERA_CACHE", "off")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Its standard output, as text.
pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Its standard error, as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Its exit status (a signal is a failed test).
pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

/// A running `tern`, killed on drop.
pub struct Served(Child);

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `tern args` and waits until it says `marker` (`"serving the demo
/// at "`, `"serving the gateway at "`) followed by its URL; returns it, the
/// URL, and the lines it wrote before (for a transcript).
pub fn serve(args: &[&str], marker: &str) -> (Served, String, Vec<String>) {
    serve_with_env(args, &[], marker)
}

/// [`serve`] with `env` added to its environment.
pub fn serve_with_env(
    args: &[&str],
    env: &[(&str, &str)],
    marker: &str,
) -> (Served, String, Vec<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let served = Served(child);
    let mut said = Vec::new();
    let url = loop {
        let line = lines
            .next()
            .unwrap_or_else(|| {
                panic!(
                    "`tern {}` exited before saying where it serves: {said:?}",
                    args.join(" ")
                )
            })
            .unwrap();
        said.push(line.clone());
        if let Some(url) = line.split(marker).nth(1) {
            break url.trim().to_owned();
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    (served, url, said)
}

/// `tern serve demo --http 127.0.0.1:0` with `extra` flags, and its URL.
pub fn demo_over_http(extra: &[&str]) -> (Served, String) {
    let mut args = vec!["serve", "demo", "--http", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let (served, url, _) = serve(&args, "serving the demo at ");
    (served, url)
}
