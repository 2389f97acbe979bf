//! The table: medians over repetitions with their spread (min–max), the
//! ratios the targets speak of, and the machine.

#![allow(
    clippy::cast_precision_loss,
    reason = "counts, ticks and nanoseconds here are far below 2^52"
)]

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::load::Outcome;
use crate::memory::Reading;
use crate::servers::Kind;

/// The figures of one run of one server on one scenario.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// Logical calls per second.
    pub(crate) rate: f64,
    /// Median latency, µs.
    pub(crate) p50_us: f64,
    /// 99th percentile latency, µs.
    pub(crate) p99_us: f64,
    /// Server CPU per logical call, µs.
    pub(crate) cpu_us: f64,
    /// Load generator CPU use over the window, in cores.
    pub(crate) client_cores: f64,
    /// Failed calls.
    pub(crate) errors: u64,
}

impl Sample {
    /// Figures of an [`Outcome`]; `ticks` is `CLK_TCK`.
    pub(crate) fn of(outcome: &Outcome, ticks: u64) -> Self {
        let secs = outcome.elapsed.as_secs_f64().max(1e-9);
        let ops = outcome.ops.max(1) as f64;
        let tick_us = 1e6 / ticks.max(1) as f64;
        Self {
            rate: outcome.ops as f64 / secs,
            p50_us: outcome.latency.value_at_quantile(0.5) as f64 / 1e3,
            p99_us: outcome.latency.value_at_quantile(0.99) as f64 / 1e3,
            cpu_us: outcome.server_ticks as f64 * tick_us / ops,
            client_cores: outcome.client_ticks as f64 * tick_us / 1e6 / secs,
            errors: outcome.errors,
        }
    }
}

/// Median, min, max.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spread {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

