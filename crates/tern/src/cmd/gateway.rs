//! `tern gateway`: one MRTR-aware endpoint in front of the servers of a
//! config file (tern-gateway), over stdio or Streamable HTTP with
//! `/healthz` and `/readyz`; `--check` starts every upstream, prints the
//! catalogue and exits.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tern_gateway::{Cursors, Gateway, GatewayConfig, GatewayOptions};
use tern_server::Server;
use tern_server::transport::http::Http;
use tern_server::transport::stdio::{StdioOptions, serve_stdio};

use crate::cmd::access::{Access, AccessArgs};
use crate::cmd::runtime;

/// `tern gateway`'s flags.
#[derive(Debug, Args)]
pub(crate) struct GatewayArgs {
    /// The servers file: `mcpServers` / `servers` JSON, each upstream with
    /// the gateway's optional keys (see the README).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// Serve over standard input and output (one JSON message per line).
    #[arg(long, conflicts_with = "http")]
    stdio: bool,
    /// Serve Streamable HTTP at `http://ADDR/mcp`, with `/healthz` and
    /// `/readyz` (ready while at least one upstream is up).
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// A key file (see `tern keys generate`) the replicas share: it seals
    /// the relayed requestStates and keys the list cursors. Without one a
    /// random key serves this process only.
    #[arg(long, value_name = "FILE")]
    keys: Option<PathBuf>,
    // Who may call over HTTP (the client's token is never passed to an
    // upstream).
    #[command(flatten)]
    access: AccessArgs,
    /// Fleet mode: replicas behind a load balancer, sharing `--keys` and
    /// this Redis (`redis://` or `rediss://`): the replay store of
    /// `dedupe` upstreams, and lists that do not vary per replica (a down
    /// upstream's entries stay listed; their calls fail fast).
    #[arg(long, value_name = "URL", requires_all = ["http", "keys"])]
    redis: Option<String>,
    /// For `rediss://`: the CA certificates to trust.
    #[arg(long, value_name = "FILE", requires = "redis")]
    redis_ca: Option<PathBuf>,
    /// Start every upstream, print each one's era and health and the
    /// catalogue, and exit: 0 when every upstream is up, 1 otherwise.
    #[arg(long, conflicts_with_all = ["stdio", "http"])]
    check: bool,
}

impl GatewayArgs {
    /// What makes the flags unusable together, beyond what clap checks.
    fn unusable(&self) -> Option<String> {
        if !self.check && !self.stdio && self.http.is_none() {
            return Some("choose a transport: --stdio or --http ADDR (or --check)".into());
        }
        let flag = self.access.given().filter(|_| self.stdio)?;
        Some(format!(
            "{flag} guards HTTP only; over --stdio it would do nothing"
        ))
    }
}

