//! Progress (`notifications/progress`) and cancellation
//! (`notifications/cancelled`).

use serde::{Deserialize, Serialize};

use crate::jsonrpc::RequestId;
use crate::meta::{NotificationMeta, ProgressToken};

/// Params of `notifications/progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressNotificationParams {
    /// The token of the request this progress belongs to.
    pub progress_token: ProgressToken,
    /// Progress so far; increases with every notification.
    #[serde(serialize_with = "crate::json::compact_f64")]
    pub progress: f64,
    /// The total, when known.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::json::compact_opt_f64"
    )]
    pub total: Option<f64>,
    /// A human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
}

/// Params of `notifications/cancelled`.
///
/// Client to server it cancels an in-flight request (stdio); server to client
/// it may only end a `subscriptions/listen` stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledNotificationParams {
    /// The request being cancelled.
    pub request_id: RequestId,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
}

impl ProgressNotificationParams {
    /// Progress `progress` of the request with `progress_token`.
    pub fn new(progress_token: ProgressToken, progress: f64) -> Self {
        Self {
            progress_token,
            progress,
            total: None,
            message: None,
            meta: None,
        }
    }
}
