//! Elicitation forms derived from Rust types.
//!
//! A form is a flat object of primitive fields (spec: Elicitation › Requested
//! Schema): strings (with the formats `email`, `uri`, `date`, `date-time`),
//! numbers, integers, booleans, and single- or multi-select enums.
//! [`form_schema`] turns a type's `schemars` schema into that subset or says
//! which field does not fit, so a nested type is caught when the form is
//! registered ([`crate::ToolDef::elicits`]), not when a user is waiting.

use std::any::TypeId;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use indexmap::IndexMap;
use schemars::JsonSchema;
use serde_json::Value;
use tern_protocol::elicitation::{
    BooleanSchema, LegacyTitledEnumSchema, NumberKind, NumberSchema, PrimitiveSchema,
    RequestedSchema, StringFormat, StringSchema, TitledItems, TitledMultiSelectEnumSchema,
    TitledOption, TitledSingleSelectEnumSchema, UntitledItems, UntitledMultiSelectEnumSchema,
    UntitledSingleSelectEnumSchema,
};

/// Why a type cannot be an elicitation form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FormError {
    /// The Rust type.
    pub type_name: &'static str,
    /// What does not fit.
    pub reason: String,
}

impl std::fmt::Display for FormError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cannot be an elicitation form: {}",
            self.type_name, self.reason
        )
    }
}

impl std::error::Error for FormError {}

/// The flat elicitation schema of `T`, computed once per type.
pub fn form_schema<T: JsonSchema + 'static>() -> Result<Arc<RequestedSchema>, FormError> {
    type Cache = Mutex<HashMap<TypeId, Result<Arc<RequestedSchema>, FormError>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(Default::default);
    if let Some(found) = cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&TypeId::of::<T>())
    {
        return found.clone();
    }
    let schema = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| s.inline_subschemas = true)
        .into_generator()
        .into_root_schema_for::<T>();
    let result = flatten(schema.as_value())
        .map(Arc::new)
        .map_err(|reason| FormError {
            type_name: std::any::type_name::<T>(),
            reason,
        });
    cache
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(TypeId::of::<T>(), result.clone());
    result
}

/// Converts a JSON Schema into the flat elicitation subset.
pub fn flatten(schema: &Value) -> Result<RequestedSchema, String> {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("the form must be an object with named fields".into());
    }
    let mut properties = IndexMap::new();
    if let Some(props) = schema.get("properties") {
        let props = props.as_object().ok_or("properties must be an object")?;
        for (name, field) in props {
            let field = primitive(field).map_err(|e| format!("field `{name}`: {e}"))?;
            properties.insert(name.clone(), field);
        }
    }
    let required = match schema.get("required") {
        None => None,
        Some(Value::Array(names)) => Some(
            names
                .iter()
                .map(|n| {
                    n.as_str()
                        .map(str::to_owned)
                        .ok_or("required must list field names")
                })
                .collect::<Result<Vec<_>, _>>()?,
        ),
        Some(_) => return Err("required must be an array".into()),
    };
    // A required name that is no field could never be answered: every
    // answer would be refused (found by tests/it/fuzz.rs).
    if let Some(missing) = required
        .iter()
        .flatten()
        .find(|name| !properties.contains_key(name.as_str()))
    {
        return Err(format!(
            "required field `{missing}` is not among the properties"
        ));
    }
    Ok(RequestedSchema {
        properties,
        required,
        ..RequestedSchema::default()
    })
}

/// `T` or `T | null` (an `Option<T>` field): the non-null part.
fn non_null(field: &Value) -> Value {
    let mut field = field.clone();
    if let Some(Value::Array(types)) = field.get("type") {
        let rest: Vec<&Value> = types
            .iter()
            .filter(|t| t.as_str() != Some("null"))
            .collect();
        if rest.len() == 1 {
            let only = rest[0].clone();
            field["type"] = only;
        }
    }
    for union in ["anyOf", "oneOf"] {
        if let Some(Value::Array(options)) = field.get(union) {
            let rest: Vec<&Value> = options
                .iter()
                .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if rest.len() == 1 && rest.len() < options.len() {
                let mut inner = rest[0].clone();
                if let (Some(obj), Some(outer)) = (inner.as_object_mut(), field.as_object()) {
                    for k in ["title", "description", "default"] {
                        if let Some(v) = outer.get(k) {
                            obj.entry(k).or_insert_with(|| v.clone());
                        }
                    }
                }
                return inner;
            }
        }
    }
    field
}

fn text(field: &Value, key: &str) -> Option<String> {
    field.get(key).and_then(Value::as_str).map(str::to_owned)
}

