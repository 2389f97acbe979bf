//! tern-client's floors (ARCHITECTURE.md, "Layers"): a module uses its own
//! floor and the floors below, never one above.

/// Lowest first.
const FLOORS: &[&[&str]] = &[
    // Primitives: bounds, errors, boxed futures, HTTPS, header encoding.
    &["limits", "error", "future", "tls", "headers"],
    // What the client answers with: its handlers and preset answers.
    &["handler", "preset"],
    // OAuth 2.1 for the HTTP transport.
    &["auth"],
    // The wire: stdio, Streamable HTTP, a 2025 server's own requests.
    &["transport"],
    // The client: requests, MRTR rounds, lists, tasks.
    &["client"],
    // 2025-11-25 servers behind one transport (it polls as the client does).
    &["legacy"],
];

#[test]
fn no_import_runs_up_a_floor() {
    tern_test_support::layers::check(env!("CARGO_MANIFEST_DIR"), FLOORS, &[]);
}
