//! Elicitation at the terminal: forms rendered from `requestedSchema`,
//! URL consent, and the preset answers (`--answer`) the handlers use first.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tern_client::transport::BoxFuture;
use tern_client::{Elicitation, HandlerError, Question};
use tern_protocol::elicitation::{
    ElicitAction, ElicitRequestFormParams, ElicitRequestParams, ElicitRequestUrlParams,
    ElicitResult,
};
use tern_protocol::{InputRequest, InputResponse};

use super::Session;
use super::url::url_consent;
use crate::form::{self, Console};

/// Answers elicitations on the terminal.
#[derive(Debug)]
pub(crate) struct TerminalElicitation {
    /// The shared session.
    pub(crate) session: Arc<Session>,
    /// Prompting is allowed (stdin is a terminal and `--no-input` is off).
    pub(crate) interactive: bool,
    /// Preset answers to a 2025 server's live questions.
    pub(crate) live: LivePresets,
}

/// The preset answers of a 2025 server's live questions. The 2025 wire has
/// no question keys: the client library keys them `live-1`, `live-2`, … in
/// the order one call asks them ([`tern_client::client::live_key`]), and
/// `--answer live-1=…` answers the first. MRTR keys are answered by the
/// command's own loop before any handler is asked, so only live keys are
/// looked up here.
#[derive(Debug, Clone, Default)]
pub(crate) struct LivePresets {
    spec: crate::answers::PresetSpec,
    used: Arc<Mutex<Vec<String>>>,
}

impl LivePresets {
    /// `spec`'s answers, recording the keys used in `used`.
    pub(crate) fn new(spec: crate::answers::PresetSpec, used: Arc<Mutex<Vec<String>>>) -> Self {
        Self { spec, used }
    }

    /// The preset answer to the live question `key`, checked against it.
    pub(super) fn answer(
        &self,
        key: &str,
        question: &InputRequest,
    ) -> Option<Result<InputResponse, HandlerError>> {
        if !key.starts_with("live-") {
            return None;
        }
        let answer = self.spec.answer(key, question)?;
        Some(match answer {
            Ok(answer) => {
                self.used
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(key.to_owned());
                Ok(answer)
            }
            Err(why) => Err(HandlerError(format!(
                "the preset answer for `{key}` does not fit the question; nothing was sent: {why}"
            ))),
        })
    }

    fn elicit(
        &self,
        key: &str,
        params: ElicitRequestParams,
    ) -> Option<Result<ElicitResult, HandlerError>> {
        self.answer(key, &InputRequest::elicit(params))
            .map(|a| match a? {
                InputResponse::Elicitation(result) => Ok(result),
                _ => Err(HandlerError(format!(
                    "the preset answer for `{key}` is not an elicitation answer"
                ))),
            })
    }
}

pub(super) fn not_here(key: &str) -> HandlerError {
    HandlerError(format!(
        "`{key}` needs an answer and tern will not prompt here (standard input is not a terminal, or --no-input); preset it with --answer {key}=VALUE, --answer {key}.FIELD=VALUE or --answers FILE (tern questions shows the fields)"
    ))
}

impl TerminalElicitation {
    /// Keeps a live question this run will refuse (no prompting), for
    /// `tern questions --run`.
    fn note_refused(&self, key: &str, params: ElicitRequestParams) {
        if !self.interactive && key.starts_with("live-") {
            self.session
                .refused_live
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push((key.to_owned(), InputRequest::elicit(params)));
        }
    }

    /// Asks on the terminal with `ask`, or refuses when prompting is not
    /// allowed; a decline or cancel stops further prompting this session.
    async fn prompt(
        &self,
        key: String,
        ask: impl FnOnce(&Session, &mut dyn Console) -> ElicitResult + Send + 'static,
    ) -> Result<ElicitResult, HandlerError> {
        if !self.interactive {
            return Err(not_here(&key));
        }
        let result = self.session.with_terminal(ask).await?;
        self.session.answered.store(true, Ordering::SeqCst);
        if result.action != ElicitAction::Accept {
            self.session.refuse();
        }
        Ok(result)
    }
}

impl Elicitation for TerminalElicitation {
    fn form(
        &self,
        question: Question,
        params: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        let key = question.key.clone();
        if let Some(preset) = self
            .live
            .elicit(&key, ElicitRequestParams::Form(params.clone()))
        {
            return Box::pin(std::future::ready(preset));
        }
        self.note_refused(&key, ElicitRequestParams::Form(params.clone()));
        Box::pin(self.prompt(key, move |s, console| {
            let result = form::fill(console, &s.asker(&question, "asks"), &params, s.hint_due());
            s.answered.store(true, Ordering::SeqCst);
            result
        }))
    }

    fn url(
        &self,
        question: Question,
        params: ElicitRequestUrlParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        let key = question.key.clone();
        if let Some(preset) = self
            .live
            .elicit(&key, ElicitRequestParams::Url(params.clone()))
        {
            return Box::pin(std::future::ready(preset));
        }
        self.note_refused(&key, ElicitRequestParams::Url(params.clone()));
        Box::pin(self.prompt(key, move |s, console| {
            url_consent(
                console,
                &s.asker(&question, "asks you to open a web page"),
                &params,
                s.local_server,
            )
        }))
    }

    fn supports_url(&self) -> bool {
        true
    }
}