fn uint(field: &Value, key: &str) -> Option<u64> {
    field.get(key).and_then(Value::as_u64)
}

/// Titled options `[{const, title}]`, from `oneOf`/`anyOf` of constants; the
/// title falls back to the description, then the value.
fn titled_options(options: &Value) -> Option<Vec<TitledOption>> {
    options
        .as_array()?
        .iter()
        .map(|o| {
            let value = o.get("const").and_then(Value::as_str).or_else(|| {
                o.get("enum")
                    .and_then(Value::as_array)
                    .filter(|e| e.len() == 1)
                    .and_then(|e| e[0].as_str())
            })?;
            let title = text(o, "title")
                .or_else(|| text(o, "description"))
                .unwrap_or_else(|| value.to_owned());
            Some(TitledOption::new(value, title))
        })
        .collect()
}

fn strings(list: &Value) -> Option<Vec<String>> {
    list.as_array()?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect()
}

#[allow(
    clippy::too_many_lines,
    reason = "one arm per field kind of the elicitation subset"
)]
fn primitive(field: &Value) -> Result<PrimitiveSchema, String> {
    let field = non_null(field);
    let title = text(&field, "title");
    let description = text(&field, "description");
    if field.get("$ref").is_some() {
        return Err("references are not allowed in a form".into());
    }
    if let Some(options) = field.get("oneOf").or_else(|| field.get("anyOf")) {
        let one_of =
            titled_options(options).ok_or("a union must be a choice of string constants")?;
        return Ok(PrimitiveSchema::TitledSingleSelect(
            TitledSingleSelectEnumSchema {
                title,
                description,
                one_of,
                default: text(&field, "default"),
                ..Default::default()
            },
        ));
    }
    let kind = field
        .get("type")
        .and_then(Value::as_str)
        .ok_or("a field needs a single type")?;
    Ok(match kind {
        "string" => {
            if let Some(options) = field.get("enum") {
                let options = strings(options).ok_or("enum values must be strings")?;
                if let Some(names) = field.get("enumNames") {
                    PrimitiveSchema::LegacyTitled(LegacyTitledEnumSchema {
                        title,
                        description,
                        options,
                        enum_names: strings(names),
                        default: text(&field, "default"),
                        ..Default::default()
                    })
                } else {
                    PrimitiveSchema::UntitledSingleSelect(UntitledSingleSelectEnumSchema {
                        title,
                        description,
                        options,
                        default: text(&field, "default"),
                        ..Default::default()
                    })
                }
            } else {
                let format = match field.get("format").and_then(Value::as_str) {
                    None => None,
                    Some("email") => Some(StringFormat::Email),
                    Some("uri") => Some(StringFormat::Uri),
                    Some("date") => Some(StringFormat::Date),
                    Some("date-time") => Some(StringFormat::DateTime),
                    Some(other) => {
                        return Err(format!(
                            "string format `{other}` is not one elicitation allows"
                        ));
                    }
                };
                PrimitiveSchema::String(StringSchema {
                    title,
                    description,
                    min_length: uint(&field, "minLength"),
                    max_length: uint(&field, "maxLength"),
                    format,
                    default: text(&field, "default"),
                    ..Default::default()
                })
            }
        }
        "number" | "integer" => PrimitiveSchema::Number(NumberSchema {
            kind: if kind == "integer" {
                NumberKind::Integer
            } else {
                NumberKind::Number
            },
            title,
            description,
            minimum: field.get("minimum").and_then(Value::as_f64),
            maximum: field.get("maximum").and_then(Value::as_f64),
            default: field.get("default").and_then(Value::as_f64),
        }),
        "boolean" => PrimitiveSchema::Boolean(BooleanSchema {
            title,
            description,
            default: field.get("default").and_then(Value::as_bool),
            ..Default::default()
        }),
        "array" => {
            let items = non_null(field.get("items").ok_or("an array needs items")?);
            let default = field.get("default").and_then(strings);
            let (min_items, max_items) = (uint(&field, "minItems"), uint(&field, "maxItems"));
            if let Some(options) = items.get("anyOf").or_else(|| items.get("oneOf")) {
                let any_of =
                    titled_options(options).ok_or("a multi-select must offer string constants")?;
                PrimitiveSchema::TitledMultiSelect(TitledMultiSelectEnumSchema {
                    title,
                    description,
                    min_items,
                    max_items,
                    items: TitledItems { any_of },
                    default,
                    ..Default::default()
                })
            } else if let Some(options) = items.get("enum").and_then(strings) {
                PrimitiveSchema::UntitledMultiSelect(UntitledMultiSelectEnumSchema {
                    title,
                    description,
                    min_items,
                    max_items,
                    items: UntitledItems {
                        options,
                        ..Default::default()
                    },
                    default,
                    ..Default::default()
                })
            } else {
                return Err("an array must be a multi-select of string options".into());
            }
        }
        "object" => return Err("nested objects are not allowed in a form".into()),
        other => return Err(format!("type `{other}` is not allowed in a form")),
    })
}

