//! Processes: pinning with `taskset`, spawning the servers, and reading CPU
//! time and memory from `/proc`.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use crate::servers::{Kind, Transport};

/// The core the servers run on.
pub(crate) const SERVER_CORE: usize = 0;
/// The core the load generator (this process) runs on.
pub(crate) const CLIENT_CORE: usize = 1;

/// Set in the environment of the re-executed, pinned process.
const PINNED: &str = "TERN_BENCH_PINNED";

/// Online CPUs of the machine (not of this process's affinity mask, which
/// pinning narrows to one).
pub(crate) fn cpus() -> usize {
    std::fs::read_to_string("/proc/cpuinfo")
        .map_or(0, |s| {
            s.lines().filter(|l| l.starts_with("processor")).count()
        })
        .max(1)
}

/// Whether the machine has the two cores the method needs.
pub(crate) fn can_pin() -> bool {
    cpus() >= 2
        && std::process::Command::new("taskset")
            .arg("-V")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// Re-executes this process under `taskset -c CLIENT_CORE` unless it already
/// is; returns only in the pinned process (or when pinning is impossible).
pub(crate) fn pin_self() -> std::io::Result<()> {
    use std::os::unix::process::CommandExt as _;
    if std::env::var_os(PINNED).is_some() || !can_pin() {
        return Ok(());
    }
    let exe = std::env::current_exe()?;
    let error = std::process::Command::new("taskset")
        .arg("-c")
        .arg(CLIENT_CORE.to_string())
        .arg(exe)
        .args(std::env::args_os().skip(1))
        .env(PINNED, "1")
        .exec();
    Err(error)
}

/// Clock ticks per second of `/proc/PID/stat` times.
pub(crate) fn clock_ticks() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100)
}

/// User + system CPU time of `pid`, in clock ticks.
pub(crate) fn cpu_ticks(pid: u32) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    field(14).unwrap_or(0) + field(15).unwrap_or(0)
}

/// Resident memory of `pid`: (current `VmRSS`, peak `VmHWM`), in KiB.
pub(crate) fn rss_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let read = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (read("VmRSS:"), read("VmHWM:"))
}

/// A server process, killed when dropped.
#[derive(Debug)]
pub(crate) struct Server {
    /// The child (stdin and stdout piped for stdio servers).
    pub(crate) child: Child,
    /// Its pid.
    pub(crate) pid: u32,
    /// The loopback port of an HTTP server.
    pub(crate) port: u16,
}

/// Starts `bench serve KIND TRANSPORT` with `env` added, pinned to
/// [`SERVER_CORE`] (with the children it starts).
pub(crate) async fn spawn(
    kind: Kind,
    transport: Transport,
    env: &[(&str, String)],
) -> std::io::Result<Server> {
    let exe = std::env::current_exe()?;
    let mut command = if can_pin() {
        let mut c = Command::new("taskset");
        c.arg("-c").arg(SERVER_CORE.to_string()).arg(exe);
        c
    } else {
        Command::new(exe)
    };
    command
        .arg("serve")
        .arg(kind.name())
        .arg(match transport {
            Transport::Http => "http",
            Transport::Stdio => "stdio",
        })
        .stdin(match transport {
            Transport::Http => Stdio::null(),
            Transport::Stdio => Stdio::piped(),
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        // Quiet servers: logging is not what is measured.
        .env("RUST_LOG", "off")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .kill_on_drop(true);
    let mut child = command.spawn()?;
    let pid = child.id().ok_or_else(|| std::io::Error::other("no pid"))?;
    let mut port = 0;
    if transport == Transport::Http {
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        let mut line = String::new();
        let mut reader = BufReader::new(stdout);
        tokio::time::timeout(Duration::from_secs(30), reader.read_line(&mut line))
            .await
            .map_err(|_| std::io::Error::other(format!("{} did not start", kind.name())))??;
        port = line
            .trim()
            .strip_prefix("port ")
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| std::io::Error::other(format!("unexpected first line {line:?}")))?;
        // Kept open: the server's standard output stays a live pipe.
        child.stdout = Some(reader.into_inner());
    }
    Ok(Server { child, pid, port })
}

impl Server {
    /// Stops the server and waits for it.
    pub(crate) async fn stop(mut self) {
        drop(self.child.start_kill());
        drop(tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await);
    }
}
