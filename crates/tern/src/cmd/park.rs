//! `--park FILE` and `tern resume FILE`: a round the server asked, kept in
//! a file and continued later by any process (an agent, a script, another
//! machine with the same server). No daemon: with 2026-07-28 the pending
//! round *is* the state — the call, the questions (`inputRequests`) and
//! the server's `requestState` — so it is [`tern_client::PendingRound`],
//! written with the server as the person named it.
//!
//! The file is versioned JSON:
//!
//! ```json
//! {"tern": "pending-round/1",
//!  "server": {"url": "http://127.0.0.1:8080/mcp", "headers": ["Authorization"]},
//!  "method": "tools/call", "params": {"name": "transfer_funds", "arguments": {"to": "bob", "amount": 500}},
//!  "inputRequests": {"confirm": {"method": "elicitation/create", "params": {...}}},
//!  "requestState": "...", "round": 1}
//! ```
//!
//! `server` is one of `{"url", "headers"}`, `{"server", "config",
//! "headers", "env"}`, `{"demo": true, "env"}` or `{"command", "env"}`.
//! No secrets: headers and `-e` variables are stored by *name*; their
//! values come, when the round is resumed, from that run's `--header` /
//! `-e`, else from the environment (`TERN_HEADER_<NAME>` for a header,
//! upper case, `-` as `_`; the variable itself for `-e`), else from the
//! config file for `--server`. The `requestState` is the server's, sealed
//! by it: a changed one is refused by the server, not by tern.
//!
//! A call that became a task (Tasks extension) asks through the task: its
//! questions wait in the task record (`input_required`) until answered
//! with `tasks/update`, so the task itself is what is parked — the file
//! (`pending-task/1`) names the server, the tool, the task id and its
//! questions, and `tern resume FILE` follows the task with the run's
//! answers:
//!
//! ```json
//! {"tern": "pending-task/1", "server": {"url": "http://127.0.0.1:8080/mcp"},
//!  "tool": "import_dataset", "task": "f908…", "inputRequests": {"on_error": {...}}}
//! ```
//!
//! Over stdio the task lives in the server process that ends with the run,
//! unless the server keeps its tasks in a durable store; tern says so.
//!
//! A 2025-11-25 server asks inside a live session (its questions are
//! requests of their own, answered while the call is open): there is no
//! round to park, and tern says so.

use std::path::{Path, PathBuf};

use clap::Args;
use serde::{Deserialize, Serialize};
use tern_client::PendingRound;

use super::server::ServerArgs;
use super::{Connected, emit_json};
use crate::exit::{EXIT_PARKED, EXIT_USAGE, Failure, usage};

/// The format's name and version, the file's `tern` member.
pub(crate) const FORMAT: &str = "pending-round/1";

/// The format of a parked task.
pub(crate) const TASK_FORMAT: &str = "pending-task/1";

/// A parked task as written.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ParkedTaskFile {
    /// [`TASK_FORMAT`].
    pub(crate) tern: String,
    /// The server, as named on the command line (secrets by name only).
    pub(crate) server: ParkedServer,
    /// The tool whose call became the task.
    pub(crate) tool: String,
    /// The task id.
    pub(crate) task: String,
    /// What the task asks.
    pub(crate) input_requests: tern_protocol::InputRequests,
}

/// What a parked file holds.
#[derive(Debug)]
pub(crate) enum ParkedFile {
    /// A round ([`FORMAT`]).
    Round(Parked),
    /// A task that asks ([`TASK_FORMAT`]).
    Task(ParkedTaskFile),
}

/// A parked round as written: the format, the server, the round.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Parked {
    /// [`FORMAT`].
    pub(crate) tern: String,
    /// The server, as named on the command line (secrets by name only).
    pub(crate) server: ParkedServer,
    /// The call, its questions, the state, the round number.
    #[serde(flatten)]
    pub(crate) round: PendingRound,
}

/// The server of a parked round, as the person named it.
#[derive(Debug, Default, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ParkedServer {
    /// `--url`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) url: Option<String>,
    /// `--server NAME`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) server: Option<String>,
    /// `--config FILE` (with `--server`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) config: Option<PathBuf>,
    /// `--demo`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) demo: bool,
    /// `-- COMMAND ARGS...`, as typed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) command: Vec<String>,
    /// The names of the `--header`s given (never their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) headers: Vec<String>,
    /// The names of the `-e` variables given (never their values).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) env: Vec<String>,
}

