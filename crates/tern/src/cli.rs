//! The command line: one [`Command`] variant per subcommand, with the help
//! texts. Parsing only; [`crate::main`] dispatches.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cmd::args::InputArgs;
use crate::cmd::park::ResumeArgs;
use crate::cmd::server::ServerArgs;
use crate::exit::{EXIT_CODES_HELP, exit_codes};

/// How servers are named, then the exit codes, for `tern --help`.
pub(crate) const TOP_HELP: &str = concat!(
    "\
Naming the server (discover, tools, prompts, resources, skills, skill,
call, prompt, read, questions):
  --url URL            a Streamable HTTP endpoint (http://HOST:PORT/mcp)
  --demo               the built-in demo server, run as a child over stdio
  --server NAME        a server of the config file (see `tern servers`)
  -- COMMAND ARGS...   a server run as a child over stdio (last on the line)

Example: tern call --demo provision_database name=orders

Environment:
  TERN_LOG      what tern logs on standard error, as a tracing filter
                (default warn; e.g. TERN_LOG=info, TERN_LOG=tern_client=debug;
                a stdio server's standard error is logged at info under
                tern_client::server_stderr)
  TERN_CONFIG   the config file of named servers (default: tern/servers.json
                in your config folder)
  TERN_PROMPTS  `lines` for numbered line prompts even on a terminal
  TERN_BROWSER  the command that opens a page a server asks you to open
                (the URL appended as one argument; default xdg-open / open)
  NO_COLOR      no colour in prompts

",
    exit_codes!()
);

const PAIRS_HELP: &str = "key=value arguments: the value is JSON when it parses as JSON, else the string as typed (n=3 is a number, name=orders a string, name='\"3\"' the string \"3\")";

#[derive(Parser)]
#[command(
    name = "tern",
    version,
    about = "Call, inspect and serve MCP (2026-07-28) servers",
    after_help = TOP_HELP
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
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
    /// List a server's skills (Skills extension): name, description and
    /// the URI of each SKILL.md. Entries that break the extension's rules
    /// are refused, each named on standard error.
    #[command(after_help = EXIT_CODES_HELP)]
    Skills {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Show a skill's SKILL.md, verified against the server's entry (size,
    /// digest, frontmatter); with --save DIR, download every file of the
    /// skill into DIR, each verified.
    ///
    /// Example: `tern skill demo-tour --demo --save ./demo-tour`
    #[command(after_help = EXIT_CODES_HELP)]
    Skill {
        /// The skill: its name (as `tern skills` shows it) or the URI of its
        /// SKILL.md (`skill://…/SKILL.md`). A name several skills share is
        /// refused with their URIs to choose from.
        name: String,
        /// Write the skill's files into DIR (created if missing) instead of
        /// showing SKILL.md. Only new files are created: nothing already in
        /// DIR is overwritten, no path may leave DIR, and no symbolic link
        /// is written through; nothing is written unless every file
        /// verified.
        #[arg(long, value_name = "DIR")]
        save: Option<PathBuf>,
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
        /// When the server asks, write the round (the call, its questions,
        /// the server's requestState; no secrets) to FILE (`-`: standard
        /// output) and exit 6 instead of asking; `tern resume FILE`
        /// continues it from any process.
        #[arg(long, value_name = "FILE")]
        park: Option<PathBuf>,
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
        /// When the server asks, write the round (the call, its questions,
        /// the server's requestState; no secrets) to FILE (`-`: standard
        /// output) and exit 6 instead of asking; `tern resume FILE`
        /// continues it from any process.
        #[arg(long, value_name = "FILE")]
        park: Option<PathBuf>,
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
        /// When the server asks, write the round (the call, its questions,
        /// the server's requestState; no secrets) to FILE (`-`: standard
        /// output) and exit 6 instead of asking; `tern resume FILE`
        /// continues it from any process.
        #[arg(long, value_name = "FILE")]
        park: Option<PathBuf>,
    },
    /// Follow resource updates (and, with --task, task status) until
    /// Ctrl-C: one line per notification (--json: one JSON object a line).
    ///
    /// Example: `tern listen demo://ledger --url http://127.0.0.1:8080/mcp`
    #[command(after_help = EXIT_CODES_HELP)]
    Listen {
        /// The resource URIs to follow.
        #[arg(value_name = "URI", required_unless_present = "tasks")]
        uris: Vec<String>,
        /// Follow this task's status too (repeatable).
        #[arg(long = "task", value_name = "ID")]
        tasks: Vec<String>,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Continue a round (or a task) parked with `--park FILE`: answer its questions
    /// (--answer, --answers FILE, or at the terminal) and send them to the
    /// server the file names, from any process.
    ///
    /// The answers are checked against the questions in the file before
    /// anything is sent. Header and `-e` values are not in the file: give
    /// them again (--header, -e) or set `TERN_HEADER_<NAME>`. The server may
    /// ask another round: `--park FILE` parks it again.
    #[command(after_help = EXIT_CODES_HELP)]
    Resume {
        /// The parked round (`-`: standard input).
        file: PathBuf,
        #[command(flatten)]
        server: ResumeArgs,
        #[command(flatten)]
        input: InputArgs,
        /// When the server asks, write the round (the call, its questions,
        /// the server's requestState; no secrets) to FILE (`-`: standard
        /// output) and exit 6 instead of asking; `tern resume FILE`
        /// continues it from any process.
        #[arg(long, value_name = "FILE")]
        park: Option<PathBuf>,
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
        /// On a 2025-11-25 server, run the tool to see its questions: they
        /// come only while it runs, as requests of the server's own. Each
        /// is refused (nothing is answered for you), so the tool takes its
        /// fallback, with whatever effects that has.
        #[arg(long)]
        run: bool,
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
    Audit(crate::cmd::audit::AuditArgs),
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
pub(crate) enum Served {
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
pub(crate) enum TaskCommand {
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
pub(crate) enum KeysAction {
    /// Print a new key ring in the key file format.
    Generate,
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
