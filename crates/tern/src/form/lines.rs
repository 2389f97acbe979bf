//! Each field kind asked on a line: the prompt, the hint, the answer
//! checked and asked again until it fits (`:decline` / `:cancel` end the
//! form at any of them).

use std::fmt::Write as _;

use tern_protocol::elicitation::{
    BooleanSchema, ElicitValue, NumberKind, NumberSchema, StringFormat, StringSchema, TitledOption,
};

use super::value::{check_text, date_time, format_hint, option_label, parse_number};
use super::{Console, Field, Input, read};

/// Asks `prompt` until `answer` accepts the line (empty when the user just
/// pressed Enter), saying why each refused line was refused. Declining or
/// cancelling ends the form whatever the field.
pub(super) fn ask_until(
    console: &mut dyn Console,
    prompt: &str,
    mut answer: impl FnMut(String) -> Result<Field, String>,
) -> Field {
    loop {
        match read(console, prompt) {
            Input::Decline => return Field::Decline,
            Input::Cancel => return Field::Cancel,
            Input::Line(line) => match answer(line) {
                Ok(field) => return field,
                Err(why) => console.say(&format!("  ! {why}\n")),
            },
        }
    }
}

/// The answer typed, or on an empty line the default; `None` when an
/// optional field is skipped.
pub(super) fn or_default(
    line: String,
    default: Option<String>,
    must: bool,
) -> Result<Option<String>, String> {
    match (line.is_empty(), default) {
        (false, _) => Ok(Some(line)),
        (true, Some(d)) => Ok(Some(d)),
        (true, None) if !must => Ok(None),
        (true, None) => Err("an answer is required".into()),
    }
}

pub(super) fn ask_bool(
    console: &mut dyn Console,
    label: &str,
    b: &BooleanSchema,
    must: bool,
) -> Field {
    let hint = match b.default {
        Some(true) => "Y/n",
        Some(false) => "y/N",
        None => "y/n",
    };
    ask_until(console, &format!("{label} [{hint}]: "), |line| {
        if line.is_empty() {
            return match b.default {
                Some(d) => Ok(Field::Value(ElicitValue::Bool(d))),
                None if !must => Ok(Field::Skip),
                None => Err("an answer is required: y or n".into()),
            };
        }
        match line.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Ok(Field::Value(ElicitValue::Bool(true))),
            "n" | "no" | "false" => Ok(Field::Value(ElicitValue::Bool(false))),
            _ => Err("answer y or n".into()),
        }
    })
}

pub(super) fn ask_text(
    console: &mut dyn Console,
    label: String,
    s: &StringSchema,
    must: bool,
) -> Field {
    let mut hints = Vec::new();
    if let Some(f) = s.format {
        hints.push(format_hint(f).to_owned());
    }
    match (s.min_length, s.max_length) {
        (Some(a), Some(b)) => hints.push(format!("{a} to {b} characters")),
        (Some(a), None) => hints.push(format!("at least {a} characters")),
        (None, Some(b)) => hints.push(format!("at most {b} characters")),
        (None, None) => {}
    }
    let mut prompt = label;
    if !hints.is_empty() {
        let _ = write!(prompt, " ({})", hints.join(", "));
    }
    if let Some(d) = &s.default {
        let _ = write!(prompt, " [{}]", tern::safe::line(d));
    }
    prompt.push_str(": ");
    ask_until(console, &prompt, |line| {
        let Some(value) = or_default(line, s.default.clone(), must)? else {
            return Ok(Field::Skip);
        };
        let value = if s.format == Some(StringFormat::DateTime) {
            date_time(&value)?
        } else {
            value
        };
        check_text(&value, s)?;
        Ok(Field::Value(ElicitValue::String(value)))
    })
}

pub(super) fn ask_number(
    console: &mut dyn Console,
    label: &str,
    n: &NumberSchema,
    must: bool,
) -> Field {
    let integer = n.kind == NumberKind::Integer;
    let hint = if integer { "whole number" } else { "number" };
    let bounds = match (n.minimum, n.maximum) {
        (Some(a), Some(b)) => format!(", {a} to {b}"),
        (Some(a), None) => format!(", at least {a}"),
        (None, Some(b)) => format!(", at most {b}"),
        (None, None) => String::new(),
    };
    let mut prompt = format!("{label} ({hint}{bounds})");
    if let Some(d) = n.default {
        let _ = write!(prompt, " [{d}]");
    }
    prompt.push_str(": ");
    ask_until(console, &prompt, |line| {
        let Some(text) = or_default(line, n.default.map(|d| d.to_string()), must)? else {
            return Ok(Field::Skip);
        };
        Ok(Field::Value(ElicitValue::Number(parse_number(&text, n)?)))
    })
}

