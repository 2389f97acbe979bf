//! The gateway: its upstreams, the catalogue over them, and the
//! [`tern_server::relay::Relay`] that a tern server serves it through —
//! lists paged over the merged catalogue, calls routed to their upstream,
//! and questions relayed with the gateway's own sealed `requestState`
//! (`{"u": upstream, "s": its state}`, the upstream's state byte for byte,
//! absent when it sent none).

use std::sync::{Arc, Mutex, OnceLock, RwLock};

use serde_json::{Value, json};
use tern_protocol::error::ErrorObject;
use tern_protocol::result::CacheScope;
use tern_protocol::{
    ClientCapabilities, Implementation, InputRequests, ServerNotification, method,
};
use tern_server::relay::{ListKind, ListPage, ListRequest, Relay, RelayLeg, RelayOutcome};
use tern_server::replay::{BoxFuture, MemoryReplayStore, RecordKey, ReplayStore, Scope};
use tern_server::{Changes, ServerBuilder};

use crate::access;
use crate::bridge::{self, Bridge, BridgeOptions};
use crate::catalogue::{Catalogue, Strictness};
use crate::config::GatewayConfig;
use crate::cursor::Cursors;
use crate::dedupe;
use crate::tasked;
use crate::upstream::{Extras, Kind, Upstream};

/// The default page size of the merged lists: 100.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// How a gateway runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GatewayOptions {
    /// Its `serverInfo` (and the `clientInfo` upstreams see).
    pub info: Implementation,
    /// The merged lists' cursors: share the key between replicas.
    pub cursors: Cursors,
    /// Entries per page of a merged list.
    pub page_size: usize,
    /// Where `dedupe` upstreams' retries are claimed: memory for one
    /// process; share one (Redis) between replicas.
    pub replay: Arc<dyn ReplayStore>,
    /// Fleet mode: the lists do not vary per replica — a down upstream's
    /// entries (as it last listed them) stay listed, their calls fail fast.
    pub fleet: bool,
    /// Where the grants of `"auth": "login"` upstreams are read (`tern
    /// login`'s store for `tern gateway`); `None`: such an upstream is
    /// down, saying so.
    pub logins: Option<Arc<dyn tern_client::auth::TokenStore>>,
    /// How calls to 2025 upstreams that ask live are held ([`crate::bridge`]).
    pub bridge: BridgeOptions,
    /// Fleet mode: hands a retry to the replica that holds its call.
    pub handoff: Option<Arc<dyn bridge::Handoff>>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            info: Implementation::new("tern-gateway", env!("CARGO_PKG_VERSION")),
            cursors: Cursors::random(),
            page_size: DEFAULT_PAGE_SIZE,
            replay: Arc::new(MemoryReplayStore::default()),
            fleet: false,
            logins: None,
            bridge: BridgeOptions::default(),
            handoff: None,
        }
    }
}

impl GatewayOptions {
    /// Sets the `serverInfo`.
    #[must_use]
    pub fn info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }

    /// Sets the cursors' key.
    #[must_use]
    pub fn cursors(mut self, cursors: Cursors) -> Self {
        self.cursors = cursors;
        self
    }

    /// Sets the replay store `dedupe` upstreams' retries are claimed in.
    #[must_use]
    pub fn replay_store(mut self, store: Arc<dyn ReplayStore>) -> Self {
        self.replay = store;
        self
    }

    /// Fleet mode ([`Self::fleet`]): a down upstream's entries stay listed.
    #[must_use]
    pub fn fleet(mut self, on: bool) -> Self {
        self.fleet = on;
        self
    }

    /// Reads the grants of `"auth": "login"` upstreams from `store`.
    #[must_use]
    pub fn logins(mut self, store: Arc<dyn tern_client::auth::TokenStore>) -> Self {
        self.logins = Some(store);
        self
    }

    /// Sets how calls to 2025 upstreams that ask live are held: their TTL
    /// (also the relayed states' TTL) and the most per principal.
    #[must_use]
    pub fn held(mut self, ttl: std::time::Duration, per_principal: usize) -> Self {
        self.bridge.ttl = ttl;
        self.bridge.per_principal = per_principal.max(1);
        self
    }

    /// Hands retries of calls held by another replica to it (fleet mode).
    #[must_use]
    pub fn handoff(mut self, handoff: Arc<dyn bridge::Handoff>) -> Self {
        self.handoff = Some(handoff);
        self
    }

    /// Sets the page size (at least 1).
    #[must_use]
    pub fn page_size(mut self, size: usize) -> Self {
        self.page_size = size.max(1);
        self
    }
}