/// `tern gateway …`.
#[allow(
    clippy::needless_pass_by_value,
    reason = "the parsed flags, owned, as every command takes them"
)]
pub(crate) fn command(args: GatewayArgs) -> ExitCode {
    if let Some(why) = args.unusable() {
        eprintln!("tern gateway: {why}");
        return ExitCode::from(2);
    }
    let config = match GatewayConfig::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tern gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let access = match args.access.access("tern gateway") {
        Ok(a) => a,
        Err(e) => {
            eprintln!("tern gateway: {e}");
            return ExitCode::from(2);
        }
    };
    let mut options = GatewayOptions::default().info(tern_protocol::Implementation::new(
        "tern-gateway",
        env!("CARGO_PKG_VERSION"),
    ));
    // `"auth": "login"` upstreams: the grants `tern login` keeps.
    if let Some(store) = tern::login::FileTokenStore::default_store() {
        options = options.logins(std::sync::Arc::new(store));
    }
    let ring = match &args.keys {
        Some(path) => {
            let ring = match tern::serving::read_keys(path) {
                Ok(ring) => ring,
                Err(e) => {
                    eprintln!("tern gateway: {e}");
                    return ExitCode::from(2);
                }
            };
            match std::fs::read(path) {
                Ok(bytes) => options = options.cursors(Cursors::from_secret(&bytes)),
                Err(e) => {
                    eprintln!("tern gateway: cannot read {}: {e}", path.display());
                    return ExitCode::from(2);
                }
            }
            Some(ring)
        }
        None => None,
    };
    let runtime = match runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(async move {
        let Some(options) = fleet(options, &args).await else {
            return Ok(ExitCode::from(2));
        };
        let gateway = match Gateway::start(config, options).await {
            Ok(g) => g,
            Err(e) => {
                eprintln!("tern gateway: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        if args.check {
            #[allow(clippy::print_stdout, reason = "the listing is the command's output")]
            {
                print!("{}", gateway.report());
            }
            let all_up = gateway.upstreams().iter().all(|u| u.is_up());
            gateway.close().await;
            return Ok(if all_up {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        let mut builder = gateway.server_builder();
        if let Some(ring) = ring {
            builder = builder.keys(ring);
        }
        let server = match builder.build() {
            Ok(s) => s,
            Err(e) => {
                eprintln!("tern gateway: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        reload_on_hangup(gateway.clone(), args.config.clone());
        let outcome = match args.http {
            Some(addr) => serve_http(addr, server, gateway.clone(), access).await,
            None => serve_stdio(server, StdioOptions::default()).await,
        };
        gateway.close().await;
        outcome.map(|()| ExitCode::SUCCESS)
    });
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tern gateway: {e}");
            ExitCode::FAILURE
        }
    }
}

/// On `SIGHUP`, the servers file read again and loaded in place
/// ([`Gateway::reload`]); a file that does not load keeps the running one.
fn reload_on_hangup(gateway: Gateway, path: PathBuf) {
    #[cfg(unix)]
    tokio::spawn(async move {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            return;
        };
        while hangups.recv().await.is_some() {
            match GatewayConfig::load(&path) {
                Ok(config) => {
                    gateway.reload(config).await;
                    eprintln!("tern gateway: reloaded {}", path.display());
                }
                Err(e) => eprintln!("tern gateway: {e}; the running servers are kept"),
            }
        }
    });
    #[cfg(not(unix))]
    let _ = (gateway, path);
}

/// `options` in fleet mode with `--redis` (the error printed: `None`).
#[cfg_attr(
    not(feature = "fleet"),
    expect(clippy::unused_async, reason = "connecting to Redis awaits")
)]
async fn fleet(options: GatewayOptions, args: &GatewayArgs) -> Option<GatewayOptions> {
    let Some(url) = &args.redis else {
        return Some(options);
    };
    #[cfg(feature = "fleet")]
    return tern_gateway::fleet::options(options, url, args.redis_ca.as_deref())
        .await
        .map_err(|e| eprintln!("tern gateway: {e}"))
        .ok();
    #[cfg(not(feature = "fleet"))]
    {
        let _ = (options, url);
        eprintln!("tern gateway: {}", tern::built::without("--redis", "fleet"));
        None
    }
}

/// `/mcp`, `/healthz` (200 while the process serves) and `/readyz` (200
/// while at least one upstream is up, else 503 naming them), until Ctrl-C.
async fn serve_http(
    addr: std::net::SocketAddr,
    server: Server,
    gateway: Gateway,
    access: Access,
) -> std::io::Result<()> {
    use axum::routing::get;
    let listener = tokio::net::TcpListener::bind(addr).await?;
    eprintln!(
        "tern: serving the gateway at http://{}/mcp",
        listener.local_addr()?
    );
    let options = access.serve_options();
    let stopping = server.clone();
    let (endpoint, metadata) =
        access.apply_with_metadata(Http::new(server), listener.local_addr()?);
    let ready = move || {
        let gateway = gateway.clone();
        async move {
            let upstreams: Vec<String> = gateway
                .upstreams()
                .iter()
                .map(|u| format!("{}={}", u.name(), if u.is_up() { "up" } else { "down" }))
                .collect();
            let status = if gateway.ready() {
                axum::http::StatusCode::OK
            } else {
                axum::http::StatusCode::SERVICE_UNAVAILABLE
            };
            let word = if gateway.ready() {
                "ready"
            } else {
                "not ready"
            };
            (status, format!("{word} {}\n", upstreams.join(" ")))
        }
    };
    let mut app = axum::Router::new()
        .route_service("/mcp", endpoint.into_service())
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready));
    if let Some(metadata) = metadata {
        app = app.merge(metadata);
    }
    // SIGINT or SIGTERM: open subscriptions get their closing result, then
    // the caller closes the upstreams (stdio ones stopped as the spec's
    // stdio shutdown says).
    let shutdown = async move {
        tern::serving::stop_signal().await;
        stopping.shutdown();
    };
    tern_server::transport::accept::serve_service(listener, app, options, shutdown).await
}
