//! A hand-written HTTP peer on loopback, for what the demo cannot show: a
//! server that asks the same question again whatever the answer, one that
//! accepts connections and never answers, one at another path.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

/// What the peer does with one request: the path and body in, the status
/// and body out (`None`: hold the connection and never answer).
pub type Handler = fn(&str, &Value) -> Option<(u16, Value)>;

/// The peer, stopped when dropped.
pub struct Fake {
    /// `127.0.0.1:PORT`.
    pub addr: String,
    stop: Arc<AtomicBool>,
}

impl Fake {
    pub fn start(handler: Handler) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if stopping.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { break };
                if let Some(s) = serve(stream, handler) {
                    held.push(s);
                }
            }
        });
        Self { addr, stop }
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop.
        let _ = TcpStream::connect(&self.addr);
    }
}

/// Serves one connection's request; gives the stream back to hold it open
/// when the handler never answers.
fn serve(stream: TcpStream, handler: Handler) -> Option<TcpStream> {
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut first = String::new();
    reader.read_line(&mut first).ok()?;
    let path = first.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let mut length = 0;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).ok()?;
        if line.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some((status, reply)) = handler(&path, &body) else {
        return Some(stream);
    };
    let text = if reply.is_null() {
        String::new()
    } else {
        reply.to_string()
    };
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    None
}

/// The reply to `body` with `result`.
pub fn result(body: &Value, result: Value) -> (u16, Value) {
    (
        200,
        json!({"jsonrpc": "2.0", "id": body["id"], "result": result}),
    )
}

/// A server whose tool `ask` asks `region` on every round, whatever it was
/// answered.
#[allow(
    clippy::unnecessary_wraps,
    reason = "a Handler, whose None holds the connection"
)]
pub fn asks_again(path: &str, body: &Value) -> Option<(u16, Value)> {
    if path != "/mcp" {
        return Some((404, Value::Null));
    }
    match body["method"].as_str() {
        // A 2026-07-28 server: the era probe finds it modern.
        Some("server/discover") => Some(result(
            body,
            json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}),
        )),
        Some("tools/list") => Some(result(
            body,
            json!({"tools": [{"name": "ask", "inputSchema": {"type": "object"}}]}),
        )),
        Some("tools/call") => Some(result(
            body,
            json!({"resultType": "input_required", "inputRequests": {"region": {
                "method": "elicitation/create",
                "params": {"mode": "form", "message": "Which region?", "requestedSchema": {
                    "type": "object",
                    "properties": {"region": {"type": "string", "enum": ["eu", "us"]}},
                    "required": ["region"]}}}}}),
        )),
        _ => Some((
            200,
            json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "no"}}),
        )),
    }
}

/// Accepts, reads, and never answers.
pub fn black_hole(_: &str, _: &Value) -> Option<(u16, Value)> {
    None
}
