//! Elicitation (`elicitation/create`): a question for the user, in form mode
//! (a flat schema of primitive fields) or URL mode (an out-of-band page).
//!
//! Elicitation is not deprecated. `elicitation: {}` in the client's
//! capabilities means form mode only; a server never uses an undeclared mode
//! (rule `ask-declared-only`) and never asks for secrets in form mode (spec:
//! Elicitation › User Interaction Model).

use indexmap::IndexMap;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::json::{JsonObject, string_tag};

string_tag!(
    /// `mode: "form"`.
    FormModeTag = "form"
);
string_tag!(
    /// `mode: "url"`.
    UrlModeTag = "url"
);
string_tag!(
    /// `type: "object"`.
    ObjectTypeTag = "object"
);
string_tag!(
    /// `type: "string"`.
    StringTypeTag = "string"
);
string_tag!(
    /// `type: "boolean"`.
    BooleanTypeTag = "boolean"
);
string_tag!(
    /// `type: "array"`.
    ArrayTypeTag = "array"
);

/// Params of `elicitation/create`, told apart by `mode` (absent means form).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum ElicitRequestParams {
    /// Form mode.
    Form(ElicitRequestFormParams),
    /// URL mode.
    Url(ElicitRequestUrlParams),
}

impl<'de> Deserialize<'de> for ElicitRequestParams {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let mode = match value.get("mode") {
            None => "form",
            Some(serde_json::Value::String(m)) => m.as_str(),
            Some(other) => {
                return Err(D::Error::custom(format_args!(
                    "elicitation mode must be a string, found {other}"
                )));
            }
        };
        match mode {
            "form" => ElicitRequestFormParams::deserialize(value).map(Self::Form),
            "url" => ElicitRequestUrlParams::deserialize(value).map(Self::Url),
            other => {
                return Err(D::Error::custom(format_args!(
                    "unknown elicitation mode \"{other}\""
                )));
            }
        }
        .map_err(D::Error::custom)
    }
}

/// Form-mode params (`ElicitRequestFormParams`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestFormParams {
    /// `"form"`, or absent (which also means form).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<FormModeTag>,
    /// The question shown to the user.
    pub message: String,
    /// The flat schema of the answer.
    pub requested_schema: RequestedSchema,
}

impl ElicitRequestFormParams {
    /// A form question; `mode` is written out.
    pub fn new(message: impl Into<String>, requested_schema: RequestedSchema) -> Self {
        Self {
            mode: Some(FormModeTag),
            message: message.into(),
            requested_schema,
        }
    }
}

/// URL-mode params (`ElicitRequestURLParams`). `accept` means only that the
/// user consented to open the URL; the outcome is learnt on the retry (rule
/// `url-elicitation-consent`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestUrlParams {
    /// Always `"url"`.
    pub mode: UrlModeTag,
    /// Why the user should open the URL.
    pub message: String,
    /// The URL (no credentials, no PII, not pre-authenticated).
    pub url: String,
    /// 2025-11-25 only: correlates the flow with
    /// `notifications/elicitation/complete`. Removed in 2026-07-28, where a
    /// server keeps such ids in its `requestState`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
}

impl ElicitRequestUrlParams {
    /// A URL question.
    pub fn new(message: impl Into<String>, url: impl Into<String>) -> Self {
        Self {
            mode: UrlModeTag,
            message: message.into(),
            url: url.into(),
            elicitation_id: None,
        }
    }
}

/// The schema of a form: one flat object of primitive fields, in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestedSchema {
    /// `$schema`.
    #[serde(rename = "$schema", default, skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
    /// Always `"object"`.
    #[serde(rename = "type")]
    pub kind: ObjectTypeTag,
    /// The fields, in the order they should be shown.
    pub properties: IndexMap<String, PrimitiveSchema>,
    /// The fields that must be answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<Vec<String>>,
}

impl RequestedSchema {
    /// Checks a form answer against this schema: required fields present,
    /// each known field of its type and within its bounds, formats and
    /// options. Fields the schema does not name are left to the caller (a
    /// server ignores them). The reason, naming the field, when it fails.
    pub fn check(&self, content: &IndexMap<String, ElicitValue>) -> Result<(), String> {
        for name in self.required.iter().flatten() {
            if !content.contains_key(name) {
                return Err(format!("required field `{name}` is missing"));
            }
        }
        for (name, value) in content {
            if let Some(field) = self.properties.get(name) {
                field
                    .check(value)
                    .map_err(|e| format!("field `{name}`: {e}"))?;
            }
        }
        Ok(())
    }
}

