//! `tern gateway` as a user embeds it: `tern-gateway` in front of one
//! upstream, served by tern-server on its own accept loop with the tern
//! line's caps (so the two lines differ only by the gateway). The upstream
//! is the tern line's server, over HTTP (its port from the parent, in
//! [`UPSTREAM`]) or as a stdio child of this process (`bench serve tern
//! stdio`, ended when this process's pipes close). `prefix: ""` keeps the
//! tools' names, so the load is the same as against tern direct.

use serde_json::json;
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_server::KeyRing;
use tern_server::transport::http::{Http, serve_with};

/// The environment variable naming the HTTP upstream's loopback port.
pub(crate) const UPSTREAM: &str = "TERN_BENCH_UPSTREAM";

/// How the gateway reaches its upstream.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Upstream {
    /// Streamable HTTP, at the port in [`UPSTREAM`].
    Http,
    /// A stdio child.
    Stdio,
}

/// Serves the gateway until the process is killed.
pub(crate) async fn http(
    listener: tokio::net::TcpListener,
    upstream: Upstream,
) -> std::io::Result<()> {
    let entry = match upstream {
        Upstream::Http => {
            let port: u16 = std::env::var(UPSTREAM)
                .ok()
                .and_then(|p| p.parse().ok())
                .ok_or_else(|| std::io::Error::other(format!("{UPSTREAM} names no port")))?;
            json!({"url": format!("http://127.0.0.1:{port}/mcp"), "prefix": ""})
        }
        Upstream::Stdio => {
            let exe = std::env::current_exe()?;
            json!({
                "command": exe.to_string_lossy(),
                "args": ["serve", "tern", "stdio"],
                "prefix": "",
            })
        }
    };
    let config = GatewayConfig::parse(&json!({"mcpServers": {"tern": entry}}).to_string())
        .map_err(std::io::Error::other)?;
    let gateway = Gateway::start(config, GatewayOptions::default())
        .await
        .map_err(std::io::Error::other)?;
    let server = gateway
        .server_builder()
        .keys(KeyRing::generate())
        .build()
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let outcome = serve_with(
        listener,
        super::tern::raised(Http::new(server)),
        "/mcp",
        super::tern::options(),
        std::future::pending::<()>(),
    )
    .await;
    gateway.close().await;
    outcome
}
