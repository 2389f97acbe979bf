//! The client subcommands: connect to a server ([`server`]), make one
//! request with the terminal as the input handlers, print the result, and
//! turn the outcome into an exit code ([`crate::exit`]).
//!
//! One module per command; a new client subcommand is an [`Op`] variant, an
//! arm of [`execute`] and its own module taking a [`Connected`]. Connecting,
//! timeouts, Ctrl-C and error advice are shared. The commands that do not
//! talk to a server as a client (`serve`, `servers`, `keys`, `login`,
//! `audit`) are modules here too, each with its own entry point.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tern_client::legacy::{DualEra, Era};
use tern_client::{CallOptions, Client, Completed, Limits, StaticRoots};
use tern_protocol::Implementation;

use crate::advice::with_last_words;
use crate::exit::{
    EXIT_INTERRUPTED, EXIT_NEEDS_INPUT, EXIT_OK, EXIT_REFUSED, EXIT_SERVER, EXIT_TRANSPORT,
    Failure, usage,
};
use crate::output;
use crate::rounds::{Activity, Driver, Ended, First};
use crate::terminal::LivePresets;
use crate::terminal::{Phase, Sampler, Session, TerminalElicitation, TerminalSampling};

use args::{InputArgs, preset_answers};
use server::{Build, ServerArgs, connect, label_of, local_name, remember_era, target};

mod access;
pub(crate) mod args;
pub(crate) mod audit;
mod call;
mod fetch;
pub(crate) mod gateway;
pub(crate) mod keys;
mod listen;
mod lists;
pub(crate) mod login;
pub(crate) mod park;
mod questions;
pub(crate) mod serve;
pub(crate) mod server;
pub(crate) mod servers;
mod skill;
mod task;

/// What `tern task` does with a task.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TaskAction {
    /// One `tasks/get`: the status (and result or error when it ended).
    Get,
    /// Follow it to its end, answering its questions.
    Wait,
    /// `tasks/cancel`.
    Cancel,
}

/// What to ask the server.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// `server/discover`.
    Discover,
    /// Every tool.
    Tools,
    /// Every prompt.
    Prompts,
    /// Every resource and resource template.
    Resources,
    /// Every skill (Skills extension).
    Skills,
    /// One skill's SKILL.md, or with `save` its files written there.
    Skill {
        /// Its name or the URI of its SKILL.md.
        name: String,
        /// `--save DIR`.
        save: Option<PathBuf>,
    },
    /// `tools/call`.
    Call {
        /// The tool.
        tool: String,
        /// `key=value` words.
        pairs: Vec<String>,
        /// `--args JSON`.
        args: Option<String>,
    },
    /// `prompts/get`.
    Prompt {
        /// The prompt.
        name: String,
        /// `key=value` words.
        pairs: Vec<String>,
    },
    /// `resources/read`.
    Read {
        /// The resource.
        uri: String,
    },
    /// `tern task get|wait|cancel ID`.
    Task {
        /// What to do.
        action: TaskAction,
        /// The task id.
        id: String,
    },
    /// `tern listen URI... [--task ID]...`.
    Listen {
        /// The resources to follow.
        uris: Vec<String>,
        /// The tasks to follow.
        tasks: Vec<String>,
    },
    /// `tern resume FILE`: a parked round continued.
    Resume {
        /// The round, as read from the file.
        pending: Box<tern_client::PendingRound>,
    },
    /// A parked task continued (`tern resume FILE` of a `pending-task/1`
    /// file): followed with the run's answers.
    ResumeTask {
        /// The tool whose call became the task.
        tool: String,
        /// The task.
        task: String,
    },
    /// The first round's questions of a `tools/call`.
    Questions {
        /// The tool.
        tool: String,
        /// `key=value` words.
        pairs: Vec<String>,
        /// `--args JSON`.
        args: Option<String>,
        /// `--run`: a 2025 server's tool may be run to see its questions.
        run: bool,
    },
}

#[allow(
    clippy::print_stdout,
    reason = "the result is the command's output, on standard output"
)]
fn emit(text: &str) {
    // The last guard: whatever a server put in the text, no control
    // character reaches standard output (a terminal or a pipe).
    print!("{}", tern::safe::text(text));
    let _ = std::io::stdout().flush();
}

/// `value` as exact JSON, C1, bidi and zero-width characters escaped too
/// ([`tern::safe::json`]).
fn emit_json(value: &impl Serialize) {
    emit(&format!("{}\n", tern::safe::json(value)));
}

/// A connected client and what the run knows around it.
pub(crate) struct Connected {
    /// The loop of rounds (and the client in it).
    pub(crate) driver: Driver,
    /// `--json`.
    pub(crate) json: bool,
    /// `--park FILE`: where a round the server asks is written.
    pub(crate) park: Option<park::Parking>,
    /// A server of either era: which one it speaks, once it answered.
    pub(crate) dual: Option<Arc<DualEra>>,
}

