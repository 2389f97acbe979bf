//! `tern-gateway`: one MRTR-aware Model Context Protocol endpoint in front of
//! many servers, of either era.
//!
//! The upstreams come from the `mcpServers` / `servers` JSON desktop hosts
//! use ([`config`]), each with optional keys (allow and deny lists, a
//! prefix, an era pin, a timeout, a CA file, roots, URI prefixes, a
//! concurrency cap). Each is started (stdio) or reached (HTTP), its era
//! probed, its lists read ([`upstream`]); one [`catalogue`] namespaces and
//! routes their entries. The gateway is a [`tern_server::relay::Relay`]: a
//! tern server serves it, on stdio or Streamable HTTP, embeddable in an
//! axum app like any tern server. An upstream's `input_required` reaches
//! the client with the same `inputRequests` and a `requestState` that is
//! the gateway's sealed envelope around the upstream's state (any replica
//! with the same keys continues the round); the client's capabilities are
//! forwarded, never more, and every relayed question is checked against
//! them.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
//!
//! let gateway = Gateway::start(
//!     GatewayConfig::parse(r#"{"mcpServers": {"demo": {"command": "tern", "args": ["serve", "demo", "--stdio"]}}}"#)?,
//!     GatewayOptions::default(),
//! )
//! .await?;
//! let server = gateway.server_builder().build()?;
//! let app: axum::Router = axum::Router::new().route_service(
//!     "/mcp",
//!     tern_server::transport::http::Http::new(server).into_service(),
//! );
//! # let _ = app;
//! # Ok(()) }
//! ```

mod access;
pub mod bridge;
mod cancel;
pub mod catalogue;
pub mod config;
mod credentials;
pub mod cursor;
pub mod dedupe;
#[cfg(feature = "fleet")]
pub mod fleet;
pub mod gateway;
mod health;
mod listen;
pub mod metrics;
pub mod tasked;
pub mod upstream;

pub use config::{GatewayConfig, UpstreamConfig};
pub use cursor::Cursors;
pub use gateway::{Gateway, GatewayOptions};
