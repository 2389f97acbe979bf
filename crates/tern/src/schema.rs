//! Tool arguments checked against the tool's `inputSchema` before the call,
//! so a mistake is named on the command line instead of coming back as the
//! server's error: required arguments, unknown ones (with "did you mean"),
//! types, options and bounds of the top-level properties, in the form's
//! words. `key=value` words are also typed by the schema: a value that
//! parsed as a number or boolean goes as the string typed when the property
//! is a string (`name=123`).
//!
//! Only what is stated at the top level is checked (nested schemas, `$ref`
//! and combinators are the server's to check).
//!
//! An argument the schema does not name is refused (a misspelled optional
//! argument would otherwise be dropped by the tool without a word) unless
//! the schema says extra members are welcome: `additionalProperties` `true`
//! or a schema, `patternProperties`, or no `properties` at all. JSON
//! Schema's own default (an absent `additionalProperties`) allows them;
//! tern reads a tool that lists its arguments as meaning those.

use serde_json::Value;
use tern_protocol::JsonObject;

use crate::suggest::did_you_mean;

fn types(p: &JsonObject) -> Vec<&str> {
    match p.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn fits(t: &str, v: &Value) -> bool {
    match t {
        "string" => v.is_string(),
        "integer" => v.as_i64().is_some() || v.as_u64().is_some(),
        "number" => v.is_number(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    }
}

/// Types `args` by `schema` where a word was read the wrong way, then checks
/// them; the reasons, one per problem.
pub(crate) fn check(args: &mut JsonObject, schema: &JsonObject) -> Result<(), Vec<String>> {
    let props = schema
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut problems = Vec::new();
    let extras = props.is_empty()
        || schema.contains_key("patternProperties")
        || matches!(
            schema.get("additionalProperties"),
            Some(Value::Bool(true) | Value::Object(_))
        );
    for (name, value) in args.iter_mut() {
        let Some(p) = props.get(name).and_then(Value::as_object) else {
            if !extras {
                let hint = did_you_mean(name, props.keys().map(String::as_str));
                problems.push(format!("`{name}` is not an argument of this tool{hint}"));
            }
            continue;
        };
        let ts = types(p);
        // `name=123`: the word typed, for a string property.
        if ts == ["string"] && (value.is_number() || value.is_boolean()) {
            *value = Value::String(value.to_string());
        }
        if !ts.is_empty() && !ts.iter().any(|t| fits(t, value)) {
            problems.push(format!(
                "`{name}` must be {} (found {value})",
                ts.join(" or ")
            ));
            continue;
        }
        if let Some(options) = p.get("enum").and_then(Value::as_array)
            && !options.contains(value)
        {
            let list: Vec<String> = options
                .iter()
                .map(|o| o.as_str().map_or_else(|| o.to_string(), str::to_owned))
                .collect();
            problems.push(format!(
                "`{name}`: {value} is not an option; allowed: {}",
                list.join(", ")
            ));
            continue;
        }
        if let Some(x) = value.as_f64() {
            if let Some(min) = p.get("minimum").and_then(Value::as_f64)
                && x < min
            {
                problems.push(format!("`{name}`: at least {min}, please"));
            }
            if let Some(max) = p.get("maximum").and_then(Value::as_f64)
                && x > max
            {
                problems.push(format!("`{name}`: at most {max}, please"));
            }
        }
        if let Some(s) = value.as_str() {
            let n = s.chars().count() as u64;
            if let Some(min) = p.get("minLength").and_then(Value::as_u64)
                && n < min
            {
                problems.push(format!(
                    "`{name}`: at least {min} characters, please ({n} given)"
                ));
            }
            if let Some(max) = p.get("maxLength").and_then(Value::as_u64)
                && n > max
            {
                problems.push(format!(
                    "`{name}`: at most {max} characters, please ({n} given)"
                ));
            }
        }
    }
    for name in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        if !args.contains_key(name) {
            let kind = props
                .get(name)
                .and_then(Value::as_object)
                .map(types)
                .filter(|t| !t.is_empty())
                .map_or_else(String::new, |t| format!(" ({})", t.join(" or ")));
            problems.push(format!(
                "the required argument `{name}`{kind} is missing: add {name}=VALUE"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn obj(v: &Value) -> JsonObject {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn arguments_are_typed_and_checked_against_the_schema() {
        let schema = obj(&json!({"type": "object", "properties": {
            "name": {"type": "string", "minLength": 2},
            "n": {"type": "integer", "minimum": 1},
            "size": {"type": "string", "enum": ["s", "m"]}
        }, "required": ["name"], "additionalProperties": false}));
        let mut ok = obj(&json!({"name": 123, "n": 2}));
        check(&mut ok, &schema).unwrap();
        assert_eq!(ok["name"], "123", "typed as the string written");
        let mut bad = obj(&json!({"n": 0, "size": "xl", "nmae": "x"}));
        let problems = check(&mut bad, &schema).unwrap_err().join("\n");
        assert!(problems.contains("`n`: at least 1, please"), "{problems}");
        assert!(problems.contains("allowed: s, m"), "{problems}");
        assert!(problems.contains("did you mean `name`"), "{problems}");
        assert!(
            problems.contains("required argument `name` (string) is missing"),
            "{problems}"
        );
        let mut wrong = obj(&json!({"name": "ab", "n": "three"}));
        let problems = check(&mut wrong, &schema).unwrap_err().join("\n");
        assert!(problems.contains("`n` must be integer"), "{problems}");
    }

    #[test]
    fn an_unknown_argument_is_refused_unless_the_schema_welcomes_extras() {
        let listed = json!({"type": "object", "properties": {"settle_ms": {"type": "integer"}}});
        let mut typo = obj(&json!({"setle_ms": 100}));
        let problems = check(&mut typo, &obj(&listed)).unwrap_err().join("\n");
        assert!(problems.contains("did you mean `settle_ms`"), "{problems}");
        for welcoming in [
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true}),
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": {"type": "string"}}),
            json!({"type": "object", "properties": {"a": {}}, "patternProperties": {"^x": {}}}),
            json!({"type": "object"}),
        ] {
            let mut extra = obj(&json!({"xyz": "1"}));
            assert!(check(&mut extra, &obj(&welcoming)).is_ok(), "{welcoming}");
        }
    }
}
