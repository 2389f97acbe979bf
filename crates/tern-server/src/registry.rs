//! What a server offers, replaced copy-on-write when it changes at run time,
//! and the bus that tells `subscriptions/listen` streams about changes.

use std::collections::HashMap;
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;
use tern_protocol::JsonObject;
use tern_protocol::capabilities::{ListChangedCapability, ResourcesCapability, ServerCapabilities};
use tern_protocol::prompt::Prompt;
use tern_protocol::resource::{Resource, ResourceTemplate};
use tern_protocol::tool::Tool;
use tokio::sync::broadcast;

use crate::completion::CompletionDef;
use crate::error::BuildError;
use crate::prompt::PromptDef;
use crate::resource::{ResourceDef, ResourceTemplateDef};
use crate::tool::ToolDef;

/// The JSON type of an argument mirrored into an `Mcp-Param-*` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderParamType {
    /// A string.
    String,
    /// An integer (within ±(2^53 − 1)).
    Integer,
    /// A boolean.
    Boolean,
}

/// A tool argument annotated `x-mcp-header`: its value travels in the
/// `Mcp-Param-{name}` header too (spec §6.2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// The header name after `Mcp-Param-`, as annotated.
    pub name: String,
    /// The property path from the arguments object.
    pub path: Vec<String>,
    /// The argument's type.
    pub kind: HeaderParamType,
}

/// An RFC 9110 token.
fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn count_annotations(value: &Value) -> usize {
    match value {
        Value::Object(o) => {
            usize::from(o.contains_key("x-mcp-header"))
                + o.values().map(count_annotations).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_annotations).sum(),
        _ => 0,
    }
}

