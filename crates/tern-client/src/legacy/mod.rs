//! Talking to 2025-11-25 servers (spec: Versioning and Compatibility › Backward
//! Compatibility with Initialization-Based Versions, and the Backward
//! Compatibility sections of stdio and Streamable HTTP): era detection, then
//! either the modern wire or a legacy session, behind one [`Transport`]:
//! [`DualEra`].
//!
//! - **Detection.** The first request sends a probe, `server/discover` with
//!   the modern `_meta` built from that request's own (its capabilities and
//!   client info). Only a `DiscoverResult` (it has `supportedVersions`) or a
//!   recognised modern error (`-32022`, `-32021`, `-32020`) means modern;
//!   anything else — another error, a bare `{"result":{}}`, an HTTP 4xx
//!   without a modern body, silence for [`PROBE_TIMEOUT`], or a child process
//!   that exits on the probe (it is started again) — means legacy. An HTTP
//!   401 is returned as it is: authorize, then probe again.
//! - **Cache.** The era is kept for the life of the [`DualEra`] (so one
//!   `tern call` probes once); HTTP eras are also kept per URL for the life of
//!   the process, so a second transport to the same endpoint does not probe.
//!   Across processes a caller may keep what it learnt ([`DualEra::era`])
//!   and pass it back as a hint ([`DualEra::legacy_hint`]): the probe is
//!   skipped and `initialize` sent at once; if `initialize` is refused, the
//!   hint was stale and the probe runs as usual. (The `tern` command keeps
//!   such hints for a day; see its `era_cache` module.)
//! - **The legacy leg.** `initialize` with the capabilities and client info of
//!   the first request (the client's installed handlers), accepting any of the
//!   2025 versions the server counter-offers, then `notifications/initialized`.
//!   Each modern request is sent without the modern `_meta` keys (a
//!   `progressToken` stays); a `server/discover` is answered from the
//!   `initialize` result. The server's `elicitation/create`,
//!   `sampling/createMessage` and `roots/list` come to the call as
//!   [`Incoming::Request`] and are answered by the same installed handlers;
//!   a `roots/list` no call takes (the server may ask at any time) is
//!   answered by the roots handler ([`Transport::serve_roots`]), and
//!   `ping` is answered here. A tool the server runs only as a task
//!   (2025-11-25 experimental tasks, `execution.taskSupport: "required"`)
//!   is called as one and followed to its result (the `task` module). A
//!   `subscriptions/listen` is made of `resources/subscribe` requests and the
//!   session's notifications (the `listen` module). Over HTTP the session id is kept, a 404 starts a
//!   new session (once per request), and a response stream that ends before
//!   its response is resumed with `GET` and `Last-Event-ID` after the
//!   stream's `retry` (SEP-1699).

#[cfg(feature = "http")]
pub(crate) mod http;
mod listen;
mod task;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::RequestId;
use tern_protocol::legacy::negotiate;
use tern_protocol::meta::{
    CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, LOG_LEVEL_KEY, PROTOCOL_VERSION_KEY,
};
use tern_protocol::{method, version};
use tokio::sync::OnceCell;

use crate::error::ClientError;
use crate::handler::Roots;
use crate::limits::Limits;
#[cfg(feature = "http")]
use crate::transport::http::HttpTransport;
use crate::transport::stdio::{ChildProcess, ChildWatch, SpawnOptions};
use crate::transport::{BoxFuture, Exchange, Incoming, Outgoing, Transport};

/// How long a stdio probe waits for an answer before the server is taken
/// for a legacy one: 5 s.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// How long a stdio legacy leg serving the client's roots waits after
/// `notifications/initialized` for the server to ask for them (as
/// server-filesystem does, then applies them while it already serves
/// requests): 500 ms. Answered, a `ping` follows so the server has read
/// them before the first request.
pub const ROOTS_GRACE: Duration = Duration::from_millis(500);

/// Which revision a server speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Era {
    /// 2026-07-28, stateless.
    Modern,
    /// A 2025 session, at this negotiated version.
    Legacy(String),
}

/// The `_meta` of a modern request body.
fn meta_of(body: &str) -> serde_json::Map<String, Value> {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v["params"]["_meta"].as_object().cloned())
        .unwrap_or_default()
}

