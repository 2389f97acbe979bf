//! JSON-RPC error codes, the error object, the typed `data` of MCP's own errors,
//! and [`DecodeError`], the one error this crate returns.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::capabilities::ClientCapabilities;

/// JSON-RPC and MCP error codes as named constants (spec: Base Protocol
/// overview › Error Codes).
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
        // The requested version is the sender's text: echoed cut short.
        let requested: String = requested.into();
        let data = UnsupportedVersionData {
            supported,
            requested: cut(&requested, QUOTED_MAX).into_owned(),
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

/// The longest quoted value [`tidy`] keeps, in characters.
const QUOTED_MAX: usize = 64;
/// The longest message [`tidy`] gives back, in characters.
const MESSAGE_MAX: usize = 512;

/// `text` cut to `max` characters, `…` marking the cut.
pub fn cut(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        None => std::borrow::Cow::Borrowed(text),
        Some((at, _)) => std::borrow::Cow::Owned(format!("{}…", &text[..at])),
    }
}

/// A decoder's message made fit to send to a peer (issue 15, hole 4):
/// `serde_json`'s ` at line N column M` removed (a position in the sender's
/// own text tells an attacker how far a probe got and nobody else
/// anything), a derived Rust type name (`struct CallToolRequestParams`,
/// `enum …`) replaced by what it means on the wire, every quoted value
/// (`"…"`, `` `…` ``, usually the sender's own input echoed back) cut to 64
/// characters, and the whole cut to 512.
pub fn tidy(text: &str) -> String {
    let text = strip_positions(text);
    let text = plain_type_names(&text);
    let mut out = String::with_capacity(text.len().min(MESSAGE_MAX + 8));
    let mut rest = text.as_str();
    while let Some(at) = rest.find(['"', '`']) {
        out.push_str(&rest[..at]);
        let quote = rest[at..].chars().next().unwrap_or('"');
        let inner = &rest[at + 1..];
        // The closing quote: the next one not escaped by a backslash.
        let mut end = None;
        let mut escaped = false;
        for (i, c) in inner.char_indices() {
            match c {
                '\\' if !escaped => escaped = true,
                c if c == quote && !escaped => {
                    end = Some(i);
                    break;
                }
                _ => escaped = false,
            }
        }
        let (value, after) = match end {
            Some(i) => (&inner[..i], &inner[i + 1..]),
            None => (inner, ""),
        };
        out.push(quote);
        out.push_str(&cut(value, QUOTED_MAX));
        out.push(quote);
        rest = after;
        if out.len() > 4 * MESSAGE_MAX {
            break;
        }
    }
    out.push_str(rest);
    cut(&out, MESSAGE_MAX).into_owned()
}

/// Every ` at line N column M` removed.
fn strip_positions(text: &str) -> String {
    const AT: &str = " at line ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(AT) {
        let after = &rest[at + AT.len()..];
        let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        let tail = &after[digits..];
        match tail.strip_prefix(" column ") {
            Some(col) if digits > 0 => {
                let n = col.len() - col.trim_start_matches(|c: char| c.is_ascii_digit()).len();
                out.push_str(&rest[..at]);
                rest = &col[n..];
            }
            _ => {
                out.push_str(&rest[..at + AT.len()]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// serde's names of derived types (`struct Foo`, `tuple struct Foo`,
/// `untagged enum Foo`, …) said as what they are on the wire.
fn plain_type_names(text: &str) -> String {
    const PHRASES: [(&str, &str); 8] = [
        ("variant of untagged enum ", "accepted form"),
        ("internally tagged enum ", "one of the accepted forms"),
        ("adjacently tagged enum ", "one of the accepted forms"),
        ("struct variant ", "an object"),
        ("tuple struct ", "an array"),
        ("unit struct ", "null"),
        ("struct ", "an object"),
        ("enum ", "one of the accepted values"),
    ];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'scan: while !rest.is_empty() {
        for (phrase, plain) in PHRASES {
            // A whole word only ("destruct x" is not a type name).
            let word_start = out
                .chars()
                .last()
                .is_none_or(|c| !c.is_alphanumeric() && c != '_');
            if word_start && let Some(after) = rest.strip_prefix(phrase) {
                let name_len = after.len()
                    - after
                        .trim_start_matches(|c: char| c.is_alphanumeric() || "_:<>".contains(c))
                        .len();
                if after.chars().next().is_some_and(char::is_uppercase) {
                    out.push_str(plain);
                    rest = &after[name_len..];
                    continue 'scan;
                }
            }
        }
        let c = rest.chars().next().unwrap_or_default();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
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
            message: tidy(&format!("invalid JSON: {err}")),
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
            message: tidy(&format!(
                "invalid params for {}: {err}",
                cut(method, QUOTED_MAX)
            )),
        }
    }

    pub(crate) fn result(method: &str, err: impl fmt::Display) -> Self {
        Self {
            kind: DecodeErrorKind::Result,
            message: tidy(&format!(
                "invalid result for {}: {err}",
                cut(method, QUOTED_MAX)
            )),
        }
    }

    pub(crate) fn value(type_name: &str, err: impl fmt::Display) -> Self {
        Self {
            kind: DecodeErrorKind::Value,
            message: tidy(&format!("invalid {type_name}: {err}")),
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
    /// not allowed there (rules `result-type-unknown`,
    /// `input-required-methods`).
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

#[cfg(test)]
mod tidy_tests {
    use super::tidy;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code, reason = "only decoded")]
    struct SomeParams {
        name: String,
    }

    #[derive(Debug, serde::Deserialize)]
    #[serde(untagged)]
    #[allow(dead_code, reason = "only decoded")]
    enum SomeKind {
        A(u8),
    }

    fn serde_says<T: serde::de::DeserializeOwned + std::fmt::Debug>(text: &str) -> String {
        serde_json::from_str::<T>(text).unwrap_err().to_string()
    }

    #[test]
    fn positions_and_type_names_are_removed() {
        let raw = serde_says::<SomeParams>(r#""just a string""#);
        assert!(
            raw.contains("struct SomeParams") && raw.contains("line 1"),
            "{raw}"
        );
        let clean = tidy(&raw);
        assert_eq!(
            clean,
            r#"invalid type: string "just a string", expected an object"#
        );
        let raw = serde_json::from_value::<SomeKind>(serde_json::json!(true))
            .unwrap_err()
            .to_string();
        assert!(raw.contains("enum SomeKind"), "{raw}");
        assert_eq!(tidy(&raw), "data did not match any accepted form");
        // Not a type name: a word that merely ends in "struct".
        assert_eq!(tidy("destruct Foo"), "destruct Foo");
        assert_eq!(tidy("at line 3 of the poem"), "at line 3 of the poem");
    }

    #[test]
    fn echoed_values_are_cut_and_the_whole_is_bounded() {
        let big = "x".repeat(3 << 20);
        let raw = serde_says::<SomeParams>(&format!(r#"{{"name": 1, "{big}": 2}}"#));
        let clean = tidy(&raw);
        assert!(clean.len() < 600, "{} bytes", clean.len());
        let raw = serde_says::<u8>(&format!("\"{big}\\\"{big}\""));
        let clean = tidy(&raw);
        assert!(clean.len() < 200, "{clean}");
        assert!(clean.starts_with("invalid type: string \"xxx"), "{clean}");
        assert!(clean.ends_with("…\", expected u8"), "{clean}");
        // Unquoted text is bounded too.
        assert!(tidy(&big).chars().count() <= 513);
    }
}
