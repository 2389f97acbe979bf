//! The `tern` command: call, inspect and serve Model Context Protocol
//! (2026-07-28) servers.
//!
//! ```text
//! tern discover  SERVER [--json]
//! tern tools     SERVER [--json]
//! tern prompts   SERVER [--json]
//! tern resources SERVER [--json]
//! tern call TOOL [key=value ...] [--args JSON] SERVER [INPUT] [--json]
//! tern prompt NAME [key=value ...]              SERVER [INPUT] [--json]
//! tern read URI                                 SERVER [INPUT] [--json]
//! tern questions TOOL [key=value ...]           SERVER [--json]
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
//! `--root` folders (default: the working folder). Prompts go to standard
//! error; results to standard output. With standard input not a terminal, or
//! with `--no-input`, tern never prompts and declares elicitation only when
//! answers are preset, so servers take their fallback.
//!
//! Exit codes: 0 success; 1 the tool reported an error (`isError`) or the
//! person declined or cancelled a question; 2 usage error; 3 the server
//! answered with an error (or an unusable reply, or too many rounds); 4
//! transport error (cannot start or reach the server); 5 the server needs
//! input this run cannot give (`-32021` missing client capability, e.g. under
//! `--no-input`, or a question with no preset answer when tern may not
//! prompt, or a preset answer asked for again); 130 interrupted (Ctrl-C).
//! `tern serve` and `tern keys` exit 0, 1 (runtime failure) or 2.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};
use tern_server::KeyRing;
use tern_server::Principal;
use tern_server::transport::http::{Bearer, Http};
use tern_server::transport::stdio::{StdioOptions, serve_stdio};

use tern::demo;

mod answers;
mod audit;
mod cmd;
mod config;
mod era_cache;
mod form;
mod output;
mod prompt;
mod questions;
mod rounds;
mod schema;
mod suggest;
mod terminal;

use cmd::{EXIT_CODES_HELP, InputArgs, Op, ServerArgs, TOP_HELP, TaskAction};

const PAIRS_HELP: &str = "key=value arguments: the value is JSON when it parses as JSON, else the string as typed (n=3 is a number, name=orders a string, name='\"3\"' the string \"3\")";

