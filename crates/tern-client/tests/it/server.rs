//! The tern server the client is tested against, the same in process, in a
//! child process and over HTTP. Its side effects are observed through its own
//! tools (`cancellations`), so a test asks them the same way whichever way
//! the server runs.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tern_server::task::{MemoryTaskStore, TaskConfig};
use tern_server::{
    Answer, Args, CompletionDef, Ctx, Elicit, KeyRing, PromptDef, ResourceDef, Server, ToolDef,
    ToolError,
};
use tern_test_support::mrtr::{
    Color, Name, ask_prompt, ask_resource, batch, login, roots, sample, until_valid,
};
use tokio::sync::watch;

/// Fixed keys, so a round sealed by one server process opens in another.
const KEYS: &str = "k1:HJwshgyxYHGHo34Km8vjEsH8_OYqBA7Ocx6guZcSytQ";

/// The server's name, as handlers see it in `Question::server` (rule
/// `embedded-request-trust`).
pub const NAME: &str = "client-fixture";

/// How long a server-side wait may take before the tool gives up.
const SERVER_WAIT: Duration = Duration::from_secs(20);

#[derive(Deserialize, JsonSchema)]
pub struct Confirm {
    /// Go ahead?
    pub ok: bool,
}

#[derive(Deserialize, JsonSchema)]
pub struct Tag {
    /// Which call this is.
    pub tag: String,
}

#[derive(Deserialize, JsonSchema)]
pub struct Label {
    /// Carried along, unused.
    #[serde(default)]
    #[allow(dead_code, reason = "only its presence in the arguments matters")]
    pub label: Option<String>,
}

#[derive(Deserialize, JsonSchema)]
pub struct Shed {
    /// Counts retries per tag.
    pub tag: String,
    /// How many state-only rounds before completing.
    pub times: u32,
}

#[derive(Deserialize, JsonSchema)]
pub struct AtLeast {
    /// Wait until this many cancellations were seen.
    pub at_least: u32,
}

/// What the server's tools remember within one process.
#[derive(Debug)]
struct State {
    /// How many handlers saw their request cancelled.
    cancellations: watch::Sender<u32>,
    /// State-only rounds given so far, per tag.
    shed: Mutex<HashMap<String, u32>>,
}

async fn greet(ctx: Ctx) -> Result<String, ToolError> {
    match ctx
        .ask(Elicit::<Name>::form("What is your name?").key("user_name"))
        .await?
    {
        Answer::Accept(Name { name }) => Ok(format!("Hello, {name}!")),
        Answer::Decline => Ok("declined".into()),
        Answer::Cancel => Ok("cancelled".into()),
    }
}

async fn name_for(ctx: Ctx, Args(t): Args<Tag>) -> Result<String, ToolError> {
    let Answer::Accept(Name { name }) = ctx
        .ask(Elicit::<Name>::form(format!("Name for {}?", t.tag)).key("user_name"))
        .await?
    else {
        return Ok(format!("{}: none", t.tag));
    };
    Ok(format!("{}: {name}", t.tag))
}

async fn three_rounds(ctx: Ctx, Args(_label): Args<Label>) -> Result<String, ToolError> {
    let Answer::Accept(Name { name }) = ctx
        .ask(Elicit::<Name>::form("Step 1: name?").key("step1"))
        .await?
    else {
        return Ok("stopped at 1".into());
    };
    let Answer::Accept(Color { color }) = ctx
        .ask(Elicit::<Color>::form(format!("Step 2: {name}'s colour?")).key("step2"))
        .await?
    else {
        return Ok("stopped at 2".into());
    };
    let Answer::Accept(Confirm { ok }) = ctx
        .ask(Elicit::<Confirm>::form(format!("Step 3: {name} likes {color}?")).key("step3"))
        .await?
    else {
        return Ok("stopped at 3".into());
    };
    Ok(format!("{name}/{color}/{ok}"))
}

async fn fallback(ctx: Ctx) -> Result<String, ToolError> {
    let question = Elicit::<Name>::form("Name?").key("name");
    if !ctx.can_ask(&question) {
        return Ok("fallback: no elicitation".into());
    }
    match ctx.ask(question).await? {
        Answer::Accept(Name { name }) => Ok(format!("asked: {name}")),
        _ => Ok("none".into()),
    }
}

/// Sheds load `times` times (state-only rounds), then completes.
#[allow(clippy::unused_async, reason = "handlers are async fns")]
async fn shed(state: Arc<State>, Args(s): Args<Shed>) -> Result<String, ToolError> {
    let mut counts = state.shed.lock().unwrap();
    let seen = counts.entry(s.tag).or_default();
    if *seen < s.times {
        *seen += 1;
        return Err(ToolError::retry_later());
    }
    Ok(format!("ready after {seen} retries"))
}

/// Reports progress once, then waits to be cancelled; the cancellation is
/// counted by a watcher task (the handler's future is dropped on cancel).
async fn hang(ctx: Ctx, state: Arc<State>) -> String {
    let watcher = ctx.clone();
    tokio::spawn(async move {
        if tokio::time::timeout(SERVER_WAIT, watcher.cancelled())
            .await
            .is_ok()
        {
            state.cancellations.send_modify(|n| *n += 1);
        }
    });
    ctx.progress(1.0, None, Some("started"));
    match tokio::time::timeout(SERVER_WAIT, ctx.cancelled()).await {
        Ok(()) => "cancelled".into(),
        Err(_) => "never cancelled".into(),
    }
}