/// One field of a form (`PrimitiveSchemaDefinition`), told apart by `type`
/// and then by which enum keyword it carries.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum PrimitiveSchema {
    /// Free text.
    String(StringSchema),
    /// A number or an integer.
    Number(NumberSchema),
    /// Yes or no.
    Boolean(BooleanSchema),
    /// One of some strings.
    UntitledSingleSelect(UntitledSingleSelectEnumSchema),
    /// One of some titled options.
    TitledSingleSelect(TitledSingleSelectEnumSchema),
    /// One of some strings with `enumNames` (deprecated form of titled).
    LegacyTitled(LegacyTitledEnumSchema),
    /// Several of some strings.
    UntitledMultiSelect(UntitledMultiSelectEnumSchema),
    /// Several of some titled options.
    TitledMultiSelect(TitledMultiSelectEnumSchema),
}

impl<'de> Deserialize<'de> for PrimitiveSchema {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        let has = |k: &str| value.get(k).is_some();
        let kind = value
            .get("type")
            .and_then(serde_json::Value::as_str)
            .unwrap_or_default();
        let decoded = match kind {
            "string" if has("oneOf") => {
                TitledSingleSelectEnumSchema::deserialize(value).map(Self::TitledSingleSelect)
            }
            "string" if has("enumNames") => {
                LegacyTitledEnumSchema::deserialize(value).map(Self::LegacyTitled)
            }
            "string" if has("enum") => {
                UntitledSingleSelectEnumSchema::deserialize(value).map(Self::UntitledSingleSelect)
            }
            "string" => StringSchema::deserialize(value).map(Self::String),
            "number" | "integer" => NumberSchema::deserialize(value).map(Self::Number),
            "boolean" => BooleanSchema::deserialize(value).map(Self::Boolean),
            "array" if value.get("items").is_some_and(|i| i.get("anyOf").is_some()) => {
                TitledMultiSelectEnumSchema::deserialize(value).map(Self::TitledMultiSelect)
            }
            "array" => {
                UntitledMultiSelectEnumSchema::deserialize(value).map(Self::UntitledMultiSelect)
            }
            _ => {
                return Err(D::Error::custom(format_args!(
                    "a form field must be of type string, number, integer, boolean or array, found {}",
                    value
                        .get("type")
                        .map_or_else(|| "no type".to_owned(), ToString::to_string)
                )));
            }
        };
        decoded.map_err(D::Error::custom)
    }
}

impl PrimitiveSchema {
    /// Checks one answered field against this field's schema.
    pub fn check(&self, value: &ElicitValue) -> Result<(), String> {
        fn one_of<'a>(
            v: &str,
            mut options: impl Iterator<Item = &'a String>,
        ) -> Result<(), String> {
            if options.any(|o| o == v) {
                Ok(())
            } else {
                Err(format!("`{v}` is not an option"))
            }
        }
        fn many<'a, I: Iterator<Item = &'a String>>(
            values: &[String],
            min: Option<u64>,
            max: Option<u64>,
            options: impl Fn() -> I,
        ) -> Result<(), String> {
            let n = values.len() as u64;
            if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                return Err("wrong number of choices".into());
            }
            values.iter().try_for_each(|v| one_of(v, options()))
        }
        match (self, value) {
            (Self::String(s), ElicitValue::String(v)) => {
                let len = v.chars().count() as u64;
                if s.min_length.is_some_and(|m| len < m) || s.max_length.is_some_and(|m| len > m) {
                    return Err("length out of bounds".into());
                }
                match s.format {
                    Some(f) if !f.accepts(v) => Err(match f {
                        StringFormat::Email => "not an e-mail address",
                        StringFormat::Uri => "not a URI",
                        StringFormat::Date => "not a date (YYYY-MM-DD)",
                        StringFormat::DateTime => "not a date-time (RFC 3339)",
                    }
                    .into()),
                    _ => Ok(()),
                }
            }
            (Self::Number(n), ElicitValue::Number(v)) => {
                let x = v.as_f64().ok_or("not a number")?;
                if n.kind == NumberKind::Integer && !(v.is_i64() || v.is_u64()) {
                    return Err("not an integer".into());
                }
                if n.minimum.is_some_and(|m| x < m) || n.maximum.is_some_and(|m| x > m) {
                    return Err("out of range".into());
                }
                Ok(())
            }
            (Self::Boolean(_), ElicitValue::Bool(_)) => Ok(()),
            (Self::UntitledSingleSelect(e), ElicitValue::String(v)) => one_of(v, e.options.iter()),
            (Self::LegacyTitled(e), ElicitValue::String(v)) => one_of(v, e.options.iter()),
            (Self::TitledSingleSelect(e), ElicitValue::String(v)) => {
                one_of(v, e.one_of.iter().map(|o| &o.value))
            }
            (Self::UntitledMultiSelect(e), ElicitValue::Strings(vs)) => {
                many(vs, e.min_items, e.max_items, || e.items.options.iter())
            }
            (Self::TitledMultiSelect(e), ElicitValue::Strings(vs)) => {
                many(vs, e.min_items, e.max_items, || {
                    e.items.any_of.iter().map(|o| &o.value)
                })
            }
            _ => Err("wrong type".into()),
        }
    }
}

