//! tern's own accept loop for Streamable HTTP: hyper's HTTP/1.1 connection
//! driver with the timeouts and caps `axum::serve` does not have, in front of
//! any tower service (the MCP endpoint, or your router holding it).
//!
//! What it bounds, with the defaults ([`ServeOptions`]):
//!
//! | what | default | when exceeded |
//! |---|---|---|
//! | headers of one request, and a connection idle between requests | 10 s | connection closed |
//! | a request body, from its first byte to its last | 30 s | the request fails (400) |
//! | one write to a client that does not read | 30 s | connection closed (its request is cancelled) |
//! | open connections | 512 | `503` + `Retry-After`, connection closed |
//! | open connections from one peer (an IPv6 peer by its /64), counted before any request is read | 64 | `503` + `Retry-After`, connection closed (other peers unaffected) |
//! | a connection's age | 5 min | closed once its request in flight is answered (a trickle of cheap requests cannot hold a connection for ever; an SSE stream is not cut) |
//! | requests in flight (an SSE stream counts until it ends) | 256 | `503` + `Retry-After` |
//! | requests in flight from one peer (an IPv6 peer by its /64) | 64 | `503` + `Retry-After` |
//! | a request with both `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.1: ambiguous framing, how requests are smuggled past a proxy) | — | `400`, connection closed; hyper would drop the length and serve it |
//! | draining at shutdown | 10 s | remaining connections dropped |
//!
//! The endpoint and the server add their own, each configurable:
//!
//! | what | default | where | when exceeded |
//! |---|---|---|---|
//! | requests in flight for one authenticated principal | 32 | [`Http::max_in_flight_per_principal`](crate::transport::http::Http::max_in_flight_per_principal) | `503` + `Retry-After` (other principals unaffected) |
//! | SSE responses open at once | 128 | [`Http::max_streams`](crate::transport::http::Http::max_streams) | `503` + `Retry-After` |
//! | SSE responses one caller (principal, else peer address) holds | 32 | [`Http::max_streams_per_caller`](crate::transport::http::Http::max_streams_per_caller) | `503` + `Retry-After` (other callers unaffected) |
//! | notifications buffered per response | 256 | [`Http::stream_buffer`](crate::transport::http::Http::stream_buffer) | dropped (progress is lossy); a reader that stops reading is dropped by the write timeout above, and its request cancelled |
//! | request body | 4 MiB | [`Http::body_limit`](crate::transport::http::Http::body_limit) | `413` before it is read whole |
//! | `subscriptions/listen` streams open at once | 64 | [`ServerBuilder::max_listens`](crate::ServerBuilder::max_listens) | `503` + `Retry-After` (stdio: `-32603` + `data.retryAfterMs`) |
//! | `subscriptions/listen` streams one caller holds | 16 | [`ServerBuilder::max_listens_per_caller`](crate::ServerBuilder::max_listens_per_caller) | as above (other callers unaffected) |
//! | resource URIs per listen | 256, known and distinct | [`ServerBuilder::max_listen_uris`](crate::ServerBuilder::max_listen_uris) | `-32602` |
//! | stdio requests queued | 16 × 64 | [`StdioOptions`](crate::transport::stdio::StdioOptions) | `-32603` + `data.retryAfterMs` |
//!
//! None is longer than nginx's 60 s defaults, so a proxy in front never keeps
//! a connection tern has given up on. The `503` carries an id-less JSON-RPC
//! error (`-32603`, `data.retryAfterMs`) for clients that read bodies.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http::{HeaderValue, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt as _, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};

use super::forwarded::TrustedProxies;

