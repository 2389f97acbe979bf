//! The client's error.

use std::fmt;

use tern_protocol::error::ErrorObject;

/// Why a client call failed. Ask it what happened with the `is_*` methods;
/// a JSON-RPC error from the server is available as-is.
#[derive(Debug)]
pub struct ClientError {
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    /// The server answered with a JSON-RPC error.
    Rpc(ErrorObject),
    /// The connection failed or the server's reply was not MCP.
    Transport(String),
    /// The server asked a question no installed handler can answer.
    Unanswerable(String),
    /// A handler failed or refused to answer.
    Handler(String),
    /// The MRTR driver's bounds (rounds or time) were reached.
    Bounds(String),
    /// The server sent something tern could not decode.
    Protocol(String),
}

impl ClientError {
    pub(crate) fn rpc(e: ErrorObject) -> Self {
        Self { kind: Kind::Rpc(e) }
    }

    pub(crate) fn transport(m: impl fmt::Display) -> Self {
        Self {
            kind: Kind::Transport(m.to_string()),
        }
    }

    pub(crate) fn unanswerable(m: impl fmt::Display) -> Self {
        Self {
            kind: Kind::Unanswerable(m.to_string()),
        }
    }

    pub(crate) fn handler(m: impl fmt::Display) -> Self {
        Self {
            kind: Kind::Handler(m.to_string()),
        }
    }

    pub(crate) fn bounds(m: impl fmt::Display) -> Self {
        Self {
            kind: Kind::Bounds(m.to_string()),
        }
    }

    pub(crate) fn protocol(m: impl fmt::Display) -> Self {
        Self {
            kind: Kind::Protocol(m.to_string()),
        }
    }

    /// The server's JSON-RPC error, when that is what this is.
    pub fn rpc_error(&self) -> Option<&ErrorObject> {
        match &self.kind {
            Kind::Rpc(e) => Some(e),
            _ => None,
        }
    }

    /// The connection failed, or the reply was not an MCP message.
    pub fn is_transport(&self) -> bool {
        matches!(self.kind, Kind::Transport(_))
    }

    /// The server asked a question of a kind this client has no handler for.
    pub fn is_unanswerable(&self) -> bool {
        matches!(self.kind, Kind::Unanswerable(_))
    }

    /// A handler failed to answer a question.
    pub fn is_handler(&self) -> bool {
        matches!(self.kind, Kind::Handler(_))
    }

    /// The driver stopped at its round or time bound.
    pub fn is_bounds(&self) -> bool {
        matches!(self.kind, Kind::Bounds(_))
    }

    /// The server's reply could not be decoded.
    pub fn is_protocol(&self) -> bool {
        matches!(self.kind, Kind::Protocol(_))
    }
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            Kind::Rpc(e) => write!(f, "the server answered with an error: {e}"),
            Kind::Transport(m) => write!(f, "transport: {m}"),
            Kind::Unanswerable(m) => write!(f, "cannot answer the server's question: {m}"),
            Kind::Handler(m) => write!(f, "a question was not answered: {m}"),
            Kind::Bounds(m) => write!(f, "stopped: {m}"),
            Kind::Protocol(m) => write!(f, "unexpected reply: {m}"),
        }
    }
}

impl std::error::Error for ClientError {}
