//! Multi Round-Trip Requests (the spec page of that name,
//! <https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr>):
//! a server answers `tools/call`, `prompts/get` or `resources/read` with a
//! question ([`InputRequiredResult`]), and the client retries the same request
//! with [`InputResponses`] and the `requestState` echoed byte for byte.
//!
//! Input requests are `{method, params}` only (not JSON-RPC messages), of
//! exactly three kinds: elicitation, sampling and roots (rule
//! `input-request-kinds`).

use indexmap::IndexMap;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize};

use crate::elicitation::{ElicitRequestParams, ElicitResult};
use crate::error::DecodeError;
use crate::json::{JsonObject, string_tag};
use crate::meta::ResultMeta;
use crate::roots::{ListRootsRequestParams, ListRootsResult};
use crate::sampling::{CreateMessageRequestParams, CreateMessageResult};
use crate::tag::InputRequiredTag;

string_tag!(
    /// `method: "elicitation/create"`.
    ElicitMethodTag = "elicitation/create"
);
string_tag!(
    /// `method: "sampling/createMessage"`.
    CreateMessageMethodTag = "sampling/createMessage"
);
string_tag!(
    /// `method: "roots/list"`.
    ListRootsMethodTag = "roots/list"
);

/// The three kinds of input request, by the client capability each needs
/// (rule `ask-declared-only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InputKind {
    /// `elicitation/create`, needs `elicitation` (and the mode used).
    Elicitation,
    /// `sampling/createMessage`, needs `sampling`.
    Sampling,
    /// `roots/list`, needs `roots`.
    Roots,
}

impl InputKind {
    /// The method of this kind of input request.
    pub fn method(self) -> &'static str {
        match self {
            Self::Elicitation => ElicitMethodTag::VALUE,
            Self::Sampling => CreateMessageMethodTag::VALUE,
            Self::Roots => ListRootsMethodTag::VALUE,
        }
    }
}

/// `elicitation/create` as an input request (`ElicitRequest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitRequest {
    /// Always `elicitation/create`.
    pub method: ElicitMethodTag,
    /// The question.
    pub params: ElicitRequestParams,
    /// Members outside the spec, kept as sent and never interpreted.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `sampling/createMessage` as an input request (`CreateMessageRequest`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CreateMessageRequest {
    /// Always `sampling/createMessage`.
    pub method: CreateMessageMethodTag,
    /// What to sample.
    pub params: CreateMessageRequestParams,
    /// Members outside the spec, kept as sent and never interpreted.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `roots/list` as an input request (`ListRootsRequest`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsRequest {
    /// Always `roots/list`.
    pub method: ListRootsMethodTag,
    /// Optional params.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<ListRootsRequestParams>,
    /// Members outside the spec, kept as sent and never interpreted (the
    /// official `ListRootsRequest` example carries a stale `id`).
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// One question of an [`InputRequiredResult`], keyed by `method` (rule
/// `input-request-kinds`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InputRequest {
    /// Elicitation.
    Elicitation(ElicitRequest),
    /// Sampling (deprecated).
    Sampling(CreateMessageRequest),
    /// Roots (deprecated).
    Roots(ListRootsRequest),
}

impl InputRequest {
    /// An elicitation question.
    pub fn elicit(params: ElicitRequestParams) -> Self {
        Self::Elicitation(ElicitRequest {
            method: ElicitMethodTag,
            params,
            extra: JsonObject::new(),
        })
    }

    /// A sampling question.
    pub fn sampling(params: CreateMessageRequestParams) -> Self {
        Self::Sampling(CreateMessageRequest {
            method: CreateMessageMethodTag,
            params,
            extra: JsonObject::new(),
        })
    }

    /// A roots question.
    pub fn roots() -> Self {
        Self::Roots(ListRootsRequest::default())
    }

    /// The kind of question.
    pub fn kind(&self) -> InputKind {
        match self {
            Self::Elicitation(_) => InputKind::Elicitation,
            Self::Sampling(_) => InputKind::Sampling,
            Self::Roots(_) => InputKind::Roots,
        }
    }
}

