//! The `tern` command: call, inspect and serve Model Context Protocol
//! (2026-07-28) servers.
//!
//! ```text
//! tern discover  SERVER [--json]
//! tern tools     SERVER [--json]
//! tern prompts   SERVER [--json]
//! tern resources SERVER [--json]
//! tern call TOOL [key=value ...] [--args JSON] SERVER [INPUT] [--park FILE] [--json]
//! tern prompt NAME [key=value ...]              SERVER [INPUT] [--park FILE] [--json]
//! tern read URI                                 SERVER [INPUT] [--park FILE] [--json]
//! tern questions TOOL [key=value ...] [--run]   SERVER [--json]
//! tern listen URI... [--task ID]...              SERVER [--json]
//! tern resume FILE [--header NAME:VALUE]... [-e KEY=VALUE]... [INPUT] [--json]
//! tern servers [--config FILE]
//! tern completions SHELL
//! tern serve demo (--stdio | --http ADDR)
//! tern audit (--url URL | -- COMMAND ARGS...) [--tool NAME] [--allow-effects]
//!            [--aggressive] [--json]
//! tern keys generate
//!
//! SERVER: (--url URL [--header NAME:VALUE]... | --demo | --server NAME
//!          | -- COMMAND ARGS...) [-e KEY=VALUE]... [--config FILE]
//!         [--timeout SECONDS] [-v]          (`--` and the command last)
//! INPUT:  [--answer KEY=VALUE | KEY.FIELD=VALUE | KEY=JSON]...
//!         [--answers FILE] [--no-input] [--sampler COMMAND] [--root PATH]...
//! ```
//!
//! `key=value`: the value is JSON when it parses as JSON, else the string as
//! typed (`n=3` is a number, `name=orders` a string, `name='"3"'` the string
//! "3"); `--args` gives a JSON object that the pairs then extend. Prompt
//! arguments are always strings.
//!
//! When the server asks (MRTR), the person at the terminal answers: forms
//! rendered from `requestedSchema`, URL consent, sampling replies, and the
//! `--root` folders (roots are declared only with `--root`; a 2025-11-25
//! server gets them whenever it asks). Prompts go to standard error; results
//! to standard output. With standard input not a terminal, or with
//! `--no-input`, tern never prompts and declares elicitation (and sampling)
//! only when it can answer (preset answers, `--sampler`), so servers take
//! their fallback.
//!
//! Exit codes: 0 success; 1 the tool reported an error (`isError`) or the
//! person declined or cancelled a question; 2 usage error; 3 the server
//! answered with an error (or an unusable reply, or too many rounds); 4
//! transport error (cannot start or reach the server); 5 the server needs
//! input this run cannot give (`-32021` missing client capability, e.g. under
//! `--no-input`, or a question with no preset answer when tern may not
//! prompt, or a preset answer asked for again, or a 2025 server's `-32042`
//! pages to open first without a person to open them); 6 parked (`--park
//! FILE`: the server asked, the round is in FILE for `tern resume FILE`);
//! 130 interrupted (Ctrl-C).
//! `tern serve` and `tern keys` exit 0, 1 (runtime failure) or 2.
//!
//! This file parses the command line ([`cli`]) and dispatches: each
//! command lives in its own module under [`cmd`].

use std::process::ExitCode;

use clap::{CommandFactory, Parser};

mod advice;
mod answers;
mod cli;
mod cmd;
mod config;
mod era_cache;
mod exit;
mod form;
mod output;
mod prompt;
mod rounds;
mod schema;
mod suggest;
mod terminal;

use cli::{Cli, Command, TaskCommand};
use cmd::{Op, TaskAction};

