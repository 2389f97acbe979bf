//! An in-memory client for testing servers: requests go straight to
//! [`Server::handle`], with the `_meta` every request needs filled in, and the
//! notifications each request raised are collected.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! use tern_server::{Server, ToolDef, testing::TestClient};
//!
//! async fn hello() -> &'static str { "hello" }
//! let server = Server::builder("t", "1").tool(ToolDef::new("hello", "Says hello", hello)).build().unwrap();
//! let client = TestClient::new(server);
//! let result = client.call_tool("hello", serde_json::json!({})).await.result().unwrap();
//! assert_eq!(result["content"][0]["text"], "hello");
//! # });
//! ```

mod store;
mod task_store;

pub use store::{Advance, ManualClock, RealTime, replay_store_contract};
pub use task_store::{
    task_journal, task_record, task_store_contract, task_store_recovery_contract,
};

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use serde_json::{Value, json};
use tern_protocol::error::ErrorObject;
use tern_protocol::jsonrpc::{Request, RequestId};
use tern_protocol::{ClientCapabilities, version};
use tokio_util::sync::CancellationToken;

use crate::call::CallContext;
use crate::ctx::Notifier;
use crate::engine::AnswerSource;
use crate::principal::Principal;
use crate::server::Server;

/// What one request got back.
#[derive(Debug, Clone)]
pub struct Exchange {
    /// The id the request was sent with.
    pub id: RequestId,
    /// The result object, or the error.
    pub outcome: Result<Value, ErrorObject>,
    /// The notifications raised while it ran, in order.
    pub notifications: Vec<Value>,
}

impl Exchange {
    /// The result, or the JSON-RPC error.
    pub fn result(self) -> Result<Value, ErrorObject> {
        self.outcome
    }

    /// The result's `resultType` (`complete` when absent).
    pub fn result_type(&self) -> Option<&str> {
        self.outcome.as_ref().ok().map(|r| {
            r.get("resultType")
                .and_then(Value::as_str)
                .unwrap_or("complete")
        })
    }

    /// The `requestState` of an `input_required` result.
    pub fn request_state(&self) -> Option<&str> {
        self.outcome.as_ref().ok()?.get("requestState")?.as_str()
    }

