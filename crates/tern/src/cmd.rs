//! The client subcommands: connect to a server (`--url`, `--demo`,
//! `--server NAME` or `-- COMMAND ARGS...`), make one request with the
//! terminal as the input handlers, print the result, and turn the outcome
//! into an exit code.
//!
//! A new subcommand is an [`Op`] variant and an arm of [`execute`] (or its
//! own function taking a [`Connected`]); connecting, timeouts, Ctrl-C and
//! error advice are shared.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::{Value, json};
use tern_client::legacy::DualEra;
use tern_client::transport::stdio::{ChildProcess, ChildWatch, SpawnOptions};
use tern_client::{CallOptions, Client, ClientError, Completed, Limits, Round, StaticRoots};
use tern_protocol::error::code;
use tern_protocol::tool::Tool;
use tern_protocol::{Implementation, JsonObject};

use crate::answers::PresetSpec;
use crate::config;
use crate::output;
use crate::rounds::{Activity, Driver, First};
use crate::terminal::LivePresets;
use crate::terminal::{Phase, Sampler, Session, TerminalElicitation, TerminalSampling};

/// Exit code: success.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: the tool reported an error (`isError`), or the person declined
/// or cancelled a question (what the server answered then is still printed).
pub(crate) const EXIT_REFUSED: u8 = 1;
/// Exit code: usage error (bad arguments, unreadable `--answers` file).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code: the server answered with a JSON-RPC error, sent a reply tern
/// could not use, or took more rounds or time than allowed.
pub(crate) const EXIT_SERVER: u8 = 3;
/// Exit code: the server could not be started or reached, or went away.
pub(crate) const EXIT_TRANSPORT: u8 = 4;
/// Exit code: the server needs input this run cannot give: `-32021` (a
/// required client capability is missing, e.g. elicitation under
/// `--no-input`), a question with no handler or preset answer, or a preset
/// answer the server asked again for.
pub(crate) const EXIT_NEEDS_INPUT: u8 = 5;
/// Exit code: interrupted (Ctrl-C): 128 + SIGINT, as shells report it.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// The exit codes' text.
macro_rules! exit_codes {
    () => {
        "\
Exit codes:
  0  success
  1  the tool reported an error (isError), or you declined or cancelled a
     question (the server's fallback result is still printed)
  2  usage error (bad arguments, unknown tool or prompt, arguments its
     schema refuses, a preset answer that does not fit its question,
     unreadable --answers or --config file)
  3  the server answered with an error (JSON-RPC error, unusable reply, or
     more rounds than allowed, or no answer within --timeout)
  4  transport error: the server could not be started or reached, or went
     away (its exit status and last lines of standard error are shown)
  5  the server needs input this run cannot give: -32021 missing client
     capability (e.g. elicitation under --no-input), a question with no
     preset answer when tern may not prompt, or a preset answer the server
     asked for again
  130  interrupted (Ctrl-C): a request in flight is cancelled
     (notifications/cancelled over stdio, the stream closed over HTTP); at
     a question nothing is sent"
    };
}

/// The exit codes, for each subcommand's `--help`.
pub(crate) const EXIT_CODES_HELP: &str = exit_codes!();

/// How servers are named, then the exit codes, for `tern --help`.
pub(crate) const TOP_HELP: &str = concat!(
    "\
Naming the server (discover, tools, prompts, resources, call, prompt,
read, questions):
  --url URL            a Streamable HTTP endpoint (http://HOST:PORT/mcp)
  --demo               the built-in demo server, run as a child over stdio
  --server NAME        a server of the config file (see `tern servers`)
  -- COMMAND ARGS...   a server run as a child over stdio (last on the line)

Example: tern call --demo provision_database name=orders

Environment:
  TERN_LOG      what tern logs on standard error, as a tracing filter
                (default warn; e.g. TERN_LOG=info, TERN_LOG=tern_client=debug;
                a stdio server's standard error is logged at info under
                tern_client::server_stderr)
  TERN_CONFIG   the config file of named servers (default: tern/servers.json
                in your config folder)
  TERN_PROMPTS  `lines` for numbered line prompts even on a terminal
  TERN_BROWSER  the command that opens a page a server asks you to open
                (the URL appended as one argument; default xdg-open / open)
  NO_COLOR      no colour in prompts

",
    exit_codes!()
);

/// How every client subcommand names its server, and how it waits for it.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Talk to the Streamable HTTP endpoint at URL (http://HOST:PORT/mcp).
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// Run the built-in demo server as a child over stdio
    /// (`tern serve demo --stdio`).
    #[arg(long)]
    pub(crate) demo: bool,
    /// Use the server named NAME in the config file (`tern servers` lists
    /// them).
    #[arg(long, value_name = "NAME")]
    pub(crate) server: Option<String>,
    /// The config file of named servers (host JSON: `mcpServers` or
    /// `servers`); default: tern/servers.json in your config folder.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Add KEY=VALUE to a stdio server's environment (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub(crate) env: Vec<String>,
    /// Send the header NAME:VALUE to an HTTP server (repeatable).
    #[arg(long = "header", value_name = "NAME:VALUE")]
    pub(crate) header: Vec<String>,
    /// Print the raw result JSON (for scripts) instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Wait at most SECONDS for the server: to connect, and for each
    /// request (a progress notification restarts the wait; time spent
    /// answering a question does not count).
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0)]
    pub(crate) timeout: f64,
    /// Show a stdio server's standard error as it comes (prefixed
    /// `server:`).
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// Run this server as a child over stdio; last on the line, after `--`.
    #[arg(last = true, value_name = "COMMAND ARGS")]
    pub(crate) command: Vec<String>,
}

