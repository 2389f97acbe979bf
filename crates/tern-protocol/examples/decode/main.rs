//! Decodes one JSON value from standard input strictly as a schema type and
//! prints its re-encoding.
//!
//! ```text
//! cargo run -p tern-protocol --example decode -- --type NAME [--tasks] < value.json
//! ```
//!
//! `NAME` is any `$defs` name of the 2026-07-28 schema or of the Tasks
//! extension schema (`JSONRPCMessage` for a whole message). `--tasks` says the
//! Tasks extension is in play, so a `tools/call` result may be a task.
//! Exit status: 0 decoded, 1 rejected (the reason on standard error), 2 usage.

use std::io::{Read, Write};
use std::process::ExitCode;

mod registry;

fn main() -> ExitCode {
    let mut type_name = None;
    let mut opts = registry::Options::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--type" => type_name = args.next(),
            "--tasks" => opts.tasks = true,
            _ => {
                eprintln!("usage: decode --type NAME [--tasks] < value.json");
                return ExitCode::from(2);
            }
        }
    }
    let Some(type_name) = type_name else {
        eprintln!("usage: decode --type NAME [--tasks] < value.json");
        return ExitCode::from(2);
    };
    let mut input = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut input) {
        eprintln!("cannot read standard input: {e}");
        return ExitCode::FAILURE;
    }
    match registry::decode(&type_name, &input, opts) {
        None => {
            eprintln!("unknown schema type {type_name:?}");
            ExitCode::from(2)
        }
        Some(Err(reason)) => {
            eprintln!("{type_name}: {reason}");
            ExitCode::FAILURE
        }
        Some(Ok(value)) => {
            let mut out = std::io::stdout().lock();
            let written =
                serde_json::to_writer_pretty(&mut out, &value).map_err(std::io::Error::from);
            match written.and_then(|()| writeln!(out)) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("cannot write standard output: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