/// The median and range of the finite `values`.
pub(crate) fn spread(values: &[f64]) -> Option<Spread> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    };
    Some(Spread {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// A number with 3 significant figures at most (no exponent).
fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

fn show(s: Option<Spread>) -> String {
    match s {
        None => "–".into(),
        Some(s) if (s.max - s.min).abs() < f64::EPSILON => num(s.median),
        Some(s) => format!("{} ({}–{})", num(s.median), num(s.min), num(s.max)),
    }
}

/// Everything measured in one run.
#[derive(Debug, Default)]
pub(crate) struct Results {
    /// (scenario, server) → one sample per repetition.
    pub(crate) load: BTreeMap<(usize, Kind), Vec<Sample>>,
    /// Scenario names by their order.
    pub(crate) scenarios: Vec<&'static str>,
    /// Failures, by scenario and server.
    pub(crate) failures: Vec<String>,
    /// (what, server) → readings.
    pub(crate) memory: BTreeMap<(&'static str, Kind), Vec<Reading>>,
    /// Criterion: (name, median ns, lower, upper).
    pub(crate) seal: Vec<(String, f64, f64, f64)>,
    /// In process, per repetition: (p50, p99) µs of each of `tasks::ROWS`.
    pub(crate) tasks: Vec<[(f64, f64); 3]>,
}

impl Results {
    /// The index of `scenario`, added if new.
    pub(crate) fn scenario(&mut self, scenario: &'static str) -> usize {
        if let Some(i) = self.scenarios.iter().position(|s| *s == scenario) {
            return i;
        }
        self.scenarios.push(scenario);
        self.scenarios.len() - 1
    }

    fn samples(&self, scenario: &str, server: Kind) -> Option<&Vec<Sample>> {
        let i = self.scenarios.iter().position(|s| *s == scenario)?;
        self.load.get(&(i, server)).filter(|v| !v.is_empty())
    }

    /// Per-repetition ratio of a field of two rows, as a spread.
    fn ratio(
        &self,
        (s1, k1): (&str, Kind),
        (s2, k2): (&str, Kind),
        field: fn(&Sample) -> f64,
    ) -> Option<Spread> {
        let a = self.samples(s1, k1)?;
        let b = self.samples(s2, k2)?;
        let values: Vec<f64> = a.iter().zip(b).map(|(x, y)| field(x) / field(y)).collect();
        spread(&values)
    }

    /// Per repetition, tern's server CPU of a two-leg MRTR call minus twice
    /// that of an echo call, µs: what the second leg costs beyond a call.
    fn mrtr_excess(&self) -> Option<Spread> {
        let mrtr = self.samples("mrtr", Kind::Tern)?;
        let echo = self.samples("echo", Kind::Tern)?;
        let values: Vec<f64> = mrtr
            .iter()
            .zip(echo)
            .map(|(m, e)| 2.0f64.mul_add(-e.cpu_us, m.cpu_us))
            .collect();
        spread(&values)
    }

    /// The markdown report.
    #[allow(
        clippy::too_many_lines,
        reason = "one table after another, read top to bottom"
    )]
    pub(crate) fn markdown(&self, machine: &str, method: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "{machine}\n\n{method}\n");
        let _ = writeln!(
            out,
            "| scenario | server | calls/s | p50 µs | p99 µs | server CPU µs/call | client cores | errors |"
        );
        let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
        for ((i, server), samples) in &self.load {
            let col =
                |f: fn(&Sample) -> f64| show(spread(&samples.iter().map(f).collect::<Vec<_>>()));
            let errors: u64 = samples.iter().map(|s| s.errors).sum();
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {errors} |",
                self.scenarios[*i],
                server.name(),
                col(|s| s.rate),
                col(|s| s.p50_us),
                col(|s| s.p99_us),
                col(|s| s.cpu_us),
                col(|s| s.client_cores),
            );
        }
        let _ = writeln!(
            out,
            "\nRatios of server CPU per call, per repetition (median, min–max):\n"
        );
        let _ = writeln!(out, "| ratio | value | target |");
        let _ = writeln!(out, "|---|---|---|");
        let cpu = |s: &Sample| s.cpu_us;
        let rate = |s: &Sample| s.rate;
        let rows: [(&str, Option<Spread>, &str); 22] = [
            (
                "echo: tern-default / hand-rolled",
                self.ratio(("echo", Kind::TernDefault), ("echo", Kind::HandRolled), cpu),
                "≤ 1.25",
            ),
            (
                "echo: rmcp / tern-default",
                self.ratio(("echo", Kind::Rmcp), ("echo", Kind::TernDefault), cpu),
                "≥ 3",
            ),
            (
                "MRTR two legs: rmcp / tern-default",
                self.ratio(("mrtr", Kind::Rmcp), ("mrtr", Kind::TernDefault), cpu),
                "≥ 3",
            ),
            (
                "stdio echo: tern / hand-rolled floor",
                self.ratio(("stdio", Kind::Tern), ("stdio", Kind::HandRolled), cpu),
                "≤ 1.3",
            ),
            (
                "echo: tern / floor",
                self.ratio(("echo", Kind::Tern), ("echo", Kind::Floor), cpu),
                "≤ 1.6",
            ),
            (
                "echo: tern / hand-rolled",
                self.ratio(("echo", Kind::Tern), ("echo", Kind::HandRolled), cpu),
                "≤ 1.25",
            ),
            (
                "echo: tern in an axum Router / tern on its accept loop",
                self.ratio(("echo", Kind::TernAxum), ("echo", Kind::Tern), cpu),
                "",
            ),
            (
                "echo: rmcp / tern",
                self.ratio(("echo", Kind::Rmcp), ("echo", Kind::Tern), cpu),
                "≥ 3",
            ),
            (
                "1 KiB arg + 4 KiB result: tern / floor",
                self.ratio(("payload", Kind::Tern), ("payload", Kind::Floor), cpu),
                "≤ 1.6",
            ),
            (
                "1 KiB arg + 4 KiB result: tern / hand-rolled",
                self.ratio(("payload", Kind::Tern), ("payload", Kind::HandRolled), cpu),
                "≤ 1.3",
            ),
            (
                "1 KiB arg + 4 KiB result: tern in an axum Router / tern",
                self.ratio(("payload", Kind::TernAxum), ("payload", Kind::Tern), cpu),
                "",
            ),
            (
                "1 KiB arg + 4 KiB result: rmcp / tern",
                self.ratio(("payload", Kind::Rmcp), ("payload", Kind::Tern), cpu),
                "≥ 3",
            ),
            (
                "MRTR two legs / plain echo call (tern)",
                self.ratio(("mrtr", Kind::Tern), ("echo", Kind::Tern), cpu),
                "< 2.5",
            ),
            (
                "MRTR two legs − 2 × echo (tern), µs per logical call",
                self.mrtr_excess(),
                "≤ 8",
            ),
            (
                "MRTR two legs: rmcp / tern",
                self.ratio(("mrtr", Kind::Rmcp), ("mrtr", Kind::Tern), cpu),
                "≥ 3",
            ),
            (
                "stdio echo: rmcp / tern",
                self.ratio(("stdio", Kind::Rmcp), ("stdio", Kind::Tern), cpu),
                "≥ 6",
            ),
            (
                "stdio calls/s: tern / rmcp",
                self.ratio(("stdio", Kind::Tern), ("stdio", Kind::Rmcp), rate),
                "",
            ),
            (
                "echo through the gateway (HTTP upstream): gateway / tern direct",
                self.ratio(("echo", Kind::Gateway), ("echo", Kind::Tern), cpu),
                "≤ 1.5",
            ),
            (
                "echo through the gateway (stdio upstream): gateway / tern direct",
                self.ratio(("echo", Kind::GatewayStdio), ("echo", Kind::Tern), cpu),
                "≤ 1.5",
            ),
            (
                "1 KiB arg + 4 KiB result through the gateway (HTTP upstream): gateway / tern",
                self.ratio(("payload", Kind::Gateway), ("payload", Kind::Tern), cpu),
                "",
            ),
            (
                "MRTR two legs through the gateway (HTTP upstream): gateway / tern",
                self.ratio(("mrtr", Kind::Gateway), ("mrtr", Kind::Tern), cpu),
                "",
            ),
            (
                "MRTR two legs through the gateway (stdio upstream): gateway / tern",
                self.ratio(("mrtr", Kind::GatewayStdio), ("mrtr", Kind::Tern), cpu),
                "",
            ),
        ];
        for (name, value, target) in rows {
            let _ = writeln!(out, "| {name} | {} | {target} |", show(value));
        }
        let task_ratio = spread(
            &self
                .tasks
                .iter()
                .map(|[plain, memory, _]| memory.0 / plain.0)
                .collect::<Vec<_>>(),
        );
        if task_ratio.is_some() {
            let _ = writeln!(
                out,
                "| task create + first `tasks/get` / plain call (memory store, p50 in process) | {} | ≤ 2.5 |",
                show(task_ratio)
            );
        }
        if !self.seal.is_empty() {
            let _ = writeln!(
                out,
                "\n`tern-seal`, 1 KiB state (criterion: median, 95 % confidence interval; target seal + open ≤ 2 µs):\n"
            );
            let _ = writeln!(out, "| operation | ns/op |");
            let _ = writeln!(out, "|---|---|");
            for (name, median, low, high) in &self.seal {
                let _ = writeln!(
                    out,
                    "| {name} | {} ({}–{}) |",
                    num(*median),
                    num(*low),
                    num(*high)
                );
            }
        }
        if !self.tasks.is_empty() {
            let _ = writeln!(
                out,
                "\nTask overhead, in process (no transport), {} repetitions (median, min–max):\n",
                self.tasks.len()
            );
            let _ = writeln!(out, "| what | p50 µs | p99 µs |");
            let _ = writeln!(out, "|---|---|---|");
            for (i, name) in crate::tasks::ROWS.iter().enumerate() {
                let p50: Vec<f64> = self.tasks.iter().map(|r| r[i].0).collect();
                let p99: Vec<f64> = self.tasks.iter().map(|r| r[i].1).collect();
                let _ = writeln!(
                    out,
                    "| {name} | {} | {} |",
                    show(spread(&p50)),
                    show(spread(&p99))
                );
            }
        }
        if !self.memory.is_empty() {
            let _ = writeln!(
                out,
                "\nMemory (fresh server per repetition; median, min–max):\n"
            );
            let _ = writeln!(
                out,
                "| what | server | held | RSS before MiB | RSS holding MiB | peak RSS MiB | per item KiB |"
            );
            let _ = writeln!(out, "|---|---|---|---|---|---|---|");
            for ((what, server), readings) in &self.memory {
                let col = |f: fn(&Reading) -> f64| {
                    show(spread(&readings.iter().map(f).collect::<Vec<_>>()))
                };
                let held = readings.first().map_or(0, |r| r.held);
                let _ = writeln!(
                    out,
                    "| {what} | {} | {held} | {} | {} | {} | {} |",
                    server.name(),
                    col(|r| r.base_kib as f64 / 1024.0),
                    col(|r| r.rss_kib as f64 / 1024.0),
                    col(|r| r.peak_kib as f64 / 1024.0),
                    col(|r| r.per_item_bytes() / 1024.0),
                );
            }
        }
        if !self.failures.is_empty() {
            let _ = writeln!(out, "\nNot measured:\n");
            for f in &self.failures {
                let _ = writeln!(out, "- {f}");
            }
        }
        out
    }
}

