//! `tern login` and `tern logout`: an OAuth grant for an HTTP server, kept
//! in the config folder.

use std::path::PathBuf;
use std::process::ExitCode;

use super::runtime;
use crate::exit::EXIT_TRANSPORT;

pub(crate) fn login(
    url: &str,
    ca_file: Option<PathBuf>,
    client_id: Option<String>,
    client_secret: Option<String>,
) -> ExitCode {
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(async {
        let oauth = crate::cmd::server::oauth_for(url, ca_file, client_id, client_secret)?;
        oauth.authorize().await.map_err(|e| format!("{e:#}"))
    });
    match outcome {
        Ok(grant) => {
            let scopes = if grant.scopes.is_empty() {
                String::new()
            } else {
                format!(", scopes {}", grant.scopes.join(" "))
            };
            // The issuer and the scopes are the authorization server's words.
            eprintln!(
                "tern: logged in to {url} (authorization server {}{}{})",
                tern::safe::line(&grant.key.issuer),
                tern::safe::line(&scopes),
                if grant.refresh_token.is_some() {
                    ", refreshable"
                } else {
                    ""
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tern login: {}", tern::safe::line(&e));
            ExitCode::from(EXIT_TRANSPORT)
        }
    }
}

pub(crate) fn logout(url: &str) -> ExitCode {
    let Some(store) = tern::login::FileTokenStore::default_store() else {
        eprintln!("tern logout: no config folder is known (set HOME or XDG_CONFIG_HOME)");
        return ExitCode::from(2);
    };
    let endpoint = crate::cmd::server::endpoint(url);
    match store.remove_endpoint(&endpoint) {
        Ok(0) => {
            eprintln!("tern: not logged in to {url}");
            ExitCode::SUCCESS
        }
        Ok(_) => {
            eprintln!("tern: logged out of {url}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tern logout: {}: {e}", store.path().display());
            ExitCode::FAILURE
        }
    }
}