/// `initialize` with the capabilities and client info of `first`'s `_meta`.
fn initialize_body(first: &Outgoing) -> String {
    let meta = meta_of(&first.body);
    let capabilities = meta
        .get(CLIENT_CAPABILITIES_KEY)
        .cloned()
        .unwrap_or_else(|| json!({}));
    let info = meta
        .get(CLIENT_INFO_KEY)
        .cloned()
        .unwrap_or_else(|| json!({"name": "tern-client", "version": env!("CARGO_PKG_VERSION")}));
    json!({"jsonrpc": "2.0", "id": "tern-initialize", "method": method::INITIALIZE, "params": {
        "protocolVersion": tern_protocol::legacy::LATEST,
        "capabilities": capabilities, "clientInfo": info}})
    .to_string()
}

/// The probe: `server/discover` with `first`'s modern `_meta`.
fn probe_body(first: &Outgoing) -> String {
    let mut meta = meta_of(&first.body);
    meta.insert(PROTOCOL_VERSION_KEY.into(), json!(version::LATEST));
    meta.entry(CLIENT_CAPABILITIES_KEY.to_owned())
        .or_insert_with(|| json!({}));
    meta.remove("progressToken");
    json!({"jsonrpc": "2.0", "id": "tern-probe", "method": method::DISCOVER, "params": {"_meta": meta}})
        .to_string()
}

/// The era a probe's answer means (stdio › Backward Compatibility: a
/// recognised modern error means modern, anything else legacy).
pub(crate) fn era_of_answer(answer: &Result<Box<RawValue>, ErrorObject>) -> bool {
    match answer {
        Ok(raw) => serde_json::from_str::<Value>(raw.get())
            .is_ok_and(|v| v.get("supportedVersions").is_some_and(Value::is_array)),
        Err(e) => matches!(
            e.code,
            code::UNSUPPORTED_PROTOCOL_VERSION
                | code::MISSING_REQUIRED_CLIENT_CAPABILITY
                | code::HEADER_MISMATCH
        ),
    }
}

/// `out` as the legacy request it means: the modern `_meta` keys dropped.
fn legacy_outgoing(mut out: Outgoing, version: &str) -> Result<Outgoing, ClientError> {
    let mut body: Value = serde_json::from_str(&out.body)
        .map_err(|e| ClientError::request("the request cannot be rewritten").because(e))?;
    if let Some(params) = body.get_mut("params").and_then(Value::as_object_mut) {
        let empty = params
            .get_mut("_meta")
            .and_then(Value::as_object_mut)
            .is_some_and(|meta| {
                for key in [
                    PROTOCOL_VERSION_KEY,
                    CLIENT_CAPABILITIES_KEY,
                    CLIENT_INFO_KEY,
                    LOG_LEVEL_KEY,
                ] {
                    meta.remove(key);
                }
                meta.is_empty()
            });
        if empty {
            params.remove("_meta");
        }
        params.remove("inputResponses");
        params.remove("requestState");
    }
    out.body = body.to_string();
    version.clone_into(&mut out.protocol_version);
    Ok(out)
}

/// A `server/discover` result made from an `initialize` result.
fn discover_from(init: &Value, version: &str) -> Box<RawValue> {
    let mut result = json!({
        "resultType": "complete",
        "supportedVersions": [version],
        "capabilities": init.get("capabilities").cloned().unwrap_or_else(|| json!({})),
        "_meta": {"io.modelcontextprotocol/serverInfo": init.get("serverInfo").cloned().unwrap_or(Value::Null)},
    });
    if let Some(instructions) = init.get("instructions") {
        result["instructions"] = instructions.clone();
    }
    serde_json::value::to_raw_value(&result).unwrap_or_default()
}

/// Where the server is.
enum Wire {
    Stdio {
        program: String,
        args: Vec<String>,
        options: SpawnOptions,
        child: Mutex<Arc<ChildProcess>>,
    },
    #[cfg(feature = "http")]
    Http {
        modern: HttpTransport,
        legacy: Arc<http::LegacyHttp>,
    },
}

/// What detection decided.
enum Leg {
    Modern,
    Stdio {
        version: String,
        init: Value,
        child: Arc<ChildProcess>,
    },
    #[cfg(feature = "http")]
    Http,
}

