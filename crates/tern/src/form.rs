//! Forms on the terminal: an elicitation's `requestedSchema` asked field by
//! field, in property order, with the checks the schema states (formats,
//! lengths, bounds, required fields). `:decline` and `:cancel` work at every
//! prompt, and the end of input counts as `:cancel`.
//!
//! The engine talks to a [`Console`], so tests script the person's lines.

use std::fmt::Write as _;

use indexmap::IndexMap;
use tern_protocol::elicitation::{
    BooleanSchema, ElicitRequestFormParams, ElicitResult, ElicitValue, NumberKind, NumberSchema,
    PrimitiveSchema, StringFormat, StringSchema, TitledOption,
};

/// Where the person is: text goes out, lines come in.
pub(crate) trait Console {
    /// Shows text (no newline added). A console shows it through
    /// [`tern::safe::text`]: a server's string in it cannot act on the
    /// terminal.
    fn say(&mut self, text: &str);
    /// Shows one of tern's own lines (who asks, the URL consent) so that
    /// nothing shown before can restyle or hide it: on a terminal, after an
    /// SGR reset.
    fn mark(&mut self, text: &str) {
        self.say(text);
    }
    /// Shows `prompt` and reads one line, without its line ending; `None` at
    /// the end of input.
    fn ask(&mut self, prompt: &str) -> Option<String>;
    /// Widgets (arrow-key selection, line editing), when this console has
    /// them; the line-based questions otherwise.
    fn widgets(&mut self) -> Option<&mut dyn Widgets> {
        None
    }
}

/// A check of a typed answer: `Err` says why it is refused.
pub(crate) type Check = std::sync::Arc<dyn Fn(&str) -> Result<(), String> + Send + Sync>;

/// What a widget returns.
pub(crate) enum Reply<T> {
    /// The answer.
    Value(T),
    /// Esc: the person stepped out of the question, with what they had
    /// typed so far (empty for a choice). The form asks what next and keeps
    /// it ([`escaped`]).
    Escape(String),
    /// Ctrl-C, or the end of input: dismiss the form.
    Cancel,
}

/// Rich questions (`inquire` on a terminal, [`crate::prompt`]).
pub(crate) trait Widgets {
    /// One of `options`; `default` is where the cursor starts.
    fn select(
        &mut self,
        label: &str,
        help: Option<&str>,
        options: &[String],
        default: Option<usize>,
    ) -> Reply<usize>;
    /// Several of `options`, checked by `check` (their indices).
    fn multi(
        &mut self,
        label: &str,
        help: Option<&str>,
        options: &[String],
        defaults: &[usize],
        bounds: (Option<u64>, Option<u64>),
    ) -> Reply<Vec<usize>>;
    /// Yes or no.
    fn confirm(&mut self, label: &str, help: Option<&str>, default: Option<bool>) -> Reply<bool>;
    /// A line, edited in place, accepted once `check` passes; it starts
    /// as `initial` (what was typed before an Esc).
    fn text(
        &mut self,
        label: &str,
        help: Option<&str>,
        default: Option<&str>,
        initial: Option<&str>,
        check: Check,
    ) -> Reply<String>;
}

/// What the person chose at a round's summary.
#[derive(Debug)]
pub(crate) enum Summary {
    /// Send the answers.
    Send,
    /// Change answer `n` (from 0).
    Change(usize),
    /// Refuse the questions (decline or cancel), with this result.
    Refuse(ElicitResult),
}