impl<'de> Deserialize<'de> for InputRequest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let decoded = match value.get("method").and_then(serde_json::Value::as_str) {
            Some(ElicitMethodTag::VALUE) => {
                ElicitRequest::deserialize(value).map(Self::Elicitation)
            }
            Some(CreateMessageMethodTag::VALUE) => {
                CreateMessageRequest::deserialize(value).map(Self::Sampling)
            }
            Some(ListRootsMethodTag::VALUE) => {
                ListRootsRequest::deserialize(value).map(Self::Roots)
            }
            Some(other) => {
                return Err(D::Error::custom(format_args!(
                    "input request method must be elicitation/create, sampling/createMessage \
                     or roots/list, found \"{other}\""
                )));
            }
            None => return Err(D::Error::custom("input request needs a string method")),
        };
        decoded.map_err(D::Error::custom)
    }
}

/// Reads `inputResponses` when present: an explicit `null` is refused (the
/// schema wants an object), where plain `Option` handling would read it as
/// absent.
pub(crate) fn present_responses<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<InputResponses>, D::Error> {
    InputResponses::deserialize(d).map(Some)
}

/// The questions of one round, keyed by server-chosen keys, in order (rule
/// `input-request-keys`).
pub type InputRequests = IndexMap<String, InputRequest>;

/// One answer of a retry, of the kind of the question it answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum InputResponse {
    /// An elicitation answer.
    Elicitation(ElicitResult),
    /// A sampling answer.
    Sampling(Box<CreateMessageResult>),
    /// A roots answer.
    Roots(ListRootsResult),
}

impl InputResponse {
    /// Decodes `value` as the answer to a question of `kind`: the way a server
    /// reads an answer, knowing what it asked.
    pub fn decode_as(kind: InputKind, value: &serde_json::Value) -> Result<Self, DecodeError> {
        let result = match kind {
            InputKind::Elicitation => ElicitResult::deserialize(value).map(Self::Elicitation),
            InputKind::Sampling => {
                CreateMessageResult::deserialize(value).map(|r| Self::Sampling(Box::new(r)))
            }
            InputKind::Roots => ListRootsResult::deserialize(value).map(Self::Roots),
        };
        result.map_err(|e| DecodeError::value(&format!("answer to {}", kind.method()), e))
    }

    /// The kind of question this answers.
    pub fn kind(&self) -> InputKind {
        match self {
            Self::Elicitation(_) => InputKind::Elicitation,
            Self::Sampling(_) => InputKind::Sampling,
            Self::Roots(_) => InputKind::Roots,
        }
    }
}

impl<'de> Deserialize<'de> for InputResponse {
    /// Without the question at hand, the kind is read from the member only that
    /// kind requires: `action` (elicitation), `roots`, or `model` (sampling).
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let kind = match (value.get("action"), value.get("roots"), value.get("model")) {
            (Some(_), None, None) => InputKind::Elicitation,
            (None, Some(_), None) => InputKind::Roots,
            (None, None, Some(_)) => InputKind::Sampling,
            _ => {
                return Err(D::Error::custom(
                    "an input response must be an ElicitResult (action), a ListRootsResult (roots) \
                     or a CreateMessageResult (model)",
                ));
            }
        };
        Self::decode_as(kind, &value).map_err(D::Error::custom)
    }
}

impl From<ElicitResult> for InputResponse {
    fn from(r: ElicitResult) -> Self {
        Self::Elicitation(r)
    }
}

impl From<CreateMessageResult> for InputResponse {
    fn from(r: CreateMessageResult) -> Self {
        Self::Sampling(Box::new(r))
    }
}

impl From<ListRootsResult> for InputResponse {
    fn from(r: ListRootsResult) -> Self {
        Self::Roots(r)
    }
}

/// The answers a retry carries, keyed like the questions (rule
/// `retry-repeats-request`).
///
/// Kept as raw JSON until the server reads the keys it asked: an entry it does
/// not recognise is ignored (rule `answers-unknown-ignored`) rather than
/// failing the whole request, and one it does is decoded as the answer to *its*
/// question ([`InputResponses::decode`]).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InputResponses(JsonObject);