#[cfg(test)]
mod tests {
    use schemars::JsonSchema;
    use serde_json::json;

    use super::*;

    /// Which region.
    #[derive(JsonSchema)]
    #[allow(dead_code, reason = "only the schema is used")]
    enum Region {
        /// Ireland
        #[schemars(rename = "eu-west-1")]
        EuWest1,
        /// Virginia
        #[schemars(rename = "us-east-1")]
        UsEast1,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code, reason = "only the schema is used")]
    struct Booking {
        /// Party size
        #[schemars(range(min = 1, max = 12))]
        party: u8,
        region: Region,
        #[schemars(email)]
        contact: Option<String>,
        vegetarian: bool,
        #[schemars(length(min = 1, max = 3))]
        tags: Vec<Tag>,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code, reason = "only the schema is used")]
    enum Tag {
        Window,
        Quiet,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code, reason = "only the schema is used")]
    struct Nested {
        address: Address,
    }

    #[derive(JsonSchema)]
    #[allow(dead_code, reason = "only the schema is used")]
    struct Address {
        city: String,
    }

    #[test]
    fn derives_a_flat_schema_from_a_rust_type() {
        let schema = form_schema::<Booking>().unwrap();
        let value = serde_json::to_value(&*schema).unwrap();
        assert_eq!(value["type"], "object");
        assert_eq!(value["properties"]["party"]["type"], "integer");
        assert_eq!(value["properties"]["party"]["minimum"], 1);
        assert_eq!(value["properties"]["party"]["description"], "Party size");
        assert_eq!(
            value["properties"]["region"]["oneOf"][0],
            json!({"const": "eu-west-1", "title": "Ireland"})
        );
        assert_eq!(value["properties"]["contact"]["format"], "email");
        assert_eq!(value["properties"]["vegetarian"]["type"], "boolean");
        assert_eq!(
            value["properties"]["tags"]["items"]["enum"],
            json!(["Window", "Quiet"])
        );
        assert_eq!(value["properties"]["tags"]["maxItems"], 3);
        let required: Vec<&str> = schema
            .required
            .iter()
            .flatten()
            .map(String::as_str)
            .collect();
        assert!(
            required.contains(&"party") && !required.contains(&"contact"),
            "{required:?}"
        );
    }

    #[test]
    fn a_nested_type_is_refused_with_the_field_named() {
        let err = form_schema::<Nested>().unwrap_err();
        assert!(err.reason.contains("field `address`"), "{err}");
        assert!(err.to_string().contains("Nested"));
    }

    #[test]
    fn content_is_checked_against_the_schema() {
        let schema = form_schema::<Booking>().unwrap();
        let answer = |v: Value| {
            serde_json::from_value::<IndexMap<String, tern_protocol::elicitation::ElicitValue>>(v)
                .unwrap()
        };
        let good =
            json!({"party": 4, "region": "eu-west-1", "vegetarian": false, "tags": ["Quiet"]});
        assert_eq!(schema.check(&answer(good.clone())), Ok(()));
        let cases = [
            (
                json!({"party": 4, "region": "eu-west-1", "tags": ["Quiet"]}),
                "vegetarian",
            ),
            (
                json!({"party": 40, "region": "eu-west-1", "vegetarian": false, "tags": ["Quiet"]}),
                "out of range",
            ),
            (
                json!({"party": 2.5, "region": "eu-west-1", "vegetarian": false, "tags": ["Quiet"]}),
                "not an integer",
            ),
            (
                json!({"party": 4, "region": "mars", "vegetarian": false, "tags": ["Quiet"]}),
                "not an option",
            ),
            (
                json!({"party": 4, "region": "eu-west-1", "vegetarian": "no", "tags": ["Quiet"]}),
                "wrong type",
            ),
            (
                json!({"party": 4, "region": "eu-west-1", "vegetarian": false, "tags": []}),
                "number of choices",
            ),
            (
                json!({"party": 4, "region": "eu-west-1", "vegetarian": false, "tags": ["Quiet"], "contact": "nobody"}),
                "e-mail",
            ),
        ];
        for (content, want) in cases {
            let err = schema.check(&answer(content.clone())).unwrap_err();
            assert!(err.contains(want), "{content}: {err}");
        }
    }
}
