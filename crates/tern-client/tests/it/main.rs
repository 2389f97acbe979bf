//! Integration tests of `tern-client`: the MRTR driver against tern's own
//! server — in process, as a child process over stdio, and over HTTP — rule by
//! rule (the client rules of docs/rules.md), plus load shedding, capabilities,
//! manual rounds resumed elsewhere, cancellation, progress and subscriptions,
//! and the findings of issue 10 (`hardening`: bounded reads, a real nginx in
//! front).

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

/// Runs one async test body three times, as the tests `in_process`,
/// `stdio` and `http` of a module named after the test.
macro_rules! each_way {
    ($(#[doc = $doc:literal])* async fn $name:ident($way:ident) $body:block) => {
        $(#[doc = $doc])*
        mod $name {
            #[allow(unused_imports, reason = "the test's module imports")]
            use super::*;

            async fn run($way: crate::harness::Way) $body

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn in_process() {
                run(crate::harness::Way::InProcess).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn stdio() {
                run(crate::harness::Way::Stdio).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn http() {
                run(crate::harness::Way::Http).await;
            }
        }
    };
}

mod burst;
mod child;
mod death;
mod driver;
mod examples;
mod features;
mod handlers;
mod hardening;
mod harness;
mod layers;
mod legacy;
mod oauth;
mod peers2025;
mod rules;
mod server;
mod skills;
mod stub;
mod tasks;
mod tls;