/// The names before `sep` of `NAME<sep>VALUE` words.
fn names(words: &[String], sep: char) -> Vec<String> {
    words
        .iter()
        .filter_map(|w| w.split_once(sep).map(|(k, _)| k.trim().to_owned()))
        .collect()
}

impl ParkedServer {
    /// The server of this run's command line, values left out.
    pub(crate) fn of(server: &ServerArgs) -> Self {
        Self {
            url: server.url.clone(),
            server: server.server.clone(),
            config: server.config.clone(),
            demo: server.demo,
            command: server.command.clone(),
            headers: names(&server.header, ':'),
            env: names(&server.env, '='),
        }
    }
}

/// Where `--park` writes: a file, or standard output (`-`).
#[derive(Debug, Clone)]
pub(crate) struct Parking {
    /// `--park FILE`.
    pub(crate) to: PathBuf,
    /// The server, as this run names it.
    pub(crate) server: ParkedServer,
}

/// Writes `pending` where `--park` says, tells the person how to go on,
/// and exits [`EXIT_PARKED`].
pub(crate) fn write(
    c: &Connected,
    parking: &Parking,
    pending: PendingRound,
) -> Result<u8, Failure> {
    let what = format!("{} {}", pending.method(), pending.call.target());
    let describe = super::questions::describe(
        pending.call.target(),
        &pending.input_requests,
        &format!("in round {}", pending.round),
    );
    let parked = Parked {
        tern: FORMAT.to_owned(),
        server: parking.server.clone(),
        round: pending,
    };
    let (file, to_stdout) = put(parking, &parked)?;
    eprint!("{}", tern::safe::text(&describe));
    eprintln!(
        "tern: parked {} (round {}) of {}{}; continue it with `tern resume {file} --answer KEY=VALUE` (or --answers FILE)",
        tern::safe::line(&what),
        parked.round.round,
        c.driver.who(),
        if to_stdout {
            String::new()
        } else {
            format!(" in {file}")
        },
    );
    Ok(EXIT_PARKED)
}

/// Writes `parked` where `--park` says: the name to resume it by (`FILE`
/// for standard output), and whether it went to standard output.
fn put(parking: &Parking, parked: &impl Serialize) -> Result<(String, bool), Failure> {
    let to_stdout = parking.to.as_os_str() == "-";
    if to_stdout {
        emit_json(parked);
        return Ok(("FILE".to_owned(), true));
    }
    let mut text = serde_json::to_string_pretty(parked).map_err(|e| Failure {
        code: EXIT_USAGE,
        message: format!("the round cannot be written: {e}"),
    })?;
    text.push('\n');
    write_private(&parking.to, text.as_bytes()).map_err(|e| {
        usage(format!(
            "cannot write the parked round to {}: {e}",
            parking.to.display()
        ))
    })?;
    Ok((parking.to.display().to_string(), false))
}

/// Parks a task that asks: the file names it and its questions, the task
/// is left waiting for the answers (they may come from `tern resume` in
/// any process), and the run exits [`EXIT_PARKED`].
pub(crate) fn write_task(
    c: &Connected,
    parking: &Parking,
    task: crate::rounds::ParkedTask,
) -> Result<u8, Failure> {
    let describe = super::questions::describe(
        &task.tool,
        &task.input_requests,
        &format!("as task {}", task.task_id),
    );
    let parked = ParkedTaskFile {
        tern: TASK_FORMAT.to_owned(),
        server: parking.server.clone(),
        tool: task.tool,
        task: task.task_id,
        input_requests: task.input_requests,
    };
    let (file, to_stdout) = put(parking, &parked)?;
    eprint!("{}", tern::safe::text(&describe));
    let stdio = if parking.server.url.is_none() {
        "; over stdio the task lives in the server process this run started, which ends with it, unless the server keeps tasks in a durable store (e.g. tern serve demo --tasks sqlite:PATH)"
    } else {
        ""
    };
    eprintln!(
        "tern: parked task {} of {} ({}), which waits for its answers{}; continue it with `tern resume {file} --answer KEY=VALUE` (or --answers FILE){stdio}",
        tern::safe::line(&parked.task),
        tern::safe::line(&parked.tool),
        c.driver.who(),
        if to_stdout {
            String::new()
        } else {
            format!(" (in {file})")
        },
    );
    Ok(EXIT_PARKED)
}