pub(super) fn list_options(console: &mut dyn Console, options: &[TitledOption], defaults: &[&str]) {
    let mut text = String::new();
    for (i, o) in options.iter().enumerate() {
        let shown = option_label(o);
        let mark = if defaults.contains(&o.value.as_str()) {
            "  (default)"
        } else {
            ""
        };
        let _ = writeln!(text, "  {}) {shown}{mark}", i + 1);
    }
    console.say(&text);
}

/// The option a word picks: its number, or its value.
pub(super) fn pick<'a>(options: &'a [TitledOption], word: &str) -> Option<&'a TitledOption> {
    word.parse::<usize>()
        .ok()
        .and_then(|i| i.checked_sub(1))
        .and_then(|i| options.get(i))
        .or_else(|| options.iter().find(|o| o.value == word))
}

pub(super) fn ask_one(
    console: &mut dyn Console,
    label: &str,
    options: &[TitledOption],
    default: Option<&str>,
    must: bool,
) -> Field {
    let default = default.filter(|d| options.iter().any(|o| o.value == *d));
    console.say(&format!("{label}\n"));
    list_options(console, options, default.as_slice());
    let mut prompt = format!("Choose [1-{}", options.len());
    if let Some(i) = default.and_then(|d| options.iter().position(|o| o.value == d)) {
        let _ = write!(prompt, ", default {}", i + 1);
    }
    prompt.push_str("]: ");
    ask_until(console, &prompt, |line| {
        if line.is_empty() {
            return match default {
                Some(d) => Ok(Field::Value(ElicitValue::String(d.to_owned()))),
                None if !must => Ok(Field::Skip),
                None => Err("choose one option by its number".into()),
            };
        }
        match pick(options, &line) {
            Some(o) => Ok(Field::Value(ElicitValue::String(o.value.clone()))),
            None => Err(format!("choose a number from 1 to {}", options.len())),
        }
    })
}

pub(super) fn ask_many(
    console: &mut dyn Console,
    label: &str,
    options: &[TitledOption],
    default: Option<&[String]>,
    (min, max): (Option<u64>, Option<u64>),
    must: bool,
) -> Field {
    let defaults: Vec<&str> = default
        .unwrap_or_default()
        .iter()
        .map(String::as_str)
        .collect();
    console.say(&format!("{label}\n"));
    list_options(console, options, &defaults);
    let hint = format!("numbers from 1 to {}, separated by commas", options.len());
    let bounds = match (min, max) {
        (Some(a), Some(b)) => format!("; {a} to {b} choices"),
        (Some(a), None) => format!("; at least {a}"),
        (None, Some(b)) => format!("; at most {b}"),
        (None, None) => String::new(),
    };
    let mut prompt = format!("Choose ({hint}{bounds})");
    if !defaults.is_empty() {
        let numbers: Vec<String> = defaults
            .iter()
            .filter_map(|d| options.iter().position(|o| o.value == *d))
            .map(|i| (i + 1).to_string())
            .collect();
        let _ = write!(prompt, " [{}]", numbers.join(","));
    }
    prompt.push_str(": ");
    ask_until(console, &prompt, |line| {
        let mut chosen: Vec<String> = if line.is_empty() {
            if default.is_none() && !must {
                return Ok(Field::Skip);
            }
            defaults.iter().map(|d| (*d).to_owned()).collect()
        } else {
            line.split([',', ' '])
                .filter(|w| !w.is_empty())
                .map(|w| {
                    pick(options, w)
                        .map(|o| o.value.clone())
                        .ok_or_else(|| format!("{w:?} is not one of the options"))
                })
                .collect::<Result<_, _>>()?
        };
        chosen.dedup();
        let n = chosen.len() as u64;
        if let Some(min) = min.or(must.then_some(1))
            && n < min
        {
            return Err(format!("choose at least {min}"));
        }
        if let Some(max) = max
            && n > max
        {
            return Err(format!("choose at most {max}"));
        }
        Ok(Field::Value(ElicitValue::Strings(chosen)))
    })
}