struct Inner {
    /// The file as last loaded; its upstreams are the slots' configs.
    config: RwLock<GatewayConfig>,
    options: GatewayOptions,
    /// One slot per upstream ever loaded, in the order first seen: an index
    /// stays the same upstream's for the process's life (task ids and
    /// routes hold it); a removed one stays, closed.
    upstreams: RwLock<Arc<Vec<Arc<Upstream>>>>,
    /// Serialises reloads.
    reloading: tokio::sync::Mutex<()>,
    catalogue: RwLock<Arc<Catalogue>>,
    changes: OnceLock<Changes>,
    /// Serialises rebuilds of the catalogue.
    rebuilding: Mutex<()>,
    /// Counts the catalogue's rebuilds.
    generation: tokio::sync::watch::Sender<u64>,
    /// What `subscriptions/listen` streams follow ([`crate::listen`]).
    listens: Arc<crate::listen::Listens>,
    /// Calls to 2025 upstreams held for their retries.
    bridge: Bridge,
}

/// A gateway in front of the upstreams of a [`GatewayConfig`]. Cheap to
/// clone.
///
/// ```no_run
/// # async fn run() -> Result<(), String> {
/// use tern_gateway::{Gateway, GatewayConfig, GatewayOptions};
///
/// let config = GatewayConfig::load("gateway.json".as_ref())?;
/// let gateway = Gateway::start(config, GatewayOptions::default()).await?;
/// let server = gateway
///     .server_builder()
///     .build()
///     .map_err(|e| e.to_string())?;
/// # let _ = server;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("upstreams", &self.slots())
            .finish_non_exhaustive()
    }
}

