//! The demo server (`tern serve demo`): the MRTR scenarios users meet in
//! practice, built only on `tern-server`'s public API.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tern_protocol::content::Role;
use tern_protocol::logging::LoggingLevel;
use tern_protocol::prompt::PromptMessage;
use tern_protocol::{ContentBlock, Implementation};
use tern_server::skill::SkillCatalog;
use tern_server::task::{MemoryTaskStore, TaskConfig, TaskStore};

use crate::imports::{IMPORTS_TEMPLATE, Imports};
use crate::ledger::{LEDGER_URI, Ledger};
use tern_server::{
    Answer, Args, BuildError, Ctx, Elicit, PromptDef, ResourceDef, ResourceTemplateDef, Server,
    ServerBuilder, TaskSupport, ToolDef, ToolError, Uri,
};

#[derive(Deserialize, JsonSchema)]
struct Provision {
    /// Name of the database to create.
    name: String,
}

/// Where the data will live.
#[derive(Debug, Deserialize, JsonSchema)]
enum RegionChoice {
    /// Ireland (eu-west-1)
    #[serde(rename = "eu-west-1")]
    #[schemars(rename = "eu-west-1")]
    EuWest1,
    /// Virginia (us-east-1)
    #[serde(rename = "us-east-1")]
    #[schemars(rename = "us-east-1")]
    UsEast1,
    /// Mumbai (ap-south-1)
    #[serde(rename = "ap-south-1")]
    #[schemars(rename = "ap-south-1")]
    ApSouth1,
}

impl RegionChoice {
    fn as_str(&self) -> &'static str {
        match self {
            Self::EuWest1 => "eu-west-1",
            Self::UsEast1 => "us-east-1",
            Self::ApSouth1 => "ap-south-1",
        }
    }
}

#[derive(Deserialize, JsonSchema)]
struct Region {
    /// Region
    region: RegionChoice,
}

async fn provision_database(ctx: Ctx, Args(a): Args<Provision>) -> Result<String, ToolError> {
    let question =
        Elicit::<Region>::form(format!("Which region should {} live in?", a.name)).key("region");
    let Answer::Accept(Region { region }) = ctx.ask(question).await? else {
        return Ok("Provisioning cancelled.".into());
    };
    Ok(format!(
        "Created database {} in {}.",
        a.name,
        region.as_str()
    ))
}

/// `provision_database` written declaratively: the region is a parameter
/// (`Asked<Region>`), asked before the body runs, under the same key
/// (`region`, from the type) and with the same message as the `ctx.ask`
/// twin above.
impl tern_server::Asks for Region {
    fn question(parts: &tern_server::handler::CallParts) -> Elicit<Self> {
        let name = parts.arguments()["name"].as_str().unwrap_or("the database");
        Elicit::form(format!("Which region should {name} live in?"))
    }
}

async fn provision_database_asked(
    Args(a): Args<Provision>,
    tern_server::Asked(region): tern_server::Asked<Region>,
) -> String {
    match region {
        Answer::Accept(Region { region }) => {
            format!("Created database {} in {}.", a.name, region.as_str())
        }
        _ => "Provisioning cancelled.".into(),
    }
}

#[derive(Deserialize, JsonSchema)]
struct Booking {
    /// The restaurant.
    restaurant: String,
}

/// How many people.
#[derive(Debug, Deserialize, JsonSchema)]
enum PartySize {
    /// 4 people
    #[serde(rename = "4")]
    #[schemars(rename = "4")]
    Four,
    /// 6 people
    #[serde(rename = "6")]
    #[schemars(rename = "6")]
    Six,
}

#[derive(Deserialize, JsonSchema)]
struct Party {
    /// Party size
    size: PartySize,
}

#[derive(Deserialize, JsonSchema)]
struct Time {
    /// When
    #[schemars(extend("format" = "date-time"))]
    at: String,
}

