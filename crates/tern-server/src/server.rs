//! [`Server`]: an MCP server, what it offers now, and how that changes at run
//! time. Building one is [`crate::ServerBuilder`]; answering requests is
//! `dispatch`; the engine of tools, prompts and resources is
//! [`crate::engine`].

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tern_protocol::{Implementation, ServerCapabilities, method};
use tokio_util::sync::CancellationToken;

use crate::cache::CacheHints;
use crate::engine::Engine;
use crate::error::BuildError;
use crate::prompt::PromptDef;
use crate::registry::{Changes, Registry};
use crate::resource::ResourceDef;
use crate::tool::{ToolDef, ToolEntry};

pub(crate) struct Inner {
    pub(crate) instructions: Option<String>,
    pub(crate) registry: RwLock<Arc<Registry>>,
    pub(crate) changes: Changes,
    pub(crate) shutdown: CancellationToken,
    pub(crate) engine: Arc<Engine>,
    pub(crate) config: Config,
    /// One permit per open `subscriptions/listen` stream.
    pub(crate) listen_slots: Arc<tokio::sync::Semaphore>,
    /// Open `subscriptions/listen` streams per caller.
    pub(crate) listen_shares: Arc<crate::share::Shares>,
    /// [`Server::recover_tasks`] ran.
    pub(crate) recovering: std::sync::atomic::AtomicBool,
}

/// What the builder settled: the server's fixed settings.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) page_size: usize,
    pub(crate) list_cache: CacheHints,
    pub(crate) read_cache: CacheHints,
    pub(crate) progress_interval: Duration,
    /// 2025 clients are served (`None`: modern only).
    pub(crate) legacy: Option<crate::legacy::options::LegacyOptions>,
    /// Most resource URIs one `subscriptions/listen` may name.
    pub(crate) max_listen_uris: usize,
    /// Most `subscriptions/listen` streams open at once.
    pub(crate) max_listens: usize,
    /// Most of them one caller holds.
    pub(crate) max_listens_per_caller: usize,
    /// How deep and wide a request's params may be.
    pub(crate) json_limits: tern_protocol::JsonLimits,
}

