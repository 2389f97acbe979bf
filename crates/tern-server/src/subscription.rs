//! `subscriptions/listen` (spec: Subscriptions): the acknowledgement first,
//! then the change notifications the client opted in to, each tagged with the
//! subscription id, until the client goes away or the server closes the
//! subscription gracefully.

use std::sync::Arc;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::meta::{NotificationMeta, NotificationParams};
use tern_protocol::resource::ResourceUpdatedNotificationParams;
use tern_protocol::subscription::{
    SubscriptionFilter, SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams, SubscriptionsListenResult,
};
use tern_protocol::task::TaskStatusNotificationParams;
use tern_protocol::{RequestId, ServerNotification};

use tokio::sync::broadcast::error::RecvError;

use crate::call::CallContext;
use crate::registry::Change;
use crate::server::Server;

impl Server {
    /// The resource URIs of a listen: at most the configured number, none
    /// twice, each a resource this server has (or a URI one of its
    /// templates matches, or a file of its skills) when it offers resources
    /// at all. Refusals name
    /// the position, never echo the URI (attacker input).
    fn check_listen_uris(&self, asked: &SubscriptionFilter) -> Result<(), ErrorObject> {
        let Some(uris) = asked.resource_subscriptions.as_deref() else {
            return Ok(());
        };
        let max = self.inner.config.max_listen_uris;
        if uris.len() > max {
            return Err(ErrorObject::invalid_params(format!(
                "at most {max} resource URIs per subscription"
            )));
        }
        let registry = self.registry();
        let offered = !registry.resources.is_empty()
            || !registry.templates.is_empty()
            || registry.skills.is_some();
        let mut seen = std::collections::HashSet::with_capacity(uris.len());
        for (i, uri) in uris.iter().enumerate() {
            if !seen.insert(uri.as_str()) {
                return Err(ErrorObject::invalid_params(format!(
                    "resourceSubscriptions[{i}] repeats an earlier URI"
                )));
            }
            let known = registry.resources.contains_key(uri)
                || registry
                    .templates
                    .iter()
                    .any(|t| t.matcher.as_ref().is_some_and(|m| m.matches(uri).is_some()))
                || registry
                    .skills
                    .as_ref()
                    .is_some_and(|skills| skills.file(uri).is_some());
            if offered && !known {
                return Err(ErrorObject::invalid_params(format!(
                    "resourceSubscriptions[{i}] names no resource of this server"
                )));
            }
        }
        Ok(())
    }

    /// The subset of `asked` this server honours: what its capabilities
    /// cover. Task ids are set apart by [`Self::followed_tasks`].
    fn honoured(&self, asked: &SubscriptionFilter) -> SubscriptionFilter {
        let caps = self.capabilities();
        let yes =
            |asked: Option<bool>, offered: bool| (asked == Some(true) && offered).then_some(true);
        SubscriptionFilter {
            tools_list_changed: yes(asked.tools_list_changed, caps.tools.is_some()),
            prompts_list_changed: yes(asked.prompts_list_changed, caps.prompts.is_some()),
            resources_list_changed: yes(asked.resources_list_changed, caps.resources.is_some()),
            resource_subscriptions: asked
                .resource_subscriptions
                .clone()
                .filter(|uris| !uris.is_empty() && caps.resources.is_some()),
            task_ids: None,
        }
    }

    /// The task ids a listen stream follows (Tasks extension): asking for
    /// any without declaring the extension is `-32021`; unknown, expired
    /// and other principals' ids are silently left out of the ack.
    async fn followed_tasks(
        &self,
        params: &SubscriptionsListenRequestParams,
        principal: &crate::principal::Principal,
    ) -> Result<Option<Vec<String>>, ErrorObject> {
        let Some(asked) = params.notifications.task_ids.as_ref() else {
            return Ok(None);
        };
        if !crate::task::request_declared(&params.meta) {
            return Err(crate::task::missing_extension(
                "subscriptions/listen with taskIds",
            ));
        }
        let mut followed = Vec::new();
        for task_id in asked {
            if !followed.contains(task_id)
                && self
                    .inner
                    .engine
                    .tasks
                    .owned_view(task_id, principal)
                    .await
                    .is_some()
            {
                followed.push(task_id.clone());
            }
        }
        Ok(Some(followed).filter(|f| !f.is_empty()))
    }

