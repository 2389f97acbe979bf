//! `subscriptions/listen` through the gateway (spec: Subscriptions): one
//! listen stream per upstream, opened by the gateway itself, not one per
//! client.
//!
//! - Each upstream that is up is asked for its list-changed notifications;
//!   when it says a list changed, its lists are read again and the
//!   catalogue rebuilt, which tells the gateway's own listeners (the merged
//!   list changed).
//! - A client's stream that follows resource URIs makes the gateway follow
//!   each URI at the upstream that serves it (routed as a read is), for as
//!   long as that stream lives: the union of the URIs its clients follow,
//!   counted, so that two clients on one URI make one upstream
//!   subscription. When the union changes, the upstream's stream is opened
//!   again with the new set. An upstream's `notifications/resources/updated`
//!   is handed to the gateway's streams, each of which passes it on only if
//!   it follows that URI.
//!
//! A 2025-11-25 upstream is followed the same way: the dual-era client
//! turns the listen into that era's `resources/subscribe` and standalone
//! stream. An upstream that does not serve `subscriptions/listen` is asked
//! again only when it restarts or the URIs change.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tern_protocol::task::{DetailedTask, TASKS_EXTENSION};
use tern_protocol::{ClientCapabilities, ServerNotification, method};
use tokio::sync::watch;

use crate::catalogue::Catalogue;
use crate::upstream::{MAX_BACKOFF, Upstream};

/// What the gateway's clients follow, and what its upstreams acknowledged.
#[derive(Debug)]
pub(crate) struct Listens {
    /// URI → (the upstream that serves it, the client streams following it).
    wanted: Mutex<HashMap<String, (usize, usize)>>,
    /// Bumped each time `wanted` gains or loses a URI.
    version: watch::Sender<u64>,
    /// Per upstream, the URIs its stream acknowledged.
    acked: Mutex<HashMap<usize, Vec<String>>>,
    /// The union of `acked`.
    following: watch::Sender<BTreeSet<String>>,
}

