//! `tern keys generate`: a new key ring for `tern serve demo --keys FILE`.

use std::process::ExitCode;

use tern_server::KeyRing;

use clap::Subcommand;

pub(crate) fn command(action: &KeysAction) -> ExitCode {
    match action {
        KeysAction::Generate => {
            let ring = KeyRing::generate();
            #[allow(clippy::print_stdout, reason = "the key text is the command's output")]
            {
                print!("{}", ring.to_text().as_str());
            }
            ExitCode::SUCCESS
        }
    }
}

/// What `tern keys` does.
#[derive(Subcommand)]
pub(crate) enum KeysAction {
    /// Print a new key ring in the key file format.
    Generate,
}
