//! Preset answers as a person writes them, bound to the questions they
//! answer.
//!
//! Three spellings, from `--answers FILE` (a JSON object of KEY: answer) and
//! `--answer` (repeatable):
//!
//! - `KEY=JSON`: the whole answer, as the server receives it (an
//!   `ElicitResult` such as `{"action":"accept","content":{...}}`, a
//!   sampling reply, …);
//! - `KEY.FIELD=VALUE`: one field of a form, typed by that field's schema
//!   once the question is asked (`n=3` for an integer field is the number
//!   3, `tags=a,b` for a multi-select the list);
//! - `KEY=VALUE`: the same for a form with exactly one field.
//!
//! A 2025 server asks with requests of its own, which carry no key: its
//! questions are keyed `live-1`, `live-2`, … in the order one call asks
//! them, and answered by the terminal handlers (`terminal::LivePresets`).
//!
//! When a round asks a key, its preset answer is built, checked against the
//! question by the client library ([`Presets::check`]) and, if it does not
//! fit, the run stops at once naming the field and what it allows. A key
//! asked again with the same question after its preset was sent means the
//! server did not take the answer: the run stops instead of sending it
//! round after round. Keys never asked are reported at the end.

use std::fmt::Write as _;

use indexmap::IndexMap;
use serde_json::{Value, json};
use tern_client::Presets;
use tern_protocol::elicitation::{
    ElicitRequestFormParams, ElicitRequestParams, NumberKind, PrimitiveSchema, StringFormat,
};
use tern_protocol::{InputRequest, InputResponse, JsonObject};

use crate::form;

/// What the command line preset, before any question is known.
#[derive(Debug, Default, Clone)]
pub(crate) struct PresetSpec {
    /// `KEY=JSON` and the `--answers` file: whole answers.
    whole: IndexMap<String, Value>,
    /// `KEY.FIELD=VALUE` (field named) and `KEY=VALUE` (field `None`).
    fields: IndexMap<String, Vec<(Option<String>, String)>>,
}

/// Whether `text` is a whole answer rather than a field's value: a JSON
/// object.
fn whole_answer(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text)
        .ok()
        .filter(Value::is_object)
}

impl PresetSpec {
    /// Adds the answers of an `--answers` file: a JSON object of KEY: answer.
    pub(crate) fn add_file(&mut self, name: &str, text: &str) -> Result<(), String> {
        match serde_json::from_str(text) {
            Ok(Value::Object(o)) => {
                for (k, v) in o {
                    if !v.is_object() {
                        return Err(format!(
                            "{name}: the answer for `{k}` is not a JSON object (an answer such as {{\"action\":\"accept\",\"content\":{{...}}}})"
                        ));
                    }
                    self.whole.insert(k, v);
                }
                Ok(())
            }
            Ok(_) => Err(format!("{name}: expected a JSON object of KEY: answer")),
            Err(e) => Err(format!("{name}: not JSON: {e}")),
        }
    }

    /// Adds one `--answer` word.
    pub(crate) fn add_word(&mut self, word: &str) -> Result<(), String> {
        let (name, value) = word
            .split_once('=')
            .filter(|(k, _)| !k.is_empty())
            .ok_or_else(|| {
                format!("--answer expects KEY=VALUE, KEY.FIELD=VALUE or KEY=JSON, found {word:?}")
            })?;
        if let Some(answer) = whole_answer(value) {
            self.whole.insert(name.to_owned(), answer);
            return Ok(());
        }
        // `KEY.FIELD`: the last dot splits, so keys may hold dots.
        let (key, field) = match name.rsplit_once('.') {
            Some((k, f)) if !k.is_empty() && !f.is_empty() => (k, Some(f.to_owned())),
            _ => (name, None),
        };
        self.fields
            .entry(key.to_owned())
            .or_default()
            .push((field, value.to_owned()));
        Ok(())
    }

    /// Nothing is preset.
    pub(crate) fn is_empty(&self) -> bool {
        self.whole.is_empty() && self.fields.is_empty()
    }

