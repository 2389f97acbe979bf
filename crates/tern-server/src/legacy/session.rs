//! One legacy session: what `initialize` negotiated, the log level, the
//! resource subscriptions, the server-to-client requests awaiting a reply,
//! and serving one request on it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::{ErrorResponse, Notification, Request, RequestId, Response};
use tern_protocol::legacy::{self, InitializeRequestParams, InitializeResult};
use tern_protocol::logging::LoggingLevel;
use tern_protocol::meta::{
    CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, PROTOCOL_VERSION_KEY,
};
use tern_protocol::{ClientNotification, JsonObject, method, version};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

use super::LegacyOptions;
use super::downgrade;
use super::live::Live;
use crate::call::{CallContext, Reply};
use crate::ctx::Notifier;
use crate::dispatch::DecodedRequest;
use crate::registry::Change;
use crate::server::Server;

/// A session request read once, strictly ([`Session::prepare`]).
pub(crate) enum Prepared {
    /// A method the session answers itself (`ping`, `logging/setLevel`,
    /// subscriptions, and the methods a session refuses).
    Session,
    /// The modern request it means, decoded.
    Modern(DecodedRequest),
}

/// A client's reply to a server-to-client request.
pub(crate) type ClientReply = Result<Value, ErrorObject>;

/// Where the messages of one request go besides its final response:
/// notifications and server-to-client requests (stdio's output, or the
/// POST's SSE stream).
#[derive(Debug, Clone)]
pub(crate) struct Sink {
    tx: mpsc::Sender<String>,
    newline: bool,
}

impl Sink {
    /// Lines for stdio (each message ends with a newline).
    pub(crate) fn lines(tx: mpsc::Sender<String>) -> Self {
        Self { tx, newline: true }
    }

    /// Messages for an SSE stream (no newline).
    #[cfg(feature = "http")]
    pub(crate) fn events(tx: mpsc::Sender<String>) -> Self {
        Self { tx, newline: false }
    }

    fn encode(&self, message: &impl serde::Serialize) -> Option<String> {
        let mut text = serde_json::to_string(message).ok()?;
        if self.newline {
            text.push('\n');
        }
        Some(text)
    }

    /// Sends `message`, waiting for room; `false` once nobody reads.
    pub(crate) async fn send(&self, message: &impl serde::Serialize) -> bool {
        match self.encode(message) {
            Some(text) => self.tx.send(text).await.is_ok(),
            None => false,
        }
    }

    /// Resolves once nobody reads any more (the stream's body is gone).
    pub(crate) async fn closed(&self) {
        self.tx.closed().await;
    }

    /// Sends `message` if there is room now (from a destructor).
    pub(crate) fn try_send(&self, message: &impl serde::Serialize) {
        if let Some(text) = self.encode(message) {
            let _ = self.tx.try_send(text);
        }
    }
}

