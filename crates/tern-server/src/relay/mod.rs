//! A catalogue served by someone else — a gateway's upstream servers — and
//! not registered entry by entry: a [`Relay`] pages the lists itself
//! (*list provider*) and answers the `tools/call`, `prompts/get` and
//! `resources/read` the registry has no entry for (*relay handler*).
//!
//! A relayed leg that needs the client answers [`RelayOutcome::InputRequired`]
//! with the input requests to pass on as they are, and the *routing* the next
//! leg needs (which upstream, its state, …). The server then:
//!
//! - checks every request against *this* request's declared capabilities
//!   (`-32021` when the relay asked beyond them, rule `ask-declared-only`);
//! - under MRTR, seals the routing alone into the `requestState` it answers
//!   with — bound to the principal, method, target and arguments and
//!   expiring, as the engine binds its own states (rules `state-integrity`,
//!   `state-bound-principal`, `state-bound-request`, `state-expiry`) —, and
//!   on the retry opens it, checks it, and hands the routing back with the
//!   retry's `inputResponses` as the client sent them;
//! - under the *await* strategy (a 2025-11-25 session, a task), asks the
//!   requests of each round on the session ([`crate::question::AskInput`])
//!   and calls the relay again with the answers, round after round, holding
//!   the routing in memory.
//!
//! ```
//! use tern_server::relay::{ListKind, ListPage, ListRequest, Relay, RelayLeg, RelayOutcome};
//! use tern_server::replay::BoxFuture;
//! use tern_server::Server;
//! use tern_protocol::error::ErrorObject;
//!
//! /// One tool, served from elsewhere.
//! struct Echo;
//!
//! impl Relay for Echo {
//!     fn lists(&self) -> &[ListKind] {
//!         &[ListKind::Tools]
//!     }
//!     fn list(&self, _kind: ListKind, _request: ListRequest) -> BoxFuture<'static, Result<ListPage, ErrorObject>> {
//!         let tool = serde_json::json!({"name": "echo", "inputSchema": {"type": "object"}});
//!         Box::pin(async move { Ok(ListPage::new(vec![tool])) })
//!     }
//!     fn call(&self, leg: RelayLeg) -> BoxFuture<'static, Result<RelayOutcome, ErrorObject>> {
//!         let text = leg.arguments.to_string();
//!         Box::pin(async move {
//!             Ok(RelayOutcome::Complete(serde_json::json!({"content": [{"type": "text", "text": text}]})))
//!         })
//!     }
//! }
//!
//! let server = Server::builder("gateway", "1").relay(std::sync::Arc::new(Echo)).build()?;
//! assert!(server.serves("tools/call") && !server.serves("prompts/get"));
//! # Ok::<(), tern_server::BuildError>(())
//! ```

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use tern_protocol::error::ErrorObject;
use tern_protocol::meta::RequestMeta;
use tern_protocol::result::CacheScope;
use tern_protocol::{InputRequests, InputResponses};

use crate::ctx::Ctx;
use crate::future::BoxFuture;
use crate::principal::Principal;

pub(crate) mod run;

/// A list a [`Relay`] serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ListKind {
    /// `tools/list` (and so `tools/call`).
    Tools,
    /// `prompts/list` (and so `prompts/get`).
    Prompts,
    /// `resources/list` (and so `resources/read`).
    Resources,
    /// `resources/templates/list`.
    ResourceTemplates,
}

impl ListKind {
    /// The member of the list result that holds the entries.
    pub fn member(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::ResourceTemplates => "resourceTemplates",
        }
    }
}

/// One list request, for [`Relay::list`].
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ListRequest {
    /// The client's cursor, as it sent it: the relay's own (opaque to the
    /// client; a relay that cannot read it answers `-32602`).
    pub cursor: Option<String>,
    /// The caller.
    pub principal: Principal,
    /// The caller's verified OAuth access token, when the endpoint checks
    /// them (its scopes, for a relay that lists by scope).
    pub access_token: Option<Arc<crate::auth::AccessToken>>,
    /// The request's `_meta`.
    pub meta: RequestMeta,
}

/// One page of a relayed list.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ListPage {
    /// The entries, each passed to the client as it is (every member kept:
    /// icons, annotations, schemas, `x-mcp-header`, `_meta`).
    pub items: Vec<Value>,
    /// The cursor of the next page.
    pub next_cursor: Option<String>,
    /// `ttlMs`; `None`: the server's list hints.
    pub ttl_ms: Option<u64>,
    /// `cacheScope`; `None`: the server's list hints.
    pub cache_scope: Option<CacheScope>,
}

impl ListPage {
    /// A last page of `items`, with the server's cache hints.
    pub fn new(items: Vec<Value>) -> Self {
        Self {
            items,
            next_cursor: None,
            ttl_ms: None,
            cache_scope: None,
        }
    }

