//! Each field kind asked with a widget ([`super::Widgets`]): a select for
//! one option, a multi-select for several, a confirmation for yes/no, a
//! line editor with the field's checks for text and numbers.

use tern_protocol::elicitation::{ElicitValue, PrimitiveSchema, StringFormat, TitledOption};

use super::value::{check_text, date_time, format_hint, option_label, parse_number};
use super::{Check, Field, Reply, Widgets, help_of};

/// One field with widgets: arrow keys for choices, an edited line checked as
/// it is typed for text and numbers.
#[allow(
    clippy::too_many_lines,
    reason = "one arm per field kind, as in ask_field"
)]
pub(super) fn rich_field(
    w: &mut dyn Widgets,
    label: &str,
    field: &PrimitiveSchema,
    must: bool,
    title: Option<&str>,
    typed: Option<&str>,
) -> Field {
    use PrimitiveSchema as P;
    // The description, unless the label already is it.
    let help = help_of(field).filter(|d| {
        let d = d.trim_end_matches('.');
        title.is_some_and(|t| t != d) && !label.starts_with(d)
    });
    let help = help.as_deref();
    // Numbered, so a typed number (the filter) still picks an option.
    let titled = |options: &[TitledOption]| -> Vec<String> {
        options
            .iter()
            .enumerate()
            .map(|(i, o)| format!("{}) {}", i + 1, option_label(o)))
            .collect()
    };
    let one = |w: &mut dyn Widgets, options: Vec<TitledOption>, default: Option<&str>| {
        let mut shown = titled(&options);
        let skip = !must && default.is_none();
        if skip {
            shown.push("(leave empty)".into());
        }
        let start = default.and_then(|d| options.iter().position(|o| o.value == d));
        match w.select(label, help, &shown, start) {
            Reply::Value(i) => options.get(i).map_or(Field::Skip, |o| {
                Field::Value(ElicitValue::String(o.value.clone()))
            }),
            Reply::Escape(partial) => Field::Escaped(partial),
            Reply::Cancel => Field::Cancel,
        }
    };
    let many = |w: &mut dyn Widgets,
                options: Vec<TitledOption>,
                default: Option<&[String]>,
                (min, max): (Option<u64>, Option<u64>)| {
        let defaults: Vec<usize> = default
            .unwrap_or_default()
            .iter()
            .filter_map(|d| options.iter().position(|o| &o.value == d))
            .collect();
        let min = min.or(must.then_some(1));
        match w.multi(label, help, &titled(&options), &defaults, (min, max)) {
            Reply::Value(chosen) if chosen.is_empty() && !must && default.is_none() => Field::Skip,
            Reply::Value(chosen) => Field::Value(ElicitValue::Strings(
                chosen
                    .into_iter()
                    .filter_map(|i| options.get(i).map(|o| o.value.clone()))
                    .collect(),
            )),
            Reply::Escape(partial) => Field::Escaped(partial),
            Reply::Cancel => Field::Cancel,
        }
    };
    let untitled = |values: &[String]| -> Vec<TitledOption> {
        values
            .iter()
            .map(|o| TitledOption::new(o.clone(), o.clone()))
            .collect()
    };
    match field {
        P::String(s) => {
            let schema = s.clone();
            let check: Check = std::sync::Arc::new(move |v: &str| {
                if v.is_empty() {
                    return if must && schema.default.is_none() {
                        Err("an answer is required".into())
                    } else {
                        Ok(())
                    };
                }
                let v = if schema.format == Some(StringFormat::DateTime) {
                    date_time(v)?
                } else {
                    v.to_owned()
                };
                check_text(&v, &schema)
            });
            let hint = s.format.map(format_hint);
            let help = match (help, hint) {
                (Some(h), Some(f)) => Some(format!("{h} ({f})")),
                (h, f) => h.map(str::to_owned).or(f.map(str::to_owned)),
            };
            match w.text(label, help.as_deref(), s.default.as_deref(), typed, check) {
                Reply::Value(v) if v.is_empty() => Field::Skip,
                Reply::Value(v) if s.format == Some(StringFormat::DateTime) => {
                    date_time(&v).map_or(Field::Skip, |v| Field::Value(ElicitValue::String(v)))
                }
                Reply::Value(v) => Field::Value(ElicitValue::String(v)),
                Reply::Escape(partial) => Field::Escaped(partial),
                Reply::Cancel => Field::Cancel,
            }
        }
        P::Number(n) => {
            let schema = n.clone();
            let check: Check = std::sync::Arc::new(move |v: &str| {
                if v.is_empty() {
                    return if must && schema.default.is_none() {
                        Err("an answer is required".into())
                    } else {
                        Ok(())
                    };
                }
                parse_number(v, &schema).map(|_| ())
            });
            let default = n.default.map(|d| d.to_string());
            match w.text(label, help, default.as_deref(), typed, check) {
                Reply::Value(v) if v.is_empty() => Field::Skip,
                Reply::Value(v) => parse_number(&v, n)
                    .map_or(Field::Skip, |x| Field::Value(ElicitValue::Number(x))),
                Reply::Escape(partial) => Field::Escaped(partial),
                Reply::Cancel => Field::Cancel,
            }
        }
        // An optional yes/no without a default may be left empty: a
        // choice of three, as the line prompt's empty answer.
        P::Boolean(b) if !must && b.default.is_none() => {
            let options = [
                "Yes".to_owned(),
                "No".to_owned(),
                "(leave empty)".to_owned(),
            ];
            match w.select(&format!("{label} [y/n]"), help, &options, None) {
                Reply::Value(0) => Field::Value(ElicitValue::Bool(true)),
                Reply::Value(1) => Field::Value(ElicitValue::Bool(false)),
                Reply::Value(_) => Field::Skip,
                Reply::Escape(partial) => Field::Escaped(partial),
                Reply::Cancel => Field::Cancel,
            }
        }
        P::Boolean(b) => match w.confirm(label, help, b.default) {
            Reply::Value(v) => Field::Value(ElicitValue::Bool(v)),
            Reply::Escape(partial) => Field::Escaped(partial),
            Reply::Cancel => Field::Cancel,
        },
        P::UntitledSingleSelect(e) => one(w, untitled(&e.options), e.default.as_deref()),
        P::TitledSingleSelect(e) => one(w, e.one_of.clone(), e.default.as_deref()),
        P::LegacyTitled(e) => {
            let names = e.enum_names.clone().unwrap_or_default();
            let options = e
                .options
                .iter()
                .enumerate()
                .map(|(i, o)| TitledOption::new(o.clone(), names.get(i).unwrap_or(o).clone()))
                .collect();
            one(w, options, e.default.as_deref())
        }
        P::UntitledMultiSelect(e) => many(
            w,
            untitled(&e.items.options),
            e.default.as_deref(),
            (e.min_items, e.max_items),
        ),
        P::TitledMultiSelect(e) => many(
            w,
            e.items.any_of.clone(),
            e.default.as_deref(),
            (e.min_items, e.max_items),
        ),
    }
}