/// Limits of the accept loop; see the module docs for the defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServeOptions {
    /// Longest a client may take to send one request's headers, and longest
    /// a kept-alive connection may stay idle: default 10 s.
    pub header_timeout: Duration,
    /// Longest a request body may take to arrive: default 30 s.
    pub body_timeout: Duration,
    /// Longest one write may wait for a client that does not read: default
    /// 30 s.
    pub write_timeout: Duration,
    /// Most connections open at once: default 512.
    pub max_connections: usize,
    /// Most connections open at once from one peer address (an IPv6 peer
    /// by its /64), taken when the connection is accepted: default 64, so
    /// one address cannot hold every connection. Behind a proxy every
    /// connection comes from the proxy's address: raise it there.
    pub max_connections_per_peer: usize,
    /// How long a connection may live: default 5 min. Past it the
    /// connection is closed as soon as no request is in flight on it (a
    /// response in progress, an SSE stream included, is not cut), so a
    /// client that keeps a connection alive with a trickle of requests
    /// gives it back.
    pub max_connection_age: Duration,
    /// Most requests in flight at once: default 256.
    pub max_in_flight: usize,
    /// Most requests in flight from one peer address: default 64. Behind a
    /// proxy every request comes from the proxy's address: raise it there
    /// (the proxy bounds its clients itself).
    pub max_in_flight_per_peer: usize,
    /// How long shutdown waits for connections to finish: default 10 s.
    pub drain_timeout: Duration,
    /// What `Retry-After` says when full: default 1 s.
    pub retry_after: Duration,
    /// The proxies in front of the server: their connections and requests
    /// count only against the totals, not against a per-peer share (the
    /// endpoint tells their clients apart per request, from the forwarded
    /// header). Default: none.
    pub trusted_proxies: Option<Arc<TrustedProxies>>,
}

impl Default for ServeOptions {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_connections: 512,
            max_connections_per_peer: 64,
            max_connection_age: Duration::from_secs(300),
            max_in_flight: 256,
            max_in_flight_per_peer: 64,
            drain_timeout: Duration::from_secs(10),
            retry_after: Duration::from_secs(1),
            trusted_proxies: None,
        }
    }
}