    /// Sets the cursor of the next page.
    #[must_use]
    pub fn next_cursor(mut self, cursor: impl Into<String>) -> Self {
        self.next_cursor = Some(cursor.into());
        self
    }

    /// Sets the cache hints of this page.
    #[must_use]
    pub fn cache(mut self, ttl_ms: u64, scope: CacheScope) -> Self {
        self.ttl_ms = Some(ttl_ms);
        self.cache_scope = Some(scope);
        self
    }
}

/// One leg of a relayed `tools/call`, `prompts/get` or `resources/read`.
#[derive(Debug)]
#[non_exhaustive]
pub struct RelayLeg {
    /// The leg's context: principal, declared capabilities (what the relay
    /// may forward, never more), cancellation, progress and logs.
    pub ctx: Ctx,
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub method: &'static str,
    /// The tool or prompt name, or the resource URI.
    pub target: String,
    /// The tool's or prompt's arguments (a JSON object; `{}` for a read).
    pub arguments: Arc<Value>,
    /// The answers of this leg: under MRTR the retry's `inputResponses` as
    /// the client sent them, under *await* the answers the session gave.
    /// `None` on a call's first leg.
    pub input_responses: Option<InputResponses>,
    /// What the previous leg's [`RelayOutcome::InputRequired`] carried
    /// (opened from the sealed `requestState` under MRTR). `None` on a
    /// call's first leg.
    pub routing: Option<Value>,
    /// The leg's round: 1 for the first, one more per `input_required`.
    pub round: u32,
    /// The leg runs under the *await* strategy (a 2025-11-25 session, a
    /// task): its input requests are asked live and the relay is called
    /// again with the answers; `false` under MRTR.
    pub live: bool,
}

/// How a relayed leg ended.
#[derive(Debug, Clone)]
pub enum RelayOutcome {
    /// The method's result object, passed to the client as it is but for
    /// `_meta.serverInfo`, which is this server's.
    Complete(Value),
    /// The method's result object as its sender wrote it (an upstream's
    /// reply, undecoded): passed on as [`Self::Complete`] is, its members
    /// copied as written rather than decoded into a tree and encoded again.
    /// A text that is not one object with distinct member names (at the
    /// top and in `_meta`), or that spans lines, is decoded and written
    /// anew (what the client reads is then the object it would read from
    /// [`Self::Complete`]). Deeper members pass as written, unread: what a
    /// value tree would refuse or resolve (a number past `f64`, a repeated
    /// name inside `content`) reaches the client as its sender wrote it.
    Written(Box<RawValue>),
    /// The client must answer `requests` (none: a state-only round, the
    /// client comes back later); the next leg gets `routing` back.
    InputRequired {
        /// The input requests, passed on as they are, under their keys.
        requests: InputRequests,
        /// What the next leg needs: sealed into the `requestState` under
        /// MRTR, so keep it small (it counts against the state's size cap,
        /// [`crate::ServerBuilder::max_state_len`]).
        routing: Value,
    },
}

impl PartialEq for RelayOutcome {
    /// Written results compare by their text.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Complete(a), Self::Complete(b)) => a == b,
            (Self::Written(a), Self::Written(b)) => a.get() == b.get(),
            (
                Self::InputRequired {
                    requests: a,
                    routing: r,
                },
                Self::InputRequired {
                    requests: b,
                    routing: s,
                },
            ) => a == b && r == s,
            _ => false,
        }
    }
}

/// What a relay follows for one `subscriptions/listen` stream
/// ([`Relay::follow`]), held while the stream lives.
#[non_exhaustive]
pub struct Following {
    /// Dropped when the stream ends (the relay stops following then).
    pub guard: Box<dyn std::any::Any + Send>,
    /// The task ids the relay follows: acknowledged to the client, ids it
    /// does not own left out.
    pub task_ids: Vec<String>,
    /// The followed tasks' statuses, each sent to the stream as
    /// `notifications/tasks/status` under its subscription id.
    pub task_status:
        Option<tokio::sync::mpsc::UnboundedReceiver<tern_protocol::task::DetailedTask>>,
}

impl std::fmt::Debug for Following {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Following")
            .field("task_ids", &self.task_ids)
            .finish_non_exhaustive()
    }
}

impl Following {
    /// Follows what `guard` holds; no tasks.
    pub fn new(guard: Box<dyn std::any::Any + Send>) -> Self {
        Self {
            guard,
            task_ids: Vec::new(),
            task_status: None,
        }
    }

    /// Follows the tasks `task_ids`, whose statuses come on `status`.
    #[must_use]
    pub fn tasks(
        mut self,
        task_ids: Vec<String>,
        status: tokio::sync::mpsc::UnboundedReceiver<tern_protocol::task::DetailedTask>,
    ) -> Self {
        self.task_ids = task_ids;
        self.task_status = Some(status);
        self
    }
}

