//! One upstream server: its transport (either era, probed or pinned), its
//! lists as last fetched, and its health. A stdio upstream that exits is
//! marked down — its entries leave the catalogue and its calls fail fast
//! with a retry hint — and started again with a growing backoff.
//!
//! Requests go out as raw JSON-RPC through a `tern-client` transport and
//! come back as raw JSON, so every member an upstream sends reaches the
//! client (a typed decode would drop members the types do not name).

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tern_client::legacy::DualEra;
use tern_client::transport::http::HttpTransport;
use tern_client::transport::stdio::{ChildProcess, ChildWatch, SpawnOptions};
use tern_client::transport::{Incoming, LiveRequest, Outgoing, ParamsParts, Transport};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::meta::{CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY};
use tern_protocol::mrtr::{InputKind, InputRequest, InputResponse};
use tern_protocol::{ClientCapabilities, Implementation, RequestId, ServerNotification, version};
use tokio::sync::Semaphore;

use crate::config::{EraPin, UpstreamConfig, Wire};

/// The first pause before a dead upstream is started again: 250 ms,
/// doubling to [`MAX_BACKOFF`].
pub const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest pause between restarts: 30 s.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Pages of one list read from an upstream at most (a bound on a server
/// that never stops paging).
pub const MAX_PAGES: usize = 100;

/// What the gateway can relay, declared to a 2025 upstream at
/// `initialize`: elicitation (form and URL), sampling, roots. Each live
/// question is then checked against what the *current* downstream request
/// declared ([`crate::bridge`]).
pub fn relayable() -> ClientCapabilities {
    ClientCapabilities::default()
        .with_elicitation_form()
        .with_elicitation_url()
        .with_sampling()
        .with_roots()
}

/// What an upstream lists, as it sent it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Listed {
    /// `tools/list`, every page.
    pub tools: Vec<Value>,
    /// `prompts/list`, every page.
    pub prompts: Vec<Value>,
    /// `resources/list`, every page.
    pub resources: Vec<Value>,
    /// `resources/templates/list`, every page.
    pub templates: Vec<Value>,
    /// The least `ttlMs` of the pages.
    pub ttl_ms: Option<u64>,
    /// A page said `cacheScope: private`.
    pub private: bool,
    /// The era it speaks.
    pub era: String,
}

/// What a relayed request carries besides its params.
#[derive(Default)]
pub struct Extras<'a> {
    /// `Mcp-Param-*` headers (name after the prefix, encoded value).
    pub header_params: Vec<(String, String)>,
    /// Ask the upstream for progress (the client asked the gateway).
    pub progress: bool,
    /// The log level the client asked for, asked of the upstream in turn.
    pub log_level: Option<tern_protocol::logging::LoggingLevel>,
    /// The request's `arguments`, shared with the request the gateway
    /// serves rather than copied into the params (in place of any there).
    pub arguments: Option<&'a Value>,
    /// Where the request's notifications go (progress, logs).
    pub on_notification: Option<&'a (dyn Fn(ServerNotification) + Send + Sync)>,
    /// Where a 2025 upstream's live questions go (the era bridge,
    /// [`crate::bridge`]); `None`: answered by the gateway as undeclared.
    pub on_live: Option<&'a (dyn Fn(LiveRequest) + Send + Sync)>,
    /// How long the request may take in place of the upstream's `timeout`
    /// (a bridged call waits for its client's answers too).
    pub timeout: Option<Duration>,
    /// Told once the request goes out, after any wait for a place under the
    /// upstream's `concurrency` cap (the era bridge starts its own clock on
    /// the upstream's work then).
    pub on_sent: Option<&'a (dyn Fn() + Send + Sync)>,
}

impl std::fmt::Debug for Extras<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extras")
            .field("header_params", &self.header_params.len())
            .field("progress", &self.progress)
            .finish_non_exhaustive()
    }
}

/// How an upstream is doing.
#[derive(Debug, Clone)]
enum Health {
    /// Never reached yet.
    Starting,
    Up,
    /// Down since `since`; tried again at `retry_at`.
    Down {
        reason: String,
        retry_at: Instant,
    },
}

struct Link {
    transport: Arc<dyn Transport>,
    watch: Option<ChildWatch>,
}

