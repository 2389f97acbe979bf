//! stdio throughput: one child process, a closed loop keeping `window`
//! `echo` calls in flight over its standard input and output.

use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, BufWriter};

use crate::load::Outcome;
use crate::procfs;
use crate::servers::{Kind, Transport};
use crate::workload;

/// Longest wait for one line.
const LINE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long and how deep.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// Calls in flight.
    pub(crate) window: usize,
    /// Warm-up before measuring.
    pub(crate) warmup: Duration,
    /// The measured time.
    pub(crate) measure: Duration,
}

fn id_of(line: &str) -> Option<u64> {
    let rest = &line[line.find("\"id\":")? + 5..];
    let digits = rest.trim_start();
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Drives one `kind` stdio server; `Err` when it does not answer correctly.
pub(crate) async fn run(kind: Kind, settings: Settings) -> Result<Outcome, String> {
    let mut server = procfs::spawn(kind, Transport::Stdio, &[])
        .await
        .map_err(|e| e.to_string())?;
    let pid = server.pid;
    let stdin = server.child.stdin.take().ok_or("no stdin")?;
    let stdout = server.child.stdout.take().ok_or("no stdout")?;
    let mut writer = BufWriter::new(stdin);
    let mut reader = BufReader::new(stdout);
    let template = workload::call(0, "echo", &workload::echo_args(), None).to_string();
    let (before, after) = template.split_once("\"id\":0").ok_or("no id in the call")?;
    let window = settings.window.max(1);
    let mut sent: Vec<Instant> = vec![Instant::now(); window * 4];
    let slot = |id: u64| usize::try_from(id).unwrap_or(0) % (window * 4);
    let mut latency =
        Histogram::<u64>::new_with_bounds(1, 120_000_000_000, 3).map_err(|e| e.to_string())?;
    let started = Instant::now();
    let measure_from = started + settings.warmup;
    let measure_to = measure_from + settings.measure;
    let (mut next_id, mut in_flight, mut ops, mut checked) = (1_u64, 0_usize, 0_u64, 0_u32);
    let mut marks: Option<(u64, u64, Instant)> = None;
    let mut end: Option<(u64, u64, Instant)> = None;
    let mut line = String::new();
    let me = std::process::id();
    loop {
        let now = Instant::now();
        if marks.is_none() && now >= measure_from {
            marks = Some((procfs::cpu_ticks(pid), procfs::cpu_ticks(me), now));
        }
        if end.is_none() && now >= measure_to {
            end = Some((procfs::cpu_ticks(pid), procfs::cpu_ticks(me), now));
        }
        if end.is_none() {
            while in_flight < window {
                let text = format!("{before}\"id\":{next_id}{after}\n");
                writer
                    .write_all(text.as_bytes())
                    .await
                    .map_err(|e| e.to_string())?;
                sent[slot(next_id)] = Instant::now();
                next_id += 1;
                in_flight += 1;
            }
            writer.flush().await.map_err(|e| e.to_string())?;
        }
        if in_flight == 0 {
            break;
        }
        line.clear();
        let read = tokio::time::timeout(LINE_TIMEOUT, reader.read_line(&mut line)).await;
        match read {
            Ok(Ok(n)) if n > 0 => {}
            Ok(Ok(_)) => return Err("the server closed its output".into()),
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err("no answer within 5 s".into()),
        }
        let Some(id) = id_of(&line) else { continue };
        in_flight = in_flight.saturating_sub(1);
        if checked < 8 {
            checked += 1;
            if !line.contains("\"text\":\"hello\"") {
                return Err(format!("unexpected answer: {}", line.trim()));
            }
        }
        let at = Instant::now();
        if marks.is_some() && end.is_none() {
            ops += 1;
            let ns = u64::try_from(at.duration_since(sent[slot(id)]).as_nanos()).unwrap_or(0);
            latency.saturating_record(ns.max(1));
        }
    }
    drop(writer);
    server.stop().await;
    let (Some((s0, c0, t0)), Some((s1, c1, t1))) = (marks, end) else {
        return Err("the run ended early".into());
    };
    Ok(Outcome {
        ops,
        errors: 0,
        elapsed: t1.duration_since(t0),
        latency,
        server_ticks: s1.saturating_sub(s0),
        client_ticks: c1.saturating_sub(c0),
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_are_read_from_responses() {
        assert_eq!(
            super::id_of(r#"{"jsonrpc":"2.0","id":42,"result":{}}"#),
            Some(42)
        );
        assert_eq!(super::id_of(r#"{"method":"x"}"#), None);
    }
}