fn read<T>(l: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Gateway {
    /// Starts every upstream, probes its era and reads its lists, and builds
    /// the catalogue: a collision, or a name too long or outside
    /// `[A-Za-z0-9_.-]`, is an error naming it. An upstream that cannot be
    /// reached is not (it is tried again in the background, with backoff).
    pub async fn start(config: GatewayConfig, mut options: GatewayOptions) -> Result<Self, String> {
        if let Some(ttl) = config.held_ttl {
            options.bridge.ttl = ttl;
        }
        if let Some(n) = config.max_held_per_principal {
            options.bridge.per_principal = n;
        }
        let mut bridge = Bridge::new(options.bridge);
        if let Some(handoff) = &options.handoff {
            bridge = bridge.with_handoff(Arc::clone(handoff));
        }
        let upstreams: Vec<Arc<Upstream>> = config
            .upstreams
            .iter()
            .map(|c| {
                Arc::new(
                    Upstream::new(c.clone(), options.info.clone())
                        .with_logins(options.logins.clone()),
                )
            })
            .collect();
        let connected = futures_join(&upstreams).await;
        let gateway = Self {
            inner: Arc::new(Inner {
                config: RwLock::new(config),
                options,
                upstreams: RwLock::new(Arc::new(upstreams)),
                reloading: tokio::sync::Mutex::new(()),
                catalogue: RwLock::default(),
                changes: OnceLock::new(),
                rebuilding: Mutex::new(()),
                generation: tokio::sync::watch::Sender::new(0),
                listens: Arc::default(),
                bridge,
            }),
        };
        let catalogue = gateway.build_catalogue(None, Strictness::Refuse)?;
        *gateway
            .inner
            .catalogue
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(catalogue);
        for (upstream, watch) in gateway.slots().iter().zip(connected) {
            gateway.keep_up(upstream, watch);
            gateway.listen_at(upstream);
        }
        Ok(gateway)
    }

    /// Watches `upstream` (a stdio child, or one not reached) and restarts
    /// it with backoff, the catalogue rebuilt each time it comes or goes.
    fn keep_up(
        &self,
        upstream: &Arc<Upstream>,
        watch: Option<tern_client::transport::stdio::ChildWatch>,
    ) {
        let this = self.clone();
        let changed: Arc<dyn Fn() + Send + Sync> = Arc::new(move || this.rebuild());
        tokio::spawn(Arc::clone(upstream).keep_up(watch, changed));
    }

    /// Keeps a listen stream open at `upstream` ([`crate::listen`]).
    fn listen_at(&self, upstream: &Arc<Upstream>) {
        let Some(index) = self.slots().iter().position(|u| Arc::ptr_eq(u, upstream)) else {
            return;
        };
        let (gateway, again) = (self.clone(), Arc::clone(upstream));
        let hooks = crate::listen::Hooks {
            updated: Arc::new({
                let gateway = self.clone();
                move |uri| {
                    if let Some(changes) = gateway.inner.changes.get() {
                        changes.deliver(tern_server::Change::ResourceUpdated(uri));
                    }
                }
            }),
            lists_changed: Arc::new(move || {
                let (gateway, upstream) = (gateway.clone(), Arc::clone(&again));
                tokio::spawn(async move {
                    match upstream.reread().await {
                        Ok(()) => gateway.rebuild(),
                        Err(e) => {
                            tracing::warn!(upstream = %upstream.name(), error = %e.message, "lists not read again");
                        }
                    }
                });
            }),
            generations: self.generations(),
        };
        tokio::spawn(crate::listen::watch(
            Arc::clone(&self.inner.listens),
            index,
            Arc::clone(upstream),
            hooks,
        ));
    }

    /// The resource URIs the upstreams acknowledged following for the
    /// gateway's `subscriptions/listen` streams, as it changes.
    pub fn following(&self) -> tokio::sync::watch::Receiver<std::collections::BTreeSet<String>> {
        self.inner.listens.following()
    }

    /// Every slot, closed ones included, by index.
    fn slots(&self) -> Arc<Vec<Arc<Upstream>>> {
        Arc::clone(&read(&self.inner.upstreams))
    }

    /// Loads `config` in place of the running one (`SIGHUP` for `tern
    /// gateway`): an upstream no longer named is closed and leaves the lists,
    /// a new one is started, a changed one (any key) is restarted with its new
    /// keys, an unchanged one keeps running; then the catalogue is rebuilt
    /// (a clash with an entry already listed drops the newcomer, logged) and
    /// list-changed is sent. Its index stays each upstream's, so task ids and
    /// states issued before stay valid for it.
    pub async fn reload(&self, config: GatewayConfig) {
        let _one = self.inner.reloading.lock().await;
        let old = self.slots();
        let old_configs = read(&self.inner.config).upstreams.clone();
        let mut slots: Vec<Arc<Upstream>> = old.to_vec();
        let mut configs = old_configs.clone();
        let mut started = Vec::new();
        for (i, previous) in old_configs.iter().enumerate() {
            let next = config.upstreams.iter().find(|c| c.name == previous.name);
            match next {
                Some(next) if next == previous && !old[i].is_closed() => {}
                Some(next) => {
                    old[i].close().await;
                    let fresh = Arc::new(
                        Upstream::new(next.clone(), self.inner.options.info.clone())
                            .with_logins(self.inner.options.logins.clone()),
                    );
                    slots[i] = Arc::clone(&fresh);
                    configs[i] = next.clone();
                    started.push(fresh);
                }
                None => {
                    old[i].close().await;
                    // Closed: it lists nothing and routes nothing.
                    configs[i].uri_prefixes.clear();
                }
            }
        }
        for next in &config.upstreams {
            if !old_configs.iter().any(|c| c.name == next.name) {
                let fresh = Arc::new(
                    Upstream::new(next.clone(), self.inner.options.info.clone())
                        .with_logins(self.inner.options.logins.clone()),
                );
                slots.push(Arc::clone(&fresh));
                configs.push(next.clone());
                started.push(fresh);
            }
        }
        let connected = futures_join(&started).await;
        {
            let mut held = self
                .inner
                .config
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            held.separator = config.separator;
            held.upstreams = configs;
            *self
                .inner
                .upstreams
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(slots);
        }
        for (upstream, watch) in started.iter().zip(connected) {
            self.keep_up(upstream, watch);
            self.listen_at(upstream);
        }
        self.rebuild();
    }

    fn build_catalogue(
        &self,
        previous: Option<&Catalogue>,
        strictness: Strictness,
    ) -> Result<Catalogue, String> {
        let config = read(&self.inner.config);
        let slots = self.slots();
        let listed: Vec<_> = config
            .upstreams
            .iter()
            .zip(slots.iter())
            .map(|(c, u)| {
                if u.is_closed() {
                    return (c, None);
                }
                // In fleet mode every replica lists what an upstream last
                // listed, up or down, so that pages agree across replicas.
                let listed = if self.inner.options.fleet {
                    u.last_listed()
                } else {
                    u.listed()
                };
                (c, listed)
            })
            .collect();
        let dormant: Vec<_> = slots
            .iter()
            .enumerate()
            .filter(|(_, u)| !u.is_up() && !u.is_closed() && !self.inner.options.fleet)
            .filter_map(|(i, u)| u.last_listed().map(|l| (i, l)))
            .collect();
        Catalogue::build_with(&config.separator, &listed, &dormant, previous, strictness)
    }

    /// An upstream came up or went down: the catalogue again, and
    /// list-changed for listeners.
    fn rebuild(&self) {
        let _one = self
            .inner
            .rebuilding
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let previous = self.catalogue();
        match self.build_catalogue(Some(&previous), Strictness::Drop) {
            Ok(next) => {
                *self
                    .inner
                    .catalogue
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Arc::new(next);
            }
            Err(e) => tracing::error!(error = %e, "catalogue not rebuilt"),
        }
        if let Some(changes) = self.inner.changes.get() {
            changes.tools_changed();
            changes.prompts_changed();
            changes.resources_changed();
        }
        self.inner.generation.send_modify(|g| *g += 1);
    }

    /// Tells each time the catalogue was rebuilt (an upstream came up or
    /// went down): the count of rebuilds so far.
    pub fn generations(&self) -> tokio::sync::watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// The catalogue now.
    pub fn catalogue(&self) -> Arc<Catalogue> {
        Arc::clone(&read(&self.inner.catalogue))
    }

    /// The upstreams of the file as last loaded, in the order first seen.
    pub fn upstreams(&self) -> Vec<Arc<Upstream>> {
        self.slots()
            .iter()
            .filter(|u| !u.is_closed())
            .cloned()
            .collect()
    }

    /// At least one upstream is up (`/readyz`).
    pub fn ready(&self) -> bool {
        self.slots().iter().any(|u| u.is_up())
    }

    /// The relay that serves this gateway.
    pub fn relay(&self) -> Arc<dyn Relay> {
        Arc::new(self.clone())
    }

    /// A tern server builder that serves this gateway: its `serverInfo`,
    /// the relay, and list-changed announced when an upstream comes or
    /// goes. Add keys, stores and limits, then build.
    pub fn server_builder(&self) -> ServerBuilder {
        let info = self.inner.options.info.clone();
        let builder = tern_server::Server::builder(info.name.clone(), info.version.clone())
            .info(info)
            // An upstream's progress is relayed as it comes: it paced it.
            .progress_interval(std::time::Duration::ZERO)
            // A held call lives as long as the state that names it.
            .state_ttl(self.inner.options.bridge.ttl)
            .relay(self.relay());
        let _ = self.inner.changes.set(builder.changes());
        builder
    }

    /// What `--check` prints: each upstream (its era and health) and the
    /// catalogue's names, by upstream.
    pub fn report(&self) -> String {
        use std::fmt::Write as _;
        let catalogue = self.catalogue();
        let mut out = String::new();
        for (index, upstream) in self.slots().iter().enumerate() {
            if upstream.is_closed() {
                continue;
            }
            let state = match (upstream.listed(), upstream.down_reason()) {
                (Some(l), _) => format!("up, {}", l.era),
                (None, Some(reason)) => format!("down: {reason}"),
                (None, None) => "down".into(),
            };
            let _ = writeln!(out, "{}: {state}", upstream.name());
            for (what, section) in [("tool", &catalogue.tools), ("prompt", &catalogue.prompts)] {
                let mut names: Vec<&String> = section
                    .routes
                    .iter()
                    .filter(|(_, r)| r.upstream == index)
                    .map(|(n, _)| n)
                    .collect();
                names.sort();
                for name in names {
                    let _ = writeln!(out, "  {what} {name}");
                }
            }
            let mut uris: Vec<&String> = catalogue
                .resources
                .routes
                .iter()
                .filter(|(_, r)| r.upstream == index)
                .map(|(n, _)| n)
                .collect();
            uris.sort();
            for uri in uris {
                let _ = writeln!(out, "  resource {uri}");
            }
            for (t, _) in catalogue.templates.iter().filter(|(_, i)| *i == index) {
                let _ = writeln!(
                    out,
                    "  template {}",
                    t["uriTemplate"].as_str().unwrap_or("")
                );
            }
        }
        out
    }

    /// Calls to 2025 upstreams held for their retries now.
    pub fn held(&self) -> usize {
        self.inner.bridge.held()
    }

    /// Stops every upstream.
    ///
    /// Held 2025 calls are let go first (their places under each
    /// upstream's concurrency cap with them), then every upstream is closed
    /// at once, each after the requests sent for calls already gone.
    pub async fn close(&self) {
        self.inner.bridge.release_all();
        let closing: Vec<_> = self
            .slots()
            .iter()
            .map(|upstream| {
                let upstream = Arc::clone(upstream);
                tokio::spawn(async move { upstream.close().await })
            })
            .collect();
        for closed in closing {
            let _ = closed.await;
        }
    }
}

async fn futures_join(
    upstreams: &[Arc<Upstream>],
) -> Vec<Option<tern_client::transport::stdio::ChildWatch>> {
    let mut tasks = Vec::new();
    for upstream in upstreams {
        let upstream = Arc::clone(upstream);
        tasks.push(tokio::spawn(async move { upstream.connect().await }));
    }
    let mut out = Vec::new();
    for (task, upstream) in tasks.into_iter().zip(upstreams) {
        match task.await {
            Ok(Ok(watch)) => out.push(watch),
            Ok(Err(e)) => {
                tracing::warn!(upstream = %upstream.name(), error = %e, "upstream not reached at start");
                out.push(None);
            }
            Err(e) => {
                tracing::error!(upstream = %upstream.name(), error = %e, "upstream start panicked");
                out.push(None);
            }
        }
    }
    out
}

fn tag(kind: ListKind) -> u8 {
    match kind {
        ListKind::Tools => 1,
        ListKind::Prompts => 2,
        ListKind::Resources => 3,
        _ => 4,
    }
}

impl Relay for Gateway {
    fn lists(&self) -> &[ListKind] {
        &[
            ListKind::Tools,
            ListKind::Prompts,
            ListKind::Resources,
            ListKind::ResourceTemplates,
        ]
    }

    fn list(
        &self,
        kind: ListKind,
        request: ListRequest,
    ) -> BoxFuture<'static, Result<ListPage, ErrorObject>> {
        let catalogue = self.catalogue();
        let cursors = self.inner.options.cursors.clone();
        let page_size = self.inner.options.page_size;
        let access: Vec<_> = self
            .slots()
            .iter()
            .map(|u| u.config().access.clone())
            .collect();
        Box::pin(async move {
            let caller = access::Caller::new(&request.principal, request.access_token.as_deref());
            let allowed = |i: usize| access.get(i).is_some_and(|a| caller.may(a));
            let filtered = access.iter().any(|a| !a.is_open());
            let items: Vec<Value> = match kind {
                ListKind::Tools => catalogue.tools.items.clone(),
                ListKind::Prompts => catalogue.prompts.items.clone(),
                ListKind::Resources => catalogue.resources.items.clone(),
                _ => access::templates(&catalogue, &allowed),
            };
            let items = if filtered && kind != ListKind::ResourceTemplates {
                access::filter(&catalogue, kind, items, &allowed)
            } else {
                items
            };
            // A list that varies by caller is no shared cache's.
            let private = catalogue.private || filtered;
            let start = match request.cursor.as_deref() {
                None => 0,
                Some(c) => cursors.decode(tag(kind), c)?.min(items.len()),
            };
            let end = start.saturating_add(page_size).min(items.len());
            let mut page = ListPage::new(items[start..end].to_vec());
            if end < items.len() {
                page = page.next_cursor(cursors.encode(tag(kind), end));
            }
            if let Some(ttl) = catalogue.ttl_ms {
                let scope = if private {
                    CacheScope::Private
                } else {
                    CacheScope::Public
                };
                page = page.cache(ttl, scope);
            } else if private {
                page = page.cache(0, CacheScope::Private);
            }
            Ok(page)
        })
    }

    fn call(&self, leg: RelayLeg) -> BoxFuture<'static, Result<RelayOutcome, ErrorObject>> {
        let gateway = self.clone();
        Box::pin(async move { gateway.relay_leg(leg).await })
    }

    fn header_params(&self, name: &str) -> Option<Vec<tern_protocol::header::HeaderParam>> {
        self.catalogue().tools.headers.get(name).cloned()
    }

    /// A live round its client left: a followed task is cancelled upstream,
    /// a held 2025 call let go (its question answered `cancel`, its request
    /// cancelled), rather than kept until the task's or the hold's TTL.
    fn abandon(&self, ctx: &tern_server::Ctx, routing: Value) {
        let Some(upstream) = self
            .slots()
            .iter()
            .find(|u| routing["u"].as_str() == Some(u.name()))
            .cloned()
        else {
            return;
        };
        if let Some(task_id) = tasked::task_of(&routing) {
            tracing::info!(upstream = %upstream.name(), "a live round of a followed task was left: cancelling the task");
            upstream.send_parting(
                method::TASKS_CANCEL,
                json!({"taskId": task_id}),
                tasked::capabilities(ctx),
            );
        } else {
            self.inner.bridge.release(&routing);
        }
    }

    fn completes(&self) -> bool {
        true
    }

    fn follow(
        &self,
        uris: &[String],
        task_ids: &[String],
        principal: &tern_server::Principal,
        access_token: Option<&tern_server::auth::AccessToken>,
    ) -> tern_server::relay::Following {
        // Only what the caller may read is followed for it.
        let caller = access::Caller::new(principal, access_token);
        let catalogue = self.catalogue();
        let slots = self.slots();
        let uris: Vec<String> = uris
            .iter()
            .filter(|uri| {
                catalogue
                    .resource_upstream(uri)
                    .and_then(|i| slots.get(i))
                    .is_some_and(|u| caller.may(&u.config().access))
            })
            .cloned()
            .collect();
        let resources = crate::listen::follow(&self.inner.listens, &catalogue, &uris);
        // Tasks: each wrapped id opened for this principal (another's, or
        // a forged one, is left out), grouped by upstream.
        let mut at: crate::listen::TasksAt = Vec::new();
        let mut followed = Vec::new();
        for wrapped in task_ids {
            let Ok((index, id)) = self
                .inner
                .options
                .cursors
                .unwrap_task_id(principal.id(), wrapped)
            else {
                continue;
            };
            let Some(upstream) = slots.get(usize::from(index)) else {
                continue;
            };
            if !caller.may(&upstream.config().access) {
                continue;
            }
            followed.push(wrapped.clone());
            match at.iter_mut().find(|(u, _)| Arc::ptr_eq(u, upstream)) {
                Some((_, ids)) => ids.push((id, wrapped.clone())),
                None => at.push((Arc::clone(upstream), vec![(id, wrapped.clone())])),
            }
        }
        if followed.is_empty() {
            return tern_server::relay::Following::new(resources);
        }
        let (tasks, status) = crate::listen::follow_tasks(at);
        tern_server::relay::Following::new(Box::new((resources, tasks))).tasks(followed, status)
    }

    fn relays_tasks(&self) -> bool {
        true
    }

    fn task(
        &self,
        method: &'static str,
        params: Value,
        principal: tern_server::Principal,
    ) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        let gateway = self.clone();
        Box::pin(async move { gateway.task_for(method, params, &principal).await })
    }

    fn complete(
        &self,
        params: Value,
        principal: tern_server::Principal,
    ) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        let gateway = self.clone();
        Box::pin(async move { gateway.complete_for(params, &principal).await })
    }
}

