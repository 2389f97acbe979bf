//! Tools: registration ([`ToolDef`]), `tools/list` and `tools/call`.

use std::sync::Arc;

use serde_json::Value;
use serde_json::value::RawValue;
use tern_protocol::error::ErrorObject;
use tern_protocol::header::HeaderParam;
use tern_protocol::meta::ResultMeta;
use tern_protocol::result::CompleteTag;
use tern_protocol::tool::{CallToolRequestParams, CallToolResult, Tool, ToolAnnotations};
use tern_protocol::{JsonObject, RequestId, method};

use crate::call::CallContext;
use crate::engine::Engine;
use crate::engine::runner::{LegPolicy, LegRequest, Origin};
use crate::engine::strategy::Strategy;
use crate::error::{BuildError, ToolError};
use crate::form::{FormError, form_schema};
use crate::handler::{CallParts, Erased, Handler, IntoToolResult, Output, ToolOutput, erase_tool};
use crate::json::{Json, to_json};
use crate::question::Form;
use crate::task::{TaskMode, TaskSupport};

/// A tool and its handler, ready to register with
/// [`crate::ServerBuilder::tool`].
///
/// ```
/// use serde::Deserialize;
/// use tern_server::{Args, Ctx, Server, ToolDef, ToolError};
///
/// #[derive(Deserialize, schemars::JsonSchema)]
/// struct Resize {
///     /// The volume to grow.
///     volume: String,
///     /// The new size in GiB.
///     gib: u32,
/// }
///
/// async fn resize(ctx: Ctx, Args(r): Args<Resize>) -> Result<String, ToolError> {
///     // An effect, once per call however many legs it takes.
///     let done = ctx.once("resize", async { format!("{} is {} GiB", r.volume, r.gib) }).await;
///     Ok(done)
/// }
///
/// let tool = ToolDef::new("resize_volume", "Grows a volume", resize)
///     .title("Resize a volume")
///     // The leg that runs the effect runs once, even if the client's
///     // connection breaks and it retries (needs a replay store in a fleet).
///     .idempotent_retry();
/// let server = Server::builder("storage", "1.0.0").tool(tool).build()?;
/// assert!(server.serves("tools/call"));
/// # Ok::<(), tern_server::BuildError>(())
/// ```
pub struct ToolDef {
    pub(crate) tool: Tool,
    pub(crate) handler: Erased<ToolOutput>,
    pub(crate) policy: LegPolicy,
    pub(crate) forms: Vec<Result<(), FormError>>,
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
            policy: LegPolicy::default(),
            forms: Vec::new(),
        }
    }

    /// A display title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.tool.title = Some(title.into());
        self
    }

    /// Icons a client may show for it (sizes and themes as the schema's
    /// `Icon` says; dropped for 2025 clients older than 2025-11-25).
    #[must_use]
    pub fn icons(mut self, icons: Vec<tern_protocol::Icon>) -> Self {
        self.tool.icons = Some(icons);
        self
    }

    /// Its `_meta` (the schema's `_meta` on the definition: any members a
    /// client or a gateway reads, kept as given; the `io.modelcontextprotocol/`
    /// prefix is the spec's own).
    #[must_use]
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.tool.meta = Some(meta);
        self
    }

    /// Behaviour hints.
    #[must_use]
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.tool.annotations = Some(annotations);
        self
    }

    /// Replaces the derived `inputSchema` (any 2020-12 keywords; with the
    /// `validate` feature, the default, arguments are still validated
    /// against it).
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

    /// Accepts *unsealed* answers: answers on a call that carries no
    /// `requestState`, so bound to no question the server is known to have
    /// asked (a client that answers before being asked, or a handler that
    /// issued no state). Each
    /// counts for the question asked under its key and is checked against that
    /// question like any answer. Use it only where such an answer is trusted no
    /// more than an argument would be: by default an answer counts only with
    /// the sealed state of the round that asked it (rule `state-integrity`). It
    /// cannot be combined with [`Self::single_use`] or
    /// [`Self::idempotent_retry`] ([`crate::ServerBuilder::build`] refuses).
    #[must_use]
    pub fn accept_unsealed_answers(mut self) -> Self {
        self.policy.accept_unsealed_answers = true;
        self
    }

    /// Each `requestState` of this tool is accepted once (rule
    /// `state-single-use`): a replayed state is refused with `-32602`, through
    /// the server's replay store. The leg that redeems it runs to its end even
    /// if its client goes away (see [`crate::Ctx::cancelled`]).
    ///
    /// The first leg of a call (no state yet) cannot be guarded: put side
    /// effects after the first question.
    #[must_use]
    pub fn single_use(mut self) -> Self {
        self.policy.single_use = true;
        self
    }

    /// Exactly once per `requestState`: the leg that redeems a state runs to
    /// its end even if its client goes away, and whatever it ends with (a
    /// result, an `isError` result, a JSON-RPC error, another
    /// `input_required`) is what every duplicate of that retry gets, so the
    /// handler's effect happens once. A duplicate that arrives while the
    /// first still runs waits for it; a run that died reads "outcome
    /// unknown" ([`crate::error::codes::OUTCOME_UNKNOWN`]), never a second
    /// run.
    ///
    /// The first leg of a call (no state yet) cannot be guarded: put side
    /// effects after the first question.
    #[must_use]
    pub fn idempotent_retry(mut self) -> Self {
        self.policy.idempotent_retry = true;
        self
    }

    /// The tool may run as a task (the Tasks extension): with
    /// [`TaskSupport::Optional`] it becomes one at [`crate::Ctx::into_task`]
    /// when the request declared the extension, and runs inline through MRTR
    /// otherwise; with [`TaskSupport::Required`] a request that did not
    /// declare it gets `-32021` before the handler runs. Cannot be combined
    /// with [`Self::single_use`] or [`Self::idempotent_retry`].
    #[must_use]
    pub fn task(mut self, support: TaskSupport) -> Self {
        let from_start = self.policy.task.is_some_and(|m| m.from_start);
        let durable = self.policy.task.and_then(|m| m.durable);
        self.policy.task = Some(TaskMode {
            support,
            from_start,
            durable,
        });
        self
    }

    /// Its tasks are durable (docs/design.md, "Durable tasks"): each keeps
    /// a journal in the task store (the call, its answers, every
    /// [`crate::Ctx::once`] result), and when its runner's lease lapses —
    /// the process died, was killed, was cut off from the store — another
    /// replica (or the same process restarted, with a store on disk) runs
    /// the handler again from it: `ctx.once` steps return their recorded
    /// values without running, questions answered are not asked again.
    /// Code outside `ctx.once` runs again, so effects belong inside it, and
    /// the handler must reach the same `ctx.once` names and questions on
    /// every run. `version` names the handler's code: a replica serving
    /// another version does not take the task. Implies
    /// [`TaskSupport::Optional`] unless [`Self::task`] said otherwise.
    ///
    /// ```
    /// use tern_server::{Args, Ctx, ToolDef, ToolError};
    /// # #[derive(serde::Deserialize, schemars::JsonSchema)] struct Import { rows: u32 }
    /// async fn import(ctx: Ctx, Args(a): Args<Import>) -> Result<String, ToolError> {
    ///     ctx.into_task().await;
    ///     for batch in 0..a.rows.div_ceil(100) {
    ///         // Recorded once done; a recovered run skips it. Retry-safe:
    ///         // the effect carries its own idempotency key.
    ///         ctx.once_retry_safe(&format!("batch-{batch}"), async move {
    ///             // insert rows with key (call id, batch) …
    ///         })
    ///         .await;
    ///     }
    ///     Ok("imported".into())
    /// }
    /// let tool = ToolDef::new("import", "Imports rows", import).durable("v1");
    /// # let _ = tool;
    /// ```
    #[must_use]
    pub fn durable(mut self, version: &'static str) -> Self {
        let (support, from_start) = self
            .policy
            .task
            .map_or((TaskSupport::Optional, false), |m| {
                (m.support, m.from_start)
            });
        self.policy.task = Some(TaskMode {
            support,
            from_start,
            durable: Some(version),
        });
        self
    }

    /// The call becomes a task before the handler's first line (as if it
    /// began with [`crate::Ctx::into_task`]), when it can be one. Implies
    /// [`TaskSupport::Optional`] unless [`Self::task`] said otherwise.
    #[must_use]
    pub fn task_from_start(mut self) -> Self {
        let support = self
            .policy
            .task
            .map_or(TaskSupport::Optional, |m| m.support);
        let durable = self.policy.task.and_then(|m| m.durable);
        self.policy.task = Some(TaskMode {
            support,
            from_start: true,
            durable,
        });
        self
    }

    pub(crate) fn check(&self) -> Result<Validator, BuildError> {
        if let Some(Err(e)) = self.forms.iter().find(|f| f.is_err()) {
            return Err(BuildError(format!("tool {}: {e}", self.tool.name)));
        }
        self.policy.check(&format!("tool {}", self.tool.name))?;
        #[cfg(feature = "validate")]
        return jsonschema::draft202012::new(&Value::Object(self.tool.input_schema.clone()))
            .map(Validator)
            .map_err(|e| BuildError(format!("tool {}: invalid inputSchema: {e}", self.tool.name)));
        #[cfg(not(feature = "validate"))]
        Ok(Validator())
    }
}

