//! Capabilities (with `extensions`), and the `Implementation` and `Icon` that
//! describe a client or server.

use serde::{Deserialize, Serialize};

use crate::json::JsonObject;

/// What a client can do, declared on each request (spec: Architecture ›
/// Capability Negotiation).
///
/// Not a closed set: unknown members are kept in `extra`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCapabilities {
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// Listing roots (deprecated, SEP-2577).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<JsonObject>,
    /// Sampling from an LLM (deprecated, SEP-2577).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<SamplingCapability>,
    /// Elicitation. `{}` means form mode only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationCapability>,
    /// Extensions, keyed by extension id (`"io.modelcontextprotocol/tasks"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<JsonObject>,
    /// Every other member, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `ClientCapabilities.sampling`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SamplingCapability {
    /// `includeContext` values other than `none` are supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<JsonObject>,
    /// `tools` and `toolChoice` are supported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<JsonObject>,
    /// Every other member, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `ClientCapabilities.elicitation`. With neither mode named, form mode only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ElicitationCapability {
    /// Form mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub form: Option<JsonObject>,
    /// URL mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<JsonObject>,
    /// Every other member, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ClientCapabilities {
    /// Form-mode elicitation is declared (`elicitation: {}` counts, rule
    /// `ask-declared-only`).
    pub fn elicitation_form(&self) -> bool {
        self.elicitation
            .as_ref()
            .is_some_and(|e| e.form.is_some() || e.url.is_none())
    }

    /// URL-mode elicitation is declared.
    pub fn elicitation_url(&self) -> bool {
        self.elicitation.as_ref().is_some_and(|e| e.url.is_some())
    }

    /// Sampling is declared.
    pub fn sampling(&self) -> bool {
        self.sampling.is_some()
    }

    /// Sampling with `tools` / `toolChoice` is declared.
    pub fn sampling_tools(&self) -> bool {
        self.sampling.as_ref().is_some_and(|s| s.tools.is_some())
    }

    /// Sampling with `includeContext` other than `none` is declared.
    pub fn sampling_context(&self) -> bool {
        self.sampling.as_ref().is_some_and(|s| s.context.is_some())
    }

    /// Roots are declared.
    pub fn roots(&self) -> bool {
        self.roots.is_some()
    }

    /// The extension `id` is declared.
    pub fn extension(&self, id: &str) -> bool {
        self.extensions.as_ref().is_some_and(|e| e.contains_key(id))
    }

    /// Declares form-mode elicitation.
    #[must_use]
    pub fn with_elicitation_form(mut self) -> Self {
        self.elicitation.get_or_insert_with(Default::default).form = Some(JsonObject::new());
        self
    }

    /// Declares URL-mode elicitation.
    #[must_use]
    pub fn with_elicitation_url(mut self) -> Self {
        self.elicitation.get_or_insert_with(Default::default).url = Some(JsonObject::new());
        self
    }

    /// Declares sampling (deprecated).
    #[must_use]
    pub fn with_sampling(mut self) -> Self {
        self.sampling.get_or_insert_with(Default::default);
        self
    }

    /// Declares roots (deprecated).
    #[must_use]
    pub fn with_roots(mut self) -> Self {
        self.roots.get_or_insert_with(JsonObject::new);
        self
    }

    /// Declares the extension `id` with no settings.
    #[must_use]
    pub fn with_extension(mut self, id: impl Into<String>) -> Self {
        self.extensions
            .get_or_insert_with(JsonObject::new)
            .insert(id.into(), serde_json::Value::Object(JsonObject::new()));
        self
    }
}

/// What a server offers, in `server/discover` (spec: Discovery).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCapabilities {
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<JsonObject>,
    /// Log messages (deprecated, SEP-2577).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<JsonObject>,
    /// Argument completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<JsonObject>,
    /// Prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListChangedCapability>,
    /// Resources.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// Tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListChangedCapability>,
    /// Extensions, keyed by extension id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extensions: Option<JsonObject>,
    /// Every other member, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl ServerCapabilities {
    /// The extension `id` is advertised.
    pub fn extension(&self, id: &str) -> bool {
        self.extensions.as_ref().is_some_and(|e| e.contains_key(id))
    }
}

/// `prompts` / `tools` server capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListChangedCapability {
    /// `list_changed` notifications are available on `subscriptions/listen`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Every other member, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// `resources` server capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    /// `resources/updated` for subscribed URIs is available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// `resources/list_changed` is available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Every other member, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

/// A client's or server's self-description (`Implementation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version.
    pub version: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// A human-readable description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Home page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub website_url: Option<String>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
}

impl Implementation {
    /// An implementation with a name and a version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            version: version.into(),
            title: None,
            description: None,
            website_url: None,
            icons: None,
        }
    }
}

/// An icon a user interface can show.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// An HTTP(S) URL or a `data:` URI.
    pub src: String,
    /// MIME type override.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes, `WxH` or `any`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// The background the icon is designed for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub theme: Option<IconTheme>,
}

/// `Icon.theme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum IconTheme {
    /// For light backgrounds.
    Light,
    /// For dark backgrounds.
    Dark,
}

/// Something that has a list of icons (`Icons`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Icons {
    /// The icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
}

/// A name with an optional display title (`BaseMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BaseMetadata {
    /// Programmatic name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}
