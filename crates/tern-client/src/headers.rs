//! `x-mcp-header` on the client side (spec §6.2): which tools carry valid
//! annotations, and how argument values become `Mcp-Param-*` headers.

use base64::Engine as _;
use serde_json::Value;
use tern_protocol::JsonObject;

/// An argument mirrored into a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeaderParam {
    pub(crate) name: String,
    pub(crate) path: Vec<String>,
}

/// An RFC 9110 token with no control, space, `:` or non-ASCII character.
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

/// The header params of a tool's `inputSchema`, or why its annotations are
/// invalid (such a tool is dropped from the list view).
pub(crate) fn header_params(schema: &JsonObject) -> Result<Vec<HeaderParam>, String> {
    fn walk(
        schema: &JsonObject,
        path: &[String],
        out: &mut Vec<HeaderParam>,
    ) -> Result<(), String> {
        let Some(Value::Object(props)) = schema.get("properties") else {
            return Ok(());
        };
        for (name, prop) in props {
            let Value::Object(prop) = prop else { continue };
            let mut here = path.to_vec();
            here.push(name.clone());
            if let Some(header) = prop.get("x-mcp-header") {
                let header = header.as_str().filter(|h| is_token(h)).ok_or_else(|| {
                    format!("x-mcp-header of `{name}` is not a valid header name")
                })?;
                if !matches!(
                    prop.get("type").and_then(Value::as_str),
                    Some("string" | "integer" | "boolean")
                ) {
                    return Err(format!(
                        "x-mcp-header `{header}` is on a property that is not a string, integer or boolean"
                    ));
                }
                if out.iter().any(|p| p.name.eq_ignore_ascii_case(header)) {
                    return Err(format!("x-mcp-header `{header}` is used twice"));
                }
                out.push(HeaderParam {
                    name: header.to_owned(),
                    path: here.clone(),
                });
            }
            walk(prop, &here, out)?;
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(schema, &[], &mut out)?;
    if count_annotations(&Value::Object(schema.clone())) != out.len() {
        return Err(
            "x-mcp-header is only allowed on properties reached through `properties`".into(),
        );
    }
    Ok(out)
}

/// A header value as the spec encodes it: plain visible ASCII as is, anything
/// else (non-ASCII, controls, surrounding whitespace, or text that looks
/// encoded) as `=?base64?…?=`.
pub(crate) fn encode_value(text: &str) -> String {
    let looks_encoded = text.starts_with("=?base64?") && text.ends_with("?=");
    let padded = text.starts_with(' ') || text.ends_with(' ');
    let plain = text.bytes().all(|b| (0x20..0x7f).contains(&b)) && !padded && !looks_encoded;
    if plain {
        text.to_owned()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        )
    }
}

/// The `Mcp-Param-*` headers for `arguments`: nulls and absent values get
/// none; integers in decimal, booleans as `true`/`false`.
pub(crate) fn param_headers(
    params: &[HeaderParam],
    arguments: Option<&Value>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for param in params {
        let mut value = arguments;
        for key in &param.path {
            value = value.and_then(|v| v.get(key));
        }
        let text = match value {
            None | Some(Value::Null) => continue,
            Some(Value::String(s)) => encode_value(s),
            Some(Value::Bool(b)) => b.to_string(),
            Some(Value::Number(n)) => n.to_string(),
            Some(other) => encode_value(&other.to_string()),
        };
        out.push((param.name.clone(), text));
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn values_are_encoded_as_the_spec_says() {
        assert_eq!(encode_value("us-west1"), "us-west1");
        assert_eq!(encode_value("two words"), "two words");
        assert_eq!(encode_value(""), "");
        assert_eq!(encode_value(" padded"), "=?base64?IHBhZGRlZA==?=");
        assert_eq!(encode_value("日本"), "=?base64?5pel5pys?=");
        assert_eq!(encode_value("tab\there"), "=?base64?dGFiCWhlcmU=?=");
        assert_eq!(
            encode_value("=?base64?abc?="),
            "=?base64?PT9iYXNlNjQ/YWJjPz0=?="
        );
    }

    #[test]
    fn invalid_annotations_are_refused() {
        let ok = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "n": {"type": "integer", "x-mcp-header": "N"}}});
        let params = header_params(ok.as_object().unwrap()).unwrap();
        assert_eq!(
            param_headers(&params, Some(&json!({"region": "eu", "n": 3}))),
            [("Region".into(), "eu".into()), ("N".into(), "3".into())]
        );
        assert!(param_headers(&params, Some(&json!({"region": null}))).is_empty());
        for bad in [
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"type": "object", "properties": {"a": {"type": "object", "x-mcp-header": "A"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A B"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A:B"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "Ä"}}}),
        ] {
            assert!(header_params(bad.as_object().unwrap()).is_err(), "{bad}");
        }
    }
}
