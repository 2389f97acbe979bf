//! What every result carries, apart from its payload: the `resultType` tags
//! ([`CompleteTag`] and friends, so that no serialisation path can forget
//! the member), [`ResultType`], and the caching scope. A leaf below every
//! result type; public through [`crate::result`].

use serde::{Deserialize, Serialize};

use crate::json::string_tag;

string_tag!(
    /// `resultType: "complete"`: a final result.
    CompleteTag = "complete"
);
string_tag!(
    /// `resultType: "input_required"`: the request needs input first.
    InputRequiredTag = "input_required"
);
string_tag!(
    /// `resultType: "task"`: a task was created (Tasks extension).
    TaskTag = "task"
);

/// The `resultType`s tern recognises (extensions may add more, rule
/// `result-type-extensions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResultType {
    /// `complete`.
    Complete,
    /// `input_required`.
    InputRequired,
    /// `task` (Tasks extension).
    Task,
}

/// Intended scope of a cached result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// No user-specific data: any cache may share it.
    Public,
    /// Reusable only within the same authorization context.
    Private,
}