/// How many requests were cancelled, once at least `at_least` were (or the
/// count when the server's wait ends).
async fn cancellations(state: Arc<State>, Args(a): Args<AtLeast>) -> String {
    let mut seen = state.cancellations.subscribe();
    let _ = tokio::time::timeout(SERVER_WAIT, seen.wait_for(|n| *n >= a.at_least)).await;
    let n = *seen.borrow();
    n.to_string()
}

/// A task from its first line that asks a name, reporting progress first
/// (a task's progress is its `statusMessage`).
async fn task_greet(ctx: Ctx) -> Result<String, ToolError> {
    ctx.progress(1.0, Some(2.0), Some("asking"));
    let Answer::Accept(Name { name }) = ctx
        .ask(Elicit::<Name>::form("Your name?").key("name"))
        .await?
    else {
        return Ok("no name".into());
    };
    Ok(format!("Hello from a task, {name}!"))
}

/// A task that runs until it is cancelled, then stops with a tool error
/// (which the server records as `cancelled`).
async fn task_hang(ctx: Ctx) -> Result<String, ToolError> {
    ctx.progress(1.0, None, Some("waiting to be cancelled"));
    match tokio::time::timeout(SERVER_WAIT, ctx.cancelled()).await {
        Ok(()) => Err(ToolError::new("stopped on cancel")),
        Err(_) => Ok("never cancelled".into()),
    }
}

/// A task that fails with a JSON-RPC error.
async fn task_fail() -> Result<String, ToolError> {
    Err(ToolError::protocol(tern_protocol::ErrorObject::new(
        -32000,
        "the job broke",
    )))
}

async fn progress(ctx: Ctx) -> String {
    for i in 1..=4u8 {
        ctx.progress(f64::from(i), Some(4.0), Some("working"));
    }
    "done".into()
}

/// The fixture server.
pub fn build() -> Server {
    let state = Arc::new(State {
        cancellations: watch::Sender::new(0),
        shed: Mutex::default(),
    });
    let builder = Server::builder(NAME, "1.0.0")
        .keys(KeyRing::parse(KEYS).unwrap())
        .progress_interval(Duration::ZERO)
        // Small pages, so every list the client reads spans several.
        .page_size(5)
        .task_store(Arc::new(MemoryTaskStore::new()))
        .task_config(TaskConfig::default().poll_interval(Duration::from_millis(20)));
    let changes = builder.changes();
    let touch = move || {
        let changes = changes.clone();
        async move {
            changes.tools_changed();
            "touched"
        }
    };
    let s = Arc::clone(&state);
    let shed_tool = move |args: Args<Shed>| shed(Arc::clone(&s), args);
    let s = Arc::clone(&state);
    let hang_tool = move |ctx: Ctx| hang(ctx, Arc::clone(&s));
    let s = Arc::clone(&state);
    let cancellations_tool = move |args: Args<AtLeast>| cancellations(Arc::clone(&s), args);
    builder
        .tool(ToolDef::new("greet", "Asks a name", greet).elicits::<Name>())
        .tool(ToolDef::new("name_for", "Asks a name for a tag", name_for))
        .tool(ToolDef::new("batch", "Two questions in one round", batch))
        .tool(ToolDef::new(
            "three_rounds",
            "Three dependent rounds",
            three_rounds,
        ))
        .tool(ToolDef::new("login", "URL mode", login))
        .tool(ToolDef::new("sample", "Sampling", sample))
        .tool(ToolDef::new("roots", "Roots", roots))
        .tool(ToolDef::new(
            "fallback",
            "Another path without elicitation",
            fallback,
        ))
        .tool(ToolDef::new(
            "until_valid",
            "Asks until satisfied",
            until_valid,
        ))
        .tool(ToolDef::new(
            "shed",
            "Sheds load, then completes",
            shed_tool,
        ))
        .tool(ToolDef::new("hang", "Waits to be cancelled", hang_tool))
        .tool(ToolDef::new(
            "cancellations",
            "Cancellations seen",
            cancellations_tool,
        ))
        .tool(ToolDef::new("progress", "Reports progress", progress))
        .tool(ToolDef::new("task_greet", "A task asking a name", task_greet).task_from_start())
        .tool(ToolDef::new("task_batch", "A task asking two", batch).task_from_start())
        .tool(ToolDef::new("task_hang", "A task waiting for cancel", task_hang).task_from_start())
        .tool(ToolDef::new("task_fail", "A task that fails", task_fail).task_from_start())
        .tool(ToolDef::new("touch", "Announces a tool list change", touch))
        .prompt(PromptDef::new(
            "ask_prompt",
            "Asks before answering",
            ask_prompt,
        ))
        .resource(ResourceDef::new("res://ask", "ask", ask_resource).mime_type("text/plain"))
        .completion(CompletionDef::prompt("ask_prompt", |r| async move {
            ["alice", "bob", "carol"]
                .iter()
                .filter(|n| n.starts_with(&r.value))
                .map(|n| (*n).to_owned())
                .collect()
        }))
        .build()
        .unwrap()
}