/// An MCP server: what it offers, and the dispatcher that answers requests
/// statelessly. Cheap to clone; share one between transports.
#[derive(Clone)]
pub struct Server {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let registry = self.registry();
        f.debug_struct("Server")
            .field("info", &self.inner.engine.info)
            .field("tools", &registry.tools.keys().collect::<Vec<_>>())
            .field("prompts", &registry.prompts.keys().collect::<Vec<_>>())
            .field("resources", &registry.resources.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Server {
    /// This server's self-description.
    pub fn info(&self) -> &Implementation {
        &self.inner.engine.info
    }

    /// The capabilities `server/discover` advertises, derived from what is
    /// registered now.
    pub fn capabilities(&self) -> ServerCapabilities {
        self.registry().capabilities.clone()
    }

    pub(crate) fn registry(&self) -> Arc<Registry> {
        Arc::clone(
            &self
                .inner
                .registry
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn update(
        &self,
        change: impl FnOnce(&mut Registry) -> Result<bool, BuildError>,
    ) -> Result<bool, BuildError> {
        let mut slot = self
            .inner
            .registry
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = (**slot).clone();
        let changed = change(&mut next)?;
        if changed {
            next.refresh();
            *slot = Arc::new(next);
        }
        Ok(changed)
    }

    /// The announcer of changes to open subscriptions.
    pub fn changes(&self) -> &Changes {
        &self.inner.changes
    }

    /// Adds (or replaces) a tool at run time and tells listeners
    /// (`notifications/tools/list_changed`).
    pub fn add_tool(&self, tool: ToolDef) -> Result<(), BuildError> {
        let entry = Arc::new(ToolEntry::new(tool)?);
        self.update(|r| {
            r.tools.insert(entry.def.tool.name.clone(), entry);
            Ok(true)
        })?;
        self.inner.changes.tools_changed();
        Ok(())
    }

    /// Removes a tool at run time; `true` if it was there (listeners are told).
    pub fn remove_tool(&self, name: &str) -> bool {
        let removed = self
            .update(|r| Ok(r.tools.shift_remove(name).is_some()))
            .unwrap_or(false);
        if removed {
            self.inner.changes.tools_changed();
        }
        removed
    }

    /// Adds (or replaces) a prompt at run time and tells listeners.
    pub fn add_prompt(&self, prompt: PromptDef) -> Result<(), BuildError> {
        prompt.check()?;
        let prompt = Arc::new(prompt);
        self.update(|r| {
            r.prompts.insert(prompt.prompt.name.clone(), prompt);
            Ok(true)
        })?;
        self.inner.changes.prompts_changed();
        Ok(())
    }

    /// Removes a prompt at run time; `true` if it was there.
    pub fn remove_prompt(&self, name: &str) -> bool {
        let removed = self
            .update(|r| Ok(r.prompts.shift_remove(name).is_some()))
            .unwrap_or(false);
        if removed {
            self.inner.changes.prompts_changed();
        }
        removed
    }

    /// Adds (or replaces) a resource at run time and tells listeners.
    pub fn add_resource(&self, resource: ResourceDef) -> Result<(), BuildError> {
        let resource = Arc::new(resource.finish()?);
        self.update(|r| {
            r.resources.insert(resource.resource.uri.clone(), resource);
            Ok(true)
        })?;
        self.inner.changes.resources_changed();
        Ok(())
    }

    /// Removes a resource at run time; `true` if it was there.
    pub fn remove_resource(&self, uri: &str) -> bool {
        let removed = self
            .update(|r| Ok(r.resources.shift_remove(uri).is_some()))
            .unwrap_or(false);
        if removed {
            self.inner.changes.resources_changed();
        }
        removed
    }

    /// Serves `catalog` from now on in place of the skills served before
    /// (Skills extension; a server built without [`crate::ServerBuilder::skills`]
    /// starts declaring the extension). Requests already running keep the
    /// catalogue they started with. When what `resources/list` shows
    /// changed (a skill added or removed, a `SKILL.md`'s name or
    /// description), listeners are told
    /// (`notifications/resources/list_changed`: the extension has no
    /// notification of its own); returns whether they were. Each file whose
    /// bytes changed or that is gone gets `notifications/resources/updated`
    /// for the listens that follow it (a skill file is a resource a listen
    /// may name).
    pub fn replace_skills(&self, catalog: crate::skill::SkillCatalog) -> bool {
        let mut listed = false;
        let mut updated: Vec<String> = Vec::new();
        let _ = self.update(|r| {
            listed = r.skills.as_ref().map(crate::skill::SkillCatalog::listing)
                != Some(catalog.listing());
            // Each file whose bytes changed, or that is gone: its
            // `resources/updated` for whoever listens to it.
            if let Some(old) = &r.skills {
                updated = old
                    .file_uris()
                    .filter(|uri| old.file(uri) != catalog.file(uri))
                    .map(str::to_owned)
                    .collect();
            }
            r.skills = Some(catalog);
            Ok(true)
        });
        if listed {
            self.inner.changes.resources_changed();
        }
        for uri in updated {
            self.inner.changes.resource_updated(uri);
        }
        listed
    }

    /// The skills served now (Skills extension).
    pub fn skills(&self) -> Option<crate::skill::SkillCatalog> {
        self.registry().skills.clone()
    }

    /// Ends every open subscription gracefully (each gets its closing
    /// result); call it before stopping the process.
    pub fn shutdown(&self) {
        self.inner.shutdown.cancel();
    }

    /// Stops every task this process runs, cleanly: each is marked `failed`
    /// ("outcome unknown: the server stopped") in the store at once, rather
    /// than after its lease lapses, and its handler is dropped. Resolves once
    /// every runner has written. Call it before the process exits.
    pub async fn stop_tasks(&self) {
        let tasks = &self.inner.engine.tasks;
        tasks.shutdown.cancel();
        let mut running = tasks.running.subscribe();
        let _ = running.wait_for(|n| *n == 0).await;
    }

    /// Starts taking durable tasks whose runner died
    /// ([`crate::ToolDef::durable`]) on the current tokio runtime: a loop
    /// that claims lapsed tasks from the task store
    /// ([`crate::task::TaskStore::claim_lapsed`]) and runs them again from
    /// their journal, until [`Self::stop_tasks`] or the server is dropped.
    /// [`crate::ServerBuilder::build`] starts it when called inside a
    /// runtime, and the first request otherwise; call it yourself to
    /// recover before any request arrives (a process started again on its
    /// SQLite file). Once per server: later calls do nothing.
    ///
    /// # Panics
    /// Outside a tokio runtime.
    pub fn recover_tasks(&self) {
        use std::sync::atomic::Ordering;
        // Every request calls this: a plain read first.
        if self.inner.recovering.load(Ordering::Acquire)
            || self.inner.recovering.swap(true, Ordering::AcqRel)
        {
            return;
        }
        let tools = Arc::new(RecoveryTools(Arc::downgrade(&self.inner)));
        tokio::spawn(Arc::clone(&self.inner.engine.tasks).recover_loop(tools));
    }

    /// Replaces the `requestState` key ring without a restart (rotation:
    /// put the new key first and keep the old ones, so states sealed before
    /// still open; drop an old key once states sealed with it have expired).
    /// The lifetime, size and audience of states stay. Each step of a leg
    /// reads the ring current then: a leg that opened its state under the
    /// old ring seals its next one under the new (which still holds the old
    /// key, so nothing it sealed is lost).
    pub fn reload_keys(&self, keys: crate::KeyRing) {
        let mut sealer = self
            .inner
            .engine
            .sealer
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let options = sealer.options().clone();
        *sealer = Arc::new(tern_seal::Sealer::new(keys, options));
    }

    /// The ids of the current key ring, the sealing one first.
    pub fn key_ids(&self) -> Vec<String> {
        self.inner
            .engine
            .sealer()
            .key_ring()
            .key_ids()
            .map(str::to_owned)
            .collect()
    }

    /// How 2025 clients are served; `None` when the server is modern only.
    pub fn legacy_options(&self) -> Option<crate::legacy::options::LegacyOptions> {
        self.inner.config.legacy
    }

    /// The method is served: known, not removed, and behind a capability this
    /// server advertises (otherwise `-32601`).
    pub fn serves(&self, method: &str) -> bool {
        serves(&self.registry(), method)
    }
}

/// [`Server::serves`], on one registry snapshot.
pub(crate) fn serves(registry: &Registry, method: &str) -> bool {
    let caps = &registry.capabilities;
    match method {
        method::DISCOVER => true,
        method::TOOLS_LIST | method::TOOLS_CALL => caps.tools.is_some(),
        method::RESOURCES_LIST | method::RESOURCES_TEMPLATES_LIST | method::RESOURCES_READ => {
            caps.resources.is_some()
        }
        method::PROMPTS_LIST | method::PROMPTS_GET => caps.prompts.is_some(),
        method::COMPLETION_COMPLETE => caps.completions.is_some(),
        method::TASKS_GET | method::TASKS_UPDATE | method::TASKS_CANCEL => {
            caps.extension(tern_protocol::task::TASKS_EXTENSION)
        }
        method::SKILLS_LIST | method::SKILLS_GET | method::RESOURCES_DIRECTORY_READ => {
            registry.skills.is_some()
        }
        method::SUBSCRIPTIONS_LISTEN => {
            caps.tools.is_some() || caps.prompts.is_some() || caps.resources.is_some()
        }
        _ => false,
    }
}

/// The server's tools as recovery sees them: the registry current when a
/// lapsed task is taken.
pub(crate) struct RecoveryTools(pub(crate) std::sync::Weak<Inner>);

impl crate::task::durable::Tools for RecoveryTools {
    fn rerun(
        &self,
        tool: &str,
        version: &str,
        ctx: crate::Ctx,
        arguments: Arc<serde_json::Value>,
    ) -> Option<crate::task::durable::Rerun> {
        let inner = self.0.upgrade()?;
        let registry = Arc::clone(
            &inner
                .registry
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let entry = registry.tools.get(tool)?;
        crate::tool::rerun(Arc::clone(&inner.engine), entry, version, ctx, arguments)
    }

    fn engine(&self) -> Option<Arc<Engine>> {
        self.0.upgrade().map(|inner| Arc::clone(&inner.engine))
    }
}
