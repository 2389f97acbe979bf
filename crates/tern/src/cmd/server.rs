//! Naming and reaching the server: `--url` (with `--header`, and a grant
//! `tern login` kept), `--demo`, `--server NAME` (the config file), or
//! `-- COMMAND ARGS...` (a child over stdio, in its own process group), and
//! the era an earlier run found.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use clap::Args;
use tern_client::legacy::DualEra;
use tern_client::transport::stdio::{ChildProcess, ChildWatch, SpawnOptions};
use tern_client::{Client, ClientError};

use crate::advice::{authority, spawn_hint};
use crate::config;
use crate::exit::{EXIT_TRANSPORT, Failure, usage};
use crate::terminal::Session;

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

/// The server, as named on the command line.
#[derive(Debug)]
pub(crate) enum Target {
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

pub(super) fn target(server: &ServerArgs) -> Result<Target, Failure> {
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
pub(super) type Build = Box<dyn FnOnce(tern_client::ClientBuilder) -> Client>;

/// A started or reached server: how to build the client over it, and
/// (stdio) its death watch.
pub(super) struct Started {
    pub(super) build: Build,
    pub(super) watch: Option<ChildWatch>,
    /// A server of either era: its cache key and transport, to remember
    /// what it spoke ([`crate::era_cache`]).
    pub(super) era: Option<(String, Arc<DualEra>)>,
}

/// Remembers the era the run found, for the next run.
pub(super) fn remember_era(era: Option<&(String, Arc<DualEra>)>) {
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
pub(super) fn label_of(target: &Target) -> (String, Option<String>) {
    match target {
        Target::Url { url, .. } => (url.clone(), Some(url.clone())),
        Target::Demo { .. } => ("the demo server".into(), None),
        Target::Command { words, .. } => (format!("`{}`", words.join(" ")), None),
    }
}

/// Who asks, as this run's configuration names the server: the
/// `--server` key, else the URL's host, else the command (never what the
/// server's `serverInfo` claims).
pub(super) fn local_name(server: &ServerArgs, target: &Target) -> String {
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
pub(super) fn connect(
    target: &Target,
    verbose: bool,
    session: &Arc<Session>,
) -> Result<Started, Failure> {
    let transport_failure = |e: ClientError| Failure {
        code: EXIT_TRANSPORT,
        message: format!("{e:#}"),
    };
    // The demo speaks 2026-07-28; any other server may be of either era
    // (Versioning and Compatibility): its first request probes.
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
fn env_tls() -> Option<tern_client::tls::TlsOptions> {
    std::env::var_os("TERN_CA_FILE")
        .filter(|p| !p.is_empty())
        .map(|p| tern_client::tls::TlsOptions::new().with_ca_file(PathBuf::from(p)))
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
        .map(|p| tern_client::tls::TlsOptions::new().with_ca_file(p))
        .or_else(env_tls);
    let mut oauth = OAuth::new(url, config, browser)
        .map_err(|e| format!("{e:#}"))?
        .with_store(store);
    if let Some(tls) = tls {
        oauth = oauth.with_tls(&tls).map_err(|e| format!("{e:#}"))?;
    }
    Ok(oauth)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::EXIT_USAGE;

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
