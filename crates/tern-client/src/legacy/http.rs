//! The legacy leg over Streamable HTTP (2025-11-25 transport): the era
//! probe, the session (`Mcp-Session-Id`, a new `initialize` after 404,
//! `DELETE` at the end), server-to-client requests on a response stream
//! answered with POSTs, and resumption of a stream that ended early (`GET`
//! with `Last-Event-ID` after the stream's `retry`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::header::{ACCEPT, CONTENT_TYPE};
use http::{Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::{Value, json};
use tern_protocol::jsonrpc::{Message, RequestId};
use tern_protocol::{ServerNotification, method, version};
use tokio::sync::mpsc;

use super::{accept_initialize, era_of_answer};
use crate::error::ClientError;
use crate::limits::{Limit, Limits};
use crate::tls::{self, HttpClient, TlsOptions};
use crate::transport::asks::{ServerAsk, answer_standing, answer_text, response_text, server_ask};
use crate::transport::authorize::{Authorization, Next};
use crate::transport::sse::Decoder;
use crate::transport::{CancelGuard, Exchange, Incoming, Outgoing, SessionListeners};

/// How long to wait before resuming a stream whose server gave no `retry`.
const DEFAULT_RETRY: Duration = Duration::from_secs(1);
/// Resumptions of one response stream at most.
const MAX_RESUMES: u32 = 5;

type Replies = mpsc::Sender<Result<Incoming, ClientError>>;

#[derive(Default)]
struct SessionState {
    id: Option<String>,
    version: String,
    init: Value,
    init_body: String,
}

/// One endpoint's legacy session.
pub(crate) struct LegacyHttp {
    url: Uri,
    client: HttpClient,
    headers: Vec<(String, String)>,
    limits: Limits,
    auth: Authorization,
    state: Mutex<SessionState>,
    /// Requests in flight: their replies, and whether they may be asked
    /// questions (`tools/call`, `prompts/get`, `resources/read`).
    inflight: Mutex<Vec<(RequestId, Replies, bool)>>,
    /// The client's roots, for a `roots/list` outside a call.
    roots: Mutex<Option<Arc<dyn crate::handler::Roots>>>,
    /// Listeners of the session's notifications outside any response
    /// stream (resource updates, list changes).
    listeners: SessionListeners,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn status_error(status: StatusCode, body: &[u8]) -> ClientError {
    ClientError::transport(format!(
        "HTTP {status}: {}",
        String::from_utf8_lossy(body).trim()
    ))
}

impl LegacyHttp {
    pub(crate) fn new(url: &str) -> Result<Self, ClientError> {
        let parsed: Uri = url
            .parse()
            .map_err(|e| ClientError::transport(format!("invalid URL {url}")).because(e))?;
        tls::check_scheme(&parsed)?;
        Ok(Self {
            url: parsed,
            client: tls::client(&TlsOptions::default())?,
            headers: Vec::new(),
            limits: Limits::default(),
            auth: Authorization::default(),
            state: Mutex::default(),
            inflight: Mutex::default(),
            roots: Mutex::default(),
            listeners: SessionListeners::default(),
        })
    }

    pub(crate) fn serve_roots(&self, roots: Arc<dyn crate::handler::Roots>) {
        *lock(&self.roots) = Some(roots);
    }

    #[cfg(feature = "auth")]
    pub(crate) fn set_oauth(&mut self, oauth: crate::auth::OAuth) {
        self.auth = Authorization::oauth(oauth);
    }

    pub(crate) fn set_tls(&mut self, options: &TlsOptions) -> Result<(), ClientError> {
        self.client = tls::client(options)?;
        Ok(())
    }

    pub(crate) fn add_header(&mut self, name: String, value: String) {
        self.headers.push((name, value));
    }

    /// The listeners of the session's notifications outside any response
    /// stream.
    pub(crate) fn listeners(&self) -> &SessionListeners {
        &self.listeners
    }

    pub(crate) fn url(&self) -> String {
        self.url.to_string()
    }

    pub(crate) fn version(&self) -> String {
        lock(&self.state).version.clone()
    }

    pub(crate) fn init_result(&self) -> Value {
        lock(&self.state).init.clone()
    }

    fn request(
        &self,
        method_: Method,
        body: Option<String>,
        extra: &[(&str, String)],
        session: bool,
    ) -> Result<Request<Full<Bytes>>, ClientError> {
        let mut b = Request::builder()
            .method(method_)
            .uri(self.url.clone())
            .header(ACCEPT, "application/json, text/event-stream");
        if body.is_some() {
            b = b.header(CONTENT_TYPE, "application/json");
        }
        let state = lock(&self.state);
        if session {
            if let Some(id) = &state.id {
                b = b.header("Mcp-Session-Id", id.as_str());
            }
            if !state.version.is_empty() {
                b = b.header("MCP-Protocol-Version", state.version.as_str());
            }
        }
        drop(state);
        for (k, v) in &self.headers {
            b = b.header(k.as_str(), v.as_str());
        }
        for (k, v) in extra {
            b = b.header(*k, v.as_str());
        }
        b.body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| ClientError::request("the HTTP request cannot be built").because(e))
    }

    async fn exchange(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
        if !self.auth.is_on() {
            return self.client.request(request).await.map_err(|e| {
                ClientError::transport(format!("cannot reach {}", self.url)).because(e)
            });
        }
        // As the modern transport does (`HttpTransport::with_oauth`): the
        // token on every request, the flow on 401 / 403 insufficient_scope.
        let (parts, body) = request.into_parts();
        let mut attempts = 0;
        loop {
            let mut b = Request::builder()
                .method(parts.method.clone())
                .uri(parts.uri.clone());
            for (k, v) in &parts.headers {
                b = b.header(k, v);
            }
            let token = self.auth.token().await?;
            if let Some(token) = &token {
                b = b.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
            }
            let request = b
                .body(body.clone())
                .map_err(|e| ClientError::request("the HTTP request cannot be built").because(e))?;
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
                return Ok(response);
            }
        }
    }

    /// The first JSON-RPC message of a response (JSON, or the first event of
    /// an SSE stream), with the status.
    async fn first_message(
        &self,
        response: hyper::Response<hyper::body::Incoming>,
    ) -> Result<(StatusCode, Option<Message>, Vec<u8>), ClientError> {
        let status = response.status();
        let sse = is_sse(&response);
        let mut body = response.into_body();
        let mut bytes = Vec::new();
        let mut decoder = Decoder::new(self.limits.max_event_bytes);
        let mut events = Vec::new();
        while let Some(frame) = body.frame().await {
            let frame =
                frame.map_err(|e| ClientError::transport("the response broke off").because(e))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if sse {
                decoder
                    .feed(&data, &mut events)
                    .map_err(|e| ClientError::protocol("unreadable SSE").because(e))?;
                if let Some(event) = events.iter().find(|e| !e.data.trim().is_empty()) {
                    return Ok((
                        status,
                        Message::from_slice(event.data.as_bytes()).ok(),
                        Vec::new(),
                    ));
                }
            } else {
                if bytes.len() + data.len() > self.limits.max_response_bytes {
                    return Err(ClientError::limit(
                        Limit::ResponseBytes,
                        "the response body is too large",
                    ));
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok((status, Message::from_slice(&bytes).ok(), bytes))
    }

    /// Sends the era probe; `Ok(true)` when the server is modern. A 401 is
    /// an error (authorize, then probe again).
    pub(crate) async fn probe(&self, body: &str) -> Result<bool, ClientError> {
        let request = self.request(
            Method::POST,
            Some(body.to_owned()),
            &[
                ("MCP-Protocol-Version", version::LATEST.to_owned()),
                ("Mcp-Method", method::DISCOVER.to_owned()),
            ],
            false,
        )?;
        let response = self.exchange(request).await?;
        let (status, message, bytes) = self.first_message(response).await?;
        if status == StatusCode::UNAUTHORIZED {
            return Err(status_error(status, &bytes));
        }
        Ok(match message {
            Some(Message::Response(r)) => era_of_answer(&Ok(r.result)),
            Some(Message::Error(e)) => era_of_answer(&Err(e.error)),
            _ => false,
        })
    }

    /// Opens a session with `body` (an `initialize`), then says
    /// `notifications/initialized`.
    pub(crate) async fn initialize(&self, body: String) -> Result<(), ClientError> {
        // Subscriptions end with the session they were made on.
        self.listeners.end();
        {
            let mut state = lock(&self.state);
            state.id = None;
            state.version.clear();
            state.init_body.clone_from(&body);
        }
        let response = self
            .exchange(self.request(Method::POST, Some(body), &[], false)?)
            .await?;
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let (status, message, bytes) = self.first_message(response).await?;
        let result = match message {
            Some(Message::Response(r)) => r.result,
            Some(Message::Error(e)) => return Err(ClientError::rpc(e.error)),
            _ => return Err(status_error(status, &bytes)),
        };
        let (version, init) = accept_initialize(&result)?;
        {
            let mut state = lock(&self.state);
            state.id = session;
            state.version = version;
            state.init = init;
        }
        let note =
            json!({"jsonrpc": "2.0", "method": method::NOTIFICATION_INITIALIZED}).to_string();
        let response = self
            .exchange(self.request(Method::POST, Some(note), &[], true)?)
            .await?;
        if !response.status().is_success() {
            return Err(ClientError::transport(format!(
                "notifications/initialized was refused with HTTP {}",
                response.status()
            )));
        }
        Ok(())
    }

    /// Posts a message of this session (a response, a notification).
    async fn post(&self, body: String) {
        match self.request(Method::POST, Some(body), &[], true) {
            Ok(request) => {
                if let Err(e) = self.exchange(request).await {
                    tracing::debug!(error = %e, "a message to the 2025 server was lost");
                }
            }
            Err(e) => tracing::debug!(error = %e, "a message to the 2025 server cannot be built"),
        }
    }

    /// Sends one request of the session; its replies arrive on the exchange.
    pub(crate) async fn send(self: &Arc<Self>, out: Outgoing) -> Result<Exchange, ClientError> {
        // Registered before the POST: a question may come on the standalone
        // stream before this response's headers do.
        let (tx, rx) = mpsc::channel(64);
        let asker = matches!(
            out.method.as_str(),
            method::TOOLS_CALL
                | method::PROMPTS_GET
                | method::RESOURCES_READ
                | method::TASKS_RESULT
        );
        lock(&self.inflight).push((out.id.clone(), tx.clone(), asker));
        let sent = self.post_request(&out).await;
        let response = match sent {
            Ok(response) => response,
            Err(e) => {
                lock(&self.inflight).retain(|(i, _, _)| *i != out.id);
                return Err(e);
            }
        };
        let me = Arc::clone(self);
        let id = out.id;
        let cancelled = id.clone();
        let task = tokio::spawn(async move {
            Arc::clone(&me).pump(response, tx).await;
            lock(&me.inflight).retain(|(i, _, _)| *i != id);
        });
        let session = Arc::clone(self);
        let cancel = move || {
            task.abort();
            // 2025-11-25 Streamable HTTP: a disconnection is not a
            // cancellation; the client says it cancels
            // (`notifications/cancelled`, Cancellation).
            let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": {"requestId": cancelled}})
            .to_string();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { session.post(note).await });
            }
        };
        Ok(Exchange::streamed(
            rx,
            Some(CancelGuard {
                armed: true,
                on_cancel: Some(Box::new(cancel)),
            }),
        ))
    }

    /// POSTs `out`, with a new session and once more after a 404.
    async fn post_request(
        self: &Arc<Self>,
        out: &Outgoing,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ClientError> {
        let mut response = self
            .exchange(self.request(Method::POST, Some(out.body.clone()), &[], true)?)
            .await?;
        if response.status() == StatusCode::NOT_FOUND && lock(&self.state).id.is_some() {
            // The session is gone (expired, or the server restarted): a new
            // one, and the request once more (2025-11-25 transport).
            tracing::info!("the 2025 session expired; initializing again");
            let body = lock(&self.state).init_body.clone();
            self.initialize(body).await?;
            // The old session's standalone stream ended with it.
            self.open_standalone().await;
            response = self
                .exchange(self.request(Method::POST, Some(out.body.clone()), &[], true)?)
                .await?;
        }
        Ok(response)
    }

    /// Reads one response (and its resumptions) to the end.
    async fn pump(self: Arc<Self>, first: hyper::Response<hyper::body::Incoming>, tx: Replies) {
        let mut response = first;
        let mut resumes = 0;
        loop {
            let status = response.status();
            if !is_sse(&response) {
                let bytes = match response.into_body().collect().await {
                    Ok(c) => c.to_bytes(),
                    Err(e) => {
                        let _ = tx
                            .send(Err(
                                ClientError::transport("the response broke off").because(e)
                            ))
                            .await;
                        return;
                    }
                };
                let reply = match Message::from_slice(&bytes) {
                    Ok(Message::Response(r)) => Ok(Incoming::Result(r.result)),
                    Ok(Message::Error(e)) => Ok(Incoming::Error(e.error)),
                    _ => Err(status_error(status, &bytes)),
                };
                let _ = tx.send(reply).await;
                return;
            }
            let (done, last_id, retry) = self.read_stream(response, Some(&tx)).await;
            // Done, or answered on the standalone stream (nobody listens).
            if done || tx.is_closed() {
                return;
            }
            // The stream ended before the response: resume it (SEP-1699).
            let Some(last_id) = last_id.filter(|_| resumes < MAX_RESUMES) else {
                let _ = tx
                    .send(Err(ClientError::transport(
                        "the response stream ended before the response",
                    )))
                    .await;
                return;
            };
            resumes += 1;
            tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY)).await;
            let request = match self.request(Method::GET, None, &[("Last-Event-ID", last_id)], true)
            {
                Ok(r) => r,
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
            response = match self.exchange(request).await {
                Ok(r) if r.status().is_success() => r,
                Ok(r) => {
                    let _ = tx
                        .send(Err(ClientError::transport(format!(
                            "resuming the stream failed with HTTP {}",
                            r.status()
                        ))))
                        .await;
                    return;
                }
                Err(e) => {
                    let _ = tx.send(Err(e)).await;
                    return;
                }
            };
        }
    }

    /// Reads an SSE stream; `true` once the response came. Also the last
    /// event id and the `retry` it set.
    async fn read_stream(
        &self,
        response: hyper::Response<hyper::body::Incoming>,
        tx: Option<&Replies>,
    ) -> (bool, Option<String>, Option<Duration>) {
        let mut body = response.into_body();
        let mut decoder = Decoder::new(self.limits.max_event_bytes);
        let mut events = Vec::new();
        while let Some(frame) = body.frame().await {
            let Ok(frame) = frame else { break };
            let Ok(data) = frame.into_data() else {
                continue;
            };
            if let Err(e) = decoder.feed(&data, &mut events) {
                if let Some(tx) = tx {
                    let _ = tx
                        .send(Err(ClientError::protocol("unreadable SSE").because(e)))
                        .await;
                }
                return (true, None, None);
            }
            for event in events.drain(..) {
                if event.data.trim().is_empty() {
                    continue; // a priming event
                }
                if self.on_message(event.data.as_bytes(), tx).await {
                    return (true, None, None);
                }
            }
        }
        (
            false,
            decoder.last_event_id.clone(),
            decoder.retry.map(Duration::from_millis),
        )
    }

    /// The replies of request `id` in flight.
    fn route(&self, id: &RequestId) -> Option<Replies> {
        lock(&self.inflight)
            .iter()
            .find(|(i, _, _)| i == id)
            .map(|(_, tx, _)| tx.clone())
    }

    /// The request a question of the standalone stream is for: the only
    /// one in flight that may be asked a question. Nothing ties such a
    /// question to its request, so with two or more it is nobody's
    /// (answered as undeclared), never guessed: a session shared by several
    /// callers (a gateway's) must not hand one caller's question to
    /// another. A question on a request's own response stream is its.
    fn asker(&self) -> Option<Replies> {
        let inflight = lock(&self.inflight);
        let mut askers = inflight.iter().filter(|(_, _, asker)| *asker);
        match (askers.next(), askers.next()) {
            (Some((_, tx, _)), None) => Some(tx.clone()),
            _ => None,
        }
    }

    /// One message of a response stream (`tx`: its request's replies) or of
    /// the standalone stream (`None`: routed by id, questions to the only
    /// call that may be asked, [`Self::asker`]); `true` for the stream's own
    /// response.
    async fn on_message(&self, bytes: &[u8], tx: Option<&Replies>) -> bool {
        let own = |id: &RequestId| tx.cloned().or_else(|| self.route(id));
        match Message::from_slice(bytes) {
            Ok(Message::Response(r)) => {
                if let Some(tx) = own(&r.id) {
                    let _ = tx.send(Ok(Incoming::Result(r.result))).await;
                }
                tx.is_some()
            }
            Ok(Message::Error(e)) => {
                if let Some(tx) = e.id.as_ref().and_then(own) {
                    let _ = tx.send(Ok(Incoming::Error(e.error))).await;
                }
                tx.is_some()
            }
            Ok(Message::Notification(n)) => {
                match (ServerNotification::from_notification(&n), tx) {
                    (Ok(n), Some(tx)) => {
                        let _ = tx.send(Ok(Incoming::Notification(n))).await;
                    }
                    (Ok(n), None) => self.listeners.tell(&n),
                    (Err(e), _) => tracing::debug!(error = %e, "undecodable notification ignored"),
                }
                false
            }
            Ok(Message::Request(r)) => {
                let id = r.id.clone();
                match server_ask(&r) {
                    ServerAsk::Ping => self.post(response_text(&id, Ok(json!({})))).await,
                    ServerAsk::Unknown(e) => self.post(response_text(&id, Err(e))).await,
                    ServerAsk::Live(live, rx) => {
                        if let Some(tx) = tx.cloned().or_else(|| self.asker()) {
                            let _ = tx.send(Ok(Incoming::Request(live))).await;
                        } else {
                            let roots = lock(&self.roots).clone();
                            answer_standing(live, roots);
                        }
                        let text = answer_text(id, rx).await;
                        self.post(text).await;
                    }
                }
                false
            }
            Err(e) => {
                tracing::debug!(error = %e, "unreadable message on a response stream");
                false
            }
        }
    }

    /// Opens the standalone stream (`GET`) and reads it in the background:
    /// what the server sends outside any response stream — a 2025 SDK sends
    /// a tool's questions here unless it ties them to the request, and drops
    /// them when no stream is open, so it is open before the first request.
    /// Reopened after it ends, with `Last-Event-ID` after its `retry`, while
    /// the session lasts (at most [`MAX_RESUMES`] times in a row without a
    /// new event); a server without one (405) is fine.
    pub(crate) async fn open_standalone(self: &Arc<Self>) {
        let session = lock(&self.state).id.clone();
        if session.is_none() {
            return;
        }
        let Some(first) = self.get_stream(None).await else {
            return;
        };
        let me = Arc::clone(self);
        tokio::spawn(async move {
            let (mut last_id, mut retry): (Option<String>, Option<Duration>) = (None, None);
            let mut quiet = 0;
            let mut response = Some(first);
            while quiet <= MAX_RESUMES && lock(&me.state).id == session {
                let current = match response.take() {
                    Some(r) => r,
                    None => match me.get_stream(last_id.clone()).await {
                        Some(r) => r,
                        None => return,
                    },
                };
                let (_, id, r) = me.read_stream(current, None).await;
                quiet = if id.is_some() && id != last_id {
                    0
                } else {
                    quiet + 1
                };
                last_id = id.or(last_id);
                retry = r.or(retry);
                tokio::time::sleep(retry.unwrap_or(DEFAULT_RETRY)).await;
            }
        });
    }

    async fn get_stream(
        &self,
        last_id: Option<String>,
    ) -> Option<hyper::Response<hyper::body::Incoming>> {
        let extra: Vec<(&str, String)> = last_id
            .into_iter()
            .map(|id| ("Last-Event-ID", id))
            .collect();
        let request = self.request(Method::GET, None, &extra, true).ok()?;
        match self.exchange(request).await {
            Ok(r) if r.status().is_success() && is_sse(&r) => Some(r),
            _ => None,
        }
    }

    /// Ends the session (`DELETE`).
    pub(crate) async fn end(&self) {
        if lock(&self.state).id.is_none() {
            return;
        }
        if let Ok(request) = self.request(Method::DELETE, None, &[], true) {
            let _ = self.exchange(request).await;
        }
        lock(&self.state).id = None;
        self.listeners.end();
    }
}

fn is_sse(response: &hyper::Response<hyper::body::Incoming>) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"))
}