impl Gateway {
    /// `completion/complete`, routed by its reference: a prompt by its
    /// name, a resource template by the upstream that serves its URI.
    async fn complete_for(
        &self,
        mut params: Value,
        principal: &tern_server::Principal,
    ) -> Result<Value, ErrorObject> {
        let catalogue = self.catalogue();
        let reference = &params["ref"];
        let index = match reference["type"].as_str() {
            Some("ref/prompt") => {
                let name = reference["name"].as_str().unwrap_or_default();
                let route = catalogue.prompts.route(name).ok_or_else(|| {
                    ErrorObject::invalid_params(format!("Unknown prompt: {name}"))
                })?;
                params["ref"]["name"] = json!(route.name);
                route.upstream
            }
            Some("ref/resource") => {
                let uri = reference["uri"].as_str().unwrap_or_default();
                catalogue
                    .templates
                    .iter()
                    .find(|(t, _)| t["uriTemplate"] == uri)
                    .map(|(_, i)| *i)
                    .or_else(|| catalogue.resource_upstream(uri))
                    .ok_or_else(|| ErrorObject::invalid_params("Resource not found"))?
            }
            _ => return Err(ErrorObject::invalid_params("Unknown reference type")),
        };
        // Completion carries no token: a principal let in by name only.
        let caller = access::Caller::new(principal, None);
        if !caller.may(&self.slots()[index].config().access) {
            return Err(ErrorObject::invalid_params("Unknown reference"));
        }
        let capabilities = ClientCapabilities::default();
        self.slots()[index]
            .request(method::COMPLETION_COMPLETE, params, &capabilities)
            .await
    }

