//! Results and errors on the legacy wire follow the 2025 schema (spec §8.2):
//! the fields later revisions added are taken out, and the errors 2025 does
//! not know become ones it does.

use serde_json::Value;
use serde_json::value::RawValue;
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::meta::SERVER_INFO_KEY;
use tern_protocol::method;

use crate::call::Reply;
use crate::error::codes;

/// Result members 2025 does not have.
const MODERN_RESULT_FIELDS: &[&str] = &["resultType", "ttlMs", "cacheScope"];

/// `reply` to a legacy request of `method_name`, in the 2025 schema.
pub(crate) fn reply(method_name: &str, mut reply: Reply) -> Reply {
    reply.outcome = match reply.outcome {
        Ok(raw) => result(method_name, &raw),
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

fn result(method_name: &str, raw: &RawValue) -> Result<Box<RawValue>, ErrorObject> {
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
        // Tools carry no task execution hints: tasks are not offered on a
        // legacy session (they run inline).
        if method_name == method::TOOLS_LIST
            && let Some(Value::Array(tools)) = object.get_mut("tools")
        {
            for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
                tool.remove("execution");
            }
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
            let mut out = ErrorObject::new(
                codes::QUESTION_UNDELIVERABLE,
                format!(
                    "{} (this session's initialize did not declare it)",
                    error.message
                ),
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

/// `-32002`: resource not found (2025).
const RESOURCE_NOT_FOUND: i64 = -32002;
