//! Pagination: opaque cursors on the list methods.

use serde::{Deserialize, Serialize};

use crate::meta::RequestMeta;

/// Params of a list request (`PaginatedRequestParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PaginatedRequestParams {
    /// The opaque cursor of the page wanted; absent for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

impl PaginatedRequestParams {
    /// The first page.
    pub fn first(meta: RequestMeta) -> Self {
        Self { cursor: None, meta }
    }
}
