//! Answers given in advance ([`Presets`]), each bound to the question it
//! answers: its key *and* the question itself.
//!
//! A preset answers a question asked under its key only if
//!
//! - it fits the question: it decodes as the answer to that kind of question
//!   (an `ElicitResult` for an elicitation, …), and a form's accepted content
//!   satisfies the form's `requestedSchema` (required fields, types, bounds,
//!   formats, options); one that does not fit is an error, never sent;
//! - it is the question the preset is for: one pinned in advance
//!   ([`Presets::insert_for`]), or else the first question it answered. When
//!   a server asks the same key again with a *different* question, the old
//!   answer is not reused: the question goes to the handlers, as one without
//!   a preset would.
//!
//! A caller can check a preset against a question before anything is sent
//! ([`Presets::check`]), and learn afterwards which presets were never used
//! ([`Presets::unused`]).

use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use serde_json::Value;
use tern_protocol::elicitation::{ElicitAction, ElicitRequestParams};
use tern_protocol::{DecodeError, InputKind, InputRequest, InputResponse, InputResponses};

/// Why a preset does not answer a question.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PresetError {
    /// There is no preset for the key.
    Missing {
        /// The key asked.
        key: String,
    },
    /// The preset is not an answer to this kind of question.
    WrongKind {
        /// The key asked.
        key: String,
        /// The kind of question asked.
        asked: InputKind,
        /// Why it does not decode as that kind's answer.
        source: DecodeError,
    },
    /// The preset accepts a form with content its schema refuses.
    Schema {
        /// The key asked.
        key: String,
        /// What the schema refuses, naming the field.
        reason: String,
    },
    /// The preset is bound to another question asked under the same key.
    OtherQuestion {
        /// The key asked.
        key: String,
    },
}

impl std::fmt::Display for PresetError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Missing { key } => write!(f, "no answer is preset for `{key}`"),
            Self::WrongKind { key, asked, .. } => write!(
                f,
                "the answer preset for `{key}` is not an answer to {}",
                asked.method()
            ),
            Self::Schema { key, reason } => write!(
                f,
                "the answer preset for `{key}` does not satisfy its form: {reason}"
            ),
            Self::OtherQuestion { key } => write!(
                f,
                "the answer preset for `{key}` was given for another question under that key"
            ),
        }
    }
}

impl std::error::Error for PresetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::WrongKind { source, .. } => Some(source),
            _ => None,
        }
    }
}

impl PresetError {
    /// The key the error is about.
    pub fn key(&self) -> &str {
        match self {
            Self::Missing { key }
            | Self::WrongKind { key, .. }
            | Self::Schema { key, .. }
            | Self::OtherQuestion { key } => key,
        }
    }
}

#[derive(Debug)]
struct Preset {
    answer: Value,
    /// The question it answers: pinned in advance, or the first one it
    /// answered.
    question: Option<InputRequest>,
    used: bool,
}

/// Answers given in advance, by key (see the [module docs](self)). Clones
/// share their state: which presets were used, and the questions they are
/// bound to.
///
/// ```no_run
/// # async fn run(client: tern_client::Client) -> Result<(), tern_client::ClientError> {
/// use tern_client::{CallOptions, Presets};
///
/// // A script knows the answer before the question: `region` is answered
/// // without asking anyone, and checked against the question when it comes.
/// let mut presets = Presets::new();
/// presets.insert("region", serde_json::json!("eu-west-1"));
/// let options = CallOptions::default().with_answers(presets);
/// let result = client
///     .call_tool_with("provision_database", Some(serde_json::json!({"name": "orders"})), &options)
///     .await?;
/// # drop(result); Ok(()) }
/// ```
#[derive(Debug, Clone, Default)]
pub struct Presets {
    entries: Arc<Mutex<IndexMap<String, Preset>>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Whether `answer` fits `request`, decoded.
fn fit(key: &str, answer: &Value, request: &InputRequest) -> Result<InputResponse, PresetError> {
    let decoded = InputResponse::decode_as(request.kind(), answer).map_err(|source| {
        PresetError::WrongKind {
            key: key.to_owned(),
            asked: request.kind(),
            source,
        }
    })?;
    if let (InputResponse::Elicitation(result), InputRequest::Elicitation(question)) =
        (&decoded, request)
        && result.action == ElicitAction::Accept
    {
        let schema_refuses = |reason: String| PresetError::Schema {
            key: key.to_owned(),
            reason,
        };
        match &question.params {
            ElicitRequestParams::Form(form) => {
                let content = result.content.clone().unwrap_or_default();
                form.requested_schema
                    .check(&content)
                    .map_err(schema_refuses)?;
            }
            // Rule `url-elicitation-consent`: a URL-mode accept is consent
            // only; it carries no content.
            ElicitRequestParams::Url(_) if result.content.is_some() => {
                return Err(schema_refuses(
                    "a URL-mode accept carries no content (rule url-elicitation-consent)".into(),
                ));
            }
            ElicitRequestParams::Url(_) => {}
        }
    }
    Ok(decoded)
}

impl Presets {
    /// No presets.
    pub fn new() -> Self {
        Self::default()
    }