    /// The keys of an `input_required` result's `inputRequests`, in order.
    pub fn input_keys(&self) -> Vec<String> {
        self.outcome
            .as_ref()
            .ok()
            .and_then(|r| r.get("inputRequests"))
            .and_then(Value::as_object)
            .map(|o| o.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The text of the first content block of a tool result.
    pub fn text(&self) -> Option<&str> {
        self.outcome
            .as_ref()
            .ok()?
            .get("content")?
            .get(0)?
            .get("text")?
            .as_str()
    }

    /// The error code, when this is an error.
    pub fn error_code(&self) -> Option<i64> {
        self.outcome.as_ref().err().map(|e| e.code)
    }
}

/// An in-memory client of one [`Server`].
#[derive(Debug)]
pub struct TestClient {
    server: Server,
    principal: Principal,
    peer: Option<Arc<str>>,
    capabilities: ClientCapabilities,
    next_id: AtomicI64,
}

impl TestClient {
    /// A client declaring every input capability (elicitation form and URL,
    /// sampling with tools, roots) as an anonymous caller.
    pub fn new(server: Server) -> Self {
        let mut capabilities = ClientCapabilities::default()
            .with_elicitation_form()
            .with_elicitation_url()
            .with_sampling()
            .with_roots();
        if let Some(sampling) = capabilities.sampling.as_mut() {
            sampling.tools = Some(tern_protocol::JsonObject::new());
        }
        Self {
            server,
            principal: Principal::anonymous(),
            peer: None,
            capabilities,
            next_id: AtomicI64::new(1),
        }
    }

    /// Sends requests as `principal`.
    #[must_use]
    pub fn with_principal(mut self, principal: Principal) -> Self {
        self.principal = principal;
        self
    }

    /// Sends requests from the transport peer `peer` (an address, as HTTP
    /// names it: [`CallContext::peer`]). Default: none.
    #[must_use]
    pub fn with_peer(mut self, peer: impl Into<Arc<str>>) -> Self {
        self.peer = Some(peer.into());
        self
    }

    /// Declares `capabilities` on every request.
    #[must_use]
    pub fn with_capabilities(mut self, capabilities: ClientCapabilities) -> Self {
        self.capabilities = capabilities;
        self
    }

    /// The `_meta` this client sends.
    pub fn meta(&self) -> Value {
        json!({
            "io.modelcontextprotocol/protocolVersion": version::LATEST,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "tern-test-client", "version": "0"},
        })
    }

    /// Sends `method` with `params` as given (no `_meta` added), under a new id.
    pub async fn send_raw(&self, method: &str, params: Option<Value>) -> Exchange {
        self.send_as(method, params, &self.principal, CancellationToken::new())
            .await
    }

    /// Sends `method` with `params` plus this client's `_meta` (keys already
    /// in `params._meta` win).
    pub async fn send(&self, method: &str, params: Value) -> Exchange {
        self.send_raw(method, Some(self.with_meta(params))).await
    }

    /// [`Self::send`] as another principal, with a cancellation token.
    ///
    /// # Panics
    ///
    /// Never in practice: a `serde_json::Value` always serialises.
    pub async fn send_as(
        &self,
        method: &str,
        params: Option<Value>,
        principal: &Principal,
        cancel: CancellationToken,
    ) -> Exchange {
        self.exchange(method, params, principal, cancel, None).await
    }

    /// [`Self::send`] under the *await* strategy: the handler's questions go
    /// to `source`, and the running handler waits for its answers (as a task
    /// or a 2025-11-25 session would drive it).
    pub async fn send_awaiting(
        &self,
        method: &str,
        params: Value,
        source: Arc<dyn AnswerSource>,
    ) -> Exchange {
        let params = Some(self.with_meta(params));
        self.exchange(
            method,
            params,
            &self.principal,
            CancellationToken::new(),
            Some(source),
        )
        .await
    }

    async fn exchange(
        &self,
        method: &str,
        params: Option<Value>,
        principal: &Principal,
        cancel: CancellationToken,
        source: Option<Arc<dyn AnswerSource>>,
    ) -> Exchange {
        let id = RequestId::Number(self.next_id.fetch_add(1, Ordering::Relaxed));
        let params =
            params.map(|p| serde_json::value::to_raw_value(&p).expect("a JSON value serialises"));
        let request = Request {
            id: id.clone(),
            method: method.to_owned(),
            params,
        };
        let (notifier, mut rx) = Notifier::channel(1024);
        let mut call = CallContext::new(principal.clone())
            .with_notifier(notifier)
            .with_cancel(cancel);
        call.peer.clone_from(&self.peer);
        let reply = match source {
            None => Box::pin(self.server.handle(&request, call)).await,
            Some(source) => Box::pin(self.server.handle_awaiting(&request, call, source)).await,
        };
        let mut notifications = Vec::new();
        while let Some(n) = rx.try_recv() {
            notifications.push(serde_json::to_value(n).unwrap_or_default());
        }
        let outcome = reply
            .outcome
            .map(|raw| serde_json::from_str(raw.get()).unwrap_or_default());
        Exchange {
            id,
            outcome,
            notifications,
        }
    }

    /// Adds this client's `_meta` to `params`.
    pub fn with_meta(&self, mut params: Value) -> Value {
        let mut meta = self.meta();
        if let (Some(given), Some(meta)) = (
            params.get("_meta").and_then(Value::as_object),
            meta.as_object_mut(),
        ) {
            for (k, v) in given {
                meta.insert(k.clone(), v.clone());
            }
        }
        if let Some(p) = params.as_object_mut() {
            p.insert("_meta".into(), meta);
        }
        params
    }

    /// `tools/call` of `name` with `arguments`.
    pub async fn call_tool(&self, name: &str, arguments: Value) -> Exchange {
        self.send("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }

    /// The MRTR retry of `tools/call`: the same name and arguments, the
    /// answers, and the state echoed as received (rules `echo-state-exactly`,
    /// `no-invented-state`).
    pub async fn retry_tool(
        &self,
        name: &str,
        arguments: Value,
        responses: Value,
        state: Option<&str>,
    ) -> Exchange {
        let mut params = json!({"name": name, "arguments": arguments, "inputResponses": responses});
        if let Some(state) = state {
            params["requestState"] = Value::String(state.to_owned());
        }
        self.send("tools/call", params).await
    }
}
