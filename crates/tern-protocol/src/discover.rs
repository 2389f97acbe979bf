//! `server/discover`: what a server supports, without a handshake.

use serde::{Deserialize, Serialize};

use crate::capabilities::ServerCapabilities;
use crate::meta::ResultMeta;
use crate::tag::{CacheScope, CompleteTag};

/// The result of `server/discover` (`DiscoverResult`). The server's identity
/// travels in `_meta` (`io.modelcontextprotocol/serverInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// Protocol versions served.
    pub supported_versions: Vec<String>,
    /// Capabilities.
    pub capabilities: ServerCapabilities,
    /// How to use this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Cache lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta` with `serverInfo`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

impl DiscoverResult {
    /// What a server supports, with its caching hints (required on the wire).
    pub fn new(
        supported_versions: Vec<String>,
        capabilities: ServerCapabilities,
        ttl_ms: u64,
        cache_scope: CacheScope,
    ) -> Self {
        Self {
            result_type: CompleteTag,
            supported_versions,
            capabilities,
            instructions: None,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            meta: None,
        }
    }
}