impl ServeOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Self::header_timeout`].
    #[must_use]
    pub fn header_timeout(mut self, timeout: Duration) -> Self {
        self.header_timeout = timeout;
        self
    }

    /// Sets [`Self::body_timeout`].
    #[must_use]
    pub fn body_timeout(mut self, timeout: Duration) -> Self {
        self.body_timeout = timeout;
        self
    }

    /// Sets [`Self::write_timeout`].
    #[must_use]
    pub fn write_timeout(mut self, timeout: Duration) -> Self {
        self.write_timeout = timeout;
        self
    }

    /// Sets [`Self::max_connections`] (at least 1).
    #[must_use]
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n.max(1);
        self
    }

    /// Sets [`Self::max_connections_per_peer`] (at least 1).
    #[must_use]
    pub fn max_connections_per_peer(mut self, n: usize) -> Self {
        self.max_connections_per_peer = n.max(1);
        self
    }

    /// Sets [`Self::max_connection_age`].
    #[must_use]
    pub fn max_connection_age(mut self, age: Duration) -> Self {
        self.max_connection_age = age;
        self
    }

    /// Sets [`Self::max_in_flight`] (at least 1).
    #[must_use]
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n.max(1);
        self
    }

    /// Sets [`Self::max_in_flight_per_peer`] (at least 1).
    #[must_use]
    pub fn max_in_flight_per_peer(mut self, n: usize) -> Self {
        self.max_in_flight_per_peer = n.max(1);
        self
    }

    /// Sets [`Self::retry_after`]; under
    /// [`serve_with`](crate::transport::http::serve_with) the endpoint's
    /// refusals follow it too, unless it has its own
    /// ([`Http::retry_after`](crate::transport::http::Http::retry_after)).
    #[must_use]
    pub fn retry_after(mut self, retry_after: Duration) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// Sets [`Self::trusted_proxies`]; under
    /// [`serve_with`](crate::transport::http::serve_with) the endpoint reads
    /// their clients from the forwarded header too, unless it has its own
    /// ([`Http::trusted_proxies`](crate::transport::http::Http::trusted_proxies)).
    #[must_use]
    pub fn trusted_proxies(mut self, proxies: TrustedProxies) -> Self {
        self.trusted_proxies = Some(Arc::new(proxies));
        self
    }

    /// Sets [`Self::drain_timeout`].
    #[must_use]
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }
}

/// The `503` of a full server.
fn overloaded(retry_after: Duration) -> Response<Body> {
    let ms = u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX);
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32603,"message":"Server overloaded; retry later","data":{{"retryAfterMs":{ms}}}}}}}"#
    );
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let secs = retry_after.as_secs().max(1).to_string();
    let headers = response.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Ok(value) = HeaderValue::from_str(&secs) {
        headers.insert(http::header::RETRY_AFTER, value);
    }
    response
}

/// Requests (or connections) held per peer ([`crate::share::peer_of`]).
#[derive(Debug, Default)]
struct PerPeer(Mutex<HashMap<IpAddr, usize>>);

/// One peer's request slot; given back when dropped.
struct PeerSlot {
    peers: Arc<PerPeer>,
    ip: IpAddr,
}

impl PerPeer {
    fn take(self: &Arc<Self>, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let ip = crate::share::peer_of(ip);
        let mut map = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = map.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            peers: Arc::clone(self),
            ip,
        })
    }
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut map = self
            .peers
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.ip);
            }
        }
    }
}

/// A request's slots, held until its response body ends (an SSE stream
/// holds them while it streams).
struct Slots {
    _server: OwnedSemaphorePermit,
    /// `None` for a trusted proxy.
    _peer: Option<PeerSlot>,
}

/// `response` with its body holding `held` (slots, permits) until the body
/// ends or is dropped: what a request takes is given back when its last
/// byte is sent, not when the handler returns.
pub(crate) fn holding<H: Send + Unpin + 'static>(
    response: Response<Body>,
    held: H,
) -> Response<Body> {
    let (parts, body) = response.into_parts();
    Response::from_parts(
        parts,
        Body::new(Holding {
            body,
            held: Some(held),
        }),
    )
}

/// A body that holds `H` until it ends or is dropped.
struct Holding<H> {
    body: Body,
    held: Option<H>,
}

impl<H: Unpin> hyper::body::Body for Holding<H> {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, axum::Error>>> {
        let polled = Pin::new(&mut self.body).poll_frame(cx);
        if let Poll::Ready(None) = polled {
            self.held = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A request body that must arrive whole within a deadline.
struct Timed {
    body: hyper::body::Incoming,
    deadline: Pin<Box<tokio::time::Sleep>>,
}

#[derive(Debug)]
struct BodyTimeout;

impl std::fmt::Display for BodyTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the request body did not arrive in time")
    }
}

impl std::error::Error for BodyTimeout {}

impl hyper::body::Body for Timed {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Self::Error>>> {
        match Pin::new(&mut self.body).poll_frame(cx) {
            Poll::Ready(frame) => Poll::Ready(frame.map(|f| f.map_err(Into::into))),
            Poll::Pending => match self.deadline.as_mut().poll(cx) {
                Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout)))),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A connection whose writes give up on a client that stopped reading, and
/// whose reads are watched for ambiguous framing ([`Framing`]).
struct WriteTimed {
    io: TcpStream,
    timeout: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
    framing: Framing,
}

/// Watches the bytes a connection reads for a header block naming both
/// `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.1). hyper drops the
/// length and serves such a request as chunked, so the service could not
/// tell; once one is seen the connection is suspect and every request on
/// it is refused (the first request of a pipelined batch included).
///
/// A block is the lines up to an empty one, read line by line, only each
/// line's first bytes kept. A block with one `Content-Length` and no
/// `Transfer-Encoding` is followed by that many body bytes, skipped unread,
/// then the next request; a chunked body is read line by line like a block
/// (a chunked body cannot fake a block: the endpoint takes JSON, in which no
/// line starts with a header name, since raw line breaks inside strings are
/// not JSON, and chunk-size lines are hex).
#[derive(Default)]
struct Framing {
    /// The start of the current line, lowercased.
    line: [u8; 32],
    len: usize,
    /// The current block's `Content-Length` lines, the last one's value
    /// (when it fits and parses), and whether it named `Transfer-Encoding`.
    lengths: u8,
    declared: Option<usize>,
    chunked: bool,
    /// Body bytes still to pass unread.
    skip: usize,
    /// A block named both: the connection is refused from now on.
    seen: Arc<std::sync::atomic::AtomicBool>,
}