/// How questions are answered, for the subcommands that can be asked some.
#[derive(Debug, Args, Default)]
pub(crate) struct InputArgs {
    /// Preset an answer: KEY=VALUE for a one-field form, KEY.FIELD=VALUE for
    /// one field (typed by the field's schema), or KEY=JSON for the whole
    /// answer (e.g. `region={"action":"decline"}`). Repeatable; `tern
    /// questions` shows the keys and fields. A 2025 server's questions have
    /// no keys: they are `live-1`, `live-2`, … in the order the call asks.
    #[arg(long = "answer", value_name = "KEY=VALUE")]
    pub(crate) answer: Vec<String>,
    /// Preset answers from a file: a JSON object of KEY: answer (`tern
    /// questions TOOL > FILE` writes one to edit).
    #[arg(long = "answers", value_name = "FILE")]
    pub(crate) answers: Option<PathBuf>,
    /// Never prompt, and declare elicitation only when answers are preset,
    /// so servers take their fallback. The default when standard input is
    /// not a terminal.
    #[arg(long)]
    pub(crate) no_input: bool,
    /// Answer sampling requests by running COMMAND (with `sh -c`): the
    /// prompt on its standard input, the reply from its standard output.
    /// Without it you type the reply.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) sampler: Option<String>,
    /// A folder to share as a root (repeatable; default: the working folder).
    #[arg(long = "root", value_name = "PATH")]
    pub(crate) root: Vec<PathBuf>,
}

/// What `tern task` does with a task.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TaskAction {
    /// One `tasks/get`: the status (and result or error when it ended).
    Get,
    /// Follow it to its end, answering its questions.
    Wait,
    /// `tasks/cancel`.
    Cancel,
}

/// What to ask the server.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `server/discover`.
    Discover,
    /// Every tool.
    Tools,
    /// Every prompt.
    Prompts,
    /// Every resource and resource template.
    Resources,
    /// `tools/call`.
    Call {
        /// The tool.
        tool: String,
        /// `key=value` words.
        pairs: Vec<String>,
        /// `--args JSON`.
        args: Option<String>,
    },
    /// `prompts/get`.
    Prompt {
        /// The prompt.
        name: String,
        /// `key=value` words.
        pairs: Vec<String>,
    },
    /// `resources/read`.
    Read {
        /// The resource.
        uri: String,
    },
    /// `tern task get|wait|cancel ID`.
    Task {
        /// What to do.
        action: TaskAction,
        /// The task id.
        id: String,
    },
    /// The first round's questions of a `tools/call`.
    Questions {
        /// The tool.
        tool: String,
        /// `key=value` words.
        pairs: Vec<String>,
        /// `--args JSON`.
        args: Option<String>,
    },
}

/// A failed run: its exit code and what to tell the person.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: u8,
    /// The message (printed as `tern: MESSAGE`).
    pub(crate) message: String,
}

pub(crate) fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: EXIT_USAGE,
        message: message.into(),
    }
}

/// A `key=value` word: the value is JSON when it parses as JSON, else the
/// string as typed (`n=3` is a number, `name=orders` a string, `name='"3"'`
/// the string "3").
pub(crate) fn parse_pair(word: &str) -> Result<(String, Value), Failure> {
    let (key, value) = word
        .split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| usage(format!("expected key=value, found {word:?}")))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((key.to_owned(), value))
}

/// The tool arguments: `--args JSON` (an object), then each `key=value`.
pub(crate) fn tool_arguments(pairs: &[String], args: Option<&str>) -> Result<JsonObject, Failure> {
    let mut object = match args {
        None => JsonObject::new(),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return Err(usage("--args must be a JSON object")),
            Err(e) => return Err(usage(format!("--args is not JSON: {e}"))),
        },
    };
    for word in pairs {
        let (k, v) = parse_pair(word)?;
        object.insert(k, v);
    }
    Ok(object)
}

/// Prompt arguments are strings: a JSON string is unquoted, anything else is
/// sent as typed.
fn prompt_arguments(pairs: &[String]) -> Result<JsonObject, Failure> {
    pairs
        .iter()
        .map(|word| {
            let (k, v) = parse_pair(word)?;
            let text = match v {
                Value::String(s) => s,
                _ => word
                    .split_once('=')
                    .map(|(_, v)| v.to_owned())
                    .unwrap_or_default(),
            };
            Ok((k, Value::String(text)))
        })
        .collect()
}

/// The preset answers of `--answers FILE` and then each `--answer`.
pub(crate) fn preset_answers(input: &InputArgs) -> Result<PresetSpec, Failure> {
    let mut spec = PresetSpec::default();
    if let Some(path) = &input.answers {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
        spec.add_file(&path.display().to_string(), &text)
            .map_err(usage)?;
    }
    for word in &input.answer {
        spec.add_word(word).map_err(usage)?;
    }
    Ok(spec)
}

/// The server, as named on the command line.
#[derive(Debug)]
enum Target {
    Url {
        url: String,
        headers: Vec<(String, String)>,
    },
    Demo {
        env: Vec<(String, String)>,
    },
    Command {
        words: Vec<String>,
        env: Vec<(String, String)>,
    },
}

/// `--url` checked: a scheme, and a host.
fn check_url(url: &str) -> Result<(), Failure> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(usage(format!(
            "--url needs a scheme: http://{url}{} (found {url:?})",
            if url.contains('/') { "" } else { "/mcp" }
        )));
    };
    if !matches!(scheme, "http" | "https") {
        return Err(usage(format!(
            "--url must be http:// or https:// (found {scheme}://)"
        )));
    }
    if rest.is_empty() || rest.starts_with('/') {
        return Err(usage(format!("--url has no host: {url:?}")));
    }
    Ok(())
}