/// One 2025 session.
#[derive(Debug)]
pub(crate) struct Session {
    version: &'static str,
    /// The client's capabilities as `initialize` declared them (less the
    /// modern `extensions`, which 2025 does not know: no 2026 tasks on a
    /// session).
    capabilities: Value,
    client_info: Value,
    log_level: Mutex<Option<LoggingLevel>>,
    initialized: watch::Sender<bool>,
    subscriptions: Mutex<HashSet<String>>,
    awaiting: Mutex<HashMap<RequestId, oneshot::Sender<ClientReply>>>,
    next_id: AtomicI64,
    /// Requests in flight, by id: `notifications/cancelled` cancels them.
    in_flight: Mutex<HashMap<RequestId, CancellationToken>>,
    /// Cancelled when the session ends.
    closed: CancellationToken,
    pub(crate) options: LegacyOptions,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The capabilities `initialize` answers with: the registry's, with the
/// 2025 members the session serves (`logging`, `resources.subscribe`,
/// `listChanged`), and of `extensions` only Skills (no tasks on legacy
/// sessions; the Skills methods are served there as on the modern wire).
fn server_capabilities(server: &Server) -> tern_protocol::ServerCapabilities {
    let mut caps = server.capabilities();
    caps.extensions = caps
        .extensions
        .take()
        .map(|mut e| {
            e.retain(|id, _| id == tern_protocol::skill::SKILLS_EXTENSION);
            e
        })
        .filter(|e| !e.is_empty());
    caps.logging = Some(JsonObject::new());
    if let Some(tools) = caps.tools.as_mut() {
        tools.list_changed = Some(true);
    }
    if let Some(prompts) = caps.prompts.as_mut() {
        prompts.list_changed = Some(true);
    }
    if let Some(resources) = caps.resources.as_mut() {
        resources.list_changed = Some(true);
        resources.subscribe = Some(true);
    }
    caps
}

impl Session {
    /// Answers `initialize` and opens the session it starts (2025-11-25
    /// lifecycle); a malformed `initialize` is `-32602` and opens nothing.
    pub(crate) fn open(
        server: &Server,
        request: &Request,
        options: LegacyOptions,
    ) -> Result<(Arc<Self>, Reply), Box<Reply>> {
        let params: InitializeRequestParams = request
            .params
            .as_deref()
            .ok_or_else(|| "missing params".to_owned())
            .and_then(|raw| serde_json::from_str(raw.get()).map_err(|e| e.to_string()))
            .map_err(|e| {
                Box::new(Reply {
                    id: request.id.clone(),
                    outcome: Err(ErrorObject::invalid_params(format!(
                        "invalid initialize params: {e}"
                    ))),
                    malformed: true,
                })
            })?;
        let negotiated = legacy::negotiate(&params.protocol_version);
        let mut capabilities = params.capabilities;
        capabilities.extensions = None;
        let session = Arc::new(Self {
            version: negotiated,
            capabilities: serde_json::to_value(&capabilities).unwrap_or_else(|_| json!({})),
            client_info: serde_json::to_value(&params.client_info).unwrap_or(Value::Null),
            log_level: Mutex::new(None),
            initialized: watch::channel(false).0,
            subscriptions: Mutex::default(),
            awaiting: Mutex::default(),
            next_id: AtomicI64::new(1),
            in_flight: Mutex::default(),
            closed: CancellationToken::new(),
            options,
        });
        let schema = downgrade::Schema::of(negotiated);
        let result = InitializeResult {
            protocol_version: negotiated.to_owned(),
            capabilities: server_capabilities(server),
            server_info: downgrade::implementation(schema, server.info().clone()),
            instructions: server.inner.instructions.clone(),
            meta: None,
        };
        tracing::debug!(version = negotiated, "legacy session opened");
        let reply = Reply {
            id: request.id.clone(),
            outcome: serde_json::value::to_raw_value(&result)
                .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string())),
            malformed: false,
        };
        Ok((session, reply))
    }

    /// The negotiated version.
    #[cfg(feature = "http")]
    pub(crate) fn version(&self) -> &'static str {
        self.version
    }

    /// The session is over: requests awaiting a client reply fail, the
    /// requests in flight are cancelled, the change stream ends.
    pub(crate) fn close(&self) {
        self.closed.cancel();
        lock(&self.awaiting).clear();
        for token in lock(&self.in_flight).values() {
            token.cancel();
        }
    }

    /// A fresh id for a server-to-client request, and the slot its reply
    /// comes to.
    pub(crate) fn expect(&self) -> (RequestId, oneshot::Receiver<ClientReply>) {
        let id = RequestId::String(format!(
            "tern-{}",
            self.next_id.fetch_add(1, Ordering::Relaxed)
        ));
        let (tx, rx) = oneshot::channel();
        if !self.closed.is_cancelled() {
            lock(&self.awaiting).insert(id.clone(), tx);
        }
        (id, rx)
    }

    /// Forgets a server-to-client request nobody waits for any more.
    pub(crate) fn forget(&self, id: &RequestId) -> bool {
        lock(&self.awaiting).remove(id).is_some()
    }

    /// Waits for `notifications/initialized`: no request goes to the client
    /// before it (2025-11-25 lifecycle).
    pub(crate) async fn initialized(&self) {
        let mut rx = self.initialized.subscribe();
        let _ = rx.wait_for(|done| *done).await;
    }

    /// A client's response to a server-to-client request.
    pub(crate) fn on_response(&self, response: &Response) {
        let value = serde_json::from_str(response.result.get()).unwrap_or(Value::Null);
        self.deliver(&response.id, Ok(value));
    }

    /// A client's error answer to a server-to-client request.
    pub(crate) fn on_error(&self, error: &ErrorResponse) {
        if let Some(id) = &error.id {
            self.deliver(id, Err(error.error.clone()));
        } else {
            tracing::debug!(error = ?error.error, "id-less error from a legacy client ignored");
        }
    }

    fn deliver(&self, id: &RequestId, reply: ClientReply) {
        let slot = lock(&self.awaiting).remove(id);
        if let Some(slot) = slot {
            let _ = slot.send(reply);
        } else {
            tracing::debug!(%id, "reply to no outstanding server request ignored");
        }
    }

    /// A client notification on the session.
    pub(crate) fn on_notification(&self, notification: &Notification) {
        match notification.method.as_str() {
            method::NOTIFICATION_INITIALIZED => {
                self.initialized.send_replace(true);
            }
            legacy::NOTIFICATION_ROOTS_LIST_CHANGED => {
                // Roots are asked for afresh by each question: nothing cached.
                tracing::debug!("roots list changed");
            }
            method::NOTIFICATION_CANCELLED => {
                if let Ok(ClientNotification::Cancelled(p)) =
                    ClientNotification::from_notification(notification)
                    && let Some(token) = lock(&self.in_flight).get(&p.request_id)
                {
                    tracing::debug!(id = %p.request_id, "legacy request cancelled");
                    token.cancel();
                }
            }
            other => tracing::debug!(method = other, "legacy notification ignored"),
        }
    }

    /// Registers request `id` as in flight; `None` if that id is in flight
    /// already.
    #[cfg(feature = "http")]
    pub(crate) fn start(self: &Arc<Self>, id: &RequestId) -> Option<InFlight> {
        let token = self.closed.child_token();
        let mut active = lock(&self.in_flight);
        if active.contains_key(id) {
            return None;
        }
        active.insert(id.clone(), token.clone());
        Some(InFlight {
            session: Arc::clone(self),
            id: id.clone(),
            token,
        })
    }

    /// Serves one request of the session (not `initialize`): its
    /// notifications and the server-to-client requests of its handler go to
    /// `sink`; the final response is returned.
    pub(crate) async fn serve(
        self: &Arc<Self>,
        server: &Server,
        request: &Request,
        call: CallContext,
        sink: &Sink,
    ) -> Reply {
        match self.prepare(server, request) {
            Ok(prepared) => {
                self.serve_prepared(server, request, prepared, call, sink)
                    .await
            }
            Err(refused) => downgrade::reply(self.version, &request.method, *refused),
        }
    }

    /// Reads `request` once, strictly, before anything acts on it: a method
    /// the session answers itself, or the modern request it means, decoded
    /// by the same strict decoder as the 2026-07-28 wire (a repeated member
    /// name anywhere in the params, `arguments` included, is `-32602`; so
    /// are params that do not decode). What is authorized and what is served
    /// is this one reading.
    pub(crate) fn prepare(
        &self,
        server: &Server,
        request: &Request,
    ) -> Result<Prepared, Box<Reply>> {
        let m = request.method.as_str();
        let own = matches!(
            m,
            method::PING
                | legacy::SET_LEVEL
                | method::INITIALIZE
                | method::DISCOVER
                | method::SUBSCRIPTIONS_LISTEN
        ) || m.starts_with("tasks/")
            || (matches!(
                m,
                legacy::RESOURCES_SUBSCRIBE | legacy::RESOURCES_UNSUBSCRIBE
            ) && server.serves(method::RESOURCES_READ));
        if own {
            return Ok(Prepared::Session);
        }
        let modern = self.modernise(server, request).map_err(|e| {
            Box::new(Reply {
                id: request.id.clone(),
                outcome: Err(e),
                malformed: true,
            })
        })?;
        server.decode(&modern).map(Prepared::Modern)
    }

    /// Serves `request`, read by [`Self::prepare`] as `prepared`.
    pub(crate) async fn serve_prepared(
        self: &Arc<Self>,
        server: &Server,
        request: &Request,
        prepared: Prepared,
        mut call: CallContext,
        sink: &Sink,
    ) -> Reply {
        let id = request.id.clone();
        let done = |outcome: Result<Value, ErrorObject>| Reply {
            id: id.clone(),
            outcome: outcome.and_then(|v| {
                serde_json::value::to_raw_value(&v)
                    .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))
            }),
            malformed: false,
        };
        let m = request.method.as_str();
        let decoded = match prepared {
            Prepared::Modern(decoded) => decoded,
            Prepared::Session => {
                return match m {
                    method::PING => done(Ok(json!({}))),
                    legacy::SET_LEVEL => {
                        done(decode::<legacy::SetLevelRequestParams>(request).map(|p| {
                            *lock(&self.log_level) = Some(p.level);
                            json!({})
                        }))
                    }
                    legacy::RESOURCES_SUBSCRIBE | legacy::RESOURCES_UNSUBSCRIBE => {
                        done(decode::<legacy::SubscribeRequestParams>(request).map(|p| {
                            let mut subs = lock(&self.subscriptions);
                            if m == legacy::RESOURCES_SUBSCRIBE {
                                subs.insert(p.uri);
                            } else {
                                subs.remove(&p.uri);
                            }
                            json!({})
                        }))
                    }
                    method::INITIALIZE => done(Err(ErrorObject::new(
                        code::INVALID_REQUEST,
                        "The session is already initialized",
                    ))),
                    // Modern-only methods, and tasks (a legacy session does
                    // not get the Tasks extension; task tools run inline).
                    _ => done(Err(ErrorObject::method_not_found(m))),
                };
            }
        };
        let (notifier, mut notes) = Notifier::channel(256);
        call.notifier = Some(notifier);
        let live = Live::new(Arc::clone(self), sink.clone());
        let handling = server.handle_decoded_awaiting(decoded, call, live.source());
        tokio::pin!(handling);
        let reply = loop {
            tokio::select! {
                biased;
                Some(n) = notes.recv() => { sink.send(&n).await; }
                reply = &mut handling => break reply,
            }
        };
        while let Some(n) = notes.try_recv() {
            sink.send(&n).await;
        }
        let reply = downgrade::reply(self.version, m, reply);
        let succeeded = reply
            .outcome
            .as_ref()
            .is_ok_and(|r| !downgrade::is_error(r));
        live.finish(succeeded).await;
        reply
    }

    /// The modern request `request` means on this session: its params with
    /// the session's version, capabilities, client info and log level in
    /// `_meta` (a legacy `progressToken` stays), and no MRTR members (a
    /// legacy request has no retry).
    fn modernise(&self, server: &Server, request: &Request) -> Result<Request, ErrorObject> {
        // The same reading as the 2026-07-28 decode: a map keeps the last
        // of a repeated name, so a repeated name is refused before one is
        // built (a scope check and the handler must not read two values),
        // and so are params past the server's JSON limits.
        server.check_shape(request.params.as_deref())?;
        let mut params: JsonObject = match request.params.as_deref() {
            None => JsonObject::new(),
            Some(raw) => serde_json::from_str(raw.get())
                .map_err(|_| ErrorObject::invalid_params("params must be an object"))?,
        };
        let mut meta = match params.remove("_meta") {
            Some(Value::Object(meta)) => meta,
            None | Some(Value::Null) => JsonObject::new(),
            Some(_) => return Err(ErrorObject::invalid_params("_meta must be an object")),
        };
        meta.insert(PROTOCOL_VERSION_KEY.into(), json!(version::LATEST));
        meta.insert(CLIENT_CAPABILITIES_KEY.into(), self.capabilities.clone());
        if !self.client_info.is_null() {
            meta.insert(CLIENT_INFO_KEY.into(), self.client_info.clone());
        }
        match *lock(&self.log_level) {
            Some(level) => {
                meta.insert(LOG_LEVEL_KEY.into(), json!(level));
            }
            None => {
                meta.remove(LOG_LEVEL_KEY);
            }
        }
        params.remove("inputResponses");
        params.remove("requestState");
        params.insert("_meta".into(), Value::Object(meta));
        let raw = serde_json::value::to_raw_value(&params)
            .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
        Ok(Request {
            id: request.id.clone(),
            method: request.method.clone(),
            params: Some(raw),
        })
    }

    /// The session is over (ended, or closed as stale by [`Self::keep_alive`]).
    #[cfg(feature = "http")]
    pub(crate) fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Resolves when the session is over.
    pub(crate) async fn ended(&self) {
        self.closed.cancelled().await;
    }

    /// Pings the client every `interval` once it is initialized (2025-11-25
    /// lifecycle, "Ping": either party may send one). Any reply, an error
    /// included, is a sign of life; none within `interval` makes the
    /// session stale, and it is closed (the sender "MAY consider the
    /// connection stale and terminate the connection"). Stops quietly when
    /// nobody reads `sink` any more: the stream's end is its owner's
    /// business, not a stale client.
    pub(crate) async fn keep_alive(self: Arc<Self>, sink: Sink, interval: Duration) {
        tokio::select! {
            () = self.closed.cancelled() => return,
            () = sink.closed() => return,
            () = self.initialized() => {}
        }
        loop {
            tokio::select! {
                () = self.closed.cancelled() => return,
                () = sink.closed() => return,
                () = tokio::time::sleep(interval) => {}
            }
            let (id, reply) = self.expect();
            let ping = json!({"jsonrpc": "2.0", "id": id, "method": method::PING});
            if !sink.send(&ping).await {
                self.forget(&id);
                return;
            }
            match tokio::time::timeout(interval, reply).await {
                Ok(Ok(_)) => {}
                Ok(Err(_)) => return,
                Err(_) => {
                    self.forget(&id);
                    tracing::info!(
                        ?interval,
                        "a 2025 client did not answer ping; closing its session"
                    );
                    self.close();
                    return;
                }
            }
        }
    }

    /// Sends the session's list-changed and resource-updated notifications
    /// to `sink` until the session ends or nobody reads.
    pub(crate) async fn forward_changes(self: Arc<Self>, server: Server, sink: Sink) {
        let mut changes = server.changes().subscribe();
        tokio::select! {
            () = self.closed.cancelled() => return,
            () = sink.closed() => return,
            () = self.initialized() => {}
        }
        loop {
            let change = tokio::select! {
                () = self.closed.cancelled() => return,
                () = sink.closed() => return,
                change = changes.recv() => change,
            };
            let message = match change {
                Ok(Change::Tools) => notification(method::NOTIFICATION_TOOLS_LIST_CHANGED, None),
                Ok(Change::Prompts) => {
                    notification(method::NOTIFICATION_PROMPTS_LIST_CHANGED, None)
                }
                Ok(Change::Resources) => {
                    notification(method::NOTIFICATION_RESOURCES_LIST_CHANGED, None)
                }
                Ok(Change::ResourceUpdated(uri)) => {
                    if !lock(&self.subscriptions).contains(&uri) {
                        continue;
                    }
                    notification(
                        method::NOTIFICATION_RESOURCES_UPDATED,
                        Some(json!({"uri": uri})),
                    )
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                    tracing::debug!(missed = n, "legacy change stream lagged");
                    continue;
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            };
            if !sink.send(&message).await {
                return;
            }
        }
    }
}

/// A JSON-RPC notification as a value.
pub(crate) fn notification(method: &str, params: Option<Value>) -> Value {
    let mut n = json!({"jsonrpc": "2.0", "method": method});
    if let Some(params) = params {
        n["params"] = params;
    }
    n
}

fn decode<T: serde::de::DeserializeOwned>(request: &Request) -> Result<T, ErrorObject> {
    let raw = request
        .params
        .as_deref()
        .ok_or_else(|| ErrorObject::invalid_params("missing params"))?;
    serde_json::from_str(raw.get())
        .map_err(|e| ErrorObject::invalid_params(tern_protocol::error::tidy(&e.to_string())))
}

/// A request in flight on a session; forgotten when dropped.
#[cfg(feature = "http")]
#[derive(Debug)]
pub(crate) struct InFlight {
    session: Arc<Session>,
    id: RequestId,
    token: CancellationToken,
}

#[cfg(feature = "http")]
impl InFlight {
    /// Cancelled by `notifications/cancelled` or the end of the session.
    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }
}

#[cfg(feature = "http")]
impl Drop for InFlight {
    fn drop(&mut self) {
        lock(&self.session.in_flight).remove(&self.id);
    }
}
