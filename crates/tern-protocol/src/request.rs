//! Client requests as one enum keyed by `method`, each with typed params.

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;

use crate::completion::CompleteRequestParams;
use crate::error::DecodeError;
use crate::jsonrpc::{self, RequestId};
use crate::legacy::{InitializeRequestParams, PingParams};
use crate::meta::{RequestMeta, RequestParams};
use crate::method;
use crate::pagination::PaginatedRequestParams;
use crate::prompt::GetPromptRequestParams;
use crate::resource::ReadResourceRequestParams;
use crate::skill::{GetSkillRequestParams, ReadResourceDirectoryRequestParams};
use crate::subscription::SubscriptionsListenRequestParams;
use crate::task::{TaskRequestParams, UpdateTaskRequestParams};
use crate::tool::CallToolRequestParams;

/// A request a client sends, by method.
///
/// Decoding is by the method string; a method tern does not know (or one that
/// 2026-07-28 removed, like `logging/setLevel`) is kept as
/// [`ClientRequest::Other`] with its raw params, so a server can answer
/// `-32601`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ClientRequest {
    /// `server/discover`.
    Discover(RequestParams),
    /// `tools/list`.
    ListTools(PaginatedRequestParams),
    /// `tools/call`.
    CallTool(CallToolRequestParams),
    /// `resources/list`.
    ListResources(PaginatedRequestParams),
    /// `resources/templates/list`.
    ListResourceTemplates(PaginatedRequestParams),
    /// `resources/read`.
    ReadResource(ReadResourceRequestParams),
    /// `prompts/list`.
    ListPrompts(PaginatedRequestParams),
    /// `prompts/get`.
    GetPrompt(GetPromptRequestParams),
    /// `completion/complete`.
    Completion(CompleteRequestParams),
    /// `subscriptions/listen`.
    Listen(SubscriptionsListenRequestParams),
    /// `tasks/get` (Tasks extension).
    GetTask(TaskRequestParams),
    /// `tasks/update` (Tasks extension).
    UpdateTask(UpdateTaskRequestParams),
    /// `tasks/cancel` (Tasks extension).
    CancelTask(TaskRequestParams),
    /// `skills/list` (Skills extension).
    ListSkills(PaginatedRequestParams),
    /// `skills/get` (Skills extension).
    GetSkill(GetSkillRequestParams),
    /// `resources/directory/read` (Skills extension).
    ReadResourceDirectory(ReadResourceDirectoryRequestParams),
    /// `initialize` (2025-11-25; boxed: it is twice the size of any other).
    Initialize(Box<InitializeRequestParams>),
    /// `ping` (2025-11-25).
    Ping(Option<PingParams>),
    /// Any other method, with its params undecoded.
    Other {
        /// The method.
        method: String,
        /// The raw params.
        params: Option<Box<RawValue>>,
    },
}

impl ClientRequest {
    /// Decodes the params of a request of `method`.
    ///
    /// Every 2026-07-28 request carries params (its `_meta` is required), so
    /// missing params are an error for the methods tern knows.
    pub fn decode(method_name: &str, params: Option<&RawValue>) -> Result<Self, DecodeError> {
        fn p<T: serde::de::DeserializeOwned>(
            method: &str,
            params: Option<&RawValue>,
        ) -> Result<T, DecodeError> {
            let raw = params.ok_or_else(|| {
                DecodeError::params(method, "missing params (every request carries _meta)")
            })?;
            serde_json::from_str(raw.get()).map_err(|e| DecodeError::params(method, e))
        }
        fn opt<T: serde::de::DeserializeOwned>(
            method: &str,
            params: Option<&RawValue>,
        ) -> Result<Option<T>, DecodeError> {
            params
                .map(|raw| {
                    serde_json::from_str(raw.get()).map_err(|e| DecodeError::params(method, e))
                })
                .transpose()
        }
        let m = method_name;
        Ok(match m {
            method::DISCOVER => Self::Discover(p(m, params)?),
            method::TOOLS_LIST => Self::ListTools(p(m, params)?),
            method::TOOLS_CALL => Self::CallTool(p(m, params)?),
            method::RESOURCES_LIST => Self::ListResources(p(m, params)?),
            method::RESOURCES_TEMPLATES_LIST => Self::ListResourceTemplates(p(m, params)?),
            method::RESOURCES_READ => Self::ReadResource(p(m, params)?),
            method::PROMPTS_LIST => Self::ListPrompts(p(m, params)?),
            method::PROMPTS_GET => Self::GetPrompt(p(m, params)?),
            method::COMPLETION_COMPLETE => Self::Completion(p(m, params)?),
            method::SUBSCRIPTIONS_LISTEN => Self::Listen(p(m, params)?),
            method::TASKS_GET => Self::GetTask(p(m, params)?),
            method::TASKS_UPDATE => Self::UpdateTask(p(m, params)?),
            method::TASKS_CANCEL => Self::CancelTask(p(m, params)?),
            method::SKILLS_LIST => Self::ListSkills(p(m, params)?),
            method::SKILLS_GET => Self::GetSkill(p(m, params)?),
            method::RESOURCES_DIRECTORY_READ => Self::ReadResourceDirectory(p(m, params)?),
            method::INITIALIZE => Self::Initialize(p(m, params)?),
            method::PING => Self::Ping(opt(m, params)?),
            _ => Self::Other {
                method: m.to_owned(),
                params: params.map(ToOwned::to_owned),
            },
        })
    }

