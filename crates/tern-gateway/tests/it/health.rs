//! An HTTP upstream's health watched: stopped, its entries leave the lists
//! (the catalogue rebuilt); back on its address, they return.

use serde_json::json;
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_server::transport::http::{Http, serve_with};
use tern_server::{Server, ToolDef};

use crate::gateway::{all_tools, bounded, client, upstream};

/// Serves a one-tool server at `addr` until the returned sender is dropped
/// or sent to (a graceful stop: its connections closed).
async fn serve_at(addr: std::net::SocketAddr) -> tokio::sync::oneshot::Sender<()> {
    // The address was just given up: bound again as soon as the OS allows.
    let listener = bounded(async {
        loop {
            match tokio::net::TcpListener::bind(addr).await {
                Ok(l) => return l,
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
            }
        }
    })
    .await;
    let server = Server::builder("api", "1")
        .tool(ToolDef::new("ping", "Pong", || async { "pong".to_owned() }))
        .build()
        .unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_with(
        listener,
        Http::new(server),
        "/mcp",
        tern_server::transport::accept::ServeOptions::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    stop
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_upstream_that_goes_leaves_the_lists_and_comes_back() {
    let addr: std::net::SocketAddr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let stop = serve_at(addr).await;
    let file = json!({"mcpServers": {
        "api": {"url": format!("http://{addr}/mcp"), "healthInterval": 0.05, "timeout": 5},
        "a": upstream("a", json!({})),
    }})
    .to_string();
    let gateway = bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        GatewayOptions::default(),
    ))
    .await
    .unwrap();
    let c = client(&gateway);
    assert!(
        bounded(all_tools(&c))
            .await
            .contains(&"api__ping".to_owned())
    );
    let api = gateway.upstreams()[0].clone();
    let mut generations = gateway.generations();

    // Stopped: the probe fails, it is down and its tool leaves the list.
    let _ = stop.send(());
    bounded(generations.wait_for(|_| !api.is_up()))
        .await
        .unwrap();
    let tools = bounded(all_tools(&c)).await;
    assert!(!tools.contains(&"api__ping".to_owned()), "{tools:?}");
    assert!(tools.contains(&"a__ask_name".to_owned()), "the others stay");
    let down = bounded(c.call_tool("api__ping", json!({}))).await;
    assert!(down.outcome.is_err(), "{:?}", down.outcome);

    // Back on its address: up again, listed, answering.
    let _stop = serve_at(addr).await;
    bounded(generations.wait_for(|_| api.is_up()))
        .await
        .unwrap();
    assert!(
        bounded(all_tools(&c))
            .await
            .contains(&"api__ping".to_owned())
    );
    let back = bounded(c.call_tool("api__ping", json!({}))).await;
    assert_eq!(back.text(), Some("pong"), "{:?}", back.outcome);
    gateway.close().await;
}
