//! Streamable HTTP (the spec page of that name): one POST per message, the
//! required headers, JSON or SSE responses. Closing a response stream cancels
//! its request.

use std::sync::Arc;

use http::header::{ACCEPT, AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderValue, Method, Request, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use tern_protocol::ServerNotification;
use tern_protocol::jsonrpc::Message;
use tokio::sync::mpsc;

use super::authorize::{Authorization, Next};
use super::sse::{Decoder, SseError};
use super::{BoxFuture, CancelGuard, Exchange, Incoming, Outgoing, Transport};
use crate::error::ClientError;
use crate::headers::encode_value;
use crate::limits::{Limit, Limits};
use crate::tls::{self, HttpClient, TlsOptions};

/// A Streamable HTTP endpoint, `http://` or `https://` (rustls; the
/// built-in Mozilla roots, plus a CA file with [`HttpTransport::with_tls`]).
///
/// ```no_run
/// # fn run() -> Result<(), tern_client::ClientError> {
/// use tern_client::Client;
/// use tern_client::tls::TlsOptions;
/// use tern_client::transport::http::HttpTransport;
///
/// let transport = HttpTransport::new("https://mcp.internal.example/mcp")?
///     // A private CA, trusted beside the built-in roots.
///     .with_tls(&TlsOptions::new().with_ca_file("/etc/ssl/internal-ca.pem"))?
///     .with_header("X-Team", "search");
/// let client = Client::builder().build(transport);
/// # drop(client); Ok(()) }
/// ```
#[derive(Clone)]
pub struct HttpTransport {
    url: Uri,
    client: HttpClient,
    headers: Arc<Vec<(String, String)>>,
    limits: Limits,
    auth: Authorization,
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
            .map_err(|e| ClientError::transport(format!("invalid URL {url}")).because(e))?;
        tls::check_scheme(&url)?;
        let client = tls::client(&TlsOptions::default())?;
        Ok(Self {
            url,
            client,
            headers: Arc::new(Vec::new()),
            limits: Limits::default(),
            auth: Authorization::default(),
        })
    }

    /// Trusts the CAs `options` names for `https://` (the built-in roots
    /// stay trusted).
    pub fn with_tls(mut self, options: &TlsOptions) -> Result<Self, ClientError> {
        self.client = tls::client(options)?;
        Ok(self)
    }

    /// Authorizes with `oauth` (which must be for this endpoint): its access
    /// token on every request; a 401, or a 403 `insufficient_scope`, runs
    /// its flow and sends the request again, at most
    /// [`MAX_AUTH_ATTEMPTS`](crate::auth::MAX_AUTH_ATTEMPTS) times.
    #[cfg(feature = "auth")]
    pub fn with_oauth(mut self, oauth: crate::auth::OAuth) -> Result<Self, ClientError> {
        // Compared as the URL parser normalises both (host case, default
        // port), the way OAuth itself keys its grants.
        let same =
            crate::auth::Url::parse(&self.url.to_string()).is_ok_and(|u| u.as_str() == oauth.url());
        if !same {
            return Err(ClientError::request(format!(
                "the OAuth given is for {}, not {}: a token is only sent to its own resource",
                oauth.url(),
                self.url
            )));
        }
        self.auth = Authorization::oauth(oauth);
        Ok(self)
    }

    /// Sends `name: value` on every request (an `Authorization` header, say).
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        Arc::make_mut(&mut self.headers).push((name.into(), value.into()));
        self
    }

    /// Reads responses within `limits` (its byte limits: response body and
    /// SSE event; the defaults are 16 MiB each).
    #[must_use]
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    fn request(
        &self,
        body: Bytes,
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
            .body(Full::new(body))
            .map_err(|e| ClientError::request("the HTTP request cannot be built").because(e))
    }
}

/// Reads one JSON-RPC message the server sent for this request.
fn incoming(bytes: &[u8]) -> Result<Incoming, ClientError> {
    let message = Message::from_slice(bytes).map_err(|e| {
        ClientError::protocol("the server's reply is not a JSON-RPC message").because(e)
    })?;
    match message {
        Message::Response(r) => Ok(Incoming::Result(r.result)),
        Message::Error(e) => Ok(Incoming::Error(e.error)),
        Message::Notification(n) => ServerNotification::from_notification(&n)
            .map(Incoming::Notification)
            .map_err(|e| {
                ClientError::protocol(format!("the server's `{}` cannot be read", n.method))
                    .because(e)
            }),
        // A 2026-07-28 server never sends requests (rule `no-server-requests`).
        Message::Request(r) => Err(ClientError::protocol(format!(
            "the server sent a request ({}) on a response stream",
            r.method
        ))),
    }
}

/// Collects a JSON body, refusing one larger than `limit` before it is
/// read whole (a `Content-Length` over it is refused at once).
async fn collect(
    body: &mut hyper::body::Incoming,
    declared: Option<u64>,
    limit: usize,
) -> Result<Vec<u8>, ClientError> {
    let too_large = || {
        ClientError::limit(
            Limit::ResponseBytes,
            format!("the response body is larger than {limit} bytes"),
        )
    };
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut bytes = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| ClientError::transport("the response body broke off").because(e))?;
        if let Ok(data) = frame.into_data() {
            if bytes.len() + data.len() > limit {
                return Err(too_large());
            }
            bytes.extend_from_slice(&data);
        }
    }
    Ok(bytes)
}

