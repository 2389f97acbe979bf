//! The demo as one replica of a fleet (`tern serve demo --http ADDR --redis
//! URL --keys FILE`): shared keys, the replay and task stores in Redis
//! (`tern-redis`), `transfer_funds` recording each transfer in a Redis
//! ledger that `demo://ledger` reads back, `import_dataset` recording each
//! batch once in a Redis list that `demo://imports/{taskId}` reads back
//! (its updates published on the
//! fleet's change bus, so a `subscriptions/listen` on any replica hears
//! them), health endpoints for a load balancer, and the key ring reloaded
//! on `SIGHUP`.
//!
//! | path | what |
//! |---|---|
//! | `/mcp` | the MCP endpoint |
//! | `/healthz` | liveness: 200 while the process serves |
//! | `/readyz` | readiness: 200 until the replica drains (`SIGTERM`); it does **not** fail on a Redis outage (every replica shares the Redis, so a failing readiness would drain them all at once: requests needing Redis fail fast instead); the body names Redis's state and the key ids |

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::routing::get;
use tern_redis::{RedisChangeBus, RedisOptions, RedisReplayStore, RedisTaskStore};
use tern_server::task::TaskConfig;
use tern_server::transport::accept::ServeOptions;
use tern_server::transport::http::Http;
use tern_server::{CallLimits, Server, ServerBuilder};

use crate::ledger::{Ledger, unreachable};
use crate::serving::{read_keys, stop_signal};

/// Where the fleet's Redis is: `--redis URL [--redis-ca FILE]`.
#[derive(Debug, Clone, Copy)]
pub struct RedisAt<'a> {
    /// `redis://` or `rediss://`.
    pub url: &'a str,
    /// For `rediss://`: the CA certificates to trust instead of the
    /// system's roots.
    pub ca_file: Option<&'a Path>,
}

/// Makes `builder` one replica of a fleet: the keys of `keys_file`, the
/// replay and task stores in the Redis at `url`, `multi_instance` (so a
/// random key or an in-process store is refused), and a ledger for
/// `transfer_funds`; guarded legs and tasks hold `lease`, tasks follow `task_config`. The prefix of
/// every Redis key is `tern-demo`.
///
/// # Errors
/// The key file, or Redis.
pub async fn fleet(
    redis: &RedisAt<'_>,
    keys_file: &Path,
    lease: Duration,
    task_config: TaskConfig,
) -> Result<(ServerBuilder, Ledger), String> {
    let url = redis.url;
    let keys = read_keys(keys_file)?;
    let mut options = RedisOptions::new().prefix("tern-demo");
    if let Some(ca) = redis.ca_file {
        options = options.ca_file(ca);
    }
    let replay = RedisReplayStore::connect(url, options.clone())
        .await
        .map_err(|e| unreachable(url, &e))?;
    let tasks = RedisTaskStore::connect(url, options.clone())
        .await
        .map_err(|e| unreachable(url, &e))?;
    let ledger = Ledger::connect(url, &options).await?;
    let imports = crate::imports::Imports::redis(url, &options).await?;
    let builder = crate::demo::builder_with_stores(Some(ledger.clone()), imports);
    // Resource updates reach the listen streams of every replica.
    let changes = builder.changes();
    let bus = RedisChangeBus::connect(url, options.clone(), changes.clone())
        .await
        .map_err(|e| unreachable(url, &e))?;
    changes.relay_through(Arc::new(bus));
    let _ = ledger.changes.set(changes);
    let builder = builder
        .keys(keys)
        .replay_store(Arc::new(replay))
        .task_store(Arc::new(tasks))
        // A replica that dies leaves its guarded legs to lapse into
        // "outcome unknown" within `lease`, and its durable tasks to be
        // taken again by another replica.
        .call_limits(CallLimits::default().lease(lease))
        .task_config(task_config.lease(lease))
        .multi_instance();
    Ok((builder, ledger))
}

/// Serves one replica at `listener` until `SIGINT` or `SIGTERM`: `/mcp`,
/// `/healthz`, `/readyz`, on tern's accept loop with `options`; `SIGHUP`
/// reloads `keys_file`.
///
/// # Errors
/// Serving failed.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: Server,
    endpoint: Http,
    options: ServeOptions,
    ledger: Ledger,
    keys_file: PathBuf,
) -> std::io::Result<()> {
    let draining = Arc::new(AtomicBool::new(false));
    spawn_key_reload(server.clone(), keys_file);
    let ready = {
        let draining = Arc::clone(&draining);
        let server = server.clone();
        move || {
            let draining = Arc::clone(&draining);
            let server = server.clone();
            let ledger = ledger.clone();
            async move { readiness(&draining, &server, &ledger).await }
        }
    };
    let app = axum::Router::new()
        .route_service("/mcp", endpoint.into_service())
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready));
    let shutdown = {
        let server = server.clone();
        async move {
            stop_signal().await;
            // Readiness fails first so the balancer stops sending new calls.
            draining.store(true, Ordering::SeqCst);
            server.shutdown();
            server.stop_tasks().await;
        }
    };
    tern_server::transport::accept::serve_service(listener, app, options, shutdown).await
}

async fn readiness(
    draining: &AtomicBool,
    server: &Server,
    ledger: &Ledger,
) -> (axum::http::StatusCode, String) {
    let redis = if ledger.reachable(Duration::from_millis(500)).await {
        "up"
    } else {
        "down"
    };
    let keys = server.key_ids().join(",");
    if draining.load(Ordering::SeqCst) {
        return (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            format!("draining redis={redis} keys={keys}\n"),
        );
    }
    (
        axum::http::StatusCode::OK,
        format!("ready redis={redis} keys={keys}\n"),
    )
}

/// On each `SIGHUP`, reads `keys_file` again and swaps the server's key
/// ring; a file that does not parse leaves the current ring in place.
fn spawn_key_reload(server: Server, keys_file: PathBuf) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: the key ring reloads only on restart");
            return;
        };
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                match read_keys(&keys_file) {
                    Ok(ring) => {
                        server.reload_keys(ring);
                        let ids = server.key_ids().join(",");
                        eprintln!("tern: key ring reloaded ({ids})");
                    }
                    Err(e) => {
                        eprintln!("tern: key ring not reloaded, keeping the current one: {e}");
                    }
                }
            }
        });
    }
    #[cfg(not(unix))]
    {
        let _ = (server, keys_file);
    }
}
