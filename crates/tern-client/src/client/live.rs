//! The legacy leg's live questions (docs/design.md, "Two eras, one handler"): a
//! 2025-11-25 server asks with requests of its own while a call runs; they are
//! answered by the same installed handlers as MRTR rounds
//! ([`Client::answer_one`]), and a handler's refusal goes back as a JSON-RPC
//! error (2025 has a per-request error channel).
//!
//! The 2025 wire has no question keys: the live questions of one request
//! are keyed `live-1`, `live-2`, … in the order the server asks them
//! ([`live_key`]). Presets ([`crate::Presets`], `CallOptions::answers`)
//! under those keys answer them first, checked against the question as an
//! MRTR preset is; the others go to the handlers.

use tern_protocol::ClientRequest;
use tern_protocol::error::{ErrorObject, code};

use super::{CallOptions, Client};
use crate::handler::Question;
use crate::transport::LiveRequest;

/// The key of the `n`-th live question (from 1) a 2025 server asks during
/// one request.
#[must_use]
pub fn live_key(n: u32) -> String {
    format!("live-{n}")
}

impl Client {
    /// Answers the `n`-th live question of `request`'s call.
    pub(super) async fn answer_live(
        &self,
        request: &ClientRequest,
        live: Box<LiveRequest>,
        n: u32,
        options: &CallOptions,
    ) {
        let key = live_key(n);
        let asked = live.request().clone();
        match options.answers.answer(&key, &asked) {
            Some(Ok(preset)) => return live.respond(Ok(preset)),
            Some(Err(e)) => {
                // Refused here rather than sent: the server's handler gets
                // an error, never a made-up answer.
                return live.respond(Err(ErrorObject::new(
                    code::INVALID_PARAMS,
                    format!("the answer preset for `{key}` does not fit the question: {e}"),
                )));
            }
            None => {}
        }
        let question = Question {
            key,
            server: self.server_info(),
            method: request.method().to_owned(),
            target: request.name().unwrap_or_default().to_owned(),
        };
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
