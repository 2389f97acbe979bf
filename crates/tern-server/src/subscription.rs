//! `subscriptions/listen` (spec §4.3): the acknowledgement first, then the
//! change notifications the client opted in to, each tagged with the
//! subscription id, until the client goes away or the server closes the
//! subscription gracefully.

use tern_protocol::error::{ErrorObject, code};
use tern_protocol::meta::{NotificationMeta, NotificationParams};
use tern_protocol::resource::ResourceUpdatedNotificationParams;
use tern_protocol::subscription::{
    SubscriptionFilter, SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams, SubscriptionsListenResult,
};
use tern_protocol::{RequestId, ServerNotification};
use tokio::sync::broadcast::error::RecvError;

use crate::call::CallContext;
use crate::registry::Change;
use crate::server::Server;

impl Server {
    /// The subset of `asked` this server honours: what its capabilities
    /// cover. Task ids are not honoured (no Tasks extension).
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
        let filter = self.honoured(&params.notifications);
        let meta = || Some(NotificationMeta::subscription(id.clone()));
        // Subscribe before acknowledging, so nothing after the ack is missed.
        let mut changes = self.changes().subscribe();
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
        // Graceful close: the result names the subscription (spec §4.3).
        let mut result = SubscriptionsListenResult::new(id.clone());
        result.meta.server_info = Some(self.info().clone());
        Ok(crate::json::to_json(&result))
    }
}