/// How many times a request is sent again after the person opened the
/// pages a `-32042` named.
const MAX_PAGE_RETRIES: u32 = 3;

impl Connected {
    /// The era the server speaks: known once it answered, else found with
    /// one `tools/list`; `None` for a server of one era (the demo).
    pub(crate) async fn era(&self) -> Result<Option<Era>, Failure> {
        let Some(dual) = &self.dual else {
            return Ok(None);
        };
        if dual.era().is_none() {
            let d = &self.driver;
            // Its outcome does not matter here: only the era it found.
            let _ = d.wait_raw("tools/list", d.client.list_tools()).await?;
        }
        Ok(dual.era())
    }

    /// With `--park`, refuses a 2025-11-25 server before the call: its
    /// questions are requests inside a live session, answered while the
    /// call is open, so there is no round to park (one `tools/list` finds
    /// the era when nothing was sent yet).
    pub(crate) async fn parkable(&self) -> Result<(), Failure> {
        if self.park.is_none() {
            return Ok(());
        }
        match self.era().await? {
            Some(Era::Legacy(version)) => Err(Failure {
                code: EXIT_NEEDS_INPUT,
                message: format!(
                    "cannot park: {} speaks {version}, whose questions are requests inside a live session (answered while the call is open), and a live session cannot be parked; only a 2026-07-28 round can. Answer them with --answer live-1=... / --answers FILE, or in a terminal, without --park",
                    self.driver.who()
                ),
            }),
            _ => Ok(()),
        }
    }

