//! Transports: a child process over stdio ([`stdio`]) and Streamable HTTP
//! ([`http`], HTTPS through [`crate::tls`]). A 2025-11-25 server's own
//! requests (its questions, asked while a call runs) are read here too
//! ([`LiveRequest`], the `asks` module), since both transports carry them.

use serde_json::value::RawValue;
use tern_protocol::error::ErrorObject;
use tern_protocol::{ClientRequest, RequestId, ServerNotification};
use tokio::sync::mpsc;

use crate::error::ClientError;

pub(crate) mod asks;
#[cfg(feature = "http")]
pub(crate) mod authorize;
#[cfg(feature = "http")]
pub mod http;
#[cfg(feature = "http")]
pub(crate) mod sse;
pub mod stdio;

pub use crate::future::BoxFuture;
pub use asks::LiveRequest;

/// One request on its way out, built once from its typed form
/// ([`ClientRequest`]): the body, and the headers derived from it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Outgoing {
    /// Its JSON-RPC id.
    pub id: RequestId,
    /// Its method.
    pub method: String,
    /// What the `Mcp-Name` header carries, if anything (the tool or prompt
    /// name, the resource URI, or the task id).
    pub name: Option<String>,
    /// The protocol version (`MCP-Protocol-Version`).
    pub protocol_version: String,
    /// `Mcp-Param-*` headers: name (after the prefix) and encoded value.
    pub header_params: Vec<(String, String)>,
    /// The progress token the request carries (as JSON text), so stdio can
    /// route progress.
    pub progress_token: Option<String>,
    /// The whole JSON-RPC request.
    pub body: String,
}

impl Outgoing {
    /// `request` with `id`, serialised once; `Mcp-Name` and the protocol
    /// version are read from the typed request, `header_params` are the
    /// `Mcp-Param-*` headers its arguments give.
    pub fn new(
        id: RequestId,
        request: &ClientRequest,
        header_params: Vec<(String, String)>,
    ) -> Result<Self, ClientError> {
        let body = serde_json::to_string(&request.with_id(&id)).map_err(|e| {
            ClientError::protocol(format!(
                "the {} request cannot be encoded",
                request.method()
            ))
            .because(e)
        })?;
        let meta = request.meta();
        Ok(Self {
            method: request.method().to_owned(),
            name: request.name().map(str::to_owned),
            protocol_version: meta.map_or_else(
                || tern_protocol::version::LATEST.to_owned(),
                |m| m.protocol_version.clone(),
            ),
            progress_token: meta
                .and_then(|m| m.progress_token.as_ref())
                .and_then(|t| serde_json::to_string(t).ok()),
            header_params,
            body,
            id,
        })
    }

    /// A `method` request whose `params` are already JSON — a relay's,
    /// which forwards what it has checked rather than decoding it again —
    /// serialised once; `Mcp-Name`, the protocol version and the progress
    /// token are read from `params` as [`Self::new`] reads them from the
    /// typed request.
    pub fn from_json(
        id: RequestId,
        method: &str,
        params: &serde_json::Value,
        header_params: Vec<(String, String)>,
    ) -> Result<Self, ClientError> {
        let body = json_request(&id, method, params)?;
        let meta = &params["_meta"];
        Ok(Self {
            method: method.to_owned(),
            name: tern_protocol::request::name_member(method)
                .and_then(|member| params[member].as_str())
                .map(str::to_owned),
            protocol_version: meta[tern_protocol::meta::PROTOCOL_VERSION_KEY]
                .as_str()
                .unwrap_or(tern_protocol::version::LATEST)
                .to_owned(),
            progress_token: meta
                .get("progressToken")
                .filter(|t| t.is_string() || t.is_number())
                .map(ToString::to_string),
            header_params,
            body,
            id,
        })
    }
}

