//! The indicatif progress line: one per request, interrupted by prompts
//! and server output.

use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tern_protocol::progress::ProgressNotificationParams;

use super::lock;

/// The progress display on standard error (`indicatif`): on a terminal a
/// spinner while tern waits for the server and a bar redrawn in place for
/// progress; plain `progress:` lines otherwise.
#[derive(Debug, Default)]
pub(crate) struct Progress {
    tty: bool,
    bar: Mutex<Option<(ProgressBar, bool)>>,
}

const BAR: usize = 20;

impl Progress {
    pub(super) fn new(tty: bool) -> Self {
        Self {
            tty,
            bar: Mutex::new(None),
        }
    }

    /// Shows a spinner saying tern waits for `what` (on a terminal only).
    pub(crate) fn waiting(&self, what: &str) {
        if !self.tty {
            return;
        }
        let mut bar = lock(&self.bar);
        if bar.is_some() {
            return;
        }
        let spinner = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        spinner.set_style(
            ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        spinner.set_message(what.to_owned());
        spinner.enable_steady_tick(Duration::from_millis(120));
        *bar = Some((spinner, false));
    }

    /// Shows one notification.
    pub(crate) fn show(&self, p: &ProgressNotificationParams) {
        let message = tern::safe::line(p.message.as_deref().unwrap_or_default()).into_owned();
        let total = p.total.filter(|t| *t > 0.0);
        if !self.tty {
            let line = match total {
                Some(total) => {
                    let ratio = (p.progress / total).clamp(0.0, 1.0);
                    #[allow(
                        clippy::cast_possible_truncation,
                        clippy::cast_sign_loss,
                        clippy::cast_precision_loss,
                        reason = "ratio is clamped to 0..=1 and BAR is small"
                    )]
                    let (filled, percent) = (
                        (ratio * BAR as f64).round() as usize,
                        (ratio * 100.0).round() as u32,
                    );
                    format!(
                        "[{}{}] {percent:>3}% {message}",
                        "#".repeat(filled),
                        ".".repeat(BAR - filled)
                    )
                }
                None => format!("[{}] {message}", p.progress),
            };
            eprintln!("progress: {line}");
            return;
        }
        let mut slot = lock(&self.bar);
        let Some(total) = total else {
            // No total: the spinner tells the message.
            if let Some((bar, _)) = slot.as_ref() {
                bar.set_message(format!("{message} [{}]", p.progress));
            }
            return;
        };
        let is_bar = slot.as_ref().is_some_and(|(_, b)| *b);
        if !is_bar {
            if let Some((spinner, _)) = slot.take() {
                spinner.finish_and_clear();
            }
            let bar = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("[{bar:20}] {percent:>3}% {msg}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("##."),
            );
            *slot = Some((bar, true));
        }
        if let Some((bar, _)) = slot.as_ref() {
            let ratio = (p.progress / total).clamp(0.0, 1.0);
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "ratio is clamped to 0..=1"
            )]
            bar.set_position((ratio * 1000.0).round() as u64);
            bar.set_message(message);
            if p.progress >= total {
                bar.finish();
                *slot = None;
            }
        }
    }

    /// Ends the display: a spinner is cleared, an unfinished bar left as it
    /// stands (before a prompt, the result, or an error).
    pub(crate) fn interrupt(&self) {
        if let Some((bar, is_bar)) = lock(&self.bar).take() {
            if is_bar {
                bar.abandon();
            } else {
                bar.finish_and_clear();
            }
        }
    }
}