fn pairs_of(words: &[String], sep: char, what: &str) -> Result<Vec<(String, String)>, Failure> {
    words
        .iter()
        .map(|w| {
            w.split_once(sep)
                .filter(|(k, _)| !k.trim().is_empty())
                .map(|(k, v)| (k.trim().to_owned(), v.trim_start().to_owned()))
                .ok_or_else(|| usage(format!("{what} expects NAME{sep}VALUE, found {w:?}")))
        })
        .collect()
}

/// The config file's servers: `--config FILE`, else the default file.
pub(crate) fn config_servers(
    path: Option<&Path>,
) -> Result<(PathBuf, indexmap::IndexMap<String, config::Entry>), Failure> {
    let path = match path {
        Some(p) => p.to_owned(),
        None => config::default_path().ok_or_else(|| {
            usage("no config folder is known (set HOME or TERN_CONFIG, or give --config FILE)")
        })?,
    };
    if !path.exists() {
        return Err(usage(format!(
            "no config file at {}: write one ({{\"mcpServers\": {{\"NAME\": {{\"command\": \"...\", \"args\": [...]}}}}}}) or give --config FILE",
            path.display()
        )));
    }
    let servers = config::load(&path).map_err(usage)?;
    Ok((path, servers))
}

fn target(server: &ServerArgs) -> Result<Target, Failure> {
    let named = usize::from(server.url.is_some())
        + usize::from(server.demo)
        + usize::from(server.server.is_some())
        + usize::from(!server.command.is_empty());
    if named != 1 {
        return Err(usage(
            "name the server once: --url URL, --demo, --server NAME, or -- COMMAND ARGS... (last on the line)",
        ));
    }
    let mut env = pairs_of(&server.env, '=', "-e")?;
    let mut headers = pairs_of(&server.header, ':', "--header")?;
    if let Some(name) = &server.server {
        let (path, servers) = config_servers(server.config.as_deref())?;
        let Some(entry) = servers.get(name) else {
            let hint = crate::suggest::did_you_mean(name, servers.keys().map(String::as_str));
            return Err(usage(format!(
                "{} names no server `{name}`{hint}; it has: {}",
                path.display(),
                servers.keys().cloned().collect::<Vec<_>>().join(", ")
            )));
        };
        // The command line's -e and --header come after the file's.
        let mut file_env: Vec<(String, String)> = entry.env.clone().into_iter().collect();
        file_env.append(&mut env);
        let mut file_headers: Vec<(String, String)> = entry.headers.clone().into_iter().collect();
        file_headers.append(&mut headers);
        if let Some(url) = &entry.url {
            check_url(url)?;
            return Ok(Target::Url {
                url: url.clone(),
                headers: file_headers,
            });
        }
        let mut words = vec![entry.command.clone().unwrap_or_default()];
        words.extend(entry.args.iter().cloned());
        return Ok(Target::Command {
            words,
            env: file_env,
        });
    }
    if !headers.is_empty() && server.url.is_none() {
        return Err(usage("--header is for HTTP servers (--url)"));
    }
    if !env.is_empty() && server.url.is_some() {
        return Err(usage("-e is for stdio servers (--demo or -- COMMAND)"));
    }
    Ok(if let Some(url) = &server.url {
        check_url(url)?;
        Target::Url {
            url: url.clone(),
            headers,
        }
    } else if server.demo {
        Target::Demo { env }
    } else {
        Target::Command {
            words: server.command.clone(),
            env,
        }
    })
}

/// Finishes a client builder over the transport `connect` made.
type Build = Box<dyn FnOnce(tern_client::ClientBuilder) -> Client>;

/// A started or reached server: how to build the client over it, and
/// (stdio) its death watch.
struct Started {
    build: Build,
    watch: Option<ChildWatch>,
    /// A server of either era: its cache key and transport, to remember
    /// what it spoke ([`crate::era_cache`]).
    era: Option<(String, Arc<DualEra>)>,
}

/// Remembers the era the run found, for the next run.
fn remember_era(era: Option<&(String, Arc<DualEra>)>) {
    if let Some((key, dual)) = era
        && let Some(era) = dual.era()
    {
        crate::era_cache::record(key, &era);
    }
}

/// A transport of either era, hinted with what an earlier run found.
fn hinted(dual: DualEra, key: &str) -> DualEra {
    if crate::era_cache::spoke_legacy(key) {
        dual.legacy_hint()
    } else {
        dual
    }
}

/// How to name the server when it does not name itself, and its URL.
fn label_of(target: &Target) -> (String, Option<String>) {
    match target {
        Target::Url { url, .. } => (url.clone(), Some(url.clone())),
        Target::Demo { .. } => ("the demo server".into(), None),
        Target::Command { words, .. } => (format!("`{}`", words.join(" ")), None),
    }
}

/// Who asks, as this run's configuration names the server: the
/// `--server` key, else the URL's host, else the command (never what the
/// server's `serverInfo` claims).
fn local_name(server: &ServerArgs, target: &Target) -> String {
    if let Some(name) = &server.server {
        return format!("`{}`", tern::safe::line(name));
    }
    match target {
        Target::Url { url, .. } => tern::safe::line(authority(url)).into_owned(),
        Target::Demo { .. } => "the demo server".into(),
        Target::Command { words, .. } => format!("`{}`", tern::safe::line(&words.join(" "))),
    }
}