impl Framing {
    /// A line at a time: the next line break found by `memchr` (vector
    /// code), the line's first bytes kept lowercased, the rest passed over
    /// unread. (Byte by byte, it took 4.6k of a plain call's 77k
    /// instructions.)
    fn scan(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if self.skip > 0 {
                let k = self.skip.min(bytes.len());
                self.skip -= k;
                bytes = &bytes[k..];
                continue;
            }
            let end = memchr::memchr(b'\n', bytes);
            let line = &bytes[..end.unwrap_or(bytes.len())];
            let kept = line.len().min(self.line.len() - self.len);
            for (slot, b) in self.line[self.len..self.len + kept].iter_mut().zip(line) {
                *slot = b.to_ascii_lowercase();
            }
            self.len += kept;
            match end {
                Some(at) => {
                    self.end_of_line();
                    bytes = &bytes[at + 1..];
                }
                // The line goes on in the next read.
                None => bytes = &[],
            }
        }
    }

    fn end_of_line(&mut self) {
        let line = &self.line[..self.len];
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            if self.lengths > 0 && self.chunked {
                self.seen.store(true, std::sync::atomic::Ordering::Relaxed);
            } else if self.lengths == 1 && !self.chunked {
                self.skip = self.declared.unwrap_or(0);
            }
            self.lengths = 0;
            self.declared = None;
            self.chunked = false;
        } else if let Some(value) = line.strip_prefix(b"content-length:") {
            self.lengths = self.lengths.saturating_add(1);
            // A value cut by the line buffer, or not a number: not skipped
            // (the body is then read line by line, as a chunked one is).
            self.declared = (self.len < self.line.len())
                .then(|| std::str::from_utf8(value).ok())
                .flatten()
                .and_then(|v| v.trim().parse().ok());
        } else {
            self.chunked |= line.starts_with(b"transfer-encoding:");
        }
        self.len = 0;
    }
}

impl WriteTimed {
    fn poll_stalled(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        let timeout = self.timeout;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client stopped reading",
            )),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for WriteTimed {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.io).poll_read(cx, buf);
        if polled.is_ready() {
            self.framing.scan(&buf.filled()[before..]);
        }
        polled
    }
}

