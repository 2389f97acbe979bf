//! Every `$defs` name of the 2026-07-28 schema and of the Tasks extension
//! schema, mapped to the tern type that decodes it strictly.
//!
//! Shared by the `decode` example and the protocol tests (which include this
//! file), so both agree on what "the tern type for a schema type" is.

use std::str::FromStr;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tern_protocol::capabilities::{BaseMetadata, Icon, Icons, Implementation};
use tern_protocol::completion::CompleteResult;
use tern_protocol::completion::{CompleteRequestParams, Reference};
use tern_protocol::content::{
    Annotations, BlobResourceContents, ContentBlock, ResourceContents, Role, TextResourceContents,
};
use tern_protocol::discover::DiscoverResult;
use tern_protocol::elicitation::{
    BooleanSchema, ElicitRequestFormParams, ElicitRequestParams, ElicitRequestUrlParams,
    ElicitResult, LegacyTitledEnumSchema, NumberSchema, PrimitiveSchema, StringSchema,
    TitledMultiSelectEnumSchema, TitledSingleSelectEnumSchema, UntitledMultiSelectEnumSchema,
    UntitledSingleSelectEnumSchema,
};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::{Message, RequestId};
use tern_protocol::logging::{LoggingLevel, LoggingMessageNotificationParams};
use tern_protocol::meta::{
    NotificationMeta, NotificationParams, RequestMeta, RequestParams, ResultMeta,
};
use tern_protocol::mrtr::{
    CreateMessageRequest, ElicitRequest, InputRequest, InputRequests, InputRequiredResult,
    InputResponse, InputResponseRequestParams, InputResponses, ListRootsRequest,
};
use tern_protocol::pagination::PaginatedRequestParams;
use tern_protocol::progress::{CancelledNotificationParams, ProgressNotificationParams};
use tern_protocol::prompt::{
    GetPromptRequestParams, GetPromptResult, ListPromptsResult, Prompt, PromptArgument,
    PromptMessage,
};
use tern_protocol::resource::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceRequestParams,
    ReadResourceResult, Resource, ResourceRequestParams, ResourceTemplate,
    ResourceUpdatedNotificationParams,
};
use tern_protocol::result::{AnyResult, CacheableResult, EmptyResult};
use tern_protocol::roots::{ListRootsResult, Root};
use tern_protocol::sampling::{
    CreateMessageRequestParams, CreateMessageResult, ModelHint, ModelPreferences,
    SamplingContentBlock, SamplingMessage, ToolChoice,
};
use tern_protocol::subscription::{
    SubscriptionFilter, SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequestParams, SubscriptionsListenResult, SubscriptionsListenResultMeta,
};
use tern_protocol::task::{
    CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskStatus, TaskStatusNotificationParams,
    TasksExtensionCapability,
};
use tern_protocol::tool::{
    CallToolRequestParams, CallToolResult, ListToolsResult, Tool, ToolAnnotations,
};
use tern_protocol::{
    ClientNotification, ClientRequest, JsonObject, ProgressToken, ResultContext,
    ServerNotification, ServerResult,
};

/// How to decode.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Options {
    /// The Tasks extension is in play, so `tools/call` may answer `task`.
    pub(crate) tasks: bool,
}

type Decoded = Result<Value, String>;

fn plain<T: DeserializeOwned + Serialize>(text: &str) -> Decoded {
    let value: T = serde_json::from_str(text).map_err(|e| e.to_string())?;
    serde_json::to_value(value).map_err(|e| e.to_string())
}

fn block(text: &str, want: &str) -> Decoded {
    let block: ContentBlock = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let found = match &block {
        ContentBlock::Text(_) => "text",
        ContentBlock::Image(_) => "image",
        ContentBlock::Audio(_) => "audio",
        ContentBlock::ResourceLink(_) => "resource_link",
        ContentBlock::Resource(_) => "resource",
    };
    if found != want {
        return Err(format!("expected a {want} block, found {found}"));
    }
    serde_json::to_value(block).map_err(|e| e.to_string())
}

fn sampling_block(text: &str, want: &str) -> Decoded {
    let block: SamplingContentBlock = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let found = match &block {
        SamplingContentBlock::ToolUse(_) => "tool_use",
        SamplingContentBlock::ToolResult(_) => "tool_result",
        _ => "another",
    };
    if found != want {
        return Err(format!("expected a {want} block, found {found} block"));
    }
    serde_json::to_value(block).map_err(|e| e.to_string())
}