/// A transport to a server of either era (module docs).
pub struct DualEra {
    wire: Wire,
    leg: OnceCell<Leg>,
    assume_legacy: bool,
    legacy_hint: bool,
    /// The client's roots, handed on to a child started again.
    roots: Mutex<Option<Arc<dyn Roots>>>,
    /// The tools the 2025 server runs only as tasks (listed once, on the
    /// first `tools/call` of a server that offers tool tasks).
    task_tools: OnceCell<std::collections::HashSet<String>>,
}

impl std::fmt::Debug for DualEra {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DualEra")
            .field("era", &self.era())
            .finish_non_exhaustive()
    }
}

/// HTTP eras by URL, for the life of the process (`true`: modern).
#[cfg(feature = "http")]
fn http_cache() -> &'static Mutex<std::collections::HashMap<String, bool>> {
    static CACHE: std::sync::OnceLock<Mutex<std::collections::HashMap<String, bool>>> =
        std::sync::OnceLock::new();
    CACHE.get_or_init(Mutex::default)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl DualEra {
    /// A server run as `program args`, era detected on the first request.
    pub fn stdio(program: &str, args: &[String]) -> Result<Self, ClientError> {
        Self::stdio_with(program, args, Limits::default())
    }

    /// [`Self::stdio`] with the transport's byte limits.
    pub fn stdio_with(program: &str, args: &[String], limits: Limits) -> Result<Self, ClientError> {
        Self::stdio_with_options(program, args, SpawnOptions::default().limits(limits))
    }

    /// [`Self::stdio`], the child started as `options` say (and started
    /// again the same way if it exits on the probe).
    pub fn stdio_with_options(
        program: &str,
        args: &[String],
        options: SpawnOptions,
    ) -> Result<Self, ClientError> {
        let child = ChildProcess::spawn_with_options(program, args, options.clone())?;
        Ok(Self {
            wire: Wire::Stdio {
                program: program.to_owned(),
                args: args.to_vec(),
                options,
                child: Mutex::new(Arc::new(child)),
            },
            leg: OnceCell::new(),
            assume_legacy: false,
            legacy_hint: false,
            roots: Mutex::default(),
            task_tools: OnceCell::new(),
        })
    }

    /// A Streamable HTTP endpoint, era detected on the first request.
    #[cfg(feature = "http")]
    pub fn http(url: &str) -> Result<Self, ClientError> {
        Ok(Self {
            wire: Wire::Http {
                modern: HttpTransport::new(url)?,
                legacy: Arc::new(http::LegacyHttp::new(url)?),
            },
            leg: OnceCell::new(),
            assume_legacy: false,
            legacy_hint: false,
            roots: Mutex::default(),
            task_tools: OnceCell::new(),
        })
    }

    /// Sends `name: value` on every HTTP request (an `Authorization`
    /// header, say); no effect on stdio.
    #[cfg(feature = "http")]
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        if let Wire::Http { modern, legacy } = &mut self.wire {
            let (name, value) = (name.into(), value.into());
            *modern = modern.clone().with_header(name.clone(), value.clone());
            if let Some(l) = Arc::get_mut(legacy) {
                l.add_header(name, value);
            }
        }
        self
    }

    /// Trusts the CAs `options` names for `https://` (both legs; no effect
    /// on stdio).
    #[cfg(feature = "http")]
    pub fn with_tls(mut self, options: &crate::tls::TlsOptions) -> Result<Self, ClientError> {
        if let Wire::Http { modern, legacy } = &mut self.wire {
            *modern = modern.clone().with_tls(options)?;
            if let Some(l) = Arc::get_mut(legacy) {
                l.set_tls(options)?;
            }
        }
        Ok(self)
    }

    /// Authorizes both legs with `oauth` (for this endpoint), as
    /// [`HttpTransport::with_oauth`] does; no effect on stdio.
    #[cfg(feature = "auth")]
    pub fn with_oauth(mut self, oauth: crate::auth::OAuth) -> Result<Self, ClientError> {
        if let Wire::Http { modern, legacy } = &mut self.wire {
            *modern = modern.clone().with_oauth(oauth.clone())?;
            if let Some(l) = Arc::get_mut(legacy) {
                l.set_oauth(oauth);
            }
        }
        Ok(self)
    }

    /// Skips the probe: the server is known to speak 2025 (a conformance
    /// run told so, say).
    #[must_use]
    pub fn assume_legacy(mut self) -> Self {
        self.assume_legacy = true;
        self
    }

    /// The server spoke 2025 last time (a cached era): `initialize` is sent
    /// without a probe first, and only if it is refused does the probe run.
    #[must_use]
    pub fn legacy_hint(mut self) -> Self {
        self.legacy_hint = true;
        self
    }

    /// Tells when the stdio child closed its output, and how (`None` over
    /// HTTP). After a restart on the probe it watches the new child.
    pub fn watch(&self) -> Option<ChildWatch> {
        match &self.wire {
            Wire::Stdio { child, .. } => Some(lock(child).watch()),
            #[cfg(feature = "http")]
            Wire::Http { .. } => None,
        }
    }

    /// The era, once the first request found it.
    pub fn era(&self) -> Option<Era> {
        Some(match self.leg.get()? {
            Leg::Modern => Era::Modern,
            Leg::Stdio { version, .. } => Era::Legacy(version.clone()),
            #[cfg(feature = "http")]
            Leg::Http => match &self.wire {
                Wire::Http { legacy, .. } => Era::Legacy(legacy.version()),
                Wire::Stdio { .. } => return None,
            },
        })
    }

    async fn detect(&self, first: &Outgoing) -> Result<Leg, ClientError> {
        if self.legacy_hint && !self.assume_legacy {
            match self.initialize_at_once(first).await {
                Ok(leg) => return Ok(leg),
                Err(e) => {
                    tracing::info!(error = %e, "the cached era was stale: initialize was refused; probing");
                }
            }
        }
        self.probe_and_open(first).await
    }

    /// The legacy leg without a probe.
    async fn initialize_at_once(&self, first: &Outgoing) -> Result<Leg, ClientError> {
        match &self.wire {
            #[cfg(feature = "http")]
            Wire::Http { legacy, .. } => {
                legacy.initialize(initialize_body(first)).await?;
                legacy.open_standalone().await;
                Ok(Leg::Http)
            }
            Wire::Stdio { child, .. } => {
                let current = Arc::clone(&lock(child));
                initialize_stdio(current, first).await
            }
        }
    }

    async fn probe_and_open(&self, first: &Outgoing) -> Result<Leg, ClientError> {
        match &self.wire {
            #[cfg(feature = "http")]
            Wire::Http { legacy, .. } => {
                let url = legacy.url();
                let cached = lock(http_cache()).get(&url).copied();
                let modern = match cached {
                    _ if self.assume_legacy => false,
                    Some(modern) => modern,
                    None => {
                        let modern = legacy.probe(&probe_body(first)).await?;
                        lock(http_cache()).insert(url, modern);
                        modern
                    }
                };
                if modern {
                    return Ok(Leg::Modern);
                }
                legacy.initialize(initialize_body(first)).await?;
                legacy.open_standalone().await;
                Ok(Leg::Http)
            }
            Wire::Stdio {
                program,
                args,
                options,
                child,
            } => {
                let current = Arc::clone(&lock(child));
                if !self.assume_legacy {
                    match probe_stdio(&current, first).await {
                        Probe::Modern => return Ok(Leg::Modern),
                        Probe::Legacy => {}
                        Probe::Exited => {
                            tracing::info!(server = %program, "the server exited on the era probe; starting it again");
                            let again = Arc::new(ChildProcess::spawn_with_options(
                                program,
                                args,
                                options.clone(),
                            )?);
                            if let Some(roots) = lock(&self.roots).clone() {
                                again.serve_roots(roots);
                            }
                            *lock(child) = Arc::clone(&again);
                            return initialize_stdio(again, first).await;
                        }
                    }
                }
                initialize_stdio(current, first).await
            }
        }
    }
}