#[derive(Parser)]
#[command(
    name = "tern",
    version,
    about = "Call, inspect and serve MCP (2026-07-28) servers",
    after_help = TOP_HELP
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Show what a server supports (server/discover).
    #[command(after_help = EXIT_CODES_HELP)]
    Discover {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List a server's tools.
    #[command(after_help = EXIT_CODES_HELP)]
    Tools {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List a server's prompts.
    #[command(after_help = EXIT_CODES_HELP)]
    Prompts {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List a server's resources and resource templates.
    #[command(after_help = EXIT_CODES_HELP)]
    Resources {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Call a tool, answering the server's questions on the terminal.
    ///
    /// Example: `tern call --demo provision_database name=orders`
    #[command(after_help = EXIT_CODES_HELP)]
    Call {
        /// The tool.
        tool: String,
        #[arg(value_name = "KEY=VALUE", help = PAIRS_HELP)]
        pairs: Vec<String>,
        /// The arguments as one JSON object (key=value pairs extend it).
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        input: InputArgs,
    },
    /// Get a prompt, answering the server's questions on the terminal.
    #[command(after_help = EXIT_CODES_HELP)]
    Prompt {
        /// The prompt.
        name: String,
        /// key=value arguments (prompt arguments are strings).
        #[arg(value_name = "KEY=VALUE")]
        pairs: Vec<String>,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        input: InputArgs,
    },
    /// Read a resource, answering the server's questions on the terminal.
    #[command(after_help = EXIT_CODES_HELP)]
    Read {
        /// The resource URI.
        uri: String,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        input: InputArgs,
    },
    /// Show the questions a tool asks in its first round, and write an
    /// answers file for them (for `--answers FILE`).
    ///
    /// The questions go to standard error, the answers file to standard
    /// output: `tern questions --demo provision_database name=orders >
    /// answers.json`. The first round is a real call: a tool that asks
    /// nothing runs. Later rounds depend on the answers and are not shown.
    #[command(after_help = EXIT_CODES_HELP)]
    Questions {
        /// The tool.
        tool: String,
        #[arg(value_name = "KEY=VALUE", help = PAIRS_HELP)]
        pairs: Vec<String>,
        /// The arguments as one JSON object (key=value pairs extend it).
        #[arg(long, value_name = "JSON")]
        args: Option<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Authorize tern at an OAuth-protected server: runs the OAuth flow in
    /// your browser (the URL is printed too) and keeps the tokens in your
    /// config folder (tern/tokens.json, 0600); every `--url` command then
    /// sends them, refreshing them when they expire.
    Login {
        /// The server's MCP endpoint.
        #[arg(long)]
        url: String,
        /// Trust the CA certificates of this PEM file (besides the built-in
        /// roots); `TERN_CA_FILE` does the same for every command.
        #[arg(long, value_name = "FILE")]
        ca_file: Option<PathBuf>,
        /// A client id registered with the authorization server out of band
        /// (default: dynamic registration).
        #[arg(long, value_name = "ID")]
        client_id: Option<String>,
        /// Its secret, for a confidential client.
        #[arg(long, value_name = "SECRET", requires = "client_id")]
        client_secret: Option<String>,
    },
    /// Forget the tokens `tern login` kept for a server.
    Logout {
        /// The server's MCP endpoint.
        #[arg(long)]
        url: String,
    },
    /// List the servers of the config file (values of env and headers
    /// redacted).
    Servers {
        /// The config file (default: tern/servers.json in your config
        /// folder, or `TERN_CONFIG`).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
    /// Print a shell completion script (e.g. `tern completions bash >
    /// ~/.local/share/bash-completion/completions/tern`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Follow a task (Tasks extension) by its id: `get` shows its status,
    /// `wait` follows it to its end (asking its questions), `cancel`
    /// cancels it. Over stdio each run starts a new server process, which
    /// knows only the tasks of a durable store (e.g. `tern serve demo
    /// --tasks sqlite:PATH`).
    #[command(after_help = EXIT_CODES_HELP)]
    Task {
        #[command(subcommand)]
        action: TaskCommand,
    },
    /// Audit a server of your own: forged requestState, stray answers,
    /// capability gating, header/body mismatches; one line per check.
    ///
    /// Example: `tern audit -- tern serve demo --stdio`. Exit status: 0
    /// every check passed or did not apply, 1 a check failed, 2 usage
    /// error, 4 the server cannot be reached.
    Audit(audit::AuditArgs),
    /// Serve a built-in server.
    Serve {
        #[command(subcommand)]
        server: Served,
    },
    /// Manage requestState keys.
    Keys {
        #[command(subcommand)]
        action: KeysAction,
    },
}

#[derive(Subcommand)]
enum Served {
    /// The demo server: MRTR scenarios (elicitation forms and URLs, several
    /// rounds, progress, sampling and roots).
    Demo {
        /// Serve over standard input and output (one JSON message per line).
        #[arg(long, conflicts_with = "http")]
        stdio: bool,
        /// Serve Streamable HTTP at `http://ADDR/mcp` (e.g. 127.0.0.1:8080).
        #[arg(long, value_name = "ADDR")]
        http: Option<std::net::SocketAddr>,
        /// Lifetime of each round's requestState, in seconds (default 600).
        #[arg(long, value_name = "SECONDS")]
        state_ttl: Option<u64>,
        /// How long a finished task is kept for `tasks/get` and
        /// `tasks/result`, in seconds (default 3600).
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=604_800))]
        task_retention: Option<u64>,
        /// A key file (see `tern keys generate`); without one a random key
        /// serves this process only.
        #[arg(long, value_name = "FILE")]
        keys: Option<PathBuf>,
        /// Where tasks live: `memory` (default) or `sqlite:PATH`, durable,
        /// so tasks outlive the process (and a new stdio child knows them).
        /// With `--redis`, tasks live in Redis and this option is refused.
        #[arg(long, value_name = "STORE")]
        tasks: Option<String>,
        /// Fleet mode: run as one replica of several behind a load balancer,
        /// the replay store, the tasks and a transfer ledger in the Redis at
        /// URL (`redis://` or `rediss://`). Needs `--http` and `--keys` (the
        /// key file every replica shares; `SIGHUP` reloads it). Serves
        /// `/healthz` and `/readyz` besides `/mcp`.
        #[arg(long, value_name = "URL", requires = "http", requires = "keys")]
        redis: Option<String>,
        /// Fleet mode over `rediss://`: trust the CA certificates in FILE
        /// (PEM) instead of the system's roots, for a Redis behind a
        /// private CA.
        #[arg(long, value_name = "FILE", requires = "redis")]
        redis_ca: Option<PathBuf>,
        /// Fleet mode: how long a replica's claim on a guarded leg or a task
        /// holds without renewal, in seconds (default 15). A replica that
        /// dies leaves them to read "outcome unknown" within this time.
        #[arg(long, value_name = "SECONDS", requires = "redis", value_parser = clap::value_parser!(u64).range(1..=3600))]
        lease: Option<u64>,
        /// Over HTTP, require `Authorization: Bearer TOKEN`: the file has
        /// one `TOKEN PRINCIPAL` per line, the token naming the principal
        /// (who owns tasks and requestStates). Without it the demo is open
        /// on loopback.
        #[arg(long, value_name = "FILE")]
        tokens: Option<PathBuf>,
        /// Over HTTP, require OAuth access tokens (JWTs) of this issuer,
        /// checked against its JWKS; the demo serves its Protected Resource
        /// Metadata naming it. The principal is the token's issuer and
        /// subject.
        #[arg(long, value_name = "URL", conflicts_with = "tokens", requires = "http")]
        issuer: Option<String>,
        /// The audience the tokens must carry, and the resource the metadata
        /// names (default: the served URL, `http://ADDR/mcp`).
        #[arg(long, value_name = "AUD", requires = "issuer")]
        audience: Option<String>,
        /// A scope every request's token must carry (repeatable).
        #[arg(long = "scope", value_name = "SCOPE", requires = "issuer")]
        scopes: Vec<String>,
        /// A scope one tool needs besides any `--scope` (repeatable): a
        /// token without it gets 403 `insufficient_scope` for that tool.
        #[arg(long = "tool-scope", value_name = "TOOL=SCOPE", requires = "issuer", value_parser = tool_scope)]
        tool_scopes: Vec<(String, String)>,
        /// Accept access tokens whose JWT `typ` is `JWT` or absent, for
        /// issuers that do not mint RFC 9068 `at+jwt` tokens (weaker: an ID
        /// token of the issuer for this audience would pass too).
        #[arg(long, requires = "issuer")]
        accept_plain_jwt: bool,
        /// Trust the CA certificates of this PEM file when fetching the
        /// issuer's metadata and keys (besides the built-in roots).
        #[arg(long, value_name = "FILE", requires = "issuer")]
        ca_file: Option<PathBuf>,
        /// Over HTTP, a proxy network in front of the demo (a CIDR or an
        /// address; repeatable): its connections count only against the
        /// totals, and each request's client is read from the
        /// --forwarded-header it sets (the right-most address not in a
        /// trusted network).
        #[arg(long = "trusted-proxy", value_name = "CIDR", requires_all = ["http", "forwarded_header"])]
        trusted_proxies: Vec<String>,
        /// The one header the trusted proxies set: `x-forwarded-for` (nginx's
        /// `$proxy_add_x_forwarded_for`) or `forwarded` (RFC 7239).
        #[arg(long, value_name = "HEADER", requires = "trusted_proxies")]
        forwarded_header: Option<tern_server::transport::forwarded::ForwardedHeader>,
    },
}

#[derive(Subcommand)]
enum TaskCommand {
    /// Show a task's status (its result or error once it ended).
    Get {
        /// The task id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Follow a task to its end, answering its questions.
    Wait {
        /// The task id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
        #[command(flatten)]
        input: InputArgs,
    },
    /// Cancel a task.
    Cancel {
        /// The task id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

#[derive(Subcommand)]
enum KeysAction {
    /// Print a new key ring in the key file format.
    Generate,
}

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
            Err(ExitCode::from(cmd::EXIT_USAGE))
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
    let (op, server, input) = match cli.command {
        Command::Discover { server } => (Op::Discover, server, None),
        Command::Tools { server } => (Op::Tools, server, None),
        Command::Prompts { server } => (Op::Prompts, server, None),
        Command::Resources { server } => (Op::Resources, server, None),
        Command::Call {
            tool,
            pairs,
            args,
            server,
            input,
        } => (Op::Call { tool, pairs, args }, server, Some(input)),
        Command::Prompt {
            name,
            pairs,
            server,
            input,
        } => (Op::Prompt { name, pairs }, server, Some(input)),
        Command::Read { uri, server, input } => (Op::Read { uri }, server, Some(input)),
        Command::Questions {
            tool,
            pairs,
            args,
            server,
        } => (Op::Questions { tool, pairs, args }, server, None),
        Command::Task { action } => match action {
            TaskCommand::Get { id, server } => (
                Op::Task {
                    action: TaskAction::Get,
                    id,
                },
                server,
                None,
            ),
            TaskCommand::Wait { id, server, input } => (
                Op::Task {
                    action: TaskAction::Wait,
                    id,
                },
                server,
                Some(input),
            ),
            TaskCommand::Cancel { id, server } => (
                Op::Task {
                    action: TaskAction::Cancel,
                    id,
                },
                server,
                None,
            ),
        },
        Command::Servers { config } => return servers(config.as_deref()),
        Command::Completions { shell } => {
            let mut out = std::io::stdout();
            clap_complete::generate(shell, &mut Cli::command(), "tern", &mut out);
            return ExitCode::SUCCESS;
        }
        Command::Keys { action } => return keys(&action),
        Command::Login {
            url,
            ca_file,
            client_id,
            client_secret,
        } => return login(&url, ca_file, client_id, client_secret),
        Command::Logout { url } => return logout(&url),
        Command::Serve { server } => return serve(server),
        Command::Audit(args) => return run_audit(args),
    };
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(cmd::run(op, &server, input.as_ref()));
    // A prompt abandoned (Ctrl-C, a dead server) may still block its thread
    // on the terminal: do not wait for it.
    runtime.shutdown_background();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            // A failure quotes the server (its error, its standard error).
            eprintln!("tern: {}", tern::safe::text(&failure.message));
            ExitCode::from(failure.code)
        }
    }
}

/// The multi-threaded runtime of a command, or its exit status with the
/// reason printed.
fn runtime() -> Result<tokio::runtime::Runtime, ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("tern: cannot start the runtime: {e}");
            ExitCode::from(cmd::EXIT_TRANSPORT)
        })
}

