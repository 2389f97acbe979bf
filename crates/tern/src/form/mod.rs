//! Forms on the terminal: an elicitation's `requestedSchema` asked field by
//! field, in property order, with the checks the schema states (formats,
//! lengths, bounds, required fields). `:decline` and `:cancel` work at every
//! prompt, and the end of input counts as `:cancel`.
//!
//! The engine talks to a [`Console`], so tests script the person's lines.
//!
//! Here: the consoles' contracts, a form's and a round summary's flow, and
//! each field's header. Below it: `lines` (each field kind asked on a
//! line), `widgets` (each asked with a widget), `value` (the checks and
//! parsing of a typed answer both share).

mod lines;
mod value;
mod widgets;

use std::fmt::Write as _;

use indexmap::IndexMap;
use tern_protocol::elicitation::{
    ElicitRequestFormParams, ElicitResult, ElicitValue, PrimitiveSchema, TitledOption,
};

use lines::{ask_bool, ask_many, ask_number, ask_one, ask_text};
pub(crate) use value::{check_text, date_time, parse_number};
use widgets::rich_field;

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

#[cfg(test)]
#[allow(
    clippy::needless_pass_by_value,
    reason = "test helpers read best taking the schema by value"
)]
mod tests;