/// The `x-mcp-header` arguments of a tool's `inputSchema`, or why the
/// annotations are invalid (a server must not advertise such a tool).
pub(crate) fn header_params(
    tool: &str,
    schema: &JsonObject,
) -> Result<Vec<HeaderParam>, BuildError> {
    fn walk(
        schema: &JsonObject,
        path: &[String],
        out: &mut Vec<HeaderParam>,
        tool: &str,
    ) -> Result<(), BuildError> {
        let Some(Value::Object(props)) = schema.get("properties") else {
            return Ok(());
        };
        for (name, prop) in props {
            let Value::Object(prop) = prop else { continue };
            let mut here = path.to_vec();
            here.push(name.clone());
            if let Some(header) = prop.get("x-mcp-header") {
                let header = header.as_str().filter(|h| is_token(h)).ok_or_else(|| {
                    BuildError(format!(
                        "tool {tool}: x-mcp-header of `{}` must be a non-empty header token",
                        here.join(".")
                    ))
                })?;
                let kind = match prop.get("type").and_then(Value::as_str) {
                    Some("string") => HeaderParamType::String,
                    Some("integer") => HeaderParamType::Integer,
                    Some("boolean") => HeaderParamType::Boolean,
                    _ => {
                        return Err(BuildError(format!(
                            "tool {tool}: x-mcp-header `{header}` must annotate a string, integer or boolean property"
                        )));
                    }
                };
                if out.iter().any(|p| p.name.eq_ignore_ascii_case(header)) {
                    return Err(BuildError(format!(
                        "tool {tool}: x-mcp-header `{header}` is used twice"
                    )));
                }
                out.push(HeaderParam {
                    name: header.to_owned(),
                    path: here.clone(),
                    kind,
                });
            }
            walk(prop, &here, out, tool)?;
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(schema, &[], &mut out, tool)?;
    if count_annotations(&Value::Object(schema.clone())) != out.len() {
        return Err(BuildError(format!(
            "tool {tool}: x-mcp-header may only annotate properties reached through `properties` alone"
        )));
    }
    Ok(out)
}

pub(crate) struct ToolEntry {
    pub(crate) def: ToolDef,
    pub(crate) validator: jsonschema::Validator,
    pub(crate) header_params: Vec<HeaderParam>,
}

impl ToolEntry {
    pub(crate) fn new(def: ToolDef) -> Result<Self, BuildError> {
        let validator = def.check()?;
        let header_params = header_params(&def.tool.name, &def.tool.input_schema)?;
        Ok(Self {
            def,
            validator,
            header_params,
        })
    }
}

/// Everything registered, as one immutable snapshot.
#[derive(Clone, Default)]
pub(crate) struct Registry {
    pub(crate) tools: IndexMap<String, Arc<ToolEntry>>,
    pub(crate) tool_list: Vec<Tool>,
    pub(crate) prompts: IndexMap<String, Arc<PromptDef>>,
    pub(crate) prompt_list: Vec<Prompt>,
    pub(crate) resources: IndexMap<String, Arc<ResourceDef>>,
    pub(crate) resource_list: Vec<Resource>,
    pub(crate) templates: Vec<Arc<ResourceTemplateDef>>,
    pub(crate) template_list: Vec<ResourceTemplate>,
    pub(crate) completions: HashMap<String, CompletionDef>,
    pub(crate) capabilities: ServerCapabilities,
}

impl Registry {
    /// Recomputes the lists and the capabilities after a change.
    pub(crate) fn refresh(&mut self) {
        self.tool_list = self.tools.values().map(|t| t.def.tool.clone()).collect();
        self.prompt_list = self.prompts.values().map(|p| p.prompt.clone()).collect();
        self.resource_list = self
            .resources
            .values()
            .map(|r| r.resource.clone())
            .collect();
        self.template_list = self.templates.iter().map(|t| t.template.clone()).collect();
        let list_changed = || ListChangedCapability {
            list_changed: Some(true),
            ..ListChangedCapability::default()
        };
        self.capabilities = ServerCapabilities {
            tools: (!self.tools.is_empty()).then(list_changed),
            prompts: (!self.prompts.is_empty()).then(list_changed),
            resources: (!self.resources.is_empty() || !self.templates.is_empty()).then(|| {
                ResourcesCapability {
                    subscribe: Some(true),
                    list_changed: Some(true),
                    ..ResourcesCapability::default()
                }
            }),
            completions: (!self.completions.is_empty()).then(JsonObject::new),
            // Log messages work for requests that set a level (deprecated, SEP-2577).
            logging: Some(JsonObject::new()),
            ..ServerCapabilities::default()
        };
    }
}

/// A change `subscriptions/listen` streams may be told about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// The tool list changed.
    Tools,
    /// The prompt list changed.
    Prompts,
    /// The resource list (or the templates) changed.
    Resources,
    /// The resource at this URI changed.
    ResourceUpdated(String),
}

/// Announces changes to every open subscription of a server. Cheap to clone;
/// take one from [`crate::ServerBuilder::changes`] to use inside handlers.
/// With several replicas, feed it from a shared bus (`tern-redis`).
#[derive(Debug, Clone)]
pub struct Changes(pub(crate) broadcast::Sender<Change>);

impl Default for Changes {
    fn default() -> Self {
        Self(broadcast::channel(256).0)
    }
}

impl Changes {
    /// Announces `change`.
    pub fn announce(&self, change: Change) {
        // No subscriber is not an error.
        let _ = self.0.send(change);
    }

    /// The tool list changed.
    pub fn tools_changed(&self) {
        self.announce(Change::Tools);
    }

    /// The prompt list changed.
    pub fn prompts_changed(&self) {
        self.announce(Change::Prompts);
    }

    /// The resource list changed.
    pub fn resources_changed(&self) {
        self.announce(Change::Resources);
    }

    /// The resource at `uri` changed.
    pub fn resource_updated(&self, uri: impl Into<String>) {
        self.announce(Change::ResourceUpdated(uri.into()));
    }

    /// A receiver of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Change> {
        self.0.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema(v: &Value) -> JsonObject {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn finds_header_params_through_properties_only() {
        let s = schema(&json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}},
        }}));
        let found = header_params("t", &s).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[1].path, ["opts", "dry"]);
        assert_eq!(found[1].kind, HeaderParamType::Boolean);
        for bad in [
            json!({"type": "object", "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "A"}, "b": {"type": "string", "x-mcp-header": "a"}}}),
            json!({"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": "bad header"}}}),
            json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "A"}}}}),
            json!({"type": "object", "oneOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "A"}}}]}),
        ] {
            assert!(header_params("t", &schema(&bad)).is_err(), "{bad}");
        }
    }
}
