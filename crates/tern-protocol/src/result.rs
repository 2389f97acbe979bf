//! Results, decoded by the method of the request they answer plus
//! `resultType` (never by trying shapes in turn).
//!
//! - Rule `result-type-required`: every result carries `resultType`; tern's
//!   result types hold a tag field ([`CompleteTag`] and friends) so that no
//!   serialisation path can forget it.
//! - Rule `result-type-unknown`: an unknown `resultType` is an error that
//!   names it.
//! - Rule `result-type-absent`: a missing `resultType` reads as `complete`
//!   (pre-2026 servers).
//! - Rule `input-required-methods`: `input_required` only answers
//!   `tools/call`, `prompts/get` and `resources/read`.
//! - Tasks: `task` only answers `tools/call`, and only where the caller says
//!   the extension is in play ([`ResultContext::tasks`]).
//!
//! Caching hints (`ttlMs`, `cacheScope`) are optional on decode although the
//! schema requires them on discover, list and read results: the spec says a
//! missing `ttlMs` "is treated as 0, which only happens with old servers", and
//! the official `ReadResourceResultResponse` example omits both
//! (`spec/examples/ReadResourceResultResponse/`). tern's server always sends
//! them.

use serde::{Deserialize, Serialize};

use crate::completion::CompleteResult;
use crate::discover::DiscoverResult;
use crate::error::DecodeError;
use crate::json::JsonObject;
use crate::legacy::InitializeResult;
use crate::meta::ResultMeta;
use crate::method;
use crate::mrtr::InputRequiredResult;
use crate::prompt::{GetPromptResult, ListPromptsResult};
use crate::resource::{ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult};
use crate::skill::{GetSkillResult, ListSkillsResult, ReadResourceDirectoryResult};
use crate::subscription::SubscriptionsListenResult;
use crate::task::{CreateTaskResult, GetTaskResult};
use crate::tool::{CallToolResult, ListToolsResult};

pub use crate::tag::{CacheScope, CompleteTag, InputRequiredTag, ResultType, TaskTag};

/// The outcome of a request that may need input or become a task.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Outcome<T> {
    /// The final result.
    Complete(T),
    /// The server asks for input; retry with the answers (MRTR).
    InputRequired(InputRequiredResult),
    /// The server created a task (`tools/call` with the Tasks extension).
    Task(CreateTaskResult),
}

/// A result with nothing but `resultType: "complete"` and `_meta`
/// (`EmptyResult`), the acknowledgement of `tasks/update` and `tasks/cancel`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EmptyResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// Any result (`Result`): a `resultType`, a `_meta`, and every other member
/// kept as sent. What an unknown method's result decodes to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AnyResult {
    /// The `resultType`, as sent; `complete` when absent (rule
    /// `result-type-absent`).
    #[serde(default = "complete_string")]
    pub result_type: String,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
    /// Every other member.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// The schema's abstract `CacheableResult` (discover, the list methods and
/// `resources/read` extend it), decoded strictly: here `ttlMs` and
/// `cacheScope` are required. Never an interim `input_required` (rule
/// `input-required-uncached`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheableResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// How long the client may cache the result, in ms (0: stale at once).
    pub ttl_ms: u64,
    /// Who may share the cached result.
    pub cache_scope: CacheScope,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
    /// Every other member.
    #[serde(flatten)]
    pub extra: JsonObject,
}

fn complete_string() -> String {
    CompleteTag::VALUE.to_owned()
}

/// What the caller knows when decoding a result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ResultContext {
    /// The request being answered declared the Tasks extension in its own
    /// `clientCapabilities`, so `tools/call` may answer with `resultType:
    /// "task"` (Tasks extension: only this request's capabilities count).
    pub tasks: bool,
}

impl ResultContext {
    /// The context of a result answering a request with this `_meta`.
    pub fn for_request(meta: &crate::meta::RequestMeta) -> Self {
        Self {
            tasks: meta
                .client_capabilities
                .extension(crate::task::TASKS_EXTENSION),
        }
    }

    /// A context in which the Tasks extension is in play.
    pub fn with_tasks() -> Self {
        Self { tasks: true }
    }
}

