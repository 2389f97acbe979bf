//! The person at the terminal as tern's input handlers: forms and URL
//! consent for elicitation, typed (or `--sampler`) replies for sampling,
//! `--root` folders for roots, and the progress line.
//!
//! Prompts go to standard error and answers come from standard input, one
//! question at a time even when a server asks several at once.

use std::fmt::Write as _;
use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tern_client::transport::BoxFuture;
use tern_client::{Elicitation, HandlerError, Question, Sampling};
use tern_protocol::content::Role;
use tern_protocol::content::TextContent;
use tern_protocol::elicitation::{
    ElicitAction, ElicitRequestFormParams, ElicitRequestParams, ElicitRequestUrlParams,
    ElicitResult,
};
use tern_protocol::progress::ProgressNotificationParams;
use tern_protocol::roots::Root;
use tern_protocol::sampling::{
    CreateMessageRequestParams, CreateMessageResult, SamplingContent, SamplingContentBlock,
    StopReason,
};
use tern_protocol::{InputRequest, InputResponse};
use tokio::io::AsyncWriteExt;

use crate::form::{self, CANCEL, Console, DECLINE, Input};

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
    /// One question on the terminal at a time.
    turn: Mutex<()>,
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
        tokio::task::spawn_blocking(move || {
            let _turn = lock(&me.turn);
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

/// Answers elicitations on the terminal.
#[derive(Debug)]
pub(crate) struct TerminalElicitation {
    /// The shared session.
    pub(crate) session: Arc<Session>,
    /// Prompting is allowed (stdin is a terminal and `--no-input` is off).
    pub(crate) interactive: bool,
    /// Preset answers to a 2025 server's live questions.
    pub(crate) live: LivePresets,
}

/// The preset answers of a 2025 server's live questions. The 2025 wire has
/// no question keys: the client library keys them `live-1`, `live-2`, … in
/// the order one call asks them ([`tern_client::client::live_key`]), and
/// `--answer live-1=…` answers the first. MRTR keys are answered by the
/// command's own loop before any handler is asked, so only live keys are
/// looked up here.
#[derive(Debug, Clone, Default)]
pub(crate) struct LivePresets {
    spec: crate::answers::PresetSpec,
    used: Arc<Mutex<Vec<String>>>,
}

impl LivePresets {
    /// `spec`'s answers, recording the keys used in `used`.
    pub(crate) fn new(spec: crate::answers::PresetSpec, used: Arc<Mutex<Vec<String>>>) -> Self {
        Self { spec, used }
    }

    /// The preset answer to the live question `key`, checked against it.
    fn answer(
        &self,
        key: &str,
        question: &InputRequest,
    ) -> Option<Result<InputResponse, HandlerError>> {
        if !key.starts_with("live-") {
            return None;
        }
        let answer = self.spec.answer(key, question)?;
        Some(match answer {
            Ok(answer) => {
                self.used
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(key.to_owned());
                Ok(answer)
            }
            Err(why) => Err(HandlerError(format!(
                "the preset answer for `{key}` does not fit the question; nothing was sent: {why}"
            ))),
        })
    }

    fn elicit(
        &self,
        key: &str,
        params: ElicitRequestParams,
    ) -> Option<Result<ElicitResult, HandlerError>> {
        self.answer(key, &InputRequest::elicit(params))
            .map(|a| match a? {
                InputResponse::Elicitation(result) => Ok(result),
                _ => Err(HandlerError(format!(
                    "the preset answer for `{key}` is not an elicitation answer"
                ))),
            })
    }
}

fn not_here(key: &str) -> HandlerError {
    HandlerError(format!(
        "`{key}` needs an answer and tern will not prompt here (standard input is not a terminal, or --no-input); preset it with --answer {key}=VALUE, --answer {key}.FIELD=VALUE or --answers FILE (tern questions shows the fields)"
    ))
}

impl TerminalElicitation {
    /// Asks on the terminal with `ask`, or refuses when prompting is not
    /// allowed; a decline or cancel stops further prompting this session.
    async fn prompt(
        &self,
        key: String,
        ask: impl FnOnce(&Session, &mut dyn Console) -> ElicitResult + Send + 'static,
    ) -> Result<ElicitResult, HandlerError> {
        if !self.interactive {
            return Err(not_here(&key));
        }
        let result = self.session.with_terminal(ask).await?;
        self.session.answered.store(true, Ordering::SeqCst);
        if result.action != ElicitAction::Accept {
            self.session.refuse();
        }
        Ok(result)
    }
}

impl Elicitation for TerminalElicitation {
    fn form(
        &self,
        question: Question,
        params: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        let key = question.key.clone();
        if let Some(preset) = self
            .live
            .elicit(&key, ElicitRequestParams::Form(params.clone()))
        {
            return Box::pin(std::future::ready(preset));
        }
        Box::pin(self.prompt(key, move |s, console| {
            let result = form::fill(console, &s.asker(&question, "asks"), &params, s.hint_due());
            s.answered.store(true, Ordering::SeqCst);
            result
        }))
    }

    fn url(
        &self,
        question: Question,
        params: ElicitRequestUrlParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        let key = question.key.clone();
        if let Some(preset) = self
            .live
            .elicit(&key, ElicitRequestParams::Url(params.clone()))
        {
            return Box::pin(std::future::ready(preset));
        }
        Box::pin(self.prompt(key, move |s, console| {
            url_consent(
                console,
                &s.asker(&question, "asks you to open a web page"),
                &params,
                s.local_server,
            )
        }))
    }

    fn supports_url(&self) -> bool {
        true
    }
}

/// What tern makes of a URL a server asks it to open.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UrlCheck {
    /// The URL as parsed and written again (what the opener is given), or
    /// `None` when tern refuses to open it.
    pub(crate) open: Option<String>,
    /// The host (and port) the page is on, as the parser reads it.
    pub(crate) host: String,
    /// Why tern will not open it.
    pub(crate) refusal: Option<String>,
    /// What the person should know before agreeing.
    pub(crate) warnings: Vec<String>,
}

/// Checks a URL elicitation's URL: only `https` (and `http`, with a
/// warning) is ever opened; any other scheme is refused (`javascript:`,
/// `file:`, `data:`, a word starting with `-` that is no URL at all); a host
/// on this machine or a private network is refused unless the server itself
/// is reached there (`local_server`: a local `--url`), since a remote
/// server has no business sending the browser to a local address (a page
/// that changes a router's settings, a development server's admin);
/// a user name or password before the host (`user@`) is flagged.
pub(crate) fn check_url(raw: &str, local_server: bool) -> UrlCheck {
    let refuse = |host: String, why: String| UrlCheck {
        open: None,
        host,
        refusal: Some(why),
        warnings: Vec::new(),
    };
    let Ok(url) = tern_client::auth::Url::parse(raw.trim()) else {
        return refuse(
            String::new(),
            "it is not an absolute URL (tern opens only https:// and http:// pages)".into(),
        );
    };
    let host = match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        (None, _) => String::new(),
    };
    let host = tern::safe::line(&host).into_owned();
    let mut warnings = Vec::new();
    match url.scheme() {
        "https" => {}
        "http" => warnings.push(
            "plain http: the page, and anything you type on it, travels unencrypted".to_owned(),
        ),
        other => {
            return refuse(
                host,
                format!(
                    "its scheme is {}: (tern opens only https:// and http:// pages)",
                    tern::safe::line(other)
                ),
            );
        }
    }
    if host.is_empty() {
        return refuse(host, "it names no host".into());
    }
    if tern_client::auth::is_local(&url) && !local_server {
        return refuse(
            host.clone(),
            format!(
                "{host} is this machine or a private network, and the server is not: a remote server may not send your browser there"
            ),
        );
    }
    if !url.username().is_empty() || url.password().is_some() {
        let user = if url.password().is_some() {
            format!("{}:…", url.username())
        } else {
            url.username().to_owned()
        };
        warnings.push(format!(
            "the URL puts `{}@` before its host, which can make it look like another site: the page is on {host}",
            tern::safe::line(&user)
        ));
    }
    UrlCheck {
        open: Some(url.to_string()),
        host,
        refusal: None,
        warnings,
    }
}

