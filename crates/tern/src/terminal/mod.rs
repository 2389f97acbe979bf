//! The person at the terminal as tern's input handlers: forms and URL
//! consent for elicitation, typed (or `--sampler`) replies for sampling,
//! `--root` folders for roots, and the progress line.
//!
//! Prompts go to standard error and answers come from standard input, one
//! question at a time even when a server asks several at once.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tern_client::{HandlerError, Question};

use crate::form::{self, Console};

mod elicit;
mod progress;
mod roots;
mod sampling;
mod url;

pub(crate) use elicit::{LivePresets, TerminalElicitation};
pub(crate) use progress::Progress;
pub(crate) use roots::roots;
pub(crate) use sampling::{Sampler, TerminalSampling};
pub(crate) use url::{check_url, open_required_pages};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What the run is doing, for what Ctrl-C cancels.
#[derive(Debug, Clone, Default)]
pub(crate) enum Phase {
    /// Nothing in flight, no question open.
    #[default]
    Idle,
    /// A request is in flight.
    InFlight(String),
    /// The person is asked (nothing in flight under MRTR).
    Question(String),
}

pub(crate) use crate::form::Summary;

/// Puts the terminal back as tern found it: raw mode off, the cursor shown.
pub(crate) fn restore() {
    if std::io::stderr().is_terminal() {
        let _ = crossterm::terminal::disable_raw_mode();
        let mut err = std::io::stderr();
        let _ = err.write_all(b"\x1b[?25h");
        let _ = err.flush();
    }
}

/// Clears an abandoned prompt, from its line down (the widget's thread is
/// left blocked on the terminal; tern exits without it).
pub(crate) fn clear_prompt() {
    if std::io::stderr().is_terminal() {
        let mut err = std::io::stderr();
        let _ = err.write_all(b"\r\x1b[J");
        let _ = err.flush();
    }
}

/// What the terminal shares across questions and with the command.
#[derive(Debug, Default)]
pub(crate) struct Session {
    /// One question on the terminal at a time, in the order they were
    /// asked: a round's questions are answered concurrently, and tokio's
    /// mutex queues its waiters first come, first served (a std mutex
    /// taken on the blocking threads let the second question jump ahead).
    turn: Arc<tokio::sync::Mutex<()>>,
    /// The person declined or cancelled something.
    refused: AtomicBool,
    /// Every key the server asked during this run.
    asked: Mutex<Vec<String>>,
    /// What the run is doing (for what Ctrl-C cancels).
    phase: Mutex<Phase>,
    /// The run-wide hint was shown.
    hinted: AtomicBool,
    /// The person answered a question this round.
    answered: AtomicBool,
    /// Names the server when its results do not (yet) say who it is.
    pub(crate) fallback_name: String,
    /// Names the server as this run's configuration does (the `--server`
    /// key, the command, the URL's host): who asks, whatever the server
    /// claims to be.
    pub(crate) local_name: String,
    /// The server is reached at a `--url` on this machine or a private
    /// network: it may ask to open a local page. A stdio server may not: it
    /// is often a bridge to a remote one (`mcp-remote`, say), whose URLs it
    /// passes on.
    pub(crate) local_server: bool,
    /// The server's URL, for an HTTP server.
    pub(crate) url: Option<String>,
    /// The progress line, closed before a prompt.
    pub(crate) progress: Progress,
    /// The task this run follows, if the call became one (for Ctrl-C).
    pub(crate) task: Mutex<Option<String>>,
    /// The pages a `-32042` (2025-11-25 URL elicitation required) named,
    /// for the command to offer and retry.
    pub(crate) pages: Mutex<Vec<tern_protocol::elicitation::ElicitRequestUrlParams>>,
    /// The live questions (a 2025 server's own requests) refused because
    /// tern may not prompt, for `tern questions --run` to show.
    pub(crate) refused_live: Mutex<Vec<(String, tern_protocol::InputRequest)>>,
}

impl Session {
    /// A session for the server described by `fallback_name`, named
    /// `local_name` by the run's configuration.
    pub(crate) fn new(fallback_name: String, local_name: String, url: Option<String>) -> Arc<Self> {
        let local_server = url.as_deref().is_some_and(|u| {
            tern_client::auth::Url::parse(u).is_ok_and(|u| tern_client::auth::is_local(&u))
        });
        Arc::new(Self {
            fallback_name,
            local_name,
            local_server,
            url,
            progress: Progress::new(std::io::stderr().is_terminal()),
            ..Self::default()
        })
    }

