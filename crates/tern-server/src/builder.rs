//! [`ServerBuilder`]: what a server offers and how it is configured, with
//! the defaults and their numbers.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tern_protocol::Implementation;
use tern_protocol::result::CacheScope;
use tern_seal::{KeyRing, Sealer, SealerOptions};
use tokio_util::sync::CancellationToken;

use crate::completion::CompletionDef;
use crate::engine::{CallLimits, Clock, Engine, SystemClock};
use crate::error::BuildError;
use crate::prompt::PromptDef;
use crate::registry::{Changes, Registry};
use crate::replay::{MemoryReplayStore, ReplayStore, StoreLimits};
use crate::resource::{ResourceDef, ResourceTemplateDef};
use crate::server::{Config, Inner, Server};
use crate::task::{TaskConfig, TaskStore, Tasks};
use crate::tool::{ToolDef, ToolEntry};

pub use crate::cache::CacheHints;

/// Default cap on the resource URIs of one `subscriptions/listen`: 256.
pub const DEFAULT_MAX_LISTEN_URIS: usize = 256;
/// Default cap on `subscriptions/listen` streams open at once: 64.
pub const DEFAULT_MAX_LISTENS: usize = 64;
/// Default cap on the `subscriptions/listen` streams one caller (an
/// authenticated principal, else one anonymous peer) holds open: 16, a
/// quarter of [`DEFAULT_MAX_LISTENS`], so one caller cannot take them all.
pub const DEFAULT_MAX_LISTENS_PER_CALLER: usize = 16;

/// Builds a [`Server`].
///
/// ```
/// use std::time::Duration;
/// use tern_server::{KeyRing, Server, ToolDef};
///
/// async fn ping() -> &'static str { "pong" }
///
/// let server = Server::builder("inventory", "1.0.0")
///     .instructions("Inventory of databases; ask before creating one.")
///     .tool(ToolDef::new("ping", "Answers pong", ping))
///     // Keys shared by every replica (`tern keys generate`); without them a
///     // random key serves this process only.
///     .keys(KeyRing::generate())
///     .state_ttl(Duration::from_secs(300))
///     .page_size(50)
///     .build()?;
/// assert!(server.serves("tools/list"));
/// # Ok::<(), tern_server::BuildError>(())
/// ```
pub struct ServerBuilder {
    info: Implementation,
    instructions: Option<String>,
    tools: Vec<ToolDef>,
    prompts: Vec<PromptDef>,
    resources: Vec<ResourceDef>,
    templates: Vec<ResourceTemplateDef>,
    completions: Vec<CompletionDef>,
    keys: Option<KeyRing>,
    multi_instance: bool,
    state_ttl: Duration,
    max_state_len: usize,
    replay: Option<Arc<dyn ReplayStore>>,
    store_limits: StoreLimits,
    limits: CallLimits,
    clock: Arc<dyn Clock>,
    config: Config,
    changes: Changes,
    audience: Option<String>,
    task_store: Option<Arc<dyn TaskStore>>,
    task_config: TaskConfig,
    skills: Option<crate::skill::SkillCatalog>,
    relay: Option<Arc<dyn crate::relay::Relay>>,
}

impl std::fmt::Debug for ServerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerBuilder")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Default lifetime of a `requestState`: 10 minutes, refreshed each round.
pub const DEFAULT_STATE_TTL: Duration = Duration::from_secs(600);
/// Default size cap of a `requestState` token: 64 KiB.
pub const DEFAULT_MAX_STATE_LEN: usize = 64 * 1024;
/// Default page size of the list methods: 100.
pub const DEFAULT_PAGE_SIZE: usize = 100;