    /// Every key preset (for `KEY.FIELD` words whose key holds a dot, both
    /// readings), in order.
    pub(crate) fn keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = self.whole.keys().cloned().collect();
        for k in self.fields.keys() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        keys
    }

    /// The preset for `key` is a refusal (`decline` or `cancel`).
    pub(crate) fn refuses(&self, key: &str) -> bool {
        self.whole
            .get(key)
            .and_then(|a| a.get("action"))
            .and_then(Value::as_str)
            .is_some_and(|a| a == "decline" || a == "cancel")
    }

    /// The preset answer to `question` asked under `key`, checked against it
    /// by the client library: `None` when nothing is preset for `key`.
    pub(crate) fn answer(
        &self,
        key: &str,
        question: &InputRequest,
    ) -> Option<Result<InputResponse, String>> {
        let raw = if let Some(whole) = self.whole.get(key) {
            Ok(whole.clone())
        } else if let Some(words) = self.fields.get(key) {
            typed_answer(key, words, question)
        } else if let Some(words) = self.dotted(key) {
            // `--answer a.b=VALUE` where the server asks the key `a.b`.
            typed_answer(key, &[(None, words.to_owned())], question)
        } else {
            return None;
        };
        Some(raw.and_then(|raw| {
            let mut presets = Presets::new();
            presets.insert(key, raw);
            presets
                .check(key, question)
                .map_err(|e| explain(&e.to_string(), question))
        }))
    }

    /// A `KEY.FIELD=VALUE` word read as `KEY` = the dotted key itself.
    fn dotted(&self, key: &str) -> Option<&str> {
        let (k, f) = key.rsplit_once('.')?;
        self.fields
            .get(k)?
            .iter()
            .find(|(field, _)| field.as_deref() == Some(f))
            .map(|(_, v)| v.as_str())
    }
}

/// The error, then what the form allows, field by field.
fn explain(error: &str, question: &InputRequest) -> String {
    match form_of(question) {
        Some(form) => format!("{error}\n{}", describe_fields(form, "  ")),
        None => error.to_owned(),
    }
}

/// The form a question asks, if it is a form.
pub(crate) fn form_of(question: &InputRequest) -> Option<&ElicitRequestFormParams> {
    match question {
        InputRequest::Elicitation(e) => match &e.params {
            ElicitRequestParams::Form(f) => Some(f),
            ElicitRequestParams::Url(_) => None,
        },
        _ => None,
    }
}

/// What a field is: its kind, its allowed values, its default.
pub(crate) struct Facts {
    /// `string`, `integer`, `number`, `boolean`, `one of`, `several of`, with
    /// its format or bounds.
    pub(crate) kind: String,
    /// The values allowed, for a choice.
    pub(crate) options: Vec<String>,
    /// The default, as JSON.
    pub(crate) default: Option<Value>,
    /// A value that fits, for a template.
    pub(crate) example: Value,
}

/// The facts of one field.
pub(crate) fn facts(field: &PrimitiveSchema) -> Facts {
    use PrimitiveSchema as P;
    let bounds = |min: Option<String>, max: Option<String>, unit: &str| match (min, max) {
        (Some(a), Some(b)) => format!(", {a} to {b}{unit}"),
        (Some(a), None) => format!(", at least {a}{unit}"),
        (None, Some(b)) => format!(", at most {b}{unit}"),
        (None, None) => String::new(),
    };
    match field {
        P::String(s) => {
            let format = s.format.map_or(String::new(), |f| {
                format!(
                    " ({})",
                    match f {
                        StringFormat::Email => "email",
                        StringFormat::Uri => "uri",
                        StringFormat::Date => "date, YYYY-MM-DD",
                        StringFormat::DateTime => "date-time, RFC 3339",
                    }
                )
            });
            let example = match s.format {
                Some(StringFormat::Email) => "someone@example.com",
                Some(StringFormat::Uri) => "https://example.com/",
                Some(StringFormat::Date) => "2026-12-24",
                Some(StringFormat::DateTime) => "2026-12-24T19:30:00Z",
                None => "text",
            };
            Facts {
                kind: format!(
                    "string{format}{}",
                    bounds(
                        s.min_length.map(|n| n.to_string()),
                        s.max_length.map(|n| n.to_string()),
                        " characters"
                    )
                ),
                options: Vec::new(),
                default: s.default.clone().map(Value::String),
                example: json!(s.default.clone().unwrap_or_else(|| example.to_owned())),
            }
        }
        P::Number(n) => {
            let integer = n.kind == NumberKind::Integer;
            let example = n.default.or(n.minimum).unwrap_or(1.0);
            Facts {
                kind: format!(
                    "{}{}",
                    if integer { "integer" } else { "number" },
                    bounds(
                        n.minimum.map(|v| v.to_string()),
                        n.maximum.map(|v| v.to_string()),
                        ""
                    )
                ),
                options: Vec::new(),
                default: n.default.map(|d| json!(d)),
                #[allow(
                    clippy::cast_possible_truncation,
                    reason = "an example value, rounded on purpose"
                )]
                example: if integer {
                    json!(example.round() as i64)
                } else {
                    json!(example)
                },
            }
        }
        P::Boolean(b) => Facts {
            kind: "boolean".into(),
            options: vec!["true".into(), "false".into()],
            default: b.default.map(Value::Bool),
            example: json!(b.default.unwrap_or(true)),
        },
        P::UntitledSingleSelect(e) => one_of(e.options.clone(), e.default.clone()),
        P::TitledSingleSelect(e) => one_of(
            e.one_of.iter().map(|o| o.value.clone()).collect(),
            e.default.clone(),
        ),
        P::LegacyTitled(e) => one_of(e.options.clone(), e.default.clone()),
        P::UntitledMultiSelect(e) => several(
            e.items.options.clone(),
            e.default.clone(),
            e.min_items,
            e.max_items,
        ),
        P::TitledMultiSelect(e) => several(
            e.items.any_of.iter().map(|o| o.value.clone()).collect(),
            e.default.clone(),
            e.min_items,
            e.max_items,
        ),
    }
}

