//! `bench`: tern side by side with rmcp and a raw-hyper floor, in one run.
//!
//! `bench run` starts each server under test as its own process (this binary,
//! `bench serve KIND TRANSPORT`) pinned to core 0 with `taskset`, pins itself
//! to core 1, and drives them with the same closed-loop load generator on
//! loopback: `echo`, a 1 KiB argument with a 4 KiB structured result, a
//! two-leg MRTR call, stdio, and memory (SSE streams, idle connections). It
//! prints one markdown table of medians over repetitions with their spread,
//! and folds in the `tern-seal` criterion figures when they are present.
//! `scripts/bench` runs everything.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

mod chart;
mod journal;
mod load;
mod memory;
mod procfs;
mod report;
mod servers;
mod stdio;
mod tasks;
mod workload;

use report::{Results, Sample};
use servers::{Kind, Transport};

#[derive(Debug, Parser)]
#[command(about = "tern vs rmcp vs a raw-hyper floor, in one run")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Runs the benchmarks and prints the table.
    Run(RunArgs),
    /// Serves one implementation (used by `run`, which starts each server as
    /// a child process).
    Serve {
        /// Which implementation.
        kind: Kind,
        /// Which transport.
        transport: Transport,
    },
    /// The overhead of a task, in process: a plain call against a task's
    /// create + first `tasks/get`, with the memory and the SQLite store.
    Tasks {
        /// Iterations of each (at most 100 000).
        #[arg(long, default_value_t = 2000)]
        n: u32,
    },
    /// What journaling costs a durable task's `ctx.once` step, in process:
    /// a step of a task that is not durable against one of a durable tool,
    /// with the memory, the SQLite and (with `--redis`) the Redis store.
    Journal {
        /// Tasks of each kind (20 steps each; at most 10 000).
        #[arg(long, default_value_t = 50)]
        tasks: u32,
        /// A Redis to measure too (`redis://127.0.0.1:6379`).
        #[arg(long, value_name = "URL")]
        redis: Option<String>,
    },
    /// Drives one scenario against a server already listening on a loopback
    /// port (for profiling a server by hand, e.g. under `perf record`).
    Load {
        /// The server's port on 127.0.0.1.
        port: u16,
        /// `echo`, `payload` or `mrtr`.
        scenario: String,
        /// The server's pid, for its CPU time (0: not read).
        #[arg(long, default_value_t = 0)]
        pid: u32,
        /// Measured seconds (at most 600).
        #[arg(long, default_value_t = 10.0)]
        secs: f64,
        /// Concurrent connections.
        #[arg(long, default_value_t = 16)]
        connections: usize,
    },
}

#[derive(Debug, Clone, clap::Args)]
#[allow(
    clippy::struct_excessive_bools,
    reason = "command-line switches, not a state machine"
)]
struct RunArgs {
    /// Measured seconds per server and repetition.
    #[arg(long, default_value_t = 5.0)]
    secs: f64,
    /// Warm-up seconds before each measurement.
    #[arg(long, default_value_t = 1.0)]
    warmup: f64,
    /// Repetitions (the servers alternate within each).
    #[arg(long, default_value_t = 3)]
    reps: usize,
    /// Concurrent keep-alive connections of the HTTP load.
    #[arg(long, default_value_t = 16)]
    connections: usize,
    /// Calls in flight over stdio.
    #[arg(long, default_value_t = 16)]
    window: usize,
    /// Concurrent SSE streams held for the memory figure.
    #[arg(long, default_value_t = 1000)]
    streams: usize,
    /// Idle keep-alive connections held for the memory figure.
    #[arg(long, default_value_t = 1000)]
    idle: usize,
    /// Calls of each kind per repetition of the in-process task figure.
    #[arg(long, default_value_t = 2000)]
    task_calls: u32,
    /// Only these parts (comma-separated): echo, payload, mrtr, stdio,
    /// memory, tasks.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Criterion's output folder, read for the `tern-seal` figures
    /// (default: `criterion` in the target folder of this binary).
    #[arg(long)]
    criterion: Option<PathBuf>,
    /// Also writes the table to this file.
    #[arg(long)]
    markdown: Option<PathBuf>,
    /// Also writes a chart of server CPU per call (SVG) to this file.
    #[arg(long)]
    chart: Option<PathBuf>,
    /// Exits with failure when a server or part could not be measured (the
    /// CI smoke: the harness and every server still run; no figure checked).
    #[arg(long)]
    strict: bool,
}