fn run_audit(args: audit::AuditArgs) -> ExitCode {
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(audit::run(args));
    runtime.shutdown_background();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(stop) => {
            eprintln!("tern audit: {}", tern::safe::text(&stop.message));
            ExitCode::from(stop.code)
        }
    }
}

fn login(
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
        let oauth = cmd::oauth_for(url, ca_file, client_id, client_secret)?;
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
            ExitCode::from(cmd::EXIT_TRANSPORT)
        }
    }
}

fn logout(url: &str) -> ExitCode {
    let Some(store) = tern::login::FileTokenStore::default_store() else {
        eprintln!("tern logout: no config folder is known (set HOME or XDG_CONFIG_HOME)");
        return ExitCode::from(2);
    };
    let endpoint = cmd::endpoint(url);
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

fn servers(config: Option<&std::path::Path>) -> ExitCode {
    match cmd::config_servers(config) {
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

fn keys(action: &KeysAction) -> ExitCode {
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

/// The `--tokens` file, read and parsed.
fn read_tokens(
    path: &std::path::Path,
) -> Result<std::collections::HashMap<String, String>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    demo::tokens(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The key file at `path`, or `None` with the reason printed.
fn read_key_file(path: &std::path::Path) -> Option<KeyRing> {
    tern::demo_fleet::read_keys(path)
        .map_err(|e| eprintln!("tern: {e}"))
        .ok()
}

/// `--state-ttl` and `--task-retention`.
#[derive(Debug, Clone, Copy)]
struct Lifetimes {
    state_ttl: Option<u64>,
    task_retention: Option<u64>,
}

impl Lifetimes {
    /// The demo's task settings with `--task-retention` applied.
    fn tasks(self) -> tern_server::TaskConfig {
        let tasks = demo::task_config();
        match self.task_retention {
            Some(secs) => tasks.retention(Duration::from_secs(secs)),
            None => tasks,
        }
    }
}

/// Who may call the demo over HTTP: the `--tokens` file's bearer tokens,
/// OAuth access tokens of `--issuer`, or both.
struct Access {
    tokens: Option<std::collections::HashMap<String, String>>,
    oauth: Option<DemoOAuth>,
    proxies: Option<tern_server::transport::forwarded::TrustedProxies>,
}

/// `--issuer URL [--audience AUD] [--scope S]... [--tool-scope TOOL=S]...
/// [--accept-plain-jwt] [--ca-file FILE]`.
struct DemoOAuth {
    issuer: String,
    audience: Option<String>,
    scopes: Vec<String>,
    tool_scopes: Vec<(String, String)>,
    accept_plain_jwt: bool,
    ca_file: Option<PathBuf>,
}

/// `TOOL=SCOPE` of `--tool-scope`.
fn tool_scope(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((tool, scope)) if !tool.is_empty() && !scope.is_empty() && !scope.contains(' ') => {
            Ok((tool.to_owned(), scope.to_owned()))
        }
        _ => Err(format!(
            "expected TOOL=SCOPE (one scope, no spaces), got {text:?}"
        )),
    }
}

impl Access {
    /// The accept loop's options: the defaults, and the trusted proxies.
    fn serve_options(&self) -> tern_server::transport::accept::ServeOptions {
        let options = tern_server::transport::accept::ServeOptions::default();
        match &self.proxies {
            Some(p) => options.trusted_proxies(p.clone()),
            None => options,
        }
    }

    /// `endpoint` guarded as asked; `local` names the default audience.
    fn apply(self, mut endpoint: Http, local: std::net::SocketAddr) -> Http {
        if let Some(p) = self.proxies {
            endpoint = endpoint.trusted_proxies(p);
        }
        if let Some(o) = self.oauth {
            let audience = o
                .audience
                .clone()
                .unwrap_or_else(|| format!("http://{local}/mcp"));
            endpoint = endpoint.oauth(demo_oauth(&o, &audience));
        }
        match self.tokens {
            Some(tokens) => endpoint.authenticate(Bearer(move |token: &str| {
                tokens.get(token).map(|p| Principal::new(p.as_str()))
            })),
            None => endpoint,
        }
    }
}

/// `tern serve demo --http ADDR --redis URL --keys FILE`: one replica.
fn serve_fleet(
    runtime: &tokio::runtime::Runtime,
    redis: tern::demo_fleet::RedisAt<'_>,
    addr: std::net::SocketAddr,
    keys: &std::path::Path,
    lifetimes: Lifetimes,
    lease: Duration,
    access: Access,
) -> ExitCode {
    let outcome = runtime.block_on(async move {
        let tasks = lifetimes.tasks();
        let (mut builder, ledger) = match tern::demo_fleet::fleet(&redis, keys, lease, tasks).await
        {
            Ok(both) => both,
            Err(e) => {
                eprintln!("tern serve demo: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        if let Some(secs) = lifetimes.state_ttl {
            builder = builder.state_ttl(Duration::from_secs(secs));
        }
        let server = match builder.build() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("tern: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        let listener = tokio::net::TcpListener::bind(addr).await?;
        eprintln!(
            "tern: serving the demo (fleet replica) at http://{}/mcp",
            listener.local_addr()?
        );
        // Loopback Host and Origin only, as without --redis: the balancer
        // passes the Host it was addressed with (docs/DEPLOYMENT.md).
        let options = access.serve_options();
        let endpoint = access.apply(Http::new(server.clone()), listener.local_addr()?);
        tern::demo_fleet::serve(listener, server, endpoint, options, ledger, keys.to_owned())
            .await?;
        Ok::<_, std::io::Error>(ExitCode::SUCCESS)
    });
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tern: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The demo's resource server: JWTs of `o.issuer` for `audience`.
fn demo_oauth(o: &DemoOAuth, audience: &str) -> tern_server::auth::ResourceServer {
    let issuer = o.issuer.as_str();
    let mut verifier = tern_server::auth::JwtVerifier::new(issuer, audience);
    if let Some(ca) = &o.ca_file {
        verifier = verifier.ca_file(ca);
    }
    if o.accept_plain_jwt {
        verifier = verifier.accept_plain_jwt();
    }
    let scopes: Vec<&str> = o.scopes.iter().map(String::as_str).collect();
    let mut supported = scopes.clone();
    for (_, scope) in &o.tool_scopes {
        if !supported.contains(&scope.as_str()) {
            supported.push(scope);
        }
    }
    let mut resource = tern_server::auth::ResourceServer::new(audience, issuer, verifier)
        .scopes_supported(&supported)
        .required_scopes(&scopes)
        .resource_name("tern demo");
    // A tool named twice needs both scopes.
    let mut per_tool = std::collections::BTreeMap::<&str, Vec<&str>>::new();
    for (tool, scope) in &o.tool_scopes {
        per_tool.entry(tool).or_default().push(scope);
    }
    for (tool, scopes) in per_tool {
        resource = resource.tool_scopes(tool, &scopes);
    }
    eprintln!(
        "tern: OAuth: tokens of {issuer} for {audience}; metadata at {}",
        resource.metadata_url()
    );
    resource
}

#[allow(
    clippy::too_many_lines,
    reason = "one pass over the demo's flags, in the order the help lists them"
)]
fn serve(served: Served) -> ExitCode {
    match served {
        Served::Demo {
            stdio,
            http,
            state_ttl,
            task_retention,
            keys,
            tasks,
            tokens,
            redis,
            redis_ca,
            lease,
            issuer,
            audience,
            scopes,
            tool_scopes,
            accept_plain_jwt,
            ca_file,
            trusted_proxies,
            forwarded_header,
        } => {
            if !stdio && http.is_none() {
                eprintln!("tern serve demo: choose a transport: --stdio or --http ADDR");
                return ExitCode::from(2);
            }
            let tokens = match tokens.as_deref().map(read_tokens).transpose() {
                Ok(t) => t,
                Err(e) => {
                    eprintln!("tern serve demo: {e}");
                    return ExitCode::from(2);
                }
            };
            let lifetimes = Lifetimes {
                state_ttl,
                task_retention,
            };
            let proxies = match forwarded_header
                .map(|h| {
                    tern_server::transport::forwarded::TrustedProxies::new(&trusted_proxies, h)
                })
                .transpose()
            {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("tern serve demo: --trusted-proxy: {e}");
                    return ExitCode::from(2);
                }
            };
            let access = Access {
                proxies,
                tokens,
                oauth: issuer.map(|issuer| DemoOAuth {
                    issuer,
                    audience,
                    scopes,
                    tool_scopes,
                    accept_plain_jwt,
                    ca_file,
                }),
            };
            let runtime = match runtime() {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            if let Some(url) = redis {
                if let Some(tasks) = tasks {
                    eprintln!(
                        "tern serve demo: --tasks {tasks}: in fleet mode (--redis) tasks live in \
                         Redis; an in-process store would not be seen by the other replicas"
                    );
                    return ExitCode::from(2);
                }
                let (Some(addr), Some(keys)) = (http, keys) else {
                    eprintln!("tern serve demo: --redis needs --http and --keys");
                    return ExitCode::from(2);
                };
                let lease = Duration::from_secs(lease.unwrap_or(15));
                let redis = tern::demo_fleet::RedisAt {
                    url: &url,
                    ca_file: redis_ca.as_deref(),
                };
                return serve_fleet(&runtime, redis, addr, &keys, lifetimes, lease, access);
            }
            let store = match demo::task_store(tasks.as_deref().unwrap_or("memory")) {
                Ok(store) => store,
                Err(e) => {
                    eprintln!("tern serve demo: {e}");
                    return ExitCode::from(2);
                }
            };
            let mut builder = demo::builder()
                .task_config(lifetimes.tasks())
                .task_store(store);
            if let Some(secs) = state_ttl {
                builder = builder.state_ttl(Duration::from_secs(secs));
            }
            if let Some(path) = keys {
                let Some(ring) = read_key_file(&path) else {
                    return ExitCode::from(2);
                };
                builder = builder.keys(ring);
            }
            let demo_server = match builder.build() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("tern: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let outcome = runtime.block_on(async move {
                match http {
                    Some(addr) => {
                        let listener = tokio::net::TcpListener::bind(addr).await?;
                        eprintln!(
                            "tern: serving the demo at http://{}/mcp",
                            listener.local_addr()?
                        );
                        let shutdown = async {
                            let _ = tokio::signal::ctrl_c().await;
                        };
                        let options = access.serve_options();
                        let endpoint = access.apply(Http::new(demo_server), listener.local_addr()?);
                        tern_server::transport::http::serve_with(
                            listener, endpoint, "/mcp", options, shutdown,
                        )
                        .await
                    }
                    None => serve_stdio(demo_server, StdioOptions::default()).await,
                }
            });
            match outcome {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("tern: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