fn one_of(options: Vec<String>, default: Option<String>) -> Facts {
    let example = default
        .clone()
        .or_else(|| options.first().cloned())
        .unwrap_or_default();
    Facts {
        kind: "one of".into(),
        options,
        default: default.map(Value::String),
        example: json!(example),
    }
}

fn several(
    options: Vec<String>,
    default: Option<Vec<String>>,
    min: Option<u64>,
    max: Option<u64>,
) -> Facts {
    let bounds = match (min, max) {
        (Some(a), Some(b)) => format!(" ({a} to {b})"),
        (Some(a), None) => format!(" (at least {a})"),
        (None, Some(b)) => format!(" (at most {b})"),
        (None, None) => String::new(),
    };
    let example = default.clone().unwrap_or_else(|| {
        options
            .iter()
            .take(usize::try_from(min.unwrap_or(1).max(1)).unwrap_or(1))
            .cloned()
            .collect()
    });
    Facts {
        kind: format!("several of{bounds}"),
        options,
        default: default.map(|d| json!(d)),
        example: json!(example),
    }
}

/// The fields of `form`, one per line: `FIELD (required): KIND: a, b, c
/// [default: x]`.
pub(crate) fn describe_fields(form: &ElicitRequestFormParams, indent: &str) -> String {
    let schema = &form.requested_schema;
    let required = schema.required.clone().unwrap_or_default();
    let mut out = String::new();
    for (name, field) in &schema.properties {
        let f = facts(field);
        let must = if required.contains(name) {
            " (required)"
        } else {
            ""
        };
        let mut line = format!("{indent}{name}{must}: {}", f.kind);
        if !f.options.is_empty() && !matches!(field, PrimitiveSchema::Boolean(_)) {
            line.push_str(": ");
            line.push_str(&f.options.join(", "));
        }
        if let Some(d) = &f.default {
            let _ = write!(line, " [default: {d}]");
        }
        // Names, options and defaults are the server's: one line each.
        out.push_str(&tern::safe::line(&line));
        out.push('\n');
    }
    out.trim_end().to_owned()
}

/// `KEY.FIELD=VALUE` words as an accepting answer to `question`'s form, each
/// value typed by its field's schema.
fn typed_answer(
    key: &str,
    words: &[(Option<String>, String)],
    question: &InputRequest,
) -> Result<Value, String> {
    let Some(form) = form_of(question) else {
        return Err(format!(
            "`{key}` is not a form ({}): preset it whole, --answer '{key}=JSON'",
            question.kind().method()
        ));
    };
    let props = &form.requested_schema.properties;
    let names: Vec<&str> = props.keys().map(String::as_str).collect();
    let mut content = JsonObject::new();
    for (field, text) in words {
        let name = match field {
            Some(f) => f.clone(),
            None if props.len() == 1 => names[0].to_owned(),
            None => {
                return Err(format!(
                    "the form `{key}` has {} fields ({}): name one, --answer {key}.FIELD=VALUE\n{}",
                    props.len(),
                    names.join(", "),
                    describe_fields(form, "  ")
                ));
            }
        };
        let Some(schema) = props.get(&name) else {
            let hint = crate::suggest::did_you_mean(&name, names.iter().copied());
            return Err(format!(
                "the form `{key}` has no field `{name}`{hint}\n{}",
                describe_fields(form, "  ")
            ));
        };
        let value = typed_value(schema, text).map_err(|why| {
            let f = facts(schema);
            let allowed = if f.options.is_empty() {
                format!(" (expects {})", f.kind)
            } else {
                format!("; allowed: {}", f.options.join(", "))
            };
            format!("`{key}.{name}`: {why}{allowed}")
        })?;
        content.insert(name, value);
    }
    Ok(json!({"action": "accept", "content": content}))
}