/// `request` asks only for what `capabilities` declared (rule
/// `ask-declared-only`): what the server checks every relayed input request
/// against, for a relay that answers an undeclared question itself (a
/// gateway in front of a 2025-11-25 server that asks live).
pub fn asks_within(
    request: &tern_protocol::InputRequest,
    capabilities: &tern_protocol::ClientCapabilities,
) -> bool {
    crate::question::declared(request, capabilities)
}

/// A catalogue served by someone else (module docs).
pub trait Relay: Send + Sync + 'static {
    /// The lists it serves, each with its method: `tools/call` for
    /// [`ListKind::Tools`], `prompts/get` for [`ListKind::Prompts`],
    /// `resources/read` for either resource list. A server whose relay
    /// serves a list registers no entry of that kind
    /// ([`crate::ServerBuilder::build`] refuses).
    fn lists(&self) -> &[ListKind];

    /// One page of `kind`.
    fn list(
        &self,
        kind: ListKind,
        request: ListRequest,
    ) -> BoxFuture<'static, Result<ListPage, ErrorObject>>;

    /// One leg of a call the registry has no entry for. An error ends the
    /// request with it.
    fn call(&self, leg: RelayLeg) -> BoxFuture<'static, Result<RelayOutcome, ErrorObject>>;

    /// The `x-mcp-header` parameters of the relayed tool `name`, so the
    /// Streamable HTTP transport checks the request's `Mcp-Param-*`
    /// headers against its arguments as for a registered tool. Default:
    /// none.
    fn header_params(&self, name: &str) -> Option<Vec<tern_protocol::header::HeaderParam>> {
        let _ = name;
        None
    }

    /// It runs the tasks its calls create (Tasks extension): the extension
    /// is declared and `tasks/get`, `tasks/update` and `tasks/cancel` go to
    /// [`Self::task`]. Default: no.
    fn relays_tasks(&self) -> bool {
        false
    }

    /// `tasks/get`, `tasks/update` or `tasks/cancel` (`method`) with
    /// `params` as the client sent them, from `principal`: the result
    /// object, passed on but for `_meta.serverInfo`. Called only when
    /// [`Self::relays_tasks`] says so, and only for a request that declared
    /// the extension (else `-32021` first).
    fn task(
        &self,
        method: &'static str,
        params: Value,
        principal: Principal,
    ) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        let _ = (params, principal);
        Box::pin(std::future::ready(Err(ErrorObject::method_not_found(
            method,
        ))))
    }

    /// A `subscriptions/listen` stream opened that follows the resource
    /// `uris` (the relayed resources' updates reach it when the relay hands
    /// them to [`crate::Changes::deliver`]) and, when [`Self::relays_tasks`]
    /// and the request declared the Tasks extension, the `task_ids` its
    /// registry does not know (the relay's, as the client holds them): the
    /// relay follows them at the servers that own them for as long as the
    /// returned [`Following`] lives — it is dropped when the stream ends.
    /// `principal` (and its verified access token, when the endpoint checks
    /// them) is the stream's caller. Default: nothing to follow.
    fn follow(
        &self,
        uris: &[String],
        task_ids: &[String],
        principal: &Principal,
        access_token: Option<&crate::auth::AccessToken>,
    ) -> Following {
        let _ = (uris, task_ids, principal, access_token);
        Following::new(Box::new(()))
    }

    /// A live round ended unfinished: the leg of `ctx`'s call answered
    /// `input_required` with `routing`, the server asked its client itself
    /// (a 2025-11-25 session, or a task: the *await* strategy), and the
    /// request was cancelled, its session or connection went, the answers
    /// never came, or the next leg (given `routing`) failed or was dropped
    /// before its outcome. The relay lets go of what the routing holds (an
    /// upstream's task, a held upstream call) instead of waiting for a
    /// retry that cannot come. Under MRTR a client that never retries is
    /// not seen, so this is never called there: what the routing holds
    /// must expire on its own too. Default: nothing.
    fn abandon(&self, ctx: &Ctx, routing: Value) {
        let _ = (ctx, routing);
    }

    /// It answers `completion/complete` (the `completions` capability is
    /// then declared). Default: no.
    fn completes(&self) -> bool {
        false
    }

    /// `completion/complete` with `params` as the client sent them (their
    /// `_meta` included), for a reference no registered completer serves:
    /// the result object, passed on but for `_meta.serverInfo`. Called
    /// only when [`Self::completes`] says so.
    fn complete(
        &self,
        params: Value,
        principal: Principal,
    ) -> BoxFuture<'static, Result<Value, ErrorObject>> {
        let _ = (params, principal);
        Box::pin(std::future::ready(Err(ErrorObject::method_not_found(
            "completion/complete",
        ))))
    }
}
