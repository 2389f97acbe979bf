//! What a server offers, replaced copy-on-write when it changes at run time,
//! and the bus that tells `subscriptions/listen` streams about changes.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use tern_protocol::JsonObject;
use tern_protocol::capabilities::{ListChangedCapability, ResourcesCapability, ServerCapabilities};
use tern_protocol::prompt::Prompt;
use tern_protocol::resource::{Resource, ResourceTemplate};
use tern_protocol::tool::Tool;
use tokio::sync::broadcast;

use crate::completion::CompletionDef;
use crate::prompt::PromptDef;
use crate::relay::ListKind;
use crate::resource::{ResourceDef, ResourceTemplateDef};
use crate::tool::ToolEntry;

pub use tern_protocol::header::HeaderParamType;

/// Everything registered, as one immutable snapshot.
#[derive(Clone, Default)]
pub(crate) struct Registry {
    pub(crate) tools: IndexMap<String, Arc<ToolEntry>>,
    pub(crate) tool_list: Vec<Tool>,
    pub(crate) prompts: IndexMap<String, Arc<PromptDef>>,
    pub(crate) prompt_list: Vec<Prompt>,
    pub(crate) resources: IndexMap<String, Arc<ResourceDef>>,
    pub(crate) resource_list: Vec<Resource>,
    pub(crate) templates: Vec<Arc<ResourceTemplateDef>>,
    pub(crate) template_list: Vec<ResourceTemplate>,
    pub(crate) completions: HashMap<String, CompletionDef>,
    pub(crate) capabilities: ServerCapabilities,
    /// A task store was configured: advertise the Tasks extension even when
    /// no tool supports tasks yet.
    pub(crate) tasks_advertised: bool,
    /// The skills served (Skills extension), when any are.
    pub(crate) skills: Option<crate::skill::SkillCatalog>,
    /// The catalogue served by someone else, when there is one.
    pub(crate) relay: Option<Arc<dyn crate::relay::Relay>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.tools.len())
            .field("relay", &self.relay.is_some())
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// What serves `uri`: a listed resource, else the first template that
    /// matches it, with its variables.
    pub(crate) fn resource_for(&self, uri: &str) -> Option<crate::resource::Found> {
        if let Some(def) = self.resources.get(uri) {
            def.erased
                .clone()
                .map(|h| (h, def.policy, JsonObject::new()))
        } else {
            self.templates.iter().find_map(|t| {
                let vars = t.matcher.as_ref()?.matches(uri)?;
                let vars = vars
                    .into_iter()
                    .map(|(k, v)| (k, serde_json::Value::String(v)))
                    .collect();
                t.erased.clone().map(|h| (h, t.policy, vars))
            })
        }
    }

    /// Recomputes the lists and the capabilities after a change.
    pub(crate) fn refresh(&mut self) {
        self.tool_list = self.tools.values().map(|t| t.def.tool.clone()).collect();
        self.prompt_list = self.prompts.values().map(|p| p.prompt.clone()).collect();
        self.resource_list = self
            .resources
            .values()
            .map(|r| r.resource.clone())
            .collect();
        if let Some(skills) = &self.skills {
            self.resource_list.extend_from_slice(skills.listing());
        }
        self.template_list = self.templates.iter().map(|t| t.template.clone()).collect();
        let relayed = |kinds: &[ListKind]| {
            self.relay
                .as_ref()
                .is_some_and(|r| r.lists().iter().any(|k| kinds.contains(k)))
        };
        let (relay_tools, relay_prompts, relay_resources) = (
            relayed(&[ListKind::Tools]),
            relayed(&[ListKind::Prompts]),
            relayed(&[ListKind::Resources, ListKind::ResourceTemplates]),
        );
        let list_changed = || ListChangedCapability {
            list_changed: Some(true),
            ..ListChangedCapability::default()
        };
        self.capabilities = ServerCapabilities {
            tools: (!self.tools.is_empty() || relay_tools).then(list_changed),
            prompts: (!self.prompts.is_empty() || relay_prompts).then(list_changed),
            resources: (!self.resources.is_empty()
                || !self.templates.is_empty()
                || self.skills.is_some()
                || relay_resources)
                .then(|| ResourcesCapability {
                    subscribe: Some(true),
                    list_changed: Some(true),
                    ..ResourcesCapability::default()
                }),
            completions: (!self.completions.is_empty()
                || self.relay.as_ref().is_some_and(|r| r.completes()))
            .then(JsonObject::new),
            // Log messages work for requests that set a level (deprecated, SEP-2577).
            logging: Some(JsonObject::new()),
            ..ServerCapabilities::default()
        };
        // The Tasks extension, under `extensions` (never a `tasks`
        // capability; Tasks extension › Capability Negotiation), when tasks
        // can be created here.
        let mut extensions = JsonObject::new();
        if self.tasks_advertised
            || self.tools.values().any(|t| t.def.policy.task.is_some())
            || self.relay.as_ref().is_some_and(|r| r.relays_tasks())
        {
            extensions.insert(
                tern_protocol::task::TASKS_EXTENSION.to_owned(),
                serde_json::Value::Object(JsonObject::new()),
            );
        }
        // The Skills extension's settings, straight under its id.
        if self.skills.is_some() {
            extensions.extend([crate::skill::declaration()]);
        }
        self.capabilities.extensions = (!extensions.is_empty()).then_some(extensions);
    }
}