impl RunArgs {
    fn wants(&self, part: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|p| p == part)
    }

    fn settings(&self) -> load::Settings {
        load::Settings {
            connections: self.connections.max(1),
            warmup: Duration::from_secs_f64(self.warmup.max(0.0)),
            measure: Duration::from_secs_f64(self.secs.max(0.1)),
        }
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve { kind, transport } => servers::run(kind, transport),
        Command::Run(args) => procfs::pin_self().and_then(|()| run(&args)),
        Command::Tasks { n } => tasks::run(n).map_err(std::io::Error::other),
        Command::Journal { tasks, redis } => {
            journal::run(tasks, redis.as_deref()).map_err(std::io::Error::other)
        }
        Command::Load {
            port,
            scenario,
            pid,
            secs,
            connections,
        } => procfs::pin_self().and_then(|()| load_once(port, &scenario, pid, secs, connections)),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn load_once(
    port: u16,
    scenario: &str,
    pid: u32,
    secs: f64,
    connections: usize,
) -> std::io::Result<()> {
    let op = match scenario {
        "echo" => load::Op::echo(),
        "payload" => load::Op::payload(),
        "mrtr" => load::Op::mrtr(),
        other => return Err(std::io::Error::other(format!("no scenario {other}"))),
    };
    let settings = load::Settings {
        connections: connections.max(1),
        warmup: Duration::from_secs(1),
        measure: Duration::from_secs_f64(secs.clamp(0.1, 600.0)),
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(async {
        load::probe(port, &op)
            .await
            .map_err(std::io::Error::other)?;
        Ok::<_, std::io::Error>(load::run(port, pid, &op, settings).await)
    })?;
    let s = Sample::of(&outcome, procfs::clock_ticks());
    eprintln!(
        "{scenario}: {:.0} calls/s, p50 {:.1} µs, p99 {:.1} µs, server CPU {:.2} µs/call, {} errors",
        s.rate, s.p50_us, s.p99_us, s.cpu_us, s.errors
    );
    Ok(())
}

fn rotated<T: Copy>(items: &[T], by: usize) -> Vec<T> {
    let mut v = items.to_vec();
    if !v.is_empty() {
        let n = by % v.len();
        v.rotate_left(n);
    }
    v
}

fn run(args: &RunArgs) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let load_before = loadavg();
    let mut results = runtime.block_on(measure_all(args))?;
    if args.wants("tasks") {
        // In process, on this (the load generator's) core, after the servers.
        for rep in 0..args.reps {
            match tasks::figures(args.task_calls) {
                Ok(f) => {
                    eprintln!(
                        "rep {} tasks plain {:.1} µs, task + get (memory) {:.1} µs, (SQLite) {:.1} µs (p50)",
                        rep + 1,
                        f[0].0,
                        f[1].0,
                        f[2].0
                    );
                    results.tasks.push(f);
                }
                Err(e) => {
                    eprintln!("tasks: not measured: {e}");
                    results.failures.push(format!("tasks: {e}"));
                    break;
                }
            }
        }
    }
    let method = format!(
        "{} Machine load average (1 min) before the run: {load_before}, after: {}.",
        method(args),
        loadavg()
    );
    let text = results.markdown(&report::machine(), &method);
    #[allow(clippy::print_stdout, reason = "the table is this command's output")]
    {
        println!("{text}");
    }
    if let Some(path) = &args.markdown {
        std::fs::write(path, &text)?;
    }
    if let Some(path) = &args.chart {
        let subtitle = format!("{} CPUs, {}", procfs::cpus(), report::cpu_model());
        match chart::svg(&results, &subtitle) {
            Ok(Some(svg)) => std::fs::write(path, svg)?,
            Ok(None) => eprintln!("bench: no load figures, no chart"),
            Err(e) => eprintln!("bench: the chart was not drawn: {e}"),
        }
    }
    if args.strict && !results.failures.is_empty() {
        return Err(std::io::Error::other(format!(
            "not measured: {}",
            results.failures.join("; ")
        )));
    }
    Ok(())
}

/// The 1-minute load average: other work on the machine skews the figures.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_owned))
        .unwrap_or_else(|| "?".into())
}