    #[allow(
        clippy::too_many_lines,
        reason = "one loop over every kind of change a listen follows"
    )]
    pub(crate) async fn listen(
        &self,
        id: &RequestId,
        params: SubscriptionsListenRequestParams,
        call: CallContext,
    ) -> Result<crate::json::Json, ErrorObject> {
        let Some(notifier) = call.notifier else {
            return Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                "this transport cannot stream a subscription",
            ));
        };
        self.check_listen_uris(&params.notifications)?;
        // The transport's one configured hint, the same its own 503s give.
        let ms = u64::try_from(
            call.retry_after
                .unwrap_or(std::time::Duration::from_secs(1))
                .as_millis(),
        )
        .unwrap_or(u64::MAX);
        // The caller's share first, then the server-wide cap: one caller at
        // its share leaves the rest to others.
        let _share = match crate::share::caller_key(&call.principal, call.peer.as_deref()) {
            Some(key) => {
                let Some(slot) = self
                    .inner
                    .listen_shares
                    .take(&key, self.inner.config.max_listens_per_caller)
                else {
                    tracing::warn!(
                        "one caller's subscriptions/listen streams at its share: refused"
                    );
                    return Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "too many subscriptions open for this caller; retry later",
                    )
                    .with_data(serde_json::json!({ "retryAfterMs": ms })));
                };
                Some(slot)
            }
            None => None,
        };
        let Ok(_slot) = Arc::clone(&self.inner.listen_slots).try_acquire_owned() else {
            tracing::warn!("subscriptions/listen streams at the cap: refused");
            return Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                "too many subscriptions open; retry later",
            )
            .with_data(serde_json::json!({ "retryAfterMs": ms })));
        };
        let tasks = &self.inner.engine.tasks;
        // Subscribe before reading the tasks and acknowledging, so nothing
        // after the ack is missed.
        let mut task_changes = tasks.subscribe_changes();
        let mut filter = self.honoured(&params.notifications);
        filter.task_ids = self.followed_tasks(&params, &call.principal).await?;
        let meta = || Some(NotificationMeta::subscription(id.clone()));
        let mut changes = self.changes().subscribe();
        // Relayed resources and tasks are followed at the servers that own
        // them while this stream lives.
        let mut following = self.registry().relay.as_ref().map(|relay| {
            let uris = filter.resource_subscriptions.as_deref().unwrap_or_default();
            let tasks: Vec<String> = match &params.notifications.task_ids {
                Some(asked) if relay.relays_tasks() => asked
                    .iter()
                    .filter(|id| !filter.task_ids.as_ref().is_some_and(|f| f.contains(id)))
                    .cloned()
                    .collect(),
                _ => Vec::new(),
            };
            relay.follow(uris, &tasks, &call.principal, call.access_token.as_deref())
        });
        if let Some(relayed) = following.as_ref().filter(|f| !f.task_ids.is_empty()) {
            filter
                .task_ids
                .get_or_insert_with(Vec::new)
                .extend(relayed.task_ids.iter().cloned());
        }
        let mut relayed_tasks = following.as_mut().and_then(|f| f.task_status.take());
        notifier.send(ServerNotification::SubscriptionsAcknowledged(
            SubscriptionsAcknowledgedNotificationParams {
                notifications: filter.clone(),
                meta: meta(),
            },
        ));
        loop {
            let change = tokio::select! {
                () = call.cancel.cancelled() => break,
                () = self.inner.shutdown.cancelled() => break,
                change = changes.recv() => change,
                task = async { relayed_tasks.as_mut()?.recv().await }, if relayed_tasks.is_some() => {
                    match task {
                        Some(task) => {
                            notifier.send(ServerNotification::TaskStatus(Box::new(
                                TaskStatusNotificationParams { task, meta: meta() },
                            )));
                        }
                        None => relayed_tasks = None,
                    }
                    continue;
                }
                task = task_changes.recv(), if filter.task_ids.is_some() => {
                    let followed = filter.task_ids.as_deref().unwrap_or_default();
                    let ids: Vec<String> = match task {
                        Ok(task_id) if followed.contains(&task_id) => vec![task_id],
                        Ok(_) => continue,
                        // Missed changes: the current state of each.
                        Err(RecvError::Lagged(_)) => followed.to_vec(),
                        Err(RecvError::Closed) => break,
                    };
                    for task_id in ids {
                        if let Some(task) = tasks.owned_view(&task_id, &call.principal).await {
                            notifier.send(ServerNotification::TaskStatus(Box::new(
                                TaskStatusNotificationParams { task, meta: meta() },
                            )));
                        }
                    }
                    continue;
                }
            };
            let notification = match change {
                Ok(Change::Tools) if filter.tools_list_changed == Some(true) => {
                    ServerNotification::ToolListChanged(NotificationParams { meta: meta() })
                }
                Ok(Change::Prompts) if filter.prompts_list_changed == Some(true) => {
                    ServerNotification::PromptListChanged(NotificationParams { meta: meta() })
                }
                Ok(Change::Resources) if filter.resources_list_changed == Some(true) => {
                    ServerNotification::ResourceListChanged(NotificationParams { meta: meta() })
                }
                Ok(Change::ResourceUpdated(uri))
                    if filter
                        .resource_subscriptions
                        .as_ref()
                        .is_some_and(|uris| uris.contains(&uri)) =>
                {
                    ServerNotification::ResourceUpdated(ResourceUpdatedNotificationParams {
                        uri,
                        meta: meta(),
                    })
                }
                Ok(_) => continue,
                // Missed changes: say that every list this stream follows may
                // have changed, so the client refreshes.
                Err(RecvError::Lagged(_)) => {
                    for (on, n) in [
                        (
                            filter.tools_list_changed,
                            ServerNotification::ToolListChanged(NotificationParams {
                                meta: meta(),
                            }),
                        ),
                        (
                            filter.prompts_list_changed,
                            ServerNotification::PromptListChanged(NotificationParams {
                                meta: meta(),
                            }),
                        ),
                        (
                            filter.resources_list_changed,
                            ServerNotification::ResourceListChanged(NotificationParams {
                                meta: meta(),
                            }),
                        ),
                    ] {
                        if on == Some(true) {
                            notifier.send(n);
                        }
                    }
                    continue;
                }
                Err(RecvError::Closed) => break,
            };
            notifier.send(notification);
        }
        // Graceful close: the result names the subscription (spec:
        // Subscriptions › Cancellation › Graceful Closure).
        drop(task_changes);
        drop(following);
        let mut result = SubscriptionsListenResult::new(id.clone());
        result.meta.server_info = Some(self.info().clone());
        Ok(crate::json::to_json(&result))
    }
}