fn reference(text: &str, prompt: bool) -> Decoded {
    let r: Reference = serde_json::from_str(text).map_err(|e| e.to_string())?;
    match (&r, prompt) {
        (Reference::Prompt(_), true) | (Reference::ResourceTemplate(_), false) => {
            serde_json::to_value(r).map_err(|e| e.to_string())
        }
        _ => Err("wrong reference type".into()),
    }
}

/// A form field restricted to some of its kinds.
fn field(text: &str, allowed: &[&str]) -> Decoded {
    let f: PrimitiveSchema = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let kind = match &f {
        PrimitiveSchema::String(_) => "string",
        PrimitiveSchema::Number(_) => "number",
        PrimitiveSchema::Boolean(_) => "boolean",
        PrimitiveSchema::UntitledSingleSelect(_) | PrimitiveSchema::TitledSingleSelect(_) => {
            "single"
        }
        PrimitiveSchema::LegacyTitled(_) => "legacy",
        PrimitiveSchema::UntitledMultiSelect(_) | PrimitiveSchema::TitledMultiSelect(_) => "multi",
    };
    if !allowed.contains(&kind) {
        return Err(format!("expected {allowed:?} field, found a {kind} field"));
    }
    serde_json::to_value(f).map_err(|e| e.to_string())
}

fn message(text: &str) -> Result<Message, String> {
    Message::from_str(text).map_err(|e| e.to_string())
}

/// A whole request message of one of `methods`, params decoded by method.
fn request(text: &str, methods: &[&str]) -> Decoded {
    let Message::Request(req) = message(text)? else {
        return Err("expected a JSON-RPC request".into());
    };
    if !methods.is_empty() && !methods.contains(&req.method.as_str()) {
        return Err(format!(
            "expected method {}, found \"{}\"",
            methods.join(" or "),
            req.method
        ));
    }
    let typed = ClientRequest::from_request(&req).map_err(|e| e.to_string())?;
    if matches!(typed, ClientRequest::Other { .. }) && !methods.is_empty() {
        return Err(format!("unknown method \"{}\"", req.method));
    }
    // Strictly, every `inputResponses` entry is one of the three answers (a
    // server instead ignores the entries it did not ask for, rule
    // `answers-unknown-ignored`).
    let responses = match &typed {
        ClientRequest::CallTool(p) => p.input_responses.as_ref(),
        ClientRequest::GetPrompt(p) => p.input_responses.as_ref(),
        ClientRequest::ReadResource(p) => p.input_responses.as_ref(),
        ClientRequest::UpdateTask(p) => Some(&p.input_responses),
        _ => None,
    };
    if let Some(responses) = responses {
        responses.decode_all().map_err(|e| e.to_string())?;
    }
    serde_json::to_value(typed.with_id(&req.id)).map_err(|e| e.to_string())
}

/// A whole notification message of one of `methods`.
fn notification(text: &str, methods: &[&str], client: bool) -> Decoded {
    let Message::Notification(n) = message(text)? else {
        return Err("expected a JSON-RPC notification".into());
    };
    if !methods.contains(&n.method.as_str()) {
        return Err(format!(
            "expected method {}, found \"{}\"",
            methods.join(" or "),
            n.method
        ));
    }
    if client {
        let typed = ClientNotification::from_notification(&n).map_err(|e| e.to_string())?;
        serde_json::to_value(typed).map_err(|e| e.to_string())
    } else {
        let typed = ServerNotification::from_notification(&n).map_err(|e| e.to_string())?;
        serde_json::to_value(typed).map_err(|e| e.to_string())
    }
}

/// A whole success response answering `method`, its result decoded by method
/// and `resultType`.
fn response(text: &str, method: &str, opts: Options) -> Decoded {
    let Message::Response(resp) = message(text)? else {
        return Err("expected a JSON-RPC success response".into());
    };
    let ctx = ResultContext { tasks: opts.tasks };
    let result = ServerResult::decode(method, resp.result.get(), ctx).map_err(|e| e.to_string())?;
    Ok(json!({"jsonrpc": "2.0", "id": resp.id, "result": result}))
}