impl Default for Listens {
    fn default() -> Self {
        Self {
            wanted: Mutex::default(),
            version: watch::Sender::new(0),
            acked: Mutex::default(),
            following: watch::Sender::new(BTreeSet::new()),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Listens {
    /// The URIs upstream `index` should follow now, sorted.
    fn uris_of(&self, index: usize) -> Vec<String> {
        let mut uris: Vec<String> = lock(&self.wanted)
            .iter()
            .filter(|(_, (i, _))| *i == index)
            .map(|(uri, _)| uri.clone())
            .collect();
        uris.sort();
        uris
    }

    fn wanted_at(&self, index: usize, uri: &str) -> bool {
        lock(&self.wanted)
            .get(uri)
            .is_some_and(|(i, _)| *i == index)
    }

    fn set_acked(&self, index: usize, uris: Vec<String>) {
        let mut acked = lock(&self.acked);
        if uris.is_empty() {
            acked.remove(&index);
        } else {
            acked.insert(index, uris);
        }
        let union: BTreeSet<String> = acked.values().flatten().cloned().collect();
        self.following.send_if_modified(|now| {
            let changed = *now != union;
            *now = union;
            changed
        });
    }

    /// The resource URIs the upstreams acknowledged following, as it changes.
    pub(crate) fn following(&self) -> watch::Receiver<BTreeSet<String>> {
        self.following.subscribe()
    }
}

/// A client stream's hold on the URIs it follows: released when dropped.
struct Followed {
    listens: Arc<Listens>,
    uris: Vec<String>,
}

impl Drop for Followed {
    fn drop(&mut self) {
        let mut changed = false;
        {
            let mut wanted = lock(&self.listens.wanted);
            for uri in &self.uris {
                if let Some((_, n)) = wanted.get_mut(uri) {
                    *n -= 1;
                    if *n == 0 {
                        wanted.remove(uri);
                        changed = true;
                    }
                }
            }
        }
        if changed {
            self.listens.version.send_modify(|v| *v += 1);
        }
    }
}

/// A client stream follows `uris`: each held at the upstream `catalogue`
/// routes it to (a URI no upstream serves is left out: nothing would ever
/// update it), until the returned guard is dropped.
pub(crate) fn follow(
    listens: &Arc<Listens>,
    catalogue: &Catalogue,
    uris: &[String],
) -> Box<dyn std::any::Any + Send> {
    let mut held = Vec::new();
    let mut changed = false;
    {
        let mut wanted = lock(&listens.wanted);
        for uri in uris {
            let Some(index) = catalogue.resource_upstream(uri) else {
                continue;
            };
            let entry = wanted.entry(uri.clone()).or_insert((index, 0));
            entry.1 += 1;
            changed |= entry.1 == 1;
            held.push(uri.clone());
        }
    }
    if changed {
        listens.version.send_modify(|v| *v += 1);
    }
    Box::new(Followed {
        listens: Arc::clone(listens),
        uris: held,
    })
}

/// Aborts its tasks when dropped (each one's upstream listen is then
/// cancelled).
struct AbortOnDrop(Vec<tokio::task::JoinHandle<()>>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// One client stream's relayed tasks, by upstream: each task's id there
/// and the id the client holds (wrapped).
pub(crate) type TasksAt = Vec<(Arc<Upstream>, Vec<(String, String)>)>;

/// Follows `tasks` at their upstreams, one listen stream per upstream for
/// this client stream (task ids are the caller's own): their statuses come
/// on the returned receiver under the ids the client holds, until the
/// guard is dropped. A listen with task ids declares the Tasks extension
/// (spec: the extension's `subscriptions/listen` member), nothing else.
pub(crate) fn follow_tasks(
    tasks: TasksAt,
) -> (
    Box<dyn std::any::Any + Send>,
    tokio::sync::mpsc::UnboundedReceiver<DetailedTask>,
) {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let mut running = Vec::new();
    for (upstream, ids) in tasks {
        let tx = tx.clone();
        running.push(tokio::spawn(async move {
            let wrapped: HashMap<String, String> = ids.iter().cloned().collect();
            let theirs: Vec<&String> = ids.iter().map(|(id, _)| id).collect();
            let params = json!({"notifications": {"taskIds": theirs}});
            let capabilities = ClientCapabilities::default().with_extension(TASKS_EXTENSION);
            let send = move |mut task: DetailedTask| {
                if let Some(id) = wrapped.get(&task.task.task_id) {
                    task.task.task_id.clone_from(id);
                    let _ = tx.send(task);
                }
            };
            let at = Arc::clone(&upstream);
            let tell = move |n: ServerNotification| match n {
                ServerNotification::TaskStatus(p) => send(p.task),
                // Followed there from now on: each task's current status,
                // so that a change between the client's acknowledgement
                // and the upstream's is not lost.
                ServerNotification::SubscriptionsAcknowledged(ack) => {
                    for id in ack.notifications.task_ids.unwrap_or_default() {
                        let (at, send) = (Arc::clone(&at), send.clone());
                        tokio::spawn(async move {
                            let caps = ClientCapabilities::default().with_extension(TASKS_EXTENSION);
                            let now = at.request(method::TASKS_GET, json!({"taskId": id}), &caps).await;
                            if let Some(task) = now.ok().and_then(|t| serde_json::from_value(t).ok()) {
                                send(task);
                            }
                        });
                    }
                }
                _ => {}
            };
            let ended = upstream
                .stream(method::SUBSCRIPTIONS_LISTEN, params, &capabilities, &tell)
                .await;
            if let Err(e) = ended {
                tracing::debug!(upstream = %upstream.name(), error = %e.message, "a task listen ended");
            }
        }));
    }
    (Box::new(AbortOnDrop(running)), rx)
}

/// What a watcher does with what it hears.
pub(crate) struct Hooks {
    /// Hands a resource update to the gateway's streams.
    pub(crate) updated: Arc<dyn Fn(String) + Send + Sync>,
    /// The upstream said a list changed (its lists are read again).
    pub(crate) lists_changed: Arc<dyn Fn() + Send + Sync>,
    /// Tells each time the catalogue was rebuilt (an upstream came or went).
    pub(crate) generations: watch::Receiver<u64>,
}

/// The listen params for upstream `index`: every list's changes, and the
/// URIs the gateway's clients follow there.
fn params(uris: &[String]) -> Value {
    let mut notifications = json!({
        "toolsListChanged": true,
        "promptsListChanged": true,
        "resourcesListChanged": true,
    });
    if !uris.is_empty() {
        notifications["resourceSubscriptions"] = json!(uris);
    }
    json!({ "notifications": notifications })
}

/// Returns once the URIs upstream `index` should follow differ from `now`
/// (a change at another upstream is not one).
async fn uris_changed(
    listens: &Listens,
    wanted: &mut watch::Receiver<u64>,
    index: usize,
    now: &[String],
) {
    loop {
        if wanted.changed().await.is_err() {
            return std::future::pending().await;
        }
        if listens.uris_of(index) != now {
            return;
        }
    }
}

/// Keeps one listen stream open at `upstream` (slot `index`) for as long as
/// it is not closed (module docs).
pub(crate) async fn watch(
    listens: Arc<Listens>,
    index: usize,
    upstream: Arc<Upstream>,
    mut hooks: Hooks,
) {
    let mut wanted = listens.version.subscribe();
    loop {
        if upstream.is_closed() {
            listens.set_acked(index, Vec::new());
            return;
        }
        if !upstream.is_up() {
            listens.set_acked(index, Vec::new());
            if hooks.generations.changed().await.is_err() {
                return;
            }
            continue;
        }
        wanted.borrow_and_update();
        let uris = listens.uris_of(index);
        let tell = {
            let listens = Arc::clone(&listens);
            let updated = Arc::clone(&hooks.updated);
            let lists_changed = Arc::clone(&hooks.lists_changed);
            move |n: ServerNotification| match n {
                ServerNotification::SubscriptionsAcknowledged(ack) => {
                    let uris = ack.notifications.resource_subscriptions.unwrap_or_default();
                    listens.set_acked(index, uris);
                }
                ServerNotification::ResourceUpdated(p) if listens.wanted_at(index, &p.uri) => {
                    updated(p.uri);
                }
                ServerNotification::ToolListChanged(_)
                | ServerNotification::PromptListChanged(_)
                | ServerNotification::ResourceListChanged(_) => lists_changed(),
                _ => {}
            }
        };
        let none = ClientCapabilities::default();
        tokio::select! {
            ended = upstream.stream(method::SUBSCRIPTIONS_LISTEN, params(&uris), &none, &tell) => {
                listens.set_acked(index, Vec::new());
                match ended {
                    Ok(_) => tracing::debug!(upstream = %upstream.name(), "its listen stream closed"),
                    Err(e) => tracing::debug!(upstream = %upstream.name(), error = %e.message, "its listen stream ended"),
                }
                // Opened again once something changed (a restart, the URIs),
                // or after a while: never in a loop against a refusal.
                tokio::select! {
                    changed = hooks.generations.changed() => if changed.is_err() { return },
                    () = uris_changed(&listens, &mut wanted, index, &uris) => {}
                    () = tokio::time::sleep(MAX_BACKOFF) => {}
                }
            }
            // Opened again with the new URIs.
            () = uris_changed(&listens, &mut wanted, index, &uris) => {}
        }
    }
}