    /// The person declined or cancelled a question during this run.
    pub(crate) fn refused(&self) -> bool {
        self.refused.load(Ordering::SeqCst)
    }

    /// Records a refusal (a preset decline or cancel, say).
    pub(crate) fn refuse(&self) {
        self.refused.store(true, Ordering::SeqCst);
    }

    /// Records the keys of a round.
    pub(crate) fn asked(&self, keys: &[String]) {
        lock(&self.asked).extend(keys.iter().cloned());
    }

    /// Every key asked during this run, in order, once each.
    pub(crate) fn asked_keys(&self) -> Vec<String> {
        let mut keys: Vec<String> = Vec::new();
        for k in lock(&self.asked).iter() {
            if !keys.contains(k) {
                keys.push(k.clone());
            }
        }
        keys
    }

    /// Records what the run is doing.
    pub(crate) fn set_phase(&self, phase: Phase) {
        *lock(&self.phase) = phase;
    }

    /// What the run is doing.
    pub(crate) fn phase(&self) -> Phase {
        lock(&self.phase).clone()
    }

    /// The person answered something since the last call (and resets it).
    pub(crate) fn answered_by_person(&self) -> bool {
        self.answered.swap(false, Ordering::SeqCst)
    }

    /// "Sending your answers.", once per round.
    pub(crate) fn say_sending() {
        eprintln!("Sending your answers.");
    }

    /// The run-wide hint is due (true once).
    fn hint_due(&self) -> bool {
        !self.hinted.swap(true, Ordering::SeqCst)
    }

    /// The summary of a round's answers: send, change one, or refuse.
    pub(crate) async fn review(self: &Arc<Self>, lines: Vec<String>) -> Summary {
        self.with_terminal(move |_, console| form::review(console, &lines))
            .await
            .unwrap_or(Summary::Send)
    }

    /// Any of `keys` was asked during this run.
    pub(crate) fn was_asked(&self, keys: &[String]) -> bool {
        let asked = lock(&self.asked);
        keys.iter().any(|k| asked.contains(k))
    }

    /// A header line: who asks (named by the run's configuration, never
    /// by what the server claims), `verb`, what the question is for, and
    /// what the server calls itself (sanitised, as its claim).
    fn asker(&self, q: &Question, verb: &str) -> String {
        let who = &self.local_name;
        let mut line = if q.target.is_empty() {
            format!("{who} {verb}")
        } else {
            format!("{who} {verb}, for {}", tern::safe::line(&q.target))
        };
        if let Some(claim) = q.server.as_ref().map(claimed_name) {
            let _ = write!(line, "; it calls itself {claim}");
        }
        line
    }

    /// Runs `f` on the terminal, alone, off the async threads.
    async fn with_terminal<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&Self, &mut dyn Console) -> T + Send + 'static,
    ) -> Result<T, HandlerError> {
        let me = Arc::clone(self);
        let turn = Arc::clone(&self.turn).lock_owned().await;
        tokio::task::spawn_blocking(move || {
            let _turn = turn;
            me.progress.interrupt();
            let mut console = crate::prompt::console();
            f(&me, &mut *console)
        })
        .await
        .map_err(|e| HandlerError(format!("the terminal prompt failed: {e}")))
    }
}

/// What a server calls itself: its title and name and version, one-line
/// and safe, quoted as a claim.
pub(crate) fn claimed_name(info: &tern_protocol::Implementation) -> String {
    let name = tern::safe::line(&info.name);
    let version = tern::safe::line(&info.version);
    match info.title.as_deref().filter(|t| *t != info.name) {
        Some(title) => format!("\"{}\" ({name} {version})", tern::safe::line(title)),
        None => format!("\"{name}\" {version}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A round's questions are answered concurrently; the terminal takes
    /// them in the order they were asked, whichever blocking thread starts
    /// first.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn questions_take_the_terminal_in_the_order_they_were_asked() {
        let session = Session::new("s".into(), "s".into(), None);
        let order = Arc::new(Mutex::new(Vec::new()));
        let turns = (0..16).map(|i| {
            let order = Arc::clone(&order);
            let session = Arc::clone(&session);
            async move {
                session
                    .with_terminal(move |_, _| {
                        // A question held on screen a moment, so the ones
                        // behind it queue.
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        lock(&order).push(i);
                    })
                    .await
            }
        });
        futures_util::future::try_join_all(turns).await.unwrap();
        assert_eq!(*lock(&order), (0..16).collect::<Vec<_>>());
    }
}
