//! What every server under test serves, and the exact requests the load
//! generator sends: one definition, so tern, rmcp and the floor answer the
//! same bytes.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The protocol revision every request names.
pub(crate) const VERSION: &str = "2026-07-28";

/// Length of the `data` argument of the `payload` tool: 1 KiB.
pub(crate) const ARG_LEN: usize = 1024;

/// Number of entries of the structured result of `payload`, sized so that its
/// JSON is about 4 KiB.
const ENTRIES: u32 = 32;

/// Arguments of `echo`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct EchoArgs {
    /// The text to send back.
    pub(crate) text: String,
}

/// Arguments of `payload`.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct PayloadArgs {
    /// 1 KiB of text.
    pub(crate) data: String,
}

/// Arguments of `confirm` (the MRTR tool).
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct ConfirmArgs {
    /// What is confirmed.
    pub(crate) item: String,
}

/// The one answer `confirm` asks for.
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct Confirmation {
    /// Go ahead
    pub(crate) ok: bool,
}

/// Arguments of `slow` (the progress-emitting tool of the memory test).
#[derive(Debug, Deserialize, JsonSchema)]
pub(crate) struct SlowArgs {
    /// How many seconds to run, one progress notification per second.
    pub(crate) seconds: u32,
}

/// One entry of the structured result.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct Entry {
    /// Position.
    pub(crate) id: u32,
    /// A name.
    pub(crate) name: String,
    /// A score.
    pub(crate) score: f64,
    /// Labels.
    pub(crate) tags: Vec<String>,
    /// Whether it is active.
    pub(crate) active: bool,
}

/// The structured result of `payload`: about 4 KiB of JSON.
#[derive(Debug, Clone, Serialize, JsonSchema)]
pub(crate) struct Report {
    /// Length of the argument received.
    pub(crate) received: usize,
    /// The entries.
    pub(crate) entries: Vec<Entry>,
}

/// The structured result for an argument of `received` bytes.
pub(crate) fn report(received: usize) -> Report {
    Report {
        received,
        entries: (0..ENTRIES)
            .map(|id| Entry {
                id,
                name: format!("entry-{id:04}-abcdefghijklmnopqrstuvwxyz-0123456789"),
                score: f64::from(id) * 1.25,
                tags: vec!["alpha".into(), "beta".into(), "gamma".into()],
                active: id % 2 == 0,
            })
            .collect(),
    }
}

/// The tool's text, mirroring the result (what tern and rmcp both send).
pub(crate) fn echo_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// The `params._meta` every request carries.
fn meta(progress: Option<u64>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    });
    if let Some(token) = progress {
        meta["progressToken"] = json!(token);
    }
    meta
}

/// A `tools/call` request body.
pub(crate) fn call(id: u64, tool: &str, arguments: &Value, progress: Option<u64>) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta(progress)},
    })
}

/// The arguments of the echo call.
pub(crate) fn echo_args() -> Value {
    json!({"text": "hello"})
}

/// The arguments of the payload call: 1 KiB of text.
pub(crate) fn payload_args() -> Value {
    let data: String = (0..ARG_LEN)
        .map(|i| char::from(b'a' + u8::try_from(i % 26).unwrap_or(0)))
        .collect();
    json!({"data": data})
}

/// The arguments of the MRTR call.
pub(crate) fn confirm_args() -> Value {
    json!({"item": "order-42"})
}

/// The retry of `confirm`, split around the `requestState` value (a base64url
/// string, so it needs no escaping): `prefix + state + suffix`.
pub(crate) fn confirm_retry_parts() -> (String, String) {
    let marker = "\u{1}STATE\u{1}";
    let mut body = call(2, "confirm", &confirm_args(), None);
    body["params"]["inputResponses"] =
        json!({"confirm": {"action": "accept", "content": {"ok": true}}});
    body["params"]["requestState"] = json!(marker);
    let text = body.to_string();
    let escaped = serde_json::to_string(marker).unwrap_or_default();
    let inner = escaped.trim_matches('"');
    match text.split_once(inner) {
        Some((prefix, suffix)) => (prefix.to_owned(), suffix.to_owned()),
        None => (text, String::new()),
    }
}

/// The text `confirm` answers once accepted.
pub(crate) fn confirmed(item: &str) -> String {
    format!("confirmed {item}")
}

/// The `requestState` of an `input_required` response body, if any.
pub(crate) fn request_state(body: &[u8]) -> Option<&str> {
    const KEY: &[u8] = b"\"requestState\":\"";
    let start = body.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = body[start..].iter().position(|&b| b == b'"')?;
    std::str::from_utf8(&body[start..start + len]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_is_about_4_kib_and_the_argument_1_kib() {
        let len = serde_json::to_string(&report(ARG_LEN)).unwrap().len();
        assert!((3800..=4400).contains(&len), "{len}");
        assert_eq!(
            payload_args()["data"].as_str().unwrap().len(),
            ARG_LEN,
            "1 KiB argument"
        );
    }

    #[test]
    fn the_retry_splits_around_the_state() {
        let (prefix, suffix) = confirm_retry_parts();
        let body: Value = serde_json::from_str(&format!("{prefix}abc_-1{suffix}")).unwrap();
        assert_eq!(body["params"]["requestState"], "abc_-1");
        assert_eq!(
            request_state(br#"{"result":{"requestState":"xyz","a":1}}"#),
            Some("xyz")
        );
    }
}
