//! `subscriptions/listen` on a 2025-11-25 session, which has no such
//! method: its updates are asked for one resource at a time with
//! `resources/subscribe` and arrive as session notifications (2025-11-25
//! Server Features, [Resources](https://modelcontextprotocol.io/specification/2025-11-25/server/resources),
//! "Subscriptions"; the list-changed notifications of tools, prompts and
//! resources come to any session whose server declares `listChanged`).
//!
//! The leg makes one listen of them, as a 2026-07-28 server would:
//!
//! 1. it starts listening to the session before it subscribes, so no update
//!    sent between the two is lost;
//! 2. each URI of the filter is subscribed with `resources/subscribe` when
//!    the server declares `resources.subscribe`; one the server refuses is
//!    left out, not fatal;
//! 3. the first notification is a `notifications/subscriptions/acknowledged`
//!    naming what is honoured: the URIs subscribed, the list changes the
//!    server declares. Task ids are never honoured: a 2025 session has no
//!    task status stream to follow (its tasks are polled, the `task` module);
//! 4. then the session's notifications that fit the filter, until the
//!    session ends (the stream ends: the server ended the subscription) or
//!    the exchange is dropped — then each URI is unsubscribed
//!    (`resources/unsubscribe`, best effort, bounded by [`UNSUBSCRIBE_WAIT`]).

use std::collections::HashSet;
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::ServerNotification;
use tern_protocol::legacy::{RESOURCES_SUBSCRIBE, RESOURCES_UNSUBSCRIBE};
use tern_protocol::subscription::{
    SubscriptionFilter, SubscriptionsAcknowledgedNotificationParams,
};
use tokio::sync::mpsc;

use super::task::{Session, request};
use crate::error::ClientError;
use crate::transport::{Exchange, Incoming, Outgoing};

/// How long the unsubscribes of an ended listen may take: 2 s.
pub(crate) const UNSUBSCRIBE_WAIT: Duration = Duration::from_secs(2);

/// What the session will deliver of a filter.
#[derive(Debug, Default)]
struct Honoured {
    uris: HashSet<String>,
    tools: bool,
    prompts: bool,
    resources: bool,
}

impl Honoured {
    fn takes(&self, n: &ServerNotification) -> bool {
        match n {
            ServerNotification::ResourceUpdated(p) => self.uris.contains(&p.uri),
            ServerNotification::ToolListChanged(_) => self.tools,
            ServerNotification::PromptListChanged(_) => self.prompts,
            ServerNotification::ResourceListChanged(_) => self.resources,
            _ => false,
        }
    }

    /// The filter the acknowledgement names, in the order asked.
    fn filter(&self, asked: &SubscriptionFilter) -> SubscriptionFilter {
        let uris: Vec<String> = asked
            .resource_subscriptions
            .iter()
            .flatten()
            .filter(|u| self.uris.contains(*u))
            .cloned()
            .collect();
        SubscriptionFilter {
            tools_list_changed: self.tools.then_some(true),
            prompts_list_changed: self.prompts.then_some(true),
            resources_list_changed: self.resources.then_some(true),
            resource_subscriptions: asked.resource_subscriptions.as_ref().map(|_| uris),
            task_ids: asked.task_ids.as_ref().map(|_| Vec::new()),
        }
    }
}

/// The filter of a `subscriptions/listen` body.
fn filter_of(out: &Outgoing) -> Result<SubscriptionFilter, ClientError> {
    let body: Value = serde_json::from_str(&out.body)
        .map_err(|e| ClientError::request("the listen request cannot be read").because(e))?;
    serde_json::from_value(body["params"]["notifications"].clone())
        .map_err(|e| ClientError::request("the listen filter cannot be read").because(e))
}

/// `subscriptions/listen` (`out`) on the 2025 session `session`, whose
/// `initialize` result is `init` (module docs).
pub(super) async fn listen(
    session: Session,
    init: &Value,
    version: String,
    out: &Outgoing,
) -> Result<Exchange, ClientError> {
    let asked = filter_of(out)?;
    let caps = &init["capabilities"];
    let declares = |pointer: &str| caps.pointer(pointer) == Some(&Value::Bool(true));
    let mut session_notes = session.listeners().add();
    let mut honoured = Honoured {
        tools: asked.tools_list_changed == Some(true) && declares("/tools/listChanged"),
        prompts: asked.prompts_list_changed == Some(true) && declares("/prompts/listChanged"),
        resources: asked.resources_list_changed == Some(true) && declares("/resources/listChanged"),
        ..Honoured::default()
    };
    if declares("/resources/subscribe") {
        for uri in asked.resource_subscriptions.iter().flatten() {
            match request(
                &session,
                &version,
                RESOURCES_SUBSCRIBE,
                json!({"uri": uri}),
                None,
            )
            .await?
            {
                Ok(_) => {
                    honoured.uris.insert(uri.clone());
                }
                Err(e) => {
                    tracing::info!(%uri, error = %e.message, "the 2025 server refused the subscription");
                }
            }
        }
    }
    let (tx, rx) = mpsc::channel(64);
    let ack = SubscriptionsAcknowledgedNotificationParams {
        notifications: honoured.filter(&asked),
        meta: None,
    };
    let _ = tx.try_send(Ok(Incoming::Notification(
        ServerNotification::SubscriptionsAcknowledged(ack),
    )));
    tokio::spawn(async move {
        let listener_left = loop {
            let note = tokio::select! {
                note = session_notes.recv() => note,
                () = tx.closed() => break true,
            };
            match note {
                // The session ended; so does the listen.
                None => break false,
                Some(n) if honoured.takes(&n) => {
                    if tx.send(Ok(Incoming::Notification(n))).await.is_err() {
                        break true;
                    }
                }
                Some(_) => {}
            }
        };
        if listener_left {
            let _ = tokio::time::timeout(UNSUBSCRIBE_WAIT, async {
                for uri in &honoured.uris {
                    let _ = request(
                        &session,
                        &version,
                        RESOURCES_UNSUBSCRIBE,
                        json!({"uri": uri}),
                        None,
                    )
                    .await;
                }
            })
            .await;
        }
    });
    Ok(Exchange::new(rx, None))
}
