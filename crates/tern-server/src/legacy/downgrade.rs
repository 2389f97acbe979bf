//! Results and errors on the legacy wire follow the 2025 schema of the
//! session's negotiated version (spec: Versioning and Compatibility, "as
//! specified by the negotiated legacy protocol version"): the fields later
//! revisions added are taken out, and the errors 2025 does not know become ones
//! it does.
//!
//! | negotiated | also taken out |
//! |---|---|
//! | every 2025 version | `resultType`, `ttlMs`, `cacheScope`, the `serverInfo` `_meta`, a tool's `execution` (no tasks on a legacy session) |
//! | 2025-06-18 and older | `icons`; `websiteUrl` and `description` of `serverInfo` (2025-11-25 added them) |
//! | 2025-03-26 | `title` (of tools, prompts, prompt arguments, resources, templates, `serverInfo`), `outputSchema`, `structuredContent`, `lastModified` of annotations; a `resource_link` content block becomes a text block naming the link (2025-06-18 added them all) |
//!
//! A tool with structured content also returns it serialised in a text
//! block (tern's `Json` result does), so a 2025-03-26 client loses nothing
//! but the typing.

use serde_json::Value;
use serde_json::value::RawValue;
use tern_protocol::Implementation;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::meta::SERVER_INFO_KEY;
use tern_protocol::method;

use crate::call::Reply;
use crate::error::codes;

/// Result members 2025 does not have.
const MODERN_RESULT_FIELDS: &[&str] = &["resultType", "ttlMs", "cacheScope"];

/// A 2025 schema, oldest first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Schema {
    /// 2025-03-26.
    V2025_03_26,
    /// 2025-06-18.
    V2025_06_18,
    /// 2025-11-25.
    V2025_11_25,
}

impl Schema {
    /// The schema of negotiated version `version` (one of
    /// `tern_protocol::legacy::VERSIONS`; anything else is the newest).
    pub(crate) fn of(version: &str) -> Self {
        match version {
            "2025-03-26" => Self::V2025_03_26,
            "2025-06-18" => Self::V2025_06_18,
            _ => Self::V2025_11_25,
        }
    }

    /// Takes out of `object` the members this schema lacks of those that
    /// `added` (the version that added them) introduced.
    fn strip(self, object: &mut serde_json::Map<String, Value>, added: Self, fields: &[&str]) {
        if self < added {
            for field in fields {
                object.remove(*field);
            }
        }
    }
}

/// `serverInfo` in `schema`.
pub(crate) fn implementation(schema: Schema, mut info: Implementation) -> Implementation {
    if schema < Schema::V2025_11_25 {
        info.icons = None;
        info.website_url = None;
        info.description = None;
    }
    if schema < Schema::V2025_06_18 {
        info.title = None;
    }
    info
}

/// A tool, prompt, resource or template descriptor in `schema`.
fn descriptor(schema: Schema, item: &mut Value) {
    let Value::Object(item) = item else { return };
    schema.strip(item, Schema::V2025_11_25, &["icons"]);
    schema.strip(item, Schema::V2025_06_18, &["title", "outputSchema"]);
    if let Some(Value::Array(arguments)) = item.get_mut("arguments") {
        for argument in arguments.iter_mut().filter_map(Value::as_object_mut) {
            schema.strip(argument, Schema::V2025_06_18, &["title"]);
        }
    }
    annotations(schema, item);
}

fn annotations(schema: Schema, item: &mut serde_json::Map<String, Value>) {
    if let Some(Value::Object(a)) = item.get_mut("annotations") {
        schema.strip(a, Schema::V2025_06_18, &["lastModified"]);
    }
}

/// A content block in `schema`: before 2025-06-18 a `resource_link` is a
/// text block naming the link.
fn content(schema: Schema, block: &mut Value) {
    let Value::Object(object) = block else { return };
    if schema < Schema::V2025_06_18
        && object.get("type").and_then(Value::as_str) == Some("resource_link")
    {
        let uri = object
            .get("uri")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = object
            .get("title")
            .or_else(|| object.get("name"))
            .and_then(Value::as_str)
            .unwrap_or(uri);
        let text = if name == uri {
            format!("Resource: {uri}")
        } else {
            format!("Resource: {name} ({uri})")
        };
        *block = serde_json::json!({"type": "text", "text": text});
        return;
    }
    schema.strip(object, Schema::V2025_11_25, &["icons"]);
    annotations(schema, object);
    if let Some(Value::Object(resource)) = object.get_mut("resource") {
        annotations(schema, resource);
    }
}

/// Each element of the array member `name` of `object`, through `f`.
fn each(object: &mut serde_json::Map<String, Value>, name: &str, mut f: impl FnMut(&mut Value)) {
    if let Some(Value::Array(items)) = object.get_mut(name) {
        items.iter_mut().for_each(&mut f);
    }
}

