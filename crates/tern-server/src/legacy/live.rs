//! The *await, live* strategy (docs/design.md, "One leg runner, three ways of
//! asking"): an [`AnswerSource`] that sends each outstanding question as a real
//! server-to-client request on the session and resolves with the client's
//! replies.
//!
//! - A question goes out once, with a fresh id, after
//!   `notifications/initialized`; publishing it again (the rest of a partly
//!   answered round) does not resend it.
//! - URL elicitations get an `elicitationId`; when the call then succeeds,
//!   `notifications/elicitation/complete` goes out for each one the user
//!   accepted, before the final response.
//! - When the call ends (result, error, timeout, cancellation, or the
//!   request's future dropped), every server-to-client request still
//!   outstanding gets `notifications/cancelled`, and a late reply to it is
//!   ignored.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::RequestId;
use tern_protocol::legacy::NOTIFICATION_ELICITATION_COMPLETE;
use tern_protocol::mrtr::{InputKind, InputResponse};
use tern_protocol::{InputRequests, method};
use tokio::sync::oneshot;

use super::session::{ClientReply, Session, Sink, notification};
use crate::engine::AnswerSource;
use crate::replay::BoxFuture;

struct Asked {
    id: RequestId,
    kind: InputKind,
    reply: oneshot::Receiver<ClientReply>,
    /// The `elicitationId` of a URL elicitation.
    url: Option<String>,
}

#[derive(Default)]
struct State {
    /// Outstanding server-to-client requests, by question key.
    asked: HashMap<String, Asked>,
    /// URL elicitations the user accepted.
    accepted_urls: Vec<String>,
    done: bool,
}

/// The live answer source of one request on a session.
pub(crate) struct Live {
    session: Arc<Session>,
    sink: Sink,
    state: Mutex<State>,
}

impl Live {
    pub(crate) fn new(session: Arc<Session>, sink: Sink) -> Arc<Self> {
        Arc::new(Self {
            session,
            sink,
            state: Mutex::default(),
        })
    }

    pub(crate) fn source(self: &Arc<Self>) -> Arc<dyn AnswerSource> {
        Arc::new(Source(Arc::clone(self)))
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The call ended: outstanding requests are cancelled; on success the
    /// accepted URL elicitations are completed.
    pub(crate) async fn finish(&self, succeeded: bool) {
        let urls = {
            let mut state = self.state();
            state.done = true;
            std::mem::take(&mut state.accepted_urls)
        };
        self.cancel_outstanding();
        if succeeded {
            for id in urls {
                let n = notification(
                    NOTIFICATION_ELICITATION_COMPLETE,
                    Some(json!({"elicitationId": id})),
                );
                self.sink.send(&n).await;
            }
        }
    }

    fn cancel_outstanding(&self) {
        let asked: Vec<Asked> = self.state().asked.drain().map(|(_, a)| a).collect();
        for a in asked {
            if self.session.forget(&a.id) {
                let n = notification(
                    method::NOTIFICATION_CANCELLED,
                    Some(
                        json!({"requestId": a.id, "reason": "The server no longer needs the answer"}),
                    ),
                );
                self.sink.try_send(&n);
            }
        }
    }

    /// Sends the questions not sent yet; questions no longer outstanding
    /// are cancelled.
    async fn publish(&self, questions: InputRequests) -> Result<(), ErrorObject> {
        self.session.initialized().await;
        let mut outgoing = Vec::new();
        let dropped: Vec<Asked> = {
            let mut state = self.state();
            if state.done {
                return Err(gone());
            }
            let gone_keys: Vec<String> = state
                .asked
                .keys()
                .filter(|k| !questions.contains_key(*k))
                .cloned()
                .collect();
            for (key, question) in questions {
                if state.asked.contains_key(&key) {
                    continue;
                }
                let kind = question.kind();
                let Ok(Value::Object(mut body)) = serde_json::to_value(&question) else {
                    return Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        "a question could not be encoded",
                    ));
                };
                let mut params = body.remove("params").unwrap_or_else(|| json!({}));
                let mut url = None;
                if kind == InputKind::Elicitation && params["mode"] == "url" {
                    let id = match params.get("elicitationId").and_then(Value::as_str) {
                        Some(id) => id.to_owned(),
                        None => crate::ids::random_id(),
                    };
                    params["elicitationId"] = json!(id);
                    url = Some(id);
                }
                let (id, reply) = self.session.expect();
                outgoing.push(json!({
                    "jsonrpc": "2.0", "id": id, "method": kind.method(), "params": params,
                }));
                state.asked.insert(
                    key,
                    Asked {
                        id,
                        kind,
                        reply,
                        url,
                    },
                );
            }
            gone_keys
                .iter()
                .filter_map(|k| state.asked.remove(k))
                .collect()
        };
        for a in dropped {
            if self.session.forget(&a.id) {
                let n = notification(
                    method::NOTIFICATION_CANCELLED,
                    Some(json!({"requestId": a.id})),
                );
                self.sink.send(&n).await;
            }
        }
        for message in outgoing {
            if !self.sink.send(&message).await {
                return Err(gone());
            }
        }
        Ok(())
    }

    /// Resolves with the replies that are in (at least one).
    fn poll_replies(
        &self,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Result<Vec<(String, InputResponse)>, ErrorObject>> {
        let mut state = self.state();
        let mut ready = Vec::new();
        for (key, asked) in &mut state.asked {
            if let Poll::Ready(reply) = Pin::new(&mut asked.reply).poll(cx) {
                ready.push((key.clone(), reply));
            }
        }
        if ready.is_empty() {
            return Poll::Pending;
        }
        let mut answers = Vec::new();
        for (key, reply) in ready {
            let Some(asked) = state.asked.remove(&key) else {
                continue;
            };
            let what = asked.kind.method();
            let value = match reply {
                Ok(Ok(value)) => value,
                Ok(Err(error)) => {
                    return Poll::Ready(Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        format!(
                            "The client answered {what} with an error: {}",
                            error.message
                        ),
                    )
                    .with_data(json!({"clientError": error}))));
                }
                Err(_) => return Poll::Ready(Err(gone())),
            };
            match InputResponse::decode_as(asked.kind, &value) {
                Ok(response) => {
                    if let (Some(id), InputResponse::Elicitation(result)) = (&asked.url, &response)
                        && serde_json::to_value(result)
                            .is_ok_and(|v| v.get("action").is_some_and(|a| a == "accept"))
                    {
                        state.accepted_urls.push(id.clone());
                    }
                    answers.push((key, response));
                }
                Err(e) => {
                    return Poll::Ready(Err(ErrorObject::new(
                        code::INTERNAL_ERROR,
                        format!("The client's answer to {what} is malformed: {e}"),
                    )));
                }
            }
        }
        Poll::Ready(Ok(answers))
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        // The request's future was dropped mid-question (stdio cancellation):
        // the client is told the outstanding requests are void.
        self.cancel_outstanding();
    }
}

fn gone() -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        "The session ended before the client answered the server's question",
    )
}

struct Source(Arc<Live>);

impl AnswerSource for Source {
    fn answers(
        &self,
        questions: InputRequests,
    ) -> BoxFuture<'static, Result<Vec<(String, InputResponse)>, ErrorObject>> {
        let live = Arc::clone(&self.0);
        Box::pin(async move {
            live.publish(questions).await?;
            std::future::poll_fn(|cx| live.poll_replies(cx)).await
        })
    }

    fn question_timeout(&self) -> Duration {
        self.0.session.options.question_timeout
    }
}
