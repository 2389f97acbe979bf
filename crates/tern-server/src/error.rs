//! Errors of handlers and of building a server.

use std::fmt;

use tern_protocol::ClientCapabilities;
use tern_protocol::error::{ErrorObject, code};

/// Why a question could not be asked: the request did not declare the client
/// capability it needs (rule `ask-declared-only`). Propagated out of a handler
/// with `?`, it ends the request with `-32021` and `data.requiredCapabilities`;
/// a handler that wants another path checks [`crate::Ctx::can_ask`] first or
/// matches on it.
#[derive(Debug, Clone, PartialEq)]
pub struct AskError {
    required: Box<ClientCapabilities>,
    what: &'static str,
}

impl AskError {
    pub(crate) fn missing(required: ClientCapabilities, what: &'static str) -> Self {
        Self {
            required: Box::new(required),
            what,
        }
    }

    /// The capabilities the question needs.
    pub fn required_capabilities(&self) -> &ClientCapabilities {
        &self.required
    }

    pub(crate) fn to_error_object(&self) -> ErrorObject {
        ErrorObject::missing_capability(
            format!("This request needs the client capability {}", self.what),
            (*self.required).clone(),
        )
    }
}

impl fmt::Display for AskError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the client did not declare {} for this request",
            self.what
        )
    }
}

impl std::error::Error for AskError {}

/// A handler's failure.
///
/// Built from a message it is a *tool error*: the call completes with
/// `isError: true` and the message as text, for the model to see (bad input, a
/// failing API, a business rule). Built with [`ToolError::protocol`] it is a
/// JSON-RPC error instead. An [`AskError`] becomes `-32021`. The two kinds are
/// never confused.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    kind: ToolErrorKind,
}

#[derive(Debug, Clone, PartialEq)]
enum ToolErrorKind {
    Tool(String),
    Protocol(Box<ErrorObject>),
    Ask(AskError),
    RetryLater,
}

impl ToolError {
    /// A tool error: the result is `isError: true` with `message`.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            kind: ToolErrorKind::Tool(message.into()),
        }
    }

    /// A JSON-RPC error.
    pub fn protocol(error: ErrorObject) -> Self {
        Self {
            kind: ToolErrorKind::Protocol(Box::new(error)),
        }
    }

    /// `-32603 Internal error` with a message for the log only: the client
    /// sees a generic message.
    pub fn internal(detail: impl fmt::Display) -> Self {
        tracing::error!(%detail, "handler failed");
        Self::protocol(ErrorObject::new(code::INTERNAL_ERROR, "Internal error"))
    }

    /// Not an error: the work is not done yet (an out-of-band step such as a
    /// URL-mode sign-in has not finished). The request is answered with a
    /// state-only `input_required`, and the client retries with that state
    /// (rule `input-required-not-empty`; the Schema Reference's "load
    /// shedding" example), running the handler again.
    pub fn retry_later() -> Self {
        Self {
            kind: ToolErrorKind::RetryLater,
        }
    }

    /// This asks the client to retry later (see [`ToolError::retry_later`]).
    pub fn is_retry_later(&self) -> bool {
        matches!(self.kind, ToolErrorKind::RetryLater)
    }

    /// The message of a tool error.
    pub fn message(&self) -> Option<&str> {
        match &self.kind {
            ToolErrorKind::Tool(m) => Some(m),
            _ => None,
        }
    }

    /// This ends the request with a JSON-RPC error rather than a result.
    pub fn is_protocol(&self) -> bool {
        !matches!(self.kind, ToolErrorKind::Tool(_))
    }

    /// The JSON-RPC error, for protocol errors.
    pub(crate) fn error_object(&self) -> Option<ErrorObject> {
        match &self.kind {
            ToolErrorKind::Tool(_) => None,
            ToolErrorKind::Protocol(e) => Some((**e).clone()),
            ToolErrorKind::Ask(a) => Some(a.to_error_object()),
            ToolErrorKind::RetryLater => Some(ErrorObject::new(
                code::INTERNAL_ERROR,
                "retry later outside an MRTR request",
            )),
        }
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ToolErrorKind::Tool(m) => f.write_str(m),
            ToolErrorKind::Protocol(e) => write!(f, "{e}"),
            ToolErrorKind::Ask(a) => write!(f, "{a}"),
            ToolErrorKind::RetryLater => f.write_str("not done yet: retry later"),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<AskError> for ToolError {
    fn from(e: AskError) -> Self {
        Self {
            kind: ToolErrorKind::Ask(e),
        }
    }
}

impl From<String> for ToolError {
    fn from(m: String) -> Self {
        Self::new(m)
    }
}

impl From<&str> for ToolError {
    fn from(m: &str) -> Self {
        Self::new(m)
    }
}

/// Why a server could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BuildError(pub(crate) String);

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BuildError {}

/// The JSON-RPC error codes tern itself defines, for outcomes the spec has no
/// code for. They sit outside the ranges the spec reserves (`-32020…-32099`)
/// and discourages (`-32000…-32019`, legacy and implementation-defined), in
/// the application-defined space JSON-RPC leaves free.
pub mod codes {
    /// `-31001`: a guarded leg with this `requestState` started and did not
    /// finish (its owner died, panicked or passed its deadline), or its
    /// outcome was too large to keep. It will not run again: check its effect
    /// before starting a new call.
    pub const OUTCOME_UNKNOWN: i64 = -31001;
    /// `-31002`: the replay store is full for this caller (or in total); try
    /// again later.
    pub const STORE_FULL: i64 = -31002;
    /// `-31003`: under the *await* strategy (a task, a 2025-11-25 session),
    /// nobody answered the server's question in time. `data.timeoutSeconds`
    /// says how long it waited.
    pub const QUESTION_TIMEOUT: i64 = -31003;
    /// `-31004`: the call needed more rounds of questions than the server
    /// allows (`data.maxRounds`).
    pub const CALL_LIMIT: i64 = -31004;
    /// `-31005`: on a 2025-11-25 session, a handler asked a question the
    /// session cannot receive (its `initialize` did not declare the
    /// capability; 2025 has no `-32021`). `data.requiredCapabilities` says
    /// what was missing. The call does not go on as if the user agreed.
    pub const QUESTION_UNDELIVERABLE: i64 = -31005;
    /// `-31006`: a durable task's runner stopped (died, was killed, lost its
    /// lease) more often than the server recovers a task
    /// ([`crate::task::TaskConfig::recoveries`], `data.recoveries`): a handler
    /// that kills its runner is not run for ever.
    pub const RECOVERY_LIMIT: i64 = -31006;
}

/// The prefix of every `_meta` key tern itself defines (keys outside the
/// `io.modelcontextprotocol/` ones the spec names): `dev.tern/`.
pub const META_PREFIX: &str = "dev.tern/";

/// Attacker text echoed in an error, cut to 64 characters: a 3 MiB method
/// name is not sent back whole.
pub(crate) fn short(text: &str) -> std::borrow::Cow<'_, str> {
    tern_protocol::error::cut(text, 64)
}