/// The response is an SSE stream (else one JSON body).
fn is_event_stream(response: &hyper::Response<hyper::body::Incoming>) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// The one reply of a JSON (non-SSE) response, its body read within the
/// response limit.
async fn json_reply(
    response: hyper::Response<hyper::body::Incoming>,
    limits: Limits,
) -> Result<Incoming, ClientError> {
    let status = response.status();
    let declared = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok());
    let mut body = response.into_body();
    let bytes = collect(&mut body, declared, limits.max_response_bytes).await?;
    match incoming(&bytes) {
        Err(_) if !status.is_success() => Err(ClientError::transport(format!(
            "HTTP {status}: {}",
            String::from_utf8_lossy(&bytes).trim()
        ))),
        reply => reply,
    }
}

/// Reads an SSE response's events into `tx` until its response.
async fn pump(
    response: hyper::Response<hyper::body::Incoming>,
    limits: Limits,
    tx: mpsc::Sender<Result<Incoming, ClientError>>,
) {
    let mut body = response.into_body();
    let mut decoder = Decoder::new(limits.max_event_bytes);
    let mut events = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = match frame {
            Ok(frame) => frame,
            Err(e) => {
                let _ = tx
                    .send(Err(
                        ClientError::transport("the response stream broke off").because(e)
                    ))
                    .await;
                return;
            }
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if let Err(e) = decoder.feed(&data, &mut events) {
            let error = match e {
                SseError::TooLarge(limit) => ClientError::limit(
                    Limit::EventBytes,
                    format!("an SSE event of the response is larger than {limit} bytes"),
                ),
                SseError::NotUtf8(_) => {
                    ClientError::protocol("the response stream is not UTF-8").because(e)
                }
            };
            let _ = tx.send(Err(error)).await;
            return;
        }
        for event in events.drain(..) {
            let reply = incoming(event.data.as_bytes());
            let last = matches!(reply, Ok(Incoming::Result(_) | Incoming::Error(_)) | Err(_));
            if tx.send(reply).await.is_err() || last {
                return;
            }
        }
    }
}

impl Transport for HttpTransport {
    fn send(&self, mut out: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        Box::pin(async move {
            // Moved, not copied: a retry after auth clones the `Bytes`.
            let body = Bytes::from(std::mem::take(&mut out.body));
            let mut attempts = 0;
            let response = loop {
                let mut request = self.request(body.clone(), &out.method, &out.protocol_version)?;
                let headers = request.headers_mut();
                if let Some(name) = &out.name {
                    let value = HeaderValue::from_str(&encode_value(name)).map_err(|e| {
                        ClientError::request("the Mcp-Name header cannot be written").because(e)
                    })?;
                    headers.insert("Mcp-Name", value);
                }
                for (name, value) in &out.header_params {
                    let invalid = |e: Box<dyn std::error::Error + Send + Sync>| {
                        ClientError::request(format!(
                            "the Mcp-Param-{name} header cannot be written"
                        ))
                        .because(e)
                    };
                    let header =
                        http::HeaderName::from_bytes(format!("Mcp-Param-{name}").as_bytes())
                            .map_err(|e| invalid(e.into()))?;
                    let value = HeaderValue::from_str(value).map_err(|e| invalid(e.into()))?;
                    headers.insert(header, value);
                }
                let token = self.auth.token().await?;
                if let Some(token) = &token {
                    let value = HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| {
                        ClientError::unauthorized("the access token cannot be sent in a header")
                            .because(e)
                    })?;
                    request.headers_mut().insert(AUTHORIZATION, value);
                }
                let response = self.client.request(request).await.map_err(|e| {
                    ClientError::transport(format!("cannot reach {}", self.url)).because(e)
                })?;
                let status = response.status().as_u16();
                let next = self
                    .auth
                    .after(
                        &self.url,
                        &mut attempts,
                        token.as_deref(),
                        status,
                        response.headers(),
                    )
                    .await?;
                if next == Next::Done {
                    break response;
                }
            };
            if !is_event_stream(&response) {
                // One JSON reply: read here, no task spawned for it.
                // Dropping this future drops the body, which closes the
                // connection: the cancellation of the SSE case below.
                return Ok(Exchange::answered(json_reply(response, self.limits).await));
            }
            let (tx, rx) = mpsc::channel(64);
            let task = tokio::spawn(pump(response, self.limits, tx));
            // Dropping the exchange early drops the body: the connection
            // closes, which the server takes as cancellation (Cancellation ›
            // Transport-Specific Cancellation).
            let guard = CancelGuard {
                armed: true,
                on_cancel: Some(Box::new(move || task.abort())),
            };
            Ok(Exchange::streamed(rx, Some(guard)))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}