async fn book_table(ctx: Ctx, Args(b): Args<Booking>) -> Result<String, ToolError> {
    // Two independent questions, one round trip.
    let (party, time) = tokio::join!(
        ctx.ask(
            Elicit::<Party>::form(format!("How many people for {}?", b.restaurant)).key("party")
        ),
        ctx.ask(Elicit::<Time>::form("What time should the table be booked for?").key("time")),
    );
    let (Answer::Accept(Party { size }), Answer::Accept(Time { at })) = (party?, time?) else {
        return Ok("Booking cancelled.".into());
    };
    let people = match size {
        PartySize::Four => 4,
        PartySize::Six => 6,
    };
    Ok(format!(
        "Booked a table for {people} at {} for {at}.",
        b.restaurant
    ))
}

#[derive(Deserialize, JsonSchema)]
struct Transfer {
    /// Recipient account.
    to: String,
    /// Amount in cents.
    #[schemars(range(min = 1))]
    amount: u64,
    /// How long the bank takes to settle after the transfer is recorded, in
    /// milliseconds (0 to 10000, default 0): a window in which the outcome
    /// is not known yet, for showing what a duplicate or a crash then gets.
    #[serde(default)]
    #[schemars(range(max = 10_000))]
    settle_ms: u64,
}

#[derive(Deserialize, JsonSchema)]
struct Confirm {
    /// Confirm
    confirm: bool,
}

/// Transfers made by this process: the effect that must happen once.
pub static TRANSFERS: AtomicU64 = AtomicU64::new(0);

/// One demo process's transfers (`demo://ledger` without a fleet): the
/// lines, and the server's change announcer, so that a listener of
/// `demo://ledger` hears each transfer.
#[derive(Debug, Clone, Default)]
struct LocalLedger {
    lines: Arc<std::sync::Mutex<Vec<String>>>,
    changes: Arc<std::sync::OnceLock<tern_server::Changes>>,
}

impl LocalLedger {
    fn record(&self, amount: u64, to: &str) {
        self.lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(format!("{amount} {to}"));
        if let Some(changes) = self.changes.get() {
            changes.resource_updated(LEDGER_URI);
        }
    }

    fn text(&self) -> String {
        let lines = self
            .lines
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut text = String::new();
        for line in lines.iter() {
            text.push_str(line);
            text.push('\n');
        }
        text
    }
}

async fn transfer_funds(
    ctx: Ctx,
    Args(t): Args<Transfer>,
    ledger: Option<Ledger>,
    local: LocalLedger,
) -> Result<String, ToolError> {
    let message = format!(
        "Transfer {}.{:02} to {}?",
        t.amount / 100,
        t.amount % 100,
        t.to
    );
    match ctx
        .ask(Elicit::<Confirm>::form(message).key("confirm"))
        .await?
    {
        Answer::Accept(Confirm { confirm: true }) => {
            // The side effect runs only after every answer is in; the tool is
            // single-use and idempotent, so a duplicated retry does not repeat it.
            let n = if let Some(ledger) = ledger {
                // A fleet: the transfer is recorded where every replica
                // (and `demo://ledger`) sees it.
                ledger
                    .record(ctx.call_id(), t.amount, &t.to)
                    .await
                    .map_err(ToolError::new)?
            } else {
                // One process: its ledger, and its listeners told.
                let n = TRANSFERS.fetch_add(1, Ordering::SeqCst) + 1;
                local.record(t.amount, &t.to);
                n
            };
            if t.settle_ms > 0 {
                tokio::time::sleep(Duration::from_millis(t.settle_ms.min(10_000))).await;
            }
            Ok(format!(
                "Transferred {}.{:02} to {} (transfer #{n}).",
                t.amount / 100,
                t.amount % 100,
                t.to
            ))
        }
        _ => Ok("Transfer cancelled.".into()),
    }
}

