//! The `tern` command: call, inspect and serve Model Context Protocol servers.
//!
//! The command arrives with the client issue (`tern call`, `tern tools`, …) and
//! the server issue (`tern serve demo`). Until then it only says so.

use std::process::ExitCode;

fn main() -> ExitCode {
    eprintln!(
        "tern {}: the command-line tool is not built yet; see README.md",
        env!("CARGO_PKG_VERSION")
    );
    ExitCode::from(2)
}
