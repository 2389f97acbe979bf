//! The JSON-RPC 2.0 envelope.
//!
//! A message is classified by which of `id`, `method`, `result` and `error` it
//! carries (never by trying shapes in turn), and its `params` or `result` are
//! kept raw until someone asks for them by method:
//!
//! | has | is |
//! |---|---|
//! | `method` and `id` | [`Request`] |
//! | `method`, no `id` | [`Notification`] |
//! | `result` and `id`, no `method` | [`Response`] |
//! | `error`, no `method`, no `result` | [`ErrorResponse`] |
//!
//! Anything else is a [`DecodeError`] that says what is wrong.

use std::fmt;

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

use crate::error::{DecodeError, ErrorObject};
use crate::json::string_tag;

string_tag!(
    /// The `jsonrpc` member, which must be exactly `"2.0"`.
    JsonRpcVersion = "2.0"
);

/// A request id: a string or an integer, never `null` (spec: Base Protocol
/// overview › Messages › Requests).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RequestId {
    /// A string id.
    String(String),
    /// An integer id.
    Number(i64),
}

impl RequestId {
    fn from_value(value: &serde_json::Value) -> Result<Self, String> {
        match value {
            serde_json::Value::String(s) => Ok(Self::String(s.clone())),
            serde_json::Value::Number(n) => n
                .as_i64()
                .map(Self::Number)
                .ok_or_else(|| format!("id must be a string or an integer, found {n}")),
            serde_json::Value::Null => Err("id must be a string or an integer, found null".into()),
            other => Err(format!(
                "id must be a string or an integer, found {}",
                kind_of(other)
            )),
        }
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::String(s) => f.write_str(s),
            Self::Number(n) => write!(f, "{n}"),
        }
    }
}

impl From<i64> for RequestId {
    fn from(n: i64) -> Self {
        Self::Number(n)
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> Self {
        Self::String(s)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> Self {
        Self::String(s.to_owned())
    }
}

impl Serialize for RequestId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::String(v) => s.serialize_str(v),
            Self::Number(v) => s.serialize_i64(*v),
        }
    }
}

impl<'de> Deserialize<'de> for RequestId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Self::from_value(&value).map_err(D::Error::custom)
    }
}

/// Names the JSON kind of a value, for error messages.
pub(crate) fn kind_of(value: &serde_json::Value) -> &'static str {
    match value {
        serde_json::Value::Null => "null",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "an array",
        serde_json::Value::Object(_) => "an object",
    }
}

/// A request: it has an `id` and expects a response.
#[derive(Debug, Clone)]
pub struct Request {
    /// The request id.
    pub id: RequestId,
    /// The method.
    pub method: String,
    /// The params, undecoded; see [`crate::ClientRequest::decode`].
    pub params: Option<Box<RawValue>>,
}

/// A notification: it has a `method` and no `id`.
#[derive(Debug, Clone)]
pub struct Notification {
    /// The method.
    pub method: String,
    /// The params, undecoded.
    pub params: Option<Box<RawValue>>,
}

/// A successful response.
#[derive(Debug, Clone)]
pub struct Response {
    /// The id of the request it answers.
    pub id: RequestId,
    /// The result, undecoded; decode it with the method of the request it
    /// answers ([`crate::ServerResult::decode`]).
    pub result: Box<RawValue>,
}

/// An error response.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorResponse {
    /// The id of the request it answers; absent when the request could not be
    /// read (a parse error). A `null` id from a peer reads as `None`.
    pub id: Option<RequestId>,
    /// The error.
    pub error: ErrorObject,
}

/// Any JSON-RPC 2.0 message.
#[derive(Debug, Clone)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A successful response.
    Response(Response),
    /// An error response.
    Error(ErrorResponse),
}

/// Every member a message may carry, before classification. `id` keeps an
/// explicit `null` apart from a missing key.
#[derive(Deserialize)]
struct Envelope {
    #[serde(default, deserialize_with = "crate::json::present")]
    jsonrpc: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "crate::json::present")]
    id: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "crate::json::present")]
    method: Option<serde_json::Value>,
    #[serde(default, deserialize_with = "raw_present")]
    params: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "raw_present")]
    result: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "crate::json::present")]
    error: Option<serde_json::Value>,
}

/// A raw member that counts as present even when it is `null` (the default
/// `Option` handling would read `null` as absent).
fn raw_present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

