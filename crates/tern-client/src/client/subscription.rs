//! `subscriptions/listen` (spec: Subscriptions): one stream of notifications
//! per subscription, ended by the server (a result, a
//! `notifications/cancelled`, or a closed stream) or by dropping it.

use tern_protocol::subscription::{SubscriptionFilter, SubscriptionsListenRequestParams};
use tern_protocol::{ClientRequest, ServerNotification};

use super::{CallOptions, Client};
use crate::error::ClientError;
use crate::transport::{Exchange, Incoming};

/// A `subscriptions/listen` stream.
#[derive(Debug)]
pub struct Subscription {
    exchange: Exchange,
    ended: bool,
}

impl Subscription {
    /// The next notification; `None` when the subscription ended: the server
    /// closed it gracefully, cancelled it, or went away (Subscriptions ›
    /// Cancellation and Cancellation › Behavior Requirements name all three;
    /// tern accepts any of them as the end), and every call after that.
    pub async fn next(&mut self) -> Option<Result<ServerNotification, ClientError>> {
        if self.ended {
            return None;
        }
        let next = match self.exchange.next().await {
            None
            | Some(Ok(
                Incoming::Result(_) | Incoming::Notification(ServerNotification::Cancelled(_)),
            )) => None,
            Some(Ok(Incoming::Notification(n))) => Some(Ok(n)),
            Some(Ok(Incoming::Error(e))) => Some(Err(ClientError::rpc(e))),
            // A subscription is asked nothing; the dropped question answers
            // the server with an error.
            Some(Ok(Incoming::Request(_))) => Some(Err(ClientError::protocol(
                "the server asked a question on a subscription",
            ))),
            Some(Err(e)) => Some(Err(e)),
        };
        self.ended = next.is_none();
        next
    }
}

impl Client {
    /// Opens a `subscriptions/listen` stream; its first notification is the
    /// acknowledgement. Dropping the subscription ends it.
    pub async fn listen(&self, filter: SubscriptionFilter) -> Result<Subscription, ClientError> {
        let id = self.next_id();
        let request = ClientRequest::Listen(SubscriptionsListenRequestParams {
            notifications: filter,
            meta: self.meta(&id, &CallOptions::default()),
        });
        let out = self.outgoing(id, &request)?;
        Ok(Subscription {
            exchange: self.inner.transport.send(out).await?,
            ended: false,
        })
    }
}
