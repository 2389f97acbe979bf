//! Notifications in both directions, keyed by `method`.

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::DecodeError;
use crate::jsonrpc;
use crate::logging::LoggingMessageNotificationParams;
use crate::meta::NotificationParams;
use crate::method;
use crate::progress::{CancelledNotificationParams, ProgressNotificationParams};
use crate::resource::ResourceUpdatedNotificationParams;
use crate::subscription::SubscriptionsAcknowledgedNotificationParams;
use crate::task::TaskStatusNotificationParams;

fn params<T: serde::de::DeserializeOwned>(
    method: &str,
    params: Option<&RawValue>,
) -> Result<T, DecodeError> {
    let raw = params.ok_or_else(|| DecodeError::params(method, "missing params"))?;
    serde_json::from_str(raw.get()).map_err(|e| DecodeError::params(method, e))
}

fn optional<T: serde::de::DeserializeOwned + Default>(
    method: &str,
    params: Option<&RawValue>,
) -> Result<T, DecodeError> {
    params.map_or_else(
        || Ok(T::default()),
        |raw| serde_json::from_str(raw.get()).map_err(|e| DecodeError::params(method, e)),
    )
}

/// A notification a server sends.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerNotification {
    /// `notifications/cancelled`: only to end a `subscriptions/listen` stream.
    Cancelled(CancelledNotificationParams),
    /// `notifications/progress`.
    Progress(ProgressNotificationParams),
    /// `notifications/message` (deprecated logging).
    LoggingMessage(LoggingMessageNotificationParams),
    /// `notifications/tools/list_changed`.
    ToolListChanged(NotificationParams),
    /// `notifications/prompts/list_changed`.
    PromptListChanged(NotificationParams),
    /// `notifications/resources/list_changed`.
    ResourceListChanged(NotificationParams),
    /// `notifications/resources/updated`.
    ResourceUpdated(ResourceUpdatedNotificationParams),
    /// `notifications/subscriptions/acknowledged`.
    SubscriptionsAcknowledged(SubscriptionsAcknowledgedNotificationParams),
    /// `notifications/tasks` (Tasks extension).
    TaskStatus(Box<TaskStatusNotificationParams>),
    /// Any other method, undecoded.
    Other {
        /// The method.
        method: String,
        /// The raw params.
        params: Option<Box<RawValue>>,
    },
}

impl ServerNotification {
    /// Decodes the params of a notification of `method`.
    pub fn decode(m: &str, raw: Option<&RawValue>) -> Result<Self, DecodeError> {
        Ok(match m {
            method::NOTIFICATION_CANCELLED => Self::Cancelled(params(m, raw)?),
            method::NOTIFICATION_PROGRESS => Self::Progress(params(m, raw)?),
            method::NOTIFICATION_MESSAGE => Self::LoggingMessage(params(m, raw)?),
            method::NOTIFICATION_TOOLS_LIST_CHANGED => Self::ToolListChanged(optional(m, raw)?),
            method::NOTIFICATION_PROMPTS_LIST_CHANGED => Self::PromptListChanged(optional(m, raw)?),
            method::NOTIFICATION_RESOURCES_LIST_CHANGED => {
                Self::ResourceListChanged(optional(m, raw)?)
            }
            method::NOTIFICATION_RESOURCES_UPDATED => Self::ResourceUpdated(params(m, raw)?),
            method::NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED => {
                Self::SubscriptionsAcknowledged(params(m, raw)?)
            }
            method::NOTIFICATION_TASKS => Self::TaskStatus(Box::new(params(m, raw)?)),
            _ => Self::Other {
                method: m.to_owned(),
                params: raw.map(ToOwned::to_owned),
            },
        })
    }

    /// Decodes a [`jsonrpc::Notification`].
    pub fn from_notification(n: &jsonrpc::Notification) -> Result<Self, DecodeError> {
        Self::decode(&n.method, n.params.as_deref())
    }

