//! Integration tests of `tern-protocol` against the official schema and
//! examples (the copy vendored in the repository's `spec/`, or
//! `TERN_SPEC_DIR`).

#![allow(unreachable_pub, reason = "items of the test crate's modules")]
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]

#[path = "../../examples/decode/registry.rs"]
mod registry;

mod built;
mod decoder;
mod examples;
mod fixtures;
mod frontmatter;
mod fuzz;
mod house;
mod layers;
mod negative;
mod properties;
mod rules_page;
mod schema;
