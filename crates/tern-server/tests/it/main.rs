//! Integration tests of `tern-server`: the server rules of docs/rules.md that
//! apply, named after their rule; adversarial `requestState`; and the stdio
//! transport.

#![allow(unreachable_pub, reason = "items of the test crate's modules")]
#![allow(
    clippy::unwrap_used,
    reason = "test helpers: a failed unwrap is a failed test"
)]
#![allow(
    clippy::needless_pass_by_value,
    clippy::items_after_statements,
    reason = "test code reads best with values passed and helpers declared where used"
)]

mod accept;
mod adversarial;
mod await_strategy;
mod call;
mod durable;
mod exactly_once;
mod examples;
mod features;
mod fixture;
mod fuzz;
mod http;
mod layers;
mod legacy;
mod limits;
mod protocol;
mod readme;
mod relay;
mod rules;
mod schema;
mod skills;
mod stdio;
mod tasks;