/// Parses the command line; on a mistake prints clap's message without its
/// "use '-- --flag'" tip (`--` starts a server command here) and exits 2.
fn parse() -> Result<Cli, ExitCode> {
    match Cli::try_parse() {
        Ok(cli) => Ok(cli),
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return Err(ExitCode::SUCCESS);
            }
            let text = e.render().to_string();
            let kept: Vec<&str> = text
                .lines()
                .filter(|l| !l.trim_start().starts_with("tip: to pass"))
                .collect();
            eprintln!("{}", kept.join("\n"));
            Err(ExitCode::from(exit::EXIT_USAGE))
        }
    }
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    // Logs go to standard error: standard output carries protocol only
    // (and spans and counters over OTLP, with the `otel` feature).
    let _telemetry = tern::telemetry::init();
    let (op, server, input, park) = match cli.command {
        Command::Discover { server } => (Op::Discover, server, None, None),
        Command::Tools { server } => (Op::Tools, server, None, None),
        Command::Prompts { server } => (Op::Prompts, server, None, None),
        Command::Resources { server } => (Op::Resources, server, None, None),
        Command::Skills { server } => (Op::Skills, server, None, None),
        Command::Skill { name, save, server } => (Op::Skill { name, save }, server, None, None),
        Command::Call {
            tool,
            pairs,
            args,
            server,
            input,
            park,
        } => (Op::Call { tool, pairs, args }, server, Some(input), park),
        Command::Prompt {
            name,
            pairs,
            server,
            input,
            park,
        } => (Op::Prompt { name, pairs }, server, Some(input), park),
        Command::Read {
            uri,
            server,
            input,
            park,
        } => (Op::Read { uri }, server, Some(input), park),
        Command::Listen {
            uris,
            tasks,
            server,
        } => (Op::Listen { uris, tasks }, server, None, None),
        Command::Resume {
            file,
            server,
            input,
            park,
        } => match cmd::park::op(&file, server) {
            Ok((op, server)) => (op, server, Some(input), park),
            Err(failure) => return fail(&failure),
        },
        Command::Questions {
            tool,
            pairs,
            args,
            run,
            server,
        } => (
            Op::Questions {
                tool,
                pairs,
                args,
                run,
            },
            server,
            None,
            None,
        ),
        Command::Task { action } => {
            let (op, server, input) = task_op(action);
            (op, server, input, None)
        }
        Command::Servers { config } => return cmd::servers::command(config.as_deref()),
        Command::Completions { shell } => {
            let mut out = std::io::stdout();
            clap_complete::generate(shell, &mut Cli::command(), "tern", &mut out);
            return ExitCode::SUCCESS;
        }
        Command::Keys { action } => return cmd::keys::command(&action),
        Command::Login {
            url,
            ca_file,
            client_id,
            client_secret,
        } => return cmd::login::login(&url, ca_file, client_id, client_secret),
        Command::Logout { url } => return cmd::login::logout(&url),
        Command::Serve { server } => return cmd::serve::command(server),
        Command::Gateway(args) => return cmd::gateway::command(args),
        Command::Audit(args) => return cmd::audit::command(args),
    };
    let runtime = match cmd::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(cmd::run(op, &server, input.as_ref(), park));
    // A prompt abandoned (Ctrl-C, a dead server) may still block its thread
    // on the terminal: do not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => fail(&failure),
    }
}

/// `tern task get|wait|cancel ID` as a client operation.
fn task_op(action: TaskCommand) -> (Op, cmd::server::ServerArgs, Option<cmd::args::InputArgs>) {
    let (action, id, server, input) = match action {
        TaskCommand::Get { id, server } => (TaskAction::Get, id, server, None),
        TaskCommand::Wait { id, server, input } => (TaskAction::Wait, id, server, Some(input)),
        TaskCommand::Cancel { id, server } => (TaskAction::Cancel, id, server, None),
    };
    (Op::Task { action, id }, server, input)
}

/// A failed run's message, and its exit code.
fn fail(failure: &exit::Failure) -> ExitCode {
    // A failure quotes the server (its error, its standard error).
    eprintln!("tern: {}", tern::safe::text(&failure.message));
    ExitCode::from(failure.code)
}