/// A relayed request's params in parts ([`Outgoing::from_parts`]): written
/// into the body as one object, no tree built for the whole.
#[derive(Debug)]
pub struct ParamsParts<'a, M> {
    /// The params' members; a `_meta` among them is left out, and so is an
    /// `arguments` when [`Self::arguments`] is given.
    pub members: &'a serde_json::Map<String, serde_json::Value>,
    /// `arguments`, shared with the caller rather than copied into
    /// `members`.
    pub arguments: Option<&'a serde_json::Value>,
    /// `_meta`.
    pub meta: &'a M,
    /// The protocol version `meta` names (`MCP-Protocol-Version`).
    pub protocol_version: &'a str,
    /// The progress token `meta` carries, as JSON text (stdio routes
    /// progress by it).
    pub progress_token: Option<String>,
}

impl Outgoing {
    /// [`Self::from_json`] with the params written from `parts`: a relay
    /// that makes a `_meta` for each request, and forwards arguments it
    /// shares with the request it serves, writes them once, with no tree
    /// built for them. `Mcp-Name` is read from the members.
    pub fn from_parts<M: serde::Serialize>(
        id: RequestId,
        method: &str,
        parts: ParamsParts<'_, M>,
        header_params: Vec<(String, String)>,
    ) -> Result<Self, ClientError> {
        let body = json_request(&id, method, &parts)?;
        Ok(Self {
            method: method.to_owned(),
            name: tern_protocol::request::name_member(method)
                .and_then(|member| parts.members.get(member)?.as_str())
                .map(str::to_owned),
            protocol_version: parts.protocol_version.to_owned(),
            progress_token: parts.progress_token,
            header_params,
            body,
            id,
        })
    }
}

impl<M: serde::Serialize> serde::Serialize for ParamsParts<'_, M> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = s.serialize_map(None)?;
        for (name, value) in self.members {
            let replaced = name == "_meta" || (name == "arguments" && self.arguments.is_some());
            if !replaced {
                map.serialize_entry(name, value)?;
            }
        }
        if let Some(arguments) = self.arguments {
            map.serialize_entry("arguments", arguments)?;
        }
        map.serialize_entry("_meta", self.meta)?;
        map.end()
    }
}

/// The JSON-RPC request `id` of `method` with `params`, written.
fn json_request<P: serde::Serialize + ?Sized>(
    id: &RequestId,
    method: &str,
    params: &P,
) -> Result<String, ClientError> {
    let failed = || ClientError::protocol(format!("the {method} request cannot be encoded"));
    // Room for a typical request from the start (`to_string` starts at 128
    // bytes and grows twice for most).
    let mut body = Vec::with_capacity(REQUEST_CAPACITY);
    serde_json::to_writer(
        &mut body,
        &JsonRequest {
            jsonrpc: "2.0",
            id,
            method,
            params,
        },
    )
    .map_err(|e| failed().because(e))?;
    // serde_json writes UTF-8 only; the check is a pass over ASCII.
    String::from_utf8(body).map_err(|e| failed().because(e))
}

/// What a request's body is given to start with: a `tools/call` with its
/// `_meta` is a few hundred bytes.
const REQUEST_CAPACITY: usize = 512;

/// A JSON-RPC request around params already JSON.
#[derive(serde::Serialize)]
struct JsonRequest<'a, P: ?Sized> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    params: &'a P,
}

/// What comes back for one request: its notifications, then its response.
#[derive(Debug)]
pub enum Incoming {
    /// A notification raised while the request runs.
    Notification(ServerNotification),
    /// The result, undecoded.
    Result(Box<RawValue>),
    /// The error.
    Error(ErrorObject),
    /// A question a 2025-11-25 server asked with a request of its own while
    /// this request runs (the legacy leg, [`crate::legacy`]); the client
    /// answers it with its installed handlers.
    Request(Box<LiveRequest>),
}

/// The stream of one request's replies. Dropping it cancels the request:
/// HTTP closes the response stream, stdio sends `notifications/cancelled`.
#[derive(Debug)]
pub struct Exchange {
    /// The reply already here, read before `replies` (a one-reply exchange
    /// has no channel).
    ready: Option<Result<Incoming, ClientError>>,
    replies: Option<Replies>,
    pub(crate) cancel_on_drop: Option<CancelGuard>,
}

