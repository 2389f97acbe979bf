//! The client's error: one opaque type, asked what happened with
//! [`ClientError::kind`] or the `is_*` questions.
//!
//! `Display` says what failed in tern's words and never repeats the source's
//! message; [`std::error::Error::source`] carries the cause (an I/O or HTTP
//! error, a decode error, a handler's refusal). The alternate form `{:#}`
//! prints the whole chain, `message: cause: cause's cause`.

use std::error::Error as StdError;
use std::fmt;

use tern_protocol::error::ErrorObject;

use crate::limits::Limit;

type Source = Box<dyn StdError + Send + Sync + 'static>;

/// Why a client call failed.
#[derive(Debug)]
pub struct ClientError(Box<Repr>);

/// Boxed, so a `Result<_, ClientError>` stays one pointer wide on its error
/// side.
#[derive(Debug)]
struct Repr {
    kind: ErrorKind,
    message: String,
    rpc: Option<ErrorObject>,
    source: Option<Source>,
}

/// What kind of failure a [`ClientError`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The server answered with a JSON-RPC error ([`ClientError::rpc_error`]).
    Rpc,
    /// The connection failed, or the server's reply was not an MCP message.
    Transport,
    /// The server sent something tern could not decode, or that breaks a
    /// rule of the spec (an unknown `resultType`, rule `result-type-unknown`).
    Protocol,
    /// The server asked a question no installed handler can answer.
    Unanswerable,
    /// A handler failed or refused to answer (rule `no-per-answer-error`: the
    /// call stops).
    Handler,
    /// An answer given in advance, or to a manual round, does not fit the
    /// question it was given for.
    Answer,
    /// A bound of [`crate::Limits`] was reached.
    Limit(Limit),
    /// The caller asked for a request that cannot be made (tool arguments
    /// that are not an object, a parked round resumed as another method).
    Request,
    /// The call's task ended `failed` (Tasks extension); its JSON-RPC error
    /// is [`ClientError::rpc_error`].
    TaskFailed,
    /// The call's task ended `cancelled`.
    TaskCancelled,
    /// The server no longer knows the task (`-32602` while polling: expired,
    /// never known to this server, or another principal's).
    TaskLost,
    /// Authorization failed: the server refused the request (HTTP 401 or
    /// 403) and OAuth could not get a token it accepts, or the OAuth flow
    /// met a server that breaks its rules ([`crate::auth`]).
    Unauthorized,
    /// The server does not offer what was asked: it does not declare the
    /// extension or setting the request needs (the Skills extension,
    /// `directoryRead`), so nothing was sent.
    NotOffered,
    /// A skill file failed verification against the skill's entry (not
    /// listed, wrong size or digest, a `SKILL.md` whose frontmatter is not
    /// the entry's): it must not be used, nor the skill for a `SKILL.md`.
    /// [`ClientError::verify_error`] says which check.
    Verification,
}

impl ClientError {
    fn new(kind: ErrorKind, message: impl fmt::Display) -> Self {
        Self(Box::new(Repr {
            kind,
            message: message.to_string(),
            rpc: None,
            source: None,
        }))
    }

    /// `self`, caused by `source`.
    pub(crate) fn because(mut self, source: impl Into<Source>) -> Self {
        self.0.source = Some(source.into());
        self
    }

    pub(crate) fn rpc(e: ErrorObject) -> Self {
        Self(Box::new(Repr {
            kind: ErrorKind::Rpc,
            message: format!("the server answered with an error: {e}"),
            rpc: Some(e),
            source: None,
        }))
    }