impl Message {
    /// Decodes one message from JSON bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, DecodeError> {
        match std::str::from_utf8(bytes) {
            Ok(text) => text.parse(),
            // JSON text is UTF-8 (RFC 8259 §8.1): the raw read names where
            // it is not.
            Err(_) => Self::slowly(|| serde_json::from_slice(bytes)),
        }
    }

    /// One pass on the common path: the envelope straight from the text.
    /// Only when that fails is the text read again, the old two-step way, so
    /// broken JSON (`-32700`) and a JSON value that is no message (`-32600`)
    /// keep their exact errors.
    fn from_text(text: &str) -> Result<Self, DecodeError> {
        let first = text
            .bytes()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'));
        if first == Some(b'{') {
            // Any failure is read again the slow way: a data error (a
            // repeated member) may come before a syntax error further on,
            // and serde_json files limits the first read never checks (a
            // number out of range, a lone surrogate, nesting depth) as
            // syntax, though the text is JSON (-32600, not -32700).
            if let Ok(env) = serde_json::from_str::<Envelope>(text) {
                return Self::classify(env);
            }
        }
        Self::slowly(|| serde_json::from_str(text))
    }

    /// Reads the text whole as JSON first, then as a message.
    fn slowly<'a>(
        read: impl FnOnce() -> serde_json::Result<&'a RawValue>,
    ) -> Result<Self, DecodeError> {
        let raw = read().map_err(|e| DecodeError::syntax(&e))?;
        Self::from_raw(raw)
    }

    fn from_raw(raw: &RawValue) -> Result<Self, DecodeError> {
        let text = raw.get();
        if !text.starts_with('{') {
            return Err(DecodeError::envelope(
                "a JSON-RPC message must be a JSON object",
            ));
        }
        let env: Envelope = serde_json::from_str(text)
            .map_err(|e| DecodeError::envelope(format!("malformed JSON-RPC message: {e}")))?;
        Self::classify(env)
    }

    fn classify(env: Envelope) -> Result<Self, DecodeError> {
        match &env.jsonrpc {
            Some(serde_json::Value::String(v)) if v == JsonRpcVersion::VALUE => {}
            Some(other) => {
                return Err(DecodeError::envelope(format!(
                    "jsonrpc must be \"2.0\", found {other}"
                )));
            }
            None => {
                return Err(DecodeError::envelope(
                    "missing jsonrpc member (must be \"2.0\")",
                ));
            }
        }
        let id = env.id.as_ref().map(RequestId::from_value);
        if let Some(method) = env.method {
            let serde_json::Value::String(method) = method else {
                return Err(DecodeError::envelope(format!(
                    "method must be a string, found {}",
                    kind_of(&method)
                )));
            };
            if env.result.is_some() || env.error.is_some() {
                return Err(DecodeError::envelope(
                    "a message with a method cannot also carry result or error",
                ));
            }
            // MCP params are always an object (the schema's `params`), never
            // JSON-RPC's positional array, never null.
            if let Some(params) = &env.params
                && !params.get().starts_with('{')
            {
                return Err(DecodeError::envelope("params must be an object"));
            }
            return Ok(match id {
                Some(id) => Self::Request(Request {
                    id: id.map_err(DecodeError::envelope)?,
                    method,
                    params: env.params,
                }),
                None => Self::Notification(Notification {
                    method,
                    params: env.params,
                }),
            });
        }
        if env.params.is_some() {
            return Err(DecodeError::envelope("params without a method"));
        }
        match (env.result, env.error) {
            (Some(_), Some(_)) => Err(DecodeError::envelope(
                "a response cannot carry both result and error",
            )),
            (Some(result), None) if result.get() == "null" => {
                Err(DecodeError::envelope("result must not be null"))
            }
            (Some(result), None) => match id {
                Some(id) => Ok(Self::Response(Response {
                    id: id.map_err(DecodeError::envelope)?,
                    result,
                })),
                None => Err(DecodeError::envelope("a result response needs an id")),
            },
            (None, Some(error)) => {
                let error = ErrorObject::deserialize(&error)
                    .map_err(|e| DecodeError::envelope(format!("malformed error object: {e}")))?;
                // JSON-RPC 2.0 peers answer unreadable requests with `"id": null`;
                // it reads as "no id" (the MCP schema has no null ids to keep).
                let id = match env.id {
                    None | Some(serde_json::Value::Null) => None,
                    Some(v) => Some(RequestId::from_value(&v).map_err(DecodeError::envelope)?),
                };
                Ok(Self::Error(ErrorResponse { id, error }))
            }
            (None, None) => Err(DecodeError::envelope(
                "not a JSON-RPC message: it has no method, result or error",
            )),
        }
    }

    /// The message's id, if it is a request or a response with one.
    pub fn id(&self) -> Option<&RequestId> {
        match self {
            Self::Request(r) => Some(&r.id),
            Self::Response(r) => Some(&r.id),
            Self::Error(e) => e.id.as_ref(),
            Self::Notification(_) => None,
        }
    }
}