/// Starts or reaches the server.
fn connect(target: &Target, verbose: bool, session: &Arc<Session>) -> Result<Started, Failure> {
    let transport_failure = |e: ClientError| Failure {
        code: EXIT_TRANSPORT,
        message: format!("{e:#}"),
    };
    // The demo speaks 2026-07-28; any other server may be of either era
    // (spec §8.3): its first request probes.
    let spawn = |program: &str, args: &[String], env: &[(String, String)], dual: bool| {
        // Ctrl-C is tern's to handle: it cancels what is in flight.
        let mut options = SpawnOptions::default().own_process_group();
        for (k, v) in env {
            options = options.env(k, v);
        }
        if verbose {
            let s = Arc::clone(session);
            options = options.on_stderr(Arc::new(move |line: &str| {
                s.progress.interrupt();
                eprintln!("server: {}", tern::safe::line(line));
            }));
        }
        let failed = |e: ClientError| Failure {
            code: EXIT_TRANSPORT,
            message: format!("{e:#}{}", spawn_hint(program)),
        };
        if dual {
            let key = crate::era_cache::command_key(program, args);
            let t = DualEra::stdio_with_options(program, args, options).map_err(failed)?;
            let t = Arc::new(hinted(t, &key));
            let watch = t.watch();
            let shared = Arc::clone(&t);
            return Ok::<_, Failure>(Started {
                build: Box::new(move |b| b.build(shared)),
                watch,
                era: Some((key, t)),
            });
        }
        let t = ChildProcess::spawn_with_options(program, args, options).map_err(failed)?;
        let watch = t.watch();
        Ok::<_, Failure>(Started {
            build: Box::new(move |b| b.build(t)),
            watch: Some(watch),
            era: None,
        })
    };
    match target {
        Target::Url { url, headers } => {
            let mut t = DualEra::http(url).map_err(transport_failure)?;
            if let Some(tls) = env_tls() {
                t = t.with_tls(&tls).map_err(transport_failure)?;
            }
            // A grant `tern login` kept: sent, refreshed, renewed.
            let has_authorization = headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
            if !has_authorization
                && let Ok(oauth) = oauth_for(url, None, None, None)
                && oauth.has_grant()
            {
                t = t.with_oauth(oauth).map_err(transport_failure)?;
            }
            for (k, v) in headers {
                t = t.with_header(k, v);
            }
            let t = Arc::new(hinted(t, url));
            let shared = Arc::clone(&t);
            Ok(Started {
                build: Box::new(move |b| b.build(shared)),
                watch: None,
                era: Some((url.clone(), t)),
            })
        }
        Target::Demo { env } => {
            let exe = std::env::current_exe().map_err(|e| Failure {
                code: EXIT_TRANSPORT,
                message: format!("cannot find the tern executable to run the demo: {e}"),
            })?;
            let exe = exe.to_str().ok_or_else(|| Failure {
                code: EXIT_TRANSPORT,
                message: format!("the tern executable's path is not UTF-8: {}", exe.display()),
            })?;
            let args = ["serve", "demo", "--stdio"].map(String::from);
            spawn(exe, &args, env, false)
        }
        Target::Command { words, env } => spawn(&words[0], &words[1..], env, true),
    }
}

/// The CA file of `TERN_CA_FILE`, if set.
fn env_tls() -> Option<tern_client::transport::tls::TlsOptions> {
    std::env::var_os("TERN_CA_FILE")
        .filter(|p| !p.is_empty())
        .map(|p| tern_client::transport::tls::TlsOptions::new().with_ca_file(PathBuf::from(p)))
}

/// `url` as OAuth keys its grants (normalised by the URL parser).
pub(crate) fn endpoint(url: &str) -> String {
    tern_client::auth::Url::parse(url).map_or_else(|_| url.to_owned(), |u| u.to_string())
}

/// OAuth for `url` as `tern login` and the `--url` commands use it: grants in
/// the config folder, the loopback browser, `ca_file` (else `TERN_CA_FILE`).
pub(crate) fn oauth_for(
    url: &str,
    ca_file: Option<PathBuf>,
    client_id: Option<String>,
    client_secret: Option<String>,
) -> Result<tern_client::auth::OAuth, String> {
    use tern_client::auth::{OAuth, OAuthConfig, PreRegistered};
    let store = tern::login::FileTokenStore::default_store()
        .ok_or("no config folder is known to keep tokens in (set HOME or XDG_CONFIG_HOME)")?;
    let browser = tern::login::LoopbackBrowser::new()
        .map_err(|e| format!("cannot listen on loopback for the redirect: {e}"))?;
    let mut config = OAuthConfig::new("tern");
    if let Some(id) = client_id {
        config = config.pre_registered(PreRegistered::new(None, id, client_secret));
    }
    let tls = ca_file
        .map(|p| tern_client::transport::tls::TlsOptions::new().with_ca_file(p))
        .or_else(env_tls);
    let mut oauth = OAuth::new(url, config, browser)
        .map_err(|e| format!("{e:#}"))?
        .with_store(store);
    if let Some(tls) = tls {
        oauth = oauth.with_tls(&tls).map_err(|e| format!("{e:#}"))?;
    }
    Ok(oauth)
}

/// Advice when a program cannot be started.
fn spawn_hint(program: &str) -> String {
    if program.contains('/') {
        String::new()
    } else {
        format!(" (is `{program}` installed and on PATH?)")
    }
}

/// The first `std::io::Error` in `e`'s causes.
fn io_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cause = c.source();
    }
    None
}

/// `HOST:PORT` of an `http(s)://` URL.
fn authority(url: &str) -> &str {
    url.split_once("://").map_or(url, |(_, rest)| {
        rest.split(['/', '?', '#']).next().unwrap_or(rest)
    })
}

