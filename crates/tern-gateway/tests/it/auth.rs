//! The gateway's auth: clients authenticate to the gateway, each upstream
//! sees only the credential the servers file gives it (never a client's
//! token), and an upstream with `principals` is seen and reached only by
//! them.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tern_client::Client;
use tern_client::transport::http::HttpTransport;
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::error::code;
use tern_server::transport::http::{Bearer, Http, serve_with};
use tern_server::{Ctx, KeyRing, Principal, Server, ToolDef};

use crate::gateway::{all_tools, bounded, upstream};

/// Who the upstream was told the caller is.
async fn whoami(ctx: Ctx) -> String {
    ctx.principal().id().unwrap_or("anonymous").to_owned()
}

/// Serves `endpoint` on a free loopback port: its `/mcp` URL.
async fn serve(endpoint: Http) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let options = tern_server::transport::accept::ServeOptions::default();
    tokio::spawn(serve_with(
        listener,
        endpoint,
        "/mcp",
        options,
        std::future::pending(),
    ));
    url
}

/// An HTTP upstream that admits only `Bearer up-secret` (as `gateway-svc`)
/// and records every token it was sent.
async fn guarded_upstream(seen: Arc<Mutex<Vec<String>>>) -> String {
    let server = Server::builder("api", "1")
        .tool(ToolDef::new("whoami", "The caller", whoami))
        .build()
        .unwrap();
    let endpoint = Http::new(server).authenticate(Bearer(move |token: &str| {
        seen.lock().unwrap().push(token.to_owned());
        (token == "up-secret").then(|| Principal::new("gateway-svc"))
    }));
    serve(endpoint).await
}

/// A client of the gateway at `url` with `token`.
fn client(url: &str, token: &str) -> Client {
    let transport = HttpTransport::new(url)
        .unwrap()
        .with_header("Authorization", format!("Bearer {token}"));
    Client::builder().build(transport)
}

fn text(result: &impl serde::Serialize) -> String {
    let v = serde_json::to_value(result).unwrap();
    v["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstreams_see_their_own_credential_and_allow_lists_hide_them() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api = guarded_upstream(Arc::clone(&seen)).await;
    let file = json!({"mcpServers": {
        "api": {"url": api, "headers": {"Authorization": "Bearer up-secret"}},
        "ops": upstream("ops", json!({"principals": ["bob"]})),
    }})
    .to_string();
    let gateway = bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        GatewayOptions::default(),
    ))
    .await
    .unwrap();
    let server = gateway
        .server_builder()
        .keys(KeyRing::generate())
        .build()
        .unwrap();
    let url = serve(
        Http::new(server.clone()).authenticate(Bearer(|token: &str| match token {
            "alice-token" => Some(Principal::new("alice")),
            "bob-token" => Some(Principal::new("bob")),
            _ => None,
        })),
    )
    .await;

    // Alice: the api upstream, as the gateway's own principal there; the
    // ops upstream neither listed nor reachable.
    let alice = client(&url, "alice-token");
    let result = bounded(alice.call_tool("api__whoami", None)).await.unwrap();
    assert_eq!(text(&result), "gateway-svc");
    let tools: Vec<String> = bounded(alice.list_tools())
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(tools.contains(&"api__whoami".to_owned()), "{tools:?}");
    assert!(!tools.iter().any(|t| t.starts_with("ops__")), "{tools:?}");
    let refused = bounded(alice.call_tool("ops__caps", None))
        .await
        .unwrap_err();
    let rpc = refused.rpc_error().expect("a JSON-RPC error");
    assert_eq!(rpc.code, code::INVALID_PARAMS);
    assert_eq!(
        rpc.message, "Unknown tool: ops__caps",
        "as for a name nobody has"
    );

    // Bob is let in by name.
    let bob = client(&url, "bob-token");
    let result = bounded(bob.call_tool("ops__caps", None)).await.unwrap();
    assert!(text(&result).starts_with('{'), "{}", text(&result));

    // The upstream saw the gateway's credential only, on every request
    // (its lists read at start, the calls): never a client's token.
    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 2, "{seen:?}");
    assert!(seen.iter().all(|t| t == "up-secret"), "{seen:?}");

    // A list filtered by caller is no shared cache's.
    let page = |who: &str| {
        let c = tern_server::testing::TestClient::new(server.clone())
            .with_principal(Principal::new(who));
        async move { c.send("tools/list", json!({})).await.result().unwrap() }
    };
    let bobs: Value = bounded(page("bob")).await;
    assert_eq!(bobs["cacheScope"], "private");
    let carols = bounded(page("carol")).await;
    let names: Vec<&str> = carols["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api__whoami"]);
    let anonymous = tern_server::testing::TestClient::new(server.clone());
    assert_eq!(bounded(all_tools(&anonymous)).await, ["api__whoami"]);
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_refusing_the_gateways_credential_is_down_saying_why() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api = guarded_upstream(Arc::clone(&seen)).await;
    let file = json!({"mcpServers": {
        "api": {"url": api, "headers": {"Authorization": "Bearer wrong"}},
        "a": upstream("a", json!({})),
    }})
    .to_string();
    let gateway = bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        GatewayOptions::default(),
    ))
    .await
    .unwrap();
    let api = &gateway.upstreams()[0];
    assert!(!api.is_up());
    let reason = api.down_reason().unwrap();
    assert!(reason.contains("401"), "{reason}");
    assert!(
        !reason.contains("wrong"),
        "the credential is never in a message: {reason}"
    );
    gateway.close().await;
}

/// A grant as `tern login` stores one, for `endpoint`.
fn grant(endpoint: &str, token: &str) -> tern_client::auth::Grant {
    serde_json::from_value(json!({
        "key": {"resource": endpoint, "issuer": "https://as.example", "client_id": "c"},
        "endpoint": endpoint, "access_token": token, "refresh_token": null,
        "expires_at": null, "scopes": [], "token_endpoint": "https://as.example/token",
        "client_secret": null, "auth_method": "none"
    }))
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_auth_login_upstream_gets_the_stored_grant_and_without_one_is_down() {
    use tern_client::auth::{MemoryTokenStore, TokenStore};
    let seen = Arc::new(Mutex::new(Vec::new()));
    let api = guarded_upstream(Arc::clone(&seen)).await;
    let other = guarded_upstream(Arc::clone(&seen)).await;
    let store = Arc::new(MemoryTokenStore::new());
    store.put(grant(&api, "up-secret"));
    let file = json!({"mcpServers": {
        "api": {"url": api, "auth": "login"},
        "other": {"url": other, "auth": "login"},
    }})
    .to_string();
    let gateway = bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        GatewayOptions::default().logins(store),
    ))
    .await
    .unwrap();
    let c = tern_server::testing::TestClient::new(
        gateway
            .server_builder()
            .keys(KeyRing::generate())
            .build()
            .unwrap(),
    );
    let me = bounded(c.call_tool("api__whoami", json!({}))).await;
    assert_eq!(me.text(), Some("gateway-svc"), "{:?}", me.outcome);
    assert!(seen.lock().unwrap().iter().all(|t| t == "up-secret"));
    // No grant for the other: down, saying what to run; nothing was sent.
    let down = &gateway.upstreams()[1];
    assert!(!down.is_up());
    let reason = down.down_reason().unwrap();
    assert!(
        reason.contains(&format!("run `tern login {other}`")),
        "{reason}"
    );
    gateway.close().await;
}