/// `reply` to a legacy request of `method_name`, in the schema of `version`.
pub(crate) fn reply(version: &str, method_name: &str, mut reply: Reply) -> Reply {
    let schema = Schema::of(version);
    reply.outcome = match reply.outcome {
        Ok(raw) => result(schema, method_name, &raw),
        Err(error) => Err(error_object(method_name, error)),
    };
    reply
}

/// The result is a tool result with `isError: true`.
pub(crate) fn is_error(raw: &RawValue) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        #[serde(rename = "isError", default)]
        is_error: bool,
    }
    serde_json::from_str::<Probe>(raw.get()).is_ok_and(|p| p.is_error)
}

fn result(schema: Schema, method_name: &str, raw: &RawValue) -> Result<Box<RawValue>, ErrorObject> {
    let mut value: Value = serde_json::from_str(raw.get())
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
    if let Value::Object(object) = &mut value {
        for field in MODERN_RESULT_FIELDS {
            object.remove(*field);
        }
        let empty_meta = object
            .get_mut("_meta")
            .and_then(Value::as_object_mut)
            .is_some_and(|meta| {
                meta.remove(SERVER_INFO_KEY);
                meta.is_empty()
            });
        if empty_meta {
            object.remove("_meta");
        }
        match method_name {
            method::TOOLS_LIST => each(object, "tools", |tool| {
                // No task execution hints: tasks are not offered on a
                // legacy session (they run inline).
                if let Value::Object(t) = tool {
                    t.remove("execution");
                }
                descriptor(schema, tool);
            }),
            method::PROMPTS_LIST => each(object, "prompts", |p| descriptor(schema, p)),
            method::RESOURCES_LIST => each(object, "resources", |r| descriptor(schema, r)),
            method::RESOURCES_TEMPLATES_LIST => {
                each(object, "resourceTemplates", |t| descriptor(schema, t));
            }
            method::TOOLS_CALL => {
                schema.strip(object, Schema::V2025_06_18, &["structuredContent"]);
                each(object, "content", |c| content(schema, c));
            }
            method::PROMPTS_GET => each(object, "messages", |m| {
                if let Some(c) = m.get_mut("content") {
                    content(schema, c);
                }
            }),
            _ => {}
        }
    }
    serde_json::value::to_raw_value(&value)
        .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))
}

fn error_object(method_name: &str, error: ErrorObject) -> ErrorObject {
    match error.code {
        // There is no -32021 in 2025: the session's `initialize` did not
        // declare what the question needs.
        code::MISSING_REQUIRED_CLIENT_CAPABILITY => {
            // A tool that runs only as a task: a 2025 session never has the
            // Tasks extension (the session drops `extensions`, whatever its
            // `initialize` declared), so its initialize is not to blame.
            let why = if needs_tasks(&error) {
                "it runs only as a task, and this server runs tasks on 2026-07-28 requests only, \
                 not on a 2025-11-25 session"
            } else {
                "this session's initialize did not declare it"
            };
            let mut out = ErrorObject::new(
                codes::QUESTION_UNDELIVERABLE,
                format!("{} ({why})", error.message),
            );
            if let Some(data) = error.data {
                out = out.with_data(data);
            }
            out
        }
        // 2025 names a missing resource -32002.
        code::INVALID_PARAMS
            if method_name == method::RESOURCES_READ && error.message == "Resource not found" =>
        {
            let mut out = ErrorObject::new(RESOURCE_NOT_FOUND, error.message);
            if let Some(data) = error.data {
                out = out.with_data(data);
            }
            out
        }
        _ => error,
    }
}

/// A `-32021` that asks for the Tasks extension.
fn needs_tasks(error: &ErrorObject) -> bool {
    error.missing_capability_data().is_some_and(|d| {
        d.required_capabilities
            .extension(tern_protocol::task::TASKS_EXTENSION)
    })
}

/// `-32002`: resource not found (2025).
const RESOURCE_NOT_FOUND: i64 = -32002;

#[cfg(test)]
mod tests {
    use tern_protocol::ClientCapabilities;

    use super::*;

    #[test]
    fn a_task_tool_on_a_2025_session_does_not_blame_the_initialize() {
        let tasks = ErrorObject::missing_capability(
            "Tool research needs the client capability extensions[\"io.modelcontextprotocol/tasks\"]",
            ClientCapabilities::default().with_extension(tern_protocol::task::TASKS_EXTENSION),
        );
        let out = error_object(method::TOOLS_CALL, tasks);
        assert_eq!(out.code, codes::QUESTION_UNDELIVERABLE);
        assert!(!out.message.contains("initialize"), "{}", out.message);
        assert!(
            out.message.contains("2026-07-28 requests only"),
            "{}",
            out.message
        );
        assert!(out.data.is_some(), "requiredCapabilities kept");
        // A question the initialize could have declared still says so.
        let form = ErrorObject::missing_capability(
            "needs elicitation",
            ClientCapabilities::default().with_elicitation_form(),
        );
        let out = error_object(method::TOOLS_CALL, form);
        assert!(
            out.message.contains("initialize did not declare it"),
            "{}",
            out.message
        );
    }
}