    /// The method.
    pub fn method(&self) -> &str {
        match self {
            Self::Cancelled(_) => method::NOTIFICATION_CANCELLED,
            Self::Progress(_) => method::NOTIFICATION_PROGRESS,
            Self::LoggingMessage(_) => method::NOTIFICATION_MESSAGE,
            Self::ToolListChanged(_) => method::NOTIFICATION_TOOLS_LIST_CHANGED,
            Self::PromptListChanged(_) => method::NOTIFICATION_PROMPTS_LIST_CHANGED,
            Self::ResourceListChanged(_) => method::NOTIFICATION_RESOURCES_LIST_CHANGED,
            Self::ResourceUpdated(_) => method::NOTIFICATION_RESOURCES_UPDATED,
            Self::SubscriptionsAcknowledged(_) => method::NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED,
            Self::TaskStatus(_) => method::NOTIFICATION_TASKS,
            Self::Other { method, .. } => method,
        }
    }
}

impl Serialize for ServerNotification {
    /// Writes the whole JSON-RPC notification.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.method();
        match self {
            Self::Cancelled(p) => jsonrpc::serialize_notification(m, Some(p), s),
            Self::Progress(p) => jsonrpc::serialize_notification(m, Some(p), s),
            Self::LoggingMessage(p) => jsonrpc::serialize_notification(m, Some(p), s),
            Self::ToolListChanged(p)
            | Self::PromptListChanged(p)
            | Self::ResourceListChanged(p) => {
                jsonrpc::serialize_notification(m, p.meta.as_ref().map(|_| p), s)
            }
            Self::ResourceUpdated(p) => jsonrpc::serialize_notification(m, Some(p), s),
            Self::SubscriptionsAcknowledged(p) => jsonrpc::serialize_notification(m, Some(p), s),
            Self::TaskStatus(p) => jsonrpc::serialize_notification(m, Some(p), s),
            Self::Other { params, .. } => jsonrpc::serialize_notification(m, params.as_deref(), s),
        }
    }
}

/// A notification a client sends.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClientNotification {
    /// `notifications/cancelled`: cancels an in-flight request (stdio).
    Cancelled(CancelledNotificationParams),
    /// `notifications/initialized` (2025-11-25).
    Initialized(NotificationParams),
    /// Any other method, undecoded.
    Other {
        /// The method.
        method: String,
        /// The raw params.
        params: Option<Box<RawValue>>,
    },
}

impl ClientNotification {
    /// Decodes the params of a notification of `method`.
    pub fn decode(m: &str, raw: Option<&RawValue>) -> Result<Self, DecodeError> {
        Ok(match m {
            method::NOTIFICATION_CANCELLED => Self::Cancelled(params(m, raw)?),
            method::NOTIFICATION_INITIALIZED => Self::Initialized(optional(m, raw)?),
            _ => Self::Other {
                method: m.to_owned(),
                params: raw.map(ToOwned::to_owned),
            },
        })
    }

    /// Decodes a [`jsonrpc::Notification`].
    pub fn from_notification(n: &jsonrpc::Notification) -> Result<Self, DecodeError> {
        Self::decode(&n.method, n.params.as_deref())
    }

    /// The method.
    pub fn method(&self) -> &str {
        match self {
            Self::Cancelled(_) => method::NOTIFICATION_CANCELLED,
            Self::Initialized(_) => method::NOTIFICATION_INITIALIZED,
            Self::Other { method, .. } => method,
        }
    }
}

impl Serialize for ClientNotification {
    /// Writes the whole JSON-RPC notification.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let m = self.method();
        match self {
            Self::Cancelled(p) => jsonrpc::serialize_notification(m, Some(p), s),
            Self::Initialized(p) => {
                jsonrpc::serialize_notification(m, p.meta.as_ref().map(|_| p), s)
            }
            Self::Other { params, .. } => jsonrpc::serialize_notification(m, params.as_deref(), s),
        }
    }
}
