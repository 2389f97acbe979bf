//! The servers under test, each run as its own process (`bench serve …`) on
//! a single-threaded tokio runtime, pinned to one core by the parent.

use std::io::Write as _;

pub(crate) mod floor;
pub(crate) mod gateway;
pub(crate) mod hand;
pub(crate) mod rmcp;
pub(crate) mod tern;

/// Which implementation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub(crate) enum Kind {
    /// Raw hyper, fixed responses.
    Floor,
    /// hyper + `serde_json` by hand: parse, dispatch, serialise.
    HandRolled,
    /// tern-server, on its own accept loop.
    Tern,
    /// tern-server as a user gets it: `serve` with every default limit and a
    /// registry of 50 tools.
    TernDefault,
    /// tern-server's tower service in an `axum::Router` on `axum::serve`.
    TernAxum,
    /// rmcp.
    Rmcp,
    /// `tern-gateway` in front of the tern line's server over HTTP.
    Gateway,
    /// `tern-gateway` in front of the tern line's server as a stdio child.
    GatewayStdio,
}

impl Kind {
    /// The name in the tables.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Floor => "floor",
            Self::HandRolled => "hand-rolled",
            Self::Tern => "tern",
            Self::TernDefault => "tern-default",
            Self::TernAxum => "tern-axum",
            Self::Rmcp => "rmcp",
            Self::Gateway => "gateway",
            Self::GatewayStdio => "gateway-stdio",
        }
    }
}

/// Which transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Transport {
    /// Streamable HTTP on a loopback port, printed as `port N` on stdout.
    Http,
    /// stdio.
    Stdio,
}

/// Runs one server until it is killed (HTTP) or its input ends (stdio).
pub(crate) fn run(kind: Kind, transport: Transport) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        match transport {
            Transport::Http => {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                let port = listener.local_addr()?.port();
                let mut out = std::io::stdout().lock();
                writeln!(out, "port {port}")?;
                out.flush()?;
                drop(out);
                match kind {
                    Kind::Floor => floor::http(listener).await,
                    Kind::HandRolled => hand::http(listener).await,
                    Kind::Tern => tern::http(listener).await,
                    Kind::TernDefault => tern::http_default(listener).await,
                    Kind::TernAxum => tern::axum_router(listener).await,
                    Kind::Rmcp => rmcp::http(listener).await,
                    Kind::Gateway => gateway::http(listener, gateway::Upstream::Http).await,
                    Kind::GatewayStdio => gateway::http(listener, gateway::Upstream::Stdio).await,
                }
            }
            Transport::Stdio => match kind {
                Kind::Floor
                | Kind::TernAxum
                | Kind::TernDefault
                | Kind::Gateway
                | Kind::GatewayStdio => Err(std::io::Error::other(
                    "the floor, tern-axum, tern-default and the gateways have no stdio server",
                )),
                Kind::HandRolled => hand::stdio().await,
                Kind::Tern => tern::stdio().await,
                Kind::Rmcp => rmcp::stdio().await,
            },
        }
    })
}
