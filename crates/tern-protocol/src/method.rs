//! Method names, as constants.

/// `server/discover`.
pub const DISCOVER: &str = "server/discover";
/// `tools/list`.
pub const TOOLS_LIST: &str = "tools/list";
/// `tools/call`.
pub const TOOLS_CALL: &str = "tools/call";
/// `resources/list`.
pub const RESOURCES_LIST: &str = "resources/list";
/// `resources/templates/list`.
pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
/// `resources/read`.
pub const RESOURCES_READ: &str = "resources/read";
/// `prompts/list`.
pub const PROMPTS_LIST: &str = "prompts/list";
/// `prompts/get`.
pub const PROMPTS_GET: &str = "prompts/get";
/// `completion/complete`.
pub const COMPLETION_COMPLETE: &str = "completion/complete";
/// `subscriptions/listen`.
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
/// `tasks/get` (Tasks extension).
pub const TASKS_GET: &str = "tasks/get";
/// `tasks/update` (Tasks extension).
pub const TASKS_UPDATE: &str = "tasks/update";
/// `tasks/cancel` (Tasks extension).
pub const TASKS_CANCEL: &str = "tasks/cancel";
/// `skills/list` (Skills extension).
pub const SKILLS_LIST: &str = "skills/list";
/// `skills/get` (Skills extension).
pub const SKILLS_GET: &str = "skills/get";
/// `resources/directory/read` (Skills extension, when the server declares
/// `directoryRead`).
pub const RESOURCES_DIRECTORY_READ: &str = "resources/directory/read";
/// `tasks/result` (2025-11-25 experimental tasks only: the result of a task,
/// blocking until it ends).
pub const TASKS_RESULT: &str = "tasks/result";
/// `initialize` (2025-11-25 only).
pub const INITIALIZE: &str = "initialize";
/// `ping` (2025-11-25 only).
pub const PING: &str = "ping";

/// `notifications/cancelled`.
pub const NOTIFICATION_CANCELLED: &str = "notifications/cancelled";
/// `notifications/progress`.
pub const NOTIFICATION_PROGRESS: &str = "notifications/progress";
/// `notifications/message` (deprecated logging).
pub const NOTIFICATION_MESSAGE: &str = "notifications/message";
/// `notifications/tools/list_changed`.
pub const NOTIFICATION_TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
/// `notifications/prompts/list_changed`.
pub const NOTIFICATION_PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
/// `notifications/resources/list_changed`.
pub const NOTIFICATION_RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
/// `notifications/resources/updated`.
pub const NOTIFICATION_RESOURCES_UPDATED: &str = "notifications/resources/updated";
/// `notifications/subscriptions/acknowledged`.
pub const NOTIFICATION_SUBSCRIPTIONS_ACKNOWLEDGED: &str =
    "notifications/subscriptions/acknowledged";
/// `notifications/tasks` (Tasks extension).
pub const NOTIFICATION_TASKS: &str = "notifications/tasks";
/// `notifications/initialized` (2025-11-25 only).
pub const NOTIFICATION_INITIALIZED: &str = "notifications/initialized";

/// Methods that 2026-07-28 removed; a modern server answers them with
/// `-32601` (spec: Key Changes; Deprecated Features › Removed).
pub const REMOVED: &[&str] = &[
    INITIALIZE,
    PING,
    "logging/setLevel",
    "resources/subscribe",
    "resources/unsubscribe",
    "tasks/result",
    "tasks/list",
];