impl InputResponses {
    /// No answers.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the answer for `key`.
    pub fn insert(&mut self, key: impl Into<String>, response: impl Into<InputResponse>) {
        let value = serde_json::to_value(response.into()).unwrap_or_default();
        self.0.insert(key.into(), value);
    }

    /// The raw answer for `key`.
    pub fn raw(&self, key: &str) -> Option<&serde_json::Value> {
        self.0.get(key)
    }

    /// Decodes the answer for `key` as the answer to a question of `kind`;
    /// `None` when there is no answer for `key`.
    pub fn decode(&self, key: &str, kind: InputKind) -> Option<Result<InputResponse, DecodeError>> {
        self.0.get(key).map(|v| InputResponse::decode_as(kind, v))
    }

    /// Decodes every answer without knowing the questions (each must be of one
    /// of the three kinds).
    pub fn decode_all(&self) -> Result<IndexMap<String, InputResponse>, DecodeError> {
        self.0
            .iter()
            .map(|(k, v)| {
                InputResponse::deserialize(v)
                    .map(|r| (k.clone(), r))
                    .map_err(|e| DecodeError::value(&format!("inputResponses[{k:?}]"), e))
            })
            .collect()
    }

    /// Keeps only the answers for which `keep` says yes, as they are (no
    /// decoding, no re-encoding).
    pub fn retain(&mut self, mut keep: impl FnMut(&str, &serde_json::Value) -> bool) {
        self.0.retain(|k, v| keep(k, v));
    }

    /// The keys answered.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// How many answers there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// There are no answers.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl FromIterator<(String, InputResponse)> for InputResponses {
    fn from_iter<I: IntoIterator<Item = (String, InputResponse)>>(iter: I) -> Self {
        let mut out = Self::new();
        for (k, v) in iter {
            out.insert(k, v);
        }
        out
    }
}

/// The MRTR members of the params of `tools/call`, `prompts/get` and
/// `resources/read` (`InputResponseRequestParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputResponseRequestParams {
    /// Answers to the previous round's questions.
    #[serde(
        default,
        deserialize_with = "crate::mrtr::present_responses",
        skip_serializing_if = "Option::is_none"
    )]
    pub input_responses: Option<InputResponses>,
    /// The previous round's state, echoed byte for byte.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: crate::meta::RequestMeta,
}

/// A result that asks the client for input before the request can complete
/// (`InputRequiredResult`). It carries `inputRequests`, `requestState` or
/// both, never neither (rule `input-required-not-empty`), and no caching
/// hints (rule `input-required-uncached`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "InputRequiredWire")]
pub struct InputRequiredResult {
    /// Always `input_required`.
    pub result_type: InputRequiredTag,
    /// The questions of this round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// Opaque server state the client echoes byte for byte (rule
    /// `echo-state-exactly`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// The wire shape before the check of rule `input-required-not-empty`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct InputRequiredWire {
    result_type: InputRequiredTag,
    #[serde(default)]
    input_requests: Option<InputRequests>,
    #[serde(default)]
    request_state: Option<String>,
    #[serde(rename = "_meta", default)]
    meta: Option<ResultMeta>,
}

impl TryFrom<InputRequiredWire> for InputRequiredResult {
    type Error = &'static str;

    fn try_from(w: InputRequiredWire) -> Result<Self, Self::Error> {
        if w.input_requests.is_none() && w.request_state.is_none() {
            return Err(
                "an input_required result needs inputRequests or requestState \
                 (rule input-required-not-empty)",
            );
        }
        Ok(Self {
            result_type: w.result_type,
            input_requests: w.input_requests,
            request_state: w.request_state,
            meta: w.meta,
        })
    }
}

impl InputRequiredResult {
    /// A round asking `requests`, with optional state.
    pub fn new(requests: InputRequests, request_state: Option<String>) -> Self {
        Self {
            result_type: InputRequiredTag,
            input_requests: Some(requests),
            request_state,
            meta: None,
        }
    }

    /// A state-only round ("load shedding"): the client may retry at once.
    pub fn state_only(request_state: String) -> Self {
        Self {
            result_type: InputRequiredTag,
            input_requests: None,
            request_state: Some(request_state),
            meta: None,
        }
    }
}