    /// Presets `answer` (raw JSON, checked when asked) for the question asked
    /// under `key`; it binds to the first question it answers.
    pub fn insert(&mut self, key: impl Into<String>, answer: Value) {
        lock(&self.entries).insert(
            key.into(),
            Preset {
                answer,
                question: None,
                used: false,
            },
        );
    }

    /// Presets `answer` for `question` only, asked under `key`.
    pub fn insert_for(&mut self, key: impl Into<String>, answer: Value, question: InputRequest) {
        lock(&self.entries).insert(
            key.into(),
            Preset {
                answer,
                question: Some(question),
                used: false,
            },
        );
    }

    /// How many presets there are.
    pub fn len(&self) -> usize {
        lock(&self.entries).len()
    }

    /// There are none.
    pub fn is_empty(&self) -> bool {
        lock(&self.entries).is_empty()
    }

    /// The keys preset, in order.
    pub fn keys(&self) -> Vec<String> {
        lock(&self.entries).keys().cloned().collect()
    }

    /// The raw answer preset for `key`.
    pub fn raw(&self, key: &str) -> Option<Value> {
        lock(&self.entries).get(key).map(|p| p.answer.clone())
    }

    /// Whether the preset for `key` would answer `question`, without using
    /// it: the decoded answer, or why not.
    pub fn check(&self, key: &str, question: &InputRequest) -> Result<InputResponse, PresetError> {
        let entries = lock(&self.entries);
        let preset = entries.get(key).ok_or_else(|| PresetError::Missing {
            key: key.to_owned(),
        })?;
        if preset.question.as_ref().is_some_and(|q| q != question) {
            return Err(PresetError::OtherQuestion {
                key: key.to_owned(),
            });
        }
        fit(key, &preset.answer, question)
    }

    /// The keys whose presets never answered a question, in order.
    pub fn unused(&self) -> Vec<String> {
        lock(&self.entries)
            .iter()
            .filter(|(_, p)| !p.used)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// The preset answer to `question` asked under `key`: `None` when there
    /// is none for it (no preset for the key, or one bound to another
    /// question), an error when it does not fit. A fitting preset is marked
    /// used and bound to `question`.
    pub(crate) fn answer(
        &self,
        key: &str,
        question: &InputRequest,
    ) -> Option<Result<InputResponse, PresetError>> {
        let mut entries = lock(&self.entries);
        let preset = entries.get_mut(key)?;
        if preset.question.as_ref().is_some_and(|q| q != question) {
            tracing::debug!(%key, "a preset answer is bound to another question; not reused");
            return None;
        }
        Some(fit(key, &preset.answer, question).inspect(|_| {
            preset.used = true;
            preset.question.get_or_insert_with(|| question.clone());
        }))
    }
}

impl From<InputResponses> for Presets {
    fn from(responses: InputResponses) -> Self {
        let mut presets = Self::new();
        for key in responses.keys() {
            if let Some(answer) = responses.raw(key) {
                presets.insert(key, answer.clone());
            }
        }
        presets
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn form(message: &str) -> InputRequest {
        serde_json::from_value(json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": message,
            "requestedSchema": {"type": "object", "properties": {
                "region": {"type": "string", "enum": ["eu", "us"]},
                "size": {"type": "integer", "minimum": 1}
            }, "required": ["region"]}
        }}))
        .unwrap()
    }

