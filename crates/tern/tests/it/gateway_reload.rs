//! `tern gateway` reloads its servers file on SIGHUP: an entry added is
//! started and listed, one removed leaves the lists, a file that does not
//! load keeps the running servers.

use std::process::Stdio;
use std::time::Duration;

use serde_json::json;
use tokio::process::Command;

use crate::fleet::{Scratch, call, free_port, get};

const TIMEOUT: Duration = Duration::from_secs(20);

fn servers(name: &str) -> String {
    json!({"mcpServers": {name: {
        "command": env!("CARGO_BIN_EXE_tern"), "args": ["serve", "demo", "--stdio"],
    }}})
    .to_string()
}

async fn tools(base: &str) -> Vec<String> {
    let page = call(base, "reload", "tools/list", json!({}), TIMEOUT).await;
    page.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

/// Polls (bounded) until `accept` holds: the reload runs in the background.
async fn until<T>(what: &str, mut read: impl AsyncFnMut() -> T, accept: impl Fn(&T) -> bool) -> T {
    for _ in 0..400 {
        let value = read().await;
        if accept(&value) {
            return value;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("never happened: {what}");
}

async fn hangup(pid: u32) {
    let status = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .await
        .unwrap();
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_servers_file() {
    let dir = Scratch::new("gateway-reload");
    let config = dir.0.join("servers.json");
    std::fs::write(&config, servers("one")).unwrap();
    let log = dir.0.join("gateway.log");
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("gateway")
        .arg("--config")
        .arg(&config)
        .args(["--http", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let ready = format!("{base}/readyz");
    let _ready = until(
        "ready",
        async || get(&ready).await,
        |r| matches!(r, Ok((200, _))),
    )
    .await;
    let before = tools(&base).await;
    assert!(
        before.contains(&"one__transfer_funds".to_owned()),
        "{before:?}"
    );

    // `one` removed, `two` added.
    std::fs::write(&config, servers("two")).unwrap();
    hangup(pid).await;
    let after = until(
        "two listed",
        async || tools(&base).await,
        |t: &Vec<String>| t.contains(&"two__transfer_funds".to_owned()),
    )
    .await;
    assert!(after.iter().all(|t| !t.starts_with("one__")), "{after:?}");
    let asked = call(
        &base,
        "reload",
        "tools/call",
        json!({"name": "two__transfer_funds", "arguments": {"to": "ann", "amount": 5}}),
        TIMEOUT,
    )
    .await;
    assert_eq!(asked.result()["resultType"], "input_required");
    let gone = call(
        &base,
        "reload",
        "tools/call",
        json!({"name": "one__transfer_funds", "arguments": {"to": "ann", "amount": 5}}),
        TIMEOUT,
    )
    .await;
    assert_eq!(gone.kind(), "error -32602 (HTTP 200)", "{gone:?}");

    // A broken file: said, and the running servers kept.
    std::fs::write(&config, "{not json").unwrap();
    hangup(pid).await;
    until(
        "the broken file refused",
        async || std::fs::read_to_string(&log).unwrap_or_default(),
        |text: &String| text.contains("the running servers are kept"),
    )
    .await;
    let kept: Vec<String> = tools(&base).await;
    assert_eq!(kept, after);
    drop(child);
}

/// The processes whose parent is `pid` (from /proc).
fn children_of(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …: the name may hold spaces, so read after it.
        let parent = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if parent == Some(pid) {
            found.push(child);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_gateway_and_its_stdio_upstreams() {
    let dir = Scratch::new("gateway-term");
    let config = dir.0.join("servers.json");
    std::fs::write(&config, servers("one")).unwrap();
    let log = dir.0.join("gateway.log");
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("gateway")
        .arg("--config")
        .arg(&config)
        .args(["--http", &format!("127.0.0.1:{port}")])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let ready = format!("http://127.0.0.1:{port}/readyz");
    let _ready = until(
        "ready",
        async || get(&ready).await,
        |r| matches!(r, Ok((200, _))),
    )
    .await;
    let upstreams = children_of(pid);
    assert!(
        !upstreams.is_empty(),
        "the stdio upstream runs under the gateway"
    );
    let status = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await
        .unwrap();
    assert!(status.success());
    let exited = tokio::time::timeout(TIMEOUT, child.wait())
        .await
        .expect("the gateway exits on SIGTERM")
        .unwrap();
    assert!(
        exited.success(),
        "{exited}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    // Its upstreams were closed with it, not left running.
    until(
        "the upstreams gone",
        async || {
            upstreams
                .iter()
                .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
                .count()
        },
        |alive| *alive == 0,
    )
    .await;
}