impl AsyncWrite for WriteTimed {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match Pin::new(&mut self.io).poll_write(cx, buf) {
            Poll::Ready(done) => {
                self.stalled = None;
                Poll::Ready(done)
            }
            Poll::Pending => match self.poll_stalled(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match Pin::new(&mut self.io).poll_flush(cx) {
            Poll::Ready(done) => {
                self.stalled = None;
                Poll::Ready(done)
            }
            Poll::Pending => match self.poll_stalled(cx) {
                Poll::Ready(e) => Poll::Ready(Err(e)),
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// What every connection of one loop shares.
struct Shared<S> {
    service: S,
    options: ServeOptions,
    in_flight: Arc<Semaphore>,
    peers: Arc<PerPeer>,
    connections: Arc<PerPeer>,
}

impl<S> Shared<S> {
    /// A slot of `per_peer` for `ip`, at most `max` a peer: `Ok(None)` for a
    /// trusted proxy, whose connections and requests count against the
    /// totals only; `Err(())` when the peer holds its share.
    fn peer_slot(
        &self,
        per_peer: &Arc<PerPeer>,
        ip: IpAddr,
        max: usize,
    ) -> Result<Option<PeerSlot>, ()> {
        let proxy = self
            .options
            .trusted_proxies
            .as_ref()
            .is_some_and(|t| t.contains(ip));
        if proxy {
            return Ok(None);
        }
        per_peer.take(ip, max).map(Some).ok_or(())
    }
}

/// `400` with `Connection: close` (hyper then closes the connection).
fn ambiguous_framing() -> Response<Body> {
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response
        .headers_mut()
        .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
    response
}

async fn answer<S>(
    shared: Arc<Shared<S>>,
    peer: SocketAddr,
    ambiguous: Arc<std::sync::atomic::AtomicBool>,
    request: Request<hyper::body::Incoming>,
) -> Result<Response<Body>, Infallible>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + 'static,
    S::Future: Send,
{
    let options = &shared.options;
    if ambiguous.load(std::sync::atomic::Ordering::Relaxed) {
        tracing::warn!("Content-Length with Transfer-Encoding: 400, connection closed");
        return Ok(ambiguous_framing());
    }
    let Ok(server) = Arc::clone(&shared.in_flight).try_acquire_owned() else {
        tracing::warn!("requests in flight at the cap: 503");
        return Ok(overloaded(options.retry_after));
    };
    let Ok(peer_slot) = shared.peer_slot(&shared.peers, peer.ip(), options.max_in_flight_per_peer)
    else {
        tracing::warn!("one peer's requests in flight at the cap: 503");
        return Ok(overloaded(options.retry_after));
    };
    let (mut parts, body) = request.into_parts();
    parts.extensions.insert(axum::extract::ConnectInfo(peer));
    let body = Body::new(Timed {
        body,
        deadline: Box::pin(tokio::time::sleep(options.body_timeout)),
    });
    let mut service = shared.service.clone();
    let response =
        tower::ServiceExt::oneshot(&mut service, Request::from_parts(parts, body)).await?;
    Ok(holding(
        response,
        Slots {
            _server: server,
            _peer: peer_slot,
        },
    ))
}

/// Serves `service` on `listener` until `shutdown` resolves, then stops
/// accepting, lets connections finish their requests (at most
/// [`ServeOptions::drain_timeout`]) and returns.
pub async fn serve_service<S>(
    listener: TcpListener,
    service: S,
    options: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()>
where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    let connections = Arc::new(Semaphore::new(options.max_connections));
    let in_flight = Arc::new(Semaphore::new(options.max_in_flight));
    let shared = Arc::new(Shared {
        service,
        options,
        in_flight,
        peers: Arc::default(),
        connections: Arc::default(),
    });
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut tasks = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, say: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // Reap finished connections as we go.
        while tasks.try_join_next().is_some() {}
        let options = &shared.options;
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            tasks.spawn(refuse(stream, options.retry_after));
            continue;
        };
        // Before any request is read: one peer's share of the connections
        // (a trusted proxy's count against the total only).
        let Ok(peer_permit) = shared.peer_slot(
            &shared.connections,
            peer.ip(),
            options.max_connections_per_peer,
        ) else {
            tracing::warn!("one peer's connections at its share: 503");
            tasks.spawn(refuse(stream, options.retry_after));
            continue;
        };
        let _ = stream.set_nodelay(true);
        tasks.spawn(connection(
            Arc::clone(&shared),
            stream,
            peer,
            (permit, peer_permit),
            stop_rx.clone(),
        ));
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(shared.options.drain_timeout, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            left = tasks.len(),
            "connections still open after the drain timeout were dropped"
        );
        tasks.abort_all();
    }
    Ok(())
}

/// Serves one admitted connection, holding `permits` until it ends: until
/// the client closes it, it passes its age, or the loop stops (then its
/// request in flight finishes first).
async fn connection<S>(
    shared: Arc<Shared<S>>,
    stream: TcpStream,
    peer: SocketAddr,
    permits: (OwnedSemaphorePermit, Option<PeerSlot>),
    mut stop: watch::Receiver<bool>,
) where
    S: tower::Service<Request<Body>, Response = Response<Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send,
{
    let _permits = permits;
    let framing = Framing::default();
    let ambiguous = Arc::clone(&framing.seen);
    let io = TokioIo::new(WriteTimed {
        io: stream,
        timeout: shared.options.write_timeout,
        stalled: None,
        framing,
    });
    let aged = tokio::time::sleep(shared.options.max_connection_age);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(shared.options.header_timeout)
        .keep_alive(true);
    let service = hyper::service::service_fn(move |request| {
        answer(Arc::clone(&shared), peer, Arc::clone(&ambiguous), request)
    });
    let connection = builder.serve_connection(io, service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        () = async {
            tokio::select! {
                _ = stop.wait_for(|stop| *stop) => {}
                () = aged => tracing::debug!("connection past its age: closing"),
            }
        } => {
            connection.as_mut().graceful_shutdown();
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error while draining");
            }
        }
    }
}

/// Answers a connection over the cap with `503` and closes it.
async fn refuse(mut stream: TcpStream, retry_after: Duration) {
    tracing::warn!("connections at the cap: 503");
    let secs = retry_after.as_secs().max(1);
    let text = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: {secs}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = stream.write_all(text.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

#[cfg(test)]
mod framing_tests {
    use super::Framing;
    use proptest::prelude::*;
    use std::sync::atomic::Ordering;

    /// The scanner as it was, byte by byte: the line-at-a-time one must end
    /// in the same state after any reads.
    fn scan_bytewise(f: &mut Framing, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            if f.skip > 0 {
                let k = f.skip.min(bytes.len());
                f.skip -= k;
                bytes = &bytes[k..];
                continue;
            }
            let b = bytes[0];
            bytes = &bytes[1..];
            match b {
                b'\n' => f.end_of_line(),
                _ if f.len < f.line.len() => {
                    f.line[f.len] = b.to_ascii_lowercase();
                    f.len += 1;
                }
                _ => {}
            }
        }
    }

    fn state(f: &Framing) -> (Vec<u8>, u8, Option<usize>, bool, usize, bool) {
        (
            f.line[..f.len].to_vec(),
            f.lengths,
            f.declared,
            f.chunked,
            f.skip,
            f.seen.load(Ordering::Relaxed),
        )
    }

    /// Header-like lines, bodies and line breaks, cut into reads anywhere.
    fn traffic() -> impl Strategy<Value = (Vec<u8>, Vec<usize>)> {
        let piece = prop_oneof![
            Just(b"Content-Length: 3\r\n".to_vec()),
            Just(b"content-length: 12345678901234567890\r\n".to_vec()),
            Just(b"Transfer-Encoding: chunked\r\n".to_vec()),
            Just(b"X-A-Very-Long-Header-Name-Indeed-Past-32: v\r\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"POST /mcp HTTP/1.1\r\n".to_vec()),
            proptest::collection::vec(any::<u8>(), 0..40),
        ];
        (
            proptest::collection::vec(piece, 0..24).prop_map(|p| p.concat()),
            proptest::collection::vec(0_usize..64, 0..8),
        )
    }

    proptest! {
        #[test]
        fn a_line_at_a_time_reads_as_byte_by_byte((bytes, cuts) in traffic()) {
            let (mut fast, mut slow) = (Framing::default(), Framing::default());
            let mut rest = &bytes[..];
            for cut in cuts {
                let (read, after) = rest.split_at(cut.min(rest.len()));
                fast.scan(read);
                scan_bytewise(&mut slow, read);
                prop_assert_eq!(state(&fast), state(&slow));
                rest = after;
            }
            fast.scan(rest);
            scan_bytewise(&mut slow, rest);
            prop_assert_eq!(state(&fast), state(&slow));
        }
    }

    fn seen(chunks: &[&[u8]]) -> bool {
        let mut f = Framing::default();
        for c in chunks {
            f.scan(c);
        }
        f.seen.load(Ordering::Relaxed)
    }

    #[test]
    fn both_framings_in_one_block_are_seen_across_reads_and_bodies_are_skipped() {
        let both = b"POST / HTTP/1.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n";
        assert!(seen(&[both]));
        // Split anywhere, even inside the header names.
        assert!(seen(&[&both[..20], &both[20..35], &both[35..]]));
        // A body that looks like headers is skipped by its length.
        let fake = b"transfer-encoding: chunked\r\ncontent-length: 1\r\n\r\n";
        let mut one = b"POST / HTTP/1.1\r\nContent-Length: 49\r\n\r\n".to_vec();
        one.extend_from_slice(fake);
        assert_eq!(fake.len(), 49);
        assert!(!seen(&[&one]));
        // Then the next request of the connection is read again.
        let mut two = one.clone();
        two.extend_from_slice(both);
        assert!(seen(&[&two]));
        // One framing alone is fine.
        assert!(!seen(&[
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{}{}\r\n0\r\n\r\n"
        ]));
    }
}
