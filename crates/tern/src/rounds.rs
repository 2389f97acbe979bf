//! The command's own MRTR loop, on the client library's manual rounds
//! (`call_tool_once` / `answer` / `resume`), so that tern controls what a
//! person sees between legs:
//!
//! - each leg waits at most `--timeout` for the server, a progress
//!   notification counting as a sign of life; the time a person spends
//!   answering is not counted (nothing is in flight then, rule
//!   `answer-before-retry`);
//! - preset answers ([`PresetSpec`]) are built and checked against their
//!   question before anything is sent: one that does not fit stops the run
//!   at once; a key asked again with the same question after its preset was
//!   sent stops the run too (the server did not take it) instead of sending
//!   it until the round limit;
//! - the questions of one round are answered, the person's form answers
//!   summarised with a chance to change one, and "Sending your answers"
//!   said once per round;
//! - a stdio server that dies while a person answers is noticed at once.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tern_client::transport::stdio::ChildWatch;
use tern_client::{CallOptions, Client, ClientError, Completed, ErrorKind, PendingRound, Round};
use tern_protocol::elicitation::ElicitAction;
use tern_protocol::task::{Task, TaskStatus};
use tern_protocol::{InputRequest, InputResponse, InputResponses, JsonObject};
use tokio::time::Instant;

use crate::advice::failure;
use crate::answers::PresetSpec;
use crate::exit::{EXIT_NEEDS_INPUT, EXIT_SERVER, EXIT_TRANSPORT, EXIT_USAGE, Failure};
use crate::terminal::{Phase, Session, Summary};

/// The most rounds one call may take (the client library's default, rule
/// `bounded-rounds`).
const MAX_ROUNDS: u32 = tern_client::client::DEFAULT_MAX_ROUNDS;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A task's status as one line: `working: imported 3 of 20 rows`.
pub(crate) fn task_line(task: &Task) -> String {
    let status = match task.status {
        TaskStatus::Working => "working",
        TaskStatus::InputRequired => "waiting for answers",
        TaskStatus::Completed => "completed",
        TaskStatus::Failed => "failed",
        TaskStatus::Cancelled => "cancelled",
    };
    match &task.status_message {
        Some(m) => format!("{status}: {}", tern::safe::line(m)),
        None => status.to_owned(),
    }
}

/// The first leg of a call.
#[derive(Debug, Clone)]
pub(crate) enum First {
    /// `tools/call`.
    Tool(String, JsonObject),
    /// `prompts/get`.
    Prompt(String, Option<JsonObject>),
    /// `resources/read`.
    Read(String),
}

impl First {
    /// `tools/call NAME` and the like.
    pub(crate) fn describe(&self) -> String {
        match self {
            Self::Tool(n, _) => format!("tools/call {n}"),
            Self::Prompt(n, _) => format!("prompts/get {n}"),
            Self::Read(u) => format!("resources/read {u}"),
        }
    }
}

/// When the server last showed a sign of life.
#[derive(Debug)]
pub(crate) struct Activity(Mutex<Instant>);

impl Default for Activity {
    fn default() -> Self {
        Self(Mutex::new(Instant::now()))
    }
}

impl Activity {
    /// The server did something now.
    pub(crate) fn touch(&self) {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Instant::now();
    }