impl std::str::FromStr for Message {
    type Err = DecodeError;

    /// Decodes one message from JSON text.
    fn from_str(text: &str) -> Result<Self, DecodeError> {
        Self::from_text(text)
    }
}

impl<'de> Deserialize<'de> for Message {
    /// Decoding through serde needs a self-describing text source
    /// (`serde_json::from_str` / `from_slice`): params and results stay raw.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let env = Envelope::deserialize(d)?;
        Self::classify(env).map_err(D::Error::custom)
    }
}

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Request(r) => r.serialize(s),
            Self::Notification(n) => n.serialize(s),
            Self::Response(r) => r.serialize(s),
            Self::Error(e) => e.serialize(s),
        }
    }
}

#[derive(Serialize)]
struct Out<'a, P: Serialize + ?Sized, R: Serialize + ?Sized> {
    jsonrpc: JsonRpcVersion,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    method: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a P>,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<&'a R>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorObject>,
}

/// Writes `{"jsonrpc":"2.0","id":…,"method":…,"params":…}` for any params.
pub fn serialize_request<P: Serialize + ?Sized, S: Serializer>(
    id: &RequestId,
    method: &str,
    params: Option<&P>,
    s: S,
) -> Result<S::Ok, S::Error> {
    Out::<P, ()> {
        jsonrpc: JsonRpcVersion,
        id: Some(id),
        method: Some(method),
        params,
        result: None,
        error: None,
    }
    .serialize(s)
}

/// Writes `{"jsonrpc":"2.0","method":…,"params":…}` for any params.
pub fn serialize_notification<P: Serialize + ?Sized, S: Serializer>(
    method: &str,
    params: Option<&P>,
    s: S,
) -> Result<S::Ok, S::Error> {
    Out::<P, ()> {
        jsonrpc: JsonRpcVersion,
        id: None,
        method: Some(method),
        params,
        result: None,
        error: None,
    }
    .serialize(s)
}

/// Writes `{"jsonrpc":"2.0","id":…,"result":…}` for any result.
pub fn serialize_response<R: Serialize + ?Sized, S: Serializer>(
    id: &RequestId,
    result: &R,
    s: S,
) -> Result<S::Ok, S::Error> {
    Out::<(), R> {
        jsonrpc: JsonRpcVersion,
        id: Some(id),
        method: None,
        params: None,
        result: Some(result),
        error: None,
    }
    .serialize(s)
}

impl Serialize for Request {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_request(&self.id, &self.method, self.params.as_deref(), s)
    }
}

impl Serialize for Notification {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_notification(&self.method, self.params.as_deref(), s)
    }
}

impl Serialize for Response {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_response(&self.id, &*self.result, s)
    }
}

impl Serialize for ErrorResponse {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        Out::<(), ()> {
            jsonrpc: JsonRpcVersion,
            id: self.id.as_ref(),
            method: None,
            params: None,
            result: None,
            error: Some(&self.error),
        }
        .serialize(s)
    }
}

