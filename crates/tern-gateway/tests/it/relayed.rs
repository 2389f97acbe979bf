//! The rest relayed: progress under the client's own token, a client's
//! cancellation reaching the upstream, and `subscriptions/listen` fanned out
//! to the upstreams (resource updates of the URIs a stream follows, and an
//! upstream's list change as the merged list's).

use std::sync::Arc;

use serde_json::{Value, json};
use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
use tern_protocol::jsonrpc::{Request, RequestId};
use tern_protocol::{ServerNotification, version};
use tern_server::testing::TestClient;
use tern_server::{CallContext, KeyRing, Notifier, Principal};
use tokio_util::sync::CancellationToken;

use crate::gateway::{bounded, upstream};

async fn start() -> Gateway {
    // A timeout far past the hang guard: only the cancellation ends `hold`.
    let file = json!({"mcpServers": {
        "a": upstream("a", json!({"timeout": 3600})),
        "b": upstream("b", json!({})),
    }})
    .to_string();
    bounded(Gateway::start(
        GatewayConfig::parse(&file).unwrap(),
        GatewayOptions::default(),
    ))
    .await
    .unwrap()
}

/// Calls `tool` until its text is `want` (a hang guard bounds it): what an
/// upstream did in reaction to a notification is seen by asking it.
async fn until_text(c: &TestClient, tool: &str, want: &str) {
    bounded(async {
        loop {
            let seen = c.call_tool(tool, json!({})).await;
            if seen.text() == Some(want) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_cancellation_reaches_the_upstream_and_progress_keeps_its_token() {
    let gateway = start().await;
    let server = gateway
        .server_builder()
        .keys(KeyRing::generate())
        .build()
        .unwrap();
    let c = Arc::new(TestClient::new(server));
    let cancel = CancellationToken::new();
    let call = tokio::spawn({
        let (c, cancel) = (Arc::clone(&c), cancel.clone());
        async move {
            let params = c.with_meta(json!({
                "name": "a__hold", "arguments": {}, "_meta": {"progressToken": "mine"},
            }));
            c.send_as("tools/call", Some(params), &Principal::anonymous(), cancel)
                .await
        }
    });
    until_text(&c, "a__held", "began 1, cancelled 0").await;
    cancel.cancel();
    // The upstream's own handler saw the cancellation.
    until_text(&c, "a__held", "began 1, cancelled 1").await;
    let cancelled = bounded(call).await.unwrap();
    assert_ne!(
        cancelled.text(),
        Some("held to the end"),
        "{:?}",
        cancelled.outcome
    );
    // Its progress reached the client under the client's token, not the
    // gateway's own.
    let progress: Vec<&Value> = cancelled
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert_eq!(progress.len(), 1, "{:?}", cancelled.notifications);
    assert_eq!(progress[0]["params"]["progressToken"], "mine");
    assert_eq!(progress[0]["params"]["message"], "holding");
    // Another upstream's calls are untouched by it.
    until_text(&c, "b__held", "began 0, cancelled 0").await;
    gateway.close().await;
}

/// Opens a `subscriptions/listen` (id `id`) on `server` as a stream would:
/// its notifications come to the returned receiver until `cancel`.
fn listen(
    server: &tern_server::Server,
    id: i64,
    notifications: Value,
    cancel: &CancellationToken,
) -> tern_server::Notifications {
    listen_declaring(server, id, notifications, json!({}), cancel)
}

/// [`listen`] declaring `capabilities`.
fn listen_declaring(
    server: &tern_server::Server,
    id: i64,
    notifications: Value,
    capabilities: Value,
    cancel: &CancellationToken,
) -> tern_server::Notifications {
    let (notifier, rx) = Notifier::channel(64);
    let call = CallContext::new(Principal::anonymous())
        .with_notifier(notifier)
        .with_cancel(cancel.clone());
    let params = json!({
        "notifications": notifications,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": version::LATEST,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "listener", "version": "0"},
        },
    });
    let request = Request {
        id: RequestId::Number(id),
        method: "subscriptions/listen".into(),
        params: Some(serde_json::value::to_raw_value(&params).unwrap()),
    };
    let server = server.clone();
    tokio::spawn(async move { server.handle(&request, call).await });
    rx
}

/// The next notification `pick` accepts (others skipped).
async fn next<T>(
    rx: &mut tern_server::Notifications,
    mut pick: impl FnMut(ServerNotification) -> Option<T>,
) -> T {
    bounded(async {
        loop {
            let n = rx.recv().await.expect("the listen stream ended");
            if let Some(t) = pick(n) {
                return t;
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_is_fanned_out_to_the_upstreams_and_their_changes_merged() {
    let gateway = start().await;
    let server = gateway
        .server_builder()
        .keys(KeyRing::generate())
        .build()
        .unwrap();
    let c = TestClient::new(server.clone());
    let cancel = CancellationToken::new();
    let mut stream = listen(
        &server,
        7,
        json!({"toolsListChanged": true, "resourceSubscriptions": ["a://readme", "c://nobody"]}),
        &cancel,
    );
    let acked = next(&mut stream, |n| match n {
        ServerNotification::SubscriptionsAcknowledged(a) => Some(a.notifications),
        _ => None,
    })
    .await;
    assert_eq!(acked.tools_list_changed, Some(true));
    // Followed at the upstream that serves it, and only there.
    let mut following = gateway.following();
    bounded(following.wait_for(|f| f.contains("a://readme")))
        .await
        .unwrap();
    assert_eq!(
        following.borrow().iter().collect::<Vec<_>>(),
        ["a://readme"],
        "a URI no upstream serves is followed nowhere"
    );

    // b's readme changing is not followed; a's is, under the stream's id.
    assert_eq!(
        c.call_tool("b__touch", json!({})).await.text(),
        Some("touched")
    );
    assert_eq!(
        c.call_tool("a__touch", json!({})).await.text(),
        Some("touched")
    );
    let (uri, subscription) = next(&mut stream, |n| match n {
        ServerNotification::ResourceUpdated(u) => {
            Some((u.uri, u.meta.and_then(|m| m.subscription_id)))
        }
        _ => None,
    })
    .await;
    assert_eq!(uri, "a://readme");
    assert_eq!(subscription, Some(RequestId::Number(7)));

    // An upstream's list change is the merged list's.
    let before = *gateway.generations().borrow();
    assert_eq!(
        c.call_tool("b__relist", json!({})).await.text(),
        Some("relisted")
    );
    next(&mut stream, |n| {
        matches!(n, ServerNotification::ToolListChanged(_)).then_some(())
    })
    .await;
    assert!(
        *gateway.generations().borrow() > before,
        "the catalogue was rebuilt"
    );

    // The stream gone, the upstream no longer follows its URI.
    cancel.cancel();
    bounded(following.wait_for(std::collections::BTreeSet::is_empty))
        .await
        .unwrap();
    gateway.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relayed_tasks_status_reaches_a_listen_stream_under_the_id_the_client_holds() {
    use tern_protocol::task::{TASKS_EXTENSION, TaskStatus};
    let gateway = start().await;
    let server = gateway
        .server_builder()
        .keys(KeyRing::generate())
        .build()
        .unwrap();
    let capabilities = tern_protocol::ClientCapabilities::default()
        .with_elicitation_form()
        .with_extension(TASKS_EXTENSION);
    let c = TestClient::new(server.clone()).with_capabilities(capabilities.clone());
    let created = bounded(c.call_tool("a__task_go", json!({})))
        .await
        .result()
        .unwrap();
    assert_eq!(created["resultType"], "task", "{created}");
    let id = created["taskId"].as_str().unwrap().to_owned();

    let cancel = CancellationToken::new();
    let mut stream = listen_declaring(
        &server,
        9,
        json!({"taskIds": [id, "forged-id"]}),
        serde_json::to_value(&capabilities).unwrap(),
        &cancel,
    );
    let acked = next(&mut stream, |n| match n {
        ServerNotification::SubscriptionsAcknowledged(a) => Some(a.notifications),
        _ => None,
    })
    .await;
    assert_eq!(
        acked.task_ids,
        Some(vec![id.clone()]),
        "a forged id is left out"
    );

    // Its status as the upstream reports it, under the wrapped id: asking.
    let status = |want: TaskStatus| {
        let id = id.clone();
        move |n: ServerNotification| match n {
            ServerNotification::TaskStatus(t) if t.task.task.status == want => {
                assert_eq!(t.task.task.task_id, id, "the id the client holds");
                assert_eq!(
                    t.meta.and_then(|m| m.subscription_id),
                    Some(RequestId::Number(9))
                );
                Some(t.task)
            }
            _ => None,
        }
    };
    let asking = next(&mut stream, status(TaskStatus::InputRequired)).await;
    assert!(
        asking
            .input_requests
            .as_ref()
            .is_some_and(|r| r.contains_key("go")),
        "{asking:?}"
    );
    let updated = bounded(c.send(
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"go": crate::gateway::accept(json!({"go": true}))}}),
    ))
    .await;
    assert!(updated.outcome.is_ok(), "{:?}", updated.outcome);
    let done = next(&mut stream, status(TaskStatus::Completed)).await;
    let result = serde_json::to_value(done.result).unwrap();
    assert_eq!(result["content"][0]["text"], "went", "{result}");
    cancel.cancel();
    gateway.close().await;
}