/// Advice for an HTTP failure: what the person can do.
fn http_advice(e: &ClientError, url: &str) -> Option<String> {
    let text = format!("{e:#}");
    if let Some(io) = io_cause(e) {
        let addr = authority(url);
        return Some(match io.kind() {
            std::io::ErrorKind::ConnectionRefused => format!(
                "nothing is listening at {addr} (connection refused): is the server running? (e.g. tern serve demo --http {addr})"
            ),
            std::io::ErrorKind::TimedOut => format!("{addr} did not accept the connection in time"),
            _ => format!("cannot reach {addr}: {io}"),
        });
    }
    if text.contains("dns error") || text.contains("failed to lookup") {
        return Some(format!(
            "the host of {url} is not known (check its spelling)"
        ));
    }
    if text.contains("HTTP 401") {
        return Some(format!(
            "{url} wants authorization: run `tern login --url {url}` (or pass --header 'Authorization: Bearer TOKEN')"
        ));
    }
    if text.contains("404") {
        let path = url
            .split_once("://")
            .and_then(|(_, r)| r.find('/').map(|i| &r[i..]))
            .unwrap_or("");
        return Some(if path.is_empty() || path == "/" {
            format!(
                "{url} answered 404 Not Found: MCP servers usually serve at a path; try {}/mcp",
                url.trim_end_matches('/')
            )
        } else {
            format!(
                "{url} answered 404 Not Found: is {path} the server's MCP endpoint? (tern serve demo serves /mcp)"
            )
        });
    }
    None
}

/// What a client error means for the exit code, with advice.
pub(crate) fn failure(e: &ClientError, session: &Session) -> Failure {
    if let Some(rpc) = e.rpc_error() {
        if rpc.code == code::MISSING_REQUIRED_CLIENT_CAPABILITY {
            let needs = rpc
                .missing_capability_data()
                .and_then(|d| serde_json::to_value(d.required_capabilities).ok())
                .unwrap_or_default();
            let mut advice = Vec::new();
            if needs.get("elicitation").is_some() {
                advice.push("answer its questions in a terminal (without --no-input), or preset them with --answer KEY=VALUE / --answers FILE (tern questions shows them)");
            }
            if needs.get("sampling").is_some() {
                advice.push("give a --sampler COMMAND, or type the reply in a terminal (without --no-input)");
            }
            let needs = if needs.is_null() {
                String::new()
            } else {
                format!(" (it requires {needs})")
            };
            let advice = if advice.is_empty() {
                String::new()
            } else {
                format!("; {}", advice.join("; "))
            };
            return Failure {
                code: EXIT_NEEDS_INPUT,
                message: format!(
                    "the server needs input this run does not offer: {} [{}]{needs}{advice}",
                    rpc.message, rpc.code
                ),
            };
        }
        // The chain is one line; the server's message in it stays one.
        return Failure {
            code: EXIT_SERVER,
            message: tern::safe::line(&format!("{e:#}")).into_owned(),
        };
    }
    if e.is_transport() {
        let advice = session.url.as_deref().and_then(|url| http_advice(e, url));
        return Failure {
            code: EXIT_TRANSPORT,
            message: match advice {
                Some(a) => a,
                None => format!("{}: {e:#}", session.fallback_name),
            },
        };
    }
    let code = if e.is_handler() && session.refused() {
        EXIT_REFUSED
    } else if e.is_handler() || e.is_unanswerable() || e.is_answer() {
        EXIT_NEEDS_INPUT
    } else {
        EXIT_SERVER
    };
    // `{:#}`: the error and its causes (a handler's own reason, the
    // decoder's), as one line.
    Failure {
        code,
        message: tern::safe::line(&format!("{e:#}")).into_owned(),
    }
}

#[allow(
    clippy::print_stdout,
    reason = "the result is the command's output, on standard output"
)]
fn emit(text: &str) {
    // The last guard: whatever a server put in the text, no control
    // character reaches standard output (a terminal or a pipe).
    print!("{}", tern::safe::text(text));
    let _ = std::io::stdout().flush();
}

/// `value` as exact JSON, C1, bidi and zero-width characters escaped too
/// ([`tern::safe::json`]).
fn emit_json(value: &impl Serialize) {
    emit(&format!("{}\n", tern::safe::json(value)));
}

/// A connected client and what the run knows around it.
pub(crate) struct Connected {
    /// The loop of rounds (and the client in it).
    pub(crate) driver: Driver,
    /// `--json`.
    pub(crate) json: bool,
}

