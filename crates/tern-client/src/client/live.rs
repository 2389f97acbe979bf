//! The legacy leg's live questions (spec §8.3): a 2025-11-25 server asks
//! with requests of its own while a call runs; they are answered by the same
//! installed handlers as MRTR rounds ([`Client::answer_one`]), and a handler's
//! refusal goes back as a JSON-RPC error (2025 has a per-request error
//! channel).
//!
//! Presets ([`crate::Presets`]) are bound to MRTR question keys, which the
//! 2025 wire does not have: live questions always go to the handlers.

use std::sync::atomic::Ordering;

use tern_protocol::ClientRequest;
use tern_protocol::error::{ErrorObject, code};

use super::{CallOptions, Client};
use crate::handler::Question;
use crate::legacy::LiveRequest;

impl Client {
    /// Answers one live question of `request`'s call.
    pub(super) async fn answer_live(
        &self,
        request: &ClientRequest,
        live: Box<LiveRequest>,
        options: &CallOptions,
    ) {
        let n = self.inner.next_id.fetch_add(1, Ordering::Relaxed);
        let question = Question {
            key: format!("live-{n}"),
            server: self.server_info(),
            method: request.method().to_owned(),
            target: request.name().unwrap_or_default().to_owned(),
        };
        let asked = live.request().clone();
        let answer = self
            .answer_one(question, &asked, options)
            .await
            .map_err(|e| {
                let code = if e.is_unanswerable() {
                    code::METHOD_NOT_FOUND
                } else {
                    code::INTERNAL_ERROR
                };
                ErrorObject::new(code, format!("{e:#}"))
            });
        live.respond(answer);
    }
}