/// A whole error response, optionally with a fixed code.
fn error_response(text: &str, want: Option<i64>) -> Decoded {
    let Message::Error(e) = message(text)? else {
        return Err("expected a JSON-RPC error response".into());
    };
    check_code(&e.error, want)?;
    serde_json::to_value(&e).map_err(|err| err.to_string())
}

fn check_code(error: &ErrorObject, want: Option<i64>) -> Result<(), String> {
    if let Some(want) = want {
        if error.code != want {
            return Err(format!("expected error code {want}, found {}", error.code));
        }
        if want == code::MISSING_REQUIRED_CLIENT_CAPABILITY
            && error.missing_capability_data().is_none()
        {
            return Err("-32021 needs data.requiredCapabilities".into());
        }
        if want == code::UNSUPPORTED_PROTOCOL_VERSION && error.unsupported_version_data().is_none()
        {
            return Err("-32022 needs data.supported and data.requested".into());
        }
    }
    Ok(())
}

fn error_object(text: &str, want: i64) -> Decoded {
    let e: ErrorObject = serde_json::from_str(text).map_err(|e| e.to_string())?;
    check_code(&e, Some(want))?;
    serde_json::to_value(e).map_err(|e| e.to_string())
}

fn task_with_status(text: &str, want: TaskStatus) -> Decoded {
    let t: DetailedTask = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if t.task.status != want {
        return Err(format!(
            "expected status {want:?}, found {:?}",
            t.task.status
        ));
    }
    serde_json::to_value(t).map_err(|e| e.to_string())
}

fn input_responses(text: &str) -> Decoded {
    let r: InputResponses = serde_json::from_str(text).map_err(|e| e.to_string())?;
    r.decode_all().map_err(|e| e.to_string())?;
    serde_json::to_value(r).map_err(|e| e.to_string())
}

/// A bare `{method, params?}` (the schema's `Request` / `Notification`).
fn bare_method(text: &str) -> Decoded {
    let v: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let obj = v.as_object().ok_or("expected an object")?;
    if !obj.get("method").is_some_and(Value::is_string) {
        return Err("method must be a string".into());
    }
    if obj.get("params").is_some_and(|p| !p.is_object()) {
        return Err("params must be an object".into());
    }
    Ok(v)
}

const CLIENT_REQUESTS: &[&str] = &[
    "server/discover",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "subscriptions/listen",
    "prompts/list",
    "prompts/get",
    "tools/list",
    "tools/call",
    "completion/complete",
];

const SERVER_NOTIFICATIONS: &[&str] = &[
    "notifications/cancelled",
    "notifications/progress",
    "notifications/resources/list_changed",
    "notifications/subscriptions/acknowledged",
    "notifications/resources/updated",
    "notifications/prompts/list_changed",
    "notifications/tools/list_changed",
    "notifications/message",
];

