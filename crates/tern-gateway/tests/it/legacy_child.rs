//! This test binary as a raw 2025-11-25 server on stdio (role `legacy`):
//! it asks live during its calls and answers its `seen` tool with every
//! message it received, so a test sees exactly what reached it (answers,
//! `notifications/cancelled`, `logging/setLevel`, what `initialize`
//! declared).
//!
//! Tools: `ask` (an `elicitation/create`, form mode), `ask_twice` (two at
//! once, ids `qN-a` and `qN-b`), `slow` (done after 30 s, asking
//! nothing), `sample`
//! (`sampling/createMessage`), `roots` (`roots/list`), `url` (`-32042` on
//! its odd calls, done on its even ones), `log` (a log message at each level, then
//! done), `seen` (the messages so far, a JSON array), `calls` (how many
//! `tools/call` of each tool arrived).

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::sync::oneshot;

use crate::child::ROLE;

type Pending = Arc<Mutex<HashMap<String, oneshot::Sender<Value>>>>;

#[test]
fn legacy_entry() {
    if std::env::var(ROLE).as_deref() != Ok("legacy") {
        return; // an ordinary test run
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(serve());
    std::process::exit(0);
}

fn write(message: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{message}");
    let _ = out.flush();
}

async fn serve() {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let calls: Arc<Mutex<HashMap<String, u64>>> = Arc::default();
    let pending: Pending = Arc::default();
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut asked = 0u64;
    while let Ok(Some(line)) = lines.next_line().await {
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        seen.lock().unwrap().push(message.clone());
        let id = message.get("id").cloned();
        let method = message["method"].as_str().map(str::to_owned);
        match (id, method) {
            // A response to one of our questions.
            (Some(id), None) => {
                let key = id.to_string();
                if let Some(tx) = pending.lock().unwrap().remove(&key) {
                    let _ = tx.send(message);
                }
            }
            (Some(id), Some(method)) => match method.as_str() {
                "initialize" => write(&json!({"jsonrpc": "2.0", "id": id, "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}, "logging": {}},
                    "serverInfo": {"name": "raw-legacy", "version": "1"}}})),
                "tools/list" => write(&json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [
                    {"name": "ask", "inputSchema": {"type": "object"}},
                    {"name": "ask_twice", "inputSchema": {"type": "object"}},
                    {"name": "slow", "inputSchema": {"type": "object"}},
                    {"name": "sample", "inputSchema": {"type": "object"}},
                    {"name": "roots", "inputSchema": {"type": "object"}},
                    {"name": "url", "inputSchema": {"type": "object"}},
                    {"name": "log", "inputSchema": {"type": "object"}},
                    {"name": "seen", "inputSchema": {"type": "object"}},
                    {"name": "calls", "inputSchema": {"type": "object"}},
                ]}})),
                "logging/setLevel" | "ping" => {
                    write(&json!({"jsonrpc": "2.0", "id": id, "result": {}}));
                }
                "tools/call" => {
                    let name = message["params"]["name"].as_str().unwrap_or("").to_owned();
                    let n = {
                        let mut c = calls.lock().unwrap();
                        let n = c.entry(name.clone()).or_default();
                        *n += 1;
                        *n
                    };
                    asked += 1;
                    let question = format!("q{asked}");
                    let (seen, calls, pending) =
                        (Arc::clone(&seen), Arc::clone(&calls), Arc::clone(&pending));
                    tokio::spawn(async move {
                        let text = call(&name, n, &question, &seen, &calls, &pending).await;
                        let reply = match text {
                            Ok(text) => json!({"jsonrpc": "2.0", "id": id, "result": {
                                "content": [{"type": "text", "text": text}]}}),
                            Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
                        };
                        write(&reply);
                    });
                }
                _ => write(&json!({"jsonrpc": "2.0", "id": id, "error": {
                    "code": -32601, "message": "Method not found"}})),
            },
            _ => {} // a notification: seen
        }
    }
}

/// Asks `method` of the client, waits for its answer.
async fn ask(pending: &Pending, id: &str, method: &str, params: Value) -> Value {
    let (tx, rx) = oneshot::channel();
    pending
        .lock()
        .unwrap()
        .insert(Value::String(id.to_owned()).to_string(), tx);
    write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
    rx.await.unwrap_or(Value::Null)
}

async fn call(
    name: &str,
    n: u64,
    question: &str,
    seen: &Mutex<Vec<Value>>,
    calls: &Mutex<HashMap<String, u64>>,
    pending: &Pending,
) -> Result<String, Value> {
    match name {
        "ask" => {
            let answer = ask(pending, question, "elicitation/create", json!({
                "mode": "form", "message": "Your name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}))
            .await;
            if let Some(error) = answer.get("error") {
                return Ok(format!("error: {}", error["message"]));
            }
            let result = &answer["result"];
            Ok(match result["action"].as_str() {
                Some("accept") => {
                    format!("hello {}", result["content"]["name"].as_str().unwrap_or(""))
                }
                other => format!("declined: {}", other.unwrap_or("?")),
            })
        }
        "ask_twice" => {
            let form = |message: &str| {
                json!({"mode": "form", "message": message,
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}})
            };
            let (a, b) = (format!("{question}-a"), format!("{question}-b"));
            let (a, b) = tokio::join!(
                ask(pending, &a, "elicitation/create", form("First?")),
                ask(pending, &b, "elicitation/create", form("Second?")),
            );
            Ok(format!(
                "{} {}",
                a["result"]["action"], b["result"]["action"]
            ))
        }
        "slow" => {
            tokio::time::sleep(std::time::Duration::from_secs(30)).await;
            Ok("slept".into())
        }
        "sample" => {
            let answer = ask(
                pending,
                question,
                "sampling/createMessage",
                json!({
                "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                "maxTokens": 10}),
            )
            .await;
            Ok(match answer.get("error") {
                Some(error) => format!("sampling error: {}", error["message"]),
                None => format!(
                    "sampled: {}",
                    answer["result"]["content"]["text"].as_str().unwrap_or("")
                ),
            })
        }
        "roots" => {
            let answer = ask(pending, question, "roots/list", json!({})).await;
            let uris: Vec<&str> = answer["result"]["roots"]
                .as_array()
                .map(|r| r.iter().filter_map(|r| r["uri"].as_str()).collect())
                .unwrap_or_default();
            Ok(format!("roots: {}", uris.join(",")))
        }
        "url" if n % 2 == 1 => Err(json!({"code": -32042, "message": "Sign in first",
            "data": {"elicitations": [{"mode": "url", "elicitationId": "e-1",
                "url": "https://auth.example.com/start", "message": "Sign in to continue"}]}})),
        "url" => Ok(format!("signed in, call #{n}")),
        "log" => {
            for level in ["debug", "info", "warning", "error"] {
                write(&json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": level, "data": format!("at {level}")}}));
            }
            Ok("logged".into())
        }
        "seen" => Ok(Value::Array(seen.lock().unwrap().clone()).to_string()),
        "calls" => Ok(json!(*calls.lock().unwrap()).to_string()),
        _ => Err(json!({"code": -32602, "message": format!("Unknown tool: {name}")})),
    }
}
