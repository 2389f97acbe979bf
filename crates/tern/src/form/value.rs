//! What a typed answer must be: its length and format, a number within
//! its bounds, a date and time made RFC 3339, an option's label.

use tern_protocol::elicitation::{
    NumberKind, NumberSchema, StringFormat, StringSchema, TitledOption,
};

/// A forgiving date and time, always given back as RFC 3339: RFC 3339
/// itself, or `YYYY-MM-DD HH:MM[:SS]` (a space or `T`, seconds optional),
/// or a date alone (midnight); without an offset the time is UTC.
pub(crate) fn date_time(text: &str) -> Result<String, String> {
    let t = text.trim();
    if StringFormat::DateTime.accepts(t) {
        return Ok(t.to_owned());
    }
    let refuse = || {
        format!(
            "{t:?} is not a date and time; e.g. 2026-12-24 19:30 (UTC), or 2026-12-24T19:30:00+01:00"
        )
    };
    let t = t.strip_suffix(" UTC").unwrap_or(t);
    let (date, time) = match t.split_once([' ', 'T', 't']) {
        Some((d, rest)) => (d, rest.trim()),
        None => (t, "00:00"),
    };
    if !StringFormat::Date.accepts(date) {
        return Err(refuse());
    }
    let split = time.find(['Z', 'z', '+', '-']).unwrap_or(time.len());
    let (clock, offset) = time.split_at(split);
    let clock = match clock.matches(':').count() {
        1 => format!("{clock}:00"),
        2 => clock.to_owned(),
        _ => return Err(refuse()),
    };
    let offset = if offset.is_empty() { "Z" } else { offset };
    let full = format!("{date}T{clock}{offset}");
    if StringFormat::DateTime.accepts(&full) {
        Ok(full)
    } else {
        Err(refuse())
    }
}

/// What a string format expects, for a prompt's hint.
pub(super) fn format_hint(f: StringFormat) -> &'static str {
    match f {
        StringFormat::Email => "e-mail address",
        StringFormat::Uri => "URI, e.g. https://example.com/",
        StringFormat::Date => "date, YYYY-MM-DD",
        StringFormat::DateTime => "date and time, e.g. 2026-12-24 19:30 (UTC) or RFC 3339",
    }
}

/// Checks a text answer against its field's length and format.
pub(crate) fn check_text(value: &str, s: &StringSchema) -> Result<(), String> {
    let n = value.chars().count() as u64;
    if let Some(min) = s.min_length
        && n < min
    {
        return Err(format!("at least {min} characters, please ({n} given)"));
    }
    if let Some(max) = s.max_length
        && n > max
    {
        return Err(format!("at most {max} characters, please ({n} given)"));
    }
    if s.format.is_none_or(|f| f.accepts(value)) {
        Ok(())
    } else {
        Err(format!(
            "not a valid {}",
            s.format.map_or("value", format_hint)
        ))
    }
}

/// Parses a number answer and checks its kind and bounds.
pub(crate) fn parse_number(text: &str, n: &NumberSchema) -> Result<serde_json::Number, String> {
    let value: f64 = text
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| format!("{text:?} is not a number"))?;
    if let Some(min) = n.minimum
        && value < min
    {
        return Err(format!("at least {min}, please"));
    }
    if let Some(max) = n.maximum
        && value > max
    {
        return Err(format!("at most {max}, please"));
    }
    if n.kind == NumberKind::Integer {
        if let Ok(i) = text.parse::<i64>() {
            return Ok(i.into());
        }
        if value.fract() != 0.0 || value.abs() > 9.007_199_254_740_992e15 {
            return Err(format!("{text} is not a whole number"));
        }
        #[allow(
            clippy::cast_possible_truncation,
            reason = "integral and within ±2^53, checked above"
        )]
        return Ok((value as i64).into());
    }
    serde_json::Number::from_f64(value).ok_or_else(|| format!("{text:?} is not a number"))
}

/// How an option is shown: its title, and its value when the title does
/// not say it; both one-line and safe ([`tern::safe::line`]).
pub(super) fn option_label(o: &TitledOption) -> String {
    if o.title == o.value || o.title.contains(&o.value) {
        tern::safe::line(&o.title).into_owned()
    } else {
        format!(
            "{} ({})",
            tern::safe::line(&o.title),
            tern::safe::line(&o.value)
        )
    }
}