/// One upstream (module docs).
pub struct Upstream {
    config: UpstreamConfig,
    info: Implementation,
    /// `info` as JSON, written once: every relayed request carries it.
    info_json: Box<RawValue>,
    link: Mutex<Option<Arc<Link>>>,
    health: Mutex<Health>,
    listed: Mutex<Option<Arc<Listed>>>,
    ids: AtomicI64,
    permits: Option<Semaphore>,
    /// [`Self::close`] was called: no more restarts.
    closing: std::sync::atomic::AtomicBool,
    /// `tern login`'s grants, for `"auth": "login"`.
    logins: Option<Arc<dyn tern_client::auth::TokenStore>>,
    /// Requests sent for a downstream request that is gone (a followed
    /// task's `tasks/cancel`): [`Self::close`] lets them finish first.
    parting: Mutex<tokio::task::JoinSet<()>>,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never its headers or environment: credentials live there.
        f.debug_struct("Upstream")
            .field("name", &self.config.name)
            .field("health", &*lock(&self.health))
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A request to an upstream that is down: at once, with when to try again.
fn unavailable(name: &str, reason: &str, retry_in: Duration) -> ErrorObject {
    let ms = u64::try_from(retry_in.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    ErrorObject::new(
        code::INTERNAL_ERROR,
        format!("The upstream server `{name}` is unavailable ({reason}); try again in {ms} ms"),
    )
    .with_data(json!({"upstream": name, "retryAfterMs": ms}))
}

impl Upstream {
    /// An upstream, not yet connected ([`Self::connect`]).
    pub fn new(config: UpstreamConfig, info: Implementation) -> Self {
        let permits = config.concurrency.map(Semaphore::new);
        let info_json =
            serde_json::value::to_raw_value(&info).unwrap_or_else(|_| RawValue::NULL.to_owned());
        Self {
            config,
            info,
            info_json,
            link: Mutex::new(None),
            health: Mutex::new(Health::Starting),
            listed: Mutex::new(None),
            ids: AtomicI64::new(1),
            permits,
            closing: std::sync::atomic::AtomicBool::new(false),
            logins: None,
            parting: Mutex::default(),
        }
    }

    /// Reads the grant of an `"auth": "login"` upstream from `store`.
    #[must_use]
    pub fn with_logins(mut self, store: Option<Arc<dyn tern_client::auth::TokenStore>>) -> Self {
        self.logins = store;
        self
    }

    /// The OAuth of an `"auth": "login"` upstream at `url` (its grant
    /// checked now: none is an error saying to log in).
    fn login(
        &self,
        url: &str,
        tls: Option<&tern_client::tls::TlsOptions>,
    ) -> Result<Option<tern_client::auth::OAuth>, String> {
        if !self.config.login {
            return Ok(None);
        }
        let store = self
            .logins
            .clone()
            .ok_or("`auth: login` needs the gateway's login store")?;
        let oauth = crate::credentials::login(url, store, tls).map_err(|e| e.to_string())?;
        if !oauth.has_grant() {
            return Err(format!(
                "no login for {url}: run `tern login {url}` where the gateway runs"
            ));
        }
        Ok(Some(oauth))
    }

    /// Its configuration.
    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// It answered its last connection.
    pub fn is_up(&self) -> bool {
        !self.is_closed() && matches!(*lock(&self.health), Health::Up)
    }

    /// It was closed ([`Self::close`]): stopped for good.
    pub fn is_closed(&self) -> bool {
        self.closing.load(Ordering::SeqCst)
    }

    /// The fail-fast error a call gets now (the upstream is down or not yet
    /// started), or `None` when it is up: checked before a leg is claimed,
    /// so that a leg never sent leaves no record.
    pub fn unavailable_now(&self) -> Option<ErrorObject> {
        if let Health::Down { reason, retry_at } = &*lock(&self.health) {
            let retry_in = retry_at.saturating_duration_since(Instant::now());
            return Some(unavailable(&self.config.name, reason, retry_in));
        }
        if lock(&self.link).is_none() {
            return Some(unavailable(&self.config.name, "not started", FIRST_BACKOFF));
        }
        None
    }

    /// Why it is down, if it is.
    pub fn down_reason(&self) -> Option<String> {
        match &*lock(&self.health) {
            Health::Down { reason, .. } => Some(reason.clone()),
            Health::Starting => Some("not started".into()),
            Health::Up => None,
        }
    }

    /// What it listed when it last came up, up or down.
    pub fn last_listed(&self) -> Option<Arc<Listed>> {
        lock(&self.listed).clone()
    }

    /// What it listed when it last came up (`None` while down).
    pub fn listed(&self) -> Option<Arc<Listed>> {
        if self.is_up() {
            lock(&self.listed).clone()
        } else {
            None
        }
    }

    fn open_transport(&self) -> Result<Link, String> {
        let tls = self
            .config
            .ca_file
            .as_ref()
            .map(|ca| tern_client::tls::TlsOptions::new().with_ca_file(ca));
        let failed = |e: tern_client::ClientError| e.to_string();
        match &self.config.wire {
            Wire::Stdio { command, args, env } => {
                let mut options = SpawnOptions::default();
                for (k, v) in env {
                    options = options.env(k, v);
                }
                let name = self.config.name.clone();
                options.on_stderr = Some(Arc::new(move |line: &str| {
                    tracing::info!(upstream = %name, "{line}");
                }));
                if self.config.era == Some(EraPin::Modern) {
                    let child =
                        ChildProcess::spawn_with_options(command, args, options).map_err(failed)?;
                    let watch = Some(child.watch());
                    return Ok(Link {
                        transport: Arc::new(child),
                        watch,
                    });
                }
                let mut dual =
                    DualEra::stdio_with_options(command, args, options).map_err(failed)?;
                if self.config.era == Some(EraPin::Legacy) {
                    dual = dual.assume_legacy();
                }
                let watch = dual.watch();
                Ok(Link {
                    transport: Arc::new(dual),
                    watch,
                })
            }
            Wire::Http { url, headers } => {
                let login = self.login(url, tls.as_ref())?;
                if self.config.era == Some(EraPin::Modern) {
                    let mut t = HttpTransport::new(url).map_err(failed)?;
                    for (k, v) in headers {
                        t = t.with_header(k.clone(), v.clone());
                    }
                    if let Some(tls) = &tls {
                        t = t.with_tls(tls).map_err(failed)?;
                    }
                    if let Some(oauth) = login {
                        t = t.with_oauth(oauth).map_err(failed)?;
                    }
                    return Ok(Link {
                        transport: Arc::new(t),
                        watch: None,
                    });
                }
                let mut t = DualEra::http(url).map_err(failed)?;
                for (k, v) in headers {
                    t = t.with_header(k.clone(), v.clone());
                }
                if let Some(tls) = &tls {
                    t = t.with_tls(tls).map_err(failed)?;
                }
                if let Some(oauth) = login {
                    t = t.with_oauth(oauth).map_err(failed)?;
                }
                if self.config.era == Some(EraPin::Legacy) {
                    t = t.assume_legacy();
                }
                Ok(Link {
                    transport: Arc::new(t),
                    watch: None,
                })
            }
        }
    }

    /// Starts (or starts again) the upstream and reads its lists: it is up
    /// once they are read. The watch of a stdio child comes back, for
    /// [`Self::keep_up`].
    pub async fn connect(&self) -> Result<Option<ChildWatch>, String> {
        // One that cannot even be opened (a program not found, no login)
        // is down with that reason.
        let link = Arc::new(self.open_transport().inspect_err(|e| {
            self.mark_down(e, FIRST_BACKOFF);
        })?);
        // A 2025 upstream's `roots/list` outside any call: its `roots`.
        link.transport
            .serve_roots(Arc::new(tern_client::handler::StaticRoots(self.roots())));
        *lock(&self.link) = Some(Arc::clone(&link));
        match self.read_lists(&link).await {
            Ok(listed) => {
                *lock(&self.listed) = Some(Arc::new(listed));
                *lock(&self.health) = Health::Up;
                tracing::info!(upstream = %self.config.name, "upstream up");
                Ok(link.watch.clone())
            }
            Err(e) => {
                let reason = e.message.clone();
                self.mark_down(&reason, FIRST_BACKOFF);
                link.transport.close().await;
                Err(reason)
            }
        }
    }

    fn mark_down(&self, reason: &str, retry_in: Duration) {
        tracing::warn!(upstream = %self.config.name, %reason, "upstream down");
        crate::metrics::upstream_down(&self.config.name);
        *lock(&self.health) = Health::Down {
            reason: reason.to_owned(),
            retry_at: Instant::now() + retry_in,
        };
    }

    /// Keeps the upstream up, for the gateway's life: while it is down it
    /// is started again after a pause that doubles up to [`MAX_BACKOFF`]
    /// (reset once it came up); a stdio child that exits marks it down, and
    /// so does an HTTP upstream that fails its health probe
    /// (`healthInterval`).
    /// `changed` is called each time it comes up or goes down (its entries
    /// join or leave the lists). `watch` is the child of a first
    /// [`Self::connect`] that succeeded, if any.
    pub async fn keep_up(
        self: Arc<Self>,
        mut watch: Option<ChildWatch>,
        changed: Arc<dyn Fn() + Send + Sync>,
    ) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.is_up() {
                let reason = match watch.take() {
                    Some(mut child) => {
                        let exit = child.exited().await;
                        exit.status.map_or_else(
                            || "its output closed".to_owned(),
                            |s| format!("it exited, {s}"),
                        )
                    }
                    // HTTP: nothing tells when it goes but a probe.
                    None => crate::health::until_unhealthy(&self).await,
                };
                if self.closing.load(Ordering::SeqCst) {
                    return;
                }
                self.mark_down(&reason, backoff);
                let link = lock(&self.link).take();
                if let Some(link) = link {
                    link.transport.close().await;
                }
                changed();
            }
            tokio::time::sleep(backoff).await;
            if self.closing.load(Ordering::SeqCst) {
                return;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            match self.connect().await {
                Ok(next) => {
                    watch = next;
                    backoff = FIRST_BACKOFF;
                    changed();
                }
                Err(e) => {
                    tracing::warn!(upstream = %self.config.name, error = %e, "start failed");
                    self.mark_down(&e, backoff);
                }
            }
        }
    }

    /// The `_meta` of a request to it: this revision, `capabilities` (a
    /// client's, forwarded: never more than it declared), the gateway's
    /// `clientInfo`.
    fn meta(&self, capabilities: &ClientCapabilities) -> Value {
        json!({
            PROTOCOL_VERSION_KEY: version::LATEST,
            CLIENT_CAPABILITIES_KEY: capabilities,
            CLIENT_INFO_KEY: self.info,
        })
    }

    async fn read_lists(&self, link: &Link) -> Result<Listed, ErrorObject> {
        let none = ClientCapabilities::default();
        // The first request's capabilities are what a 2025 upstream is
        // told at `initialize`: what the gateway can relay.
        let relayable = relayable();
        let discover = self
            .send(
                link,
                "server/discover",
                json!({"_meta": self.meta(&relayable)}),
            )
            .await?;
        let caps = &discover["capabilities"];
        let era = discover["supportedVersions"][0]
            .as_str()
            .unwrap_or(version::LATEST)
            .to_owned();
        let mut listed = Listed {
            era,
            ..Listed::default()
        };
        for (served, method, member) in [
            (caps.get("tools").is_some(), "tools/list", "tools"),
            (caps.get("prompts").is_some(), "prompts/list", "prompts"),
            (
                caps.get("resources").is_some(),
                "resources/list",
                "resources",
            ),
            (
                caps.get("resources").is_some(),
                "resources/templates/list",
                "resourceTemplates",
            ),
        ] {
            if !served {
                continue;
            }
            let mut items = Vec::new();
            let mut cursor: Option<String> = None;
            for _ in 0..MAX_PAGES {
                let mut params = json!({"_meta": self.meta(&none)});
                if let Some(c) = &cursor {
                    params["cursor"] = json!(c);
                }
                let page = self.send(link, method, params).await?;
                if let Some(list) = page[member].as_array() {
                    items.extend(list.iter().cloned());
                }
                if let Some(ttl) = page["ttlMs"].as_u64() {
                    listed.ttl_ms = Some(listed.ttl_ms.map_or(ttl, |t| t.min(ttl)));
                }
                listed.private |= page["cacheScope"] == "private";
                cursor = page["nextCursor"].as_str().map(str::to_owned);
                if cursor.is_none() {
                    break;
                }
            }
            match member {
                "tools" => listed.tools = items,
                "prompts" => listed.prompts = items,
                "resources" => listed.resources = items,
                _ => listed.templates = items,
            }
        }
        Ok(listed)
    }

    /// Sends `method` with `params` (its `_meta` included) to the upstream
    /// and returns its result as it sent it. While it is down: at once,
    /// with a retry hint. Its lost connection after the request went out,
    /// or no answer within its timeout: "outcome unknown", never a second
    /// send.
    pub async fn request(
        &self,
        method: &str,
        params: Value,
        capabilities: &ClientCapabilities,
    ) -> Result<Value, ErrorObject> {
        self.relay(method, params, capabilities, Extras::default())
            .await
    }

    /// [`Self::request`] with `extras`: the `Mcp-Param-*` headers of the
    /// call, a progress token, and where the request's notifications go.
    ///
    /// Each runs in an `upstream` span and is counted ([`crate::metrics`]).
    pub async fn relay(
        &self,
        method: &str,
        params: Value,
        capabilities: &ClientCapabilities,
        extras: Extras<'_>,
    ) -> Result<Value, ErrorObject> {
        let (written, _) = self
            .relay_written(method, params, capabilities, extras)
            .await?;
        self.decode(&written)
    }

    /// [`Self::relay`], the result as the upstream wrote it (undecoded),
    /// with the kind its `resultType` names.
    pub async fn relay_written(
        &self,
        method: &str,
        params: Value,
        capabilities: &ClientCapabilities,
        extras: Extras<'_>,
    ) -> Result<(Box<RawValue>, Kind), ErrorObject> {
        use tracing::Instrument as _;
        let span = tracing::info_span!(
            "upstream",
            upstream = %self.config.name,
            method = method,
            outcome = tracing::field::Empty,
        );
        let started = Instant::now();
        // Boxed: the send's future (the transport's, the timeout's) is
        // large, and every caller's future would carry it and move it.
        let answer = Box::pin(self.relay_once(method, params, capabilities, extras))
            .instrument(span.clone())
            .await
            .map(|written| {
                let kind = Kind::of(&written);
                (written, kind)
            });
        let outcome = crate::metrics::outcome(answer.as_ref().map(|(_, kind)| kind.label()));
        span.record("outcome", outcome);
        crate::metrics::upstream_request(&self.config.name, method, outcome, started.elapsed());
        answer
    }

    async fn relay_once(
        &self,
        method: &str,
        params: Value,
        capabilities: &ClientCapabilities,
        extras: Extras<'_>,
    ) -> Result<Box<RawValue>, ErrorObject> {
        if let Health::Down { reason, retry_at } = &*lock(&self.health) {
            let retry_in = retry_at.saturating_duration_since(Instant::now());
            return Err(unavailable(&self.config.name, reason, retry_in));
        }
        let Some(link) = lock(&self.link).clone() else {
            return Err(unavailable(&self.config.name, "not started", FIRST_BACKOFF));
        };
        let progress_token = extras.progress.then(|| {
            let n = self.ids.fetch_add(1, Ordering::Relaxed);
            format!("tern-gateway-{n}")
        });
        let id = RequestId::Number(self.ids.fetch_add(1, Ordering::Relaxed));
        let meta = RelayedMeta {
            protocol_version: version::LATEST,
            client_capabilities: capabilities,
            client_info: &self.info_json,
            log_level: extras.log_level,
            progress_token: progress_token.as_deref(),
        };
        let Some(members) = params.as_object() else {
            return Err(ErrorObject::new(
                code::INTERNAL_ERROR,
                format!("the {method} request's params are not an object"),
            ));
        };
        // The params' `_meta` written from `meta`, and the arguments from
        // the request's own, with no tree for either.
        let parts = ParamsParts {
            members,
            arguments: extras.arguments,
            meta: &meta,
            protocol_version: version::LATEST,
            progress_token: progress_token
                .as_deref()
                .and_then(|t| serde_json::to_string(t).ok()),
        };
        let outgoing = Outgoing::from_parts(id, method, parts, extras.header_params)
            .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
        let timeout = extras.timeout.unwrap_or(self.config.timeout);
        // A place under the concurrency cap is waited for at most the
        // upstream's timeout (not a held call's longer one; held calls keep
        // their places): then it is unavailable, nothing having been sent.
        let _permit = match &self.permits {
            Some(p) => match tokio::time::timeout(self.config.timeout, p.acquire()).await {
                Ok(Ok(permit)) => Some(permit),
                Ok(Err(_)) => {
                    return Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "the gateway is shutting down",
                    ));
                }
                Err(_) => {
                    return Err(unavailable(
                        &self.config.name,
                        "at its concurrency cap",
                        FIRST_BACKOFF,
                    ));
                }
            },
            None => None,
        };
        if let Some(sent) = extras.on_sent {
            sent();
        }
        let sending = self.send_outgoing(&link, outgoing, extras.on_notification, extras.on_live);
        match tokio::time::timeout(timeout, sending).await {
            Ok(answer) => answer,
            Err(_) => Err(self.timed_out(timeout)),
        }
    }

    /// A request it did not answer within `timeout`: sent, so its outcome
    /// is unknown.
    pub(crate) fn timed_out(&self, timeout: Duration) -> ErrorObject {
        ErrorObject::new(
            tern_server::error::codes::OUTCOME_UNKNOWN,
            format!(
                "The upstream server `{}` did not answer within {} s; the outcome is unknown",
                self.config.name,
                timeout.as_secs_f64()
            ),
        )
    }

    async fn send(&self, link: &Link, method: &str, params: Value) -> Result<Value, ErrorObject> {
        let written = self
            .send_with(link, method, params, Vec::new(), None, None)
            .await?;
        self.decode(&written)
    }

    /// An upstream's result as a tree.
    pub(crate) fn decode(&self, written: &RawValue) -> Result<Value, ErrorObject> {
        serde_json::from_str(written.get()).map_err(|e| {
            ErrorObject::new(
                code::INTERNAL_ERROR,
                format!(
                    "The upstream server `{}` sent a result the gateway cannot read: {e}",
                    self.config.name
                ),
            )
        })
    }

    async fn send_with(
        &self,
        link: &Link,
        method: &str,
        params: Value,
        header_params: Vec<(String, String)>,
        on_notification: Option<&(dyn Fn(ServerNotification) + Send + Sync)>,
        on_live: Option<&(dyn Fn(LiveRequest) + Send + Sync)>,
    ) -> Result<Box<RawValue>, ErrorObject> {
        // The params are the gateway's own, or those of a request
        // tern-server already decoded: written once as they are, not
        // decoded again (the upstream judges its own params).
        let id = RequestId::Number(self.ids.fetch_add(1, Ordering::Relaxed));
        let outgoing = Outgoing::from_json(id, method, &params, header_params)
            .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))?;
        self.send_outgoing(link, outgoing, on_notification, on_live)
            .await
    }

    /// Sends `outgoing` and reads its exchange to its result.
    async fn send_outgoing(
        &self,
        link: &Link,
        outgoing: Outgoing,
        on_notification: Option<&(dyn Fn(ServerNotification) + Send + Sync)>,
        on_live: Option<&(dyn Fn(LiveRequest) + Send + Sync)>,
    ) -> Result<Box<RawValue>, ErrorObject> {
        let lost = |why: String| {
            ErrorObject::new(
                tern_server::error::codes::OUTCOME_UNKNOWN,
                format!(
                    "The upstream server `{}` was lost ({why}); the outcome is unknown",
                    self.config.name
                ),
            )
        };
        let mut exchange =
            link.transport
                .send(outgoing)
                .await
                .map_err(|e| match e.rpc_error() {
                    Some(rpc) => rpc.clone(),
                    None if e.is_transport() => {
                        unavailable(&self.config.name, &e.to_string(), FIRST_BACKOFF)
                    }
                    None => ErrorObject::new(code::INTERNAL_ERROR, e.to_string()),
                })?;
        loop {
            match exchange.next().await {
                None => return Err(lost("the connection closed".into())),
                Some(Err(e)) => {
                    return Err(match e.rpc_error() {
                        Some(rpc) => rpc.clone(),
                        None => lost(e.to_string()),
                    });
                }
                Some(Ok(Incoming::Result(raw))) => {
                    exchange.disarm();
                    return Ok(raw);
                }
                Some(Ok(Incoming::Error(e))) => {
                    exchange.disarm();
                    return Err(e);
                }
                Some(Ok(Incoming::Notification(n))) => {
                    if let Some(tell) = on_notification {
                        tell(n);
                    }
                }
                Some(Ok(Incoming::Request(live))) => match on_live {
                    Some(take) => take(*live),
                    None => self.answer_undeclared(*live),
                },
            }
        }
    }

    /// It speaks 2025-11-25 (its live questions go through the era
    /// bridge, [`crate::bridge`]).
    pub fn is_legacy(&self) -> bool {
        lock(&self.listed)
            .as_ref()
            .is_some_and(|l| l.era != version::LATEST)
    }

    /// A 2025 upstream's live request the gateway answers itself (the
    /// downstream request did not declare it, or none is there): an
    /// elicitation is cancelled, a sampling request is an error,
    /// `roots/list` is the configured `roots`.
    pub fn answer_undeclared(&self, live: LiveRequest) {
        let answer = match live.request() {
            InputRequest::Elicitation(_) => {
                InputResponse::decode_as(InputKind::Elicitation, &json!({"action": "cancel"}))
                    .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string()))
            }
            InputRequest::Roots(_) => Ok(InputResponse::Roots(
                tern_protocol::roots::ListRootsResult {
                    roots: self.roots(),
                },
            )),
            InputRequest::Sampling(_) => Err(ErrorObject::new(
                code::INVALID_REQUEST,
                "The gateway's client did not declare sampling",
            )),
        };
        tracing::info!(upstream = %self.config.name, "a live request answered by the gateway");
        live.respond(answer);
    }

    /// Sends `method` (a `subscriptions/listen`) with no timeout, its
    /// notifications to `tell`, until it ends; dropping the future cancels
    /// it upstream.
    pub(crate) async fn stream(
        &self,
        method: &str,
        mut params: Value,
        capabilities: &ClientCapabilities,
        tell: &(dyn Fn(ServerNotification) + Send + Sync),
    ) -> Result<Value, ErrorObject> {
        let Some(link) = lock(&self.link).clone().filter(|_| self.is_up()) else {
            return Err(unavailable(&self.config.name, "not up", FIRST_BACKOFF));
        };
        params["_meta"] = self.meta(capabilities);
        let written = self
            .send_with(&link, method, params, Vec::new(), Some(tell), None)
            .await?;
        self.decode(&written)
    }

    /// One health probe (`server/discover`, within its timeout): `Err` with
    /// why when it cannot be reached; an answer, even an error, is health.
    pub(crate) async fn probe(&self) -> Result<(), String> {
        let Some(link) = lock(&self.link).clone() else {
            return Err("not started".into());
        };
        let params = json!({"_meta": self.meta(&ClientCapabilities::default())});
        let probe = self.send(&link, "server/discover", params);
        match tokio::time::timeout(self.config.timeout, probe).await {
            Err(_) => Err("no answer to its health probe".into()),
            Ok(Err(e))
                if e.code == tern_server::error::codes::OUTCOME_UNKNOWN
                    || e.data
                        .as_ref()
                        .is_some_and(|d| d.get("retryAfterMs").is_some()) =>
            {
                Err(e.message)
            }
            Ok(_) => Ok(()),
        }
    }

    /// Reads its lists again (it said one changed), on the link it has.
    pub(crate) async fn reread(&self) -> Result<(), ErrorObject> {
        let Some(link) = lock(&self.link).clone() else {
            return Ok(());
        };
        let listed = self.read_lists(&link).await?;
        *lock(&self.listed) = Some(Arc::new(listed));
        Ok(())
    }

    /// Its configured `roots`, as roots.
    pub fn roots(&self) -> Vec<tern_protocol::roots::Root> {
        self.config
            .roots
            .iter()
            .map(|uri| tern_protocol::roots::Root {
                uri: uri.clone(),
                name: None,
                meta: None,
            })
            .collect()
    }

    /// `method` sent in the background for a downstream request that has
    /// gone (its future dropped, so nothing awaits the answer): a followed
    /// task's `tasks/cancel`. [`Self::close`] waits for these, at most the
    /// upstream's timeout, before it closes the link, so a shutdown with
    /// calls in flight does not leave their tasks running upstream.
    pub(crate) fn send_parting(
        self: &Arc<Self>,
        method: &'static str,
        params: Value,
        capabilities: ClientCapabilities,
    ) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let upstream = Arc::clone(self);
        let mut parting = lock(&self.parting);
        // The ones already answered, reaped so the set stays small.
        while parting.try_join_next().is_some() {}
        parting.spawn_on(
            async move {
                let _ = upstream.request(method, params, &capabilities).await;
            },
            &runtime,
        );
    }

    /// Stops it (a stdio child is asked to exit) for good, once the
    /// requests sent for calls already gone (a dropped follower's
    /// `tasks/cancel`) are answered, at most the upstream's timeout.
    pub async fn close(&self) {
        self.closing.store(true, Ordering::SeqCst);
        let mut parting = std::mem::take(&mut *lock(&self.parting));
        let drained = async { while parting.join_next().await.is_some() {} };
        if tokio::time::timeout(self.config.timeout, drained)
            .await
            .is_err()
        {
            tracing::warn!(upstream = %self.config.name, "closing with requests for gone calls unanswered");
        }
        let link = lock(&self.link).take();
        if let Some(link) = link {
            link.transport.close().await;
        }
    }
}

