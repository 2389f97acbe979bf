//! A 2025-11-25 server's own requests, read by both transports: `ping`
//! answered at once, a question ([`LiveRequest`]) handed to the call in
//! flight that may be asked one (or, for `roots/list`, to the client's roots
//! handler: such a server may ask at any time), anything else refused.
//! (2025-11-25 Basic: a server sends requests to the client on the session.)

use std::sync::Arc;

use serde_json::{Value, json};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::jsonrpc::{Request, RequestId};
use tern_protocol::legacy::LegacyServerRequest;
use tern_protocol::mrtr::{InputRequest, InputResponse};
use tern_protocol::roots::ListRootsResult;
use tokio::sync::oneshot;

use crate::handler::{Question, Roots};

/// A question a 2025 server sent as a request of its own: answer it with
/// [`LiveRequest::respond`] (dropping it answers with an error).
#[derive(Debug)]
pub struct LiveRequest {
    request: InputRequest,
    reply: Option<oneshot::Sender<Result<InputResponse, ErrorObject>>>,
}

impl LiveRequest {
    /// The question.
    pub fn request(&self) -> &InputRequest {
        &self.request
    }

    /// Sends the answer (or an error) back to the server.
    pub fn respond(mut self, answer: Result<InputResponse, ErrorObject>) {
        if let Some(reply) = self.reply.take() {
            let _ = reply.send(answer);
        }
    }
}

/// What a server-to-client request needs.
pub(crate) enum ServerAsk {
    /// `ping`: answered at once with `{}`.
    Ping,
    /// A question for the call in flight; the receiver brings the answer.
    Live(
        Box<LiveRequest>,
        oneshot::Receiver<Result<InputResponse, ErrorObject>>,
    ),
    /// Something this client does not serve.
    Unknown(ErrorObject),
}

/// Reads a server-to-client request.
pub(crate) fn server_ask(request: &Request) -> ServerAsk {
    match LegacyServerRequest::decode(&request.method, request.params.as_deref()) {
        Ok(Some(LegacyServerRequest::Ping(_))) => ServerAsk::Ping,
        Ok(Some(ask)) => {
            let request = match ask {
                LegacyServerRequest::Elicit(p) => InputRequest::elicit(p),
                LegacyServerRequest::CreateMessage(p) => InputRequest::sampling(p),
                LegacyServerRequest::ListRoots(_) | LegacyServerRequest::Ping(_) => {
                    InputRequest::roots()
                }
            };
            let (tx, rx) = oneshot::channel();
            ServerAsk::Live(
                Box::new(LiveRequest {
                    request,
                    reply: Some(tx),
                }),
                rx,
            )
        }
        Ok(None) => ServerAsk::Unknown(ErrorObject::method_not_found(&request.method)),
        Err(e) => ServerAsk::Unknown(ErrorObject::invalid_params(e.to_string())),
    }
}

/// Answers `live`, a 2025 server's question no call in flight took, if it
/// is `roots/list` and the client has a roots handler; any other question
/// is dropped (answered with an error): only roots are the client's own to
/// give outside a call, elicitation and sampling belong to the call that
/// asks.
pub(crate) fn answer_standing(live: Box<LiveRequest>, roots: Option<Arc<dyn Roots>>) {
    let Some(roots) = roots.filter(|_| matches!(live.request(), InputRequest::Roots(_))) else {
        return;
    };
    tokio::spawn(async move {
        let question = Question {
            key: "roots".to_owned(),
            server: None,
            method: "roots/list".to_owned(),
            target: String::new(),
        };
        let answer = roots
            .list_roots(question)
            .await
            .map(|roots| InputResponse::Roots(ListRootsResult { roots }))
            .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.0));
        live.respond(answer);
    });
}

/// The JSON-RPC response to server request `id`.
pub(crate) fn response_text(id: &RequestId, answer: Result<Value, ErrorObject>) -> String {
    match answer {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string(),
        Err(error) => json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string(),
    }
}

/// Waits for the answer of a live request and encodes the response.
pub(crate) async fn answer_text(
    id: RequestId,
    rx: oneshot::Receiver<Result<InputResponse, ErrorObject>>,
) -> String {
    let answer = match rx.await {
        Ok(Ok(response)) => serde_json::to_value(&response)
            .map_err(|e| ErrorObject::new(code::INTERNAL_ERROR, e.to_string())),
        Ok(Err(e)) => Err(e),
        Err(_) => Err(ErrorObject::new(
            code::INTERNAL_ERROR,
            "The client did not answer (no call in flight could take the question)",
        )),
    };
    response_text(&id, answer)
}