/// A tool's compiled `inputSchema`. Without the `validate` feature the
/// schema is advertised, not enforced: a typed handler's decoding of its
/// arguments is then the only check.
pub(crate) struct Validator(#[cfg(feature = "validate")] jsonschema::Validator);

impl Validator {
    /// How `arguments` break the schema, as the text of the tool error the
    /// model reads and can fix; `None` when they conform.
    #[cfg(feature = "validate")]
    fn reject(&self, tool: &str, arguments: &Value) -> Option<String> {
        let error = self.0.iter_errors(arguments).next()?;
        let path = error.instance_path().to_string();
        let at = if path.is_empty() {
            String::new()
        } else {
            format!(" at {path}")
        };
        // The validator quotes the offending value whole: tidied (quoted
        // values cut, the whole bounded) so a 3 MiB argument is not echoed.
        Some(tern_protocol::error::tidy(&format!(
            "Invalid arguments for tool {tool}{at}: {error}"
        )))
    }

    #[cfg(not(feature = "validate"))]
    #[expect(
        clippy::unused_self,
        reason = "the same call as the validating build's"
    )]
    fn reject(&self, _tool: &str, _arguments: &Value) -> Option<String> {
        None
    }
}

/// A registered tool: its definition, its compiled `inputSchema`, and its
/// `x-mcp-header` arguments.
pub(crate) struct ToolEntry {
    pub(crate) def: ToolDef,
    pub(crate) validator: Validator,
    #[cfg_attr(
        not(feature = "http"),
        expect(
            dead_code,
            reason = "`x-mcp-header` arguments are read by the HTTP transport"
        )
    )]
    pub(crate) header_params: Vec<HeaderParam>,
}