/// The `_meta` of a relayed request: the downstream request's
/// capabilities, never more, and the gateway's own description.
#[derive(serde::Serialize)]
struct RelayedMeta<'a> {
    #[serde(rename = "io.modelcontextprotocol/protocolVersion")]
    protocol_version: &'a str,
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
    client_capabilities: &'a ClientCapabilities,
    #[serde(rename = "io.modelcontextprotocol/clientInfo")]
    client_info: &'a RawValue,
    #[serde(
        rename = "io.modelcontextprotocol/logLevel",
        skip_serializing_if = "Option::is_none"
    )]
    log_level: Option<tern_protocol::logging::LoggingLevel>,
    #[serde(rename = "progressToken", skip_serializing_if = "Option::is_none")]
    progress_token: Option<&'a str>,
}

/// What an upstream's result says it is, read from its `resultType` as a
/// decoded tree reads it (the last, if named twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// No `resultType`, `complete`, one the gateway does not know, or not
    /// an object at all: a result to pass on (tern-server refuses one that
    /// is not an object).
    Complete,
    /// `input_required`: questions for the client.
    InputRequired,
    /// `task`: a task was created.
    Task,
}

/// Where a member named `resultType` may begin.
static RESULT_TYPE: std::sync::LazyLock<memchr::memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memchr::memmem::Finder::new(b"\"resultType\""));