/// Writes `bytes` to `path`, readable by its owner only when created (the
/// call's arguments and questions are nobody else's business, though the
/// file holds no secrets).
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.mode(0o600);
    }
    options.open(path)?.write_all(bytes)
}

/// The options of `tern resume` that say how to reach the file's server:
/// the values the file does not keep, and how to wait.
#[derive(Debug, Args)]
pub(crate) struct ResumeArgs {
    /// A header's value, NAME:VALUE (repeatable): for each header the file
    /// names (else `TERN_HEADER_<NAME>` from the environment).
    #[arg(long = "header", value_name = "NAME:VALUE")]
    pub(crate) header: Vec<String>,
    /// A stdio server's variable, KEY=VALUE (repeatable): for each the
    /// file names (else the variable from tern's environment).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub(crate) env: Vec<String>,
    /// The config file for a server named with `--server` (default: the
    /// one the file names, else tern/servers.json in your config folder).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Print the raw result JSON (for scripts) instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Wait at most SECONDS for the server, as for `tern call`.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub(crate) timeout: f64,
    /// Show a stdio server's standard error as it comes.
    #[arg(short, long)]
    pub(crate) verbose: bool,
}

/// The environment variable that gives header `name`'s value on resume.
pub(crate) fn header_variable(name: &str) -> String {
    format!(
        "TERN_HEADER_{}",
        name.to_ascii_uppercase().replace('-', "_")
    )
}

/// The parked round or task of `path` (`-`: standard input), checked: its
/// format, and that something was asked.
pub(crate) fn read(path: &Path) -> Result<ParkedFile, Failure> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin()).map_err(|e| {
            usage(format!(
                "cannot read the parked round from standard input: {e}"
            ))
        })?
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?
    };
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("{} is not JSON: {e}", path.display())))?;
    match value.get("tern").and_then(serde_json::Value::as_str) {
        Some(FORMAT) => {}
        Some(TASK_FORMAT) => {
            let parked: ParkedTaskFile = serde_json::from_value(value)
                .map_err(|e| usage(format!("{} is not a parked task: {e}", path.display())))?;
            if parked.input_requests.is_empty() {
                return Err(usage(format!(
                    "{} holds no questions to answer",
                    path.display()
                )));
            }
            return Ok(ParkedFile::Task(parked));
        }
        Some(other) => {
            return Err(usage(format!(
                "{} is a `{}` file; this tern reads `{FORMAT}` and `{TASK_FORMAT}`",
                path.display(),
                tern::safe::line(other)
            )));
        }
        None => {
            return Err(usage(format!(
                "{} is not a parked round (no \"tern\": \"{FORMAT}\"; `tern call ... --park FILE` writes one)",
                path.display()
            )));
        }
    }
    let parked: Parked = serde_json::from_value(value)
        .map_err(|e| usage(format!("{} is not a parked round: {e}", path.display())))?;
    if parked.round.input_requests.is_empty() {
        return Err(usage(format!(
            "{} holds no questions to answer",
            path.display()
        )));
    }
    Ok(ParkedFile::Round(parked))
}

/// `tern resume FILE`: the parked round or task as an [`super::Op`], and
/// the command line of its server.
pub(crate) fn op(file: &Path, extra: ResumeArgs) -> Result<(super::Op, ServerArgs), Failure> {
    Ok(match read(file)? {
        ParkedFile::Round(parked) => (
            super::Op::Resume {
                pending: Box::new(parked.round),
            },
            server_args(&parked.server, extra)?,
        ),
        ParkedFile::Task(parked) => (
            super::Op::ResumeTask {
                tool: parked.tool,
                task: parked.task,
            },
            server_args(&parked.server, extra)?,
        ),
    })
}