    fn accept(content: Value) -> Value {
        let mut answer = json!({"action": "accept"});
        answer["content"] = content;
        answer
    }

    #[test]
    fn a_preset_is_checked_against_the_questions_schema() {
        let mut presets = Presets::new();
        presets.insert("ok", accept(json!({"region": "eu", "size": 2})));
        presets.insert("not_an_option", accept(json!({"region": "mars"})));
        presets.insert("missing", accept(json!({"size": 2})));
        presets.insert("too_small", accept(json!({"region": "eu", "size": 0})));
        presets.insert("roots", json!({"roots": []}));
        presets.insert("declined", json!({"action": "decline"}));
        let q = form("Where?");
        assert!(presets.check("ok", &q).is_ok());
        assert!(
            presets.check("declined", &q).is_ok(),
            "a refusal fits any form"
        );
        for (key, says) in [
            ("not_an_option", "`mars` is not an option"),
            ("missing", "required field `region` is missing"),
            ("too_small", "field `size`: out of range"),
        ] {
            let err = presets.check(key, &q).unwrap_err();
            assert!(matches!(err, PresetError::Schema { .. }), "{key}: {err}");
            assert!(err.to_string().contains(says), "{key}: {err}");
            assert_eq!(err.key(), key);
        }
        let err = presets.check("roots", &q).unwrap_err();
        assert!(matches!(
            err,
            PresetError::WrongKind {
                asked: InputKind::Elicitation,
                ..
            }
        ));
        assert!(std::error::Error::source(&err).is_some());
        assert!(matches!(
            presets.check("absent", &q),
            Err(PresetError::Missing { .. })
        ));
        assert_eq!(presets.unused().len(), 6, "check uses nothing");
    }

    #[test]
    fn a_preset_binds_to_the_first_question_it_answers() {
        let mut presets = Presets::new();
        presets.insert("region", accept(json!({"region": "eu"})));
        presets.insert("never", json!({"action": "decline"}));
        let first = form("Region for orders?");
        let again = form("Region for orders?");
        let other = form("Region for the backups?");
        assert!(presets.answer("region", &first).unwrap().is_ok());
        assert!(
            presets.answer("region", &again).unwrap().is_ok(),
            "the same question"
        );
        assert!(
            presets.answer("region", &other).is_none(),
            "another question"
        );
        assert!(matches!(
            presets.check("region", &other),
            Err(PresetError::OtherQuestion { .. })
        ));
        assert_eq!(presets.unused(), ["never"]);
        // Clones share the binding.
        assert!(presets.clone().answer("region", &other).is_none());
    }

    #[test]
    fn a_pinned_preset_answers_only_its_question() {
        let mut presets = Presets::new();
        let pinned = form("Region for the backups?");
        presets.insert_for("region", accept(json!({"region": "us"})), pinned.clone());
        assert!(
            presets
                .answer("region", &form("Region for orders?"))
                .is_none()
        );
        assert_eq!(presets.unused(), ["region"]);
        assert!(presets.answer("region", &pinned).unwrap().is_ok());
        assert!(presets.unused().is_empty());
    }

    #[test]
    fn a_preset_that_does_not_fit_is_an_error_and_stays_unused() {
        let mut presets = Presets::new();
        presets.insert("region", accept(json!({"region": 7})));
        let err = presets
            .answer("region", &form("Where?"))
            .unwrap()
            .unwrap_err();
        assert!(
            err.to_string().contains("field `region`: wrong type"),
            "{err}"
        );
        assert_eq!(presets.unused(), ["region"]);
        let url: InputRequest = serde_json::from_value(json!({"method": "elicitation/create",
            "params": {"mode": "url", "message": "Log in", "url": "https://example.com/x",
                       "elicitationId": "e1"}}))
        .unwrap();
        presets.insert("login", accept(json!({"region": "eu"})));
        assert!(matches!(
            presets.check("login", &url),
            Err(PresetError::Schema { .. })
        ));
        presets.insert("login", json!({"action": "accept"}));
        assert!(presets.check("login", &url).is_ok());
    }
}
