//! [`Annotations`] and [`Role`]: hints on content blocks and resources
//! alike, a leaf below both; public through [`crate::content`].

use serde::{Deserialize, Serialize};

/// The sender or recipient of messages and data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The user.
    User,
    /// The assistant (model).
    Assistant,
}

/// Hints for the client about how to use or show an object.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Who the object is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<Role>>,
    /// Importance from 0 (optional) to 1 (effectively required).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::json::compact_opt_f64"
    )]
    pub priority: Option<f64>,
    /// When the object last changed, ISO 8601.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
}