impl DualEra {
    /// `out` is a `tools/call` of a tool the 2025 server runs only as a
    /// task (`execution.taskSupport: "required"`, on a server that offers
    /// tool tasks).
    async fn needs_task(
        &self,
        session: &task::Session,
        init: &Value,
        version: &str,
        out: &Outgoing,
    ) -> Result<bool, ClientError> {
        if out.method != method::TOOLS_CALL || !task::offers_tool_tasks(init) {
            return Ok(false);
        }
        let Some(name) = out.name.as_deref() else {
            return Ok(false);
        };
        let required = self
            .task_tools
            .get_or_try_init(|| task::required_tools(session, version))
            .await?;
        Ok(required.contains(name))
    }
}

enum Probe {
    Modern,
    Legacy,
    Exited,
}

async fn probe_stdio(child: &ChildProcess, first: &Outgoing) -> Probe {
    let probe = Outgoing {
        id: RequestId::from("tern-probe"),
        method: method::DISCOVER.to_owned(),
        name: None,
        protocol_version: version::LATEST.to_owned(),
        header_params: Vec::new(),
        progress_token: None,
        body: probe_body(first),
    };
    let Ok(mut exchange) = child.send(probe).await else {
        return Probe::Exited;
    };
    let answer = tokio::time::timeout(PROBE_TIMEOUT, async {
        loop {
            match exchange.next().await {
                Some(Ok(Incoming::Result(raw))) => return Some(Ok(raw)),
                Some(Ok(Incoming::Error(e))) => return Some(Err(e)),
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return None,
            }
        }
    })
    .await;
    // A silent server gets no `notifications/cancelled` for the probe.
    exchange.disarm();
    match answer {
        Ok(Some(answer)) if era_of_answer(&answer) => Probe::Modern,
        Ok(Some(_)) | Err(_) => Probe::Legacy,
        Ok(None) => Probe::Exited,
    }
}