    /// Decodes a [`jsonrpc::Request`]'s params.
    pub fn from_request(request: &jsonrpc::Request) -> Result<Self, DecodeError> {
        Self::decode(&request.method, request.params.as_deref())
    }

    /// The method.
    pub fn method(&self) -> &str {
        match self {
            Self::Discover(_) => method::DISCOVER,
            Self::ListTools(_) => method::TOOLS_LIST,
            Self::CallTool(_) => method::TOOLS_CALL,
            Self::ListResources(_) => method::RESOURCES_LIST,
            Self::ListResourceTemplates(_) => method::RESOURCES_TEMPLATES_LIST,
            Self::ReadResource(_) => method::RESOURCES_READ,
            Self::ListPrompts(_) => method::PROMPTS_LIST,
            Self::GetPrompt(_) => method::PROMPTS_GET,
            Self::Completion(_) => method::COMPLETION_COMPLETE,
            Self::Listen(_) => method::SUBSCRIPTIONS_LISTEN,
            Self::GetTask(_) => method::TASKS_GET,
            Self::UpdateTask(_) => method::TASKS_UPDATE,
            Self::CancelTask(_) => method::TASKS_CANCEL,
            Self::ListSkills(_) => method::SKILLS_LIST,
            Self::GetSkill(_) => method::SKILLS_GET,
            Self::ReadResourceDirectory(_) => method::RESOURCES_DIRECTORY_READ,
            Self::Initialize(_) => method::INITIALIZE,
            Self::Ping(_) => method::PING,
            Self::Other { method, .. } => method,
        }
    }

    /// The request's `_meta`, for the methods that carry one.
    pub fn meta(&self) -> Option<&RequestMeta> {
        Some(match self {
            Self::Discover(p) => &p.meta,
            Self::ListTools(p)
            | Self::ListResources(p)
            | Self::ListResourceTemplates(p)
            | Self::ListPrompts(p)
            | Self::ListSkills(p) => &p.meta,
            Self::CallTool(p) => &p.meta,
            Self::ReadResource(p) => &p.meta,
            Self::GetPrompt(p) => &p.meta,
            Self::Completion(p) => &p.meta,
            Self::Listen(p) => &p.meta,
            Self::GetTask(p) | Self::CancelTask(p) => &p.meta,
            Self::UpdateTask(p) => &p.meta,
            Self::GetSkill(p) => &p.meta,
            Self::ReadResourceDirectory(p) => &p.meta,
            Self::Initialize(_) | Self::Ping(_) | Self::Other { .. } => return None,
        })
    }

    /// What the `Mcp-Name` header carries for this request: the tool or prompt
    /// name, the resource URI, or the task id.
    pub fn name(&self) -> Option<&str> {
        match self {
            Self::CallTool(p) => Some(&p.name),
            Self::GetPrompt(p) => Some(&p.name),
            Self::ReadResource(p) => Some(&p.uri),
            Self::GetTask(p) | Self::CancelTask(p) => Some(&p.task_id),
            Self::UpdateTask(p) => Some(&p.task_id),
            _ => None,
        }
    }

    /// The request may be answered with `input_required` (rule
    /// `input-required-methods`).
    pub fn may_require_input(&self) -> bool {
        matches!(
            self,
            Self::CallTool(_) | Self::GetPrompt(_) | Self::ReadResource(_)
        )
    }