/// Runs one client subcommand; `Ok` carries the exit code of a completed
/// request (0, or 1 for `isError` / a refused question).
pub(crate) async fn run(
    op: Op,
    server: &ServerArgs,
    input: Option<&InputArgs>,
) -> Result<u8, Failure> {
    // Usage first: nothing starts when the line is wrong.
    let target = target(server)?;
    if !(server.timeout.is_finite() && server.timeout > 0.0) {
        return Err(usage("--timeout takes a number of seconds above 0"));
    }
    let timeout = Duration::from_secs_f64(server.timeout.min(86_400.0));
    let default_input = InputArgs::default();
    let input_given = input.is_some();
    let input = input.unwrap_or(&default_input);
    let presets = preset_answers(input)?;
    let no_input = input.no_input || matches!(op, Op::Questions { .. });
    let sampler = input.sampler.clone();
    let roots = crate::terminal::roots(&input.root).map_err(usage)?;
    let interactive = std::io::stdin().is_terminal() && !no_input;

    let (label, url) = label_of(&target);
    let session = Session::new(label, local_name(server, &target), url);
    let started = connect(&target, server.verbose, &session)?;
    let used = Arc::new(std::sync::Mutex::new(Vec::new()));
    let live = LivePresets::new(presets.clone(), Arc::clone(&used));
    let client = build_client(
        started.build,
        &session,
        interactive,
        (sampler.clone(), roots),
        live,
    );

    // Honest capabilities: nothing is declared that this run cannot answer
    // (`tern questions` declares what a terminal would, to see the
    // questions a person would be asked).
    let activity = Arc::new(Activity::default());
    let progress_session = Arc::clone(&session);
    let progress_activity = Arc::clone(&activity);
    let mut options = CallOptions::default().with_progress(Arc::new(move |p| {
        progress_activity.touch();
        progress_session.progress.show(p);
    }));
    if !matches!(op, Op::Questions { .. }) {
        options.drop_elicitation = !interactive && presets.is_empty();
        options.drop_sampling = !interactive && sampler.is_none() && presets.is_empty();
    }
    let preset_refusals: Vec<String> = presets
        .keys()
        .into_iter()
        .filter(|k| presets.refuses(k))
        .collect();
    let connected = Connected {
        driver: Driver {
            client: client.clone(),
            session: Arc::clone(&session),
            presets,
            interactive,
            timeout,
            options,
            activity,
            watch: started.watch.clone(),
            used,
        },
        json: server.json,
    };

    let work = execute(&connected, op);
    let outcome = tokio::select! {
        r = work => Some(r),
        () = interrupt() => None,
    };
    session.progress.interrupt();
    let Some(outcome) = outcome else {
        // The request future is dropped: over stdio its exchange sent
        // notifications/cancelled, over HTTP its stream is closed.
        crate::terminal::restore();
        let message = interrupted(&client, &session, interactive).await;
        client.close().await;
        return Err(Failure {
            code: EXIT_INTERRUPTED,
            message,
        });
    };
    // Unused presets are worth a warning once the server answered or asked;
    // a call refused before that (a 401, a dead server) says only why.
    if input_given && (outcome.is_ok() || !session.asked_keys().is_empty()) {
        connected.driver.warn_unused();
    }
    remember_era(started.era.as_ref());
    client.close().await;
    let code = match outcome {
        Ok(code) => code,
        Err(f) if server.verbose => return Err(f),
        Err(f) => return Err(with_last_words(f, started.watch.as_ref())),
    };
    // A preset decline or cancel counts like one typed, once it was asked.
    if session.was_asked(&preset_refusals) {
        session.refuse();
    }
    if session.refused() && code == EXIT_OK {
        eprintln!(
            "tern: you declined or cancelled a question; the result above is the server's fallback"
        );
        return Ok(EXIT_REFUSED);
    }
    Ok(code)
}

/// What Ctrl-C cancelled.
fn interrupted_message(session: &Session) -> String {
    match session.phase() {
        Phase::InFlight(what) => {
            let how = if session.url.is_some() {
                "closed its HTTP stream"
            } else {
                "told the server with notifications/cancelled"
            };
            format!("interrupted: cancelled {what} in flight ({how})")
        }
        Phase::Question(keys) => {
            format!("interrupted at the question {keys}: abandoned the call, nothing was sent")
        }
        Phase::Idle => "interrupted".to_owned(),
    }
}

/// A server failure with the server's last words (its last lines of
/// standard error), unless there are none.
fn with_last_words(mut f: Failure, watch: Option<&ChildWatch>) -> Failure {
    if f.code == EXIT_SERVER
        && let Some(watch) = watch
    {
        let tail = watch.stderr_tail();
        if !tail.is_empty() {
            f.message
                .push_str("\nthe server's last lines of standard error:");
            for line in tail {
                let _ = write!(f.message, "\n  | {}", tern::safe::line(&line));
            }
        }
    }
    f
}

/// The client, with the terminal as its handlers.
fn build_client(
    build: Build,
    session: &Arc<Session>,
    interactive: bool,
    (sampler, roots): (Option<String>, Vec<tern_protocol::roots::Root>),
    live: LivePresets,
) -> Client {
    let mut info = Implementation::new("tern", env!("CARGO_PKG_VERSION"));
    info.title = Some("tern command".into());
    // tern follows tasks (polls, asks their questions, offers to cancel
    // or leave one running on Ctrl-C), so it declares the extension.
    let builder = Client::builder()
        .info(info)
        .tasks(true)
        .elicitation(TerminalElicitation {
            session: Arc::clone(session),
            interactive,
            live: live.clone(),
        })
        .sampling(TerminalSampling {
            session: Arc::clone(session),
            interactive,
            sampler: sampler.map_or(Sampler::Human, Sampler::Command),
            live,
        })
        .roots(StaticRoots(roots))
        // tern's own loop bounds each leg (--timeout); the library's
        // whole-call deadline would count the time a person answers.
        .limits(Limits::default());
    build(builder)
}

/// Ctrl-C: the signal (line prompts, waiting) or the key inside a widget.
async fn interrupt() {
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if r.is_err() {
                // No signal handling here: only the widget's key.
                std::future::pending::<()>().await;
            }
        }
        () = crate::prompt::interrupted() => {}
    }
}

/// The tool named `name`, with "did you mean" when it does not exist;
/// `None` when the server cannot list its tools.
async fn find_tool(c: &Connected, name: &str) -> Result<Option<Tool>, Failure> {
    let d = &c.driver;
    let tools = match d.wait_raw("tools/list", d.client.list_tools()).await? {
        Ok(t) => t,
        // A server that cannot list its tools: the call says the rest.
        Err(e) if e.rpc_error().is_some() => return Ok(None),
        Err(e) => return Err(failure(&e, &d.session)),
    };
    if let Some(t) = tools.iter().find(|t| t.name == name) {
        return Ok(Some(t.clone()));
    }
    let hint = crate::suggest::did_you_mean(name, tools.iter().map(|t| t.name.as_str()));
    Err(usage(format!(
        "{} has no tool `{name}`{hint}; `tern tools` lists its {} tools",
        d.who(),
        tools.len()
    )))
}

/// The arguments checked against the tool's schema (and typed by it).
async fn checked_arguments(
    c: &Connected,
    tool: &str,
    mut args: JsonObject,
) -> Result<JsonObject, Failure> {
    if let Some(t) = find_tool(c, tool).await? {
        crate::schema::check(&mut args, &t.input_schema).map_err(|problems| {
            usage(format!(
                "the arguments do not fit {tool}'s input schema:\n  {}\n(`tern tools` shows its arguments)",
                problems.join("\n  ")
            ))
        })?;
    }
    Ok(args)
}

