//! tern-gateway's floors (ARCHITECTURE.md, "Layers"): a module uses its own
//! floor and the floors below, never one above.

/// Lowest first.
const FLOORS: &[&[&str]] = &[
    // Leaves: the file, the cursors, the claims of deduplicated retries.
    &["cancel", "credentials", "cursor", "dedupe", "metrics"],
    &["config"],
    // One upstream: its transport, lists and health.
    // (`health` probes it, `upstream` waits on it: one floor.)
    &["health", "upstream"],
    // The merged catalogue; the era bridge (calls held for their retries)
    // and the tasks it follows for clients without the Tasks extension.
    &["bridge", "catalogue", "tasked"],
    // What `subscriptions/listen` streams follow at the upstreams.
    &["access", "listen"],
    // The gateway: the relay a tern server serves.
    &["gateway"],
    // Fleet mode: the gateway's options with Redis.
    &["fleet"],
];

#[test]
fn no_import_runs_up_a_floor() {
    tern_test_support::layers::check(env!("CARGO_MANIFEST_DIR"), FLOORS, &[]);
}