/// URL mode: show who asks and the whole URL, ask consent, open only with it
/// and only a URL [`check_url`] lets through. tern's own lines (the header,
/// `URL:`, `Host:`, the warnings) are [`Console::mark`]ed, after an SGR
/// reset.
fn url_consent(
    console: &mut dyn Console,
    asker: &str,
    params: &ElicitRequestUrlParams,
    local_server: bool,
) -> ElicitResult {
    let check = check_url(&params.url, local_server);
    console.mark(&format!("\n-- {asker} --\n"));
    console.say(&format!("{}\n", form::server_text(&params.message)));
    let mut lines = format!(
        "  URL:  {}\n  Host: {}\n",
        tern::safe::line(&params.url),
        if check.host.is_empty() {
            "(none)"
        } else {
            &check.host
        }
    );
    for w in &check.warnings {
        let _ = writeln!(lines, "  ! warning: {w}");
    }
    if let Some(why) = &check.refusal {
        let _ = writeln!(
            lines,
            "  ! tern will not open this URL: {why}. Declined for you."
        );
        console.mark(&lines);
        return ElicitResult::decline();
    }
    let _ = writeln!(
        lines,
        "(Accepting only opens the page; the server learns the outcome itself. Type {CANCEL} to dismiss.)"
    );
    console.mark(&lines);
    let Some(url) = check.open else {
        return ElicitResult::decline();
    };
    loop {
        match form::read(console, "Open this URL in your browser? [y/N]: ") {
            Input::Decline => {
                console.say("Declined.\n");
                return ElicitResult::decline();
            }
            Input::Cancel => {
                console.say("Cancelled.\n");
                return ElicitResult::cancel();
            }
            Input::Line(l) => match l.to_ascii_lowercase().as_str() {
                "y" | "yes" => {
                    match open_browser(&url) {
                        Ok(opener) => console.say(&format!(
                            "Opened with {opener}. Finish there; tern carries on.\n"
                        )),
                        Err(why) => console.say(&format!(
                            "Could not open a browser ({why}). Open this URL yourself:\n  {url}\n"
                        )),
                    }
                    return ElicitResult::consent();
                }
                "" | "n" | "no" => {
                    console.say("Declined.\n");
                    return ElicitResult::decline();
                }
                _ => console.say("  ! answer y or n\n"),
            },
        }
    }
}