impl ServerBuilder {
    pub(crate) fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            info: Implementation::new(name, version),
            instructions: None,
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            templates: Vec::new(),
            completions: Vec::new(),
            keys: None,
            multi_instance: false,
            state_ttl: DEFAULT_STATE_TTL,
            max_state_len: DEFAULT_MAX_STATE_LEN,
            replay: None,
            store_limits: StoreLimits::default(),
            limits: CallLimits::default(),
            clock: Arc::new(SystemClock),
            changes: Changes::default(),
            audience: None,
            task_store: None,
            task_config: TaskConfig::default(),
            skills: None,
            relay: None,
            config: Config {
                page_size: DEFAULT_PAGE_SIZE,
                list_cache: CacheHints::new(Duration::from_secs(60), CacheScope::Public),
                read_cache: CacheHints::new(Duration::ZERO, CacheScope::Private),
                progress_interval: Duration::from_millis(10),
                legacy: Some(crate::legacy::options::LegacyOptions::default()),
                max_listen_uris: DEFAULT_MAX_LISTEN_URIS,
                json_limits: tern_protocol::JsonLimits::default(),
                max_listens: DEFAULT_MAX_LISTENS,
                max_listens_per_caller: DEFAULT_MAX_LISTENS_PER_CALLER,
            },
        }
    }

    /// The server's title, description and so on (`serverInfo`).
    #[must_use]
    pub fn info(mut self, info: Implementation) -> Self {
        self.info = info;
        self
    }

    /// Instructions for clients and models, sent in `server/discover`.
    #[must_use]
    pub fn instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = Some(instructions.into());
        self
    }

    /// Registers a tool. Tools are listed in registration order.
    #[must_use]
    pub fn tool(mut self, tool: ToolDef) -> Self {
        self.tools.push(tool);
        self
    }

    /// Registers a prompt.
    #[must_use]
    pub fn prompt(mut self, prompt: PromptDef) -> Self {
        self.prompts.push(prompt);
        self
    }

    /// Registers a resource at a fixed URI.
    #[must_use]
    pub fn resource(mut self, resource: ResourceDef) -> Self {
        self.resources.push(resource);
        self
    }

    /// Registers a resource template.
    #[must_use]
    pub fn resource_template(mut self, template: ResourceTemplateDef) -> Self {
        self.templates.push(template);
        self
    }

    /// Serves the skills of `catalog` (Skills extension,
    /// `io.modelcontextprotocol/skills`): declares the extension with
    /// `directoryRead` and the `resources` capability, answers
    /// `skills/list`, `skills/get` and `resources/directory/read`, serves
    /// every file on `resources/read` and lists each `SKILL.md` in
    /// `resources/list`; see [`crate::skill`]. Replace it at run time with
    /// [`Server::replace_skills`].
    #[must_use]
    pub fn skills(mut self, catalog: crate::skill::SkillCatalog) -> Self {
        self.skills = Some(catalog);
        self
    }

    /// Registers completions for a prompt or a resource template.
    #[must_use]
    pub fn completion(mut self, completion: CompletionDef) -> Self {
        self.completions.push(completion);
        self
    }

    /// The keys that seal `requestState`: the first seals, all open. Every
    /// replica must share them. Without keys a random one is made at start-up,
    /// which serves a single process only (and says so in the log).
    #[must_use]
    pub fn keys(mut self, keys: KeyRing) -> Self {
        self.keys = Some(keys);
        self
    }

    /// Who `requestState` is sealed for (default: the server's name). Give
    /// one value per logical server, the same on every replica (its public
    /// URL, say), so that two servers sharing keys never accept each other's
    /// states.
    #[must_use]
    pub fn audience(mut self, audience: impl Into<String>) -> Self {
        self.audience = Some(audience.into());
        self
    }

    /// Declares that several instances serve this server: [`Self::build`] then
    /// refuses to start without shared [`Self::keys`], or with a replay store
    /// that only one process sees (the default in-memory one): a duplicate
    /// retry that reached another replica would run its effect again. It
    /// also refuses a task store that is not [`TaskStore::is_shared`] (or
    /// none, when a tool may become a task): `tasks/get` on another replica
    /// would not know the task.
    #[must_use]
    pub fn multi_instance(mut self) -> Self {
        self.multi_instance = true;
        self
    }

    /// Lifetime of each round's `requestState` (default 10 minutes).
    #[must_use]
    pub fn state_ttl(mut self, ttl: Duration) -> Self {
        self.state_ttl = ttl;
        self
    }

    /// Size cap of a `requestState` token (default 64 KiB); a round whose
    /// state would be larger fails with `-32603`.
    #[must_use]
    pub fn max_state_len(mut self, len: usize) -> Self {
        self.max_state_len = len;
        self
    }

    /// Where single-use and idempotent-retry records live (default: a
    /// [`MemoryReplayStore`] in this process, bounded by
    /// [`Self::replay_store_limits`]).
    #[must_use]
    pub fn replay_store(mut self, store: Arc<dyn ReplayStore>) -> Self {
        self.replay = Some(store);
        self
    }

    /// Byte bounds of the default in-memory replay store (default
    /// [`StoreLimits::default`]: 64 MiB in all, 8 MiB per principal, 1 MiB
    /// per anonymous peer, outcomes up to 1 MiB kept).
    #[must_use]
    pub fn replay_store_limits(mut self, limits: StoreLimits) -> Self {
        self.store_limits = limits;
        self
    }

    /// Bounds of one logical call and of guarded legs (default
    /// [`CallLimits::default`]: 1 hour, 32 rounds, 60 s per guarded leg).
    #[must_use]
    pub fn call_limits(mut self, limits: CallLimits) -> Self {
        self.limits = limits;
        self
    }

    /// The clock used for state expiry and the default replay store (tests
    /// inject one).
    #[must_use]
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How deep and how wide a request's params may be, checked in the one
    /// pass that refuses repeated member names, on every transport and both
    /// eras (defaults: 64 levels of nesting, 100,000 members in one object;
    /// arrays are bounded by the body size only). Params past them are
    /// `-32602`.
    #[must_use]
    pub fn json_limits(mut self, limits: tern_protocol::JsonLimits) -> Self {
        self.config.json_limits = limits;
        self
    }

    /// Most resource URIs one `subscriptions/listen` may name (default
    /// [`DEFAULT_MAX_LISTEN_URIS`]); more are refused with `-32602`, as are
    /// a URI named twice and one that names no resource of this server.
    #[must_use]
    pub fn max_listen_uris(mut self, n: usize) -> Self {
        self.config.max_listen_uris = n;
        self
    }

    /// Most `subscriptions/listen` streams open at once, over every
    /// transport (default [`DEFAULT_MAX_LISTENS`]); one more is refused
    /// with `-32603` and `data.retryAfterMs` (over HTTP `503` +
    /// `Retry-After`).
    #[must_use]
    pub fn max_listens(mut self, n: usize) -> Self {
        self.config.max_listens = n.max(1);
        self
    }

    /// Most `subscriptions/listen` streams one caller holds open (default
    /// [`DEFAULT_MAX_LISTENS_PER_CALLER`]): an authenticated principal, else
    /// the anonymous peer the transport names ([`crate::CallContext::peer`]:
    /// the HTTP client's address, `stdio`). One more is refused like a
    /// listen over [`Self::max_listens`], and other callers still get what
    /// is left of it.
    #[must_use]
    pub fn max_listens_per_caller(mut self, n: usize) -> Self {
        self.config.max_listens_per_caller = n.max(1);
        self
    }

    /// Page size of the list methods (default 100).
    #[must_use]
    pub fn page_size(mut self, size: usize) -> Self {
        self.config.page_size = size.max(1);
        self
    }

    /// Caching hints of `server/discover` and the list results (default
    /// 60 s, public).
    #[must_use]
    pub fn list_cache(mut self, hints: CacheHints) -> Self {
        self.config.list_cache = hints;
        self
    }

    /// Caching hints of `resources/read` results (default 0, private).
    #[must_use]
    pub fn read_cache(mut self, hints: CacheHints) -> Self {
        self.config.read_cache = hints;
        self
    }

    /// Least time between two progress notifications of one request (default
    /// 10 ms; the one reaching `total` is always sent).
    #[must_use]
    pub fn progress_interval(mut self, interval: Duration) -> Self {
        self.config.progress_interval = interval;
        self
    }

    /// Where task records live (Tasks extension; default: a
    /// [`crate::MemoryTaskStore`] in this process). Configuring one
    /// advertises the extension in `server/discover`, as does registering a
    /// tool with [`ToolDef::task`] support.
    #[must_use]
    pub fn task_store(mut self, store: Arc<dyn TaskStore>) -> Self {
        self.task_store = Some(store);
        self
    }

    /// How tasks are kept and run (default [`TaskConfig::default`]: 1 hour
    /// TTL and retention, 500 ms poll interval, 30 s lease, 64 live tasks and
    /// 16 MiB of results per principal).
    #[must_use]
    pub fn task_config(mut self, config: TaskConfig) -> Self {
        self.task_config = config;
        self
    }

    /// How 2025-11-25 clients are served (on by default, with
    /// [`crate::legacy::LegacyOptions::default`]; see [`crate::legacy`]).
    #[must_use]
    pub fn legacy(mut self, options: crate::legacy::options::LegacyOptions) -> Self {
        self.config.legacy = Some(options);
        self
    }

    /// Serves 2026-07-28 requests only: `initialize` is `-32601` (HTTP 404),
    /// as for a server without legacy support.
    #[must_use]
    pub fn modern_only(mut self) -> Self {
        self.config.legacy = None;
        self
    }

    /// Serves the lists `relay` names, and answers the `tools/call`,
    /// `prompts/get` and `resources/read` no registered entry serves, through
    /// `relay` (a gateway's upstreams; see [`crate::relay`]). Entries of a
    /// kind the relay lists cannot be registered too: [`Self::build`]
    /// refuses.
    #[must_use]
    pub fn relay(mut self, relay: Arc<dyn crate::relay::Relay>) -> Self {
        self.relay = Some(relay);
        self
    }

    /// The change announcer of the server being built, for handlers that
    /// change what the server offers (see [`Changes`]).
    pub fn changes(&self) -> Changes {
        self.changes.clone()
    }

    /// Checks everything and builds the server.
    #[allow(clippy::too_many_lines, reason = "one check after another, in order")]
    pub fn build(self) -> Result<Server, BuildError> {
        let configured_keys = self.keys.is_some();
        let keys = match self.keys {
            Some(keys) => keys,
            None if self.multi_instance => {
                return Err(BuildError(
                    "a server configured for several instances needs shared requestState keys"
                        .into(),
                ));
            }
            None => {
                tracing::warn!(
                    "no requestState keys configured: using a random key for this process only; \
                     pending questions will not survive a restart or reach another replica"
                );
                KeyRing::generate()
            }
        };
        let sealer = Sealer::new(
            keys,
            SealerOptions {
                ttl: self.state_ttl,
                max_token_len: self.max_state_len,
                audience: self
                    .audience
                    .clone()
                    .unwrap_or_else(|| self.info.name.clone()),
            },
        );
        let mut registry = Registry::default();
        for def in self.tools {
            let name = def.tool.name.clone();
            if registry
                .tools
                .insert(name.clone(), Arc::new(ToolEntry::new(def)?))
                .is_some()
            {
                return Err(BuildError(format!("tool {name} is registered twice")));
            }
        }
        for def in self.prompts {
            def.check()?;
            let name = def.prompt.name.clone();
            if registry
                .prompts
                .insert(name.clone(), Arc::new(def))
                .is_some()
            {
                return Err(BuildError(format!("prompt {name} is registered twice")));
            }
        }
        for def in self.resources {
            let def = def.finish()?;
            let uri = def.resource.uri.clone();
            if registry
                .resources
                .insert(uri.clone(), Arc::new(def))
                .is_some()
            {
                return Err(BuildError(format!("resource {uri} is registered twice")));
            }
        }
        for def in self.templates {
            registry.templates.push(Arc::new(def.finish()?));
        }
        registry.completions = self
            .completions
            .into_iter()
            .map(|c| (CompletionDef::key(&c.reference), c))
            .collect();
        let store = self.replay.unwrap_or_else(|| {
            Arc::new(MemoryReplayStore::new(
                self.store_limits,
                Arc::clone(&self.clock),
            ))
        });
        if !store.is_shared() {
            if self.multi_instance {
                return Err(BuildError(
                    "a server configured for several instances needs a replay store every \
                     instance shares (tern-redis): with one per process, a duplicate retry that \
                     reaches another instance runs its effect again"
                        .into(),
                ));
            }
            if configured_keys {
                tracing::warn!(
                    "requestState keys are configured (so other processes may open these states) \
                     but the replay store is this process's memory: single_use and \
                     idempotent_retry hold within this process only"
                );
            }
        }
        if self.multi_instance {
            let shared = self.task_store.as_ref().map(|s| s.is_shared());
            let task_tools = registry.tools.values().any(|t| t.def.policy.task.is_some());
            if shared == Some(false) || (shared.is_none() && task_tools) {
                return Err(BuildError(
                    "a server configured for several instances needs a task store every \
                     instance shares (tern-redis): with one per process, tasks/get, tasks/update \
                     and tasks/cancel fail on every other instance"
                        .into(),
                ));
            }
        }
        let tasks_advertised = self.task_store.is_some();
        registry.tasks_advertised = tasks_advertised;
        registry.skills = self.skills;
        if let Some(relay) = &self.relay {
            check_relay(&registry, relay.lists())?;
        }
        registry.relay = self.relay;
        registry.refresh();
        let tasks = Arc::new(Tasks::new(
            self.task_store
                .unwrap_or_else(|| Arc::new(crate::task::MemoryTaskStore::new())),
            self.task_config,
            Arc::clone(&self.clock),
        ));
        let inner = Inner {
            instructions: self.instructions,
            registry: RwLock::new(Arc::new(registry)),
            changes: self.changes,
            shutdown: CancellationToken::new(),
            engine: Arc::new(Engine {
                sealer: RwLock::new(Arc::new(sealer)),
                store,
                clock: self.clock,
                limits: self.limits,
                info_json: crate::json::to_json(&self.info),
                info: Arc::new(self.info),
                progress_interval: self.config.progress_interval,
                tasks,
            }),
            listen_slots: Arc::new(tokio::sync::Semaphore::new(self.config.max_listens)),
            listen_shares: Arc::default(),
            recovering: std::sync::atomic::AtomicBool::new(false),
            config: self.config,
        };
        let server = Server {
            inner: Arc::new(inner),
        };
        // Durable tasks whose runner died are taken again here (a store
        // without `claim_lapsed` never gives one); outside a runtime, from
        // the first request.
        if tokio::runtime::Handle::try_current().is_ok() {
            server.recover_tasks();
        }
        Ok(server)
    }
}

/// A list the relay serves has no registered entries: one source per list,
/// so its pages and cursors are the relay's alone.
fn check_relay(registry: &Registry, lists: &[crate::relay::ListKind]) -> Result<(), BuildError> {
    use crate::relay::ListKind;
    for kind in lists {
        let registered = match kind {
            ListKind::Tools => !registry.tools.is_empty(),
            ListKind::Prompts => !registry.prompts.is_empty(),
            ListKind::Resources => !registry.resources.is_empty() || registry.skills.is_some(),
            ListKind::ResourceTemplates => !registry.templates.is_empty(),
        };
        if registered {
            return Err(BuildError(format!(
                "the relay serves the {} list: register no {} of your own beside it",
                kind.member(),
                kind.member()
            )));
        }
    }
    Ok(())
}

impl Server {
    /// Starts building a server called `name` at `version`.
    pub fn builder(name: impl Into<String>, version: impl Into<String>) -> ServerBuilder {
        ServerBuilder::new(name, version)
    }
}
