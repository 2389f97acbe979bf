//! Tools: `tools/list` and `tools/call`.

use serde::{Deserialize, Serialize};

pub(crate) mod def;

pub use def::{Tool, ToolAnnotations};

use crate::content::ContentBlock;
use crate::json::JsonObject;
use crate::meta::{RequestMeta, ResultMeta};
use crate::mrtr::InputResponses;
use crate::tag::{CacheScope, CompleteTag};

/// Params of `tools/call` (`CallToolRequestParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolRequestParams {
    /// The tool.
    pub name: String,
    /// The arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// Answers to the previous round's `inputRequests` (MRTR retry).
    #[serde(
        default,
        deserialize_with = "crate::mrtr::present_responses",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_responses: Option<InputResponses>,
    /// The previous round's `requestState`, echoed byte for byte (rule
    /// `echo-state-exactly`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

impl CallToolRequestParams {
    /// A call of `name` with `arguments`.
    pub fn new(name: impl Into<String>, arguments: Option<JsonObject>, meta: RequestMeta) -> Self {
        Self {
            name: name.into(),
            arguments,
            input_responses: None,
            request_state: None,
            meta,
        }
    }
}

/// The final result of `tools/call` (`CallToolResult`).
///
/// Tool failures (bad input, a failing API, a business error) are results with
/// `is_error: Some(true)`; unknown tools and malformed requests are JSON-RPC
/// errors instead.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// Unstructured content; may be empty.
    pub content: Vec<ContentBlock>,
    /// Any JSON value (an explicit `null` is kept); conforms to the tool's
    /// `outputSchema` when it has one.
    #[serde(
        default,
        deserialize_with = "crate::json::present",
        skip_serializing_if = "Option::is_none"
    )]
    pub structured_content: Option<serde_json::Value>,
    /// The tool failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

impl CallToolResult {
    /// A successful result with one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            ..Self::default()
        }
    }

    /// A tool error (`isError: true`) with one text block saying what failed.
    pub fn error(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            is_error: Some(true),
            ..Self::default()
        }
    }

    /// The result is a tool error.
    pub fn is_error(&self) -> bool {
        self.is_error == Some(true)
    }
}

/// The result of `tools/list` (`ListToolsResult`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// This page of tools.
    pub tools: Vec<Tool>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Cache lifetime; see [`crate::result`] on why it is optional here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

impl ListToolsResult {
    /// A page of tools with its caching hints (required on the wire).
    pub fn new(tools: Vec<Tool>, ttl_ms: u64, cache_scope: CacheScope) -> Self {
        Self {
            tools,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            ..Self::default()
        }
    }
}
