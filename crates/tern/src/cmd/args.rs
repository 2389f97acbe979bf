//! The words of a call: `key=value` arguments (`--args JSON`), prompt
//! arguments, and the preset answers (`--answer`, `--answers FILE`).

use std::path::PathBuf;

use clap::Args;
use serde_json::Value;
use tern_protocol::JsonObject;

use crate::answers::PresetSpec;
use crate::exit::{Failure, usage};

/// How questions are answered, for the subcommands that can be asked some.
#[derive(Debug, Args, Default)]
pub(crate) struct InputArgs {
    /// Preset an answer: KEY=VALUE for a one-field form, KEY.FIELD=VALUE for
    /// one field (typed by the field's schema), or KEY=JSON for the whole
    /// answer (e.g. `region={"action":"decline"}`). Repeatable; `tern
    /// questions` shows the keys and fields. A 2025 server's questions have
    /// no keys: they are `live-1`, `live-2`, … in the order the call asks.
    #[arg(long = "answer", value_name = "KEY=VALUE")]
    pub(crate) answer: Vec<String>,
    /// Preset answers from a file: a JSON object of KEY: answer (`tern
    /// questions TOOL > FILE` writes one to edit).
    #[arg(long = "answers", value_name = "FILE")]
    pub(crate) answers: Option<PathBuf>,
    /// Never prompt, and declare elicitation only when answers are preset,
    /// so servers take their fallback. The default when standard input is
    /// not a terminal.
    #[arg(long)]
    pub(crate) no_input: bool,
    /// Answer sampling requests by running COMMAND (with `sh -c`): the
    /// prompt on its standard input, the reply from its standard output.
    /// Without it you type the reply.
    #[arg(long, value_name = "COMMAND")]
    pub(crate) sampler: Option<String>,
    /// A folder to share as a root (repeatable). Without it no roots are
    /// declared.
    #[arg(long = "root", value_name = "PATH")]
    pub(crate) root: Vec<PathBuf>,
}

/// A `key=value` word: the value is JSON when it parses as JSON, else the
/// string as typed (`n=3` is a number, `name=orders` a string, `name='"3"'`
/// the string "3").
pub(crate) fn parse_pair(word: &str) -> Result<(String, Value), Failure> {
    let (key, value) = word
        .split_once('=')
        .filter(|(k, _)| !k.is_empty())
        .ok_or_else(|| usage(format!("expected key=value, found {word:?}")))?;
    let value = serde_json::from_str(value).unwrap_or_else(|_| Value::String(value.to_owned()));
    Ok((key.to_owned(), value))
}

/// The tool arguments: `--args JSON` (an object), then each `key=value`.
pub(crate) fn tool_arguments(pairs: &[String], args: Option<&str>) -> Result<JsonObject, Failure> {
    let mut object = match args {
        None => JsonObject::new(),
        Some(text) => match serde_json::from_str(text) {
            Ok(Value::Object(o)) => o,
            Ok(_) => return Err(usage("--args must be a JSON object")),
            Err(e) => return Err(usage(format!("--args is not JSON: {e}"))),
        },
    };
    for word in pairs {
        let (k, v) = parse_pair(word)?;
        object.insert(k, v);
    }
    Ok(object)
}

/// Prompt arguments are strings: a JSON string is unquoted, anything else is
/// sent as typed.
pub(crate) fn prompt_arguments(pairs: &[String]) -> Result<JsonObject, Failure> {
    pairs
        .iter()
        .map(|word| {
            let (k, v) = parse_pair(word)?;
            let text = match v {
                Value::String(s) => s,
                _ => word
                    .split_once('=')
                    .map(|(_, v)| v.to_owned())
                    .unwrap_or_default(),
            };
            Ok((k, Value::String(text)))
        })
        .collect()
}

/// The preset answers of `--answers FILE` and then each `--answer`.
pub(crate) fn preset_answers(input: &InputArgs) -> Result<PresetSpec, Failure> {
    let mut spec = PresetSpec::default();
    if let Some(path) = &input.answers {
        let text = std::fs::read_to_string(path)
            .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
        spec.add_file(&path.display().to_string(), &text)
            .map_err(usage)?;
    }
    for word in &input.answer {
        spec.add_word(word).map_err(usage)?;
    }
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::exit::EXIT_USAGE;

    #[test]
    fn pair_values_are_json_when_they_parse_and_strings_otherwise() {
        let args = tool_arguments(
            &[
                "name=orders".into(),
                "n=3".into(),
                "ok=true".into(),
                "s=\"3\"".into(),
                "e=".into(),
                "l=[1,2]".into(),
            ],
            Some(r#"{"name": "x", "keep": 1}"#),
        )
        .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"name": "orders", "keep": 1, "n": 3, "ok": true, "s": "3", "e": "", "l": [1, 2]})
        );
        assert_eq!(
            tool_arguments(&["novalue".into()], None).unwrap_err().code,
            EXIT_USAGE
        );
        assert_eq!(
            tool_arguments(&[], Some("[1]")).unwrap_err().code,
            EXIT_USAGE
        );
    }

    #[test]
    fn prompt_arguments_are_strings() {
        let args = prompt_arguments(&["service=api".into(), "n=3".into()]).unwrap();
        assert_eq!(Value::Object(args), json!({"service": "api", "n": "3"}));
    }
}