/// `format` of a string field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum StringFormat {
    /// An e-mail address.
    #[serde(rename = "email")]
    Email,
    /// A URI.
    #[serde(rename = "uri")]
    Uri,
    /// A date (`YYYY-MM-DD`).
    #[serde(rename = "date")]
    Date,
    /// A date and time (RFC 3339).
    #[serde(rename = "date-time")]
    DateTime,
}

/// A text field (`StringSchema`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StringSchema {
    /// Always `"string"`.
    #[serde(rename = "type")]
    pub kind: StringTypeTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Fewest characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_length: Option<u64>,
    /// Most characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<u64>,
    /// Format.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<StringFormat>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// `type` of a number field.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NumberKind {
    /// Any number.
    #[default]
    Number,
    /// A whole number.
    Integer,
}

/// A number field (`NumberSchema`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NumberSchema {
    /// `"number"` or `"integer"`.
    #[serde(rename = "type")]
    pub kind: NumberKind,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Least value.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::json::compact_opt_f64"
    )]
    pub minimum: Option<f64>,
    /// Greatest value.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::json::compact_opt_f64"
    )]
    pub maximum: Option<f64>,
    /// Default value.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::json::compact_opt_f64"
    )]
    pub default: Option<f64>,
}

/// A yes/no field (`BooleanSchema`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BooleanSchema {
    /// Always `"boolean"`.
    #[serde(rename = "type")]
    pub kind: BooleanTypeTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<bool>,
}

/// A choice among strings (`UntitledSingleSelectEnumSchema`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntitledSingleSelectEnumSchema {
    /// Always `"string"`.
    #[serde(rename = "type")]
    pub kind: StringTypeTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The options.
    #[serde(rename = "enum")]
    pub options: Vec<String>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// An option with a display title: `{const, title}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TitledOption {
    /// The value sent back.
    #[serde(rename = "const")]
    pub value: String,
    /// What the user sees.
    pub title: String,
}

impl TitledOption {
    /// An option.
    pub fn new(value: impl Into<String>, title: impl Into<String>) -> Self {
        Self {
            value: value.into(),
            title: title.into(),
        }
    }
}

/// A choice among titled options (`TitledSingleSelectEnumSchema`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledSingleSelectEnumSchema {
    /// Always `"string"`.
    #[serde(rename = "type")]
    pub kind: StringTypeTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The options.
    pub one_of: Vec<TitledOption>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// A choice among strings named by `enumNames` (`LegacyTitledEnumSchema`;
/// deprecated in favour of [`TitledSingleSelectEnumSchema`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LegacyTitledEnumSchema {
    /// Always `"string"`.
    #[serde(rename = "type")]
    pub kind: StringTypeTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The options.
    #[serde(rename = "enum")]
    pub options: Vec<String>,
    /// Display names, one per option.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enum_names: Option<Vec<String>>,
    /// Default value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
}