async fn initialize_stdio(child: Arc<ChildProcess>, first: &Outgoing) -> Result<Leg, ClientError> {
    let init = Outgoing {
        id: RequestId::from("tern-initialize"),
        method: method::INITIALIZE.to_owned(),
        name: None,
        protocol_version: tern_protocol::legacy::LATEST.to_owned(),
        header_params: Vec::new(),
        progress_token: None,
        body: initialize_body(first),
    };
    let mut exchange = child.send(init).await?;
    let result = loop {
        match exchange.next().await {
            Some(Ok(Incoming::Result(raw))) => break raw,
            Some(Ok(Incoming::Error(e))) => {
                exchange.disarm();
                return Err(ClientError::rpc(e));
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ClientError::transport(
                    "the server closed before initialize was answered",
                ));
            }
        }
    };
    exchange.disarm();
    let (version, init) = accept_initialize(&result)?;
    child.write_line(
        json!({"jsonrpc": "2.0", "method": method::NOTIFICATION_INITIALIZED}).to_string(),
    )?;
    child.settle_roots(ROOTS_GRACE).await;
    Ok(Leg::Stdio {
        version,
        init,
        child,
    })
}

/// Reads an `initialize` result: the version must be one of the 2025 ones
/// (the server's counter-offer is accepted).
pub(crate) fn accept_initialize(raw: &RawValue) -> Result<(String, Value), ClientError> {
    let init: Value = serde_json::from_str(raw.get())
        .map_err(|e| ClientError::protocol("the initialize result cannot be read").because(e))?;
    let offered = init["protocolVersion"].as_str().unwrap_or_default();
    if negotiate(offered) != offered {
        return Err(ClientError::protocol(format!(
            "the server offers protocol version {offered:?}, which this client does not speak"
        )));
    }
    Ok((offered.to_owned(), init))
}