impl ErrorResponse {
    /// An error response to a request.
    pub fn new(id: Option<RequestId>, error: ErrorObject) -> Self {
        Self { id, error }
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use super::*;

    fn err(text: &str) -> String {
        Message::from_str(text).unwrap_err().to_string()
    }

    #[test]
    fn classifies_by_members() {
        assert!(matches!(
            Message::from_str(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}"#),
            Ok(Message::Request(Request {
                id: RequestId::Number(1),
                ..
            }))
        ));
        assert!(matches!(
            Message::from_str(r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#),
            Ok(Message::Notification(_))
        ));
        assert!(matches!(
            Message::from_str(r#"{"jsonrpc":"2.0","id":"a","result":{}}"#),
            Ok(Message::Response(Response {
                id: RequestId::String(_),
                ..
            }))
        ));
        assert!(matches!(
            Message::from_str(
                r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#
            ),
            Ok(Message::Error(ErrorResponse { id: None, .. }))
        ));
    }

    #[test]
    fn rejects_with_a_precise_reason() {
        assert!(
            err(r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#).contains("jsonrpc must be \"2.0\"")
        );
        assert!(err(r#"{"id":1,"method":"x"}"#).contains("missing jsonrpc"));
        assert!(err(r#"{"jsonrpc":"2.0","id":null,"method":"x"}"#).contains("found null"));
        assert!(err(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#).contains("found 1.5"));
        assert!(err(r#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).contains("found an object"));
        assert!(err(r#"{"jsonrpc":"2.0","id":1}"#).contains("no method, result or error"));
        assert!(err(r#"{"jsonrpc":"2.0","result":{}}"#).contains("needs an id"));
        assert!(
            err(r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"m"}}"#)
                .contains("both result and error")
        );
        assert!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#)
                .contains("cannot also carry")
        );
        assert!(err(r#"{"jsonrpc":"2.0","id":1,"method":7}"#).contains("method must be a string"));
        assert!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":3}"#)
                .contains("params must be an object")
        );
        assert!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#)
                .contains("params must be an object")
        );
        assert!(
            err(r#"{"jsonrpc":"2.0","id":1,"method":"x","params":null}"#)
                .contains("params must be an object")
        );
        assert!(
            err(r#"{"jsonrpc":"2.0","id":1,"result":null}"#).contains("result must not be null")
        );
        assert!(
            err(r#"{"jsonrpc":"2.0","id":1,"result":null,"error":{"code":1,"message":"m"}}"#)
                .contains("both result and error")
        );
        assert!(err("[1]").contains("must be a JSON object"));
        assert!(
            err(r#"{"jsonrpc":"2.0","error":{"code":"x"}}"#).contains("malformed error object")
        );
        assert!(Message::from_str("{").unwrap_err().is_syntax());
        assert!(
            Message::from_str(r#"{"jsonrpc":"2.0","id":1}"#)
                .unwrap_err()
                .is_envelope()
        );
    }

    /// The one-pass read answers what the two-step read answered: broken
    /// JSON is a syntax error even where a data error comes first, a JSON
    /// value that is no message an envelope error.
    #[test]
    fn one_pass_keeps_syntax_and_envelope_apart() {
        let syntax: [&[u8]; 7] = [
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"} tail"#,
            br#"{"jsonrpc":"2.0","method":"m"} x"#,
            br#"{"jsonrpc":"2.0","method":"m""#,
            b"[1,2",
            b"\x0c{}",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"m\",\"junk\":\"\xff\"}",
            b"{\"jsonrpc\":\"2.0\",\"method\":\"\xc3\"}",
        ];
        for bytes in syntax {
            let e = Message::from_slice(bytes).unwrap_err();
            assert!(e.is_syntax(), "{}: {e}", String::from_utf8_lossy(bytes));
        }
        let deep = format!(
            r#"{{"jsonrpc":"2.0","method":"m","id":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let envelope: [&[u8]; 8] = [
            br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
            br#"{"jsonrpc":"2.0","method":"x","method":"y"}"#,
            b" [1,2] ",
            br#""text""#,
            // JSON all, beyond what the envelope's reader takes.
            br#"{"jsonrpc":"2.0","id":1e400,"method":"ping"}"#,
            br#"{"jsonrpc":"2.0","method":"\ud800"}"#,
            br#"{"jsonrpc":"2.0","method":"m","\udc00":1}"#,
            deep.as_bytes(),
        ];
        for bytes in envelope {
            let e = Message::from_slice(bytes).unwrap_err();
            assert!(e.is_envelope(), "{}: {e}", String::from_utf8_lossy(bytes));
        }
        assert!(
            Message::from_slice(br#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#)
                .unwrap_err()
                .to_string()
                .contains("duplicate field `id`")
        );
        assert!(matches!(
            Message::from_slice(b" \r\n\t{\"jsonrpc\":\"2.0\",\"method\":\"m\"}\n"),
            Ok(Message::Notification(_))
        ));
    }

    #[test]
    fn round_trips_raw_params_byte_for_byte() {
        let text = r#"{"jsonrpc":"2.0","id":"x","method":"m","params":{"b":1,"a":[1,2]}}"#;
        let msg = Message::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&msg).unwrap(), text);
    }
}