fn method(args: &RunArgs) -> String {
    let pinned = if procfs::can_pin() {
        format!(
            "servers pinned to core {}, load generator to core {} (taskset)",
            procfs::SERVER_CORE,
            procfs::CLIENT_CORE
        )
    } else {
        "NOT pinned (fewer than 2 cores or no taskset): figures are not comparable".into()
    };
    format!(
        "Settings: {pinned}; HTTP/1.1 keep-alive, {} connections, closed loop; {} s warm-up + {} s measured per server, {} repetitions alternating the servers; stdio window {}; memory with {} SSE streams and {} idle connections.",
        args.connections, args.warmup, args.secs, args.reps, args.window, args.streams, args.idle
    )
}

async fn measure_all(args: &RunArgs) -> std::io::Result<Results> {
    let ticks = procfs::clock_ticks();
    let mut results = Results::default();
    measure_http(args, ticks, &mut results).await?;
    if args.wants("stdio") {
        measure_stdio(args, ticks, &mut results).await;
    }
    if args.wants("memory") {
        measure_memory(args, &mut results).await;
    }
    let dir = args.criterion.clone().or_else(|| {
        let exe = std::env::current_exe().ok()?;
        Some(exe.parent()?.parent()?.join("criterion"))
    });
    if let Some(dir) = dir {
        results.seal = report::criterion(&dir);
    }
    Ok(results)
}

/// Every HTTP server under test, in the tables' order (MRTR skips the
/// first two, which have no MRTR).
const ALL_HTTP: &[Kind] = &[
    Kind::Floor,
    Kind::HandRolled,
    Kind::Tern,
    Kind::TernDefault,
    Kind::TernAxum,
    Kind::Rmcp,
    Kind::Gateway,
    Kind::GatewayStdio,
];

/// A scenario of the HTTP load: its name, the call, the servers.
type Scenario = (&'static str, load::Op, &'static [Kind]);

async fn measure_http(args: &RunArgs, ticks: u64, results: &mut Results) -> std::io::Result<()> {
    let settings = args.settings();
    let all: [Scenario; 3] = [
        ("echo", load::Op::echo(), ALL_HTTP),
        ("payload", load::Op::payload(), ALL_HTTP),
        ("mrtr", load::Op::mrtr(), &ALL_HTTP[2..]),
    ];
    let scenarios: Vec<Scenario> = all.into_iter().filter(|s| args.wants(s.0)).collect();
    for s in &scenarios {
        results.scenario(s.0);
    }
    if !scenarios.is_empty() {
        let running = spawn_http().await?;
        // A server that answers a scenario wrongly is reported, not measured.
        let mut ok = Vec::new();
        for (name, op, kinds) in &scenarios {
            for kind in *kinds {
                let Some((_, server)) = running.iter().find(|(k, _)| k == kind) else {
                    continue;
                };
                match load::probe(server.port, op).await {
                    Ok(()) => ok.push((*name, *kind)),
                    Err(e) => {
                        let short: String = e.chars().take(300).collect();
                        eprintln!("{name} / {}: not measured: {short}", kind.name());
                        results
                            .failures
                            .push(format!("{name} / {}: {short}", kind.name()));
                    }
                }
            }
        }
        for rep in 0..args.reps {
            for (name, op, kinds) in &scenarios {
                let index = results.scenario(name);
                for kind in rotated(kinds, rep) {
                    if !ok.contains(&(*name, kind)) {
                        continue;
                    }
                    let Some((_, server)) = running.iter().find(|(k, _)| *k == kind) else {
                        continue;
                    };
                    let outcome = load::run(server.port, server.pid, op, settings).await;
                    let sample = Sample::of(&outcome, ticks);
                    eprintln!(
                        "rep {} {name:8} {:6} {:>9.0} calls/s  p50 {:>8.1} µs  p99 {:>8.1} µs  CPU {:>7.2} µs/call  client {:.2} cores",
                        rep + 1,
                        kind.name(),
                        sample.rate,
                        sample.p50_us,
                        sample.p99_us,
                        sample.cpu_us,
                        sample.client_cores
                    );
                    results.load.entry((index, kind)).or_default().push(sample);
                }
            }
        }
        for (_, server) in running {
            server.stop().await;
        }
    }
    Ok(())
}

