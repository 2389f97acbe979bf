//! Prompts: registration ([`PromptDef`]), `prompts/list` and `prompts/get`.

use serde_json::Value;
use tern_protocol::error::ErrorObject;
use tern_protocol::prompt::{GetPromptRequestParams, GetPromptResult, Prompt, PromptArgument};
use tern_protocol::{JsonObject, RequestId, method};

use crate::form::{FormError, form_schema};
use crate::handler::{CallParts, Erased, Handler, IntoPromptResult, erase_prompt};
use crate::mrtr::{Driven, Origin, drive};
use crate::question::Form;
use crate::server::{CallContext, Server};

/// A prompt and its handler, ready to register with
/// [`crate::ServerBuilder::prompt`].
pub struct PromptDef {
    pub(crate) prompt: Prompt,
    pub(crate) handler: Erased<GetPromptResult>,
    pub(crate) forms: Vec<Result<(), FormError>>,
    pub(crate) answers_without_state: bool,
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
            answers_without_state: false,
        }
    }

    /// A display title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.prompt.title = Some(title.into());
        self
    }

    /// Accepts answers without a `requestState` (see
    /// [`crate::ToolDef::answers_without_state`]).
    #[must_use]
    pub fn answers_without_state(mut self) -> Self {
        self.answers_without_state = true;
        self
    }

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
        match self.forms.iter().find(|f| f.is_err()) {
            Some(Err(e)) => Err(crate::error::BuildError(format!(
                "prompt {}: {e}",
                self.prompt.name
            ))),
            _ => Ok(()),
        }
    }
}

impl Server {
    pub(crate) async fn get_prompt(
        &self,
        id: &RequestId,
        params: GetPromptRequestParams,
        call: CallContext,
    ) -> Result<crate::server::Json, ErrorObject> {
        let inner = &self.inner;
        let Some(def) = self.registry().prompts.get(&params.name).cloned() else {
            return Err(ErrorObject::invalid_params(format!(
                "Unknown prompt: {}",
                params.name
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
        let arguments_value = std::sync::Arc::new(Value::Object(arguments));
        let origin = Origin {
            method: method::PROMPTS_GET,
            target: &params.name,
            arguments: Some(&arguments_value),
            principal: &call.principal,
        };
        let resumed = inner.engine.resume(
            origin,
            params.request_state.as_deref(),
            params.input_responses.as_ref(),
            def.answers_without_state,
        )?;
        let ctx = self.leg_ctx(id, params.meta, &call, resumed.leg);
        let parts = CallParts {
            ctx: ctx.clone(),
            arguments: std::sync::Arc::clone(&arguments_value),
            uri: None,
        };
        match drive(&ctx, (def.handler)(parts)).await {
            Driven::Done(Ok(mut result)) => {
                result.meta.get_or_insert_with(Default::default).server_info =
                    Some(inner.info.clone());
                Ok(crate::server::to_json(&result))
            }
            // A prompt has no `isError`: a handler error is invalid params.
            Driven::Done(Err(e)) => Err(e
                .error_object()
                .unwrap_or_else(|| ErrorObject::invalid_params(e.to_string()))),
            Driven::Suspended => {
                let ir = inner
                    .engine
                    .suspend(origin, ctx.take_leg(), resumed.round)?;
                Ok(self.stamp_input_required(ir))
            }
            Driven::Fatal(e) => Err(e),
        }
    }
}
