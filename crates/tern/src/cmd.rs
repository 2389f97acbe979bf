//! The client subcommands: connect to a server (`--url`, `--demo` or
//! `-- COMMAND ARGS...`), make one request with the terminal as the input
//! handlers, print the result, and turn the outcome into an exit code.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;

use clap::Args;
use serde::Serialize;
use serde_json::{Value, json};
use tern_client::legacy::DualEra;
use tern_client::transport::stdio::ChildProcess;
use tern_client::{CallOptions, Client, ClientError, StaticRoots};
use tern_protocol::error::code;
use tern_protocol::mrtr::InputResponse;
use tern_protocol::{Implementation, InputResponses, JsonObject};

use crate::output;
use crate::terminal::{Sampler, Session, TerminalElicitation, TerminalSampling};

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
/// `--no-input`), or a question with no handler or preset answer.
pub(crate) const EXIT_NEEDS_INPUT: u8 = 5;

/// The exit codes' text.
macro_rules! exit_codes {
    () => {
        "\
Exit codes:
  0  success
  1  the tool reported an error (isError), or you declined or cancelled a
     question (the server's fallback result is still printed)
  2  usage error (bad arguments, unreadable --answers file)
  3  the server answered with an error (JSON-RPC error, unusable reply, or
     more rounds or time than allowed)
  4  transport error: the server could not be started or reached, or went away
  5  the server needs input this run cannot give: -32021 missing client
     capability (e.g. elicitation under --no-input), or a question with no
     preset answer when tern may not prompt"
    };
}

/// The exit codes, for each subcommand's `--help`.
pub(crate) const EXIT_CODES_HELP: &str = exit_codes!();

/// How servers are named, then the exit codes, for `tern --help`.
pub(crate) const TOP_HELP: &str = concat!(
    "\
Naming the server (discover, tools, prompts, resources, call, prompt, read):
  --url URL            a Streamable HTTP endpoint
  --demo               the built-in demo server, run as a child over stdio
  -- COMMAND ARGS...   a server run as a child over stdio (last on the line)

Example: tern call --demo provision_database name=orders

",
    exit_codes!()
);

/// How every client subcommand names its server.
#[derive(Debug, Args)]
pub(crate) struct ServerArgs {
    /// Talk to the Streamable HTTP endpoint at URL (http://HOST:PORT/mcp).
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// Run the built-in demo server as a child over stdio
    /// (`tern serve demo --stdio`).
    #[arg(long)]
    pub(crate) demo: bool,
    /// Print the raw result JSON (for scripts) instead of text.
    #[arg(long)]
    pub(crate) json: bool,
    /// Run this server as a child over stdio; last on the line, after `--`.
    #[arg(last = true, value_name = "COMMAND ARGS")]
    pub(crate) command: Vec<String>,
}

/// How questions are answered, for the subcommands that can be asked some.
#[derive(Debug, Args)]
pub(crate) struct InputArgs {
    /// Preset the answer to the question asked under KEY: JSON of an
    /// `ElicitResult` (e.g. `region={"action":"accept","content":{"region":"eu-west-1"}}`),
    /// a `CreateMessageResult` or a `ListRootsResult`. Repeatable.
    #[arg(long = "answer", value_name = "KEY=JSON")]
    pub(crate) answer: Vec<String>,
    /// Preset answers from a file: a JSON object of KEY: answer.
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

/// What to ask the server.
#[derive(Debug)]
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
}

/// A failed run: its exit code and what to tell the person.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: u8,
    /// The message (printed as `tern: MESSAGE`).
    pub(crate) message: String,
}

fn usage(message: impl Into<String>) -> Failure {
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

/// The preset answers of `--answers FILE` and then `--answer KEY=JSON`.
pub(crate) fn preset_answers(input: &InputArgs) -> Result<InputResponses, Failure> {
    let mut all = JsonObject::new();
    if let Some(path) = &input.answers {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
        match serde_json::from_str(&text) {
            Ok(Value::Object(o)) => all.extend(o),
            Ok(_) => {
                return Err(usage(format!(
                    "{}: expected a JSON object of KEY: answer",
                    path.display()
                )));
            }
            Err(e) => return Err(usage(format!("{}: not JSON: {e}", path.display()))),
        }
    }
    for word in &input.answer {
        let (key, value) = word
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| usage(format!("--answer expects KEY=JSON, found {word:?}")))?;
        let value: Value = serde_json::from_str(value).map_err(|e| {
            usage(format!(
                "--answer {key}=...: not JSON ({e}); e.g. --answer '{key}={{\"action\":\"accept\",\"content\":{{...}}}}'"
            ))
        })?;
        all.insert(key.to_owned(), value);
    }
    for (key, value) in &all {
        serde_json::from_value::<InputResponse>(value.clone())
            .map_err(|e| usage(format!("the answer for `{key}`: {e}")))?;
    }
    serde_json::from_value(Value::Object(all)).map_err(|e| usage(format!("answers: {e}")))
}

