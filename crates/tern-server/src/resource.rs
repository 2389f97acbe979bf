//! Resources: registration ([`ResourceDef`], [`ResourceTemplateDef`]),
//! `resources/list`, `resources/templates/list` and `resources/read`.

use std::sync::Arc;

use serde_json::Value;
use tern_protocol::content::ResourceContents;
use tern_protocol::error::ErrorObject;
use tern_protocol::meta::ResultMeta;
use tern_protocol::resource::{
    ReadResourceRequestParams, ReadResourceResult, Resource, ResourceTemplate,
};
use tern_protocol::{JsonObject, RequestId, method};

use crate::cache::CacheHints;
use crate::call::CallContext;
use crate::engine::Engine;
use crate::engine::runner::{LegPolicy, LegRequest, Origin};
use crate::engine::strategy::Strategy;
use crate::error::BuildError;
use crate::handler::{CallParts, Erased, Handler, IntoReadResult, erase_resource};
use crate::json::{Json, to_json};
use crate::template::UriTemplate;

/// Makes the erased handler once the MIME type is final.
type MakeHandler = Box<dyn FnOnce(Option<String>) -> Erased<Vec<ResourceContents>> + Send + Sync>;

/// A resource at a fixed URI and its handler, for
/// [`crate::ServerBuilder::resource`].
pub struct ResourceDef {
    pub(crate) resource: Resource,
    handler: Option<MakeHandler>,
    pub(crate) erased: Option<Erased<Vec<ResourceContents>>>,
    pub(crate) policy: LegPolicy,
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
            policy: LegPolicy::default(),
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

    /// Icons a client may show for it (sizes and themes as the schema's
    /// `Icon` says; dropped for 2025 clients older than 2025-11-25).
    #[must_use]
    pub fn icons(mut self, icons: Vec<tern_protocol::Icon>) -> Self {
        self.resource.icons = Some(icons);
        self
    }

    /// Its `_meta` (the schema's `_meta` on the definition: any members a
    /// client or a gateway reads, kept as given; the `io.modelcontextprotocol/`
    /// prefix is the spec's own).
    #[must_use]
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.resource.meta = Some(meta);
        self
    }

    crate::engine::runner::policy_builders!();

    pub(crate) fn finish(mut self) -> Result<Self, BuildError> {
        self.policy
            .check(&format!("resource {}", self.resource.uri))?;
        if let Some(make) = self.handler.take() {
            self.erased = Some(make(self.resource.mime_type.clone()));
        }
        Ok(self)
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
    pub(crate) policy: LegPolicy,
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
            policy: LegPolicy::default(),
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

    /// Icons a client may show for it (sizes and themes as the schema's
    /// `Icon` says; dropped for 2025 clients older than 2025-11-25).
    #[must_use]
    pub fn icons(mut self, icons: Vec<tern_protocol::Icon>) -> Self {
        self.template.icons = Some(icons);
        self
    }

    /// Its `_meta` (the schema's `_meta` on the definition: any members a
    /// client or a gateway reads, kept as given; the `io.modelcontextprotocol/`
    /// prefix is the spec's own).
    #[must_use]
    pub fn meta(mut self, meta: JsonObject) -> Self {
        self.template.meta = Some(meta);
        self
    }

    crate::engine::runner::policy_builders!();

    pub(crate) fn finish(mut self) -> Result<Self, BuildError> {
        self.policy
            .check(&format!("resource template {}", self.template.uri_template))?;
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

/// What serves one URI: the handler, its policy, and the template's
/// variables (none for a listed resource).
pub(crate) type Found = (Erased<Vec<ResourceContents>>, LegPolicy, JsonObject);

/// `resources/read` of `found`, what the dispatcher found for the URI
/// (`None`: nothing serves it).
pub(crate) async fn read(
    engine: &Arc<Engine>,
    found: Option<Found>,
    id: RequestId,
    params: ReadResourceRequestParams,
    call: CallContext,
    strategy: Strategy,
    cache: CacheHints,
) -> Result<Json, ErrorObject> {
    let Some((handler, policy, variables)) = found else {
        // A resource that does not exist is -32602, never empty contents.
        return Err(ErrorObject::invalid_params("Resource not found")
            .with_data(serde_json::json!({ "uri": params.uri })));
    };
    let uri = params.uri;
    let request = LegRequest {
        origin: Origin {
            method: method::RESOURCES_READ,
            target: uri.clone(),
            arguments: None,
            principal: call.principal.clone(),
        },
        request_state: params.request_state,
        responses: params.input_responses,
        policy,
        id,
        meta: Arc::new(params.meta),
        call,
    };
    let handler_uri = uri.clone();
    engine
        .run(
            request,
            Box::new(move |ctx| {
                handler(CallParts {
                    ctx,
                    arguments: Arc::new(Value::Object(variables)),
                    uri: Some(handler_uri),
                })
            }),
            Box::new(move |engine, out| match out {
                Ok(contents) => Ok(to_json(&ReadResourceResult {
                    contents,
                    ttl_ms: Some(cache.ttl_ms),
                    cache_scope: Some(cache.scope),
                    meta: Some(ResultMeta::with_server_info(engine.info.clone())),
                    ..ReadResourceResult::default()
                })),
                Err(e) => Err(e.error_object().unwrap_or_else(|| {
                    ErrorObject::invalid_params(tern_protocol::error::tidy(&e.to_string()))
                        .with_data(serde_json::json!({ "uri": crate::error::short(&uri) }))
                })),
            }),
            strategy,
        )
        .await
}