/// Decodes `text` strictly as the schema type `name` and returns its
/// re-encoding; `Err` says what is wrong. `None` when `name` is not a type of
/// either schema.
#[allow(
    clippy::too_many_lines,
    reason = "one uniform table, one arm per schema type"
)]
pub(crate) fn decode(name: &str, text: &str, opts: Options) -> Option<Decoded> {
    Some(match name {
        // JSON-RPC envelope.
        "JSONRPCMessage" => {
            message(text).and_then(|m| serde_json::to_value(m).map_err(|e| e.to_string()))
        }
        "JSONRPCRequest" => request(text, &[]),
        "JSONRPCNotification" => match message(text) {
            Ok(m @ Message::Notification(_)) => serde_json::to_value(m).map_err(|e| e.to_string()),
            Ok(_) => Err("expected a JSON-RPC notification".into()),
            Err(e) => Err(e),
        },
        "JSONRPCResultResponse" => match message(text) {
            Ok(m @ Message::Response(_)) => serde_json::to_value(m).map_err(|e| e.to_string()),
            Ok(_) => Err("expected a JSON-RPC success response".into()),
            Err(e) => Err(e),
        },
        "JSONRPCErrorResponse" => error_response(text, None),
        "JSONRPCResponse" => match message(text) {
            Ok(m @ (Message::Response(_) | Message::Error(_))) => {
                serde_json::to_value(m).map_err(|e| e.to_string())
            }
            Ok(_) => Err("expected a JSON-RPC response".into()),
            Err(e) => Err(e),
        },
        "Request" | "Notification" => bare_method(text),
        "RequestId" => plain::<RequestId>(text),
        "ProgressToken" => plain::<ProgressToken>(text),
        "Cursor" | "ResultType" => plain::<String>(text),
        "JSONValue" => plain::<Value>(text),
        "JSONObject" | "MetaObject" => plain::<JsonObject>(text),
        "JSONArray" => plain::<Vec<Value>>(text),

        // Errors.
        "Error" => plain::<ErrorObject>(text),
        "ParseError" => error_object(text, code::PARSE_ERROR),
        "InvalidRequestError" => error_object(text, code::INVALID_REQUEST),
        "MethodNotFoundError" => error_object(text, code::METHOD_NOT_FOUND),
        "InvalidParamsError" => error_object(text, code::INVALID_PARAMS),
        "InternalError" => error_object(text, code::INTERNAL_ERROR),
        "HeaderMismatchError" => error_response(text, Some(code::HEADER_MISMATCH)),
        "MissingRequiredClientCapabilityError" => {
            error_response(text, Some(code::MISSING_REQUIRED_CLIENT_CAPABILITY))
        }
        "UnsupportedProtocolVersionError" => {
            error_response(text, Some(code::UNSUPPORTED_PROTOCOL_VERSION))
        }

        // _meta, params, capabilities.
        "RequestMetaObject" => plain::<RequestMeta>(text),
        "ResultMetaObject" => plain::<ResultMeta>(text),
        "NotificationMetaObject" => plain::<NotificationMeta>(text),
        "RequestParams" => plain::<RequestParams>(text),
        "NotificationParams" => plain::<NotificationParams>(text),
        "PaginatedRequestParams" => plain::<PaginatedRequestParams>(text),
        "InputResponseRequestParams" => plain::<InputResponseRequestParams>(text),
        "ResourceRequestParams" => plain::<ResourceRequestParams>(text),
        "ClientCapabilities" => plain::<tern_protocol::ClientCapabilities>(text),
        "ServerCapabilities" => plain::<tern_protocol::ServerCapabilities>(text),
        "Implementation" => plain::<Implementation>(text),
        "Icon" => plain::<Icon>(text),
        "Icons" => plain::<Icons>(text),
        "BaseMetadata" => plain::<BaseMetadata>(text),

        // Results in general.
        "Result" | "ClientResult" | "ServerResult" | "PaginatedResult" => plain::<AnyResult>(text)
            .and_then(|v| match v.get("resultType").and_then(Value::as_str) {
                Some("complete" | "input_required" | "task") => Ok(v),
                Some(other) => Err(format!(
                    "unknown resultType \"{other}\" (rule result-type-unknown)"
                )),
                None => Err("missing resultType".into()),
            }),
        "EmptyResult" | "UpdateTaskResult" | "CancelTaskResult" => plain::<EmptyResult>(text),
        "CacheableResult" => plain::<CacheableResult>(text),

        // Discover.
        "DiscoverRequest" => request(text, &["server/discover"]),
        "DiscoverResult" => plain::<DiscoverResult>(text),
        "DiscoverResultResponse" => response(text, "server/discover", opts),

        // Tools.
        "Tool" => plain::<Tool>(text),
        "ToolAnnotations" => plain::<ToolAnnotations>(text),
        "ListToolsRequest" => request(text, &["tools/list"]),
        "ListToolsResult" => plain::<ListToolsResult>(text),
        "ListToolsResultResponse" => response(text, "tools/list", opts),
        "CallToolRequest" => request(text, &["tools/call"]),
        "CallToolRequestParams" => plain::<CallToolRequestParams>(text),
        "CallToolResult" => plain::<CallToolResult>(text),
        "CallToolResultResponse" => response(text, "tools/call", opts),
        "ToolListChangedNotification" => {
            notification(text, &["notifications/tools/list_changed"], false)
        }

        // Resources.
        "Resource" => plain::<Resource>(text),
        "ResourceTemplate" => plain::<ResourceTemplate>(text),
        "ResourceContents" => plain::<ResourceContents>(text),
        "TextResourceContents" => plain::<TextResourceContents>(text),
        "BlobResourceContents" => plain::<BlobResourceContents>(text),
        "ListResourcesRequest" => request(text, &["resources/list"]),
        "ListResourcesResult" => plain::<ListResourcesResult>(text),
        "ListResourcesResultResponse" => response(text, "resources/list", opts),
        "ListResourceTemplatesRequest" => request(text, &["resources/templates/list"]),
        "ListResourceTemplatesResult" => plain::<ListResourceTemplatesResult>(text),
        "ListResourceTemplatesResultResponse" => response(text, "resources/templates/list", opts),
        "ReadResourceRequest" => request(text, &["resources/read"]),
        "ReadResourceRequestParams" => plain::<ReadResourceRequestParams>(text),
        "ReadResourceResult" => plain::<ReadResourceResult>(text),
        "ReadResourceResultResponse" => response(text, "resources/read", opts),
        "ResourceListChangedNotification" => {
            notification(text, &["notifications/resources/list_changed"], false)
        }
        "ResourceUpdatedNotification" => {
            notification(text, &["notifications/resources/updated"], false)
        }
        "ResourceUpdatedNotificationParams" => plain::<ResourceUpdatedNotificationParams>(text),

        // Prompts and completion.
        "Prompt" => plain::<Prompt>(text),
        "PromptArgument" => plain::<PromptArgument>(text),
        "PromptMessage" => plain::<PromptMessage>(text),
        "ListPromptsRequest" => request(text, &["prompts/list"]),
        "ListPromptsResult" => plain::<ListPromptsResult>(text),
        "ListPromptsResultResponse" => response(text, "prompts/list", opts),
        "GetPromptRequest" => request(text, &["prompts/get"]),
        "GetPromptRequestParams" => plain::<GetPromptRequestParams>(text),
        "GetPromptResult" => plain::<GetPromptResult>(text),
        "GetPromptResultResponse" => response(text, "prompts/get", opts),
        "PromptListChangedNotification" => {
            notification(text, &["notifications/prompts/list_changed"], false)
        }
        "PromptReference" => reference(text, true),
        "ResourceTemplateReference" => reference(text, false),
        "CompleteRequest" => request(text, &["completion/complete"]),
        "CompleteRequestParams" => plain::<CompleteRequestParams>(text),
        "CompleteResult" => plain::<CompleteResult>(text),
        "CompleteResultResponse" => response(text, "completion/complete", opts),

        // Content.
        "ContentBlock" => plain::<ContentBlock>(text),
        "TextContent" => block(text, "text"),
        "ImageContent" => block(text, "image"),
        "AudioContent" => block(text, "audio"),
        "ResourceLink" => block(text, "resource_link"),
        "EmbeddedResource" => block(text, "resource"),
        "Annotations" => plain::<Annotations>(text),
        "Role" => plain::<Role>(text),

        // Subscriptions, progress, cancellation, logging.
        "SubscriptionFilter"
        | "TaskSubscriptionNotifications"
        | "TaskSubscriptionAcknowledgedNotifications" => plain::<SubscriptionFilter>(text),
        "SubscriptionsListenRequest" => request(text, &["subscriptions/listen"]),
        "SubscriptionsListenRequestParams" => plain::<SubscriptionsListenRequestParams>(text),
        "SubscriptionsListenResult" => plain::<SubscriptionsListenResult>(text),
        "SubscriptionsListenResultMetaObject" => plain::<SubscriptionsListenResultMeta>(text),
        "SubscriptionsListenResultResponse" => response(text, "subscriptions/listen", opts),
        "SubscriptionsAcknowledgedNotification" => {
            notification(text, &["notifications/subscriptions/acknowledged"], false)
        }
        "SubscriptionsAcknowledgedNotificationParams" => {
            plain::<SubscriptionsAcknowledgedNotificationParams>(text)
        }
        "ProgressNotification" => notification(text, &["notifications/progress"], false),
        "ProgressNotificationParams" => plain::<ProgressNotificationParams>(text),
        "CancelledNotification" => notification(text, &["notifications/cancelled"], false),
        "CancelledNotificationParams" => plain::<CancelledNotificationParams>(text),
        "LoggingLevel" => plain::<LoggingLevel>(text),
        "LoggingMessageNotification" => notification(text, &["notifications/message"], false),
        "LoggingMessageNotificationParams" => plain::<LoggingMessageNotificationParams>(text),
        "ClientNotification" => notification(text, &["notifications/cancelled"], true),
        "ServerNotification" => notification(text, SERVER_NOTIFICATIONS, false),
        "ClientRequest" => request(text, CLIENT_REQUESTS),
        "PaginatedRequest" => request(
            text,
            &[
                "tools/list",
                "resources/list",
                "resources/templates/list",
                "prompts/list",
            ],
        ),

        // MRTR.
        "InputRequest" => plain::<InputRequest>(text),
        "InputRequests" => plain::<InputRequests>(text),
        "InputResponse" => plain::<InputResponse>(text),
        "InputResponses" => input_responses(text),
        "InputRequiredResult" => plain::<InputRequiredResult>(text),

        // Elicitation.
        "ElicitRequest" => plain::<ElicitRequest>(text),
        "ElicitRequestParams" => plain::<ElicitRequestParams>(text),
        "ElicitRequestFormParams" => plain::<ElicitRequestFormParams>(text),
        "ElicitRequestURLParams" => plain::<ElicitRequestUrlParams>(text),
        "ElicitResult" => plain::<ElicitResult>(text),
        "PrimitiveSchemaDefinition" => plain::<PrimitiveSchema>(text),
        "StringSchema" => plain::<StringSchema>(text),
        "NumberSchema" => plain::<NumberSchema>(text),
        "BooleanSchema" => plain::<BooleanSchema>(text),
        "UntitledSingleSelectEnumSchema" => plain::<UntitledSingleSelectEnumSchema>(text),
        "TitledSingleSelectEnumSchema" => plain::<TitledSingleSelectEnumSchema>(text),
        "LegacyTitledEnumSchema" => plain::<LegacyTitledEnumSchema>(text),
        "UntitledMultiSelectEnumSchema" => plain::<UntitledMultiSelectEnumSchema>(text),
        "TitledMultiSelectEnumSchema" => plain::<TitledMultiSelectEnumSchema>(text),
        "EnumSchema" => field(text, &["single", "multi", "legacy"]),
        "SingleSelectEnumSchema" => field(text, &["single", "legacy"]),
        "MultiSelectEnumSchema" => field(text, &["multi"]),

        // Sampling and roots.
        "CreateMessageRequest" => plain::<CreateMessageRequest>(text),
        "CreateMessageRequestParams" => plain::<CreateMessageRequestParams>(text),
        "CreateMessageResult" => plain::<CreateMessageResult>(text),
        "SamplingMessage" => plain::<SamplingMessage>(text),
        "SamplingMessageContentBlock" => plain::<SamplingContentBlock>(text),
        "ToolUseContent" => sampling_block(text, "tool_use"),
        "ToolResultContent" => sampling_block(text, "tool_result"),
        "ModelPreferences" => plain::<ModelPreferences>(text),
        "ModelHint" => plain::<ModelHint>(text),
        "ToolChoice" => plain::<ToolChoice>(text),
        "ListRootsRequest" => plain::<ListRootsRequest>(text),
        "ListRootsResult" => plain::<ListRootsResult>(text),
        "Root" => plain::<Root>(text),

        // The Tasks extension.
        "Task" => plain::<Task>(text),
        "TaskStatus" => plain::<TaskStatus>(text),
        "DetailedTask" => plain::<DetailedTask>(text),
        "WorkingTask" => task_with_status(text, TaskStatus::Working),
        "InputRequiredTask" => task_with_status(text, TaskStatus::InputRequired),
        "CompletedTask" => task_with_status(text, TaskStatus::Completed),
        "FailedTask" => task_with_status(text, TaskStatus::Failed),
        "CancelledTask" => task_with_status(text, TaskStatus::Cancelled),
        "CreateTaskResult" => plain::<CreateTaskResult>(text),
        "GetTaskRequest" => request(text, &["tasks/get"]),
        "GetTaskResult" => plain::<GetTaskResult>(text),
        "UpdateTaskRequest" => request(text, &["tasks/update"]),
        "CancelTaskRequest" => request(text, &["tasks/cancel"]),
        "TaskStatusNotification" => notification(text, &["notifications/tasks"], false),
        "TaskStatusNotificationParams" => plain::<TaskStatusNotificationParams>(text),
        "TasksExtensionCapability" => plain::<TasksExtensionCapability>(text),

        _ => return None,
    })
}