async fn execute(c: &Connected, op: Op) -> Result<u8, Failure> {
    let d = &c.driver;
    let json = c.json;
    match op {
        Op::Discover => {
            let r = d.wait("server/discover", d.client.discover()).await?;
            if json {
                emit_json(&r);
            } else {
                emit(&output::discover(&r));
            }
        }
        Op::Tools => {
            let tools = d.wait("tools/list", d.client.list_tools()).await?;
            if json {
                emit_json(&json!({ "tools": tools }));
            } else {
                emit(&output::tools(&tools));
            }
        }
        Op::Prompts => {
            let prompts = d.wait("prompts/list", d.client.list_prompts()).await?;
            if json {
                emit_json(&json!({ "prompts": prompts }));
            } else {
                emit(&output::prompts(&prompts));
            }
        }
        Op::Resources => {
            let resources = d.wait("resources/list", d.client.list_resources()).await?;
            let templates = match d
                .wait(
                    "resources/templates/list",
                    d.client.list_resource_templates(),
                )
                .await
            {
                Err(f) if f.code == EXIT_SERVER => Vec::new(),
                other => other?,
            };
            if json {
                emit_json(&json!({ "resources": resources, "resourceTemplates": templates }));
            } else {
                emit(&output::resources(&resources, &templates));
            }
        }
        Op::Call { tool, pairs, args } => {
            let args = tool_arguments(&pairs, args.as_deref())?;
            let args = checked_arguments(c, &tool, args).await?;
            let done = d.run(&First::Tool(tool.clone(), args)).await?;
            return Ok(print_completed(&done, json, Some(&tool)));
        }
        Op::Prompt { name, pairs } => {
            let args = prompt_arguments(&pairs)?;
            check_prompt(c, &name, &args).await?;
            let done = d
                .run(&First::Prompt(name, Some(args).filter(|a| !a.is_empty())))
                .await?;
            return Ok(print_completed(&done, json, None));
        }
        Op::Read { uri } => match d.run(&First::Read(uri.clone())).await {
            Ok(done) => return Ok(print_completed(&done, json, None)),
            Err(mut f) => {
                if f.code == EXIT_SERVER
                    && let Ok(list) = d.wait("resources/list", d.client.list_resources()).await
                    && !list.iter().any(|r| r.uri == uri)
                {
                    let hint =
                        crate::suggest::did_you_mean(&uri, list.iter().map(|r| r.uri.as_str()));
                    let _ = write!(f.message, "\n(`{uri}` is not among its resources{hint})");
                }
                return Err(f);
            }
        },
        Op::Questions { tool, pairs, args } => {
            let args = tool_arguments(&pairs, args.as_deref())?;
            let args = checked_arguments(c, &tool, args).await?;
            return questions(c, &tool, args).await;
        }
        Op::Task { action, id } => return task(c, action, &id).await,
    }
    Ok(EXIT_OK)
}

/// `tern task get|wait|cancel ID`.
async fn task(c: &Connected, action: TaskAction, id: &str) -> Result<u8, Failure> {
    let d = &c.driver;
    let handle = d.client.task(id);
    match action {
        TaskAction::Get => {
            let task = d.task_request(id, "tasks/get", handle.get()).await?;
            if c.json {
                emit_json(&task);
            } else {
                emit(&format!(
                    "task {id}: {}\n",
                    crate::rounds::task_line(&task.task)
                ));
                if let Some(Ok(result)) = task.call_tool_result() {
                    emit(&output::call(&result));
                }
                if let Some(e) = &task.error {
                    emit(&format!("error: {}\n", tern::safe::line(&e.to_string())));
                }
            }
            Ok(EXIT_OK)
        }
        TaskAction::Wait => {
            let mut sent = std::collections::HashMap::new();
            let result = d.follow_task(id, id, &mut sent).await?;
            Ok(print_completed(&Completed::Tool(result), c.json, None))
        }
        TaskAction::Cancel => {
            let mut handle = handle;
            d.task_request(id, "tasks/cancel", handle.cancel()).await?;
            if c.json {
                emit_json(&json!({"taskId": id, "cancelRequested": true}));
            } else {
                eprintln!(
                    "tern: asked {} to cancel task {id} (it stops at its next check; tern task get {id} shows how it ended)",
                    d.who()
                );
            }
            Ok(EXIT_OK)
        }
    }
}

/// What Ctrl-C did: for a task being followed, what [`task_interrupted`]
/// chose; else what it cancelled.
async fn interrupted(client: &Client, session: &Session, interactive: bool) -> String {
    let following = session
        .task
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match following {
        Some(id) => task_interrupted(client, session, &id, interactive).await,
        None => interrupted_message(session),
    }
}

/// Ctrl-C while following task `id`: offers (on a terminal) to cancel it,
/// else leaves it running; what happened, for the exit message.
async fn task_interrupted(
    client: &Client,
    session: &Session,
    id: &str,
    interactive: bool,
) -> String {
    let cancel = interactive && {
        eprint!(
            "\ntern: task {id} is still running on {}. Cancel it? [y/N] ",
            session.fallback_name
        );
        let line = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        });
        matches!(
            tokio::time::timeout(Duration::from_secs(60), line).await,
            Ok(Ok(Ok(l))) if matches!(l.trim(), "y" | "Y" | "yes")
        )
    };
    if cancel {
        match client.task(id).cancel().await {
            Ok(()) => format!("interrupted: asked the server to cancel task {id}"),
            Err(e) => format!("interrupted: task {id} could not be cancelled: {e}"),
        }
    } else {
        format!(
            "interrupted: task {id} is left running; `tern task wait {id}` follows it and `tern task cancel {id}` cancels it (with the same server options)"
        )
    }
}