/// The summary of a round's answers: Enter (or "Send") sends, a number
/// changes that answer, `:decline` / `:cancel` refuse.
pub(crate) fn review(console: &mut dyn Console, lines: &[String]) -> Summary {
    if let Some(w) = console.widgets() {
        let mut options = vec!["Send these answers".to_owned()];
        for l in lines {
            options.push(format!("Change {}", tern::safe::line(l)));
        }
        options.push("Decline (refuse the questions)".to_owned());
        let label = format!("Your answers: {}", lines.join("; "));
        loop {
            return match w.select(&label, None, &options, Some(0)) {
                Reply::Value(0) => Summary::Send,
                Reply::Value(i) if i <= lines.len() => Summary::Change(i - 1),
                Reply::Value(_) => Summary::Refuse(ElicitResult::decline()),
                Reply::Escape(_) => match escaped(w, "your answers") {
                    Escaped::Back => continue,
                    Escaped::Refuse(result) => Summary::Refuse(result),
                },
                Reply::Cancel => Summary::Refuse(ElicitResult::cancel()),
            };
        }
    }
    let mut text = String::from("Your answers:\n");
    for (i, l) in lines.iter().enumerate() {
        let _ = writeln!(text, "  {}) {}", i + 1, tern::safe::line(l));
    }
    console.say(&text);
    loop {
        let prompt = if lines.len() == 1 {
            "Send? [Enter sends, 1 changes it]: ".to_owned()
        } else {
            format!("Send? [Enter sends, 1-{} changes one]: ", lines.len())
        };
        match read(console, &prompt) {
            Input::Decline => return Summary::Refuse(ElicitResult::decline()),
            Input::Cancel => return Summary::Refuse(ElicitResult::cancel()),
            Input::Line(l) if l.is_empty() || l.eq_ignore_ascii_case("y") => {
                return Summary::Send;
            }
            Input::Line(l) => match l.parse::<usize>() {
                Ok(n) if (1..=lines.len()).contains(&n) => return Summary::Change(n - 1),
                _ => console.say(&format!(
                    "  ! press Enter to send, or type a number from 1 to {}\n",
                    lines.len()
                )),
            },
        }
    }
}

/// The typed words that answer the whole form instead of a field.
pub(crate) const DECLINE: &str = ":decline";
/// See [`DECLINE`].
pub(crate) const CANCEL: &str = ":cancel";

/// One line the person typed.
pub(crate) enum Input {
    /// A line, trimmed.
    Line(String),
    /// `:decline`.
    Decline,
    /// `:cancel`, or the end of input.
    Cancel,
}

/// Asks `prompt` and sorts the reply.
pub(crate) fn read(console: &mut dyn Console, prompt: &str) -> Input {
    match console.ask(prompt) {
        None => Input::Cancel,
        Some(line) => match line.trim() {
            DECLINE => Input::Decline,
            CANCEL => Input::Cancel,
            other => Input::Line(other.to_owned()),
        },
    }
}

/// The outcome of one field.
enum Field {
    Value(ElicitValue),
    Skip,
    Decline,
    Cancel,
    /// Esc, with what was typed so far.
    Escaped(String),
}

/// What the person chose after an Esc.
pub(crate) enum Escaped {
    /// Back to the question (what was typed is kept).
    Back,
    /// Refuse the questions (decline or cancel), with this result.
    Refuse(ElicitResult),
}

/// After an Esc at `what`: back to it (the default, Enter), dismiss the
/// question (Esc again: the server is told `cancel`), or decline it. Esc
/// used to dismiss at once, losing every answer typed; now it costs one
/// more key.
pub(crate) fn escaped(w: &mut dyn Widgets, what: &str) -> Escaped {
    let options = [
        format!("Back to {what} (nothing typed is lost)"),
        "Dismiss the question (the server is told you cancelled)".to_owned(),
        "Decline (refuse the question)".to_owned(),
    ];
    match w.select(
        "Esc: leave the question?",
        Some("Enter goes back, Esc again dismisses"),
        &options,
        Some(0),
    ) {
        Reply::Value(0) => Escaped::Back,
        Reply::Value(2) => Escaped::Refuse(ElicitResult::decline()),
        Reply::Value(_) | Reply::Escape(_) | Reply::Cancel => {
            Escaped::Refuse(ElicitResult::cancel())
        }
    }
}

/// Asks the whole form; `asker` names the server asking (and what for);
/// `hint` shows how to answer (once per run).
pub(crate) fn fill(
    console: &mut dyn Console,
    asker: &str,
    params: &ElicitRequestFormParams,
    hint: bool,
) -> ElicitResult {
    let rich = console.widgets().is_some();
    let how = match (hint, rich) {
        (false, _) => String::new(),
        (true, false) => format!(
            "(Enter keeps a [default]; type {DECLINE} to refuse or {CANCEL} to dismiss, at any prompt.)\n"
        ),
        (true, true) => {
            "(Arrow keys choose, Enter answers, Esc steps out of the question, Ctrl-C stops tern.)\n"
                .to_owned()
        }
    };
    console.mark(&format!("\n-- {asker} --\n"));
    console.say(&format!("{}\n{how}", server_text(&params.message)));
    let schema = &params.requested_schema;
    let required = schema.required.clone().unwrap_or_default();
    let mut content = IndexMap::new();
    for (key, field) in &schema.properties {
        let must = required.iter().any(|r| r == key);
        let mut typed: Option<String> = None;
        let outcome = loop {
            match ask_field(console, key, field, must, typed.as_deref()) {
                Field::Escaped(partial) => {
                    let Some(w) = console.widgets() else {
                        break Field::Cancel;
                    };
                    match escaped(w, "the question") {
                        Escaped::Back => typed = Some(partial).filter(|t| !t.is_empty()),
                        Escaped::Refuse(result) => return refused(console, result),
                    }
                }
                other => break other,
            }
        };
        match outcome {
            Field::Value(v) => {
                content.insert(key.clone(), v);
            }
            Field::Skip => {}
            Field::Decline => return refused(console, ElicitResult::decline()),
            Field::Cancel | Field::Escaped(_) => return refused(console, ElicitResult::cancel()),
        }
    }
    ElicitResult::accept(content)
}

