//! Tools: registration ([`ToolDef`]), `tools/list` and `tools/call`.

use serde_json::Value;
use tern_protocol::error::ErrorObject;
use tern_protocol::tool::{CallToolRequestParams, CallToolResult, Tool, ToolAnnotations};
use tern_protocol::{JsonObject, RequestId, method};

use crate::error::{BuildError, ToolError};
use crate::form::{FormError, form_schema};
use crate::handler::{CallParts, Erased, Handler, IntoToolResult, erase_tool};
use crate::mrtr::{Driven, Origin, ReplayPolicy, drive};
use crate::question::Form;
use crate::server::{CallContext, Server};

/// A tool and its handler, ready to register with
/// [`crate::ServerBuilder::tool`].
pub struct ToolDef {
    pub(crate) tool: Tool,
    pub(crate) handler: Erased<CallToolResult>,
    pub(crate) policy: ReplayPolicy,
    pub(crate) forms: Vec<Result<(), FormError>>,
    pub(crate) answers_without_state: bool,
}

impl std::fmt::Debug for ToolDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolDef")
            .field("tool", &self.tool)
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl ToolDef {
    /// A tool named `name` that `handler` serves. Its `inputSchema` comes
    /// from the handler's [`crate::Args`] type; a handler without arguments
    /// gets `{"type":"object","additionalProperties":false}`.
    pub fn new<H, M, R>(name: impl Into<String>, description: impl Into<String>, handler: H) -> Self
    where
        H: Handler<M, R>,
        R: IntoToolResult + Send + 'static,
    {
        let schema = H::arguments_schema().unwrap_or_else(Tool::no_arguments_schema);
        Self {
            tool: Tool::new(name, schema).with_description(description),
            handler: erase_tool(handler),
            policy: ReplayPolicy::default(),
            forms: Vec::new(),
            answers_without_state: false,
        }
    }

    /// A display title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.tool.title = Some(title.into());
        self
    }

    /// Behaviour hints.
    #[must_use]
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.tool.annotations = Some(annotations);
        self
    }

    /// Replaces the derived `inputSchema` (any 2020-12 keywords; arguments are
    /// still validated against it).
    #[must_use]
    pub fn input_schema(mut self, schema: JsonObject) -> Self {
        self.tool.input_schema = schema;
        self
    }

    /// Declares the `outputSchema` that `structuredContent` conforms to.
    #[must_use]
    pub fn output_schema(mut self, schema: JsonObject) -> Self {
        self.tool.output_schema = Some(schema);
        self
    }

    /// Registers a form type this tool asks with [`crate::Elicit::form`], so
    /// a type outside the flat elicitation subset fails
    /// [`crate::ServerBuilder::build`] instead of a live request.
    #[must_use]
    pub fn elicits<T: Form>(mut self) -> Self {
        self.forms.push(form_schema::<T>().map(|_| ()));
        self
    }

    /// Accepts answers on a call that carries no `requestState` (a client
    /// that answers before being asked, or a handler that issued no state):
    /// each counts for the question asked under its key and is checked
    /// against that question like any answer. Use it only where such an answer
    /// is trusted no more than an argument would be: by default an answer
    /// counts only with the sealed state of the round that asked it (S9).
    #[must_use]
    pub fn answers_without_state(mut self) -> Self {
        self.answers_without_state = true;
        self
    }

    /// Each `requestState` of this tool is accepted once (S11): a replayed
    /// state is refused with `-32602`, through the server's replay store.
    #[must_use]
    pub fn single_use(mut self) -> Self {
        self.policy.single_use = true;
        self
    }

    /// The first final result per `requestState` is kept, so a retry that
    /// arrives twice gets the same answer and the handler's effect happens
    /// once.
    #[must_use]
    pub fn idempotent_retry(mut self) -> Self {
        self.policy.idempotent_retry = true;
        self
    }

    pub(crate) fn check(&self) -> Result<jsonschema::Validator, BuildError> {
        if let Some(Err(e)) = self.forms.iter().find(|f| f.is_err()) {
            return Err(BuildError(format!("tool {}: {e}", self.tool.name)));
        }
        jsonschema::draft202012::new(&Value::Object(self.tool.input_schema.clone()))
            .map_err(|e| BuildError(format!("tool {}: invalid inputSchema: {e}", self.tool.name)))
    }
}

impl Server {
    pub(crate) async fn call_tool(
        &self,
        id: &RequestId,
        params: CallToolRequestParams,
        call: CallContext,
    ) -> Result<crate::server::Json, ErrorObject> {
        let inner = &self.inner;
        let Some(entry) = self.registry().tools.get(&params.name).cloned() else {
            return Err(ErrorObject::invalid_params(format!(
                "Unknown tool: {}",
                params.name
            )));
        };
        let arguments = std::sync::Arc::new(Value::Object(params.arguments.unwrap_or_default()));
        // A bad argument is a tool error the model can read and fix, not a
        // protocol error (spec §7).
        if let Some(error) = entry.validator.iter_errors(&arguments).next() {
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                String::new()
            } else {
                format!(" at {path}")
            };
            let result = CallToolResult::error(format!(
                "Invalid arguments for tool {}{at}: {error}",
                params.name
            ));
            return Ok(self.stamp_tool_result(result));
        }
        let origin = Origin {
            method: method::TOOLS_CALL,
            target: &params.name,
            arguments: Some(&arguments),
            principal: &call.principal,
        };
        let resumed = inner.engine.resume(
            origin,
            params.request_state.as_deref(),
            params.input_responses.as_ref(),
            entry.def.answers_without_state,
        )?;
        let policy = entry.def.policy;
        if let Some(kept) = inner.engine.before_leg(policy, resumed.state_id).await? {
            return Ok(kept);
        }
        // Released if this leg ends without an outcome (an error, or the
        // client going away), so the retry can be made again.
        let claim = inner.engine.claim(policy, resumed.state_id);
        let ctx = self.leg_ctx(id, params.meta, &call, resumed.leg);
        let parts = CallParts {
            ctx: ctx.clone(),
            arguments: std::sync::Arc::clone(&arguments),
            uri: None,
        };
        let outcome = drive(&ctx, (entry.def.handler)(parts)).await;
        let value = match outcome {
            Driven::Done(result) => {
                let result = match result {
                    Ok(r) => r,
                    Err(e) => tool_error(&e)?,
                };
                self.stamp_tool_result(result)
            }
            Driven::Suspended => {
                let ir = inner
                    .engine
                    .suspend(origin, ctx.take_leg(), resumed.round)?;
                self.stamp_input_required(ir)
            }
            Driven::Fatal(e) => return Err(e),
        };
        // The outcome of this leg, final or another round, is what a duplicate
        // of this retry gets.
        inner
            .engine
            .after_leg(policy, resumed.state_id, &value)
            .await;
        claim.keep();
        Ok(value)
    }

    fn stamp_tool_result(&self, mut result: CallToolResult) -> crate::server::Json {
        let meta = result.meta.get_or_insert_with(Default::default);
        meta.server_info = Some(self.inner.info.clone());
        crate::server::to_json(&result)
    }
}

/// A handler error: a tool error becomes an `isError` result, anything else a
/// JSON-RPC error.
pub(crate) fn tool_error(e: &ToolError) -> Result<CallToolResult, ErrorObject> {
    match e.error_object() {
        Some(obj) => Err(obj),
        None => Ok(CallToolResult::error(e.message().unwrap_or_default())),
    }
}