/// A change `subscriptions/listen` streams may be told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The tool list changed.
    Tools,
    /// The prompt list changed.
    Prompts,
    /// The resource list (or the templates) changed.
    Resources,
    /// The resource at this URI changed.
    ResourceUpdated(String),
}

/// Carries resource updates between the replicas of a fleet (Redis
/// pub/sub: `tern_redis::RedisChangeBus`). With a relay, an update announced
/// on any replica reaches the `subscriptions/listen` streams of every
/// replica: [`Changes::resource_updated`] hands it to [`Self::publish`], and
/// the relay delivers what it hears (this replica's own updates included)
/// with [`Changes::deliver`]. List changes (`tools`, `prompts`, `resources`)
/// are not relayed: a registry change made at run time is that replica's
/// own, and its `list_changed` stays on that replica.
pub trait ChangeRelay: Send + Sync + std::fmt::Debug + 'static {
    /// Publishes that the resource at `uri` changed. Best effort: a relay
    /// that cannot reach its bus logs and drops the update (a listener that
    /// must not miss one re-reads the resource when its stream reopens).
    fn publish(&self, uri: &str);
}

/// Announces changes to every open subscription of a server. Cheap to clone;
/// take one from [`crate::ServerBuilder::changes`] to use inside handlers.
/// With several replicas, feed resource updates through a shared bus
/// ([`Changes::relay_through`], `tern-redis`).
#[derive(Debug, Clone)]
pub struct Changes(
    pub(crate) broadcast::Sender<Change>,
    pub(crate) Arc<std::sync::OnceLock<Arc<dyn ChangeRelay>>>,
);

impl Default for Changes {
    fn default() -> Self {
        Self(broadcast::channel(256).0, Arc::default())
    }
}

impl Changes {
    /// How many streams hear the changes now (`subscriptions/listen`
    /// streams, 2025-11-25 sessions' standalone streams, a fleet's change
    /// bus): a gauge, for operators and for tests that a stream's end
    /// lets its listener go.
    pub fn listeners(&self) -> usize {
        self.0.receiver_count()
    }

    /// Announces `change` to this process's streams (a resource update goes
    /// through the relay when there is one).
    pub fn announce(&self, change: Change) {
        if let (Change::ResourceUpdated(uri), Some(relay)) = (&change, self.1.get()) {
            relay.publish(uri);
            return;
        }
        self.deliver(change);
    }

    /// Hands `change` to this process's streams only: what a relay calls
    /// with the updates it hears.
    pub fn deliver(&self, change: Change) {
        // No subscriber is not an error.
        let _ = self.0.send(change);
    }

    /// The tool list changed.
    pub fn tools_changed(&self) {
        self.announce(Change::Tools);
    }

    /// The prompt list changed.
    pub fn prompts_changed(&self) {
        self.announce(Change::Prompts);
    }

    /// The resource list changed.
    pub fn resources_changed(&self) {
        self.announce(Change::Resources);
    }

    /// The resource at `uri` changed (on every replica, with a relay).
    pub fn resource_updated(&self, uri: impl Into<String>) {
        self.announce(Change::ResourceUpdated(uri.into()));
    }

    /// Sends resource updates through `relay` from now on (once; a second
    /// relay is ignored, `false`).
    pub fn relay_through(&self, relay: Arc<dyn ChangeRelay>) -> bool {
        self.1.set(relay).is_ok()
    }

    /// A receiver of every change from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.0.subscribe()
    }
}