/// A result decoded by the method of the request it answers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerResult {
    /// `server/discover`.
    Discover(DiscoverResult),
    /// `tools/list`.
    ListTools(ListToolsResult),
    /// `tools/call`.
    CallTool(Outcome<CallToolResult>),
    /// `resources/list`.
    ListResources(ListResourcesResult),
    /// `resources/templates/list`.
    ListResourceTemplates(ListResourceTemplatesResult),
    /// `resources/read`.
    ReadResource(Outcome<ReadResourceResult>),
    /// `prompts/list`.
    ListPrompts(ListPromptsResult),
    /// `prompts/get`.
    GetPrompt(Outcome<GetPromptResult>),
    /// `completion/complete`.
    Completion(CompleteResult),
    /// `subscriptions/listen` (the graceful close).
    Listen(SubscriptionsListenResult),
    /// `tasks/get`.
    GetTask(GetTaskResult),
    /// `tasks/update` and `tasks/cancel`.
    Empty(EmptyResult),
    /// `skills/list` (Skills extension; entries that do not decode are in
    /// [`ListSkillsResult::invalid`]).
    ListSkills(ListSkillsResult),
    /// `skills/get` (Skills extension).
    GetSkill(GetSkillResult),
    /// `resources/directory/read` (Skills extension).
    ReadResourceDirectory(ReadResourceDirectoryResult),
    /// `initialize` (2025-11-25; no `resultType`).
    Initialize(InitializeResult),
    /// The result of a method tern does not know.
    Other(AnyResult),
}

impl ServerResult {
    /// Decodes the JSON text of a `result` that answers a request of `method`:
    /// `resultType` is read first (a scan that skips every other member),
    /// then the text is decoded once, straight into the type that method and
    /// `resultType` name, with no intermediate `Value` tree.
    pub fn decode(method: &str, result: &str, ctx: ResultContext) -> Result<Self, DecodeError> {
        /// The one member read before the type is known.
        #[derive(Deserialize)]
        struct Peek {
            #[serde(rename = "resultType", default)]
            result_type: Option<serde_json::Value>,
        }
        // A derived struct would also read a JSON array; a result is an object.
        if !result.trim_start().starts_with('{') {
            return Err(DecodeError::result(
                method,
                "a result must be a JSON object",
            ));
        }
        let peek: Peek =
            serde_json::from_str(result).map_err(|e| DecodeError::result(method, e))?;
        let source = Source::Text(result);
        if method == method::INITIALIZE {
            return source.typed(method).map(Self::Initialize);
        }
        let result_type = check(method, classify(method, peek.result_type.as_ref())?, ctx)?;
        Self::decode_typed(method, result_type, source)
    }

    /// [`ServerResult::decode`] for a parsed value.
    pub fn decode_value(
        method: &str,
        value: serde_json::Value,
        ctx: ResultContext,
    ) -> Result<Self, DecodeError> {
        if !value.is_object() {
            return Err(DecodeError::result(
                method,
                "a result must be a JSON object",
            ));
        }
        if method == method::INITIALIZE {
            return Source::Value(value).typed(method).map(Self::Initialize);
        }
        let result_type = check(method, classify(method, value.get("resultType"))?, ctx)?;
        Self::decode_typed(method, result_type, Source::Value(value))
    }

    fn decode_typed(
        method: &str,
        result_type: ResultType,
        source: Source<'_>,
    ) -> Result<Self, DecodeError> {
        let m = method;
        Ok(match method {
            method::DISCOVER => Self::Discover(source.typed(m)?),
            method::TOOLS_LIST => Self::ListTools(source.typed(m)?),
            method::TOOLS_CALL => Self::CallTool(source.outcome(m, result_type)?),
            method::RESOURCES_LIST => Self::ListResources(source.typed(m)?),
            method::RESOURCES_TEMPLATES_LIST => Self::ListResourceTemplates(source.typed(m)?),
            method::RESOURCES_READ => Self::ReadResource(source.outcome(m, result_type)?),
            method::PROMPTS_LIST => Self::ListPrompts(source.typed(m)?),
            method::PROMPTS_GET => Self::GetPrompt(source.outcome(m, result_type)?),
            method::COMPLETION_COMPLETE => Self::Completion(source.typed(m)?),
            method::SUBSCRIPTIONS_LISTEN => Self::Listen(source.typed(m)?),
            method::TASKS_GET => Self::GetTask(source.typed(m)?),
            method::TASKS_UPDATE | method::TASKS_CANCEL | method::PING => {
                Self::Empty(source.typed(m)?)
            }
            method::SKILLS_LIST => Self::ListSkills(source.typed(m)?),
            method::SKILLS_GET => Self::GetSkill(source.typed(m)?),
            method::RESOURCES_DIRECTORY_READ => Self::ReadResourceDirectory(source.typed(m)?),
            _ => Self::Other(source.typed(m)?),
        })
    }
}

