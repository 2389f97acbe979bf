//! The two consoles behind [`Console`]:
//!
//! - on a terminal, `inquire` widgets: arrow-key selection and
//!   multi-selection, a yes/no confirmation, a line editor with defaults and
//!   validation messages shown as the person types; colour unless `NO_COLOR`
//!   is set. Esc steps out of a question (the form then offers to go back
//!   to it with what was typed, or to dismiss it); Ctrl-C (a key in raw
//!   mode) stops tern as the signal would ([`interrupted`]);
//! - otherwise, or with `TERN_PROMPTS=lines`, numbered lines on standard
//!   error read from standard input (pipes, scripts, tests).
//!
//! Both show what they are given through [`tern::safe`]: text through
//! [`tern::safe::text`], a widget's label, help, options and default
//! through [`tern::safe::line`].
//!
//! `inquire` was chosen over `dialoguer` and `cliclack` because its widgets
//! map one to one onto the form's field kinds (select, multi-select,
//! confirm, text with a validator), it reports a non-terminal instead of
//! failing late, and it draws on standard error, leaving standard output
//! to the result.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::LazyLock;

use inquire::ui::RenderConfig;
use inquire::validator::Validation;
use inquire::{Confirm, InquireError, MultiSelect, Select, Text};

use crate::form::{Check, Console, Reply, Widgets};
use tern::safe::line;

/// What a widget shows of `options`: each one-line and safe.
fn lines_of(options: &[String]) -> Vec<String> {
    options.iter().map(|o| line(o).into_owned()).collect()
}

/// Ctrl-C pressed inside a widget.
static INTERRUPTED: LazyLock<tokio::sync::Notify> = LazyLock::new(tokio::sync::Notify::new);

/// Ctrl-C was pressed inside a widget during this run.
static WAS_INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether Ctrl-C was pressed inside a widget during this run.
pub(crate) fn was_interrupted() -> bool {
    WAS_INTERRUPTED.load(std::sync::atomic::Ordering::SeqCst)
}

/// Resolves when the person pressed Ctrl-C inside a widget.
pub(crate) async fn interrupted() {
    INTERRUPTED.notified().await;
}

/// The console for this run: widgets on a terminal, lines otherwise.
pub(crate) fn console() -> Box<dyn Console> {
    let lines = std::env::var("TERN_PROMPTS").is_ok_and(|v| v == "lines");
    if !lines && std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
        if std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty()) {
            inquire::set_global_render_config(RenderConfig::empty());
        }
        Box::new(Rich)
    } else {
        Box::new(Lines)
    }
}

/// Lines: standard error out, standard input in.
pub(crate) struct Lines;

/// SGR reset: the attributes (colours, conceal, …) back to the default.
const SGR_RESET: &str = "\x1b[0m";

impl Console for Lines {
    fn say(&mut self, text: &str) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(tern::safe::text(text).as_bytes());
        let _ = err.flush();
    }

    fn mark(&mut self, text: &str) {
        if std::io::stderr().is_terminal() {
            let mut err = std::io::stderr().lock();
            let _ = err.write_all(SGR_RESET.as_bytes());
        }
        self.say(text);
    }

    fn ask(&mut self, prompt: &str) -> Option<String> {
        self.say(prompt);
        let mut line = String::new();
        match std::io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => {
                self.say("\n");
                None
            }
            Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_owned()),
        }
    }
}

/// `inquire` widgets.
struct Rich;

impl Console for Rich {
    fn say(&mut self, text: &str) {
        Lines.say(text);
    }

    fn mark(&mut self, text: &str) {
        Lines.mark(text);
    }

    fn ask(&mut self, prompt: &str) -> Option<String> {
        let prompt = line(prompt);
        match Text::new(prompt.trim_end().trim_end_matches(':')).prompt() {
            Ok(v) => Some(v),
            Err(e) => {
                let _: Reply<()> = refused(&e, String::new());
                None
            }
        }
    }

    fn widgets(&mut self) -> Option<&mut dyn Widgets> {
        Some(self)
    }
}

/// Esc steps out of the question, keeping `typed` (the form asks what
/// next); Ctrl-C dismisses it and stops tern; anything else (the terminal
/// went away) dismisses it.
fn refused<T>(e: &InquireError, typed: String) -> Reply<T> {
    match e {
        InquireError::OperationCanceled => Reply::Escape(typed),
        InquireError::OperationInterrupted => {
            WAS_INTERRUPTED.store(true, std::sync::atomic::Ordering::SeqCst);
            INTERRUPTED.notify_one();
            Reply::Cancel
        }
        _ => Reply::Cancel,
    }
}

