//! `tern serve demo`: the demo server over stdio or HTTP (bearer tokens,
//! OAuth, trusted proxies), alone or as a fleet replica (`--redis`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use tern::demo;
use tern_server::KeyRing;
use tern_server::transport::http::Http;
use tern_server::transport::stdio::{StdioOptions, serve_stdio};

use clap::Subcommand;

use crate::cmd::access::AccessArgs;
use crate::cmd::runtime;

/// The key file at `path`, or `None` with the reason printed.
fn read_key_file(path: &std::path::Path) -> Option<KeyRing> {
    tern::serving::read_keys(path)
        .map_err(|e| eprintln!("tern: {e}"))
        .ok()
}

/// `--state-ttl`, `--task-retention` and `--recoveries`.
#[derive(Debug, Clone, Copy)]
struct Lifetimes {
    state_ttl: Option<u64>,
    task_retention: Option<u64>,
    recoveries: Option<u32>,
}

impl Lifetimes {
    /// The demo's task settings with `--task-retention` and `--recoveries`
    /// applied.
    fn tasks(self) -> tern_server::TaskConfig {
        let mut tasks = demo::task_config();
        if let Some(secs) = self.task_retention {
            tasks = tasks.retention(Duration::from_secs(secs));
        }
        if let Some(n) = self.recoveries {
            tasks = tasks.recoveries(n);
        }
        tasks
    }
}

/// The demo's own imports beside the task store `spec`: an SQLite file
/// `PATH.imports` beside `sqlite:PATH`, else this process's memory.
#[cfg_attr(
    not(feature = "sqlite"),
    expect(clippy::unnecessary_wraps, reason = "opening the SQLite file can fail")
)]
fn imports_beside(spec: &str) -> Result<tern::imports::Imports, String> {
    match spec.strip_prefix("sqlite:") {
        #[cfg(feature = "sqlite")]
        Some(path) if !path.is_empty() => {
            tern::imports::Imports::sqlite(std::path::Path::new(&format!("{path}.imports")))
        }
        _ => Ok(tern::imports::Imports::memory()),
    }
}

/// `tern serve demo --http ADDR --redis URL --keys FILE`: one replica.
#[cfg(feature = "fleet")]
fn serve_fleet(
    runtime: &tokio::runtime::Runtime,
    redis: tern::demo_fleet::RedisAt<'_>,
    addr: std::net::SocketAddr,
    keys: &std::path::Path,
    lifetimes: Lifetimes,
    lease: Duration,
    access: crate::cmd::access::Access,
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

#[allow(
    clippy::too_many_lines,
    reason = "one pass over the demo's flags, in the order the help lists them"
)]
pub(crate) fn command(served: Served) -> ExitCode {
    match served {
        Served::Demo {
            stdio,
            http,
            state_ttl,
            task_retention,
            keys,
            tasks,
            redis,
            redis_ca,
            lease,
            recoveries,
            access,
        } => {
            if !stdio && http.is_none() {
                eprintln!("tern serve demo: choose a transport: --stdio or --http ADDR");
                return ExitCode::from(2);
            }
            if let Some(flag) = access.given().filter(|_| stdio) {
                eprintln!(
                    "tern serve demo: {flag} guards HTTP only; over --stdio it would do nothing"
                );
                return ExitCode::from(2);
            }
            let access = match access.access("tern demo") {
                Ok(a) => a,
                Err(e) => {
                    eprintln!("tern serve demo: {e}");
                    return ExitCode::from(2);
                }
            };
            let lifetimes = Lifetimes {
                state_ttl,
                task_retention,
                recoveries,
            };
            let runtime = match runtime() {
                Ok(rt) => rt,
                Err(code) => return code,
            };
            #[cfg(not(feature = "fleet"))]
            if redis.is_some() {
                let _ = (redis_ca, lifetimes.state_ttl);
                eprintln!(
                    "tern serve demo: {}",
                    tern::built::without("--redis", "fleet")
                );
                return ExitCode::from(2);
            }
            #[cfg(feature = "fleet")]
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
            let spec = tasks.as_deref().unwrap_or("memory");
            let (store, imports) =
                match demo::task_store(spec).and_then(|store| Ok((store, imports_beside(spec)?))) {
                    Ok(both) => both,
                    Err(e) => {
                        eprintln!("tern serve demo: {e}");
                        return ExitCode::from(2);
                    }
                };
            let mut task_config = lifetimes.tasks();
            let mut builder = demo::builder_with_stores(None, imports);
            if let Some(secs) = lease {
                // A process that dies leaves its tasks (durable ones are
                // taken again) and guarded legs within the lease.
                let lease = Duration::from_secs(secs);
                task_config = task_config.lease(lease);
                builder = builder.call_limits(tern_server::CallLimits::default().lease(lease));
            }
            let mut builder = builder.task_config(task_config).task_store(store);
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
                // Durable tasks left by a process that died on the same
                // --tasks file are taken again without waiting for a request.
                demo_server.recover_tasks();
                match http {
                    Some(addr) => {
                        let listener = tokio::net::TcpListener::bind(addr).await?;
                        eprintln!(
                            "tern: serving the demo at http://{}/mcp",
                            listener.local_addr()?
                        );
                        // As in fleet mode: open subscriptions get their
                        // closing result, and the tasks this process runs
                        // are stopped cleanly (durable ones handed off for
                        // the next start on the same --tasks file) rather
                        // than left to their leases.
                        let shutdown = {
                            let stopping = demo_server.clone();
                            async move {
                                tern::serving::stop_signal().await;
                                stopping.shutdown();
                                stopping.stop_tasks().await;
                            }
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

/// What `tern serve` serves, and how.
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
        /// How long a finished task is kept for `tasks/get` (its result or
        /// error included), in seconds (default 3600).
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
        /// How long a process's claim on a guarded leg or a task holds
        /// without renewal, in seconds (default 15 in fleet mode, 30 for
        /// tasks otherwise). A process that dies leaves its guarded legs to
        /// read "outcome unknown" within this time, and its durable tasks
        /// (`import_dataset`) to be taken again by another replica, or by the
        /// process started again on the same --tasks sqlite:PATH.
        #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=3600))]
        lease: Option<u64>,
        /// How many times a durable task is taken again after its server
        /// died before it ends failed (-31006): default 3.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=100))]
        recoveries: Option<u32>,
        // Who may call over HTTP.
        #[command(flatten)]
        access: AccessArgs,
    },
}
