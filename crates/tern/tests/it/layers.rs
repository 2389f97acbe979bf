//! The `tern` crate's floors (ARCHITECTURE.md, "Layers"): the library
//! (`safe`, `telemetry`, `login`, the demo) and the command share one
//! `src/`; neither reaches into the other with `crate::`, and within each a
//! module uses its own floor and the floors below.

/// Lowest first.
const FLOORS: &[&[&str]] = &[
    // Leaves: exit codes, "did you mean", config files, the era cache,
    // results as text, argument schemas; the library's sanitiser, logs,
    // token store, the fleet's ledger, the demo's imports, the features
    // built in, the key file and stop signals of a served process.
    &[
        "exit",
        "suggest",
        "config",
        "era_cache",
        "output",
        "schema",
        "safe",
        "telemetry",
        "login",
        "ledger",
        "imports",
        "built",
        "serving",
    ],
    // Forms and preset answers; the demo's tools.
    &["form", "answers", "demo"],
    // The consoles and the terminal as the client's handlers; the demo as
    // a fleet replica.
    &["prompt", "terminal", "demo_fleet"],
    // A client error as an exit code and advice.
    &["advice"],
    // The round driver.
    &["rounds"],
    // One module per command.
    &["cmd"],
    // The command line, made of the commands' own arguments.
    &["cli"],
];

#[test]
fn no_import_runs_up_a_floor() {
    tern_test_support::layers::check(env!("CARGO_MANIFEST_DIR"), FLOORS, &[]);
}