/// Says how the form ended, and returns `result`.
fn refused(console: &mut dyn Console, result: ElicitResult) -> ElicitResult {
    console.say(
        if result.action == tern_protocol::elicitation::ElicitAction::Decline {
            "Declined.\n"
        } else {
            "Cancelled.\n"
        },
    );
    result
}

/// A server's multi-line text under one of tern's headers: made safe
/// ([`tern::safe::text`]), its lines after the first indented by two
/// spaces so that none of them can pose as tern's own `-- ... --` header.
pub(crate) fn server_text(text: &str) -> String {
    tern::safe::text(text.trim_end()).replace('\n', "\n  ")
}

/// The label, description and options of a field, whatever its kind.
fn header(
    console: &mut dyn Console,
    key: &str,
    title: Option<&str>,
    description: Option<&str>,
    must: bool,
) -> String {
    // The title, else a short one-line description, else the key.
    let short = description
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.chars().count() <= 60 && !d.contains('\n'));
    let label = title
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .or(short)
        .unwrap_or(key)
        .trim_end_matches('.');
    let label = tern::safe::line(label).into_owned();
    // One header per field: its description, when it says more than the
    // label; the label itself is the prompt, marked when required.
    if let Some(d) = description
        .map(str::trim)
        .filter(|d| !d.is_empty() && d.trim_end_matches('.') != label)
        && console.widgets().is_none()
    {
        console.say(&format!("  {}\n", server_text(d)));
    }
    if must {
        format!("{label} (required)")
    } else {
        label
    }
}

/// A field's description, shown as a widget's help line.
fn help_of(field: &PrimitiveSchema) -> Option<String> {
    use PrimitiveSchema as P;
    let d = match field {
        P::String(s) => &s.description,
        P::Number(n) => &n.description,
        P::Boolean(b) => &b.description,
        P::UntitledSingleSelect(e) => &e.description,
        P::TitledSingleSelect(e) => &e.description,
        P::LegacyTitled(e) => &e.description,
        P::UntitledMultiSelect(e) => &e.description,
        P::TitledMultiSelect(e) => &e.description,
    };
    d.as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(str::to_owned)
}

fn ask_field(
    console: &mut dyn Console,
    key: &str,
    field: &PrimitiveSchema,
    must: bool,
    typed: Option<&str>,
) -> Field {
    use PrimitiveSchema as P;
    let (title, description) = match field {
        P::String(s) => (&s.title, &s.description),
        P::Number(n) => (&n.title, &n.description),
        P::Boolean(b) => (&b.title, &b.description),
        P::UntitledSingleSelect(e) => (&e.title, &e.description),
        P::TitledSingleSelect(e) => (&e.title, &e.description),
        P::LegacyTitled(e) => (&e.title, &e.description),
        P::UntitledMultiSelect(e) => (&e.title, &e.description),
        P::TitledMultiSelect(e) => (&e.title, &e.description),
    };
    let label = header(console, key, title.as_deref(), description.as_deref(), must);
    if let Some(w) = console.widgets() {
        return rich_field(w, &label, field, must, title.as_deref(), typed);
    }
    let untitled = |values: &[String]| -> Vec<TitledOption> {
        values
            .iter()
            .map(|o| TitledOption::new(o.clone(), o.clone()))
            .collect()
    };
    match field {
        P::String(s) => ask_text(console, label, s, must),
        P::Number(n) => ask_number(console, &label, n, must),
        P::Boolean(b) => ask_bool(console, &label, b, must),
        P::UntitledSingleSelect(e) => ask_one(
            console,
            &label,
            &untitled(&e.options),
            e.default.as_deref(),
            must,
        ),
        P::TitledSingleSelect(e) => ask_one(console, &label, &e.one_of, e.default.as_deref(), must),
        P::LegacyTitled(e) => {
            let names = e.enum_names.clone().unwrap_or_default();
            let options: Vec<TitledOption> = e
                .options
                .iter()
                .enumerate()
                .map(|(i, o)| TitledOption::new(o.clone(), names.get(i).unwrap_or(o).clone()))
                .collect();
            ask_one(console, &label, &options, e.default.as_deref(), must)
        }
        P::UntitledMultiSelect(e) => ask_many(
            console,
            &label,
            &untitled(&e.items.options),
            e.default.as_deref(),
            (e.min_items, e.max_items),
            must,
        ),
        P::TitledMultiSelect(e) => ask_many(
            console,
            &label,
            &e.items.any_of,
            e.default.as_deref(),
            (e.min_items, e.max_items),
            must,
        ),
    }
}

