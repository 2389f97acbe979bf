//! Resources: registration ([`ResourceDef`], [`ResourceTemplateDef`]),
//! `resources/list`, `resources/templates/list` and `resources/read`.

use serde_json::Value;
use tern_protocol::content::ResourceContents;
use tern_protocol::error::ErrorObject;
use tern_protocol::resource::{
    ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate,
};
use tern_protocol::{JsonObject, RequestId, method};

use crate::error::BuildError;
use crate::handler::{CallParts, Erased, Handler, IntoReadResult, erase_resource};
use crate::mrtr::{Driven, Origin, drive};
use crate::server::{CallContext, Server};
use crate::template::UriTemplate;

/// Makes the erased handler once the MIME type is final.
type MakeHandler = Box<dyn FnOnce(Option<String>) -> Erased<Vec<ResourceContents>> + Send + Sync>;

/// A resource at a fixed URI and its handler, for
/// [`crate::ServerBuilder::resource`].
pub struct ResourceDef {
    pub(crate) resource: Resource,
    handler: Option<MakeHandler>,
    pub(crate) erased: Option<Erased<Vec<ResourceContents>>>,
}

impl std::fmt::Debug for ResourceDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceDef")
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

impl ResourceDef {
    /// The resource `uri`, named `name`, read by `handler`.
    pub fn new<H, M, R>(uri: impl Into<String>, name: impl Into<String>, handler: H) -> Self
    where
        H: Handler<M, R>,
        R: IntoReadResult + Send + 'static,
    {
        Self {
            resource: Resource::new(uri, name),
            handler: Some(Box::new(move |mime| erase_resource(handler, mime))),
            erased: None,
        }
    }

    /// A description.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.resource.description = Some(description.into());
        self
    }

    /// The MIME type (also given to text the handler returns).
    #[must_use]
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.resource.mime_type = Some(mime_type.into());
        self
    }

    /// A display title.
    #[must_use]
    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.resource.title = Some(title.into());
        self
    }

    pub(crate) fn finish(mut self) -> Self {
        if let Some(make) = self.handler.take() {
            self.erased = Some(make(self.resource.mime_type.clone()));
        }
        self
    }
}

/// A family of resources under an RFC 6570 URI template, for
/// [`crate::ServerBuilder::resource_template`]. The handler's
/// [`crate::Args`] are the template's variables.
pub struct ResourceTemplateDef {
    pub(crate) template: ResourceTemplate,
    handler: Option<MakeHandler>,
    pub(crate) erased: Option<Erased<Vec<ResourceContents>>>,
    pub(crate) matcher: Option<UriTemplate>,
}

impl std::fmt::Debug for ResourceTemplateDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResourceTemplateDef")
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

impl ResourceTemplateDef {
    /// Resources matching `uri_template` (`{var}` and `{+var}`), read by
    /// `handler`.
    pub fn new<H, M, R>(
        uri_template: impl Into<String>,
        name: impl Into<String>,
        handler: H,
    ) -> Self
    where
        H: Handler<M, R>,
        R: IntoReadResult + Send + 'static,
    {
        Self {
            template: ResourceTemplate {
                uri_template: uri_template.into(),
                name: name.into(),
                title: None,
                description: None,
                mime_type: None,
                annotations: None,
                icons: None,
                meta: None,
            },
            handler: Some(Box::new(move |mime| erase_resource(handler, mime))),
            erased: None,
            matcher: None,
        }
    }

    /// A description.
    #[must_use]
    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.template.description = Some(description.into());
        self
    }

    /// The MIME type of every matching resource.
    #[must_use]
    pub fn mime_type(mut self, mime_type: impl Into<String>) -> Self {
        self.template.mime_type = Some(mime_type.into());
        self
    }

    pub(crate) fn finish(mut self) -> Result<Self, BuildError> {
        let matcher = UriTemplate::parse(&self.template.uri_template).map_err(|e| {
            BuildError(format!(
                "resource template {}: {e}",
                self.template.uri_template
            ))
        })?;
        self.matcher = Some(matcher);
        if let Some(make) = self.handler.take() {
            self.erased = Some(make(self.template.mime_type.clone()));
        }
        Ok(self)
    }
}

impl Server {
    pub(crate) async fn read_resource(
        &self,
        id: &RequestId,
        params: ReadResourceRequestParams,
        call: CallContext,
    ) -> Result<crate::server::Json, ErrorObject> {
        let inner = &self.inner;
        let registry = self.registry();
        let (handler, variables) = if let Some(def) = registry.resources.get(&params.uri) {
            (def.erased.clone(), JsonObject::new())
        } else if let Some((def, vars)) = registry.templates.iter().find_map(|t| {
            t.matcher
                .as_ref()
                .and_then(|m| m.matches(&params.uri))
                .map(|vars| (t, vars))
        }) {
            (
                def.erased.clone(),
                vars.into_iter()
                    .map(|(k, v)| (k, Value::String(v)))
                    .collect(),
            )
        } else {
            (None, JsonObject::new())
        };
        let Some(handler) = handler else {
            // A resource that does not exist is -32602, never empty contents.
            return Err(ErrorObject::invalid_params("Resource not found")
                .with_data(serde_json::json!({ "uri": params.uri })));
        };
        let origin = Origin {
            method: method::RESOURCES_READ,
            target: &params.uri,
            arguments: None,
            principal: &call.principal,
        };
        let resumed = inner.engine.resume(
            origin,
            params.request_state.as_deref(),
            params.input_responses.as_ref(),
            false,
        )?;
        let ctx = self.leg_ctx(id, params.meta, &call, resumed.leg);
        let parts = CallParts {
            ctx: ctx.clone(),
            arguments: std::sync::Arc::new(Value::Object(variables)),
            uri: Some(params.uri.clone()),
        };
        match drive(&ctx, handler(parts)).await {
            Driven::Done(Ok(contents)) => {
                let result = ReadResourceResult {
                    contents,
                    ttl_ms: Some(inner.config.read_cache.ttl_ms),
                    cache_scope: Some(inner.config.read_cache.scope),
                    meta: Some(self.result_meta()),
                    ..ReadResourceResult::default()
                };
                Ok(crate::server::to_json(&result))
            }
            Driven::Done(Err(e)) => Err(e.error_object().unwrap_or_else(|| {
                ErrorObject::invalid_params(e.to_string())
                    .with_data(serde_json::json!({ "uri": params.uri }))
            })),
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
