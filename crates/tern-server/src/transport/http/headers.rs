//! The 2026-07-28 route's header stage: `Accept`, `Content-Type`, and the
//! `MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`
//! headers checked against the decoded body (`-32020`). A 2025-11-25
//! request carries none of them and never reaches it.

use base64::Engine as _;
use http::{HeaderMap, HeaderValue};
use serde_json::Value;
use tern_protocol::error::ErrorObject;
use tern_protocol::header::HeaderParam;
use tern_protocol::{ClientRequest, JsonObject};

use crate::dispatch::DecodedRequest;
use crate::registry::HeaderParamType;

use super::Http;

/// Whether the values of header `name` list every media type of `wanted`
/// (parameters and case aside), in one pass over them.
pub(super) fn header_lists<const N: usize>(
    headers: &HeaderMap,
    name: http::HeaderName,
    wanted: [&str; N],
) -> bool {
    let mut seen = [false; N];
    for item in headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
    {
        let media = item.split(';').next().unwrap_or_default().trim();
        for (seen, wanted) in seen.iter_mut().zip(wanted) {
            *seen |= media.eq_ignore_ascii_case(wanted);
        }
    }
    seen.iter().all(|s| *s)
}

/// A header value as the spec encodes it: plain visible ASCII, or
/// `=?base64?…?=` for anything else. Surrounding whitespace is tolerated.
pub(super) fn decode_header(
    value: &HeaderValue,
) -> Result<std::borrow::Cow<'_, str>, &'static str> {
    let text = value.to_str().map_err(|_| "has invalid characters")?.trim();
    if let Some(inner) = text
        .strip_prefix("=?base64?")
        .and_then(|t| t.strip_suffix("?="))
    {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(inner)
            .map_err(|_| "has invalid base64")?;
        return String::from_utf8(bytes)
            .map(std::borrow::Cow::Owned)
            .map_err(|_| "is not UTF-8");
    }
    if text.bytes().any(|b| !(0x20..0x7f).contains(&b)) {
        return Err("has invalid characters");
    }
    Ok(std::borrow::Cow::Borrowed(text))
}

pub(super) fn mismatch(message: String) -> ErrorObject {
    ErrorObject::header_mismatch(message)
}

/// The one value of header `name`: sent twice it is refused, so a gateway
/// that reads the first and a server that reads the last cannot disagree.
pub(super) fn single<'a>(
    headers: &'a HeaderMap,
    name: &str,
) -> Result<Option<&'a HeaderValue>, ErrorObject> {
    let mut values = headers.get_all(name).iter();
    let first = values.next();
    if values.next().is_some() {
        return Err(mismatch(format!("{name} header sent more than once")));
    }
    Ok(first)
}

/// Checks one header against the body value (after decoding).
pub(super) fn check_named(
    headers: &HeaderMap,
    name: &str,
    body: Option<&str>,
) -> Result<(), ErrorObject> {
    match (single(headers, name)?, body) {
        (None, None) => Ok(()),
        (None, Some(_)) => Err(mismatch(format!("Missing {name} header"))),
        (Some(value), body) => {
            let decoded =
                decode_header(value).map_err(|why| mismatch(format!("{name} header {why}")))?;
            match body {
                Some(body) if body == decoded => Ok(()),
                Some(body) => Err(mismatch(format!(
                    "Header mismatch: {name} header value '{}' does not match body value '{}'",
                    crate::error::short(&decoded),
                    crate::error::short(body)
                ))),
                None => Err(mismatch(format!(
                    "{name} header sent but the body has no such value"
                ))),
            }
        }
    }
}