    fn serialize_params<S: Serializer>(&self, id: &RequestId, s: S) -> Result<S::Ok, S::Error> {
        let m = self.method();
        match self {
            Self::Discover(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::ListTools(p)
            | Self::ListResources(p)
            | Self::ListResourceTemplates(p)
            | Self::ListPrompts(p)
            | Self::ListSkills(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::CallTool(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::ReadResource(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::GetPrompt(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::Completion(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::Listen(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::GetTask(p) | Self::CancelTask(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::UpdateTask(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::GetSkill(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::ReadResourceDirectory(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::Initialize(p) => jsonrpc::serialize_request(id, m, Some(p), s),
            Self::Ping(p) => jsonrpc::serialize_request(id, m, p.as_ref(), s),
            Self::Other { params, .. } => jsonrpc::serialize_request(id, m, params.as_deref(), s),
        }
    }

    /// This request as a JSON-RPC message with `id`, ready to serialise.
    pub fn with_id<'a>(&'a self, id: &'a RequestId) -> RequestMessage<'a> {
        RequestMessage { id, request: self }
    }
}

/// A [`ClientRequest`] with its id: serialises as a whole JSON-RPC request.
#[derive(Debug, Clone, Copy)]
pub struct RequestMessage<'a> {
    /// The id.
    pub id: &'a RequestId,
    /// The request.
    pub request: &'a ClientRequest,
}

impl Serialize for RequestMessage<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.request.serialize_params(self.id, s)
    }
}

/// The member of a `method` request's params that [`ClientRequest::name`]
/// reads (the `Mcp-Name` header's value): `name`, `uri` or `taskId`; `None`
/// for a method without one. For a request held as JSON rather than typed
/// (a relay's).
pub fn name_member(method: &str) -> Option<&'static str> {
    match method {
        method::TOOLS_CALL | method::PROMPTS_GET => Some("name"),
        method::RESOURCES_READ => Some("uri"),
        method::TASKS_GET | method::TASKS_CANCEL | method::TASKS_UPDATE => Some("taskId"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use serde_json::json;

    use super::*;
    use crate::jsonrpc::Message;

    #[test]
    fn decodes_by_method_and_re_encodes_the_whole_request() {
        let text = json!({"jsonrpc": "2.0", "id": "c-2", "method": "tools/call", "params": {
            "name": "provision_database", "arguments": {"name": "orders"},
            "inputResponses": {"region": {"action": "accept", "content": {"region": "eu-west-1"}}},
            "requestState": "t1.k1.AAAA",
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
                      "com.example/trace": {"span": 7}}}})
        .to_string();
        let Message::Request(req) = Message::from_str(&text).unwrap() else {
            panic!("a request")
        };
        let typed = ClientRequest::from_request(&req).unwrap();
        assert_eq!(typed.method(), "tools/call");
        assert_eq!(typed.name(), Some("provision_database"));
        assert!(typed.may_require_input());
        let meta = typed.meta().unwrap();
        assert_eq!(
            meta.extra["com.example/trace"],
            json!({"span": 7}),
            "unknown _meta keys are kept"
        );
        let again = serde_json::to_value(typed.with_id(&req.id)).unwrap();
        assert_eq!(
            again,
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        );
    }

    #[test]
    fn params_errors_name_the_method_and_the_field() {
        let raw = serde_json::value::to_raw_value(&json!({"_meta": {}})).unwrap();
        let err = ClientRequest::decode("prompts/get", Some(&raw)).unwrap_err();
        assert!(err.is_params());
        assert_eq!(
            err.to_error_object().code,
            crate::error::code::INVALID_PARAMS
        );
        assert!(
            err.to_string()
                .starts_with("invalid params for prompts/get:"),
            "{err}"
        );
        let unknown = ClientRequest::decode("tools/frobnicate", None).unwrap();
        assert!(matches!(unknown, ClientRequest::Other { .. }));
        assert!(!unknown.may_require_input());
    }

    #[test]
    fn the_name_member_is_what_name_reads_for_every_method() {
        use serde_json::json;
        let cases = [
            ("tools/call", json!({"name": "t", "arguments": {}})),
            ("prompts/get", json!({"name": "p"})),
            ("resources/read", json!({"uri": "a://b"})),
            ("tasks/get", json!({"taskId": "k"})),
            ("tasks/cancel", json!({"taskId": "k"})),
            ("tasks/update", json!({"taskId": "k", "inputResponses": {}})),
            ("tools/list", json!({})),
            ("server/discover", json!({})),
        ];
        let meta = json!({
            crate::meta::PROTOCOL_VERSION_KEY: "2026-07-28",
            crate::meta::CLIENT_INFO_KEY: {"name": "t", "version": "1"},
            crate::meta::CLIENT_CAPABILITIES_KEY: {},
        });
        for (method, mut params) in cases {
            params["_meta"] = meta.clone();
            let raw = serde_json::value::to_raw_value(&params).unwrap();
            let request = ClientRequest::decode(method, Some(&raw)).unwrap();
            let by_member = name_member(method).and_then(|m| params[m].as_str());
            assert_eq!(request.name(), by_member, "{method}");
        }
    }
}
