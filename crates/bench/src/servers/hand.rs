//! The hand-rolled line: what a careful engineer writes by hand for these
//! two tools — hyper's http1 with keep-alive, the body read whole and parsed
//! into a `serde_json::Value`, dispatch on `method` and `params.name`, the
//! arguments read from the tree, and a `Value` reply serialised. No schema
//! validation, no `_meta` or header checks, no sealing: the distance from
//! it to tern is what tern's protections and framework cost (issue 14:
//! tern within 1.25× of it on echo, 1.3× on the payload).

use std::convert::Infallible;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use crate::workload::{echo_result, report};

/// The JSON-RPC reply to one request body.
fn reply(body: &[u8]) -> (StatusCode, Value) {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        let error = json!({"code": -32700, "message": "Parse error"});
        return (
            StatusCode::BAD_REQUEST,
            json!({"jsonrpc": "2.0", "id": null, "error": error}),
        );
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let params = request.get("params");
    let name = params.and_then(|p| p.get("name")).and_then(Value::as_str);
    let arguments = params.and_then(|p| p.get("arguments"));
    let result = match (request.get("method").and_then(Value::as_str), name) {
        (Some("tools/call"), Some("echo")) => arguments
            .and_then(|a| a.get("text"))
            .and_then(Value::as_str)
            .map(echo_result),
        (Some("tools/call"), Some("payload")) => arguments
            .and_then(|a| a.get("data"))
            .and_then(Value::as_str)
            .and_then(|data| serde_json::to_value(report(data.len())).ok())
            .and_then(|structured| {
                // `serde_json::to_string`, not `Value::to_string`: Display
                // writes through a formatter, several times slower.
                let text = serde_json::to_string(&structured).ok()?;
                Some(json!({
                    "content": [{"type": "text", "text": text}],
                    "structuredContent": structured,
                }))
            }),
        _ => None,
    };
    match result {
        Some(result) => (
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": id, "result": result}),
        ),
        None => (
            StatusCode::OK,
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602, "message": "Invalid params"}}),
        ),
    }
}

async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let (status, value) = match request.into_body().collect().await {
        Ok(body) => reply(&body.to_bytes()),
        Err(_) => (StatusCode::BAD_REQUEST, Value::Null),
    };
    let body = serde_json::to_vec(&value).unwrap_or_default();
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// The stdio floor: the same reply, one JSON-RPC message per line on
/// standard input and output, read with a buffered reader and written with a
/// buffered writer flushed when no more input is waiting. What any stdio
/// server must do at least; tern's stdio line is read against it.
pub(crate) async fn stdio() -> std::io::Result<()> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let mut input = tokio::io::BufReader::with_capacity(64 * 1024, tokio::io::stdin());
    let mut output = tokio::io::BufWriter::with_capacity(64 * 1024, tokio::io::stdout());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line).await? == 0 {
            return output.flush().await;
        }
        let (_, value) = reply(&line);
        let mut text = serde_json::to_vec(&value).unwrap_or_default();
        text.push(b'\n');
        output.write_all(&text).await?;
        if input.buffer().is_empty() {
            output.flush().await?;
        }
    }
}

/// Serves until the process is killed.
pub(crate) async fn http(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    loop {
        let (stream, _) = listener.accept().await?;
        tokio::spawn(async move {
            drop(
                http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service_fn(answer))
                    .await,
            );
        });
    }
}