/// `text` as a value of `field`.
pub(crate) fn typed_value(field: &PrimitiveSchema, text: &str) -> Result<Value, String> {
    use PrimitiveSchema as P;
    let f = facts(field);
    let pick = |word: &str| -> Result<String, String> {
        if f.options.iter().any(|o| o == word) {
            Ok(word.to_owned())
        } else {
            Err(format!("`{word}` is not an option"))
        }
    };
    match field {
        P::String(s) => {
            let value = match s.format {
                Some(StringFormat::DateTime) => form::date_time(text)?,
                _ => text.to_owned(),
            };
            form::check_text(&value, s)?;
            Ok(Value::String(value))
        }
        P::Number(n) => Ok(Value::Number(form::parse_number(text, n)?)),
        P::Boolean(_) => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Value::Bool(true)),
            "n" | "no" | "false" => Ok(Value::Bool(false)),
            _ => Err(format!("`{text}` is not yes or no")),
        },
        P::UntitledSingleSelect(_) | P::TitledSingleSelect(_) | P::LegacyTitled(_) => {
            pick(text).map(Value::String)
        }
        P::UntitledMultiSelect(_) | P::TitledMultiSelect(_) => {
            let chosen = text
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(pick)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(json!(chosen))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region_form() -> InputRequest {
        serde_json::from_value(json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": "Which region?",
            "requestedSchema": {"type": "object", "properties": {
                "region": {"type": "string", "enum": ["eu-west-1", "us-east-1"]}
            }, "required": ["region"]}
        }}))
        .unwrap()
    }

    fn two_fields() -> InputRequest {
        serde_json::from_value(json!({"method": "elicitation/create", "params": {
            "mode": "form", "message": "Size?",
            "requestedSchema": {"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 1},
                "ok": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}
            }}
        }}))
        .unwrap()
    }

    fn spec(words: &[&str]) -> PresetSpec {
        let mut s = PresetSpec::default();
        for w in words {
            s.add_word(w).unwrap();
        }
        s
    }

    fn content(r: &InputResponse) -> Value {
        serde_json::to_value(r).unwrap()["content"].clone()
    }

    #[test]
    fn key_value_answers_a_one_field_form() {
        let s = spec(&["region=eu-west-1"]);
        let r = s.answer("region", &region_form()).unwrap().unwrap();
        assert_eq!(content(&r), json!({"region": "eu-west-1"}));
        assert!(s.answer("other", &region_form()).is_none());
    }

    #[test]
    fn field_values_are_typed_by_their_schema() {
        let s = spec(&["size.n=3", "size.ok=yes", "size.tags=a,b"]);
        let r = s.answer("size", &two_fields()).unwrap().unwrap();
        assert_eq!(content(&r), json!({"n": 3, "ok": true, "tags": ["a", "b"]}));
    }

    #[test]
    fn a_value_not_in_the_list_names_the_field_and_the_allowed_values() {
        let s = spec(&["region=mars"]);
        let e = s.answer("region", &region_form()).unwrap().unwrap_err();
        assert!(e.contains("`region.region`"), "{e}");
        assert!(e.contains("`mars` is not an option"), "{e}");
        assert!(e.contains("allowed: eu-west-1, us-east-1"), "{e}");
    }

    #[test]
    fn a_misspelt_field_is_named_with_a_suggestion() {
        let s = spec(&["region.regoin=eu-west-1"]);
        let e = s.answer("region", &region_form()).unwrap().unwrap_err();
        assert!(e.contains("no field `regoin`"), "{e}");
        assert!(e.contains("did you mean `region`"), "{e}");
        let s = spec(&["size=3"]);
        let e = s.answer("size", &two_fields()).unwrap().unwrap_err();
        assert!(e.contains("has 3 fields (n, ok, tags)"), "{e}");
    }

    #[test]
    fn a_whole_answer_is_checked_by_the_client_library_and_explained() {
        let s = spec(&[r#"region={"action":"accept","content":{"regoin":"eu-west-1"}}"#]);
        let e = s.answer("region", &region_form()).unwrap().unwrap_err();
        assert!(e.contains("required field `region` is missing"), "{e}");
        assert!(
            e.contains("region (required): one of: eu-west-1, us-east-1"),
            "{e}"
        );
        let s = spec(&[r#"region={"action":"decline"}"#]);
        assert!(s.answer("region", &region_form()).unwrap().is_ok());
        assert!(s.refuses("region"));
    }

    #[test]
    fn an_answers_file_holds_whole_answers() {
        let mut s = PresetSpec::default();
        s.add_file(
            "f.json",
            r#"{"region": {"action":"accept","content":{"region":"us-east-1"}}}"#,
        )
        .unwrap();
        assert!(s.answer("region", &region_form()).unwrap().is_ok());
        assert!(s.add_file("f.json", "[1]").is_err());
        assert!(s.add_file("f.json", r#"{"region": "eu"}"#).is_err());
        assert!(s.add_file("f.json", "nope").is_err());
        assert!(PresetSpec::default().add_word("novalue").is_err());
    }
}