/// Reads criterion's estimates of `group/{seal,open,seal_open}` under `dir`,
/// for the `t1` group (`requestState_1KiB`) and the `t2` one.
pub(crate) fn criterion(dir: &Path) -> Vec<(String, f64, f64, f64)> {
    let mut found = Vec::new();
    let groups = [("requestState_1KiB", "t1"), ("requestState_1KiB_t2", "t2")];
    for ((group, version), name) in groups
        .into_iter()
        .flat_map(|group| ["seal", "open", "seal_open"].map(|name| (group, name)))
    {
        let path = dir
            .join(group)
            .join(name)
            .join("new")
            .join("estimates.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
            continue;
        };
        let m = &v["median"];
        let (Some(point), Some(low), Some(high)) = (
            m["point_estimate"].as_f64(),
            m["confidence_interval"]["lower_bound"].as_f64(),
            m["confidence_interval"]["upper_bound"].as_f64(),
        ) else {
            continue;
        };
        found.push((format!("{name} ({version})"), point, low, high));
    }
    found
}

/// The CPU's model name, from `/proc/cpuinfo`.
pub(crate) fn cpu_model() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map_or_else(
            || "unknown".into(),
            |l| l.trim_start_matches([' ', '\t', ':']).to_owned(),
        )
}

/// nproc, CPU model, kernel, and the toolchain.
pub(crate) fn machine() -> String {
    let model = cpu_model();
    let nproc = crate::procfs::cpus();
    let run = |cmd: &str, arg: &str| {
        std::process::Command::new(cmd)
            .arg(arg)
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let mem_kib = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0);
    format!(
        "Machine: {nproc} CPUs ({model}), {} GiB RAM, Linux {}, {}.",
        mem_kib / 1024 / 1024,
        run("uname", "-r"),
        run("rustc", "-V"),
    )
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{Results, Sample};
    use crate::servers::Kind;

    fn sample(cpu_us: f64) -> Sample {
        Sample {
            rate: 1.0,
            p50_us: 1.0,
            p99_us: 1.0,
            cpu_us,
            client_cores: 0.5,
            errors: 0,
        }
    }

    /// Results of two repetitions: echo and MRTR for tern, echo for the
    /// hand-rolled line, and the in-process task figures.
    pub(crate) fn two_reps() -> Results {
        let mut r = Results::default();
        let echo = r.scenario("echo");
        let mrtr = r.scenario("mrtr");
        r.load
            .insert((echo, Kind::Tern), vec![sample(10.0), sample(12.0)]);
        r.load
            .insert((echo, Kind::HandRolled), vec![sample(8.0), sample(10.0)]);
        r.load
            .insert((mrtr, Kind::Tern), vec![sample(25.0), sample(30.0)]);
        r.tasks = vec![
            [(10.0, 20.0), (25.0, 40.0), (500.0, 900.0)],
            [(12.0, 20.0), (24.0, 40.0), (600.0, 900.0)],
        ];
        r
    }

    #[test]
    fn the_ratios_the_issue_states_are_paired_per_repetition() {
        let r = two_reps();
        // 25 − 2 × 10 and 30 − 2 × 12: median 5.5, range 5–6.
        let excess = r.mrtr_excess().unwrap();
        assert_eq!((excess.median, excess.min, excess.max), (5.5, 5.0, 6.0));
        let text = r.markdown("machine", "method");
        // 10/8 and 12/10 → 1.25 and 1.2.
        assert!(
            text.contains("| echo: tern / hand-rolled | 1.23 (1.20–1.25) | ≤ 1.25 |"),
            "{text}"
        );
        // Tasks: 25/10 and 24/12 → 2.5 and 2.0.
        assert!(
            text.contains(
                "/ plain call (memory store, p50 in process) | 2.25 (2.00–2.50) | ≤ 2.5 |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| plain tools/call | 11.0 (10.0–12.0) |"),
            "{text}"
        );
    }
}
