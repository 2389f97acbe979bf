//! The Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663): work that
//! outlives a request. Only the server creates tasks, only for `tools/call`,
//! and only for a request that declared the extension.
//!
//! Every task request carries the core `_meta` as well (the core requires it
//! on every request, Base Protocol overview › General fields › `_meta`): the
//! extension's own shapes show only `taskId`, but `-32021` for a client that
//! did not declare the extension is checkable only through it.

use serde::{Deserialize, Deserializer, Serialize};

use crate::error::ErrorObject;
use crate::json::JsonObject;
use crate::meta::{NotificationMeta, RequestMeta, ResultMeta};
use crate::mrtr::{InputRequests, InputResponses};
use crate::tag::{CompleteTag, TaskTag};
use crate::tool::CallToolResult;

/// The extension id, under `capabilities.extensions` on both sides.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// Where a task is. `completed`, `failed` and `cancelled` are terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running.
    Working,
    /// Waiting for answers to its `inputRequests` (via `tasks/update`).
    InputRequired,
    /// Done; `result` holds the request's result.
    Completed,
    /// Ended with a JSON-RPC error.
    Failed,
    /// Cancelled.
    Cancelled,
}

impl TaskStatus {
    /// No further transition can happen.
    pub fn is_terminal(self) -> bool {
        matches!(self, Self::Completed | Self::Failed | Self::Cancelled)
    }
}

/// Reads a member that must be present but may be `null`.
fn nullable<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    Option::<i64>::deserialize(d)
}

/// A task (`Task`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    /// Unguessable id.
    pub task_id: String,
    /// Status.
    pub status: TaskStatus,
    /// A human-readable status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_message: Option<String>,
    /// Creation time, ISO 8601.
    pub created_at: String,
    /// Last change, ISO 8601.
    pub last_updated_at: String,
    /// Lifetime from creation in ms; `null` for unlimited. Always written.
    #[serde(deserialize_with = "nullable")]
    pub ttl_ms: Option<i64>,
    /// How often to poll, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub poll_interval_ms: Option<i64>,
}

/// A task with what its status calls for (`DetailedTask`): `inputRequests`
/// when `input_required`, `result` when `completed`, `error` when `failed`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", try_from = "DetailedTaskWire")]
pub struct DetailedTask {
    /// The task.
    #[serde(flatten)]
    pub task: Task,
    /// Every outstanding question (status `input_required`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// The original request's result (status `completed`), e.g. a
    /// `CallToolResult`, `isError: true` ones included.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JsonObject>,
    /// The JSON-RPC error (status `failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorObject>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DetailedTaskWire {
    #[serde(flatten)]
    task: Task,
    #[serde(default)]
    input_requests: Option<InputRequests>,
    #[serde(default)]
    result: Option<JsonObject>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

impl TryFrom<DetailedTaskWire> for DetailedTask {
    type Error = String;

    fn try_from(w: DetailedTaskWire) -> Result<Self, String> {
        let missing = match w.task.status {
            TaskStatus::InputRequired if w.input_requests.is_none() => Some("inputRequests"),
            TaskStatus::Completed if w.result.is_none() => Some("result"),
            TaskStatus::Failed if w.error.is_none() => Some("error"),
            _ => None,
        };
        if let Some(field) = missing {
            return Err(format!("a {:?} task needs {field}", w.task.status));
        }
        Ok(Self {
            task: w.task,
            input_requests: w.input_requests,
            result: w.result,
            error: w.error,
        })
    }
}

impl DetailedTask {
    /// The completed result, decoded as a `CallToolResult`.
    pub fn call_tool_result(&self) -> Option<Result<CallToolResult, serde_json::Error>> {
        self.result.as_ref().map(CallToolResult::deserialize)
    }
}

/// The result that hands back a task instead of the normal result
/// (`CreateTaskResult`, `resultType: "task"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateTaskResult {
    /// Always `task`.
    pub result_type: TaskTag,
    /// The task, created durably before this is sent.
    #[serde(flatten)]
    pub task: Task,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// The result of `tasks/get` (`GetTaskResult`, `resultType: "complete"`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetTaskResult {
    /// Always `complete` (the normative text, Tasks extension › Task Polling ›
    /// Response; some of the extension's examples show `task`).
    #[serde(default)]
    pub result_type: CompleteTag,
    /// The task and what its status calls for.
    #[serde(flatten)]
    pub task: DetailedTask,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// Params of `tasks/get` and `tasks/cancel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskRequestParams {
    /// The task.
    pub task_id: String,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// Params of `tasks/update`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpdateTaskRequestParams {
    /// The task.
    pub task_id: String,
    /// Answers, keyed like the task's `inputRequests`.
    pub input_responses: InputResponses,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// Params of `notifications/tasks`: the full task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskStatusNotificationParams {
    /// The task.
    #[serde(flatten)]
    pub task: DetailedTask,
    /// `_meta` (carries the subscription id).
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<NotificationMeta>,
}

/// The extension's settings object, which has no members yet
/// (`TasksExtensionCapability`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TasksExtensionCapability {}

impl Task {
    /// A task created at `created_at` (ISO 8601), in `status`.
    pub fn new(
        task_id: impl Into<String>,
        status: TaskStatus,
        created_at: impl Into<String>,
        ttl_ms: Option<i64>,
    ) -> Self {
        let created_at = created_at.into();
        Self {
            task_id: task_id.into(),
            status,
            status_message: None,
            last_updated_at: created_at.clone(),
            created_at,
            ttl_ms,
            poll_interval_ms: None,
        }
    }
}

impl CreateTaskResult {
    /// The result handing back `task`.
    pub fn new(task: Task) -> Self {
        Self {
            result_type: TaskTag,
            task,
            meta: None,
        }
    }
}

impl GetTaskResult {
    /// The result of `tasks/get` for `task`.
    pub fn new(task: DetailedTask) -> Self {
        Self {
            result_type: CompleteTag,
            task,
            meta: None,
        }
    }
}