impl Transport for DualEra {
    fn send(&self, out: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        // A server known to be modern, the common case once detected: its
        // wire's own future. The arms below (the era probe, a 2025
        // session's listen and task paths) make this function's future
        // large, and a box copies a future whole, on every request.
        if matches!(self.leg.get(), Some(Leg::Modern)) {
            match &self.wire {
                #[cfg(feature = "http")]
                Wire::Http { modern, .. } => return modern.send(out),
                Wire::Stdio { child, .. } => {
                    let child = Arc::clone(&lock(child));
                    return Box::pin(async move { child.send(out).await });
                }
            }
        }
        Box::pin(async move {
            let leg = self
                .leg
                .get_or_try_init(|| Box::pin(self.detect(&out)))
                .await?;
            match (leg, &self.wire) {
                #[cfg(feature = "http")]
                (Leg::Modern, Wire::Http { modern, .. }) => modern.send(out).await,
                (Leg::Modern, Wire::Stdio { child, .. }) => {
                    let child = Arc::clone(&lock(child));
                    child.send(out).await
                }
                (
                    Leg::Stdio {
                        version,
                        init,
                        child,
                    },
                    _,
                ) => {
                    if out.method == method::DISCOVER {
                        return Ok(Exchange::answered(Ok(Incoming::Result(discover_from(
                            init, version,
                        )))));
                    }
                    let out = legacy_outgoing(out, version)?;
                    let session = task::Session::Stdio(Arc::clone(child));
                    if out.method == method::SUBSCRIPTIONS_LISTEN {
                        return listen::listen(session, init, version.clone(), &out).await;
                    }
                    if self.needs_task(&session, init, version, &out).await? {
                        return task::call(session, &out, version.clone());
                    }
                    child.send(out).await
                }
                #[cfg(feature = "http")]
                (Leg::Http, Wire::Http { legacy, .. }) => {
                    if out.method == method::DISCOVER {
                        let version = legacy.version();
                        return Ok(Exchange::answered(Ok(Incoming::Result(discover_from(
                            &legacy.init_result(),
                            &version,
                        )))));
                    }
                    let version = legacy.version();
                    let out = legacy_outgoing(out, &version)?;
                    let session = task::Session::Http(Arc::clone(legacy));
                    if out.method == method::SUBSCRIPTIONS_LISTEN {
                        return listen::listen(session, &legacy.init_result(), version, &out).await;
                    }
                    if self
                        .needs_task(&session, &legacy.init_result(), &version, &out)
                        .await?
                    {
                        return task::call(session, &out, version);
                    }
                    legacy.send(out).await
                }
                #[cfg(feature = "http")]
                (Leg::Http, Wire::Stdio { .. }) => Err(ClientError::transport(
                    "no HTTP session on a stdio transport",
                )),
            }
        })
    }

    fn serve_roots(&self, roots: Arc<dyn Roots>) {
        match &self.wire {
            #[cfg(feature = "http")]
            Wire::Http { legacy, .. } => legacy.serve_roots(Arc::clone(&roots)),
            Wire::Stdio { child, .. } => lock(child).serve_roots(Arc::clone(&roots)),
        }
        *lock(&self.roots) = Some(roots);
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            match &self.wire {
                #[cfg(feature = "http")]
                Wire::Http { legacy, .. } => legacy.end().await,
                Wire::Stdio { child, .. } => {
                    let child = Arc::clone(&lock(child));
                    child.close().await;
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(v: &Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(v).unwrap()
    }

    #[test]
    fn only_a_discover_result_or_a_modern_error_means_modern() {
        assert!(era_of_answer(&Ok(raw(
            &json!({"supportedVersions": ["2026-07-28"], "capabilities": {}})
        ))));
        assert!(
            !era_of_answer(&Ok(raw(&json!({})))),
            "a bare result is a 2025 mock"
        );
        for modern in [-32022, -32021, -32020] {
            assert!(era_of_answer(&Err(ErrorObject::new(modern, "x"))));
        }
        for legacy in [-32601, -32602, -32600, -32000] {
            assert!(!era_of_answer(&Err(ErrorObject::new(legacy, "x"))));
        }
    }

    #[test]
    fn legacy_requests_lose_the_modern_meta_but_keep_the_progress_token() {
        let out = Outgoing {
            id: RequestId::Number(3),
            method: "tools/call".into(),
            name: Some("t".into()),
            protocol_version: version::LATEST.into(),
            header_params: Vec::new(),
            progress_token: None,
            body: json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "t",
                "_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}, "progressToken": "p"}}})
            .to_string(),
        };
        let legacy = legacy_outgoing(out.clone(), "2025-06-18").unwrap();
        let body: Value = serde_json::from_str(&legacy.body).unwrap();
        assert_eq!(body["params"]["_meta"], json!({"progressToken": "p"}));
        assert_eq!(legacy.protocol_version, "2025-06-18");
        let mut bare = out;
        bare.body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {PROTOCOL_VERSION_KEY: "2026-07-28"}}}).to_string();
        let body: Value =
            serde_json::from_str(&legacy_outgoing(bare, "2025-11-25").unwrap().body).unwrap();
        assert_eq!(body["params"], json!({}));
    }

    #[test]
    fn counter_offers_of_2025_versions_are_accepted_others_refused() {
        for v in ["2025-11-25", "2025-06-18", "2025-03-26"] {
            let (got, _) = accept_initialize(&raw(&json!({"protocolVersion": v}))).unwrap();
            assert_eq!(got, v);
        }
        assert!(accept_initialize(&raw(&json!({"protocolVersion": "2024-11-05"}))).is_err());
        assert!(accept_initialize(&raw(&json!({}))).is_err());
    }
}