/// Where an exchange's replies come from.
#[derive(Debug)]
enum Replies {
    /// One by one (HTTP's streams, transports outside this crate).
    Plain(mpsc::Receiver<Result<Incoming, ClientError>>),
    /// Boxed, by a transport with many requests in flight on one link
    /// (stdio): a channel of boxes allocates small blocks of slots.
    Boxed(mpsc::Receiver<Box<Result<Incoming, ClientError>>>),
}

impl Exchange {
    /// An exchange whose only reply is `reply`, already here (an HTTP
    /// request answered with one JSON body): nothing to cancel, no channel.
    pub fn answered(reply: Result<Incoming, ClientError>) -> Self {
        Self {
            ready: Some(reply),
            replies: None,
            cancel_on_drop: None,
        }
    }

    /// Replies on `replies`, cancelled by `guard` when dropped early.
    pub(crate) fn streamed(
        replies: mpsc::Receiver<Result<Incoming, ClientError>>,
        guard: Option<CancelGuard>,
    ) -> Self {
        Self {
            ready: None,
            replies: Some(Replies::Plain(replies)),
            cancel_on_drop: guard,
        }
    }

    /// Replies on `replies`, boxed, cancelled by `guard` when dropped early.
    pub(crate) fn streamed_boxed(
        replies: mpsc::Receiver<Box<Result<Incoming, ClientError>>>,
        guard: Option<CancelGuard>,
    ) -> Self {
        Self {
            ready: None,
            replies: Some(Replies::Boxed(replies)),
            cancel_on_drop: guard,
        }
    }

    /// An exchange whose replies arrive on `replies`, for transports written
    /// outside this crate. `on_cancel` runs if the exchange is dropped before
    /// its response arrived (the transport's way of cancelling the request).
    pub fn new(
        replies: mpsc::Receiver<Result<Incoming, ClientError>>,
        on_cancel: Option<Box<dyn FnOnce() + Send>>,
    ) -> Self {
        Self::streamed(
            replies,
            on_cancel.map(|cancel| CancelGuard {
                armed: true,
                on_cancel: Some(cancel),
            }),
        )
    }

    /// The next reply, `None` when the transport closed without a response.
    pub async fn next(&mut self) -> Option<Result<Incoming, ClientError>> {
        if let Some(reply) = self.ready.take() {
            return Some(reply);
        }
        match &mut self.replies {
            Some(Replies::Plain(replies)) => replies.recv().await,
            Some(Replies::Boxed(replies)) => replies.recv().await.map(|reply| *reply),
            None => None,
        }
    }

    /// The response arrived: dropping the exchange no longer cancels (for a
    /// caller reading the replies itself, as a gateway does).
    pub fn disarm(&mut self) {
        if let Some(guard) = self.cancel_on_drop.as_mut() {
            guard.armed = false;
        }
    }
}

/// Runs a cancellation when dropped while armed.
pub(crate) struct CancelGuard {
    pub(crate) armed: bool,
    pub(crate) on_cancel: Option<Box<dyn FnOnce() + Send>>,
}

impl std::fmt::Debug for CancelGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelGuard")
            .field("armed", &self.armed)
            .finish_non_exhaustive()
    }
}

impl Drop for CancelGuard {
    fn drop(&mut self) {
        if self.armed
            && let Some(cancel) = self.on_cancel.take()
        {
            cancel();
        }
    }
}

/// Listeners of a 2025 session's notifications that no request takes
/// (`notifications/resources/updated` after `resources/subscribe`, the
/// list-changed notifications): the legacy leg's `subscriptions/listen`
/// ([`crate::legacy`]). A slow listener loses notifications rather than
/// stall the reader; one whose receiver is gone is forgotten.
#[derive(Debug, Default)]
pub(crate) struct SessionListeners(std::sync::Mutex<Vec<mpsc::Sender<ServerNotification>>>);