impl Kind {
    /// Its outcome label in the gateway's metrics ([`crate::metrics`]).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::InputRequired => "input_required",
            Self::Task => "task",
            Self::Complete => "ok",
        }
    }

    /// The kind `written` names: [`Self::Complete`] read from its bytes
    /// when they leave no doubt (no `"resultType"` in them, or one only,
    /// saying `complete`, and no `\u` escape that could spell another),
    /// else from its `resultType` decoded: alone, or, when that cannot be
    /// read alone (named twice, not a string, not an object), from the
    /// whole tree.
    pub fn of(written: &RawValue) -> Self {
        if Self::surely_complete(written.get()) {
            return Self::Complete;
        }
        Self::read(written).unwrap_or_else(|| {
            serde_json::from_str::<Value>(written.get()).map_or(Self::Complete, |tree| {
                Self::named(tree["resultType"].as_str())
            })
        })
    }

    /// The kind a `resultType` names.
    fn named(result_type: Option<&str>) -> Self {
        match result_type {
            Some("input_required") => Self::InputRequired,
            Some("task") => Self::Task,
            _ => Self::Complete,
        }
    }

    /// The text names no other kind, by its bytes: no `"resultType"` in it,
    /// or one only, followed by `: "complete"`, and no `\u` escape.
    ///
    /// Why that is sure: a result's kind is other than complete only when
    /// its own `resultType` member says so. Written without escapes, that
    /// member's name is the bytes `"resultType"` — quote, name, quote —
    /// followed by a colon: so it is the one match, and it does not say
    /// `complete`. A `\u` escape could spell the name otherwise (no other
    /// escape yields a letter), so text with one is decoded. A match that
    /// is not that member (a string value, a nested member, a quote
    /// escaped inside a string) only makes this say "not sure".
    fn surely_complete(text: &str) -> bool {
        let bytes = text.as_bytes();
        let mut found = RESULT_TYPE.find_iter(bytes);
        let Some(at) = found.next() else {
            return memchr::memmem::find(bytes, b"\\u").is_none();
        };
        if found.next().is_some() || memchr::memmem::find(bytes, b"\\u").is_some() {
            return false;
        }
        let rest = bytes[at + b"\"resultType\"".len()..].trim_ascii_start();
        let Some(rest) = rest.strip_prefix(b":") else {
            return false;
        };
        rest.trim_ascii_start().starts_with(b"\"complete\"")
    }

    /// The kind `written`'s `resultType` names, decoded alone; `None` when
    /// it cannot be (see [`Self::of`]).
    fn read(written: &RawValue) -> Option<Self> {
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(rename = "resultType", borrow)]
            result_type: Option<std::borrow::Cow<'a, str>>,
        }
        serde_json::from_str::<Head<'_>>(written.get())
            .ok()
            .map(|head| Self::named(head.result_type.as_deref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(text: &str) -> Kind {
        Kind::of(&RawValue::from_string(text.to_owned()).unwrap())
    }

    #[test]
    fn a_results_kind_is_read_from_its_result_type_alone() {
        assert_eq!(
            kind(r#"{"content":[{"type":"text","text":"x"}]}"#),
            Kind::Complete
        );
        assert_eq!(
            kind(r#"{"resultType":"complete","x":{"resultType":"task"}}"#),
            Kind::Complete
        );
        assert_eq!(kind(r#"{"resultType":"something_new"}"#), Kind::Complete);
        assert_eq!(kind(r#"{"resultType":null}"#), Kind::Complete);
        assert_eq!(
            kind(r#"{"inputRequests":{},"resultType":"input_required"}"#),
            Kind::InputRequired
        );
        assert_eq!(kind(r#"{"resultType":"task","taskId":"t"}"#), Kind::Task);
        assert_eq!(
            kind(r#"{"resultType":"input\u005frequired"}"#),
            Kind::InputRequired
        );
    }

    #[test]
    fn common_results_are_known_complete_by_their_bytes() {
        for text in [
            r#"{"resultType":"complete","content":[{"type":"text","text":"hello"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"bench","version":"1.0.0"}}}"#,
            r#"{"content":[],"isError":true}"#,
            r#"{ "resultType" : "complete", "contents": [] }"#,
        ] {
            assert!(Kind::surely_complete(text), "{text}");
        }
        for text in [
            r#"{"resultType":"input_required","inputRequests":{}}"#,
            r#"{"resultType":"task","taskId":"t"}"#,
            r#"{"a":{"resultType":"complete"},"resultType":"task"}"#,
            r#"{"result\u0054ype":"task"}"#,
            r#"{"resultType":"completed"}"#,
            r#"{"resultType":7}"#,
        ] {
            assert!(!Kind::surely_complete(text), "{text}");
        }
    }

    mod generated {
        use std::fmt::Write as _;

        use proptest::prelude::*;
        use serde_json::Value;

        use super::super::Kind;

        /// A JSON text of an object, written by hand so that names may
        /// repeat and be spelled with `\u` escapes, with odd whitespace.
        #[derive(Debug, Clone)]
        enum Node {
            Leaf(&'static str),
            Text(String),
            Object(Vec<(String, bool, Node)>),
        }

        fn write(node: &Node, out: &mut String, gap: &str) {
            match node {
                Node::Leaf(l) => out.push_str(l),
                Node::Text(t) => out.push_str(&serde_json::to_string(t).unwrap()),
                Node::Object(members) => {
                    out.push('{');
                    for (i, (name, escaped, value)) in members.iter().enumerate() {
                        if i > 0 {
                            out.push(',');
                        }
                        out.push_str(gap);
                        if *escaped {
                            // Every character as a \u escape.
                            out.push('"');
                            for c in name.chars() {
                                let _ = write!(out, "\\u{:04x}", u32::from(c));
                            }
                            out.push('"');
                        } else {
                            out.push_str(&serde_json::to_string(name).unwrap());
                        }
                        out.push_str(gap);
                        out.push(':');
                        out.push_str(gap);
                        write(value, out, gap);
                    }
                    out.push('}');
                }
            }
        }

        fn node() -> impl Strategy<Value = Node> {
            let leaf = prop_oneof![
                Just(Node::Leaf("1")),
                Just(Node::Leaf("null")),
                Just(Node::Leaf("[\"resultType\",\"task\"]")),
                prop_oneof![
                    Just("complete"),
                    Just("input_required"),
                    Just("task"),
                    Just("resultType"),
                    Just("x\"resultType\":\"task"),
                ]
                .prop_map(|t| Node::Text(t.to_owned())),
            ];
            leaf.prop_recursive(3, 16, 4, |inner| {
                prop::collection::vec((name(), any::<bool>(), inner), 0..4).prop_map(Node::Object)
            })
        }

        fn name() -> impl Strategy<Value = String> {
            prop_oneof![
                4 => Just("resultType".to_owned()),
                1 => Just("content".to_owned()),
                1 => Just("x\"resultType".to_owned()),
                1 => "[a-z]{0,3}",
            ]
        }

        /// A member's value: mostly a kind's name, so that kinds meet.
        fn value() -> impl Strategy<Value = Node> {
            prop_oneof![
                3 => prop_oneof![Just("complete"), Just("input_required"), Just("task")]
                    .prop_map(|t| Node::Text(t.to_owned())),
                1 => node(),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(2048))]

            /// Whatever the bytes, "surely complete" is never said of a
            /// result whose decoded `resultType` (the last, as the tree
            /// keeps it) names a kind the gateway must handle.
            #[test]
            fn surely_complete_is_never_wrong(
                members in prop::collection::vec((name(), any::<bool>(), value()), 0..5),
                gap in prop_oneof![Just(""), Just(" "), Just("\n\t ")],
            ) {
                let mut text = String::new();
                write(&Node::Object(members), &mut text, gap);
                let tree: Value = serde_json::from_str(&text).unwrap();
                let named = tree["resultType"].as_str().unwrap_or("");
                if Kind::surely_complete(&text) {
                    prop_assert!(named != "input_required" && named != "task", "{}", text);
                }
            }
        }
    }

    #[test]
    fn a_result_the_head_cannot_read_goes_to_the_tree() {
        // Named twice: which one a reader takes is its own choice, so the
        // gateway decodes it (the tree keeps the last) rather than pass it.
        let read = |t: &str| Kind::read(&RawValue::from_string(t.to_owned()).unwrap());
        let twice = r#"{"resultType":"complete","resultType":"input_required"}"#;
        assert_eq!(read(twice), None);
        assert_eq!(kind(twice), Kind::InputRequired);
        let twice = r#"{"resultType":"task","resultType":"complete"}"#;
        assert_eq!(kind(twice), Kind::Complete);
        assert_eq!(read(r#"{"resultType":7}"#), None);
        assert_eq!(kind(r#"{"resultType":7}"#), Kind::Complete);
        // Not an object: no kind to read. Passed on as complete, its
        // stamp refuses it (tern-server answers -32603), as the tree's does.
        assert_eq!(read("[1,2]"), None);
        assert_eq!(read("\"complete\""), None);
        assert_eq!(kind("[1,2]"), Kind::Complete);
    }
}
