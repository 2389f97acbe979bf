//! Logging (deprecated by SEP-2577, still supported): levels and
//! `notifications/message`. A server sends log messages only for a request
//! whose `_meta` set a level, and only on that request's response stream.

use serde::{Deserialize, Serialize};

use crate::meta::NotificationMeta;

pub use crate::level::LoggingLevel;

/// Params of `notifications/message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggingMessageNotificationParams {
    /// Severity.
    pub level: LoggingLevel,
    /// The logger's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// Any JSON.
    pub data: serde_json::Value,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
}
