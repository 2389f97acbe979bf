//! `tern keys generate`: a new key ring for `tern serve demo --keys FILE`.

use std::process::ExitCode;

use tern_server::{KeyRing, TokenVersion};

use clap::{Subcommand, ValueEnum};

pub(crate) fn command(action: &KeysAction) -> ExitCode {
    match action {
        KeysAction::Generate { seal } => {
            let ring = KeyRing::generate().with_seal_version(seal.version());
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
    Generate {
        /// The token version the ring seals. `t1` (the default) opens on
        /// every release; write `t2` (AES-256-GCM-SIV, faster) only for a
        /// fleet whose every replica runs a release that opens it.
        #[arg(long, value_enum, default_value_t = Seal::T1)]
        seal: Seal,
    },
}

/// The `--seal` values.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum Seal {
    /// XChaCha20-Poly1305.
    T1,
    /// AES-256-GCM-SIV.
    T2,
}

impl Seal {
    fn version(self) -> TokenVersion {
        match self {
            Seal::T1 => TokenVersion::T1,
            Seal::T2 => TokenVersion::T2,
        }
    }
}
