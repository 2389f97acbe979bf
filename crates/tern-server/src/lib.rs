//! `tern-server`: build Model Context Protocol (2026-07-28) servers from plain
//! `async fn` handlers.
//!
//! This crate will hold the registry of tools, resources, resource templates,
//! prompts and completions; the extractors (`Args<T>`, `Ctx`, the principal); the
//! stateless MRTR engine that lets a handler `ctx.ask(...).await` and seals what
//! the next leg needs into `requestState`; capability gating, `server/discover`,
//! caching hints, progress, cancellation, tasks and subscriptions; and the stdio
//! and Streamable HTTP transports.
//!
//! Status: reserved. It is filled by the server and HTTP issues.
