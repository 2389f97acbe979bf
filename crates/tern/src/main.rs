//! The `tern` command: call, inspect and serve Model Context Protocol servers.
//!
//! Today it serves the demo server (`tern serve demo --stdio`) and makes
//! requestState keys (`tern keys generate`); calling servers arrives with the
//! client issue.
//!
//! Exit codes: 0 success, 1 runtime failure, 2 usage error.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use tern_server::KeyRing;
use tern_server::transport::http::Http;
use tern_server::transport::stdio::{StdioOptions, serve_stdio};

use tern::demo;

#[derive(Parser)]
#[command(
    name = "tern",
    version,
    about = "Call, inspect and serve MCP (2026-07-28) servers"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
        /// A key file (see `tern keys generate`); without one a random key
        /// serves this process only.
        #[arg(long, value_name = "FILE")]
        keys: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum KeysAction {
    /// Print a new key ring in the key file format.
    Generate,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Logs go to standard error: standard output carries protocol only.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("TERN_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    match cli.command {
        Command::Keys {
            action: KeysAction::Generate,
        } => {
            let ring = KeyRing::generate();
            #[allow(clippy::print_stdout, reason = "the key text is the command's output")]
            {
                print!("{}", ring.to_text().as_str());
            }
            ExitCode::SUCCESS
        }
        Command::Serve {
            server:
                Served::Demo {
                    stdio,
                    http,
                    state_ttl,
                    keys,
                },
        } => {
            if !stdio && http.is_none() {
                eprintln!("tern serve demo: choose a transport: --stdio or --http ADDR");
                return ExitCode::from(2);
            }
            let mut builder = demo::builder();
            if let Some(secs) = state_ttl {
                builder = builder.state_ttl(Duration::from_secs(secs));
            }
            if let Some(path) = keys {
                let text = match std::fs::read_to_string(&path) {
                    Ok(t) => t,
                    Err(e) => {
                        eprintln!("tern: cannot read {}: {e}", path.display());
                        return ExitCode::from(2);
                    }
                };
                match KeyRing::parse(&text) {
                    Ok(ring) => builder = builder.keys(ring),
                    Err(e) => {
                        eprintln!("tern: {}: {e}", path.display());
                        return ExitCode::from(2);
                    }
                }
            }
            let server = match builder.build() {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("tern: {e}");
                    return ExitCode::FAILURE;
                }
            };
            let runtime = match tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    eprintln!("tern: cannot start the runtime: {e}");
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
                        tern_server::transport::http::serve(
                            listener,
                            Http::new(server),
                            "/mcp",
                            shutdown,
                        )
                        .await
                    }
                    None => serve_stdio(server, StdioOptions::default()).await,
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
