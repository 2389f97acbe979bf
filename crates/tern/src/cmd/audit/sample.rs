//! Values the audit makes up: a tool's arguments from its `inputSchema`, one
//! of them changed, and answers that fit (or deliberately do not fit) each
//! kind of question.

use serde_json::{Map, Value, json};

/// Arguments for a tool: every required property of `schema`, each the
/// first value its schema allows (`const`, `enum`, `oneOf` consts, the
/// `default`, else a plain value of its type).
pub(crate) fn arguments(schema: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    let props = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for name in required.iter().filter_map(Value::as_str) {
        let prop = props.and_then(|p| p.get(name)).unwrap_or(&Value::Null);
        out.insert(name.to_string(), value_for(prop));
    }
    out
}

/// A value `schema` accepts, as far as a flat schema says.
pub(crate) fn value_for(schema: &Value) -> Value {
    if let Some(c) = schema.get("const") {
        return c.clone();
    }
    if let Some(first) = schema
        .get("enum")
        .and_then(Value::as_array)
        .and_then(|e| e.first())
    {
        return first.clone();
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(first) = schema
            .get(key)
            .and_then(Value::as_array)
            .and_then(|a| a.first())
        {
            return value_for(first);
        }
    }
    if let Some(d) = schema.get("default") {
        return d.clone();
    }
    let kind = match schema.get("type") {
        Some(Value::Array(kinds)) => kinds
            .iter()
            .filter_map(Value::as_str)
            .find(|k| *k != "null")
            .unwrap_or("string"),
        Some(Value::String(k)) => k.as_str(),
        _ => "string",
    };
    match kind {
        "integer" | "number" => {
            let min = schema.get("minimum").and_then(Value::as_i64).unwrap_or(1);
            json!(min.max(1))
        }
        "boolean" => json!(true),
        "array" => json!([]),
        "object" => Value::Object(arguments(schema)),
        _ => match schema.get("format").and_then(Value::as_str) {
            Some("date-time") => json!("2030-01-01T09:00:00Z"),
            Some("date") => json!("2030-01-01"),
            Some("email") => json!("audit@example.com"),
            Some("uri") => json!("https://example.com/"),
            _ => json!("tern-audit"),
        },
    }
}

/// `args` with one argument changed to another value of the same type, or
/// `None` when there is nothing to change.
pub(crate) fn changed(args: &Map<String, Value>, schema: &Value) -> Option<Map<String, Value>> {
    let (name, value) = args.iter().next()?;
    let prop = schema
        .get("properties")
        .and_then(|p| p.get(name))
        .unwrap_or(&Value::Null);
    let alternatives: Vec<Value> = prop
        .get("enum")
        .and_then(Value::as_array)
        .cloned()
        .or_else(|| {
            prop.get("oneOf")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(|v| v.get("const").cloned()).collect())
        })
        .unwrap_or_default();
    let other = if let Some(v) = alternatives.iter().find(|v| *v != value) {
        v.clone()
    } else if !alternatives.is_empty() {
        return None;
    } else {
        match value {
            Value::String(s) => json!(format!("{s}-other")),
            Value::Number(n) => json!(n.as_i64().unwrap_or(1) + 1),
            Value::Bool(b) => json!(!b),
            Value::Array(a) if a.is_empty() => return None,
            Value::Array(a) => json!(&a[..a.len() - 1]),
            _ => return None,
        }
    };
    let mut out = args.clone();
    out.insert(name.clone(), other);
    Some(out)
}

/// The kind of an input request: its method, and for elicitation its mode.
pub(crate) fn kind(request: &Value) -> (&str, &str) {
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    let mode = request
        .pointer("/params/mode")
        .and_then(Value::as_str)
        .unwrap_or(if method == "elicitation/create" {
            "form"
        } else {
            ""
        });
    (method, mode)
}

/// An answer that fits `request` (an accepted form filled with the first
/// allowed values, URL consent, a sampling reply, no roots).
pub(crate) fn answer(request: &Value) -> Value {
    match kind(request) {
        ("elicitation/create", "url") => json!({"action": "accept"}),
        ("elicitation/create", _) => {
            let schema = request
                .pointer("/params/requestedSchema")
                .unwrap_or(&Value::Null);
            let mut content = Map::new();
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, prop) in props {
                    content.insert(name.clone(), value_for(prop));
                }
            }
            json!({"action": "accept", "content": content})
        }
        ("sampling/createMessage", _) => json!({
            "role": "assistant",
            "content": {"type": "text", "text": "tern audit"},
            "model": "tern-audit"
        }),
        ("roots/list", _) => json!({"roots": []}),
        _ => json!({}),
    }
}

/// An answer of the wrong shape for `request`: not an `ElicitResult`,
/// `CreateMessageResult` or `ListRootsResult` at all.
pub(crate) fn wrong_shape(request: &Value) -> Value {
    match kind(request) {
        ("elicitation/create", _) => json!({"action": "accept", "content": "not an object"}),
        ("sampling/createMessage", _) => json!({"role": 7, "content": "not a block"}),
        ("roots/list", _) => json!({"roots": "not a list"}),
        _ => json!("not an object"),
    }
}

/// An answer well formed for its kind but made for another question: a form
/// whose fields are none of those asked (the required ones missing), a
/// sampling reply with no content.
pub(crate) fn other_question(request: &Value) -> Value {
    match kind(request) {
        ("elicitation/create", "url") => {
            json!({"action": "accept", "content": {"tern_audit_other": "x"}})
        }
        ("elicitation/create", _) => {
            json!({"action": "accept", "content": {"tern_audit_other_field": "x"}})
        }
        ("sampling/createMessage", _) => json!({"role": "assistant", "model": "tern-audit"}),
        ("roots/list", _) => json!({"roots": [{"uri": "not-a-file-uri"}]}),
        _ => json!({}),
    }
}

/// The client capabilities that declare everything a question may need.
pub(crate) fn all_capabilities() -> Value {
    json!({
        "elicitation": {"form": {}, "url": {}},
        "sampling": {"tools": {}, "context": {}},
        "roots": {}
    })
}

/// Capabilities that leave out what `request` needs while declaring the
/// rest (for elicitation: the other mode), or `None` when the only way to
/// leave it out is to declare nothing.
pub(crate) fn without(request: &Value) -> Option<Value> {
    match kind(request) {
        ("elicitation/create", "url") => Some(json!({"elicitation": {"form": {}}})),
        ("elicitation/create", _) => Some(json!({"elicitation": {"url": {}}})),
        ("sampling/createMessage", _) => {
            Some(json!({"elicitation": {"form": {}, "url": {}}, "roots": {}}))
        }
        ("roots/list", _) => Some(json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}})),
        _ => None,
    }
}

/// Whether `request` may be asked of a client that declared `caps` (rule
/// `ask-declared-only`).
pub(crate) fn allowed(request: &Value, caps: &Value) -> bool {
    match kind(request) {
        ("elicitation/create", mode) => match caps.get("elicitation") {
            None => false,
            Some(e) => {
                let declared_modes = e.get("form").is_some() || e.get("url").is_some();
                if mode == "url" {
                    e.get("url").is_some()
                } else {
                    // `elicitation: {}` means form only.
                    e.get("form").is_some() || !declared_modes
                }
            }
        },
        ("sampling/createMessage", _) => caps.get("sampling").is_some(),
        ("roots/list", _) => caps.get("roots").is_some(),
        _ => false,
    }
}