/// Opens `url` (checked by [`check_url`] and written again by the URL
/// parser, so it starts with `https:` or `http:` and no opener reads it as
/// an option) with [`tern::login::browser_command`], as one argument; says
/// which.
fn open_browser(url: &str) -> Result<String, String> {
    let words = tern::login::browser_command();
    let (program, args) = words.split_first().ok_or("no browser command")?;
    std::process::Command::new(program)
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("{program}: {e}"))
        .and_then(|s| {
            if s.success() {
                Ok(program.clone())
            } else {
                Err(format!("{program} failed: {s}"))
            }
        })
}

/// Who writes sampling replies.
#[derive(Debug, Clone)]
pub(crate) enum Sampler {
    /// The person types them.
    Human,
    /// A command (run by `sh -c`) reads the prompt on stdin and writes the
    /// reply on stdout.
    Command(String),
}

/// Answers sampling requests.
#[derive(Debug)]
pub(crate) struct TerminalSampling {
    /// The shared session.
    pub(crate) session: Arc<Session>,
    /// Prompting is allowed.
    pub(crate) interactive: bool,
    /// Who replies.
    pub(crate) sampler: Sampler,
    /// Preset answers to a 2025 server's live questions.
    pub(crate) live: LivePresets,
}

/// The conversation as plain text: the system prompt, then each message
/// (labelled when there is more than one speaker or a system prompt).
pub(crate) fn prompt_text(params: &CreateMessageRequestParams) -> String {
    let plain = params.system_prompt.is_none()
        && params.messages.len() == 1
        && params.messages[0].role == Role::User;
    let mut parts = Vec::new();
    if let Some(system) = &params.system_prompt {
        parts.push(format!("System: {system}"));
    }
    for m in &params.messages {
        let text: Vec<String> = m
            .content
            .blocks()
            .iter()
            .map(|b| match b {
                SamplingContentBlock::Text(t) => t.text.clone(),
                SamplingContentBlock::Image(i) => format!("[image, {}]", i.mime_type),
                SamplingContentBlock::Audio(a) => format!("[audio, {}]", a.mime_type),
                SamplingContentBlock::ToolUse(t) => format!(
                    "[tool call {} {}]",
                    t.name,
                    serde_json::Value::Object(t.input.clone())
                ),
                SamplingContentBlock::ToolResult(r) => {
                    format!("[tool result for {}]", r.tool_use_id)
                }
            })
            .collect();
        let text = text.join("\n");
        if plain {
            parts.push(text);
        } else {
            let who = match m.role {
                Role::User => "User",
                Role::Assistant => "Assistant",
            };
            parts.push(format!("{who}: {text}"));
        }
    }
    parts.join("\n\n")
}