/// Where a result is decoded from: its text, or a value already parsed.
enum Source<'a> {
    Text(&'a str),
    Value(serde_json::Value),
}

impl Source<'_> {
    fn typed<T: serde::de::DeserializeOwned>(self, method: &str) -> Result<T, DecodeError> {
        match self {
            Self::Text(text) => serde_json::from_str(text),
            Self::Value(value) => T::deserialize(value),
        }
        .map_err(|e| DecodeError::result(method, e))
    }

    fn outcome<T: serde::de::DeserializeOwned>(
        self,
        method: &str,
        result_type: ResultType,
    ) -> Result<Outcome<T>, DecodeError> {
        Ok(match result_type {
            ResultType::Complete => Outcome::Complete(self.typed(method)?),
            ResultType::InputRequired => Outcome::InputRequired(self.typed(method)?),
            ResultType::Task => Outcome::Task(self.typed(method)?),
        })
    }
}

/// Which `resultType`s may answer `method` (rules `input-required-methods`,
/// `result-type-extensions`).
fn check(
    method: &str,
    result_type: ResultType,
    ctx: ResultContext,
) -> Result<ResultType, DecodeError> {
    match result_type {
        ResultType::Complete => Ok(result_type),
        ResultType::InputRequired if is_mrtr_method(method) => Ok(result_type),
        ResultType::InputRequired => Err(DecodeError::result(
            method,
            "resultType \"input_required\" is only allowed for tools/call, prompts/get \
             and resources/read (rule input-required-methods)",
        )),
        ResultType::Task if method == method::TOOLS_CALL && ctx.tasks => Ok(result_type),
        ResultType::Task if method == method::TOOLS_CALL => Err(DecodeError::result(
            method,
            "resultType \"task\" but the Tasks extension is not in play for this request",
        )),
        ResultType::Task => Err(DecodeError::result(
            method,
            "resultType \"task\" is only allowed for tools/call (Tasks extension)",
        )),
    }
}

impl Serialize for ServerResult {
    /// Writes the result object itself, `resultType` included.
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Discover(r) => r.serialize(s),
            Self::ListTools(r) => r.serialize(s),
            Self::CallTool(r) => r.serialize(s),
            Self::ListResources(r) => r.serialize(s),
            Self::ListResourceTemplates(r) => r.serialize(s),
            Self::ReadResource(r) => r.serialize(s),
            Self::ListPrompts(r) => r.serialize(s),
            Self::GetPrompt(r) => r.serialize(s),
            Self::Completion(r) => r.serialize(s),
            Self::Listen(r) => r.serialize(s),
            Self::GetTask(r) => r.serialize(s),
            Self::Empty(r) => r.serialize(s),
            Self::ListSkills(r) => r.serialize(s),
            Self::GetSkill(r) => r.serialize(s),
            Self::ReadResourceDirectory(r) => r.serialize(s),
            Self::Initialize(r) => r.serialize(s),
            Self::Other(r) => r.serialize(s),
        }
    }
}

/// Reads `resultType` (rules `result-type-unknown`, `result-type-absent`).
fn classify(method: &str, value: Option<&serde_json::Value>) -> Result<ResultType, DecodeError> {
    match value {
        None => Ok(ResultType::Complete),
        Some(serde_json::Value::String(t)) => match t.as_str() {
            CompleteTag::VALUE => Ok(ResultType::Complete),
            InputRequiredTag::VALUE => Ok(ResultType::InputRequired),
            TaskTag::VALUE => Ok(ResultType::Task),
            other => Err(DecodeError::result(
                method,
                format_args!("unknown resultType \"{other}\" (rule result-type-unknown)"),
            )),
        },
        Some(other) => Err(DecodeError::result(
            method,
            format_args!("resultType must be a string, found {other}"),
        )),
    }
}

