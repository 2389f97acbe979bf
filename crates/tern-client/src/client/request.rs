//! One request: built once from its typed form, sent, and its response
//! decoded once, by the method that was called plus `resultType` (rules
//! `result-type-absent`, `result-type-unknown`), with
//! the retries the spec asks for.

use serde_json::value::RawValue;
use tern_protocol::error::code;
use tern_protocol::meta::{RequestMeta, ResultMeta};
use tern_protocol::{
    ClientRequest, Outcome, ResultContext, ServerNotification, ServerResult, method, version,
};

use super::{CallOptions, Client, lock};
use crate::error::ClientError;
use crate::headers::param_headers;
use crate::transport::{Incoming, Outgoing};

/// How to build a request once its `_meta` is known (each send has its own
/// id, and so its own progress token).
pub(super) type Build<'a> = &'a (dyn Fn(RequestMeta) -> ClientRequest + Send + Sync);

/// The `_meta` of a result, whichever method it answers.
fn result_meta(result: &ServerResult) -> Option<&ResultMeta> {
    fn outcome<T>(o: &Outcome<T>, meta: impl Fn(&T) -> Option<&ResultMeta>) -> Option<&ResultMeta> {
        match o {
            Outcome::Complete(r) => meta(r),
            Outcome::InputRequired(ir) => ir.meta.as_ref(),
            Outcome::Task(t) => t.meta.as_ref(),
        }
    }
    match result {
        ServerResult::Discover(r) => r.meta.as_ref(),
        ServerResult::ListTools(r) => r.meta.as_ref(),
        ServerResult::CallTool(o) => outcome(o, |r| r.meta.as_ref()),
        ServerResult::ListResources(r) => r.meta.as_ref(),
        ServerResult::ListResourceTemplates(r) => r.meta.as_ref(),
        ServerResult::ReadResource(o) => outcome(o, |r| r.meta.as_ref()),
        ServerResult::ListPrompts(r) => r.meta.as_ref(),
        ServerResult::GetPrompt(o) => outcome(o, |r| r.meta.as_ref()),
        ServerResult::Completion(r) => r.meta.as_ref(),
        ServerResult::ListSkills(r) => r.meta.as_ref(),
        ServerResult::GetSkill(r) => r.meta.as_ref(),
        ServerResult::ReadResourceDirectory(r) => r.meta.as_ref(),
        _ => None,
    }
}

impl Client {
    /// The `_meta` of one request: the version, the capabilities for this call
    /// (rule `retry-repeats-request`: every retry is a full request),
    /// `clientInfo`, and a progress token unique to this request when the call
    /// listens for progress.
    pub(super) fn meta(&self, id: &tern_protocol::RequestId, options: &CallOptions) -> RequestMeta {
        let mut meta = RequestMeta::new(self.protocol_version(), self.capabilities(options))
            .with_client_info(self.inner.info.clone());
        if options.on_progress.is_some() {
            meta = meta.with_progress_token(format!("tern-{id}").as_str());
        }
        meta
    }

    /// The request on its way out: `Mcp-Param-*` headers from a tool's
    /// `x-mcp-header` annotations and the typed arguments (spec: Streamable
    /// HTTP › Custom Headers from Tool Parameters).
    pub(super) fn outgoing(
        &self,
        id: tern_protocol::RequestId,
        request: &ClientRequest,
    ) -> Result<Outgoing, ClientError> {
        let header_params = match request {
            ClientRequest::CallTool(call) => lock(&self.inner.tool_headers)
                .get(&call.name)
                .map(|params| param_headers(params, call.arguments.as_ref()))
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        Outgoing::new(id, request, header_params)
    }

    /// Sends one request (a new id every time, rule `retry-new-id`), passes its
    /// notifications to `options`, and decodes its result once.
    pub(super) async fn send_once(
        &self,
        build: Build<'_>,
        options: &CallOptions,
    ) -> Result<ServerResult, ClientError> {
        let id = self.next_id();
        let request = build(self.meta(&id, options));
        let ctx = request
            .meta()
            .map(ResultContext::for_request)
            .unwrap_or_default();
        let out = self.outgoing(id, &request)?;
        let mut exchange = self.inner.transport.send(out).await?;
        let mut live_questions = 0u32;
        loop {
            match exchange.next().await {
                None => {
                    return Err(ClientError::transport(
                        "the connection closed before the response",
                    ));
                }
                Some(Err(e)) => return Err(e),
                Some(Ok(Incoming::Notification(n))) => {
                    if let (ServerNotification::Progress(p), Some(on_progress)) =
                        (&n, &options.on_progress)
                    {
                        on_progress(p);
                    }
                }
                Some(Ok(Incoming::Result(raw))) => {
                    exchange.disarm();
                    return self.decode(request.method(), &raw, ctx);
                }
                Some(Ok(Incoming::Error(e))) => {
                    exchange.disarm();
                    return Err(ClientError::rpc(e));
                }
                // A 2025 server's question, answered by the same handlers.
                Some(Ok(Incoming::Request(live))) => {
                    live_questions += 1;
                    self.answer_live(&request, live, live_questions, options)
                        .await;
                }
            }
        }
    }

    /// Decodes a result by the method it answers plus `resultType` (rules
    /// `result-type-absent`, `result-type-unknown`),
    /// once, and keeps the server's self-description it carries.
    fn decode(
        &self,
        m: &str,
        raw: &RawValue,
        ctx: ResultContext,
    ) -> Result<ServerResult, ClientError> {
        let result = ServerResult::decode(m, raw.get(), ctx).map_err(|e| {
            ClientError::protocol(format!("the server's {m} result cannot be read")).because(e)
        })?;
        if let Some(info) = result_meta(&result).and_then(|m| m.server_info.clone()) {
            *lock(&self.inner.server_info) = Some(info);
        }
        Ok(result)
    }

    /// [`Self::send_once`] with the two retries the spec asks for: after
    /// `-32022`, once, if `supported` lists the version tern speaks
    /// (Versioning and Compatibility › Protocol Version Negotiation: a
    /// mutually supported version; tern speaks 2026-07-28 only, so this is a
    /// replica of another release answering, as in a rolling upgrade, and
    /// otherwise the error is the answer); after `-32020` on `tools/call`,
    /// once after refreshing `tools/list` (Streamable HTTP › Custom Headers
    /// from Tool Parameters › Client Behavior).
    pub(super) async fn request(
        &self,
        m: &str,
        build: Build<'_>,
        options: &CallOptions,
    ) -> Result<ServerResult, ClientError> {
        match self.send_once(build, options).await {
            Err(e)
                if e.rpc_error()
                    .filter(|e| e.code == code::UNSUPPORTED_PROTOCOL_VERSION)
                    .and_then(tern_protocol::ErrorObject::unsupported_version_data)
                    .is_some_and(|d| d.supported.iter().any(|v| v == version::LATEST)) =>
            {
                self.send_once(build, options).await
            }
            Err(e)
                if m == method::TOOLS_CALL
                    && e.rpc_error()
                        .is_some_and(|e| e.code == code::HEADER_MISMATCH) =>
            {
                self.refresh_tool_headers().await?;
                self.send_once(build, options).await
            }
            other => other,
        }
    }
}
