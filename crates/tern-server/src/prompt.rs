//! Prompts: registration ([`PromptDef`]), `prompts/list` and `prompts/get`.

use std::sync::Arc;

use serde_json::Value;
use tern_protocol::error::ErrorObject;
use tern_protocol::prompt::{GetPromptRequestParams, GetPromptResult, Prompt, PromptArgument};
use tern_protocol::{JsonObject, RequestId, method};

use crate::call::CallContext;
use crate::engine::Engine;
use crate::engine::runner::{LegPolicy, LegRequest, Origin};
use crate::engine::strategy::Strategy;
use crate::form::{FormError, form_schema};
use crate::handler::{CallParts, Erased, Handler, IntoPromptResult, erase_prompt};
use crate::json::{Json, to_json};
use crate::question::Form;

/// A prompt and its handler, ready to register with
/// [`crate::ServerBuilder::prompt`].
pub struct PromptDef {
    pub(crate) prompt: Prompt,
    pub(crate) handler: Erased<GetPromptResult>,
    pub(crate) forms: Vec<Result<(), FormError>>,
    pub(crate) policy: LegPolicy,
}

impl std::fmt::Debug for PromptDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromptDef")
            .field("prompt", &self.prompt)
            .finish_non_exhaustive()
    }
}

/// Prompt arguments from the properties of an arguments schema.
fn arguments_from_schema(schema: &JsonObject) -> Vec<PromptArgument> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|props| {
            props
                .iter()
                .map(|(name, p)| PromptArgument {
                    name: name.clone(),
                    title: p.get("title").and_then(Value::as_str).map(str::to_owned),
                    description: p
                        .get("description")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    required: Some(required.contains(&name.as_str())),
                })
                .collect()
        })
        .unwrap_or_default()
}

impl PromptDef {
    /// A prompt named `name` served by `handler`; its arguments are the fields
    /// of the handler's [`crate::Args`] type (all strings on the wire).
    pub fn new<H, M, R>(name: impl Into<String>, description: impl Into<String>, handler: H) -> Self
    where
        H: Handler<M, R>,
        R: IntoPromptResult + Send + 'static,
    {
        let arguments = H::arguments_schema()
            .map(|s| arguments_from_schema(&s))
            .filter(|a| !a.is_empty());
        let mut prompt = Prompt::new(name);
        prompt.description = Some(description.into());
        prompt.arguments = arguments;
        Self {
            prompt,
            handler: erase_prompt(handler),
            forms: Vec::new(),
            policy: LegPolicy::default(),
        }
    }

    /// A display title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.prompt.title = Some(title.into());
        self
    }

    /// Icons a client may show for it (sizes and themes as the schema's
    /// `Icon` says; dropped for 2025 clients older than 2025-11-25).
    #[must_use]
    pub fn icons(mut self, icons: Vec<tern_protocol::Icon>) -> Self {
        self.prompt.icons = Some(icons);
        self
    }

    /// Its `_meta` (the schema's `_meta` on the definition: any members a
    /// client or a gateway reads, kept as given; the `io.modelcontextprotocol/`
    /// prefix is the spec's own).
    #[must_use]
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.prompt.meta = Some(meta);
        self
    }

    crate::engine::runner::policy_builders!();

    /// Registers a form type this prompt asks (see
    /// [`crate::ToolDef::elicits`]).
    #[must_use]
    pub fn elicits<T: Form>(mut self) -> Self {
        self.forms.push(form_schema::<T>().map(|_| ()));
        self
    }
}

impl PromptDef {
    pub(crate) fn check(&self) -> Result<(), crate::error::BuildError> {
        self.policy.check(&format!("prompt {}", self.prompt.name))?;
        match self.forms.iter().find(|f| f.is_err()) {
            Some(Err(e)) => Err(crate::error::BuildError(format!(
                "prompt {}: {e}",
                self.prompt.name
            ))),
            _ => Ok(()),
        }
    }
}

/// `prompts/get` of `def`, the prompt the dispatcher found under the
/// request's name (`None`: there is none).
pub(crate) async fn get(
    engine: &Arc<Engine>,
    def: Option<Arc<PromptDef>>,
    id: RequestId,
    params: GetPromptRequestParams,
    call: CallContext,
    strategy: Strategy,
) -> Result<Json, ErrorObject> {
    let Some(def) = def else {
        return Err(ErrorObject::invalid_params(format!(
            "Unknown prompt: {}",
            crate::error::short(&params.name)
        )));
    };
    let arguments: JsonObject = params
        .arguments
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    for arg in def.prompt.arguments.iter().flatten() {
        if arg.required == Some(true) && !arguments.contains_key(&arg.name) {
            return Err(ErrorObject::invalid_params(format!(
                "Missing required argument `{}` for prompt {}",
                arg.name, params.name
            )));
        }
    }
    let arguments = Arc::new(Value::Object(arguments));
    let request = LegRequest {
        origin: Origin {
            method: method::PROMPTS_GET,
            target: params.name,
            arguments: Some(Arc::clone(&arguments)),
            principal: call.principal.clone(),
        },
        request_state: params.request_state,
        responses: params.input_responses,
        policy: def.policy,
        id,
        meta: Arc::new(params.meta),
        call,
    };
    let handler = def.handler.clone();
    engine
        .run(
            request,
            Box::new(move |ctx| {
                handler(CallParts {
                    ctx,
                    arguments,
                    uri: None,
                })
            }),
            Box::new(|engine, out| match out {
                Ok(mut result) => {
                    result.meta.get_or_insert_with(Default::default).server_info =
                        Some(engine.info.clone());
                    Ok(to_json(&result))
                }
                // A prompt has no `isError`: a handler error is invalid params.
                Err(e) => Err(e.error_object().unwrap_or_else(|| {
                    ErrorObject::invalid_params(tern_protocol::error::tidy(&e.to_string()))
                })),
            }),
            strategy,
        )
        .await
}
