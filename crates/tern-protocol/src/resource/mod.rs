//! Resources: `resources/list`, `resources/templates/list`, `resources/read`,
//! and `notifications/resources/updated`.

use serde::{Deserialize, Serialize};

pub(crate) mod def;

pub use def::Resource;

use crate::capabilities::Icon;
use crate::content::{Annotations, ResourceContents};
use crate::json::JsonObject;
use crate::meta::{NotificationMeta, RequestMeta, ResultMeta};
use crate::mrtr::InputResponses;
use crate::tag::{CacheScope, CompleteTag};

/// A family of resources addressed by an RFC 6570 URI template
/// (`ResourceTemplate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// The URI template.
    pub uri_template: String,
    /// Programmatic name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type of every matching resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Params of `resources/read` (`ReadResourceRequestParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResourceRequestParams {
    /// The resource.
    pub uri: String,
    /// Answers to the previous round's `inputRequests` (MRTR retry).
    #[serde(
        default,
        deserialize_with = "crate::mrtr::present_responses",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_responses: Option<InputResponses>,
    /// The previous round's `requestState`, echoed byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// Params naming one resource (`ResourceRequestParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceRequestParams {
    /// The resource.
    pub uri: String,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// The final result of `resources/read` (`ReadResourceResult`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResourceResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// The contents (never empty for a resource that exists).
    pub contents: Vec<ResourceContents>,
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

/// The result of `resources/list` (`ListResourcesResult`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourcesResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// This page of resources.
    pub resources: Vec<Resource>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Cache lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// The result of `resources/templates/list` (`ListResourceTemplatesResult`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourceTemplatesResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// This page of templates.
    pub resource_templates: Vec<ResourceTemplate>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Cache lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// Params of `notifications/resources/updated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceUpdatedNotificationParams {
    /// The resource that changed.
    pub uri: String,
    /// `_meta` (carries the subscription id).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
}

impl ReadResourceResult {
    /// Contents with their caching hints (required on the wire).
    pub fn new(contents: Vec<ResourceContents>, ttl_ms: u64, cache_scope: CacheScope) -> Self {
        Self {
            contents,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            ..Self::default()
        }
    }
}

impl ListResourcesResult {
    /// A page of resources with its caching hints (required on the wire).
    pub fn new(resources: Vec<Resource>, ttl_ms: u64, cache_scope: CacheScope) -> Self {
        Self {
            resources,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            ..Self::default()
        }
    }
}

impl ListResourceTemplatesResult {
    /// A page of templates with its caching hints (required on the wire).
    pub fn new(
        resource_templates: Vec<ResourceTemplate>,
        ttl_ms: u64,
        cache_scope: CacheScope,
    ) -> Self {
        Self {
            resource_templates,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            ..Self::default()
        }
    }
}
