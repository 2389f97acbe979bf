//! Cancellation through the gateway (spec: Cancellation).
//!
//! - **Client to upstream**: a client's `notifications/cancelled` (or, over
//!   Streamable HTTP, its closed stream) cancels the leg's context; the
//!   relayed request is then dropped, and dropping it cancels it upstream —
//!   `notifications/cancelled` on a stdio or 2025-11-25 link, the request's
//!   stream closed over 2026-07-28 HTTP (spec: Cancellation › Transport-Specific
//!   Cancellation). The upstream's late answer, if any, is discarded.
//! - A leg of a `dedupe` upstream that retries a round is *guarded*, as a
//!   tern tool marked `single_use` is: it keeps running to its end so that
//!   its outcome is stored for the client's next retry (a cancelled guarded
//!   leg that was cut short would leave "outcome unknown" instead).
//! - **Upstream to client**: an upstream that ends a relayed request — it
//!   exits, closes the stream, or answers an error — ends the client's
//!   request with that error, or with "outcome unknown" (`-31001`) when
//!   it was lost after the request went out.

use std::future::Future;

use tern_protocol::error::{ErrorObject, code};
use tern_server::Ctx;

/// Runs `leg` until it ends or `ctx` is cancelled; on cancellation `leg` is
/// dropped (which cancels it upstream) and the answer is an error no one
/// reads (a cancelled request gets no response).
pub(crate) async fn or_cancelled<T>(
    ctx: &Ctx,
    leg: impl Future<Output = Result<T, ErrorObject>>,
) -> Result<T, ErrorObject> {
    tokio::select! {
        biased;
        () = ctx.cancelled() => {
            tracing::debug!("a relayed request cancelled by its client");
            Err(ErrorObject::new(code::INTERNAL_ERROR, "The request was cancelled"))
        }
        done = leg => done,
    }
}
