//! tern-server's floors (ARCHITECTURE.md, "Layers"): a module uses its own
//! floor and the floors below, never one above.
//!
//! Two circles remain, each inside one floor and on purpose:
//! - `engine::runner` ↔ `task::runner`: `Ctx::into_task` makes the leg
//!   runner hand the call to a task runner, which runs the handler's later
//!   legs through the leg runner (one runner for every way of asking);
//! - `legacy::session` ↔ `legacy::live`: a 2025 session serves a call with
//!   a `Live` answer source, which sends its questions on that session.

/// Lowest first.
const FLOORS: &[&[&str]] = &[
    // Leaves: errors, JSON, metrics, principals, shares, paging, URI
    // templates, form schemas, boxed futures, time and ids, cache hints,
    // the sealed payload's format, the 2025 options.
    &[
        "error",
        "json",
        "metrics",
        "principal",
        "share",
        "paging",
        "template",
        "form",
        "future",
        "ids",
        "cache",
        "engine::payload",
        "legacy::options",
    ],
    // Contracts and questions: the replay and task stores, authorization,
    // the question types, completions.
    &[
        "replay",
        "task::store",
        "task::memory",
        "auth",
        "question",
        "rendered",
        "completion",
    ],
    // What a handler holds: its context, the call around it.
    &["ctx", "call"],
    // Handlers and the ways a question reaches the client.
    &["handler", "engine::strategy"],
    // The engine: the leg runner, guarded legs, tasks.
    &["engine", "task"],
    // Method definitions: tools, prompts, resources, skills.
    &["tool", "prompt", "resource", "skill", "relay"],
    // What the server offers now.
    &["registry"],
    // The server: built, dispatching, listening.
    &["server", "builder", "dispatch", "subscription"],
    // Wires and eras, and the test kit.
    &["legacy", "transport", "testing"],
];

#[test]
fn no_import_runs_up_a_floor() {
    tern_test_support::layers::check(env!("CARGO_MANIFEST_DIR"), FLOORS, &[]);
}