    /// Runs `first` to its end; a `-32042` (a 2025 server's pages to open
    /// first) is offered at a terminal and `first` sent again once they
    /// are open, [`MAX_PAGE_RETRIES`] times at most — for a call, a prompt
    /// and a read alike.
    pub(crate) async fn run(&self, first: &First) -> Result<Ended, Failure> {
        let mut retries = 0;
        loop {
            let f = match self.driver.run(first).await {
                Ok(ended) => return Ok(ended),
                Err(f) => f,
            };
            let pages = std::mem::take(
                &mut *self
                    .driver
                    .session
                    .pages
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if pages.is_empty() || !self.driver.interactive || retries == MAX_PAGE_RETRIES {
                return Err(f);
            }
            if !crate::terminal::open_required_pages(&self.driver.session, pages).await {
                return Err(f);
            }
            retries += 1;
        }
    }

    /// A call's end: its result printed, or its round parked.
    pub(crate) fn finish(&self, ended: Ended, tool: Option<&str>) -> Result<u8, Failure> {
        match ended {
            Ended::Done(done) => Ok(print_completed(&done, self.json, tool)),
            Ended::Parked(pending) => match &self.park {
                Some(parking) => park::write(self, parking, pending),
                None => Err(Failure {
                    code: EXIT_SERVER,
                    message: "a round was parked without --park".into(),
                }),
            },
            Ended::ParkedTask(task) => match &self.park {
                Some(parking) => park::write_task(self, parking, task),
                None => Err(Failure {
                    code: EXIT_SERVER,
                    message: "a task was parked without --park".into(),
                }),
            },
        }
    }
}

impl Can {
    /// Honest capabilities from the start: a handler is installed only when
    /// this run can answer with it, so neither a 2025 `initialize` nor a
    /// 2026 request declares what would be answered -32601. `tern
    /// questions` declares what a terminal would, and a run that parks
    /// what `tern resume` can answer (presets, a person, a `--sampler`).
    fn of(
        op: &Op,
        interactive: bool,
        presets: &crate::answers::PresetSpec,
        sampler: Option<&String>,
        parks: Option<&park::Parking>,
    ) -> Self {
        let wide = interactive
            || !presets.is_empty()
            || matches!(op, Op::Questions { .. })
            || parks.is_some();
        Self {
            elicit: wide,
            sample: wide || sampler.is_some(),
        }
    }
}

#[allow(
    clippy::too_many_lines,
    reason = "a run's set-up in the order it happens: arguments, client, driver, the work, its end"
)]
/// Runs one client subcommand; `Ok` carries the exit code of a completed
/// request (0, or 1 for `isError` / a refused question).
pub(crate) async fn run(
    op: Op,
    server: &ServerArgs,
    input: Option<&InputArgs>,
    park: Option<PathBuf>,
) -> Result<u8, Failure> {
    // Usage first: nothing starts when the line is wrong.
    let target = target(server)?;
    if !(server.timeout.is_finite() && server.timeout > 0.0) {
        return Err(usage("--timeout takes a number of seconds above 0"));
    }
    let timeout = Duration::from_secs_f64(server.timeout.min(86_400.0));
    let default_input = InputArgs::default();
    let input_given = input.is_some();
    let input = input.unwrap_or(&default_input);
    let presets = preset_answers(input)?;
    let no_input = input.no_input || matches!(op, Op::Questions { .. });
    let sampler = input.sampler.clone();
    let roots = crate::terminal::roots(&input.root).map_err(usage)?;
    // A run that parks never prompts: the round goes to the file.
    let interactive = std::io::stdin().is_terminal() && !no_input && park.is_none();
    let parking = park.map(|to| park::Parking {
        to,
        server: park::ParkedServer::of(server),
    });

    let (label, url) = label_of(&target);
    let session = Session::new(label, local_name(server, &target), url);
    let started = connect(&target, server.verbose, &session)?;
    let used = Arc::new(std::sync::Mutex::new(Vec::new()));
    let live = LivePresets::new(presets.clone(), Arc::clone(&used));
    let can = Can::of(
        &op,
        interactive,
        &presets,
        sampler.as_ref(),
        parking.as_ref(),
    );
    let client = build_client(
        started.build,
        &session,
        (interactive, can),
        (sampler.clone(), roots),
        live,
    );

    let activity = Arc::new(Activity::default());
    let progress_session = Arc::clone(&session);
    let progress_activity = Arc::clone(&activity);
    let mut options = CallOptions::default().with_progress(Arc::new(move |p| {
        progress_activity.touch();
        progress_session.progress.show(p);
    }));
    // A run that parks declares what `tern resume` can answer (presets,
    // a person, a --sampler), as a terminal run would.
    if !matches!(op, Op::Questions { .. }) && parking.is_none() {
        options.drop_elicitation = !interactive && presets.is_empty();
        options.drop_sampling = !interactive && sampler.is_none() && presets.is_empty();
    }
    let preset_refusals: Vec<String> = presets
        .keys()
        .into_iter()
        .filter(|k| presets.refuses(k))
        .collect();
    let connected = Connected {
        driver: Driver {
            client: client.clone(),
            session: Arc::clone(&session),
            presets,
            interactive,
            timeout,
            options,
            activity,
            watch: started.watch.clone(),
            used,
            park: parking.is_some(),
        },
        json: server.json,
        park: parking,
        dual: started.era.as_ref().map(|(_, dual)| Arc::clone(dual)),
    };

    // `tern listen` ends with Ctrl-C: it handles it itself.
    let listening = matches!(op, Op::Listen { .. });
    let work = execute(&connected, op);
    let outcome = if listening {
        Some(work.await)
    } else {
        tokio::select! {
            r = work => Some(r),
            () = interrupt() => None,
        }
    };
    session.progress.interrupt();
    let Some(outcome) = outcome else {
        // The request future is dropped: over stdio its exchange sent
        // notifications/cancelled, over HTTP its stream is closed.
        crate::terminal::restore();
        let message = interrupted(&client, &session, interactive).await;
        client.close().await;
        return Err(Failure {
            code: EXIT_INTERRUPTED,
            message,
        });
    };
    // Unused presets are worth a warning once the server answered or asked;
    // a call refused before that (a 401, a dead server) says only why.
    if input_given && (outcome.is_ok() || !session.asked_keys().is_empty()) {
        connected.driver.warn_unused();
    }
    remember_era(started.era.as_ref());
    // Whether the server had ended on its own, read before tern closes its
    // input (a healthy server ends then, and its chatter is no last words).
    let ended = started.watch.as_ref().filter(|w| w.exit().is_some());
    client.close().await;
    let code = match outcome {
        Ok(code) => code,
        Err(f) if server.verbose => return Err(f),
        Err(f) => return Err(with_last_words(f, ended, started.watch.as_ref())),
    };
    Ok(refused_or(code, &session, &preset_refusals))
}

/// `code`, or [`EXIT_REFUSED`] when a question was declined or cancelled
/// and the call still succeeded (with the server's fallback).
fn refused_or(code: u8, session: &Session, preset_refusals: &[String]) -> u8 {
    // A preset decline or cancel counts like one typed, once it was asked.
    if session.was_asked(preset_refusals) {
        session.refuse();
    }
    if session.refused() && code == EXIT_OK {
        eprintln!(
            "tern: you declined or cancelled a question; the result above is the server's fallback"
        );
        return EXIT_REFUSED;
    }
    code
}

/// What Ctrl-C cancelled.
fn interrupted_message(session: &Session) -> String {
    match session.phase() {
        Phase::InFlight(what) => {
            let how = if session.url.is_some() {
                "closed its HTTP stream"
            } else {
                "told the server with notifications/cancelled"
            };
            format!("interrupted: cancelled {what} in flight ({how})")
        }
        Phase::Question(keys) => {
            format!("interrupted at the question {keys}: abandoned the call, nothing was sent")
        }
        Phase::Idle => "interrupted".to_owned(),
    }
}

