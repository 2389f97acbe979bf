//! The client against 2025-11-25 servers (spec: Versioning and Compatibility ›
//! Backward Compatibility with Initialization-Based Versions): era detection
//! and the fallback over stdio (a real 2025 server process, written from the
//! 2025 spec in Python) and over HTTP (tern's own server with its modern wire
//! refused the way a 2025 SDK refuses it), and no fallback against a modern
//! server, even one answering `-32022`.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::body::Body;
use http::{Request, Response, StatusCode};
use serde_json::json;
use tern_client::Client;
use tern_client::legacy::{DualEra, Era};
use tern_client::transport::Transport;
use tern_protocol::subscription::SubscriptionFilter;
use tern_server::transport::http::Http;

use crate::handlers::Elicit;

fn script() -> String {
    format!(
        "{}/tests/it/peers/legacy_stdio_server.py",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn client(transport: impl Transport) -> Client {
    Client::builder()
        .elicitation(Elicit::fill(&[
            ("region", "eu-west-1"),
            ("name", "Ada"),
            ("color", "blue"),
        ]))
        .build(transport)
}

async fn provision(args: &[&str]) -> (String, Option<Era>) {
    let mut words = vec![script()];
    words.extend(args.iter().map(|a| (*a).to_owned()));
    let transport = Arc::new(DualEra::stdio("python3", &words).unwrap());
    let c = client(Shared(Arc::clone(&transport)));
    let tools = c.list_tools().await.unwrap();
    assert_eq!(tools[0].name, "provision_database");
    let result = c
        .call_tool("provision_database", Some(json!({"name": "orders"})))
        .await
        .unwrap();
    let text = result.content[0].as_text().unwrap().to_owned();
    let era = transport.era();
    c.close().await;
    (text, era)
}

/// One transport shared by the test and the client, to read its era.
#[derive(Debug)]
struct Shared(Arc<DualEra>);

impl Transport for Shared {
    fn send(
        &self,
        out: tern_client::transport::Outgoing,
    ) -> tern_client::transport::BoxFuture<
        '_,
        Result<tern_client::transport::Exchange, tern_client::ClientError>,
    > {
        self.0.send(out)
    }

    fn close(&self) -> tern_client::transport::BoxFuture<'_, ()> {
        self.0.close()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdio_falls_back_to_initialize_and_answers_live_questions() {
    let (text, era) = provision(&[]).await;
    assert_eq!(text, "Created orders in eu-west-1");
    // The server's counter-offer of an older 2025 version is accepted.
    assert_eq!(era, Some(Era::Legacy("2025-06-18".into())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_exits_on_the_probe_is_started_again() {
    let (text, era) = provision(&["--exit-on-probe"]).await;
    assert_eq!(text, "Created orders in eu-west-1");
    assert_eq!(era, Some(Era::Legacy("2025-06-18".into())));
}

/// tern's server with its modern wire refused as a 2025 SDK refuses it (400,
/// no modern error), counting `initialize`s.
async fn legacy_endpoint(modern: bool, refusal: serde_json::Value) -> (String, Arc<AtomicUsize>) {
    let (url, inits, _) = legacy_endpoint_counting(modern, refusal).await;
    (url, inits)
}

/// [`legacy_endpoint`], also counting the modern requests refused.
async fn legacy_endpoint_counting(
    modern: bool,
    refusal: serde_json::Value,
) -> (String, Arc<AtomicUsize>, Arc<AtomicUsize>) {
    let (url, inits, refused, _) =
        legacy_endpoint_of(crate::server::build(), modern, refusal).await;
    (url, inits, refused)
}

/// `server` behind a wrapper that refuses its modern wire (unless
/// `modern`) with `refusal`, counting `initialize`s and refusals and
/// recording the method of every JSON-RPC request it passes.
async fn legacy_endpoint_of(
    server: tern_server::Server,
    modern: bool,
    refusal: serde_json::Value,
) -> (
    String,
    Arc<AtomicUsize>,
    Arc<AtomicUsize>,
    Arc<std::sync::Mutex<Vec<String>>>,
) {
    let refused = Arc::new(AtomicUsize::new(0));
    let refused_count = Arc::clone(&refused);
    let mcp = Http::new(server).into_service();
    let inits = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&inits);
    let methods: Arc<std::sync::Mutex<Vec<String>>> = Arc::default();
    let recorded = Arc::clone(&methods);
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::any(move |request: Request<Body>| {
            let mut mcp = mcp.clone();
            let inits = Arc::clone(&counted);
            let refusal = refusal.clone();
            let refused = Arc::clone(&refused_count);
            let methods = Arc::clone(&recorded);
            async move {
                let is_modern = request
                    .headers()
                    .get("mcp-protocol-version")
                    .is_some_and(|v| v == "2026-07-28");
                if is_modern && !modern {
                    refused.fetch_add(1, Ordering::SeqCst);
                    let mut response = Response::new(Body::from(refusal.to_string()));
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                    return Ok::<_, Infallible>(response);
                }
                let (parts, body) = request.into_parts();
                let bytes = http_body_util::BodyExt::collect(body)
                    .await
                    .unwrap()
                    .to_bytes();
                if bytes.windows(12).any(|w| w == b"\"initialize\"") {
                    inits.fetch_add(1, Ordering::SeqCst);
                }
                if let Ok(body) = serde_json::from_slice::<serde_json::Value>(&bytes)
                    && let (Some(m), Some(_)) = (body["method"].as_str(), body.get("id"))
                {
                    methods.lock().unwrap().push(m.to_owned());
                }
                tower::Service::call(&mut mcp, Request::from_parts(parts, Body::from(bytes))).await
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (
        format!("http://127.0.0.1:{port}/mcp"),
        inits,
        refused,
        methods,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_falls_back_to_a_session_and_answers_live_questions() {
    let refusal = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}});
    let (url, inits) = legacy_endpoint(false, refusal).await;
    let transport = Arc::new(DualEra::http(&url).unwrap());
    let c = client(Shared(Arc::clone(&transport)));
    assert_eq!(
        c.call_tool("greet", None).await.unwrap().content[0].as_text(),
        Some("Hello, Ada!")
    );
    // Two questions in one round, both answered live.
    assert_eq!(
        c.call_tool("batch", None).await.unwrap().content[0].as_text(),
        Some("Ada likes blue")
    );
    assert_eq!(transport.era(), Some(Era::Legacy("2025-11-25".into())));
    // discover is answered from the initialize result.
    let discovered = c.discover().await.unwrap();
    assert!(discovered.capabilities.tools.is_some());
    assert_eq!(inits.load(Ordering::SeqCst), 1, "one session");
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_fallback_against_a_modern_server() {
    let (url, inits) = legacy_endpoint(true, json!(null)).await;
    let transport = Arc::new(DualEra::http(&url).unwrap());
    let c = client(Shared(Arc::clone(&transport)));
    assert_eq!(
        c.call_tool("greet", None).await.unwrap().content[0].as_text(),
        Some("Hello, Ada!")
    );
    assert_eq!(transport.era(), Some(Era::Modern));
    assert_eq!(inits.load(Ordering::SeqCst), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_error_on_the_probe_means_modern() {
    let refusal = json!({"jsonrpc": "2.0", "id": "tern-probe", "error": {"code": -32022,
        "message": "Unsupported protocol version", "data": {"supported": ["2027-01-01"], "requested": "2026-07-28"}}});
    let (url, inits) = legacy_endpoint(false, refusal).await;
    let transport = Arc::new(DualEra::http(&url).unwrap());
    let c = client(Shared(Arc::clone(&transport)));
    let e = c.list_tools().await.unwrap_err();
    assert_eq!(e.rpc_error().map(|e| e.code), Some(-32022), "{e:#}");
    assert_eq!(transport.era(), Some(Era::Modern));
    assert_eq!(
        inits.load(Ordering::SeqCst),
        0,
        "no initialize: no fallback on -32022"
    );
}

/// `provision_database` over stdio with `presets` as the call's answers,
/// the installed handler answering `us-east-1` to whatever it is asked.
async fn provision_with(presets: tern_client::Presets) -> String {
    let transport = DualEra::stdio("python3", &[script()]).unwrap();
    let c = Client::builder()
        .elicitation(Elicit::fill(&[("region", "us-east-1")]))
        .build(transport);
    let mut options = tern_client::CallOptions::default();
    options.answers = presets;
    let result = c
        .call_tool_with(
            "provision_database",
            Some(json!({"name": "orders"})),
            &options,
        )
        .await
        .unwrap();
    c.close().await;
    result.content[0].as_text().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presets_answer_live_questions_by_their_order() {
    let mut presets = tern_client::Presets::new();
    presets.insert(
        tern_client::client::live_key(1),
        json!({"action": "accept", "content": {"region": "eu-north-1"}}),
    );
    assert_eq!(
        provision_with(presets.clone()).await,
        "Created orders in eu-north-1"
    );
    assert!(presets.unused().is_empty(), "the preset was used");
    // Without a preset the handler answers.
    assert_eq!(
        provision_with(tern_client::Presets::new()).await,
        "Created orders in us-east-1"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_preset_that_does_not_fit_is_refused_not_sent() {
    let mut presets = tern_client::Presets::new();
    presets.insert(
        tern_client::client::live_key(1),
        json!({"action": "accept", "content": {"region": 5}}),
    );
    // The server got an error instead of an answer, and says so.
    assert_eq!(provision_with(presets).await, "Provisioning cancelled.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_legacy_hint_costs_one_refused_initialize_then_the_probe() {
    let server = tern_server::Server::builder("modern-only", "1")
        .modern_only()
        .tool(tern_server::ToolDef::new("hello", "Says hi", || async {
            "hi"
        }))
        .build()
        .unwrap();
    let app = axum::Router::new().route_service("/mcp", Http::new(server).into_service());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = format!("http://127.0.0.1:{port}/mcp");

    let transport = Arc::new(DualEra::http(&url).unwrap().legacy_hint());
    let c = client(Shared(Arc::clone(&transport)));
    assert_eq!(
        c.call_tool("hello", None).await.unwrap().content[0].as_text(),
        Some("hi")
    );
    assert_eq!(
        transport.era(),
        Some(Era::Modern),
        "the probe ran after the refusal"
    );
    c.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_hint_skips_the_probe() {
    let refusal = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}});
    let (url, inits, probes) = legacy_endpoint_counting(false, refusal).await;
    let transport = Arc::new(DualEra::http(&url).unwrap().legacy_hint());
    let c = client(Shared(Arc::clone(&transport)));
    assert_eq!(
        c.call_tool("greet", None).await.unwrap().content[0].as_text(),
        Some("Hello, Ada!")
    );
    assert_eq!(transport.era(), Some(Era::Legacy("2025-11-25".into())));
    assert_eq!(inits.load(Ordering::SeqCst), 1);
    assert_eq!(probes.load(Ordering::SeqCst), 0, "no probe was sent");
    c.close().await;
}

/// The JSON lines `--record` wrote, read until `done` holds (bounded).
async fn recorded(
    file: &std::path::Path,
    done: impl Fn(&[serde_json::Value]) -> bool,
) -> Vec<serde_json::Value> {
    for _ in 0..200 {
        let lines: Vec<serde_json::Value> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if done(&lines) {
            return lines;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!(
        "the server did not record what was expected in {}",
        file.display()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_list_outside_a_call_is_answered_by_the_roots_handler() {
    // server-filesystem's way: `roots/list` right after
    // `notifications/initialized`, while no call is in flight (here only a
    // `tools/list`, which may not be asked questions).
    let record = std::env::temp_dir().join(format!("tern-roots-{}.jsonl", std::process::id()));
    let _ = std::fs::remove_file(&record);
    let args = [
        script(),
        "--ask-roots".into(),
        "--record".into(),
        record.display().to_string(),
    ];
    let transport = Arc::new(DualEra::stdio("python3", &args).unwrap());
    let c = Client::builder()
        .roots(tern_client::StaticRoots(vec![
            tern_protocol::roots::Root::new("file:///srv/project"),
        ]))
        .build(Arc::clone(&transport));
    assert_eq!(c.list_tools().await.unwrap()[0].name, "provision_database");
    let lines = recorded(&record, |l| l.iter().any(|e| e.get("roots").is_some())).await;
    let reply = lines.iter().find_map(|e| e.get("roots")).unwrap();
    assert_eq!(
        reply["result"],
        json!({"roots": [{"uri": "file:///srv/project"}]}),
        "{reply}"
    );
    assert!(lines[0]["capabilities"].get("roots").is_some());
    c.close().await;
    let _ = std::fs::remove_file(&record);
}

/// What a listen on a 2025 session acknowledges: the URIs subscribed, none
/// of the task ids, the list changes only where the server declares them.
fn acknowledged(
    n: Option<Result<tern_protocol::ServerNotification, tern_client::ClientError>>,
) -> SubscriptionFilter {
    match n {
        Some(Ok(tern_protocol::ServerNotification::SubscriptionsAcknowledged(ack))) => {
            ack.notifications
        }
        other => panic!("the first notification is the acknowledgement, not {other:?}"),
    }
}

/// The next resource update's URI, within 10 s.
async fn next_update(s: &mut tern_client::client::Subscription) -> String {
    match tokio::time::timeout(std::time::Duration::from_secs(10), s.next()).await {
        Ok(Some(Ok(tern_protocol::ServerNotification::ResourceUpdated(p)))) => p.uri,
        other => panic!("expected a resource update, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_on_a_2025_stdio_session_subscribes_hears_updates_and_unsubscribes() {
    let log = std::env::temp_dir().join(format!("tern-legacy-listen-{}.log", std::process::id()));
    let _ = std::fs::remove_file(&log);
    let words = vec![
        script(),
        "--resources".to_owned(),
        "--log".to_owned(),
        log.display().to_string(),
    ];
    let c = client(DualEra::stdio("python3", &words).unwrap());
    let mut s = c
        .listen(SubscriptionFilter {
            resource_subscriptions: Some(vec!["file:///a".into(), "mem://refused".into()]),
            task_ids: Some(vec!["t1".into()]),
            tools_list_changed: Some(true),
            resources_list_changed: Some(true),
            ..SubscriptionFilter::default()
        })
        .await
        .unwrap();
    let ack = acknowledged(s.next().await);
    assert_eq!(
        ack.resource_subscriptions,
        Some(vec!["file:///a".to_owned()]),
        "the refused URI is left out"
    );
    assert_eq!(
        ack.task_ids,
        Some(Vec::new()),
        "a 2025 session has no task stream"
    );
    assert_eq!(
        ack.tools_list_changed, None,
        "the server does not declare tools.listChanged"
    );
    assert_eq!(ack.resources_list_changed, Some(true));
    assert_eq!(next_update(&mut s).await, "file:///a");
    assert_eq!(next_update(&mut s).await, "file:///a");
    drop(s);
    // Dropped, the listen unsubscribes (the server logs it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let seen = std::fs::read_to_string(&log).unwrap_or_default();
        if seen.contains("unsubscribe file:///a") {
            assert!(seen.contains("resources/subscribe"), "{seen}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no unsubscribe: {seen}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    c.close().await;
    let _ = std::fs::remove_file(&log);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listen_on_a_2025_http_session_hears_the_updates_of_its_subscription() {
    let refusal = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}});
    let server = crate::server::build();
    let (url, _, _, methods) = legacy_endpoint_of(server.clone(), false, refusal).await;
    let transport = Arc::new(DualEra::http(&url).unwrap());
    let c = client(Shared(Arc::clone(&transport)));
    let mut s = c
        .listen(SubscriptionFilter {
            resource_subscriptions: Some(vec!["res://ask".into()]),
            ..SubscriptionFilter::default()
        })
        .await
        .unwrap();
    let ack = acknowledged(s.next().await);
    assert_eq!(
        ack.resource_subscriptions,
        Some(vec!["res://ask".to_owned()])
    );
    assert!(matches!(transport.era(), Some(Era::Legacy(_))));
    // Another resource's update is not this listen's; its own is. (The
    // session's standalone stream may open after the subscribe returns, so
    // the update is raised until it is heard.)
    let heard = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            server.changes().resource_updated("res://other");
            server.changes().resource_updated("res://ask");
            if let Ok(n) =
                tokio::time::timeout(std::time::Duration::from_millis(200), s.next()).await
            {
                return n;
            }
        }
    })
    .await
    .expect("the update is heard");
    match heard {
        Some(Ok(tern_protocol::ServerNotification::ResourceUpdated(p))) => {
            assert_eq!(p.uri, "res://ask");
        }
        other => panic!("expected the update of res://ask, got {other:?}"),
    }
    drop(s);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !methods
        .lock()
        .unwrap()
        .iter()
        .any(|m| m == "resources/unsubscribe")
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no unsubscribe: {:?}",
            methods.lock().unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        methods
            .lock()
            .unwrap()
            .iter()
            .any(|m| m == "resources/subscribe")
    );
    c.close().await;
}

/// What a restartable 2025 endpoint saw: each request's method (`GET` for a
/// standalone stream) and the session it named.
type Seen = Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// tern's server with its modern wire refused, behind a switch that swaps
/// in a new server (a restart: every session is gone, so the client's next
/// request gets 404).
async fn restartable_legacy_endpoint() -> (String, Seen, impl Fn()) {
    type Mcp = tern_server::transport::http::McpService;
    let current: Arc<std::sync::Mutex<Mcp>> = Arc::new(std::sync::Mutex::new(
        Http::new(crate::server::build()).into_service(),
    ));
    let seen: Seen = Arc::default();
    let (now, record) = (Arc::clone(&current), Arc::clone(&seen));
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::any(move |request: Request<Body>| {
            let mut mcp = now.lock().unwrap().clone();
            let record = Arc::clone(&record);
            async move {
                if request
                    .headers()
                    .get("mcp-protocol-version")
                    .is_some_and(|v| v == "2026-07-28")
                {
                    let refusal = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: Server not initialized"}});
                    let mut response = Response::new(Body::from(refusal.to_string()));
                    *response.status_mut() = StatusCode::BAD_REQUEST;
                    return Ok::<_, Infallible>(response);
                }
                let session = request
                    .headers()
                    .get("mcp-session-id")
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let (parts, body) = request.into_parts();
                let bytes = http_body_util::BodyExt::collect(body)
                    .await
                    .unwrap()
                    .to_bytes();
                let method = if parts.method == http::Method::GET {
                    "GET".to_owned()
                } else {
                    serde_json::from_slice::<serde_json::Value>(&bytes)
                        .ok()
                        .and_then(|b| b["method"].as_str().map(str::to_owned))
                        .unwrap_or_default()
                };
                record.lock().unwrap().push((method, session));
                tower::Service::call(&mut mcp, Request::from_parts(parts, Body::from(bytes))).await
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let restart = move || {
        *current.lock().unwrap() = Http::new(crate::server::build()).into_service();
    };
    (format!("http://127.0.0.1:{port}/mcp"), seen, restart)
}

/// The first session a standalone `GET` named other than `not`, waiting at
/// most 10 s for one.
async fn standalone_stream(seen: &Seen, not: Option<&str>) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let found = seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == "GET")
            .filter_map(|(_, s)| s.clone())
            .find(|s| Some(s.as_str()) != not);
        if let Some(session) = found {
            return session;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no standalone stream (other than {not:?}): {:?}",
            seen.lock().unwrap()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_http_session_gone_after_a_restart_is_opened_again_with_its_standalone_stream() {
    let (url, seen, restart) = restartable_legacy_endpoint().await;
    let transport = Arc::new(DualEra::http(&url).unwrap());
    let c = client(Shared(Arc::clone(&transport)));
    assert_eq!(
        c.call_tool("greet", None).await.unwrap().content[0].as_text(),
        Some("Hello, Ada!")
    );
    let first = standalone_stream(&seen, None).await;
    restart();
    // The old session is unknown now: 404, a new initialize, the call again.
    assert_eq!(
        c.call_tool("batch", None).await.unwrap().content[0].as_text(),
        Some("Ada likes blue")
    );
    let second = standalone_stream(&seen, Some(&first)).await;
    let log = seen.lock().unwrap().clone();
    let inits: Vec<_> = log.iter().filter(|(m, _)| m == "initialize").collect();
    assert_eq!(inits.len(), 2, "one initialize per session: {log:?}");
    // greet under the first session; batch refused under it (404), then
    // sent again under the second.
    let batches: Vec<_> = log
        .iter()
        .filter(|(m, _)| m == "tools/call")
        .map(|(_, s)| s.clone())
        .collect();
    assert_eq!(
        batches,
        [
            Some(first.clone()),
            Some(first.clone()),
            Some(second.clone())
        ],
        "{log:?}"
    );
    c.close().await;
}