/// The command line the parked round's server needs now: the file's server
/// with the header and variable values of this run (or its environment).
pub(crate) fn server_args(parked: &ParkedServer, extra: ResumeArgs) -> Result<ServerArgs, Failure> {
    let given = |words: &[String], sep: char, name: &str| {
        words.iter().find_map(|w| {
            w.split_once(sep)
                .filter(|(k, _)| k.trim().eq_ignore_ascii_case(name))
                .map(|_| w.clone())
        })
    };
    let mut header = Vec::new();
    for name in &parked.headers {
        let word = given(&extra.header, ':', name)
            .or_else(|| {
                std::env::var(header_variable(name))
                    .ok()
                    .map(|v| format!("{name}: {v}"))
            })
            .ok_or_else(|| {
                usage(format!(
                    "the parked call was made with the header {name}, whose value the file does not keep: give it with --header '{name}: VALUE' or {}",
                    header_variable(name)
                ))
            })?;
        header.push(word);
    }
    // Headers given now that the file does not name are sent too.
    for w in &extra.header {
        if !header.iter().any(|h| {
            h.split_once(':')
                .map(|(k, _)| k.trim().to_ascii_lowercase())
                == w.split_once(':')
                    .map(|(k, _)| k.trim().to_ascii_lowercase())
        }) {
            header.push(w.clone());
        }
    }
    let mut env = Vec::new();
    for name in &parked.env {
        let word = given(&extra.env, '=', name)
            .or_else(|| std::env::var(name).ok().map(|v| format!("{name}={v}")))
            .ok_or_else(|| {
                usage(format!(
                    "the parked call gave the server the variable {name}, whose value the file does not keep: give it with -e {name}=VALUE or set it in the environment"
                ))
            })?;
        env.push(word);
    }
    for w in &extra.env {
        if !env.contains(w) {
            env.push(w.clone());
        }
    }
    Ok(ServerArgs {
        url: parked.url.clone(),
        demo: parked.demo,
        server: parked.server.clone(),
        config: extra.config.or_else(|| parked.config.clone()),
        env,
        header,
        json: extra.json,
        timeout: extra.timeout,
        verbose: extra.verbose,
        command: parked.command.clone(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tern_client::Call;

    use super::*;

    #[test]
    fn a_parked_round_keeps_header_names_and_reads_back() {
        let server = ServerArgs {
            url: Some("http://127.0.0.1:9/mcp".into()),
            demo: false,
            server: None,
            config: None,
            env: Vec::new(),
            header: vec!["Authorization: Bearer s3cret".into()],
            json: false,
            timeout: 30.0,
            verbose: false,
            command: Vec::new(),
        };
        let mut round = PendingRound::of_task("t", tern_protocol::InputRequests::new()).unwrap();
        round.call = Call::tool("transfer_funds", Some(json!({"to": "bob"}))).unwrap();
        round.request_state = Some("opaque".into());
        round.round = 1;
        let parked = Parked {
            tern: FORMAT.into(),
            server: ParkedServer::of(&server),
            round,
        };
        let text = serde_json::to_string(&parked).unwrap();
        assert!(!text.contains("s3cret"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["tern"], "pending-round/1");
        assert_eq!(v["server"]["headers"], json!(["Authorization"]));
        assert_eq!(v["method"], "tools/call");
        assert_eq!(v["params"]["name"], "transfer_funds");
        assert_eq!(v["requestState"], "opaque");
        let back: Parked = serde_json::from_str(&text).unwrap();
        assert_eq!(back.round, parked.round);
        assert_eq!(back.server, parked.server);
    }

    #[test]
    fn a_header_value_comes_from_the_resume_line() {
        let parked = ParkedServer {
            url: Some("http://127.0.0.1:9/mcp".into()),
            headers: vec!["Authorization".into()],
            ..ParkedServer::default()
        };
        let extra = |header: Vec<String>| ResumeArgs {
            header,
            env: Vec::new(),
            config: None,
            json: false,
            timeout: 30.0,
            verbose: false,
        };
        let args = server_args(&parked, extra(vec!["authorization: Bearer t".into()])).unwrap();
        assert_eq!(args.header, ["authorization: Bearer t"]);
        assert_eq!(header_variable("X-Api-Key"), "TERN_HEADER_X_API_KEY");
    }
}