/// `demo://ledger`: one line per transfer of the fleet (`AMOUNT_CENTS
/// RECIPIENT`), oldest first.
async fn read_ledger(ledger: Ledger) -> Result<String, ToolError> {
    let lines = ledger.lines().await.map_err(ToolError::new)?;
    let mut text = String::new();
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

#[derive(Deserialize, JsonSchema)]
struct Deploy {
    /// The service to deploy.
    service: String,
}

#[derive(Deserialize, JsonSchema)]
struct Go {
    /// Go ahead
    proceed: bool,
}

#[allow(
    deprecated,
    reason = "the demo shows deprecated logging beside progress"
)]
async fn deploy(ctx: Ctx, Args(d): Args<Deploy>) -> Result<String, ToolError> {
    let question =
        Elicit::<Region>::form(format!("Deploy {} to which region?", d.service)).key("region");
    let Answer::Accept(Region { region }) = ctx.ask(question).await? else {
        return Ok("Deployment cancelled.".into());
    };
    // The plan depends on the first answer, so it is a second round.
    let plan = format!(
        "Plan: build {0}, push the image, roll out 3 replicas of {0} in {1}. Proceed?",
        d.service,
        region.as_str()
    );
    match ctx.ask(Elicit::<Go>::form(plan).key("plan")).await? {
        Answer::Accept(Go { proceed: true }) => {}
        _ => return Ok("Deployment cancelled.".into()),
    }
    let steps = ["building", "pushing", "rolling out", "verifying"];
    let total = 4.0;
    for (done, step) in (0u8..).zip(steps) {
        ctx.progress(f64::from(done), Some(total), Some(step));
        ctx.log(
            LoggingLevel::Info,
            Some("deploy"),
            format!("{step} {}", d.service),
        );
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
    ctx.progress(total, Some(total), Some("done"));
    Ok(format!("Deployed {} to {}.", d.service, region.as_str()))
}

#[derive(Deserialize, JsonSchema)]
struct Connect {
    /// The service to connect (github, gitlab, …).
    service: String,
}

async fn connect_account(ctx: Ctx, Args(c): Args<Connect>) -> Result<String, ToolError> {
    // One flow id per logical call, kept across rounds in the sealed state.
    let flow = ctx
        .once("flow", async { format!("{:016x}", rand_u64()) })
        .await;
    let url = format!("https://auth.example.com/connect/{}?flow={flow}", c.service);
    let question = Elicit::url(
        format!("Sign in to {} to connect your account.", c.service),
        url,
    )
    .key("signin");
    match ctx.ask(question).await? {
        // URL mode: accept is consent only; a real server would now check its
        // own record of the sign-in for this flow id.
        Answer::Accept(()) => Ok(format!("Connected {} (flow {flow}).", c.service)),
        Answer::Decline => Ok(format!("{} was not connected.", c.service)),
        Answer::Cancel => Ok("Cancelled.".into()),
    }
}

fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish()
}

#[derive(Deserialize, JsonSchema)]
struct Summarize {
    /// The text to summarise.
    text: String,
}

#[allow(
    deprecated,
    reason = "the demo shows the deprecated sampling path on purpose"
)]
async fn summarize(ctx: Ctx, Args(s): Args<Summarize>) -> Result<String, ToolError> {
    let prompt = format!("Summarise in one sentence:\n\n{}", s.text);
    let reply = ctx
        .ask(tern_server::Sample::text(prompt, 200).key("summary"))
        .await?;
    Ok(format!(
        "Summary ({}): {}",
        reply.model,
        reply.text().unwrap_or("(no text)")
    ))
}

#[allow(
    deprecated,
    reason = "the demo shows the deprecated roots path on purpose"
)]
async fn workspace_files(ctx: Ctx) -> Result<String, ToolError> {
    let roots = ctx.ask(tern_server::ListRoots::new().key("roots")).await?;
    if roots.is_empty() {
        return Ok("The client shares no folders.".into());
    }
    let list: Vec<String> = roots
        .iter()
        .map(|r| {
            format!(
                "- {}{}",
                r.uri,
                r.name
                    .as_ref()
                    .map(|n| format!(" ({n})"))
                    .unwrap_or_default()
            )
        })
        .collect();
    Ok(format!(
        "The client shares {} folder(s):\n{}",
        roots.len(),
        list.join("\n")
    ))
}

