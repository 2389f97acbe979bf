//! `tern-server`: build Model Context Protocol (2026-07-28) servers from plain
//! `async fn` handlers, with a stateless MRTR engine.
//!
//! A handler reads top to bottom and asks the client questions with
//! [`Ctx::ask`]. tern answers the request with `input_required`, seals what
//! the next leg needs into `requestState` (encrypted, bound to the caller, the
//! tool and its arguments, expiring), and when the client retries with the
//! answers it runs the handler again from the top, on whichever process
//! receives the retry. No server memory is kept between legs.
//!
//! ```
//! use serde::Deserialize;
//! use tern_server::{Answer, Args, Ctx, Elicit, Server, ToolDef, ToolError};
//!
//! #[derive(Deserialize, schemars::JsonSchema)]
//! struct Provision {
//!     /// Name of the database.
//!     name: String,
//! }
//!
//! #[derive(Deserialize, schemars::JsonSchema)]
//! struct Region {
//!     /// Where the data lives.
//!     region: RegionChoice,
//! }
//!
//! #[derive(Debug, Deserialize, schemars::JsonSchema)]
//! #[serde(rename_all = "kebab-case")]
//! enum RegionChoice { EuWest1, UsEast1, ApSouth1 }
//!
//! async fn provision_database(ctx: Ctx, Args(a): Args<Provision>) -> Result<String, ToolError> {
//!     let answer = ctx.ask(Elicit::<Region>::form(format!("Which region should {} live in?", a.name))).await?;
//!     let Answer::Accept(Region { region }) = answer else { return Ok("Provisioning cancelled.".into()) };
//!     Ok(format!("Created {} in {region:?}", a.name))
//! }
//!
//! let server = Server::builder("inventory", "1.0.0")
//!     .tool(ToolDef::new("provision_database", "Creates a database", provision_database).elicits::<Region>())
//!     .build()?;
//! assert!(server.serves("tools/call"));
//! # Ok::<(), tern_server::BuildError>(())
//! ```
//!
//! The same handler also runs under the *await* strategy
//! ([`Server::handle_awaiting`], an [`AnswerSource`]): it runs once and its
//! questions are answered while it keeps running, as a task or a 2025-11-25
//! session drives it. See [`engine`] for the leg runner.
//!
//! Side effects belong after the first question: a tool marked
//! [`ToolDef::idempotent_retry`] then runs each retry's effect exactly once,
//! even when the client's connection breaks mid-run (the run belongs to the
//! server; duplicates get its stored outcome; a run that died reads
//! [`error::codes::OUTCOME_UNKNOWN`], never a second run).
//!
//! Secure defaults, with their numbers: `requestState` lives 10 minutes per
//! round ([`DEFAULT_STATE_TTL`]) and is at most 64 KiB
//! ([`DEFAULT_MAX_STATE_LEN`]); a call lives at most 1 hour and 32 rounds,
//! a guarded leg at most 60 s ([`CallLimits`]); the replay store holds at
//! most 64 MiB, 8 MiB per principal and 1 MiB per anonymous peer
//! ([`StoreLimits`]); every refused state answers the same `-32602` and logs
//! the real reason; stdio lines are at most 4 MiB. Without configured keys a
//! random key serves one process only, and says so; a server declared
//! [`ServerBuilder::multi_instance`] refuses a random key and a replay store
//! only one process sees.
//!
//! Features (all on by default; the core is always built: registry,
//! dispatch, the engine, [`Ctx`], handlers, questions, the task and replay
//! store contracts, [`transport::stdio`], the 2025-11-25 sessions):
//!
//! | feature | adds | pulls |
//! |---|---|---|
//! | `http` | `transport::http` (Streamable HTTP, `serve`, the accept loop, trusted proxies), `auth::ResourceServer` with a verifier of your own | axum, hyper, tower |
//! | `auth` (implies `http`) | `auth::JwtVerifier`, `auth::Introspection` | ring (as rustls), rustls, webpki-roots |
//! | `validate` | `tools/call` arguments checked against the tool's `inputSchema` (JSON Schema 2020-12) before the handler runs, a bad one answered as a tool error the model can fix; each `inputSchema` compiled at build. Without it the schema is advertised, not enforced, and a typed handler's decoding is the only check | jsonschema |
//! | `testing` | [`testing`]: the in-process test client, the store contract suites | nothing |
//!
//! A stdio-only server: `tern-server = { version = "0.1", default-features
//! = false, features = ["validate"] }`. Stability: pre-1.0.

pub mod auth;
pub mod builder;
mod cache;
mod call;
mod completion;
mod ctx;
pub(crate) mod dispatch;
pub mod engine;
pub mod error;
pub mod form;
mod future;
pub mod handler;
mod ids;
pub(crate) mod json;
pub mod legacy;
pub mod metrics;
pub(crate) mod paging;
mod principal;
mod prompt;
pub mod question;
pub mod registry;
pub mod relay;
mod rendered;
pub mod replay;
mod resource;
mod server;
pub(crate) mod share;
pub mod skill;
pub(crate) mod subscription;
pub mod task;
pub(crate) mod template;
#[cfg(feature = "testing")]
pub mod testing;
mod tool;
pub mod transport;

pub use builder::{
    CacheHints, DEFAULT_MAX_LISTEN_URIS, DEFAULT_MAX_LISTENS, DEFAULT_MAX_STATE_LEN,
    DEFAULT_PAGE_SIZE, DEFAULT_STATE_TTL, ServerBuilder,
};
pub use call::{CallContext, Reply};
pub use completion::{CompletionDef, CompletionRequest};
pub use ctx::{Ctx, Notifications, Notifier};
pub use dispatch::DecodedRequest;
pub use engine::{AnswerSource, CallId, CallLimits, Clock, SystemClock};
pub use error::{AskError, BuildError, ToolError};
pub use handler::{Args, Asked, Asks, Json, ToolOutput, Uri};
pub use principal::Principal;
pub use prompt::PromptDef;
pub use question::{Answer, AskInput, Elicit, ListRoots, Question, Sample};
pub use registry::{Change, ChangeRelay, Changes};
pub use replay::{MemoryReplayStore, ReplayStore, StoreLimits};
pub use resource::{ResourceDef, ResourceTemplateDef};
pub use server::Server;
pub use task::{MemoryTaskStore, TaskConfig, TaskStore, TaskSupport};
pub use tern_seal::{KeyRing, TokenVersion};
pub use tool::ToolDef;