    fn last(&self) -> Instant {
        *self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One run's MRTR loop.
pub(crate) struct Driver {
    /// The client.
    pub(crate) client: Client,
    /// The terminal.
    pub(crate) session: Arc<Session>,
    /// The preset answers.
    pub(crate) presets: PresetSpec,
    /// The person may be asked.
    pub(crate) interactive: bool,
    /// How long one leg may wait without a sign of life.
    pub(crate) timeout: Duration,
    /// The call's options (progress, declared capabilities; no presets: they
    /// are answered here).
    pub(crate) options: CallOptions,
    /// The server's signs of life.
    pub(crate) activity: Arc<Activity>,
    /// A stdio child's death, told at once.
    pub(crate) watch: Option<ChildWatch>,
    /// The preset keys that answered a question (shared with the
    /// handlers that answer a 2025 server's live questions).
    pub(crate) used: Arc<Mutex<Vec<String>>>,
    /// `--park`: a round the presets do not answer ends the run as
    /// [`Ended::Parked`] instead of being asked.
    pub(crate) park: bool,
}

/// How a call's rounds ended.
#[derive(Debug)]
pub(crate) enum Ended {
    /// The final result.
    Done(Completed),
    /// The server asked and the run parks the round (`--park`).
    Parked(PendingRound),
    /// The call became a task, which asks what the presets do not answer,
    /// and the run parks it (`--park`): the task keeps its questions, so
    /// they are left to it, unanswered, not cancelled.
    ParkedTask(ParkedTask),
}

/// A task left asking by a run with `--park`.
#[derive(Debug)]
pub(crate) struct ParkedTask {
    /// The tool whose call became the task.
    pub(crate) tool: String,
    /// The task.
    pub(crate) task_id: String,
    /// What it asks.
    pub(crate) input_requests: tern_protocol::InputRequests,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("interactive", &self.interactive)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Driver {
    /// Who the server is, for messages: as the run's configuration names
    /// it ([`Session::local_name`]), not as it names itself.
    pub(crate) fn who(&self) -> String {
        self.session.local_name.clone()
    }

    /// Waits for one request (`what`), at most `--timeout` without a sign of
    /// life; a spinner shows on a terminal meanwhile.
    pub(crate) async fn wait<T>(
        &self,
        what: &str,
        request: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, Failure> {
        self.wait_raw(what, request)
            .await?
            .map_err(|e| failure(&e, &self.session))
    }

    /// [`Self::wait`], the client's own error given back as it is.
    pub(crate) async fn wait_raw<T>(
        &self,
        what: &str,
        request: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<Result<T, ClientError>, Failure> {
        self.session.set_phase(Phase::InFlight(what.to_owned()));
        self.session
            .progress
            .waiting(&format!("waiting for {}: {what}", self.who()));
        self.activity.touch();
        tokio::pin!(request);
        let outcome = loop {
            let deadline = self.activity.last() + self.timeout;
            tokio::select! {
                r = &mut request => break r,
                () = tokio::time::sleep_until(deadline) => {
                    if self.activity.last() + self.timeout <= Instant::now() {
                        self.session.progress.interrupt();
                        self.session.set_phase(Phase::Idle);
                        return Err(Failure {
                            code: EXIT_SERVER,
                            message: format!(
                                "{} did not answer {what} within {} (--timeout SECONDS to wait longer); the request was cancelled",
                                self.who(),
                                seconds(self.timeout)
                            ),
                        });
                    }
                }
            }
        };
        self.session.progress.interrupt();
        self.session.set_phase(Phase::Idle);
        Ok(outcome)
    }

    /// The first leg.
    pub(crate) async fn first(&self, first: &First) -> Result<Round<Completed>, Failure> {
        let what = first.describe();
        let options = &self.options;
        match first {
            First::Tool(name, args) => {
                let r = self
                    .wait(
                        &what,
                        self.client.call_tool_once(
                            name,
                            Some(Value::Object(args.clone())),
                            options,
                        ),
                    )
                    .await?;
                map_round(r, Completed::Tool)
            }
            First::Prompt(name, args) => {
                let r = self
                    .wait(
                        &what,
                        self.client.get_prompt_once(name, args.clone(), options),
                    )
                    .await?;
                map_round(r, Completed::Prompt)
            }
            First::Read(uri) => {
                let r = self
                    .wait(&what, self.client.read_resource_once(uri, options))
                    .await?;
                map_round(r, Completed::Resource)
            }
        }
    }

    /// The whole call: rounds until it completes, or until it is parked.
    pub(crate) async fn run(&self, first: &First) -> Result<Ended, Failure> {
        let what = first.describe();
        let round = self.first(first).await?;
        let tool = match first {
            First::Tool(name, _) => name.as_str(),
            _ => &what,
        };
        self.rounds(round, &what, tool, HashMap::new()).await
    }

    /// A parked round continued (`tern resume`): its questions answered
    /// like any other round's (presets first, each checked against its
    /// question; then the person, when there is one), the retry sent, and
    /// the rounds after it until the call completes or is parked again.
    pub(crate) async fn resume(&self, pending: &PendingRound) -> Result<Ended, Failure> {
        let what = format!("{} {}", pending.method(), pending.call.target());
        let mut sent: HashMap<String, InputRequest> = HashMap::new();
        let keys: Vec<String> = pending.input_requests.keys().cloned().collect();
        self.session.asked(&keys);
        self.announce(pending.round, &keys);
        let responses = self.answer(pending, &mut sent).await?;
        let leg = format!("{what} (round {})", pending.round + 1);
        let round = self
            .wait(&leg, self.client.resume(pending, &responses, &self.options))
            .await?;
        self.rounds(round, &what, pending.call.target(), sent).await
    }

    /// The rounds from `round` on; `tool` names a task's call.
    async fn rounds(
        &self,
        mut round: Round<Completed>,
        what: &str,
        tool: &str,
        // The question each preset answered, by key.
        mut sent: HashMap<String, InputRequest>,
    ) -> Result<Ended, Failure> {
        let mut shed = 0u32;
        loop {
            let pending = match round {
                Round::Complete(done) => return Ok(Ended::Done(done)),
                Round::InputRequired(pending) => pending,
                Round::Task(task) => {
                    return self.follow_task(tool, &task.task_id, &mut sent).await;
                }
                _ => {
                    return Err(Failure {
                        code: EXIT_SERVER,
                        message: "the server's reply is an outcome this tern does not know".into(),
                    });
                }
            };
            if pending.round >= MAX_ROUNDS {
                return Err(Failure {
                    code: EXIT_SERVER,
                    message: format!(
                        "{} asked for more than {MAX_ROUNDS} rounds of {what}; tern stopped",
                        self.who()
                    ),
                });
            }
            let keys: Vec<String> = pending.input_requests.keys().cloned().collect();
            // --park: a round the presets do not answer whole is the
            // caller's to keep (the questions, the state and the call are
            // all a later `tern resume` needs).
            if self.park && !keys.is_empty() {
                let preset = self.presets.keys();
                if !keys
                    .iter()
                    .all(|k| preset.contains(k) && !sent.contains_key(k))
                {
                    self.session.asked(&keys);
                    return Ok(Ended::Parked(pending));
                }
            }
            self.session.asked(&keys);
            self.announce(pending.round, &keys);
            let responses = if keys.is_empty() {
                // A state-only round (load shedding): retry after a
                // growing pause.
                tokio::time::sleep(backoff(shed)).await;
                shed += 1;
                InputResponses::new()
            } else {
                shed = 0;
                self.answer(&pending, &mut sent).await?
            };
            let leg = format!("{what} (round {})", pending.round + 1);
            round = self
                .wait(
                    &leg,
                    self.client.resume(&pending, &responses, &self.options),
                )
                .await?;
        }
    }

    /// Follows task `id` (made by a call of `tool`) to its end: its status
    /// on the progress line, its questions asked like any other (presets
    /// first), the answers sent with `tasks/update`. Ctrl-C meanwhile is the
    /// command's (it offers to cancel the task or leave it running). With
    /// `--park`, questions the presets do not answer end the run as
    /// [`Ended::ParkedTask`], the task left waiting for them.
    pub(crate) async fn follow_task(
        &self,
        tool: &str,
        id: &str,
        sent: &mut HashMap<String, InputRequest>,
    ) -> Result<Ended, Failure> {
        *lock(&self.session.task) = Some(id.to_owned());
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!(
                "tern: {tool} runs as task {} on {}; Ctrl-C to cancel it or leave it running",
                tern::safe::line(id),
                self.who()
            );
        }
        let handle = self.client.task(id);
        let mut answered: HashSet<String> = HashSet::new();
        let mut shown: Option<String> = None;
        loop {
            let task = self.task_request(id, "tasks/get", handle.get()).await?;
            let status = task_line(&task.task);
            if shown.as_deref() != Some(status.as_str()) {
                if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
                    eprintln!("tern: task {}: {status}", tern::safe::line(id));
                }
                shown = Some(status.clone());
            }
            match task.task.status {
                TaskStatus::Completed => {
                    *lock(&self.session.task) = None;
                    let result = task.call_tool_result().transpose().map_err(|e| Failure {
                        code: EXIT_SERVER,
                        message: format!("task {id} completed with a result tern cannot read: {e}"),
                    })?;
                    return result
                        .map(|r| Ended::Done(Completed::Tool(r)))
                        .ok_or_else(|| Failure {
                            code: EXIT_SERVER,
                            message: format!("task {id} completed without its result"),
                        });
                }
                TaskStatus::Failed => {
                    *lock(&self.session.task) = None;
                    // A task that failed for want of input (-32021, say: a
                    // question this run cannot answer) ends as a plain call
                    // would: exit 5 with the same advice.
                    let needs = task
                        .error
                        .as_ref()
                        .and_then(|e| crate::advice::needs_input(e, &self.session));
                    if let Some(f) = needs {
                        return Err(Failure {
                            code: f.code,
                            message: format!("task {id} failed: {}", f.message),
                        });
                    }
                    let why = task.error.map_or_else(
                        || "no error given".to_owned(),
                        |e| tern::safe::line(&e.to_string()).into_owned(),
                    );
                    return Err(Failure {
                        code: EXIT_SERVER,
                        message: format!("task {id} failed: {why}"),
                    });
                }
                TaskStatus::Cancelled => {
                    *lock(&self.session.task) = None;
                    return Err(Failure {
                        code: EXIT_SERVER,
                        message: format!("task {id} was cancelled"),
                    });
                }
                TaskStatus::InputRequired => {
                    let fresh: tern_protocol::InputRequests = task
                        .input_requests
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|(k, _)| !answered.contains(k))
                        .collect();
                    if fresh.is_empty() {
                        self.pause(&task.task, &status).await;
                        continue;
                    }
                    let keys: Vec<String> = fresh.keys().cloned().collect();
                    let responses = match self.task_asks(tool, id, fresh, sent).await? {
                        Ok(responses) => responses,
                        Err(parked) => return Ok(Ended::ParkedTask(parked)),
                    };
                    answered.extend(keys);
                    self.task_request(id, "tasks/update", handle.update(responses))
                        .await?;
                }
                TaskStatus::Working => self.pause(&task.task, &status).await,
            }
        }
    }

    /// Task `id` asks `fresh`: the answers to send with `tasks/update`, or
    /// (`--park`, the presets not answering them all) the task to park. A
    /// question nobody here can answer cancels the task: it would wait for
    /// an answer that never comes (as a plain call ends with its request).
    async fn task_asks(
        &self,
        tool: &str,
        id: &str,
        fresh: tern_protocol::InputRequests,
        sent: &mut HashMap<String, InputRequest>,
    ) -> Result<Result<InputResponses, ParkedTask>, Failure> {
        let keys: Vec<String> = fresh.keys().cloned().collect();
        self.session.asked(&keys);
        if self.park {
            let preset = self.presets.keys();
            if !keys
                .iter()
                .all(|k| preset.contains(k) && !sent.contains_key(k))
            {
                *lock(&self.session.task) = None;
                return Ok(Err(ParkedTask {
                    tool: tool.to_owned(),
                    task_id: id.to_owned(),
                    input_requests: fresh,
                }));
            }
        }
        if std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            eprintln!(
                "tern: task {}: {} asks before it can go on: {}",
                tern::safe::line(id),
                self.who(),
                tern::safe::line(&keys.join(", "))
            );
        }
        let pending = PendingRound::of_task(tool, fresh).map_err(|e| failure(&e, &self.session))?;
        match self.answer(&pending, sent).await {
            Ok(responses) => Ok(Ok(responses)),
            Err(mut f) if f.code == EXIT_NEEDS_INPUT => {
                *lock(&self.session.task) = None;
                let cancelled =
                    tokio::time::timeout(Duration::from_secs(5), self.client.task(id).cancel())
                        .await;
                let id = tern::safe::line(id);
                let _ = match cancelled {
                    Ok(Ok(())) => write!(f.message, " (task {id} was cancelled)"),
                    _ => write!(
                        f.message,
                        " (task {id} could not be cancelled: it waits for its answers until it expires)"
                    ),
                };
                Err(f)
            }
            Err(f) => Err(f),
        }
    }

    /// One task request, its `-32602` explained (over stdio a new server
    /// process knows only the tasks of a durable store).
    pub(crate) async fn task_request<T>(
        &self,
        id: &str,
        what: &str,
        request: impl Future<Output = Result<T, ClientError>>,
    ) -> Result<T, Failure> {
        match self.wait_raw(&format!("{what} {id}"), request).await? {
            Ok(t) => Ok(t),
            Err(e) if e.kind() == ErrorKind::TaskLost => {
                let mut message = format!(
                    "{} does not know task {id} (it expired, or belongs to someone else)",
                    self.who()
                );
                if self.session.url.is_none() {
                    message.push_str(
                        "; over stdio each tern run starts a new server process, which knows only the tasks of a durable store (e.g. tern serve demo --tasks sqlite:PATH)",
                    );
                }
                Err(Failure {
                    code: EXIT_SERVER,
                    message,
                })
            }
            Err(e) => Err(failure(&e, &self.session)),
        }
    }

    /// Waits before the next poll, the task's status on the progress line.
    async fn pause(&self, task: &Task, status: &str) {
        self.session
            .progress
            .waiting(&format!("task {}: {status}", task.task_id));
        let ms = task
            .poll_interval_ms
            .and_then(|ms| u64::try_from(ms).ok())
            .unwrap_or(1000)
            .clamp(50, 5000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        self.session.progress.interrupt();
    }

    /// "round N: SERVER asks ...", on a terminal.
    fn announce(&self, round: u32, keys: &[String]) {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return;
        }
        let who = self.who();
        if keys.is_empty() {
            eprintln!("tern: round {round}: {who} asks to retry (it is busy)");
        } else {
            eprintln!(
                "tern: round {round}: {who} asks before it can finish: {}",
                tern::safe::line(&keys.join(", "))
            );
        }
    }

    /// The answers to one round: presets first (checked), the rest from
    /// the person (or an error naming the key when tern may not ask).
    async fn answer(
        &self,
        pending: &PendingRound,
        sent: &mut HashMap<String, InputRequest>,
    ) -> Result<InputResponses, Failure> {
        let mut responses = InputResponses::new();
        let mut rest = pending.clone();
        rest.input_requests.clear();
        for (key, question) in &pending.input_requests {
            if sent.get(key).is_some_and(|q| q == question) {
                return Err(Failure {
                    code: EXIT_NEEDS_INPUT,
                    message: format!(
                        "{} asked `{key}` again after tern sent its preset answer: it did not take that answer. Check it against the question (tern questions shows the fields and allowed values), or answer it in a terminal without the preset",
                        self.who()
                    ),
                });
            }
            match self.presets.answer(key, question) {
                // A preset answers the question it first answered only; the
                // same key asking something else goes to the person.
                Some(Ok(answer)) if !sent.contains_key(key) => {
                    responses.insert(key.clone(), answer);
                    sent.insert(key.clone(), question.clone());
                    self.used
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(key.clone());
                }
                Some(Err(why)) if !sent.contains_key(key) => {
                    return Err(Failure {
                        code: EXIT_USAGE,
                        message: format!(
                            "the preset answer for `{key}` does not fit the question {} asked; nothing was sent: {why}",
                            self.who()
                        ),
                    });
                }
                _ => {
                    rest.input_requests.insert(key.clone(), question.clone());
                }
            }
        }
        if rest.input_requests.is_empty() {
            return Ok(responses);
        }
        let asked: Vec<String> = rest.input_requests.keys().cloned().collect();
        self.session.set_phase(Phase::Question(asked.join(", ")));
        let mut theirs = self.ask(&rest).await?;
        if self.interactive {
            theirs = self.review(&rest, theirs).await?;
        }
        if crate::prompt::was_interrupted() {
            // Ctrl-C inside a widget: nothing is sent; the command's
            // interrupt handler ends the run.
            std::future::pending::<()>().await;
        }
        if self.interactive && self.session.answered_by_person() {
            Session::say_sending();
        }
        self.session.set_phase(Phase::Idle);
        for (key, answer) in theirs {
            responses.insert(key, answer);
        }
        Ok(responses)
    }

    /// `rest`'s questions to the handlers (the person), while watching a
    /// stdio child: one that dies meanwhile ends the run at once.
    async fn ask(&self, rest: &PendingRound) -> Result<Vec<(String, InputResponse)>, Failure> {
        let options = self.options.clone();
        let answering = self.client.answer(rest, &options);
        let answers = match self.watch.clone() {
            Some(mut watch) => {
                tokio::select! {
                    r = answering => r,
                    exit = watch.exited() => {
                        crate::terminal::restore();
                        crate::terminal::clear_prompt();
                        return Err(Failure {
                            code: EXIT_TRANSPORT,
                            message: format!("{} went away while tern was asking you; nothing was sent. {exit}", self.session.fallback_name),
                        });
                    }
                }
            }
            None => answering.await,
        }
        .map_err(|e| failure(&e, &self.session))?;
        answers
            .decode_all()
            .map(|all| all.into_iter().collect())
            .map_err(|e| Failure {
                code: EXIT_SERVER,
                message: format!("an answer could not be read back: {e}"),
            })
    }

    /// The summary of the person's form answers, with a chance to change one
    /// before anything is sent.
    async fn review(
        &self,
        rest: &PendingRound,
        mut answers: Vec<(String, InputResponse)>,
    ) -> Result<Vec<(String, InputResponse)>, Failure> {
        loop {
            let accepted: Vec<(usize, String, JsonObject)> = answers
                .iter()
                .enumerate()
                .filter_map(|(i, (key, a))| match a {
                    InputResponse::Elicitation(r) if r.action == ElicitAction::Accept => {
                        Some((i, key.clone(), r.content_object()))
                    }
                    _ => None,
                })
                .filter(|(_, _, c)| !c.is_empty())
                .collect();
            if accepted.is_empty() {
                return Ok(answers);
            }
            let lines: Vec<String> = accepted
                .iter()
                .map(|(_, key, content)| {
                    let fields: Vec<String> = content
                        .iter()
                        .map(|(f, v)| match v {
                            Value::String(s) => format!("{f} = {s}"),
                            other => format!("{f} = {other}"),
                        })
                        .collect();
                    format!("{key}: {}", fields.join(", "))
                })
                .collect();
            match self.session.review(lines).await {
                Summary::Send => return Ok(answers),
                Summary::Refuse(result) => {
                    self.session.refuse();
                    for (i, _, _) in &accepted {
                        answers[*i].1 = InputResponse::Elicitation(result.clone());
                    }
                    return Ok(answers);
                }
                Summary::Change(n) => {
                    let Some((i, key, _)) = accepted.get(n) else {
                        continue;
                    };
                    let mut one = rest.clone();
                    one.input_requests.retain(|k, _| k == key);
                    if let Some((_, answer)) = self.ask(&one).await?.into_iter().next() {
                        answers[*i].1 = answer;
                    }
                }
            }
        }
    }

    /// Warns about preset keys no question used.
    pub(crate) fn warn_unused(&self) {
        let used = self
            .used
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let asked = self.session.asked_keys();
        for key in self.presets.keys() {
            if used.contains(&key) || asked.contains(&key) {
                continue;
            }
            let hint = crate::suggest::did_you_mean(&key, asked.iter().map(String::as_str));
            let asked_list = if asked.is_empty() {
                "no questions were asked".to_owned()
            } else {
                format!("asked: {}", asked.join(", "))
            };
            eprintln!(
                "tern: warning: the preset answer for `{key}` was not used: no question was asked under that key{} ({})",
                tern::safe::line(&hint),
                tern::safe::line(&asked_list)
            );
        }
    }
}

fn map_round<T>(r: Round<T>, f: impl FnOnce(T) -> Completed) -> Result<Round<Completed>, Failure> {
    match r {
        Round::Complete(done) => Ok(Round::Complete(f(done))),
        Round::InputRequired(p) => Ok(Round::InputRequired(p)),
        Round::Task(t) => Ok(Round::Task(t)),
        _ => Err(Failure {
            code: EXIT_SERVER,
            message: "the server's reply is an outcome this tern does not know".into(),
        }),
    }
}

/// Backoff before retrying a state-only round: 50 ms doubling to 2 s.
fn backoff(shed: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1 << shed.min(6))).min(Duration::from_secs(2))
}

/// `30 s`, `1.5 s`.
pub(crate) fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}
