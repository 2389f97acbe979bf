//! `_meta`: the keys the spec fixes, typed; every other key kept as it came.
//!
//! Key syntax (spec: Base Protocol overview › General fields › `_meta`): an
//! optional prefix of dot-separated labels, `/`, then
//! a name. Prefixes whose second label is `modelcontextprotocol` or `mcp` are
//! reserved for MCP.

use serde::{Deserialize, Serialize};

use crate::capabilities::{ClientCapabilities, Implementation};
use crate::json::JsonObject;
use crate::jsonrpc::RequestId;
use crate::level::LoggingLevel;

/// `_meta` key of the request's protocol version.
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the request's client capabilities.
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the client's self-description.
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key of the request's log level (deprecated logging).
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key of the server's self-description in results.
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key naming the subscription a notification was delivered on.
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// A progress token: a string or an integer, unique among the sender's active
/// requests.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProgressToken {
    /// A string token.
    String(String),
    /// An integer token.
    Number(i64),
}

impl From<&str> for ProgressToken {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl From<i64> for ProgressToken {
    fn from(n: i64) -> Self {
        Self::Number(n)
    }
}

/// The `_meta` every 2026-07-28 request carries (`RequestMetaObject`).
///
/// Version and capabilities are required: a request without them is malformed
/// and answered with `-32602` (HTTP 400). Capabilities apply to this request
/// only; a server never infers them from earlier requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestMeta {
    /// The protocol version of this request, e.g. `"2026-07-28"`. Over HTTP it
    /// must equal the `MCP-Protocol-Version` header.
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    pub protocol_version: String,
    /// What the client can do for this request. `{}` means no optional
    /// capabilities. (Boxed, with `client_info`: every request carries its
    /// `_meta` through every layer of a server, and the two are most of its
    /// size.)
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    pub client_capabilities: Box<ClientCapabilities>,
    /// The client's self-description (self-reported: display and logs only).
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub client_info: Option<Box<Implementation>>,
    /// The log level for this request; without it the server sends no
    /// `notifications/message` (deprecated logging).
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub log_level: Option<LoggingLevel>,
    /// Opts the request in to `notifications/progress`.
    #[serde(
        rename = "progressToken",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub progress_token: Option<ProgressToken>,
    /// W3C trace context `traceparent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<String>,
    /// W3C trace context `tracestate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracestate: Option<String>,
    /// W3C `baggage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baggage: Option<String>,
    /// Every other key, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl RequestMeta {
    /// The `_meta` of a request at `protocol_version` with these capabilities.
    pub fn new(
        protocol_version: impl Into<String>,
        client_capabilities: ClientCapabilities,
    ) -> Self {
        Self {
            protocol_version: protocol_version.into(),
            client_capabilities: Box::new(client_capabilities),
            client_info: None,
            log_level: None,
            progress_token: None,
            traceparent: None,
            tracestate: None,
            baggage: None,
            extra: JsonObject::new(),
        }
    }

    /// Sets `clientInfo`.
    #[must_use]
    pub fn with_client_info(mut self, info: Implementation) -> Self {
        self.client_info = Some(Box::new(info));
        self
    }

    /// Sets `progressToken`.
    #[must_use]
    pub fn with_progress_token(mut self, token: impl Into<ProgressToken>) -> Self {
        self.progress_token = Some(token.into());
        self
    }

    /// Sets the log level.
    #[must_use]
    pub fn with_log_level(mut self, level: LoggingLevel) -> Self {
        self.log_level = Some(level);
        self
    }
}

/// The `_meta` of a result (`ResultMetaObject`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultMeta {
    /// The server's self-description; servers should put it in every result.
    #[serde(
        rename = "io.modelcontextprotocol/serverInfo",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    /// Shared: a server stamps the one description on every result.
    pub server_info: Option<std::sync::Arc<Implementation>>,
    /// Every other key, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ResultMeta {
    /// `_meta` carrying `serverInfo`.
    pub fn with_server_info(info: impl Into<std::sync::Arc<Implementation>>) -> Self {
        Self {
            server_info: Some(info.into()),
            extra: JsonObject::new(),
        }
    }
}

/// The `_meta` of a notification (`NotificationMetaObject`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NotificationMeta {
    /// The id of the `subscriptions/listen` request whose stream carried this
    /// notification; present on every subscription notification, absent
    /// elsewhere.
    #[serde(
        rename = "io.modelcontextprotocol/subscriptionId",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub subscription_id: Option<RequestId>,
    /// Every other key, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl NotificationMeta {
    /// `_meta` of a notification delivered on subscription `id`.
    pub fn subscription(id: RequestId) -> Self {
        Self {
            subscription_id: Some(id),
            extra: JsonObject::new(),
        }
    }
}

/// Params that carry only the required `_meta` (`RequestParams`), such as
/// those of `server/discover`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestParams {
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// Params of a notification that carries nothing but an optional `_meta`
/// (`NotificationParams`), such as the list-changed notifications.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NotificationParams {
    /// The notification's `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
}