impl ToolEntry {
    pub(crate) fn new(def: ToolDef) -> Result<Self, BuildError> {
        let validator = def.check()?;
        // A server must not advertise a tool whose header arguments are
        // invalid.
        let header_params = tern_protocol::header::header_params(&def.tool.input_schema)
            .map_err(|why| BuildError(format!("tool {}: {why}", def.tool.name)))?;
        Ok(Self {
            def,
            validator,
            header_params,
        })
    }
}

/// `tools/call` of `entry`, the tool the dispatcher found under the
/// request's name (`None`: there is none).
pub(crate) async fn call(
    engine: &Arc<Engine>,
    entry: Option<Arc<ToolEntry>>,
    id: RequestId,
    params: CallToolRequestParams,
    call: CallContext,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    let Some(entry) = entry else {
        return Err(ErrorObject::invalid_params(format!(
            "Unknown tool: {}",
            crate::error::short(&params.name)
        )));
    };
    // A tool that cannot run without a task, asked by a request that did not
    // declare the extension: -32021 before anything runs (Tasks extension ›
    // Capability Negotiation).
    if entry
        .def
        .policy
        .task
        .is_some_and(|m| m.support == TaskSupport::Required)
        && !crate::task::request_declared(&params.meta)
    {
        return Err(crate::task::missing_extension(&format!(
            "Tool {}",
            params.name
        )));
    }
    let arguments = Arc::new(Value::Object(params.arguments.unwrap_or_default()));
    // A bad argument is a tool error the model can read and fix, not a
    // protocol error (spec: Tools › Error Handling).
    if let Some(why) = entry.validator.reject(&params.name, &arguments) {
        return Ok(stamp(engine, CallToolResult::error(why)));
    }
    let request = LegRequest {
        origin: Origin {
            method: method::TOOLS_CALL,
            target: params.name,
            arguments: Some(Arc::clone(&arguments)),
            principal: call.principal.clone(),
        },
        request_state: params.request_state,
        responses: params.input_responses,
        policy: entry.def.policy,
        id,
        meta: Arc::new(params.meta),
        call,
    };
    let handler = Arc::clone(&entry);
    engine
        .run(
            request,
            Box::new(move |ctx| {
                (handler.def.handler)(CallParts {
                    ctx,
                    arguments,
                    uri: None,
                })
            }),
            Box::new(finish),
            strategy,
        )
        .await
}

