//! JSON-RPC error codes, the error object, the typed `data` of MCP's own errors,
//! and [`DecodeError`], the one error this crate returns.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::capabilities::ClientCapabilities;

/// JSON-RPC and MCP error codes as named constants (spec §1.5).
///
/// `-32000…-32019` is legacy / implementation-defined and `-32020…-32099` is
/// reserved for the spec: tern emits no undefined code from that range.
pub mod code {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: i64 = -32700;
    /// The JSON sent is not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// The method does not exist, or sits behind a server capability that was
    /// not advertised. Over HTTP: status 404.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Invalid parameters: missing `_meta` fields (HTTP 400), unknown tool or
    /// prompt, bad arguments or cursor, resource not found, invalid or expired
    /// `requestState`, unknown task id.
    pub const INVALID_PARAMS: i64 = -32602;
    /// An internal error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// An HTTP header is missing, malformed, or does not match the body. HTTP 400.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// Processing needs a client capability the request did not declare;
    /// `data.requiredCapabilities` says which. HTTP 400.
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The requested protocol version is not served; `data` has `supported`
    /// and `requested`. HTTP 400.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// Retired (2025-11-25 "resource not found"): never emitted by 2026-07-28
    /// implementations, still accepted from old servers.
    pub const LEGACY_RESOURCE_NOT_FOUND: i64 = -32002;
    /// Retired (2025-11-25 "URL elicitation required"): never emitted.
    pub const LEGACY_URL_ELICITATION_REQUIRED: i64 = -32042;
}

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code; see [`code`].
    pub code: i64,
    /// A short, single-sentence description.
    pub message: String,
    /// Sender-defined detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<serde_json::Value>,
}

impl ErrorObject {
    /// An error with a code and a message and no data.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    /// Attaches `data`.
    #[must_use]
    pub fn with_data(mut self, data: serde_json::Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32602 Invalid params` with a message.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    /// `-32601 Method not found`, naming the method.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )
    }

    /// `-32021` with its typed data.
    pub fn missing_capability(message: impl Into<String>, required: ClientCapabilities) -> Self {
        Self::new(code::MISSING_REQUIRED_CLIENT_CAPABILITY, message).with_data(
            serde_json::to_value(MissingCapabilityData {
                required_capabilities: required,
            })
            .unwrap_or_default(),
        )
    }

    /// `-32022` with its typed data.
    pub fn unsupported_version(supported: Vec<String>, requested: impl Into<String>) -> Self {
        let data = UnsupportedVersionData {
            supported,
            requested: requested.into(),
        };
        Self::new(
            code::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(serde_json::to_value(data).unwrap_or_default())
    }

    /// `-32020` with a message saying which header is wrong.
    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(code::HEADER_MISMATCH, message)
    }

    /// The typed data of a `-32021`, when this is one and its data has the
    /// required shape.
    pub fn missing_capability_data(&self) -> Option<MissingCapabilityData> {
        self.typed_data(code::MISSING_REQUIRED_CLIENT_CAPABILITY)
    }

    /// The typed data of a `-32022`, when this is one and its data has the
    /// required shape.
    pub fn unsupported_version_data(&self) -> Option<UnsupportedVersionData> {
        self.typed_data(code::UNSUPPORTED_PROTOCOL_VERSION)
    }

    fn typed_data<T: serde::de::DeserializeOwned>(&self, want: i64) -> Option<T> {
        if self.code != want {
            return None;
        }
        T::deserialize(self.data.as_ref()?).ok()
    }
}

impl fmt::Display for ErrorObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

/// `data` of `-32021 MissingRequiredClientCapability`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MissingCapabilityData {
    /// The capabilities the server needs from the client for this request.
    pub required_capabilities: ClientCapabilities,
}

/// `data` of `-32022 UnsupportedProtocolVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsupportedVersionData {
    /// The versions the server supports; the client picks one and retries.
    pub supported: Vec<String>,
    /// The version the client asked for.
    pub requested: String,
}

/// Why a message or value could not be decoded.
///
/// One opaque type for the crate; ask it what went wrong with the `is_*`
/// methods, and [`DecodeError::to_error_object`] gives the JSON-RPC error a
/// peer should receive.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    kind: DecodeErrorKind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecodeErrorKind {
    /// Not JSON at all.
    Syntax,
    /// JSON, but not a JSON-RPC message of a valid shape.
    Envelope,
    /// A request or notification whose params do not fit its method.
    Params,
    /// A result that does not fit the method it answers.
    Result,
    /// A value that does not fit the type it was decoded as.
    Value,
}

impl DecodeError {
    pub(crate) fn syntax(err: &serde_json::Error) -> Self {
        Self {
            kind: DecodeErrorKind::Syntax,
            message: format!("invalid JSON: {err}"),
        }
    }

    pub(crate) fn envelope(message: impl Into<String>) -> Self {
        Self {
            kind: DecodeErrorKind::Envelope,
            message: message.into(),
        }
    }

    pub(crate) fn params(method: &str, err: impl fmt::Display) -> Self {
        Self {
            kind: DecodeErrorKind::Params,
            message: format!("invalid params for {method}: {err}"),
        }
    }

    pub(crate) fn result(method: &str, err: impl fmt::Display) -> Self {
        Self {
            kind: DecodeErrorKind::Result,
            message: format!("invalid result for {method}: {err}"),
        }
    }

    pub(crate) fn value(type_name: &str, err: impl fmt::Display) -> Self {
        Self {
            kind: DecodeErrorKind::Value,
            message: format!("invalid {type_name}: {err}"),
        }
    }

    /// The input was not JSON (answer `-32700`).
    pub fn is_syntax(&self) -> bool {
        self.kind == DecodeErrorKind::Syntax
    }

    /// The input was JSON but not a valid JSON-RPC message (answer `-32600`).
    pub fn is_envelope(&self) -> bool {
        self.kind == DecodeErrorKind::Envelope
    }

    /// A request's params did not fit its method (answer `-32602`).
    pub fn is_params(&self) -> bool {
        self.kind == DecodeErrorKind::Params
    }

    /// A result did not fit the method it answers, or carried a `resultType`
    /// not allowed there (R4, S2).
    pub fn is_result(&self) -> bool {
        self.kind == DecodeErrorKind::Result
    }

    /// A value did not fit the type it was decoded as (an input response for
    /// its question, say).
    pub fn is_value(&self) -> bool {
        self.kind == DecodeErrorKind::Value
    }

    /// The JSON-RPC error object to send back for this failure.
    pub fn to_error_object(&self) -> ErrorObject {
        let code = match self.kind {
            DecodeErrorKind::Syntax => code::PARSE_ERROR,
            DecodeErrorKind::Envelope => code::INVALID_REQUEST,
            DecodeErrorKind::Params | DecodeErrorKind::Value => code::INVALID_PARAMS,
            DecodeErrorKind::Result => code::INTERNAL_ERROR,
        };
        ErrorObject::new(code, self.message.clone())
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {}
