//! tern-protocol's floors (ARCHITECTURE.md, "Layers"): a module uses its
//! own floor and the floors below, never one above.

/// Lowest first.
const FLOORS: &[&[&str]] = &[
    // Primitives: JSON helpers, the resultType tags, levels, names.
    &["json", "tag", "level", "method", "version", "header"],
    // Shapes every message may hold: capabilities, annotations, the
    // descriptions of a tool and a resource, the questions' own payloads.
    &[
        "annotations",
        "capabilities",
        "elicitation",
        "roots",
        "format",
        "resource::def",
        "tool::def",
    ],
    // The envelope: errors, JSON-RPC, `_meta`.
    &["error", "jsonrpc", "meta"],
    // Payloads: content blocks, sampling, logging, progress, lists.
    &[
        "content",
        "sampling",
        "logging",
        "pagination",
        "progress",
        "completion",
        "discover",
        "subscription",
    ],
    // Multi round-trip requests: questions and answers of every kind.
    &["mrtr"],
    // The methods: tools, prompts, resources, tasks, the 2025 era.
    &["tool", "prompt", "resource", "skill", "task", "legacy"],
    // The unions decoded by method: requests, notifications, results.
    &["request", "notification", "result"],
];

#[test]
fn no_import_runs_up_a_floor() {
    tern_test_support::layers::check(env!("CARGO_MANIFEST_DIR"), FLOORS, &[]);
}