/// A tool handler's output as the `tools/call` result.
fn finish(engine: &Engine, out: Result<ToolOutput, ToolError>) -> Result<Json, ErrorObject> {
    match out {
        Ok(ToolOutput(Output::Result(r))) => Ok(stamp(engine, r)),
        Ok(ToolOutput(Output::Structured(raw))) => Ok(stamp_structured(engine, &raw)),
        Err(e) => Ok(stamp(engine, tool_error(&e)?)),
    }
}

/// The handler of `entry` run again for a recovered durable task, if it is
/// durable at `version`: its output finished as `tools/call` would.
pub(crate) fn rerun(
    engine: Arc<Engine>,
    entry: &Arc<ToolEntry>,
    version: &str,
    ctx: crate::Ctx,
    arguments: Arc<Value>,
) -> Option<crate::task::durable::Rerun> {
    if entry.def.policy.task.and_then(|m| m.durable) != Some(version) {
        return None;
    }
    let running = (entry.def.handler)(CallParts {
        ctx,
        arguments,
        uri: None,
    });
    Some(Box::pin(async move {
        let out = running.await;
        Ok(finish(&engine, out))
    }))
}

fn stamp(engine: &Engine, mut result: CallToolResult) -> Json {
    let meta = result.meta.get_or_insert_with(Default::default);
    meta.server_info = Some(engine.info.clone());
    to_json(&result)
}

/// [`stamp`] of `Json(value)`'s result, written straight from the value's
/// serialised text: the same JSON as the `CallToolResult` that
/// `Json::into_tool_result` makes (the exceptions are on
/// `Json::into_tool_output`; `call::json_written_once_…` holds them equal),
/// with no value tree built, no second serialisation of it.
fn stamp_structured(engine: &Engine, raw: &RawValue) -> Json {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire<'a> {
        result_type: CompleteTag,
        content: [TextBlock<'a>; 1],
        structured_content: &'a RawValue,
        #[serde(rename = "_meta")]
        meta: ResultMeta,
    }
    #[derive(serde::Serialize)]
    struct TextBlock<'a> {
        #[serde(rename = "type")]
        kind: &'static str,
        text: &'a str,
    }
    to_json(&Wire {
        result_type: CompleteTag,
        content: [TextBlock {
            kind: "text",
            text: raw.get(),
        }],
        structured_content: raw,
        meta: ResultMeta::with_server_info(Arc::clone(&engine.info)),
    })
}

/// A handler error: a tool error becomes an `isError` result, anything else a
/// JSON-RPC error.
pub(crate) fn tool_error(e: &ToolError) -> Result<CallToolResult, ErrorObject> {
    match e.error_object() {
        Some(obj) => Err(obj),
        None => Ok(CallToolResult::error(e.message().unwrap_or_default())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    async fn noop() -> &'static str {
        "ok"
    }

    #[test]
    fn an_invalid_annotation_names_the_tool() {
        let bad =
            json!({"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}});
        let def = ToolDef::new("place", "", noop).input_schema(bad.as_object().unwrap().clone());
        let Err(err) = ToolEntry::new(def) else {
            panic!("an invalid x-mcp-header annotation must not build");
        };
        assert!(
            err.to_string().starts_with("tool place: x-mcp-header `N`"),
            "{err}"
        );
    }
}