/// A prompt that exists, with its required arguments.
async fn check_prompt(c: &Connected, name: &str, args: &JsonObject) -> Result<(), Failure> {
    let d = &c.driver;
    let prompts = match d.wait_raw("prompts/list", d.client.list_prompts()).await? {
        Ok(p) => p,
        Err(e) if e.rpc_error().is_some() => return Ok(()),
        Err(e) => return Err(failure(&e, &d.session)),
    };
    let Some(p) = prompts.iter().find(|p| p.name == name) else {
        let hint = crate::suggest::did_you_mean(name, prompts.iter().map(|p| p.name.as_str()));
        return Err(usage(format!(
            "{} has no prompt `{name}`{hint}; `tern prompts` lists its {} prompts",
            d.who(),
            prompts.len()
        )));
    };
    let missing: Vec<&str> = p
        .arguments
        .iter()
        .flatten()
        .filter(|a| a.required == Some(true) && !args.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(usage(format!(
            "the prompt {name} needs {}: add {}",
            missing.join(", "),
            missing
                .iter()
                .map(|m| format!("{m}=VALUE"))
                .collect::<Vec<_>>()
                .join(" ")
        )))
    }
}

/// Prints a result; its exit code.
fn print_completed(done: &Completed, json: bool, tool: Option<&str>) -> u8 {
    match done {
        Completed::Tool(r) => {
            if json {
                emit_json(r);
            } else if r.is_error() {
                eprint!("{}", tern::safe::text(&output::call(r)));
            } else {
                emit(&output::call(r));
            }
            if r.is_error() {
                eprintln!("tern: {} reported an error", tool.unwrap_or("the tool"));
                return EXIT_REFUSED;
            }
        }
        Completed::Prompt(r) => {
            if json {
                emit_json(r);
            } else {
                emit(&output::prompt(r));
            }
        }
        Completed::Resource(r) => {
            if json {
                emit_json(r);
            } else {
                emit(&output::read(r));
            }
        }
        #[allow(unreachable_patterns, reason = "Completed may grow variants")]
        _ => {
            eprintln!("tern: the server's result is of a kind this tern does not know");
            return EXIT_SERVER;
        }
    }
    EXIT_OK
}

/// `tern questions`: the first round's questions (to standard error, for
/// people) and an answers file for them (to standard output, for
/// `--answers FILE`); `--json` prints the questions themselves.
async fn questions(c: &Connected, tool: &str, args: JsonObject) -> Result<u8, Failure> {
    let d = &c.driver;
    match d.first(&First::Tool(tool.to_owned(), args)).await? {
        Round::Complete(done) => {
            eprintln!(
                "tern: {tool} asked no questions: its first round completed the call (it ran):"
            );
            Ok(print_completed(&done, c.json, Some(tool)))
        }
        Round::InputRequired(pending) => {
            if c.json {
                emit_json(&pending.input_requests);
            } else {
                eprint!(
                    "{}",
                    tern::safe::text(&crate::questions::describe(tool, &pending.input_requests))
                );
                emit_json(&crate::questions::template(&pending.input_requests));
            }
            Ok(EXIT_OK)
        }
        _ => Err(Failure {
            code: EXIT_SERVER,
            message: "the server's reply is an outcome this tern does not know".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_values_are_json_when_they_parse_and_strings_otherwise() {
        let args = tool_arguments(
            &[
                "name=orders".into(),
                "n=3".into(),
                "ok=true".into(),
                "s=\"3\"".into(),
                "e=".into(),
                "l=[1,2]".into(),
            ],
            Some(r#"{"name": "x", "keep": 1}"#),
        )
        .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"name": "orders", "keep": 1, "n": 3, "ok": true, "s": "3", "e": "", "l": [1, 2]})
        );
        assert_eq!(
            tool_arguments(&["novalue".into()], None).unwrap_err().code,
            EXIT_USAGE
        );
        assert_eq!(
            tool_arguments(&[], Some("[1]")).unwrap_err().code,
            EXIT_USAGE
        );
    }

    #[test]
    fn prompt_arguments_are_strings() {
        let args = prompt_arguments(&["service=api".into(), "n=3".into()]).unwrap();
        assert_eq!(Value::Object(args), json!({"service": "api", "n": "3"}));
    }

    #[test]
    fn a_url_needs_a_scheme_and_a_host() {
        let e = check_url("localhost:8080").unwrap_err();
        assert_eq!(e.code, EXIT_USAGE);
        assert!(
            e.message.contains("http://localhost:8080/mcp"),
            "{}",
            e.message
        );
        assert!(check_url("ftp://x/mcp").is_err());
        assert!(check_url("http:///mcp").is_err());
        assert!(check_url("https://example.com/mcp").is_ok());
    }

    #[test]
    fn the_authority_of_a_url() {
        assert_eq!(authority("http://127.0.0.1:9/mcp"), "127.0.0.1:9");
        assert_eq!(authority("http://h:1"), "h:1");
    }

    #[test]
    fn env_and_header_words_split_once() {
        assert_eq!(
            pairs_of(&["A=b=c".into()], '=', "-e").unwrap(),
            [("A".to_owned(), "b=c".to_owned())]
        );
        assert_eq!(
            pairs_of(&["Authorization: Bearer x".into()], ':', "--header").unwrap(),
            [("Authorization".to_owned(), "Bearer x".to_owned())]
        );
        assert_eq!(
            pairs_of(&["nope".into()], '=', "-e").unwrap_err().code,
            EXIT_USAGE
        );
    }
}
