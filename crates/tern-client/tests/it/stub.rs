//! A hand-written server answering fixed JSON, for what a tern server never
//! sends: a result without `resultType`, an unknown `resultType`, a
//! `requestState` no sealing codec would produce, a round without state, and
//! questions of a kind the client cannot answer, a key asked again with
//! another question, a list that never ends and a result too large to read.
//! It checks what the retry carries and says so in the result's text.

use serde_json::{Value, json};

/// A state a client could be tempted to normalise: surrounding and inner
/// whitespace, base64 and JSON look-alikes, escapes, non-ASCII, a line
/// separator and a newline.
pub const ODD_STATE: &str =
    "  ~st8/with+odd=chars= {\"not\":\"parsed\"} \\\"q\\\" \u{e9}\u{1F600}\u{2028}\t\n ";

fn text(t: &str) -> Value {
    json!({"resultType": "complete", "content": [{"type": "text", "text": t}]})
}

fn name_question() -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": "Name?",
            "requestedSchema": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"]
            }
        }
    })
}

fn confirm_question(message: &str) -> Value {
    json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": {"ok": {"type": "boolean"}},
                "required": ["ok"]
            }
        }
    })
}

/// How many bytes of text the `big` tool returns.
pub const BIG: usize = 64 << 10;

/// The action of the answer under `key`, or "none".
fn action(params: &Value, key: &str) -> String {
    params["inputResponses"][key]["action"]
        .as_str()
        .unwrap_or("none")
        .to_owned()
}

/// The reply to one message; `None` for notifications.
pub fn reply(message: &Value) -> Option<Value> {
    let id = message.get("id")?.clone();
    let params = &message["params"];
    let tool = params["name"].as_str().unwrap_or_default();
    let answered = params.get("inputResponses").is_some();
    let state = params.get("requestState");
    let result = match (message["method"].as_str(), tool) {
        (Some("tools/call"), "implicit_complete") => {
            json!({"content": [{"type": "text", "text": "no resultType"}]})
        }
        (Some("tools/call"), "unknown_result_type") => {
            json!({"resultType": "partial", "content": [{"type": "text", "text": "?"}]})
        }
        (Some("tools/call"), "odd_state") => match state {
            None => json!({
                "resultType": "input_required",
                "inputRequests": {"name": name_question()},
                "requestState": ODD_STATE,
            }),
            Some(Value::String(s)) if s == ODD_STATE && answered => text("echoed"),
            Some(other) => text(&format!("changed: {other}")),
        },
        (Some("tools/call"), "stateless") => match (state, answered) {
            (None, false) => json!({
                "resultType": "input_required",
                "inputRequests": {"name": name_question()},
            }),
            (None, true) => text("no state"),
            (Some(s), _) => text(&format!("state invented: {s}")),
        },
        (Some("tools/call"), "asks_sampling") if !answered => json!({
                "resultType": "input_required",
                "inputRequests": {"llm": {"method": "sampling/createMessage", "params": {
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Hi?"}}],
                    "maxTokens": 10
                }}},
            "requestState": "s",
        }),
        (Some("tools/call"), "asks_sampling") => text("an answer was invented"),
        // The same key asked twice, with two different questions: a client
        // must not answer the second with the first one's answer. The state
        // carries the first answer along.
        (Some("tools/call"), "reasks") => match state.and_then(Value::as_str) {
            None => json!({
                "resultType": "input_required",
                "inputRequests": {"confirm": confirm_question("Delete the orders?")},
                "requestState": "asked-orders",
            }),
            Some("asked-orders") => json!({
                "resultType": "input_required",
                "inputRequests": {"confirm": confirm_question("Delete the backups too?")},
                "requestState": format!("orders-{}", action(params, "confirm")),
            }),
            Some(orders) => text(&format!("{orders}, backups-{}", action(params, "confirm"))),
        },
        // A result larger than a small response limit.
        (Some("tools/call"), "big") => text(&"x".repeat(BIG)),
        // Pages of three tools that always name a next page.
        (Some("tools/list"), _) => {
            let page: u64 = params["cursor"]
                .as_str()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let tools: Vec<Value> = (0..3)
                .map(|i| json!({"name": format!("t{page}_{i}"), "inputSchema": {"type": "object"}}))
                .collect();
            json!({"tools": tools, "nextCursor": (page + 1).to_string()})
        }
        // A replica of another release answers a fresh client's first request.
        (Some("tools/call"), "replica_mismatch") if id == json!(1) => {
            return Some(json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32022, "message": "Unsupported protocol version",
                    "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"}}
            }));
        }
        (Some("tools/call"), "replica_mismatch") => text("served"),
        // Ends every subscription at once, as a server shutting down may do on
        // stdio (Cancellation › Behavior Requirements: a server's
        // `notifications/cancelled` ends the stream).
        (Some("subscriptions/listen"), _) => {
            return Some(json!({
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": id, "reason": "the server is shutting down"}
            }));
        }
        (Some("tools/call"), "old_versions_only") => {
            return Some(json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32022, "message": "Unsupported protocol version",
                    "data": {"supported": ["2025-11-25"], "requested": "2026-07-28"}}
            }));
        }
        (method, _) => {
            return Some(json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {"code": -32601, "message": format!("not in the stub: {method:?} {tool}")}
            }));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}