/// Starts every HTTP server under test: the gateways last, in front of the
/// tern line's server (over HTTP, its port; or a stdio child of its own).
async fn spawn_http() -> std::io::Result<Vec<(Kind, procfs::Server)>> {
    let (gateways, direct): (Vec<Kind>, Vec<Kind>) = ALL_HTTP
        .iter()
        .copied()
        .partition(|kind| matches!(kind, Kind::Gateway | Kind::GatewayStdio));
    let mut running = Vec::new();
    for kind in direct {
        running.push((kind, procfs::spawn(kind, Transport::Http, &[]).await?));
    }
    // The gateways, in front of the tern line's server: over HTTP (its
    // port), and with a stdio child of its own.
    let tern_port = running
        .iter()
        .find(|(k, _)| *k == Kind::Tern)
        .map(|(_, s)| s.port.to_string())
        .unwrap_or_default();
    for kind in gateways {
        let env = [(servers::gateway::UPSTREAM, tern_port.clone())];
        running.push((kind, procfs::spawn(kind, Transport::Http, &env).await?));
    }
    Ok(running)
}

async fn measure_stdio(args: &RunArgs, ticks: u64, results: &mut Results) {
    let settings = args.settings();
    let index = results.scenario("stdio");
    let stdio_settings = stdio::Settings {
        window: args.window,
        warmup: settings.warmup,
        measure: settings.measure,
    };
    let mut failed = Vec::new();
    for rep in 0..args.reps {
        for kind in rotated(&[Kind::HandRolled, Kind::Tern, Kind::Rmcp], rep) {
            if failed.contains(&kind) {
                continue;
            }
            match stdio::run(kind, stdio_settings).await {
                Ok(outcome) => {
                    let sample = Sample::of(&outcome, ticks);
                    eprintln!(
                        "rep {} stdio    {:6} {:>9.0} calls/s  p50 {:>8.1} µs  p99 {:>8.1} µs  CPU {:>7.2} µs/call",
                        rep + 1,
                        kind.name(),
                        sample.rate,
                        sample.p50_us,
                        sample.p99_us,
                        sample.cpu_us
                    );
                    results.load.entry((index, kind)).or_default().push(sample);
                }
                Err(e) => {
                    eprintln!("stdio / {}: not measured: {e}", kind.name());
                    results
                        .failures
                        .push(format!("stdio / {}: {e}", kind.name()));
                    failed.push(kind);
                }
            }
        }
    }
}

async fn measure_memory(args: &RunArgs, results: &mut Results) {
    let mut failed: Vec<(&'static str, Kind)> = Vec::new();
    for rep in 0..args.reps {
        let plan: [(&'static str, Kind); 7] = [
            ("SSE streams", Kind::Tern),
            ("SSE streams", Kind::TernAxum),
            ("SSE streams", Kind::Rmcp),
            ("idle connections", Kind::Floor),
            ("idle connections", Kind::Tern),
            ("idle connections", Kind::TernAxum),
            ("idle connections", Kind::Rmcp),
        ];
        for (what, kind) in plan {
            if failed.contains(&(what, kind)) {
                continue;
            }
            let reading = if what == "SSE streams" {
                memory::streams(kind, args.streams).await
            } else {
                memory::idle(kind, args.idle).await
            };
            match reading {
                Ok(r) => {
                    eprintln!(
                        "rep {} {what} {:6} RSS {} → {} KiB (peak {} KiB), {:.1} KiB each",
                        rep + 1,
                        kind.name(),
                        r.base_kib,
                        r.rss_kib,
                        r.peak_kib,
                        r.per_item_bytes() / 1024.0
                    );
                    results.memory.entry((what, kind)).or_default().push(r);
                }
                Err(e) => {
                    let short: String = e.chars().take(300).collect();
                    eprintln!("{what} / {}: not measured: {short}", kind.name());
                    results
                        .failures
                        .push(format!("{what} / {}: {short}", kind.name()));
                    failed.push((what, kind));
                }
            }
        }
    }
}