/// `items` of an untitled multi-select.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UntitledItems {
    /// Always `"string"`.
    #[serde(rename = "type")]
    pub kind: StringTypeTag,
    /// The options.
    #[serde(rename = "enum")]
    pub options: Vec<String>,
}

/// `items` of a titled multi-select.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledItems {
    /// The options.
    pub any_of: Vec<TitledOption>,
}

/// Several of some strings (`UntitledMultiSelectEnumSchema`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UntitledMultiSelectEnumSchema {
    /// Always `"array"`.
    #[serde(rename = "type")]
    pub kind: ArrayTypeTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Fewest choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Most choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The options.
    pub items: UntitledItems,
    /// Default choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
}

/// Several of some titled options (`TitledMultiSelectEnumSchema`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TitledMultiSelectEnumSchema {
    /// Always `"array"`.
    #[serde(rename = "type")]
    pub kind: ArrayTypeTag,
    /// Label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Help text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Fewest choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_items: Option<u64>,
    /// Most choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_items: Option<u64>,
    /// The options.
    pub items: TitledItems,
    /// Default choices.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Vec<String>>,
}

/// What the user did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted the form, or consented to open the URL.
    Accept,
    /// Explicitly refused.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// One answered field: a string, a number, a boolean or a list of strings.
#[derive(Debug, Clone, PartialEq)]
pub enum ElicitValue {
    /// A string.
    String(String),
    /// A number, exactly as sent.
    Number(serde_json::Number),
    /// A boolean.
    Bool(bool),
    /// Several strings (multi-select).
    Strings(Vec<String>),
}

impl Serialize for ElicitValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::String(v) => s.serialize_str(v),
            Self::Number(n) => n.serialize(s),
            Self::Bool(b) => s.serialize_bool(*b),
            Self::Strings(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for ElicitValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match serde_json::Value::deserialize(d)? {
            serde_json::Value::String(v) => Ok(Self::String(v)),
            serde_json::Value::Number(n) => Ok(Self::Number(n)),
            serde_json::Value::Bool(b) => Ok(Self::Bool(b)),
            serde_json::Value::Array(items) => items
                .into_iter()
                .map(|i| match i {
                    serde_json::Value::String(s) => Ok(s),
                    other => Err(D::Error::custom(format_args!(
                        "a multi-select answer holds strings only, found {other}"
                    ))),
                })
                .collect::<Result<_, _>>()
                .map(Self::Strings),
            other => Err(D::Error::custom(format_args!(
                "an elicitation answer is a string, number, boolean or list of strings, found {other}"
            ))),
        }
    }
}

impl From<&str> for ElicitValue {
    fn from(v: &str) -> Self {
        Self::String(v.to_owned())
    }
}

impl From<String> for ElicitValue {
    fn from(v: String) -> Self {
        Self::String(v)
    }
}

impl From<bool> for ElicitValue {
    fn from(v: bool) -> Self {
        Self::Bool(v)
    }
}

impl From<i64> for ElicitValue {
    fn from(v: i64) -> Self {
        Self::Number(v.into())
    }
}

/// The answer to an elicitation (`ElicitResult`; no `resultType`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// What the user did.
    pub action: ElicitAction,
    /// The form's answers; only for a form `accept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<IndexMap<String, ElicitValue>>,
}

impl ElicitResult {
    /// A form accepted with these answers.
    pub fn accept(content: IndexMap<String, ElicitValue>) -> Self {
        Self {
            action: ElicitAction::Accept,
            content: Some(content),
        }
    }

    /// A URL-mode consent (no content).
    pub fn consent() -> Self {
        Self {
            action: ElicitAction::Accept,
            content: None,
        }
    }

    /// An explicit refusal.
    pub fn decline() -> Self {
        Self {
            action: ElicitAction::Decline,
            content: None,
        }
    }

    /// A dismissal.
    pub fn cancel() -> Self {
        Self {
            action: ElicitAction::Cancel,
            content: None,
        }
    }

    /// The answers as one JSON object (empty when there are none).
    pub fn content_object(&self) -> JsonObject {
        self.content
            .iter()
            .flatten()
            .map(|(k, v)| (k.clone(), serde_json::to_value(v).unwrap_or_default()))
            .collect()
    }
}