impl Http {
    /// The header checks that need no decoded body (spec: Streamable HTTP ›
    /// Server Validation; the official conformance suite expects them before
    /// the version is checked): `MCP-Protocol-Version` present
    /// and well formed, `Mcp-Method` matching the envelope.
    pub(super) fn check_envelope_headers<'h>(
        headers: &'h HeaderMap,
        method_name: &str,
    ) -> Result<std::borrow::Cow<'h, str>, ErrorObject> {
        let version = single(headers, "mcp-protocol-version")?
            .ok_or_else(|| mismatch("Missing MCP-Protocol-Version header".into()))?;
        let version = decode_header(version)
            .map_err(|why| mismatch(format!("MCP-Protocol-Version header {why}")))?;
        check_named(headers, "mcp-method", Some(method_name))?;
        Ok(version)
    }

    /// The header checks against the decoded body: the version, `Mcp-Name`
    /// and `Mcp-Param-*` — read from the same strict decode the dispatcher
    /// serves, so no header can be checked against one reading of the body
    /// and served from another.
    pub(super) fn check_headers(
        headers: &HeaderMap,
        version: &str,
        decoded: &DecodedRequest,
    ) -> Result<(), ErrorObject> {
        let request = decoded.request();
        if let Some(meta) = request.meta()
            && meta.protocol_version != version
        {
            return Err(mismatch(format!(
                "Header mismatch: MCP-Protocol-Version header value '{}' does not match body value '{}'",
                crate::error::short(version),
                crate::error::short(&meta.protocol_version)
            )));
        }
        let name = match request {
            ClientRequest::CallTool(p) => Some(p.name.as_str()),
            ClientRequest::GetPrompt(p) => Some(p.name.as_str()),
            ClientRequest::ReadResource(p) => Some(p.uri.as_str()),
            ClientRequest::GetTask(p) | ClientRequest::CancelTask(p) => Some(p.task_id.as_str()),
            ClientRequest::UpdateTask(p) => Some(p.task_id.as_str()),
            _ => None,
        };
        if let Some(name) = name {
            check_named(headers, "mcp-name", Some(name))?;
        }
        if let ClientRequest::CallTool(p) = request {
            if let Some(entry) = decoded.registry().tools.get(&p.name) {
                check_param_headers(headers, &entry.header_params, p.arguments.as_ref())?;
            } else if let Some(params) = decoded
                .registry()
                .relay
                .as_ref()
                .and_then(|r| r.header_params(&p.name))
            {
                // A relayed tool's annotations, as its upstream listed them.
                check_param_headers(headers, &params, p.arguments.as_ref())?;
            }
        }
        Ok(())
    }
}

/// `Mcp-Param-*` for the tool's `x-mcp-header` arguments.
pub(super) fn check_param_headers(
    headers: &HeaderMap,
    params: &[HeaderParam],
    arguments: Option<&JsonObject>,
) -> Result<(), ErrorObject> {
    for param in params {
        let mut path = param.path.iter();
        let mut value = path.next().and_then(|first| arguments?.get(first));
        for key in path {
            value = value.and_then(|v| v.get(key));
        }
        let header_name = format!("mcp-param-{}", param.name.to_ascii_lowercase());
        let header = single(headers, header_name.as_str())?;
        let display = format!("Mcp-Param-{}", param.name);
        let Some(value) = value.filter(|v| !v.is_null()) else {
            continue;
        };
        let Some(header) = header else {
            return Err(mismatch(format!("Missing {display} header")));
        };
        let decoded =
            decode_header(header).map_err(|why| mismatch(format!("{display} header {why}")))?;
        let matches = match (param.kind, value) {
            (HeaderParamType::String, Value::String(s)) => *s == decoded,
            (HeaderParamType::Integer, Value::Number(n)) => decoded
                .parse::<i64>()
                .ok()
                .is_some_and(|h| n.as_i64() == Some(h)),
            (HeaderParamType::Boolean, Value::Bool(b)) => {
                decoded == if *b { "true" } else { "false" }
            }
            // A value of the wrong type is the arguments' problem: the tool
            // reports it (isError).
            _ => true,
        };
        if !matches {
            return Err(mismatch(format!(
                "Header mismatch: {display} header value '{}' does not match the argument",
                crate::error::short(&decoded)
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_decode_as_the_spec_says() {
        let v = |s: &str| HeaderValue::from_str(s).unwrap();
        assert_eq!(decode_header(&v("us-west1")).unwrap(), "us-west1");
        assert_eq!(decode_header(&v("  padded  ")).unwrap(), "padded");
        assert_eq!(decode_header(&v("=?base64?w6lsw6hu?=")).unwrap(), "élèn");
        assert!(decode_header(&v("=?base64?!!!?=")).is_err());
        assert!(decode_header(&HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap()).is_err());
    }
}