    /// A leg: claimed first when it retries a round of a `dedupe` upstream
    /// ([`crate::dedupe`]), then relayed.
    async fn relay_leg(&self, leg: RelayLeg) -> Result<RelayOutcome, ErrorObject> {
        let guarded = leg.routing.as_ref().and_then(|routing| {
            let upstream = self
                .slots()
                .iter()
                .find(|u| routing["u"].as_str() == Some(u.name()))
                .cloned()?;
            let id = dedupe::id_of(routing)?;
            upstream
                .config()
                .dedupe
                .then(|| (Arc::clone(&upstream), id, routing.clone()))
        });
        let Some((upstream, id, routing)) = guarded else {
            let ctx = leg.ctx.clone();
            // Boxed, and the box handed on: `or_cancelled` would hold the
            // leg's future twice, and every caller's box would copy it.
            return crate::cancel::or_cancelled(&ctx, Box::pin(self.send_leg(leg))).await;
        };
        let scope = match leg.ctx.principal().id() {
            Some(id) => Scope::principal(id),
            None => Scope::anonymous("tern-gateway"),
        };
        // Refused before it is sent when the upstream is down: no record, a
        // later retry may go. A round already claimed is answered from its
        // record whatever the upstream's state (a duplicate of a leg lost
        // with its upstream is "outcome unknown", not "try again").
        if let Some(e) = upstream.unavailable_now() {
            let record = RecordKey::new(id, scope.clone());
            let claimed = self
                .inner
                .options
                .replay
                .status(&record)
                .await
                .ok()
                .flatten()
                .is_some();
            if !claimed {
                return Err(e);
            }
        }
        let lease = upstream.config().timeout + std::time::Duration::from_secs(10);
        let gateway = self.clone();
        // Boxed: the guarded path (`dedupe: true`) is the rare one.
        Box::pin(dedupe::once(
            Arc::clone(&self.inner.options.replay),
            id,
            scope,
            lease,
            routing,
            async move { gateway.send_leg(leg).await },
        ))
        .await
    }

