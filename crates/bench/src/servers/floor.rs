//! The floor: raw hyper, HTTP/1.1 keep-alive, that reads the request body
//! and answers a fixed JSON body of the same size as the real servers'
//! (chosen by the `Mcp-Name` header). No JSON is parsed: it is what any MCP
//! server over HTTP pays at least. Like `axum::serve` (tern, rmcp), it leaves
//! Nagle on.

use std::convert::Infallible;
use std::sync::Arc;

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use serde_json::json;

use crate::workload::{ARG_LEN, echo_result, report};

struct Bodies {
    echo: Bytes,
    payload: Bytes,
}

fn bodies() -> Bodies {
    let echo = json!({"jsonrpc": "2.0", "id": 1, "result": echo_result("hello")});
    let structured = serde_json::to_value(report(ARG_LEN)).unwrap_or_default();
    let payload = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": structured.to_string()}],
        "structuredContent": structured,
    }});
    Bodies {
        echo: Bytes::from(echo.to_string()),
        payload: Bytes::from(payload.to_string()),
    }
}

async fn answer(
    bodies: Arc<Bodies>,
    request: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let payload = request
        .headers()
        .get("mcp-name")
        .is_some_and(|v| v.as_bytes() == b"payload");
    // Read the body whole, as a real server must.
    let read = request
        .into_body()
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes);
    let body = match (read, payload) {
        (Err(_), _) => Bytes::new(),
        (Ok(_), true) => bodies.payload.clone(),
        (Ok(_), false) => bodies.echo.clone(),
    };
    let mut response = Response::new(Full::new(body));
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Serves until the process is killed.
pub(crate) async fn http(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let bodies = Arc::new(bodies());
    loop {
        let (stream, _) = listener.accept().await?;
        let bodies = Arc::clone(&bodies);
        tokio::spawn(async move {
            let service = service_fn(move |r| answer(Arc::clone(&bodies), r));
            drop(
                http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await,
            );
        });
    }
}
