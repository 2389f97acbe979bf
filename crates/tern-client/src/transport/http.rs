//! Streamable HTTP (spec §6.2): one POST per message, the required headers,
//! JSON or SSE responses. Closing a response stream cancels its request.

use std::sync::Arc;

use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tern_protocol::ServerNotification;
use tern_protocol::jsonrpc::Message;
use tokio::sync::mpsc;

use super::{BoxFuture, CancelGuard, Exchange, Incoming, Outgoing, Transport};
use crate::error::ClientError;
use crate::headers::encode_value;

/// A Streamable HTTP endpoint (`http://` only; put TLS in front with a
/// proxy for now).
#[derive(Clone)]
pub struct HttpTransport {
    url: Uri,
    client: Client<HttpConnector, Full<Bytes>>,
    headers: Arc<Vec<(String, String)>>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// The endpoint at `url`, posted to exactly as given.
    pub fn new(url: &str) -> Result<Self, ClientError> {
        let url: Uri = url
            .parse()
            .map_err(|e| ClientError::transport(format!("invalid URL {url}: {e}")))?;
        if url.scheme_str() != Some("http") {
            return Err(ClientError::transport(
                "only http:// URLs are supported (use a TLS proxy for https)",
            ));
        }
        let client = Client::builder(TokioExecutor::new()).build_http();
        Ok(Self {
            url,
            client,
            headers: Arc::new(Vec::new()),
        })
    }

    /// Sends `name: value` on every request (an `Authorization` header, say).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.headers).push((name.into(), value.into()));
        self
    }

    fn request(
        &self,
        body: String,
        method: &str,
        version: &str,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let mut builder = Request::builder()
            .method(Method::POST)
            .uri(self.url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header("MCP-Protocol-Version", version)
            .header("Mcp-Method", method);
        for (k, v) in self.headers.iter() {
            builder = builder.header(k.as_str(), v.as_str());
        }
        builder
            .body(Full::new(Bytes::from(body)))
            .map_err(ClientError::transport)
    }
}

/// Reads one JSON-RPC message the server sent for this request.
fn incoming(text: &str) -> Result<Option<Incoming>, ClientError> {
    match Message::from_slice(text.as_bytes()).map_err(ClientError::protocol)? {
        Message::Response(r) => Ok(Some(Incoming::Result(r.result))),
        Message::Error(e) => Ok(Some(Incoming::Error(e.error))),
        Message::Notification(n) => Ok(Some(Incoming::Notification(
            ServerNotification::from_notification(&n).map_err(ClientError::protocol)?,
        ))),
        // A 2026-07-28 server never sends requests (S16).
        Message::Request(r) => Err(ClientError::protocol(format!(
            "the server sent a request ({}) on a response stream",
            r.method
        ))),
    }
}

async fn pump(
    response: hyper::Response<hyper::body::Incoming>,
    tx: mpsc::Sender<Result<Incoming, ClientError>>,
) {
    let status = response.status();
    let is_sse = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    let mut body = response.into_body();
    if !is_sse {
        let bytes = match body.collect().await {
            Ok(collected) => collected.to_bytes(),
            Err(e) => {
                let _ = tx.send(Err(ClientError::transport(e))).await;
                return;
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        let reply = match incoming(&text) {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => return,
            Err(_) if !status.is_success() => Err(ClientError::transport(format!(
                "HTTP {status}: {}",
                text.trim()
            ))),
            Err(e) => Err(e),
        };
        let _ = tx.send(reply).await;
        return;
    }
    let mut buffer = String::new();
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                let _ = tx.send(Err(ClientError::transport(e))).await;
                return;
            }
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        buffer.push_str(&String::from_utf8_lossy(&data));
        while let Some(end) = buffer.find("\n\n") {
            let event: String = buffer.drain(..end + 2).collect();
            let data: Vec<&str> = event
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|l| l.strip_prefix(' ').unwrap_or(l))
                .collect();
            if data.is_empty() {
                continue; // a comment (keep-alive) or an event without data
            }
            let reply = incoming(&data.join("\n"));
            let last = matches!(
                reply,
                Ok(Some(Incoming::Result(_) | Incoming::Error(_))) | Err(_)
            );
            if let Ok(None) = reply {
                continue;
            }
            if tx
                .send(reply.map(|r| r.expect("None handled above")))
                .await
                .is_err()
                || last
            {
                return;
            }
        }
    }
}

impl Transport for HttpTransport {
    fn send(&self, out: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        Box::pin(async move {
            let mut request = self.request(out.body, &out.method, &out.protocol_version)?;
            let headers = request.headers_mut();
            if let Some(name) = &out.name {
                let value =
                    HeaderValue::from_str(&encode_value(name)).map_err(ClientError::transport)?;
                headers.insert("Mcp-Name", value);
            }
            for (name, value) in &out.header_params {
                let header = http::HeaderName::from_bytes(format!("Mcp-Param-{name}").as_bytes())
                    .map_err(ClientError::transport)?;
                headers.insert(
                    header,
                    HeaderValue::from_str(value).map_err(ClientError::transport)?,
                );
            }
            let response = self
                .client
                .request(request)
                .await
                .map_err(ClientError::transport)?;
            let (tx, rx) = mpsc::channel(64);
            let task = tokio::spawn(pump(response, tx));
            // Dropping the exchange early drops the body: the connection
            // closes, which the server takes as cancellation (§4.2).
            let guard = CancelGuard {
                armed: true,
                on_cancel: Some(Box::new(move || task.abort())),
            };
            Ok(Exchange {
                replies: rx,
                cancel_on_drop: Some(guard),
            })
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