impl SessionListeners {
    /// How many notifications a listener may fall behind by.
    const BACKLOG: usize = 64;

    /// A new listener.
    pub(crate) fn add(&self) -> mpsc::Receiver<ServerNotification> {
        let (tx, rx) = mpsc::channel(Self::BACKLOG);
        self.lock().push(tx);
        rx
    }

    /// Hands `n` to every listener.
    pub(crate) fn tell(&self, n: &ServerNotification) {
        self.lock().retain(|tx| match tx.try_send(n.clone()) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                tracing::debug!(
                    method = n.method(),
                    "a session listener fell behind; notification dropped"
                );
                true
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        });
    }

    /// The session ended: every listener's stream ends.
    pub(crate) fn end(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<mpsc::Sender<ServerNotification>>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// How a client reaches a server.
pub trait Transport: Send + Sync + std::fmt::Debug + 'static {
    /// Sends one request; its replies arrive on the exchange.
    fn send(&self, request: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>>;

    /// Closes the transport (a child process is asked to exit, then stopped).
    fn close(&self) -> BoxFuture<'_, ()>;

    /// Keeps the client's roots handler to answer a 2025-11-25 server's
    /// `roots/list` that no call in flight takes: such a server may ask at
    /// any time (2025-11-25 Client Features, Roots: "Listing Roots"), right
    /// after `notifications/initialized` say. [`crate::ClientBuilder::build`]
    /// hands it over when a handler is installed. The default keeps nothing,
    /// which suits a transport that never carries a 2025 session.
    fn serve_roots(&self, roots: std::sync::Arc<dyn crate::handler::Roots>) {
        let _ = roots;
    }
}

/// A shared transport: the caller keeps a handle to ask it things (a
/// [`crate::legacy::DualEra`]'s era, say) while a client sends on it.
impl<T: Transport> Transport for std::sync::Arc<T> {
    fn send(&self, request: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        (**self).send(request)
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        (**self).close()
    }

    fn serve_roots(&self, roots: std::sync::Arc<dyn crate::handler::Roots>) {
        (**self).serve_roots(roots);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tern_protocol::{ClientRequest, RequestId};

    use super::{Exchange, Incoming, Outgoing, ParamsParts};

    /// A one-reply exchange gives its reply, then says the exchange is
    /// over, as a channel whose sender is gone does.
    #[tokio::test]
    async fn an_answered_exchange_gives_its_reply_then_none() {
        let raw = serde_json::value::RawValue::from_string(r#"{"ok":true}"#.into()).unwrap();
        let mut exchange = Exchange::answered(Ok(Incoming::Result(raw)));
        match exchange.next().await {
            Some(Ok(Incoming::Result(r))) => assert_eq!(r.get(), r#"{"ok":true}"#),
            other => panic!("the reply first, got {other:?}"),
        }
        assert!(exchange.next().await.is_none());
        assert!(exchange.next().await.is_none());
        // Nothing to cancel: dropping it early runs nothing.
        assert!(exchange.cancel_on_drop.is_none());
    }

    /// A boxed exchange (stdio's) gives its replies in order, unboxed,
    /// then says the exchange is over once the sender is gone.
    #[tokio::test]
    async fn a_boxed_exchange_gives_its_replies_in_order_then_none() {
        let (tx, rx) = tokio::sync::mpsc::channel(4);
        let mut exchange = Exchange::streamed_boxed(rx, None);
        let raw = serde_json::value::RawValue::from_string(r#"{"n":1}"#.into()).unwrap();
        tx.send(Box::new(Ok(Incoming::Result(raw)))).await.unwrap();
        tx.send(Box::new(Err(crate::ClientError::transport("gone"))))
            .await
            .unwrap();
        drop(tx);
        match exchange.next().await {
            Some(Ok(Incoming::Result(r))) => assert_eq!(r.get(), r#"{"n":1}"#),
            other => panic!("the result first, got {other:?}"),
        }
        match exchange.next().await {
            Some(Err(e)) => assert_eq!(e.to_string(), "gone"),
            other => panic!("the error second, got {other:?}"),
        }
        assert!(exchange.next().await.is_none());
    }

    /// A request's body is written whole, past its first buffer too; one
    /// that cannot be encoded is a clear error naming its method.
    #[test]
    fn a_request_body_is_written_whole_or_refused_by_name() {
        let long = "x".repeat(3 * super::REQUEST_CAPACITY);
        let body = super::json_request(
            &RequestId::Number(7),
            "tools/call",
            &json!({"name": "echo", "arguments": {"text": long}}),
        )
        .unwrap();
        let read: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(read["params"]["arguments"]["text"], long.as_str());
        assert_eq!(read["id"], 7);
        // A map keyed by something that is not a string has no JSON form.
        let unwritable: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
        let e = super::json_request(&RequestId::Number(8), "tools/call", &unwritable).unwrap_err();
        assert_eq!(e.to_string(), "the tools/call request cannot be encoded");
        assert!(format!("{e:#}").contains("key must be a string"), "{e:#}");
    }

    /// A relay's request written from JSON is the request written from its
    /// typed form: the same body (as JSON), name, version and progress token.
    #[test]
    fn a_request_from_json_is_the_request_from_its_typed_form() {
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
            "progressToken": "p-7",
        });
        let cases = [
            (
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "hi"}, "requestState": "s", "inputResponses": {}}),
            ),
            ("prompts/get", json!({"name": "p", "arguments": {"a": "b"}})),
            ("resources/read", json!({"uri": "demo://x"})),
            ("tasks/get", json!({"taskId": "k"})),
            ("tools/list", json!({"cursor": "c"})),
        ];
        for (method, mut params) in cases {
            params["_meta"] = meta.clone();
            let raw = serde_json::value::to_raw_value(&params).unwrap();
            let typed = ClientRequest::decode(method, Some(&raw)).unwrap();
            let id = RequestId::Number(3);
            let from_typed =
                Outgoing::new(id.clone(), &typed, vec![("H".into(), "v".into())]).unwrap();
            let from_json =
                Outgoing::from_json(id, method, &params, vec![("H".into(), "v".into())]).unwrap();
            let body = |o: &Outgoing| serde_json::from_str::<serde_json::Value>(&o.body).unwrap();
            assert_eq!(body(&from_json), body(&from_typed), "{method}");
            assert_eq!(from_json.name, from_typed.name, "{method}");
            assert_eq!(from_json.method, from_typed.method);
            assert_eq!(from_json.protocol_version, from_typed.protocol_version);
            assert_eq!(
                from_json.progress_token, from_typed.progress_token,
                "{method}"
            );
            assert_eq!(from_json.header_params, from_typed.header_params);
            // The same, written from parts: `_meta` from another value,
            // `arguments` shared (what the params held of either left out).
            params["_meta"] = json!({"stale": true});
            let arguments = params.get("arguments").cloned();
            if arguments.is_some() {
                params["arguments"] = json!("stale");
            }
            let parts = Outgoing::from_parts(
                RequestId::Number(3),
                method,
                ParamsParts {
                    members: params.as_object().unwrap(),
                    arguments: arguments.as_ref(),
                    meta: &meta,
                    protocol_version: "2026-07-28",
                    progress_token: Some("\"p-7\"".into()),
                },
                vec![("H".into(), "v".into())],
            )
            .unwrap();
            assert_eq!(body(&parts), body(&from_typed), "{method}");
            assert_eq!(parts.body.matches("_meta").count(), 1);
            assert!(!parts.body.contains("stale"), "{}", parts.body);
            assert_eq!(parts.name, from_typed.name, "{method}");
            assert_eq!(parts.protocol_version, from_typed.protocol_version);
            assert_eq!(parts.progress_token, from_typed.progress_token);
        }
    }
}