/// Asks `prompt` until `answer` accepts the line (empty when the user just
/// pressed Enter), saying why each refused line was refused. Declining or
/// cancelling ends the form whatever the field.
fn ask_until(
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
fn or_default(line: String, default: Option<String>, must: bool) -> Result<Option<String>, String> {
    match (line.is_empty(), default) {
        (false, _) => Ok(Some(line)),
        (true, Some(d)) => Ok(Some(d)),
        (true, None) if !must => Ok(None),
        (true, None) => Err("an answer is required".into()),
    }
}

fn ask_bool(console: &mut dyn Console, label: &str, b: &BooleanSchema, must: bool) -> Field {
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

fn ask_text(console: &mut dyn Console, label: String, s: &StringSchema, must: bool) -> Field {
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

/// One field with widgets: arrow keys for choices, an edited line checked as
/// it is typed for text and numbers.
#[allow(
    clippy::too_many_lines,
    reason = "one arm per field kind, as in ask_field"
)]
fn rich_field(
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

fn format_hint(f: StringFormat) -> &'static str {
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

fn ask_number(console: &mut dyn Console, label: &str, n: &NumberSchema, must: bool) -> Field {
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
fn option_label(o: &TitledOption) -> String {
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

fn list_options(console: &mut dyn Console, options: &[TitledOption], defaults: &[&str]) {
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
fn pick<'a>(options: &'a [TitledOption], word: &str) -> Option<&'a TitledOption> {
    word.parse::<usize>()
        .ok()
        .and_then(|i| i.checked_sub(1))
        .and_then(|i| options.get(i))
        .or_else(|| options.iter().find(|o| o.value == word))
}

fn ask_one(
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

fn ask_many(
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

#[cfg(test)]
#[allow(
    clippy::needless_pass_by_value,
    reason = "test helpers read best taking the schema by value"
)]
mod tests {
    use super::*;
    use serde_json::json;
    use tern_protocol::elicitation::ElicitAction;

    /// A console that plays lines and records what was shown.
    struct Script {
        lines: std::collections::VecDeque<String>,
        shown: String,
    }

    impl Script {
        fn new(lines: &[&str]) -> Self {
            Self {
                lines: lines.iter().map(|l| (*l).to_owned()).collect(),
                shown: String::new(),
            }
        }
    }

    impl Console for Script {
        fn say(&mut self, text: &str) {
            self.shown.push_str(text);
        }
        fn ask(&mut self, prompt: &str) -> Option<String> {
            self.shown.push_str(prompt);
            self.lines.pop_front()
        }
    }

    fn form(schema: serde_json::Value) -> ElicitRequestFormParams {
        serde_json::from_value(
            json!({"mode": "form", "message": "Tell me", "requestedSchema": schema}),
        )
        .unwrap()
    }

    fn run(schema: serde_json::Value, lines: &[&str]) -> (ElicitResult, String) {
        let mut s = Script::new(lines);
        let r = fill(&mut s, "srv", &form(schema), true);
        (r, s.shown)
    }

    #[test]
    fn a_titled_select_is_answered_by_number_and_lists_titles() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {"region": {"type": "string", "title": "Region", "oneOf": [
                {"const": "eu-west-1", "title": "Ireland (eu-west-1)"}, {"const": "us-east-1", "title": "Virginia"}]}},
                "required": ["region"]}),
            &["", "7", "2"],
        );
        assert_eq!(r.action, ElicitAction::Accept);
        assert_eq!(r.content_object()["region"], "us-east-1");
        assert!(shown.contains("1) Ireland (eu-west-1)\n"), "{shown}");
        assert!(shown.contains("2) Virginia (us-east-1)\n"), "{shown}");
        assert!(
            shown.contains("Region (required)\n  1) Ireland (eu-west-1)\n"),
            "{shown}"
        );
        assert!(shown.contains("Choose [1-2]: "), "{shown}");
        assert!(shown.contains(":decline") && shown.contains(":cancel"));
        assert!(shown.contains("choose one option"));
    }

    #[test]
    fn defaults_are_shown_and_used_on_empty_input() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {
                "name": {"type": "string", "default": "ada"},
                "size": {"type": "string", "enum": ["s", "m"], "default": "m"},
                "ok": {"type": "boolean", "default": true},
                "n": {"type": "integer", "default": 3}}}),
            &["", "", "", ""],
        );
        assert_eq!(
            serde_json::Value::Object(r.content_object()),
            json!({"name": "ada", "size": "m", "ok": true, "n": 3})
        );
        assert!(shown.contains("[ada]") && shown.contains("default 2") && shown.contains("[Y/n]"));
    }

    #[test]
    fn optional_fields_left_empty_are_omitted() {
        let (r, _) = run(
            json!({"type": "object", "properties": {"nick": {"type": "string"}}}),
            &[""],
        );
        assert_eq!(r.action, ElicitAction::Accept);
        assert!(r.content_object().is_empty());
    }

    #[test]
    fn required_fields_are_enforced() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {"nick": {"type": "string"}}, "required": ["nick"]}),
            &["", "bo"],
        );
        assert_eq!(r.content_object()["nick"], "bo");
        assert!(shown.contains("an answer is required"));
    }

    #[test]
    fn decline_and_cancel_work_at_any_prompt_and_eof_cancels() {
        let schema = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}}});
        assert_eq!(
            run(schema.clone(), &["x", ":decline"]).0,
            ElicitResult::decline()
        );
        assert_eq!(run(schema.clone(), &[":cancel"]).0, ElicitResult::cancel());
        assert_eq!(run(schema, &["x"]).0, ElicitResult::cancel());
    }

    #[test]
    fn formats_are_checked() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {
                "mail": {"type": "string", "format": "email"},
                "at": {"type": "string", "format": "date-time"},
                "day": {"type": "string", "format": "date"},
                "site": {"type": "string", "format": "uri"}}}),
            &[
                "nope",
                "a@b.example",
                "tomorrow",
                "2026-12-24T19:30:00Z",
                "2026-02-30",
                "2028-02-29",
                "not a uri",
                "https://x.example/",
            ],
        );
        assert_eq!(
            serde_json::Value::Object(r.content_object()),
            json!({"mail": "a@b.example", "at": "2026-12-24T19:30:00Z", "day": "2028-02-29", "site": "https://x.example/"})
        );
        assert_eq!(shown.matches("  ! not a valid").count(), 3, "{shown}");
        assert!(
            shown.contains("\"tomorrow\" is not a date and time; e.g. 2026-12-24 19:30 (UTC)"),
            "{shown}"
        );
    }

    #[test]
    fn date_times_are_read_forgivingly_and_sent_as_rfc_3339() {
        for (typed, sent) in [
            ("2026-12-24T19:30:00Z", "2026-12-24T19:30:00Z"),
            ("2026-12-24 19:30", "2026-12-24T19:30:00Z"),
            ("2026-12-24 19:30:15", "2026-12-24T19:30:15Z"),
            ("2026-12-24 19:30 UTC", "2026-12-24T19:30:00Z"),
            ("2026-12-24T19:30+01:00", "2026-12-24T19:30:00+01:00"),
            ("2026-12-24", "2026-12-24T00:00:00Z"),
        ] {
            assert_eq!(date_time(typed).unwrap(), sent, "{typed}");
        }
        for bad in [
            "tomorrow",
            "2026-02-30 10:00",
            "2026-12-24 25:00",
            "2026-12-24 1:2:3:4",
        ] {
            assert!(date_time(bad).is_err(), "{bad}");
        }
        let (r, _) = run(
            json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time", "title": "When"}}}),
            &["2026-12-24 19:30"],
        );
        assert_eq!(r.content_object()["at"], "2026-12-24T19:30:00Z");
    }

    #[test]
    fn the_hint_is_shown_once_per_run_and_labels_once_per_field() {
        let schema = json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time", "title": "When"}}, "required": ["at"]});
        let mut s = Script::new(&["2026-12-24 19:30"]);
        fill(&mut s, "srv", &form(schema.clone()), false);
        assert!(!s.shown.contains(":decline"), "{}", s.shown);
        assert_eq!(s.shown.matches("When").count(), 1, "{}", s.shown);
        let (_, shown) = run(schema, &["2026-12-24 19:30"]);
        assert_eq!(shown.matches(":decline").count(), 1, "{shown}");
    }

    #[test]
    fn the_summary_sends_changes_or_refuses() {
        let lines = vec!["region: region = eu-west-1".to_owned()];
        let mut s = Script::new(&[""]);
        assert!(matches!(review(&mut s, &lines), Summary::Send));
        assert!(
            s.shown.contains("1) region: region = eu-west-1"),
            "{}",
            s.shown
        );
        let mut s = Script::new(&["7", "1"]);
        assert!(matches!(review(&mut s, &lines), Summary::Change(0)));
        assert!(s.shown.contains("type a number from 1 to 1"), "{}", s.shown);
        let mut s = Script::new(&[":decline"]);
        assert!(
            matches!(review(&mut s, &lines), Summary::Refuse(r) if r == ElicitResult::decline())
        );
        let mut s = Script::new(&[]);
        assert!(
            matches!(review(&mut s, &lines), Summary::Refuse(r) if r == ElicitResult::cancel())
        );
    }

    #[test]
    fn numbers_respect_kind_and_bounds() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {
                "n": {"type": "integer", "minimum": 1, "maximum": 10},
                "x": {"type": "number", "minimum": 0.5}}}),
            &["0", "2.5", "abc", "10", "0.1", "0.75"],
        );
        assert_eq!(
            serde_json::Value::Object(r.content_object()),
            json!({"n": 10, "x": 0.75})
        );
        assert!(shown.contains("whole number, 1 to 10"));
        assert!(shown.contains("at least 1, please"));
        assert!(shown.contains("is not a whole number"));
        assert!(shown.contains("at least 0.5, please"));
    }

    #[test]
    fn required_fields_refuse_an_empty_answer_and_ask_again() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {
                "n": {"type": "number", "title": "Count"},
                "b": {"type": "boolean", "title": "Sure"},
                "m": {"type": "array", "title": "Tags", "items": {"type": "string", "enum": ["x", "y"]}}},
                "required": ["n", "b", "m"]}),
            &["", "2.5", "", "y", "", "2"],
        );
        assert_eq!(
            serde_json::Value::Object(r.content_object()),
            json!({"n": 2.5, "b": true, "m": ["y"]})
        );
        assert_eq!(
            shown.matches("  ! an answer is required\n").count(),
            1,
            "{shown}"
        );
        assert!(
            shown.contains("  ! an answer is required: y or n\n"),
            "{shown}"
        );
        assert!(shown.contains("  ! choose at least 1\n"), "{shown}");
        // The label is the prompt, repeated only when the answer was refused.
        assert_eq!(
            shown.matches("Count (required) (number): ").count(),
            2,
            "{shown}"
        );
        assert_eq!(shown.matches("Sure (required)").count(), 2, "{shown}");
    }

    #[test]
    fn booleans_take_yes_and_no() {
        let (r, _) = run(
            json!({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}, "required": ["a", "b"]}),
            &["maybe", "YES", "", "n"],
        );
        assert_eq!(
            serde_json::Value::Object(r.content_object()),
            json!({"a": true, "b": false})
        );
    }

    #[test]
    fn multi_selects_take_several_numbers_or_values_within_bounds() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {
                "t": {"type": "array", "title": "Toppings", "minItems": 1, "maxItems": 2,
                      "items": {"anyOf": [{"const": "ch", "title": "Cheese"}, {"const": "ol", "title": "Olives"}, {"const": "ba", "title": "Basil"}]}},
                "u": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["b"]}}}),
            &["1,2,3", "9", "1, ba", ""],
        );
        assert_eq!(
            serde_json::Value::Object(r.content_object()),
            json!({"t": ["ch", "ba"], "u": ["b"]})
        );
        assert!(shown.contains("3) Basil (ba)"));
        assert!(shown.contains("choose at most 2"));
        assert!(shown.contains("[2]"));
    }

    #[test]
    fn legacy_enum_names_are_titles() {
        let (r, shown) = run(
            json!({"type": "object", "properties": {"c": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]}}}),
            &["g"],
        );
        assert_eq!(r.content_object()["c"], "g");
        assert!(shown.contains("1) Red (r)"));
    }
}
