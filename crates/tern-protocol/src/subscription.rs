//! `subscriptions/listen`: the long-lived stream of change notifications.

use serde::{Deserialize, Serialize};

use crate::capabilities::Implementation;
use crate::json::JsonObject;
use crate::jsonrpc::RequestId;
use crate::meta::{NotificationMeta, RequestMeta};
use crate::tag::CompleteTag;

/// Which notifications a listener opts in to (`SubscriptionFilter`). The
/// server sends nothing that was not asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
    /// `notifications/tasks` for these task ids (Tasks extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ids: Option<Vec<String>>,
}

/// Params of `subscriptions/listen`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionsListenRequestParams {
    /// What to listen to.
    pub notifications: SubscriptionFilter,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// Params of `notifications/subscriptions/acknowledged`, the first message of
/// every subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionsAcknowledgedNotificationParams {
    /// The subset of the filter the server honours.
    pub notifications: SubscriptionFilter,
    /// `_meta` with the subscription id.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
}

/// `_meta` of the graceful-close result of a subscription.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscriptionsListenResultMeta {
    /// The id of the `subscriptions/listen` request.
    #[serde(rename = "io.modelcontextprotocol/subscriptionId")]
    pub subscription_id: RequestId,
    /// The server's self-description.
    #[serde(
        rename = "io.modelcontextprotocol/serverInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub server_info: Option<Implementation>,
    /// Every other key.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The result that ends a subscription gracefully (`SubscriptionsListenResult`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionsListenResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// `_meta` with the subscription id.
    #[serde(rename = "_meta")]
    pub meta: SubscriptionsListenResultMeta,
}

impl SubscriptionsListenResult {
    /// The graceful close of subscription `subscription_id`.
    pub fn new(subscription_id: RequestId) -> Self {
        Self {
            result_type: CompleteTag,
            meta: SubscriptionsListenResultMeta {
                subscription_id,
                server_info: None,
                extra: JsonObject::new(),
            },
        }
    }
}