/// Keeps what is typed in a text widget as it changes (inquire calls an
/// autocompleter on every edit; this one suggests nothing), so an Esc
/// does not lose it: inquire's cancel returns no text.
#[derive(Clone, Default)]
struct Typed(std::sync::Arc<std::sync::Mutex<String>>);

impl Typed {
    fn take(&self) -> String {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

impl inquire::Autocomplete for Typed {
    fn get_suggestions(&mut self, input: &str) -> Result<Vec<String>, inquire::CustomUserError> {
        input.clone_into(
            &mut self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        Ok(Vec::new())
    }

    fn get_completion(
        &mut self,
        _input: &str,
        _highlighted: Option<String>,
    ) -> Result<inquire::autocompletion::Replacement, inquire::CustomUserError> {
        Ok(None)
    }
}

impl Widgets for Rich {
    fn select(
        &mut self,
        label: &str,
        help: Option<&str>,
        options: &[String],
        default: Option<usize>,
    ) -> Reply<usize> {
        let label = line(label);
        let mut s =
            Select::new(&label, lines_of(options)).with_starting_cursor(default.unwrap_or(0));
        let help = help.map_or_else(
            || "↑↓ to move, Enter to choose, type to filter".to_owned(),
            |h| format!("{} (↑↓, Enter)", line(h)),
        );
        s = s.with_help_message(&help);
        match s.raw_prompt() {
            Ok(o) => Reply::Value(o.index),
            Err(e) => refused(&e, String::new()),
        }
    }

    fn multi(
        &mut self,
        label: &str,
        help: Option<&str>,
        options: &[String],
        defaults: &[usize],
        (min, max): (Option<u64>, Option<u64>),
    ) -> Reply<Vec<usize>> {
        let label = line(label);
        let help = help.map_or_else(
            || "↑↓ to move, Space to pick, Enter to answer".to_owned(),
            |h| format!("{} (↑↓, Space, Enter)", line(h)),
        );
        let m = MultiSelect::new(&label, lines_of(options))
            .with_default(defaults)
            .with_help_message(&help)
            .with_validator(
                move |chosen: &[inquire::list_option::ListOption<&String>]| {
                    let n = chosen.len() as u64;
                    Ok(match (min, max) {
                        (Some(min), _) if n < min => {
                            Validation::Invalid(format!("choose at least {min}").into())
                        }
                        (_, Some(max)) if n > max => {
                            Validation::Invalid(format!("choose at most {max}").into())
                        }
                        _ => Validation::Valid,
                    })
                },
            );
        match m.raw_prompt() {
            Ok(chosen) => Reply::Value(chosen.into_iter().map(|o| o.index).collect()),
            Err(e) => refused(&e, String::new()),
        }
    }

    fn confirm(&mut self, label: &str, help: Option<&str>, default: Option<bool>) -> Reply<bool> {
        // With a default inquire shows `(Y/n)` or `(y/N)`; without one it
        // shows nothing, so the label says it.
        let label = match default {
            Some(_) => line(label).into_owned(),
            None => format!("{} [y/n]", line(label)),
        };
        let help = help.map(line);
        let mut c = Confirm::new(&label);
        if let Some(d) = default {
            c = c.with_default(d);
        }
        if let Some(h) = &help {
            c = c.with_help_message(h);
        }
        match c.prompt() {
            Ok(v) => Reply::Value(v),
            Err(e) => refused(&e, String::new()),
        }
    }

    fn text(
        &mut self,
        label: &str,
        help: Option<&str>,
        default: Option<&str>,
        initial: Option<&str>,
        check: Check,
    ) -> Reply<String> {
        let label = line(label);
        let (help, default) = (help.map(line), default.map(line));
        let typed = Typed::default();
        let mut t = Text::new(&label)
            .with_autocomplete(typed.clone())
            .with_validator(move |v: &str| {
                Ok(match check(v.trim()) {
                    Ok(()) => Validation::Valid,
                    Err(why) => Validation::Invalid(why.into()),
                })
            });
        if let Some(d) = &default {
            t = t.with_default(d);
        }
        if let Some(i) = initial {
            t = t.with_initial_value(i);
        }
        if let Some(h) = &help {
            t = t.with_help_message(h);
        }
        match t.prompt() {
            Ok(v) => Reply::Value(v.trim().to_owned()),
            Err(e) => refused(&e, typed.take()),
        }
    }
}
