//! `tern listen URI... [--task ID]... SERVER`: follows resource updates and
//! task status with one `subscriptions/listen` stream (2026-07-28), one
//! line per notification (`--json`: one JSON object per line), until
//! Ctrl-C (exit 0) or the server ends the subscription.
//!
//! A 2025-11-25 server is followed on its session: tern-client's legacy
//! leg subscribes to each URI with `resources/subscribe` and hands on the
//! session's `notifications/resources/updated` (a server that does not
//! declare `resources.subscribe` honours none). Such a session has no task
//! status stream, so `--task` is not honoured there; the acknowledgement
//! line says what is, and a listen that honours nothing ends at once
//! (exit 3) rather than wait for what cannot come.
//!
//! Every string of the server's (URIs, task ids, status messages, methods)
//! is shown through [`tern::safe`]: on standard output by [`super::emit`],
//! on standard error by `safe::line`.

use serde_json::{Value, json};
use tern_client::legacy::Era;
use tern_protocol::ServerNotification;
use tern_protocol::method;
use tern_protocol::subscription::SubscriptionFilter;

use super::{Connected, emit, interrupt};
use crate::advice::failure;
use crate::exit::{EXIT_OK, EXIT_SERVER, Failure};

/// `tern listen`.
pub(super) async fn listen(
    c: &Connected,
    uris: Vec<String>,
    tasks: Vec<String>,
) -> Result<u8, Failure> {
    let d = &c.driver;
    let legacy = match c.era().await? {
        Some(Era::Legacy(version)) => Some(version),
        _ => None,
    };
    let mut filter = SubscriptionFilter::default();
    if !uris.is_empty() {
        filter.resource_subscriptions = Some(uris.clone());
    }
    if !tasks.is_empty() {
        filter.task_ids = Some(tasks.clone());
    }
    let mut subscription = d
        .wait("subscriptions/listen", d.client.listen(filter))
        .await?;
    // One Ctrl-C future for the whole listen: tokio delivers a SIGINT only
    // to a `ctrl_c` future already polled, so one made anew each turn missed
    // a Ctrl-C that came while a notification was being printed (and the
    // listen went on).
    let stop = interrupt();
    tokio::pin!(stop);
    loop {
        let next = tokio::select! {
            n = subscription.next() => n,
            // Ctrl-C is how a listen ends: dropping the stream ends the
            // subscription on the wire (a closed HTTP stream, or
            // notifications/cancelled over stdio).
            () = &mut stop => {
                crate::terminal::restore();
                eprintln!("tern: stopped listening");
                return Ok(EXIT_OK);
            }
        };
        let notification = match next {
            None => {
                eprintln!("tern: {} ended the subscription", d.who());
                return Ok(EXIT_OK);
            }
            Some(Err(e)) => return Err(failure(&e, &d.session)),
            Some(Ok(n)) => n,
        };
        if let ServerNotification::SubscriptionsAcknowledged(ack) = &notification {
            let honoured = ack
                .notifications
                .resource_subscriptions
                .iter()
                .flatten()
                .chain(ack.notifications.task_ids.iter().flatten())
                .map(|s| tern::safe::line(s).into_owned())
                .collect::<Vec<_>>();
            if let Some(version) = &legacy
                && !tasks.is_empty()
            {
                eprintln!(
                    "tern: {} speaks {version}, whose tasks have no status stream to follow: --task is not followed there",
                    d.who()
                );
            }
            if honoured.is_empty() {
                return Err(Failure {
                    code: EXIT_SERVER,
                    message: format!(
                        "{} honours none of what was asked ({}): nothing to listen to",
                        d.who(),
                        uris.iter()
                            .chain(&tasks)
                            .map(|s| tern::safe::line(s).into_owned())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                });
            }
            eprintln!(
                "tern: listening to {} on {} (Ctrl-C to stop)",
                honoured.join(", "),
                d.who()
            );
            continue;
        }
        if c.json {
            emit(&format!(
                "{}\n",
                tern::safe::json_line(&as_json(&notification))
            ));
        } else {
            emit(&format!("{}\n", line(&notification)));
        }
    }
}

/// One notification as one line for people (the server's strings made
/// safe by [`emit`]).
fn line(n: &ServerNotification) -> String {
    match n {
        ServerNotification::ResourceUpdated(p) => {
            format!("resource updated: {}", tern::safe::line(&p.uri))
        }
        ServerNotification::TaskStatus(p) => format!(
            "task {}: {}",
            tern::safe::line(&p.task.task.task_id),
            crate::rounds::task_line(&p.task.task)
        ),
        ServerNotification::ResourceListChanged(_) => "resource list changed".into(),
        ServerNotification::ToolListChanged(_) => "tool list changed".into(),
        ServerNotification::PromptListChanged(_) => "prompt list changed".into(),
        ServerNotification::Other { method, .. } => {
            format!("notification: {}", tern::safe::line(method))
        }
        _ => "notification".into(),
    }
}

/// One notification as JSON: `{"method", "params"}` as it came.
fn as_json(n: &ServerNotification) -> Value {
    let (m, params) = match n {
        ServerNotification::ResourceUpdated(p) => {
            (method::NOTIFICATION_RESOURCES_UPDATED, json!(p))
        }
        ServerNotification::TaskStatus(p) => (method::NOTIFICATION_TASKS, json!(p)),
        ServerNotification::ResourceListChanged(p) => {
            (method::NOTIFICATION_RESOURCES_LIST_CHANGED, json!(p))
        }
        ServerNotification::ToolListChanged(p) => {
            (method::NOTIFICATION_TOOLS_LIST_CHANGED, json!(p))
        }
        ServerNotification::PromptListChanged(p) => {
            (method::NOTIFICATION_PROMPTS_LIST_CHANGED, json!(p))
        }
        ServerNotification::Other { method, params } => {
            let params = params
                .as_deref()
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
                .unwrap_or(Value::Null);
            return json!({"method": method, "params": params});
        }
        _ => return json!({"method": null}),
    };
    json!({"method": m, "params": params})
}
