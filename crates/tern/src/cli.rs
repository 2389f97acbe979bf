//! The command line: one [`Command`] variant per subcommand, with the help
//! texts. Parsing only; [`crate::main`] dispatches.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

use crate::cmd::args::InputArgs;
use crate::cmd::keys::KeysAction;
use crate::cmd::park::ResumeArgs;
use crate::cmd::serve::Served;
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
  TERN_LOG      what tern logs on standard error: level and target=level
                directives, comma-separated (default warn; e.g. TERN_LOG=info,
                TERN_LOG=warn,tern_client=debug; a stdio server's standard
                error is logged at info under tern_client::server_stderr)
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

/// `tern --version`: the version and the optional parts built in.
static LONG_VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (features: {})",
        env!("CARGO_PKG_VERSION"),
        tern::built::features()
    )
});

#[derive(Parser)]
#[command(
    name = "tern",
    version,
    long_version = LONG_VERSION.as_str(),
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
    /// One MRTR-aware endpoint in front of the servers of a config file,
    /// of either era: tools and prompts namespaced `{upstream}__{name}`,
    /// questions relayed with the gateway's own sealed requestState.
    ///
    /// Example: `tern gateway --config servers.json --http 127.0.0.1:8080`;
    /// `--check` prints each upstream's era and the catalogue.
    Gateway(crate::cmd::gateway::GatewayArgs),
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