/// The server, as named on the command line.
enum Target {
    Url(String),
    Demo,
    Command(Vec<String>),
}

fn target(server: &ServerArgs) -> Result<Target, Failure> {
    let named = usize::from(server.url.is_some())
        + usize::from(server.demo)
        + usize::from(!server.command.is_empty());
    if named != 1 {
        return Err(usage(
            "name the server once: --url URL, --demo, or -- COMMAND ARGS... (last on the line)",
        ));
    }
    Ok(if let Some(url) = &server.url {
        Target::Url(url.clone())
    } else if server.demo {
        Target::Demo
    } else {
        Target::Command(server.command.clone())
    })
}

/// Finishes a client builder over the transport `connect` made.
type Build = Box<dyn FnOnce(tern_client::ClientBuilder) -> Client>;

/// Starts or reaches the server; returns how to build the client over it and
/// how to name the server when it does not name itself.
fn connect(target: &Target) -> Result<(Build, String), Failure> {
    let transport_failure = |e: ClientError| Failure {
        code: EXIT_TRANSPORT,
        message: format!("{e:#}"),
    };
    match target {
        // Servers of either era (spec §8.3): the first request probes.
        Target::Url(url) => {
            let t = DualEra::http(url).map_err(transport_failure)?;
            Ok((Box::new(move |b| b.build(t)), url.clone()))
        }
        Target::Demo => {
            let exe = std::env::current_exe().map_err(|e| Failure {
                code: EXIT_TRANSPORT,
                message: format!("cannot find the tern executable to run the demo: {e}"),
            })?;
            let exe = exe.to_str().ok_or_else(|| Failure {
                code: EXIT_TRANSPORT,
                message: format!("the tern executable's path is not UTF-8: {}", exe.display()),
            })?;
            let args = ["serve", "demo", "--stdio"].map(String::from);
            let t = ChildProcess::spawn(exe, &args).map_err(transport_failure)?;
            Ok((Box::new(move |b| b.build(t)), "the demo server".into()))
        }
        Target::Command(words) => {
            let t = DualEra::stdio(&words[0], &words[1..]).map_err(transport_failure)?;
            Ok((
                Box::new(move |b| b.build(t)),
                format!("`{}`", words.join(" ")),
            ))
        }
    }
}