fn reply(text: String, model: String) -> CreateMessageResult {
    CreateMessageResult {
        role: Role::Assistant,
        content: SamplingContent::One(SamplingContentBlock::Text(TextContent::new(text))),
        model,
        stop_reason: Some(StopReason::EndTurn),
        meta: None,
    }
}

impl Sampling for TerminalSampling {
    fn create_message(
        &self,
        question: Question,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, HandlerError>> {
        Box::pin(async move {
            match self
                .live
                .answer(&question.key, &InputRequest::sampling(params.clone()))
            {
                Some(Ok(InputResponse::Sampling(reply))) => return Ok(*reply),
                Some(Ok(_)) => {
                    return Err(HandlerError(format!(
                        "the preset answer for `{}` is not a sampling reply",
                        question.key
                    )));
                }
                Some(Err(e)) => return Err(e),
                None => {}
            }
            let prompt = prompt_text(&params);
            match &self.sampler {
                Sampler::Command(command) => {
                    if std::io::stderr().is_terminal() {
                        let asker = self.session.asker(&question, "asks for a completion");
                        self.session.progress.interrupt();
                        eprintln!("tern: {asker}; running `{command}`");
                    }
                    let text = run_sampler(command, &prompt).await?;
                    Ok(reply(text, command.clone()))
                }
                Sampler::Human => {
                    if !self.interactive {
                        return Err(not_here(&question.key));
                    }
                    let max = params.max_tokens;
                    let text = self
                        .session
                        .with_terminal(move |s, console| {
                            console.mark(&format!(
                                "\n-- {} --\n(You are the model; at most ~{max} tokens.)\n",
                                s.asker(&question, "asks for a completion"),
                            ));
                            console.say(&format!(
                                "{}\n(Type the reply and end it with an empty line; type {DECLINE} or {CANCEL} to refuse, which stops the call.)\n",
                                form::server_text(&prompt)
                            ));
                            let mut lines: Vec<String> = Vec::new();
                            loop {
                                let prompt = if lines.is_empty() { "> " } else { ". " };
                                match console.ask(prompt) {
                                    None => return None,
                                    Some(l) if matches!(l.trim(), DECLINE | CANCEL) => return None,
                                    Some(l) if l.trim().is_empty() && !lines.is_empty() => break,
                                    Some(l) if l.trim().is_empty() => {}
                                    Some(l) => lines.push(l),
                                }
                            }
                            console.say("Sending your reply.\n");
                            Some(lines.join("\n"))
                        })
                        .await?;
                    if let Some(text) = text {
                        Ok(reply(text, "human".into()))
                    } else {
                        self.session.refuse();
                        Err(HandlerError("you refused the sampling request".into()))
                    }
                }
            }
        })
    }
}

/// Runs the `--sampler` command with `prompt` on its standard input.
async fn run_sampler(command: &str, prompt: &str) -> Result<String, HandlerError> {
    let fail =
        |e: &dyn std::fmt::Display| HandlerError(format!("the sampler `{command}` failed: {e}"));
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(&e))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A sampler that does not read its input is not an error.
        let _ = stdin.write_all(prompt.as_bytes()).await;
        drop(stdin);
    }
    let out = child.wait_with_output().await.map_err(|e| fail(&e))?;
    if !out.status.success() {
        return Err(fail(&out.status));
    }
    let text = String::from_utf8(out.stdout).map_err(|e| fail(&e))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

/// `path` as a `file://` URI: absolute, each byte outside the unreserved set
/// and `/` percent-encoded (so a space is `%20`).
pub(crate) fn file_uri(path: &Path) -> String {
    let text = path.to_string_lossy().replace('\\', "/");
    let mut uri = String::from("file://");
    if !text.starts_with('/') {
        uri.push('/');
    }
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(char::from(b));
        } else {
            let _ = write!(uri, "%{b:02X}");
        }
    }
    uri
}