fn is_mrtr_method(method: &str) -> bool {
    matches!(
        method,
        method::TOOLS_CALL | method::PROMPTS_GET | method::RESOURCES_READ
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(method: &str, text: &str) -> Result<ServerResult, String> {
        ServerResult::decode(method, text, ResultContext::default()).map_err(|e| e.to_string())
    }

    #[test]
    fn missing_result_type_is_complete() {
        let r = decode("tools/call", r#"{"content":[]}"#).unwrap();
        assert!(matches!(r, ServerResult::CallTool(Outcome::Complete(_))));
    }

    #[test]
    fn unknown_result_type_is_named() {
        let err = decode("tools/call", r#"{"resultType":"later","content":[]}"#).unwrap_err();
        assert!(err.contains("unknown resultType \"later\""), "{err}");
    }

    #[test]
    fn input_required_only_for_three_methods() {
        let ir = r#"{"resultType":"input_required","requestState":"s"}"#;
        for m in ["tools/call", "prompts/get", "resources/read"] {
            assert!(decode(m, ir).is_ok(), "{m}");
        }
        for m in [
            "tools/list",
            "server/discover",
            "completion/complete",
            "tasks/get",
        ] {
            let err = decode(m, ir).unwrap_err();
            assert!(
                err.contains("only allowed for tools/call, prompts/get"),
                "{m}: {err}"
            );
        }
    }

    #[test]
    fn missing_result_type_is_complete_for_unknown_methods_too() {
        let r = decode("logging/setLevel", "{}").unwrap();
        let ServerResult::Other(any) = r else {
            panic!("an unknown method's result")
        };
        assert_eq!(any.result_type, "complete");
        assert!(
            decode("x/y", r#"{"resultType":"soon"}"#)
                .unwrap_err()
                .contains("unknown resultType")
        );
    }

    #[test]
    fn the_context_follows_the_requests_own_capabilities() {
        let with = crate::meta::RequestMeta::new(
            "2026-07-28",
            crate::ClientCapabilities::default().with_extension(crate::task::TASKS_EXTENSION),
        );
        assert!(ResultContext::for_request(&with).tasks);
        let without =
            crate::meta::RequestMeta::new("2026-07-28", crate::ClientCapabilities::default());
        assert!(!ResultContext::for_request(&without).tasks);
    }

    #[test]
    fn task_only_for_tools_call_with_the_extension() {
        let task = r#"{"resultType":"task","taskId":"t","status":"working",
            "createdAt":"2026-01-01T00:00:00Z","lastUpdatedAt":"2026-01-01T00:00:00Z","ttlMs":null}"#;
        assert!(
            decode("tools/call", task)
                .unwrap_err()
                .contains("not in play")
        );
        assert!(
            decode("prompts/get", task)
                .unwrap_err()
                .contains("only allowed for tools/call")
        );
        let ok = ServerResult::decode("tools/call", task, ResultContext::with_tasks()).unwrap();
        assert!(matches!(ok, ServerResult::CallTool(Outcome::Task(_))));
    }

    #[test]
    fn text_and_value_decode_alike_and_only_objects_are_results() {
        for text in [
            r#"{"content":[{"type":"text","text":"x"}],"resultType":"complete"}"#,
            r#"{"resultType":"input_required","requestState":"s"}"#,
        ] {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            assert_eq!(
                decode("tools/call", text).unwrap(),
                ServerResult::decode_value("tools/call", value, ResultContext::default()).unwrap()
            );
        }
        // A derived struct would read `["complete"]` as a sequence; a result
        // is an object.
        for text in [r#"["complete"]"#, "7", " null"] {
            let err = decode("tools/call", text).unwrap_err();
            assert!(err.contains("must be a JSON object"), "{text}: {err}");
        }
        // A nested `resultType` is content, not the result's.
        let nested = r#"{"content":[],"structuredContent":{"resultType":"later"}}"#;
        assert!(decode("tools/call", nested).is_ok());
    }

    #[test]
    fn input_required_needs_requests_or_state() {
        let err = decode("tools/call", r#"{"resultType":"input_required"}"#).unwrap_err();
        assert!(err.contains("input-required-not-empty"), "{err}");
    }
}