#[derive(Deserialize, JsonSchema)]
struct Incident {
    /// The affected service.
    service: String,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Level {
    /// Minor
    Minor,
    /// Major
    Major,
    /// Critical
    Critical,
}

#[derive(Deserialize, JsonSchema)]
struct Severity {
    /// Severity
    severity: Level,
}

async fn incident_report(
    ctx: Ctx,
    Args(i): Args<Incident>,
) -> Result<Vec<PromptMessage>, ToolError> {
    let severity = match ctx
        .ask(
            Elicit::<Severity>::form(format!("How severe is the incident on {}?", i.service))
                .key("severity"),
        )
        .await?
    {
        Answer::Accept(Severity { severity }) => severity,
        _ => Level::Minor,
    };
    let text = format!(
        "Write a {severity:?} incident report for {}: impact, timeline, root cause, follow-ups.",
        i.service
    );
    Ok(vec![PromptMessage {
        role: Role::User,
        content: ContentBlock::text(text),
    }])
}

#[derive(Deserialize, JsonSchema)]
struct Name {
    /// Your name
    name: String,
}

async fn greeting(ctx: Ctx, Uri(uri): Uri) -> Result<String, ToolError> {
    let name = match ctx
        .ask(Elicit::<Name>::form("Who is reading the greeting?").key("reader"))
        .await?
    {
        Answer::Accept(Name { name }) => name,
        _ => "stranger".into(),
    };
    Ok(format!("Hello, {name}! You are reading {uri}."))
}

#[derive(Deserialize, JsonSchema)]
struct Import {
    /// How many rows to import (4 to 10000).
    rows: u32,
    /// A test's synchronisation point: once batch N is recorded, the
    /// import waits (its status says "paused after batch N") until it is
    /// cancelled or its process is killed. On the task's first run only,
    /// unless `pause_every_run`.
    #[serde(default)]
    pause_after_batch: Option<u32>,
    /// Pause at `pause_after_batch` on every run of the task (a task whose
    /// runner is killed each time it gets there).
    #[serde(default)]
    pause_every_run: bool,
    /// A test's synchronisation point inside the final step, which is not
    /// retry-safe: on the first run the import waits there (status
    /// "paused in commit") after its effect, until it is killed.
    #[serde(default)]
    pause_in_commit: bool,
}

/// What to do with the rows that failed validation.
#[derive(Debug, Deserialize, JsonSchema)]
enum OnErrorChoice {
    /// Skip them and import the rest
    #[serde(rename = "skip")]
    #[schemars(rename = "skip")]
    Skip,
    /// Stop the import here
    #[serde(rename = "abort")]
    #[schemars(rename = "abort")]
    Abort,
}

#[derive(Deserialize, JsonSchema)]
struct OnError {
    /// On error
    on_error: OnErrorChoice,
}

/// How long importing one row takes.
const ROW_TIME: Duration = Duration::from_millis(50);
/// How many rows of the first half fail validation.
const BAD_ROWS: u32 = 2;
/// Rows per batch: each batch is one retry-safe step, recorded once.
const BATCH_ROWS: u32 = 10;

/// Imports rows `from..to` of `total`, one [`ROW_TIME`] each, reporting
/// progress (a task's `statusMessage`); stops at the next row once the call
/// is cancelled. The rows done, and whether it stopped early.
async fn import_rows(ctx: &Ctx, from: u32, to: u32, total: u32) -> (u32, bool) {
    for row in from..to {
        if ctx.is_cancelled() {
            return (row, true);
        }
        tokio::time::sleep(ROW_TIME).await;
        let done = row + 1;
        ctx.progress(
            f64::from(done),
            Some(f64::from(total)),
            Some(&format!("imported {done} of {total} rows")),
        );
    }
    (to, false)
}

/// A test's synchronisation point: says so in the status, then waits until
/// the call is cancelled (or the process is killed).
async fn pause(ctx: &Ctx, at: &str) {
    ctx.progress(f64::MAX, None, Some(&format!("paused {at}")));
    ctx.cancelled().await;
}

/// The rows `from..to` in batches of [`BATCH_ROWS`], numbered from
/// `first`: each batch a retry-safe step made once by its idempotency key
/// (the task and the batch), recorded in `imports`. The rows done, whether
/// it stopped early, and the next batch number.
async fn import_batches(
    ctx: &Ctx,
    args: &Import,
    imports: &Imports,
    (from, to, first): (u32, u32, u32),
) -> Result<(u32, bool, u32), ToolError> {
    let total = args.rows;
    let key = import_key(ctx);
    let mut batch = first;
    let mut row = from;
    while row < to {
        let end = (row + BATCH_ROWS).min(to);
        let step = async {
            let (done, stopped) = import_rows(ctx, row, end, total).await;
            let line = format!("batch {batch} rows {row}-{}", done.saturating_sub(1));
            if done > row {
                imports.record(&key, batch, &line).await?;
            }
            Ok::<_, String>((done, stopped))
        };
        let (done, stopped) = ctx
            .once_retry_safe(&format!("batch-{batch}"), step)
            .await
            .map_err(ToolError::new)?;
        if stopped {
            return Ok((done, true, batch + 1));
        }
        if args.pause_after_batch == Some(batch) && (ctx.attempt() == 0 || args.pause_every_run) {
            pause(ctx, &format!("after batch {batch}")).await;
            return Ok((done, true, batch + 1));
        }
        row = end;
        batch += 1;
    }
    Ok((to, false, batch))
}

/// The key of this import's batches: its task id (every run of the task
/// shares it), or the call id inline.
fn import_key(ctx: &Ctx) -> String {
    ctx.task_id()
        .map_or_else(|| ctx.call_id().to_string(), str::to_owned)
}

/// A bulk import (Tasks extension, optional; durable): a task when the
/// client declares the extension, else inline through MRTR, where `ctx.once`
/// keeps the rows of the first half from being imported again on the retry.
/// As a task it survives its runner: each batch is a retry-safe `ctx.once`
/// step recorded once in the demo's imports (`demo://imports/{taskId}`),
/// and the final commit a step that is not retry-safe.
async fn import_dataset(
    ctx: Ctx,
    Args(a): Args<Import>,
    imports: Imports,
) -> Result<String, ToolError> {
    if !(4..=10_000).contains(&a.rows) {
        return Err(ToolError::new("rows must be between 4 and 10000"));
    }
    let total = a.rows;
    ctx.into_task().await;
    let half = total / 2;
    let (first, stopped, next) = import_batches(&ctx, &a, &imports, (0, half, 0)).await?;
    if stopped {
        return Err(ToolError::new(format!(
            "Import cancelled after {first} rows."
        )));
    }
    let question = Elicit::<OnError>::form(format!(
        "{BAD_ROWS} rows failed validation. Skip them, or abort the import?"
    ))
    .key("on_error");
    match ctx.ask(question).await? {
        Answer::Accept(OnError {
            on_error: OnErrorChoice::Skip,
        }) => {}
        _ => return Ok(format!("Import aborted after {first} rows.")),
    }
    let (done, stopped, _) = import_batches(&ctx, &a, &imports, (half, total, next)).await?;
    if stopped {
        return Err(ToolError::new(format!(
            "Import cancelled after {} rows.",
            done - BAD_ROWS
        )));
    }
    let imported = done - BAD_ROWS;
    // Not retry-safe (the line has no idempotency key): a runner that dies
    // in it leaves the task failed, naming it, never a second commit.
    let key = import_key(&ctx);
    ctx.once("commit", async {
        imports
            .append(&key, &format!("commit {imported} rows"))
            .await?;
        if a.pause_in_commit && ctx.attempt() == 0 {
            pause(&ctx, "in commit").await;
            return Err("Import cancelled while committing.".to_owned());
        }
        Ok::<_, String>(())
    })
    .await
    .map_err(ToolError::new)?;
    Ok(format!("Imported {imported} rows (skipped {BAD_ROWS})."))
}

/// `demo://imports/{taskId}`'s variable.
#[derive(Deserialize, JsonSchema)]
struct ImportId {
    #[serde(rename = "taskId")]
    task_id: String,
}

/// The lines of one import.
async fn imports_text(imports: &Imports, task: &str) -> Result<String, ToolError> {
    let lines = imports.lines(task).await.map_err(ToolError::new)?;
    let mut text = String::new();
    for line in lines {
        text.push_str(&line);
        text.push('\n');
    }
    Ok(text)
}

/// The nightly report (Tasks extension, required): about a second of work.
async fn nightly_report(ctx: Ctx) -> Result<String, ToolError> {
    for step in 1..=4u8 {
        if ctx.is_cancelled() {
            return Err(ToolError::new("Nightly report cancelled."));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
        ctx.progress(
            f64::from(step),
            Some(4.0),
            Some(&format!("report step {step} of 4")),
        );
    }
    Ok("Nightly report ready.".into())
}

/// The demo's skill (Skills extension): `skill://tern/demo-tour`, a tour of
/// the tools, with a reference file, embedded from `crates/tern/skills`.
///
/// # Panics
/// Never at run time: the embedded files are fixed, and the demo's tests
/// build this catalogue, so a SKILL.md that broke a rule fails them first.
pub fn skills() -> SkillCatalog {
    SkillCatalog::builder()
        .skill(
            "tern/demo-tour",
            [
                (
                    "SKILL.md",
                    include_str!("../skills/tern/demo-tour/SKILL.md"),
                ),
                (
                    "references/questions.md",
                    include_str!("../skills/tern/demo-tour/references/questions.md"),
                ),
            ],
        )
        .build()
        .expect("the demo's embedded skill follows the extension's rules")
}

/// The demo server's builder, for callers to add keys and limits.
pub fn builder() -> ServerBuilder {
    builder_with_ledger(None)
}

/// The demo's task settings: status polled every 200 ms.
pub fn task_config() -> TaskConfig {
    TaskConfig::default().poll_interval(Duration::from_millis(200))
}

/// The demo's builder; with a ledger (fleet mode), `transfer_funds` records
/// each transfer in it and `demo://ledger` reads them back.
pub fn builder_with_ledger(ledger: Option<Ledger>) -> ServerBuilder {
    builder_with_stores(ledger, Imports::memory())
}

/// [`builder_with_ledger`], `import_dataset` recording its batches in
/// `imports` (read back at `demo://imports/{taskId}`).
pub fn builder_with_stores(ledger: Option<Ledger>, imports: Imports) -> ServerBuilder {
    let info = Implementation {
        title: Some("tern demo".into()),
        description: Some("Every kind of question a 2026-07-28 server can ask: forms (one or two per round, dependent rounds), a sign-in page, a completion and the roots, with progress".into()),
        ..Implementation::new("tern-demo", env!("CARGO_PKG_VERSION"))
    };
    let import_imports = imports.clone();
    let import =
        move |ctx: Ctx, args: Args<Import>| import_dataset(ctx, args, import_imports.clone());
    let read_imports = move |Args(v): Args<ImportId>| {
        let imports = imports.clone();
        async move { imports_text(&imports, &v.task_id).await }
    };
    let transfer_ledger = ledger.clone();
    let local = LocalLedger::default();
    let transfer_local = local.clone();
    let transfer = move |ctx: Ctx, args: Args<Transfer>| {
        transfer_funds(ctx, args, transfer_ledger.clone(), transfer_local.clone())
    };
    let builder = Server::builder("tern-demo", env!("CARGO_PKG_VERSION"))
        .info(info)
        .task_config(task_config())
        .skills(skills())
        .instructions("A demo of MCP 2026-07-28 multi round-trip requests: each tool, the prompt and the resource asks the client something (a form, a sign-in page, a completion or the roots) before it answers. A tour of them is the skill skill://tern/demo-tour/SKILL.md.")
        .tool(ToolDef::new("provision_database", "Creates a database after asking which region it should live in", provision_database).elicits::<Region>())
        .tool(ToolDef::new("provision_database_asked", "provision_database written declaratively: the region is an Asked<Region> parameter", provision_database_asked).elicits::<Region>())
        .tool(ToolDef::new("book_table", "Books a restaurant table; asks party size and time in one round", book_table).elicits::<Party>().elicits::<Time>())
        .tool(
            ToolDef::new("transfer_funds", "Transfers money after an explicit confirmation (single use, idempotent retry)", transfer)
                .elicits::<Confirm>()
                .single_use()
                .idempotent_retry(),
        )
        .tool(ToolDef::new("deploy", "Deploys a service: asks the region, then confirms the plan, then reports progress", deploy).elicits::<Region>().elicits::<Go>())
        .tool(ToolDef::new("connect_account", "Connects an account through a sign-in page (URL-mode elicitation)", connect_account))
        .tool(ToolDef::new("summarize", "Summarises text with the client's model (sampling; deprecated)", summarize))
        .tool(ToolDef::new("workspace_files", "Lists the folders the client shares (roots; deprecated)", workspace_files))
        .tool(ToolDef::new("import_dataset", "Imports rows (about 50 ms each) in batches of 10; halfway asks what to do with the 2 that failed validation; a task when the client declares the Tasks extension, durable: a task whose server dies is finished by another, each batch once (see demo://imports/{taskId})", import).elicits::<OnError>().task(TaskSupport::Optional).durable("v1"))
        .tool(ToolDef::new("nightly_report", "Builds the nightly report (about 1 s); runs only as a task", nightly_report).task(TaskSupport::Required).task_from_start())
        .prompt(PromptDef::new("incident_report", "An incident report prompt; asks the severity first", incident_report).elicits::<Severity>())
        .resource_template(
            ResourceTemplateDef::new(IMPORTS_TEMPLATE, "imports", read_imports)
                .description("The batches of one import_dataset task, one line each: each batch once, however often its server died")
                .mime_type("text/plain"),
        )
        .resource(
            ResourceDef::new("demo://greeting", "greeting", greeting)
                .description("A greeting that asks who is reading it")
                .mime_type("text/plain"),
        );
    if let Some(ledger) = ledger {
        builder.resource(
            ResourceDef::new(LEDGER_URI, "ledger", move || read_ledger(ledger.clone()))
                .description(
                    "Every transfer of the fleet, one line each: amount in cents and recipient",
                )
                .mime_type("text/plain"),
        )
    } else {
        // One process: its own transfers, announced to listeners.
        let _ = local.changes.set(builder.changes());
        builder.resource(
            ResourceDef::new(LEDGER_URI, "ledger", move || {
                let text = local.text();
                async move { Ok::<_, ToolError>(text) }
            })
            .description("This process's transfers, one line each: amount in cents and recipient")
            .mime_type("text/plain"),
        )
    }
}

/// The task store named by `--tasks`: `memory` (the default) or
/// `sqlite:PATH` (durable: records and results survive a restart, so a
/// fresh `tern serve demo --stdio` child still knows them).
///
/// # Errors
/// An unknown form, or a SQLite file that cannot be opened.
pub fn task_store(spec: &str) -> Result<Arc<dyn TaskStore>, String> {
    if spec == "memory" {
        return Ok(Arc::new(MemoryTaskStore::new()));
    }
    match spec.strip_prefix("sqlite:") {
        #[cfg(feature = "sqlite")]
        Some(path) if !path.is_empty() => tern_sqlite::SqliteTaskStore::open(path)
            .map(|s| Arc::new(s) as Arc<dyn TaskStore>)
            .map_err(|e| format!("cannot open the task store {path}: {e}")),
        #[cfg(not(feature = "sqlite"))]
        Some(path) if !path.is_empty() => {
            Err(crate::built::without("--tasks sqlite:PATH", "sqlite"))
        }
        _ => Err(format!(
            "--tasks {spec}: expected `memory` or `sqlite:PATH`"
        )),
    }
}

/// The `--tokens` file: one `TOKEN PRINCIPAL` per line (blank lines and
/// `#` comments skipped), token to principal.
///
/// # Errors
/// A line without exactly two fields, or a token given twice.
pub fn tokens(text: &str) -> Result<HashMap<String, String>, String> {
    let mut map = HashMap::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [token, principal] = fields[..] else {
            return Err(format!("line {}: expected `TOKEN PRINCIPAL`", n + 1));
        };
        if map.insert(token.to_owned(), principal.to_owned()).is_some() {
            return Err(format!("line {}: this token is given twice", n + 1));
        }
    }
    if map.is_empty() {
        return Err("no tokens in the file".into());
    }
    Ok(map)
}

/// The demo server with default settings.
pub fn server() -> Result<Server, BuildError> {
    builder().build()
}
