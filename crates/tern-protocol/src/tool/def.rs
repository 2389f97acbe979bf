//! [`Tool`], the description of one tool: below sampling (a model may be
//! offered tools) and the tool methods alike.

use serde::{Deserialize, Serialize};

use crate::capabilities::Icon;
use crate::json::JsonObject;

/// A tool the client can call (`Tool`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Name, `[A-Za-z0-9_.-]{1,128}` by convention.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for people and models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments; an object schema (`"type": "object"`)
    /// using any 2020-12 keywords, every keyword kept.
    #[serde(deserialize_with = "object_schema")]
    pub input_schema: JsonObject,
    /// JSON Schema that `structuredContent` conforms to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Behaviour hints (untrusted unless the server is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Reads an `inputSchema`, which must be an object schema (`type: "object"`).
fn object_schema<'de, D: serde::Deserializer<'de>>(d: D) -> Result<JsonObject, D::Error> {
    let schema = JsonObject::deserialize(d)?;
    match schema.get("type") {
        Some(serde_json::Value::String(t)) if t == "object" => Ok(schema),
        Some(other) => Err(serde::de::Error::custom(format_args!(
            "inputSchema type must be \"object\", found {other}"
        ))),
        None => Err(serde::de::Error::custom(
            "inputSchema must have \"type\": \"object\"",
        )),
    }
}

impl Tool {
    /// The schema of a tool that takes no arguments (spec: Tools › Schema
    /// Examples, "Tool with no parameters").
    pub fn no_arguments_schema() -> JsonObject {
        let mut schema = JsonObject::new();
        schema.insert("type".into(), "object".into());
        schema.insert("additionalProperties".into(), false.into());
        schema
    }

    /// A tool with a name and an input schema.
    pub fn new(name: impl Into<String>, input_schema: JsonObject) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            icons: None,
            annotations: None,
            meta: None,
        }
    }

    /// Sets the description.
    #[must_use]
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }
}

/// Hints about a tool's behaviour (`ToolAnnotations`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not change its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may destroy things.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Calling it twice with the same arguments does nothing more.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool reaches an open world of entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}