/// The roots for `--root` paths (default: the working folder).
pub(crate) fn roots(paths: &[std::path::PathBuf]) -> Result<Vec<Root>, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no working folder: {e}"))?;
    let paths = if paths.is_empty() {
        vec![cwd.clone()]
    } else {
        paths.to_vec()
    };
    paths
        .iter()
        .map(|p| {
            let abs = if p.is_absolute() {
                p.clone()
            } else {
                cwd.join(p)
            };
            let abs = abs.canonicalize().unwrap_or(abs);
            let mut root = Root::new(file_uri(&abs));
            root.name = abs.file_name().map(|n| n.to_string_lossy().into_owned());
            Ok(root)
        })
        .collect()
}

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
    fn new(tty: bool) -> Self {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tern_protocol::sampling::SamplingMessage;

    #[test]
    fn only_https_and_http_urls_are_opened() {
        let ok = check_url("https://auth.example/start?x=1", false);
        assert_eq!(ok.open.as_deref(), Some("https://auth.example/start?x=1"));
        assert_eq!(ok.host, "auth.example");
        assert!(ok.warnings.is_empty() && ok.refusal.is_none());
        let http = check_url("http://auth.example:8080/", false);
        assert!(http.open.is_some());
        assert!(http.warnings[0].contains("plain http"), "{http:?}");
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,<script>x</script>",
            "-x",
            "--new-window=evil",
            "ftp://files.example/x",
            "auth.example/no-scheme",
        ] {
            let c = check_url(bad, true);
            assert!(c.open.is_none() && c.refusal.is_some(), "{bad}: {c:?}");
        }
    }

    #[test]
    fn local_hosts_are_opened_only_for_a_local_server() {
        for local in [
            "http://127.0.0.1:8080/x",
            "http://localhost/",
            "https://192.168.0.1/",
            "http://169.254.169.254/latest",
            "http://[::1]/",
        ] {
            let remote = check_url(local, false);
            assert!(remote.open.is_none(), "{local}: {remote:?}");
            assert!(
                remote
                    .refusal
                    .as_deref()
                    .unwrap()
                    .contains("private network"),
                "{remote:?}"
            );
            assert!(check_url(local, true).open.is_some(), "{local}");
        }
    }

    #[test]
    fn userinfo_is_flagged_and_the_host_is_the_real_one() {
        let c = check_url("https://login.bank.example@evil.example/", false);
        assert_eq!(c.host, "evil.example");
        assert!(c.open.is_some());
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("`login.bank.example@`") && w.contains("evil.example")),
            "{c:?}"
        );
        let c = check_url("https://u:secret@evil.example/", false);
        assert!(c.warnings.iter().any(|w| w.contains("`u:…@`")), "{c:?}");
        assert!(!c.warnings.iter().any(|w| w.contains("secret")), "{c:?}");
    }

    #[test]
    fn a_url_with_control_characters_is_opened_only_as_the_parser_writes_it() {
        let c = check_url("https://evil.example/a b\u{1b}[8m", false);
        let open = c.open.unwrap();
        assert!(!open.contains(['\u{1b}', ' ']), "{open}");
        assert!(open.starts_with("https://evil.example/"), "{open}");
    }

    #[test]
    fn file_uris_are_percent_encoded() {
        assert_eq!(
            file_uri(Path::new("/home/ada/my project")),
            "file:///home/ada/my%20project"
        );
        assert_eq!(file_uri(Path::new("/a/é#")), "file:///a/%C3%A9%23");
    }

    #[test]
    fn the_default_root_is_the_working_folder() {
        let roots = roots(&[]).unwrap();
        assert_eq!(roots.len(), 1);
        assert!(roots[0].uri.starts_with("file:///"));
    }

    #[test]
    fn a_single_user_message_is_the_prompt_itself() {
        let mut p = CreateMessageRequestParams {
            messages: vec![SamplingMessage::user_text("Summarise: x")],
            max_tokens: 10,
            ..Default::default()
        };
        assert_eq!(prompt_text(&p), "Summarise: x");
        p.system_prompt = Some("Be brief".into());
        assert_eq!(prompt_text(&p), "System: Be brief\n\nUser: Summarise: x");
    }

    #[tokio::test]
    async fn a_sampler_command_reads_the_prompt_and_writes_the_reply() {
        assert_eq!(run_sampler("tr a-z A-Z", "hello\n").await.unwrap(), "HELLO");
        assert!(run_sampler("exit 3", "x").await.is_err());
    }
}
