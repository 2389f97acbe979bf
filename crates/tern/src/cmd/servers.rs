//! `tern servers`: the config file's servers, secrets redacted.

use std::process::ExitCode;

use crate::config;

pub(crate) fn command(config: Option<&std::path::Path>) -> ExitCode {
    match crate::cmd::server::config_servers(config) {
        Ok((path, servers)) => {
            #[allow(clippy::print_stdout, reason = "the listing is the command's output")]
            {
                print!("{}", tern_config_listing(&path, &servers));
            }
            ExitCode::SUCCESS
        }
        Err(f) => {
            eprintln!("tern: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn tern_config_listing(
    path: &std::path::Path,
    servers: &indexmap::IndexMap<String, config::Entry>,
) -> String {
    config::listing(path, servers)
}
