//! What a transport hands the server with each request ([`CallContext`]) and
//! what it gets back ([`Reply`]).

use std::sync::Arc;

use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use tern_protocol::error::ErrorObject;
use tern_protocol::jsonrpc::{self, RequestId};
use tokio_util::sync::CancellationToken;

use crate::ctx::Notifier;
use crate::principal::Principal;

/// What a transport knows about one request besides its body.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct CallContext {
    /// The authenticated caller.
    pub principal: Principal,
    /// Where this request's notifications go; `None` when the transport
    /// cannot deliver any (a plain JSON HTTP response).
    pub notifier: Option<Notifier>,
    /// Cancelled when the client cancels the request or goes away.
    pub cancel: CancellationToken,
    /// Who the peer is when nobody authenticated it (an HTTP client's
    /// address, say): anonymous callers' replay records are bounded per
    /// peer. `None` counts all such callers as one.
    pub peer: Option<Arc<str>>,
    /// The request's verified access token, when the resource server shows
    /// it to handlers ([`crate::auth::ResourceServer::token_in_context`]):
    /// read with [`crate::Ctx::access_token`].
    pub access_token: Option<Arc<crate::auth::AccessToken>>,
    /// What an overload refusal from the server (a listen over its cap)
    /// says in `data.retryAfterMs`: the transport's configured value
    /// ([`crate::transport::http::Http::retry_after`],
    /// [`crate::transport::stdio::StdioOptions::retry_after`]); `None`: 1 s.
    pub retry_after: Option<std::time::Duration>,
}

impl CallContext {
    /// The context of a request from `principal`, with no notifications and
    /// a fresh cancellation token.
    pub fn new(principal: Principal) -> Self {
        Self::cancelled_by(principal, CancellationToken::new())
    }

    /// The context of a request from `principal` that is cancelled with
    /// `cancel`, with no notifications: [`Self::new`] then
    /// [`Self::with_cancel`] without making the token that is replaced.
    pub fn cancelled_by(principal: Principal, cancel: CancellationToken) -> Self {
        Self {
            principal,
            notifier: None,
            cancel,
            peer: None,
            access_token: None,
            retry_after: None,
        }
    }

    /// Notifications of the request go to `notifier`.
    #[must_use]
    pub fn with_notifier(mut self, notifier: Notifier) -> Self {
        self.notifier = Some(notifier);
        self
    }

    /// The request is cancelled with `cancel`.
    #[must_use]
    pub fn with_cancel(mut self, cancel: CancellationToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Overload refusals say `retry_after` (see [`Self::retry_after`]).
    #[must_use]
    pub fn with_retry_after(mut self, retry_after: std::time::Duration) -> Self {
        self.retry_after = Some(retry_after);
        self
    }

    /// The anonymous peer is `peer` (see [`Self::peer`]).
    #[must_use]
    pub fn with_peer(mut self, peer: impl Into<Arc<str>>) -> Self {
        self.peer = Some(peer.into());
        self
    }
}

/// The answer to one request.
#[derive(Debug)]
#[non_exhaustive]
pub struct Reply {
    /// The request's id.
    pub id: RequestId,
    /// The result, serialised, or the error.
    pub outcome: Result<Box<RawValue>, ErrorObject>,
    /// The request itself was malformed (missing `_meta`, params of the wrong
    /// shape): HTTP answers it with 400.
    pub malformed: bool,
}

impl Reply {
    /// The JSON-RPC error code, when this is an error.
    pub fn error_code(&self) -> Option<i64> {
        self.outcome.as_ref().err().map(|e| e.code)
    }
}

impl Serialize for Reply {
    /// The whole JSON-RPC response.
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.outcome {
            Ok(result) => jsonrpc::serialize_response(&self.id, &**result, s),
            Err(error) => {
                jsonrpc::ErrorResponse::new(Some(self.id.clone()), error.clone()).serialize(s)
            }
        }
    }
}
