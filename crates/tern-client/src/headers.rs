//! `x-mcp-header` on the client side (spec: Streamable HTTP › Custom Headers
//! from Tool Parameters): which tools carry valid annotations, and how argument
//! values become `Mcp-Param-*` headers.

use serde_json::Value;
use tern_protocol::JsonObject;

pub(crate) use tern_protocol::header::{HeaderParam, encode_value, header_params};

/// The `Mcp-Param-*` headers for `arguments`: nulls and absent values get
/// none; integers in decimal, booleans as `true`/`false`.
pub fn param_headers(
    params: &[HeaderParam],
    arguments: Option<&JsonObject>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for param in params {
        let mut path = param.path.iter();
        let mut value = path
            .next()
            .and_then(|first| arguments.and_then(|a| a.get(first)));
        for key in path {
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
    fn headers_mirror_present_values_only() {
        let schema = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}, "n": {"type": "integer", "x-mcp-header": "N"}}});
        let params = header_params(schema.as_object().unwrap()).unwrap();
        assert_eq!(
            param_headers(&params, json!({"region": "eu", "n": 3}).as_object()),
            [("Region".into(), "eu".into()), ("N".into(), "3".into())]
        );
        assert!(param_headers(&params, json!({"region": null}).as_object()).is_empty());
        assert_eq!(
            param_headers(&params, json!({"region": "日本"}).as_object())[0].1,
            "=?base64?5pel5pys?="
        );
    }
}