/// What a client error means for the exit code, with advice.
fn failure(e: &ClientError, session: &Session) -> Failure {
    if let Some(rpc) = e.rpc_error() {
        if rpc.code == code::MISSING_REQUIRED_CLIENT_CAPABILITY {
            let needs = rpc
                .missing_capability_data()
                .and_then(|d| serde_json::to_value(d.required_capabilities).ok())
                .unwrap_or_default();
            let mut advice = Vec::new();
            if needs.get("elicitation").is_some() {
                advice.push("answer its questions in a terminal (without --no-input), or preset them with --answer KEY=JSON / --answers FILE");
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
        return Failure {
            code: EXIT_SERVER,
            message: format!("{e:#}"),
        };
    }
    if e.is_transport() {
        return Failure {
            code: EXIT_TRANSPORT,
            message: format!("{}: {e:#}", session.fallback_name),
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
        message: format!("{e:#}"),
    }
}

#[allow(
    clippy::print_stdout,
    reason = "the result is the command's output, on standard output"
)]
fn emit(text: &str) {
    print!("{text}");
    let _ = std::io::stdout().flush();
}

fn emit_json(value: &impl Serialize) {
    let text = serde_json::to_string_pretty(value).unwrap_or_default();
    emit(&format!("{text}\n"));
}

/// The progress and round callbacks: the progress line, and on a terminal a
/// line per MRTR round naming who asks what.
fn watchers(client: &Client, session: &Arc<Session>) -> CallOptions {
    let progress_session = Arc::clone(session);
    let round_client = client.clone();
    let round_session = Arc::clone(session);
    CallOptions::default()
        .with_progress(Arc::new(move |p| progress_session.progress.show(p)))
        .with_rounds(Arc::new(move |round, keys: &[String]| {
            round_session.asked(keys);
            if std::io::stderr().is_terminal() {
                let who = round_client.server_info().map_or_else(
                    || round_session.fallback_name.clone(),
                    |i| i.title.unwrap_or(i.name),
                );
                round_session.progress.interrupt();
                if keys.is_empty() {
                    eprintln!("tern: round {round}: {who} asks to retry (it is busy)");
                } else {
                    eprintln!(
                        "tern: round {round}: {who} asks before it can finish: {}",
                        keys.join(", ")
                    );
                }
            }
        }))
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
    let call_args = match &op {
        Op::Call { pairs, args, .. } => Some(tool_arguments(pairs, args.as_deref())?),
        _ => None,
    };
    let prompt_args = match &op {
        Op::Prompt { pairs, .. } => Some(prompt_arguments(pairs)?),
        _ => None,
    };
    let answers = match input {
        Some(i) => preset_answers(i)?,
        None => InputResponses::new(),
    };
    let no_input = input.is_some_and(|i| i.no_input);
    let sampler = input.and_then(|i| i.sampler.clone());
    let roots = crate::terminal::roots(input.map(|i| i.root.as_slice()).unwrap_or_default())
        .map_err(usage)?;
    let interactive = std::io::stdin().is_terminal() && !no_input;

    let (build, label) = connect(&target)?;
    let session = Session::new(label);
    let mut info = Implementation::new("tern", env!("CARGO_PKG_VERSION"));
    info.title = Some("tern command".into());
    let builder = Client::builder()
        .info(info)
        .elicitation(TerminalElicitation {
            session: Arc::clone(&session),
            interactive,
        })
        .sampling(TerminalSampling {
            session: Arc::clone(&session),
            interactive,
            sampler: sampler.clone().map_or(Sampler::Human, Sampler::Command),
        })
        .roots(StaticRoots(roots));
    let client = build(builder);

    // Honest capabilities: nothing is declared that this run cannot answer.
    let mut options = watchers(&client, &session);
    options.drop_elicitation = !interactive && answers.is_empty();
    options.drop_sampling = !interactive && sampler.is_none() && answers.is_empty();
    let preset_refusals: Vec<String> = answers
        .keys()
        .filter(|k| {
            answers
                .raw(k)
                .and_then(|a| a.get("action"))
                .and_then(Value::as_str)
                .is_some_and(|a| a == "decline" || a == "cancel")
        })
        .map(str::to_owned)
        .collect();
    options.answers = answers.into();

    let outcome = execute(
        &client,
        op,
        call_args,
        prompt_args,
        &options,
        server.json,
        &session,
    )
    .await;
    session.progress.interrupt();
    client.close().await;
    let code = outcome.map_err(|e| failure(&e, &session))?;
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

async fn execute(
    client: &Client,
    op: Op,
    call_args: Option<JsonObject>,
    prompt_args: Option<JsonObject>,
    options: &CallOptions,
    json: bool,
    session: &Session,
) -> Result<u8, ClientError> {
    match op {
        Op::Discover => {
            let d = client.discover().await?;
            if json {
                emit_json(&d);
            } else {
                emit(&output::discover(&d));
            }
        }
        Op::Tools => {
            let tools = client.list_tools().await?;
            if json {
                emit_json(&json!({ "tools": tools }));
            } else {
                emit(&output::tools(&tools));
            }
        }
        Op::Prompts => {
            let prompts = client.list_prompts().await?;
            if json {
                emit_json(&json!({ "prompts": prompts }));
            } else {
                emit(&output::prompts(&prompts));
            }
        }
        Op::Resources => {
            let resources = client.list_resources().await?;
            let templates = match client.list_resource_templates().await {
                Err(e)
                    if e.rpc_error()
                        .is_some_and(|r| r.code == code::METHOD_NOT_FOUND) =>
                {
                    Vec::new()
                }
                other => other?,
            };
            if json {
                emit_json(&json!({ "resources": resources, "resourceTemplates": templates }));
            } else {
                emit(&output::resources(&resources, &templates));
            }
        }
        Op::Call { tool, .. } => {
            let args = Value::Object(call_args.unwrap_or_default());
            let r = client.call_tool_with(&tool, Some(args), options).await?;
            // A bar the server never finished ends before the result.
            session.progress.interrupt();
            if json {
                emit_json(&r);
            } else if r.is_error() {
                eprint!("{}", output::call(&r));
            } else {
                emit(&output::call(&r));
            }
            if r.is_error() {
                eprintln!("tern: {tool} reported an error");
                return Ok(EXIT_REFUSED);
            }
        }
        Op::Prompt { name, .. } => {
            let args = prompt_args.filter(|a| !a.is_empty());
            let r = client.get_prompt(&name, args, options).await?;
            session.progress.interrupt();
            if json {
                emit_json(&r);
            } else {
                emit(&output::prompt(&r));
            }
        }
        Op::Read { uri } => {
            let r = client.read_resource(&uri, options).await?;
            session.progress.interrupt();
            if json {
                emit_json(&r);
            } else {
                emit(&output::read(&r));
            }
        }
    }
    Ok(EXIT_OK)
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
    fn preset_answers_are_checked() {
        let input = |answer: &[&str]| InputArgs {
            answer: answer.iter().map(|a| (*a).to_owned()).collect(),
            answers: None,
            no_input: false,
            sampler: None,
            root: Vec::new(),
        };
        let ok = preset_answers(&input(&[
            r#"region={"action":"accept","content":{"region":"eu-west-1"}}"#,
        ]))
        .unwrap();
        assert_eq!(ok.raw("region").unwrap()["action"], "accept");
        assert_eq!(
            preset_answers(&input(&["region=eu-west-1"]))
                .unwrap_err()
                .code,
            EXIT_USAGE
        );
        assert_eq!(
            preset_answers(&input(&[r#"region={"what":1}"#]))
                .unwrap_err()
                .code,
            EXIT_USAGE
        );
    }
}