    pub(crate) fn transport(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Transport, m)
    }

    pub(crate) fn protocol(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Protocol, m)
    }

    pub(crate) fn unanswerable(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Unanswerable, m)
    }

    pub(crate) fn handler(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Handler, m)
    }

    pub(crate) fn answer(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Answer, m)
    }

    pub(crate) fn unauthorized(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Unauthorized, m)
    }

    /// An [`ErrorKind::Unauthorized`] error, for [`crate::auth::Browser`]s
    /// and [`crate::auth::TokenStore`]s written outside this crate.
    pub fn authorization(m: impl fmt::Display) -> Self {
        Self::unauthorized(m)
    }

    pub(crate) fn not_offered(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::NotOffered, m)
    }

    pub(crate) fn verification(e: tern_protocol::skill::VerifyError) -> Self {
        Self::new(
            ErrorKind::Verification,
            "a skill file failed verification against its entry",
        )
        .because(e)
    }

    pub(crate) fn request(m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Request, m)
    }

    pub(crate) fn task_failed(task_id: &str, e: ErrorObject) -> Self {
        Self(Box::new(Repr {
            kind: ErrorKind::TaskFailed,
            message: format!("task {task_id} failed: {e}"),
            rpc: Some(e),
            source: None,
        }))
    }

    pub(crate) fn task_cancelled(task_id: &str) -> Self {
        Self::new(
            ErrorKind::TaskCancelled,
            format!("task {task_id} was cancelled"),
        )
    }

    pub(crate) fn task_lost(task_id: &str, e: ErrorObject) -> Self {
        Self(Box::new(Repr {
            kind: ErrorKind::TaskLost,
            message: format!("the server no longer knows task {task_id}: {e}"),
            rpc: Some(e),
            source: None,
        }))
    }

    pub(crate) fn limit(limit: Limit, m: impl fmt::Display) -> Self {
        Self::new(ErrorKind::Limit(limit), m)
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.0.kind
    }

    /// The server's JSON-RPC error, when that is what this is.
    pub fn rpc_error(&self) -> Option<&ErrorObject> {
        self.0.rpc.as_ref()
    }

    /// The connection failed, or the reply was not an MCP message.
    pub fn is_transport(&self) -> bool {
        self.0.kind == ErrorKind::Transport
    }

    /// The server asked a question of a kind this client has no handler for.
    pub fn is_unanswerable(&self) -> bool {
        self.0.kind == ErrorKind::Unanswerable
    }

    /// A handler failed to answer a question.
    pub fn is_handler(&self) -> bool {
        self.0.kind == ErrorKind::Handler
    }

    /// An answer given in advance or to a manual round does not fit its
    /// question.
    pub fn is_answer(&self) -> bool {
        self.0.kind == ErrorKind::Answer
    }

    /// The driver stopped at its round or time bound (rule `bounded-rounds`).
    pub fn is_bounds(&self) -> bool {
        matches!(
            self.0.kind,
            ErrorKind::Limit(Limit::Rounds | Limit::Deadline)
        )
    }

    /// The limit that was reached, if one was.
    pub fn limit_reached(&self) -> Option<Limit> {
        match self.0.kind {
            ErrorKind::Limit(limit) => Some(limit),
            _ => None,
        }
    }

    /// The server's reply could not be decoded, or broke a rule of the spec.
    pub fn is_protocol(&self) -> bool {
        self.0.kind == ErrorKind::Protocol
    }

    /// The server does not declare what the request needs; nothing was sent.
    pub fn is_not_offered(&self) -> bool {
        self.0.kind == ErrorKind::NotOffered
    }

    /// Which check a skill file failed, when that is what this is.
    pub fn verify_error(&self) -> Option<&tern_protocol::skill::VerifyError> {
        self.0.source.as_deref()?.downcast_ref()
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0.message)?;
        if f.alternate() {
            let mut source = self.source();
            while let Some(cause) = source {
                write!(f, ": {cause}")?;
                source = cause.source();
            }
        }
        Ok(())
    }
}

impl StdError for ClientError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        self.0
            .source
            .as_deref()
            .map(|s| s as &(dyn StdError + 'static))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_the_message_and_the_alternate_form_the_chain() {
        let io = std::io::Error::other("connection reset");
        let e = ClientError::transport("the request could not be sent").because(io);
        assert_eq!(e.to_string(), "the request could not be sent");
        assert_eq!(
            format!("{e:#}"),
            "the request could not be sent: connection reset"
        );
        assert_eq!(
            e.source().map(ToString::to_string).as_deref(),
            Some("connection reset")
        );
        assert!(e.is_transport() && e.kind() == ErrorKind::Transport);
    }

    #[test]
    fn limits_are_kinds_and_rounds_and_time_are_the_bounds() {
        let rounds = ClientError::limit(Limit::Rounds, "too many rounds");
        assert!(rounds.is_bounds());
        assert_eq!(rounds.limit_reached(), Some(Limit::Rounds));
        let body = ClientError::limit(Limit::ResponseBytes, "too big");
        assert!(!body.is_bounds());
        assert_eq!(body.kind(), ErrorKind::Limit(Limit::ResponseBytes));
        assert_eq!(ClientError::handler("x").limit_reached(), None);
    }
}
