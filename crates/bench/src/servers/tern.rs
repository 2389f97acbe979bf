//! tern: the four tools on `tern-server`'s public API, with its defaults
//! (sealing with a generated key ring, argument validation).

use std::time::Duration;

use tern_server::transport::http::{Http, ServeOptions, serve_with};
use tern_server::transport::stdio::{StdioOptions, serve_stdio};
use tern_server::{Answer, Args, Ctx, Elicit, Json, KeyRing, Server, ToolDef, ToolError};

use crate::workload::{
    ConfirmArgs, Confirmation, EchoArgs, PayloadArgs, Report, SlowArgs, confirmed, report,
};

async fn echo(Args(a): Args<EchoArgs>) -> String {
    a.text
}

async fn payload(Args(a): Args<PayloadArgs>) -> Json<Report> {
    Json(report(a.data.len()))
}

async fn confirm(ctx: Ctx, Args(a): Args<ConfirmArgs>) -> Result<String, ToolError> {
    let question = Elicit::<Confirmation>::form("Proceed?").key("confirm");
    Ok(match ctx.ask(question).await? {
        Answer::Accept(Confirmation { ok: true }) => confirmed(&a.item),
        _ => "cancelled".to_owned(),
    })
}

async fn slow(ctx: Ctx, Args(a): Args<SlowArgs>) -> String {
    let total = f64::from(a.seconds);
    for i in 0..a.seconds {
        ctx.progress(f64::from(i), Some(total), None);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    "done".to_owned()
}

/// The arguments of the 46 other tools of the default line's registry.
#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Lookup {
    /// What to look up.
    #[allow(dead_code, reason = "decoded and validated, never read")]
    query: String,
    /// At most this many results.
    #[allow(dead_code, reason = "decoded and validated, never read")]
    limit: Option<u32>,
}

async fn lookup(Args(_): Args<Lookup>) -> &'static str {
    "nothing found"
}

fn server() -> Server {
    build(builder())
}

/// The bench server a user writes: the four tools among 46 others (a
/// registry of 50, as a real catalogue), the default limits.
fn default_server() -> Server {
    let mut builder = builder();
    for n in 0..46 {
        builder = builder.tool(ToolDef::new(
            format!("lookup_{n:02}"),
            "Looks something up",
            lookup,
        ));
    }
    build(builder)
}

fn build(builder: tern_server::ServerBuilder) -> Server {
    match builder.keys(KeyRing::generate()).build() {
        Ok(server) => server,
        Err(e) => panic!("the bench server does not build: {e}"),
    }
}

fn builder() -> tern_server::ServerBuilder {
    Server::builder("bench", "1.0.0")
        .tool(ToolDef::new("echo", "Echoes", echo))
        .tool(ToolDef::new(
            "payload",
            "Answers 4 KiB of structure",
            payload,
        ))
        .tool(ToolDef::new("confirm", "Asks once, then answers", confirm).elicits::<Confirmation>())
        .tool(ToolDef::new("slow", "Reports progress every second", slow))
}

/// The endpoint, its stream caps raised above the memory scenario's 1,000
/// SSE streams from one (anonymous) caller: the defaults refuse the 33rd
/// stream of a caller, the 129th in all, and the 33rd request in flight of
/// one principal. Everything else is the default.
fn endpoint() -> Http {
    raised(Http::new(server()))
}

/// `http` with the stream and in-flight caps of [`endpoint`] raised.
pub(crate) fn raised(http: Http) -> Http {
    http.max_streams(4096)
        .max_streams_per_caller(4096)
        .max_in_flight_per_principal(4096)
}

/// Serves over Streamable HTTP at `/mcp` until the process is killed.
///
/// The accept loop's caps are raised above the memory scenario's 1,000
/// streams and connections from one loopback address (the defaults refuse
/// the 513th connection, and the 65th connection or request of one peer);
/// its timeouts and everything else are the defaults.
pub(crate) async fn http(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    serve_with(
        listener,
        endpoint(),
        "/mcp",
        options(),
        std::future::pending::<()>(),
    )
    .await
}

/// The accept loop's options of [`http()`]: its caps raised, the rest the
/// defaults.
pub(crate) fn options() -> ServeOptions {
    ServeOptions::new()
        .max_connections(4096)
        .max_in_flight(4096)
        .max_in_flight_per_peer(4096)
        .max_connections_per_peer(4096)
        .header_timeout(Duration::from_secs(60))
}

/// Serves the default line: [`default_server`] on `serve` with tern's
/// defaults as they are (no cap raised), until the process is killed.
pub(crate) async fn http_default(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    tern_server::transport::http::serve(
        listener,
        Http::new(default_server()),
        "/mcp",
        std::future::pending::<()>(),
    )
    .await
}

/// Serves the same server as users mount it in their own application: the
/// endpoint's tower service (`Http::into_service`) routed at `/mcp` in an
/// `axum::Router`, served by `axum::serve` (hyper-util's auto connection
/// builder, no caps of tern's accept loop). The line beside [`http()`] shows
/// what tern's own accept loop saves, or costs.
pub(crate) async fn axum_router(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let router = axum::Router::new().route_service("/mcp", endpoint().into_service());
    axum::serve(listener, router).await
}

/// Serves on standard input and output until end of input.
pub(crate) async fn stdio() -> std::io::Result<()> {
    serve_stdio(server(), StdioOptions::default()).await
}
