//! The binaries the official MCP conformance suite drives (not published).
//!
//! `conformance-server` meets the suite's server contract for revision
//! 2026-07-28 (the tools, prompts and resources its server scenarios call,
//! as `@modelcontextprotocol/conformance` defines them; `scripts/conformance`
//! runs it), written only against tern's public API. `conformance-client`
//! arrives with the client issue.

/// Installs both binaries' logging: standard error, filtered by `TERN_LOG`
/// (`level` and `target=level` directives, default `warn`; empty ones
/// skipped, since tracing's `Targets` reads one as "everything, at TRACE").
pub fn init_logs() {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let filter: Targets = std::env::var("TERN_LOG")
        .ok()
        .map(|given| {
            given
                .split(',')
                .filter(|d| !d.trim().is_empty())
                .collect::<Vec<_>>()
                .join(",")
        })
        .filter(|directives| !directives.is_empty())
        .and_then(|directives| directives.parse().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::WARN));
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(filter)
        .init();
}
