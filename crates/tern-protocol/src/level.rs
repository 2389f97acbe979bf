//! The severity of a log message, a leaf below both `_meta` (a request's
//! log level) and the logging notification; public as
//! [`crate::logging::LoggingLevel`].

use serde::{Deserialize, Serialize};

/// Severity of a log message (RFC 5424), least to most severe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggingLevel {
    /// `debug`.
    Debug,
    /// `info`.
    Info,
    /// `notice`.
    Notice,
    /// `warning`.
    Warning,
    /// `error`.
    Error,
    /// `critical`.
    Critical,
    /// `alert`.
    Alert,
    /// `emergency`.
    Emergency,
}