    /// Sends a leg to its upstream, once.
    #[allow(
        clippy::too_many_lines,
        reason = "one leg read top to bottom: route, state, bridges, relay, wrap"
    )]
    async fn send_leg(&self, leg: RelayLeg) -> Result<RelayOutcome, ErrorObject> {
        let catalogue = self.catalogue();
        // The params but for `arguments`, which the common leg writes from
        // the request's own (`Extras::arguments`); the other paths get them
        // copied in (`with_arguments`).
        let (index, mut params, named) = match leg.method {
            method::TOOLS_CALL => {
                let route = catalogue.tools.route(&leg.target).ok_or_else(|| {
                    ErrorObject::invalid_params(format!("Unknown tool: {}", leg.target))
                })?;
                (route.upstream, json!({"name": route.name}), true)
            }
            method::PROMPTS_GET => {
                let route = catalogue.prompts.route(&leg.target).ok_or_else(|| {
                    ErrorObject::invalid_params(format!("Unknown prompt: {}", leg.target))
                })?;
                (route.upstream, json!({"name": route.name}), true)
            }
            _ => {
                let index = catalogue.resource_upstream(&leg.target).ok_or_else(|| {
                    ErrorObject::invalid_params("Resource not found")
                        .with_data(json!({"uri": leg.target}))
                })?;
                (index, json!({"uri": leg.target}), false)
            }
        };
        let with_arguments = |mut params: Value| {
            if named {
                params["arguments"] = (*leg.arguments).clone();
            }
            params
        };
        let slots = self.slots();
        let upstream = &slots[index];
        let caller = access::Caller::new(leg.ctx.principal(), leg.ctx.access_token());
        if !caller.may(&upstream.config().access) {
            return Err(access::unknown(leg.method, &leg.target));
        }
        if let Some(routing) = &leg.routing {
            // The state was sealed for this target; it must still lead to
            // the upstream that issued it.
            if routing["u"].as_str() != Some(upstream.name()) {
                return Err(ErrorObject::invalid_params(
                    "Invalid or expired requestState",
                ));
            }
            if let Some(state) = routing.get("s") {
                params["requestState"] = state.clone();
            }
        }
        if let Some(responses) = &leg.input_responses {
            params["inputResponses"] = serde_json::to_value(responses).unwrap_or_default();
        }
        let header_params = catalogue
            .tools
            .headers
            .get(&leg.target)
            .filter(|_| leg.method == method::TOOLS_CALL)
            .map(|h| tern_client::param_headers(h, leg.arguments.as_object()))
            .unwrap_or_default();
        if upstream.is_legacy() || bridged_round(&catalogue, &leg) {
            // Boxed, as the task paths below: a relayed 2026 leg, the
            // common one, stays small.
            let params = with_arguments(params);
            return Box::pin(self.bridged(upstream, &catalogue, leg, params, header_params)).await;
        }
        // The client's capabilities, never more (its Tasks extension
        // included: the task ids that come back are wrapped).
        let ctx = leg.ctx.clone();
        let capabilities = ctx.client_capabilities();
        let tell = |n: ServerNotification| bridge::relay_notification(&ctx, n);
        let extras = Extras {
            header_params,
            progress: leg.ctx.meta().progress_token.is_some(),
            log_level: leg.ctx.meta().log_level,
            arguments: named.then_some(&*leg.arguments),
            on_notification: Some(&tell),
            ..Extras::default()
        };
        // A tool that turns out to require a task, for a client without
        // the extension: refused before it ran, so followed as a task.
        let again = tasked::may_follow(&leg)
            .then(|| (with_arguments(params.clone()), extras.header_params.clone()));
        let (written, kind) = match upstream
            .relay_written(leg.method, params, capabilities, extras)
            .await
        {
            Err(e) if tasked::needs_tasks(&e) && again.is_some() => {
                let (params, header_params) = again.unwrap_or_default();
                return Box::pin(tasked::leg(upstream, leg, params, header_params)).await;
            }
            answer => answer?,
        };
        if kind == Kind::Complete {
            // Passed on as written: the common leg decodes nothing of it.
            return Ok(RelayOutcome::Written(written));
        }
        let result = upstream.decode(&written)?;
        if kind == Kind::InputRequired {
            let requests: InputRequests = match result.get("inputRequests") {
                None | Some(Value::Null) => InputRequests::new(),
                Some(r) => serde_json::from_value(r.clone()).map_err(|e| {
                    tracing::warn!(upstream = %upstream.name(), error = %e, "an input request the gateway cannot read");
                    ErrorObject::new(
                        tern_protocol::error::code::INTERNAL_ERROR,
                        format!("The upstream server `{}` asked a question the gateway cannot read", upstream.name()),
                    )
                })?,
            };
            let mut routing = json!({"u": upstream.name()});
            if let Some(state) = result.get("requestState").filter(|s| s.is_string()) {
                routing["s"] = state.clone();
            }
            if upstream.config().dedupe {
                routing[dedupe::KEY] = dedupe::new_id();
            }
            return Ok(RelayOutcome::InputRequired { requests, routing });
        }
        let mut result = result;
        if kind == Kind::Task
            && let Some(id) = result["taskId"].as_str()
        {
            let wrapped = self.inner.options.cursors.wrap_task_id(
                leg.ctx.principal().id(),
                index_u16(index),
                id,
            );
            result["taskId"] = Value::String(wrapped);
        }
        Ok(RelayOutcome::Complete(result))
    }

    /// A leg to a 2025 upstream, or a bridged round's retry: the era
    /// bridge's ([`crate::bridge`]).
    async fn bridged(
        &self,
        upstream: &Arc<Upstream>,
        catalogue: &Catalogue,
        leg: RelayLeg,
        params: Value,
        header_params: Vec<(String, String)>,
    ) -> Result<RelayOutcome, ErrorObject> {
        if !upstream.is_legacy() && task_bridged(catalogue, &leg) {
            return Box::pin(tasked::leg(upstream, leg, params, header_params)).await;
        }
        let send = bridge::Outbound {
            method: leg.method,
            params,
            header_params,
        };
        self.inner.bridge.leg(Arc::clone(upstream), leg, send).await
    }

    /// `tasks/*` of a wrapped task id: the upstream's own id, checked to be
    /// `principal`'s, forwarded with the client's capabilities; the id in
    /// the result is the wrapped one again.
    async fn task_for(
        &self,
        method: &'static str,
        mut params: Value,
        principal: &tern_server::Principal,
    ) -> Result<Value, ErrorObject> {
        let wrapped = params["taskId"].as_str().unwrap_or_default().to_owned();
        let (index, id) = self
            .inner
            .options
            .cursors
            .unwrap_task_id(principal.id(), &wrapped)?;
        let upstream = self
            .slots()
            .get(usize::from(index))
            .cloned()
            .ok_or_else(|| ErrorObject::invalid_params("Unknown task"))?;
        params["taskId"] = Value::String(id);
        let capabilities: ClientCapabilities = params["_meta"]
            [tern_protocol::meta::CLIENT_CAPABILITIES_KEY]
            .as_object()
            .and_then(|c| serde_json::from_value(Value::Object(c.clone())).ok())
            .unwrap_or_default();
        let mut result = upstream.request(method, params, &capabilities).await?;
        if result.get("taskId").is_some_and(Value::is_string) {
            result["taskId"] = Value::String(wrapped);
        }
        Ok(result)
    }
}

/// The leg is a round of the era bridge or of a task the gateway follows
/// for its client.
fn bridged_round(catalogue: &Catalogue, leg: &RelayLeg) -> bool {
    bridge::is_bridged(leg.routing.as_ref()) || task_bridged(catalogue, leg)
}

/// The leg calls a tool that requires a task on a 2025 session (a client
/// without the Tasks extension), or continues such a call
/// ([`crate::tasked`]).
fn task_bridged(catalogue: &Catalogue, leg: &RelayLeg) -> bool {
    if tasked::is_tasked(leg.routing.as_ref()) {
        return true;
    }
    tasked::may_follow(leg)
        && catalogue
            .tools
            .items
            .iter()
            .any(|t| t["name"] == leg.target.as_str() && tasked::requires_task(t))
}

/// An upstream's index as a task id holds it (a file has far fewer than
/// 65 536 upstreams).
fn index_u16(index: usize) -> u16 {
    u16::try_from(index).unwrap_or(u16::MAX)
}
