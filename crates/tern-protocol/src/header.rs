//! `x-mcp-header` (spec: Streamable HTTP › Custom Headers from Tool
//! Parameters): tool arguments mirrored into `Mcp-Param-*`
//! HTTP headers, the rules an annotation must follow, and the value encoding.
//! Server and client share these rules, so they agree on which tools are
//! valid.

use serde_json::Value;

use crate::json::JsonObject;

/// The JSON type of an argument mirrored into a header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderParamType {
    /// A string.
    String,
    /// An integer (within ±(2^53 − 1)).
    Integer,
    /// A boolean.
    Boolean,
}

/// A tool argument annotated `x-mcp-header`: its value also travels in the
/// `Mcp-Param-{name}` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// The header name after `Mcp-Param-`, as annotated.
    pub name: String,
    /// The property path from the arguments object.
    pub path: Vec<String>,
    /// The argument's type.
    pub kind: HeaderParamType,
}

/// An RFC 9110 token: no space, `:`, control or non-ASCII character.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn count_annotations(value: &Value) -> usize {
    match value {
        Value::Object(o) => {
            usize::from(o.contains_key("x-mcp-header"))
                + o.values().map(count_annotations).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_annotations).sum(),
        _ => 0,
    }
}

fn walk(schema: &JsonObject, path: &[String], out: &mut Vec<HeaderParam>) -> Result<(), String> {
    let Some(Value::Object(props)) = schema.get("properties") else {
        return Ok(());
    };
    for (name, prop) in props {
        let Value::Object(prop) = prop else { continue };
        let mut here = path.to_vec();
        here.push(name.clone());
        if let Some(header) = prop.get("x-mcp-header") {
            let header = header.as_str().filter(|h| is_token(h)).ok_or_else(|| {
                format!(
                    "x-mcp-header of `{}` must be a non-empty header token",
                    here.join(".")
                )
            })?;
            let kind = match prop.get("type").and_then(Value::as_str) {
                Some("string") => HeaderParamType::String,
                Some("integer") => HeaderParamType::Integer,
                Some("boolean") => HeaderParamType::Boolean,
                _ => {
                    return Err(format!(
                        "x-mcp-header `{header}` must annotate a string, integer or boolean property"
                    ));
                }
            };
            if out.iter().any(|p| p.name.eq_ignore_ascii_case(header)) {
                return Err(format!("x-mcp-header `{header}` is used twice"));
            }
            out.push(HeaderParam {
                name: header.to_owned(),
                path: here.clone(),
                kind,
            });
        }
        walk(prop, &here, out)?;
    }
    Ok(())
}

/// The `x-mcp-header` arguments of an `inputSchema`, or why its annotations
/// are invalid: empty, not a header token, duplicated (case-insensitively),
/// on a non-primitive property, or reached other than through `properties`
/// alone. A server must not advertise such a tool; a client drops it.
pub fn header_params(schema: &JsonObject) -> Result<Vec<HeaderParam>, String> {
    let mut out = Vec::new();
    walk(schema, &[], &mut out)?;
    if count_annotations(&Value::Object(schema.clone())) != out.len() {
        return Err(
            "x-mcp-header may only annotate properties reached through `properties` alone".into(),
        );
    }
    Ok(out)
}

/// A header value as the spec encodes it: plain visible ASCII as is; anything
/// else (non-ASCII, controls, surrounding whitespace, or text that looks
/// encoded) as `=?base64?…?=`.
pub fn encode_value(text: &str) -> String {
    use base64::Engine as _;
    let looks_encoded = text.starts_with("=?base64?") && text.ends_with("?=");
    let padded = text.starts_with(' ') || text.ends_with(' ');
    if text.bytes().all(|b| (0x20..0x7f).contains(&b)) && !padded && !looks_encoded {
        text.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text)
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(v: &Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn finds_header_params_through_properties_only() {
        let s = schema(&json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}},
        }}));
        let found = header_params(&s).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(
            found[0],
            HeaderParam {
                name: "Region".into(),
                path: vec!["region".into()],
                kind: HeaderParamType::String
            }
        );
        assert_eq!(found[1].path, ["opts", "dry"]);
        assert_eq!(found[1].kind, HeaderParamType::Boolean);
        for bad in [
            json!({"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "bad header"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A:B"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Ä"}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"type": "object", "oneOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
        ] {
            assert!(header_params(&schema(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn values_are_encoded_as_the_spec_says() {
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(encode_value("two words"), "two words");
        assert_eq!(encode_value(""), "");
        assert_eq!(encode_value(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode_value("padded "), "=?base64?cGFkZGVkIA==?=");
        assert_eq!(encode_value("日本"), "=?base64?5pel5pys?=");
        assert_eq!(encode_value("tab\there"), "=?base64?dGFiCWhlcmU=?=");
        assert_eq!(
            encode_value("=?base64?abc?="),
            "=?base64?PT9iYXNlNjQ/YWJjPz0=?="
        );
    }
}