/// Which handlers a run installs.
#[derive(Clone, Copy)]
struct Can {
    elicit: bool,
    sample: bool,
}

/// The client, with the terminal as its handlers (those `can` allows).
fn build_client(
    build: Build,
    session: &Arc<Session>,
    (interactive, can): (bool, Can),
    (sampler, roots): (Option<String>, Vec<tern_protocol::roots::Root>),
    live: LivePresets,
) -> Client {
    let mut info = Implementation::new("tern", env!("CARGO_PKG_VERSION"));
    info.title = Some("tern command".into());
    // tern follows tasks (polls, asks their questions, offers to cancel
    // or leave one running on Ctrl-C), so it declares the extension.
    let mut builder = Client::builder().info(info).tasks(true);
    if can.elicit {
        builder = builder.elicitation(TerminalElicitation {
            session: Arc::clone(session),
            interactive,
            live: live.clone(),
        });
    }
    if can.sample {
        builder = builder.sampling(TerminalSampling {
            session: Arc::clone(session),
            interactive,
            sampler: sampler.map_or(Sampler::Human, Sampler::Command),
            live,
        });
    }
    // Roots only when --root gave some (a 2025 server may ask at any time;
    // the client answers it then too).
    if !roots.is_empty() {
        builder = builder.roots(StaticRoots(roots));
    }
    // tern's own loop bounds each leg (--timeout); the library's
    // whole-call deadline would count the time a person answers.
    build(builder.limits(Limits::default()))
}

/// Ctrl-C: the signal (line prompts, waiting) or the key inside a widget.
async fn interrupt() {
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if r.is_err() {
                // No signal handling here: only the widget's key.
                std::future::pending::<()>().await;
            }
        }
        () = crate::prompt::interrupted() => {}
    }
}

async fn execute(c: &Connected, op: Op) -> Result<u8, Failure> {
    match op {
        Op::Discover => lists::discover(c).await,
        Op::Tools => lists::tools(c).await,
        Op::Prompts => lists::prompts(c).await,
        Op::Resources => lists::resources(c).await,
        Op::Skills => skill::list(c).await,
        Op::Skill { name, save } => skill::show(c, &name, save.as_deref()).await,
        Op::Call { tool, pairs, args } => call::call(c, tool, &pairs, args.as_deref()).await,
        Op::Prompt { name, pairs } => fetch::prompt(c, name, &pairs).await,
        Op::Read { uri } => fetch::read(c, uri).await,
        Op::Questions {
            tool,
            pairs,
            args,
            run,
        } => questions::questions(c, &tool, (&pairs, args.as_deref()), run).await,
        Op::Task { action, id } => task::task(c, action, &id).await,
        Op::Listen { uris, tasks } => listen::listen(c, uris, tasks).await,
        Op::ResumeTask { tool, task } => {
            let mut sent = std::collections::HashMap::new();
            let ended = c.driver.follow_task(&tool, &task, &mut sent).await?;
            c.finish(ended, Some(&tool))
        }
        Op::Resume { pending } => {
            let tool = match &pending.call {
                tern_client::Call::Tool { name, .. } => Some(name.clone()),
                _ => None,
            };
            let ended = c.driver.resume(&pending).await?;
            c.finish(ended, tool.as_deref())
        }
    }
}

/// What Ctrl-C did: for a task being followed, what [`task_interrupted`]
/// chose; else what it cancelled.
async fn interrupted(client: &Client, session: &Session, interactive: bool) -> String {
    let following = session
        .task
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    match following {
        Some(id) => task::task_interrupted(client, session, &id, interactive).await,
        None => interrupted_message(session),
    }
}

/// Prints a result; its exit code.
fn print_completed(done: &Completed, json: bool, tool: Option<&str>) -> u8 {
    match done {
        Completed::Tool(r) => {
            if json {
                emit_json(r);
            } else if r.is_error() {
                eprint!("{}", tern::safe::text(&output::call(r)));
            } else {
                emit(&output::call(r));
            }
            if r.is_error() {
                eprintln!("tern: {} reported an error", tool.unwrap_or("the tool"));
                return EXIT_REFUSED;
            }
        }
        Completed::Prompt(r) => {
            if json {
                emit_json(r);
            } else {
                emit(&output::prompt(r));
            }
        }
        Completed::Resource(r) => {
            if json {
                emit_json(r);
            } else {
                emit(&output::read(r));
            }
        }
        #[allow(unreachable_patterns, reason = "Completed may grow variants")]
        _ => {
            eprintln!("tern: the server's result is of a kind this tern does not know");
            return EXIT_SERVER;
        }
    }
    EXIT_OK
}

/// The multi-threaded runtime of a command, or its exit status with the
/// reason printed.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, std::process::ExitCode> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("tern: cannot start the runtime: {e}");
            std::process::ExitCode::from(EXIT_TRANSPORT)
        })
}
