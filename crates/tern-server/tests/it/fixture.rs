//! A server whose tools exercise every MRTR path.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tern_protocol::content::ResourceContents;
use tern_protocol::sampling::{CreateMessageRequestParams, SamplingMessage};
use tern_protocol::tool::Tool;
use tern_server::testing::TestClient;
use tern_server::{
    Answer, Args, CompletionDef, Ctx, Elicit, KeyRing, PromptDef, ResourceDef, ResourceTemplateDef,
    Server, ServerBuilder, ToolDef, ToolError,
};
pub use tern_test_support::mrtr::{Color, Name, Who};
use tern_test_support::mrtr::{ask_prompt, ask_resource, batch, login, roots, sample, until_valid};

/// The clock tests move by hand: the one the store contract suites use.
pub use tern_server::testing::ManualClock;

#[derive(Deserialize, JsonSchema)]
pub struct Confirm {
    pub ok: bool,
}

#[derive(Deserialize, JsonSchema)]
#[allow(dead_code, reason = "only its schema is used")]
pub struct Nested {
    pub inner: Name,
}

#[derive(Deserialize, JsonSchema)]
pub struct Count {
    /// How many.
    #[schemars(range(min = 1, max = 10))]
    pub count: u32,
}

/// Side effects the tests count.
#[derive(Debug, Default)]
pub struct Counters {
    pub once_runs: AtomicU64,
    pub payments: AtomicU64,
    pub greet_runs: AtomicU64,
    pub cancelled_seen: AtomicU64,
    pub flaky_calls: AtomicU64,
    pub slow_payments: AtomicU64,
    pub ready: std::sync::atomic::AtomicBool,
    pub cancel_seen: tokio::sync::Notify,
    /// `transfer`: effects made, audits written, and signals for each.
    pub transfers: AtomicU64,
    pub audits: AtomicU64,
    pub transfer_started: tokio::sync::Notify,
    pub transfer_done: tokio::sync::Notify,
    pub release_audit: tokio::sync::Notify,
    /// Runs of the guarded prompt and resource.
    pub prompt_runs: AtomicU64,
    pub read_runs: AtomicU64,
    /// `call_info`: the call id each leg saw.
    pub call_ids: std::sync::Mutex<Vec<String>>,
}

/// The fixture server's keys.
pub const KEYS: &str = "k1:HJwshgyxYHGHo34Km8vjEsH8_OYqBA7Ocx6guZcSytQ";

/// Two questions, and the call id and round of every leg.
async fn call_info(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    counters
        .call_ids
        .lock()
        .unwrap()
        .push(format!("{}@{}", ctx.call_id(), ctx.round()));
    ctx.ask(Elicit::<Name>::form("Name?").key("name")).await?;
    ctx.ask(Elicit::<Color>::form("Colour?").key("color"))
        .await?;
    Ok(ctx.call_id().to_string())
}

/// Any arguments, one question, then what `Debug` shows of its context.
async fn debug_ctx(ctx: Ctx) -> Result<String, ToolError> {
    ctx.ask(Elicit::<Name>::form("Name?").key("name")).await?;
    Ok(format!("{ctx:?}"))
}

async fn greet(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    counters.greet_runs.fetch_add(1, Ordering::SeqCst);
    match ctx
        .ask(Elicit::<Name>::form("What is your name?").key("user_name"))
        .await?
    {
        Answer::Accept(Name { name }) => Ok(format!("Hello, {name}!")),
        Answer::Decline => Ok("declined".into()),
        Answer::Cancel => Ok("cancelled".into()),
    }
}

/// The name, asked as a parameter (the twin of `greet`, which asks with
/// `ctx.ask`); its key comes from its type: `user_name`.
#[derive(Deserialize, JsonSchema)]
pub struct UserName {
    /// Your name
    pub name: String,
}

impl tern_server::Asks for UserName {
    fn question(_parts: &tern_server::handler::CallParts) -> Elicit<Self> {
        Elicit::form("What is your name?")
    }
}

/// A colour, asked as a parameter beside the name (the twin of `batch`).
#[derive(Deserialize, JsonSchema)]
pub struct FavouriteColor {
    /// Favourite colour
    pub color: String,
}

impl tern_server::Asks for FavouriteColor {
    fn question(_parts: &tern_server::handler::CallParts) -> Elicit<Self> {
        Elicit::form("Colour?")
    }
}

async fn greet_asked(tern_server::Asked(answer): tern_server::Asked<UserName>) -> String {
    match answer {
        Answer::Accept(UserName { name }) => format!("Hello, {name}!"),
        Answer::Decline => "declined".into(),
        Answer::Cancel => "cancelled".into(),
    }
}

async fn batch_asked(
    tern_server::Asked(name): tern_server::Asked<UserName>,
    tern_server::Asked(color): tern_server::Asked<FavouriteColor>,
) -> String {
    match (name, color) {
        (Answer::Accept(UserName { name }), Answer::Accept(FavouriteColor { color })) => {
            format!("{name} likes {color}")
        }
        _ => "incomplete".into(),
    }
}

async fn greet_unbound(ctx: Ctx) -> Result<String, ToolError> {
    match ctx
        .ask(Elicit::<Name>::form("What is your name?").key("user_name"))
        .await?
    {
        Answer::Accept(Name { name }) => Ok(format!("Hello, {name}!")),
        _ => Ok("no name".into()),
    }
}

async fn ask_all(ctx: Ctx) -> Result<String, ToolError> {
    let questions = ["a", "b", "c"].map(|k| Elicit::<Name>::form(format!("Name {k}?")).key(k));
    let answers = ctx.ask_all(questions).await?;
    let names: Vec<String> = answers
        .into_iter()
        .map(|a| a.accepted().map_or("-".into(), |n| n.name))
        .collect();
    Ok(names.join(","))
}

async fn three_rounds(ctx: Ctx) -> Result<String, ToolError> {
    let Answer::Accept(Name { name }) = ctx
        .ask(Elicit::<Name>::form("Step 1: name?").key("step1"))
        .await?
    else {
        return Ok("stopped at 1".into());
    };
    // The second question depends on the first answer.
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

async fn once(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    let ticket = ctx
        .once("reserve", async {
            counters.once_runs.fetch_add(1, Ordering::SeqCst) + 100
        })
        .await;
    let Answer::Accept(Name { name }) = ctx.ask(Elicit::<Name>::form("Name?").key("name")).await?
    else {
        return Ok("none".into());
    };
    let Answer::Accept(Color { color }) = ctx
        .ask(Elicit::<Color>::form("Colour?").key("color"))
        .await?
    else {
        return Ok("none".into());
    };
    Ok(format!("ticket {ticket} for {name} ({color})"))
}

async fn pay(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    let Answer::Accept(Confirm { ok: true }) = ctx
        .ask(Elicit::<Confirm>::form("Pay 10?").key("confirm"))
        .await?
    else {
        return Ok("not paid".into());
    };
    let n = counters.payments.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("payment #{n}"))
}

/// `bank.transfer().await; audit.log().await`: the effect, then a slow step
/// (progress while it waits) that a broken connection interrupts.
async fn transfer(
    ctx: Ctx,
    counters: Arc<Counters>,
    fail_audit: bool,
) -> Result<String, ToolError> {
    let Answer::Accept(Confirm { ok: true }) = ctx
        .ask(Elicit::<Confirm>::form("Transfer 100?").key("confirm"))
        .await?
    else {
        return Ok("not transferred".into());
    };
    let n = counters.transfers.fetch_add(1, Ordering::SeqCst) + 1;
    counters.transfer_started.notify_one();
    let mut tick = 0.0;
    loop {
        tick += 1.0;
        ctx.progress(tick, None, Some("auditing"));
        tokio::select! {
            () = ctx.cancelled() => break,
            () = counters.release_audit.notified() => break,
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
    }
    counters.audits.fetch_add(1, Ordering::SeqCst);
    counters.transfer_done.notify_one();
    if fail_audit {
        return Err(ToolError::new(format!("transfer #{n} made, audit failed")));
    }
    Ok(format!("transfer #{n}, audited"))
}

/// The effect, then a step that never ends (a wedged downstream call).
async fn wedge(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    ctx.ask(Elicit::<Confirm>::form("Go?").key("go")).await?;
    counters.transfers.fetch_add(1, Ordering::SeqCst);
    counters.transfer_started.notify_one();
    std::future::pending::<()>().await;
    Ok("unreachable".into())
}

/// The effect, then a panic.
async fn boom(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    ctx.ask(Elicit::<Confirm>::form("Go?").key("go")).await?;
    counters.transfers.fetch_add(1, Ordering::SeqCst);
    panic!("the handler broke after its effect");
}

async fn guarded_prompt(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    let answer = ctx
        .ask(Elicit::<Name>::form("Your name?").key("name"))
        .await?;
    let n = counters.prompt_runs.fetch_add(1, Ordering::SeqCst) + 1;
    let name = answer
        .accepted()
        .map_or_else(|| "nobody".to_owned(), |a| a.name);
    Ok(format!("prompt run #{n} for {name}"))
}

async fn guarded_read(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    let answer = ctx
        .ask(Elicit::<Name>::form("Your name?").key("name"))
        .await?;
    let n = counters.read_runs.fetch_add(1, Ordering::SeqCst) + 1;
    let name = answer
        .accepted()
        .map_or_else(|| "nobody".to_owned(), |a| a.name);
    Ok(format!("read #{n} for {name}"))
}

#[allow(deprecated, reason = "sampling is deprecated and still supported")]
async fn sample_tools(ctx: Ctx) -> Result<String, ToolError> {
    let params = CreateMessageRequestParams {
        messages: vec![SamplingMessage::user_text("Weather?")],
        max_tokens: 50,
        tools: Some(vec![Tool::new("get_weather", Tool::no_arguments_schema())]),
        ..CreateMessageRequestParams::default()
    };
    let reply = ctx
        .ask(tern_server::Sample::new(params).key("weather"))
        .await?;
    Ok(reply.model)
}

async fn fallback(ctx: Ctx) -> Result<String, ToolError> {
    let question = Elicit::<Name>::form("Name?").key("name");
    if !ctx.can_ask(&question) {
        return Ok("fallback: no elicitation".into());
    }
    match ctx.ask(question).await? {
        Answer::Accept(Name { name }) => Ok(name),
        _ => Ok("none".into()),
    }
}

async fn big_state(ctx: Ctx) -> Result<String, ToolError> {
    let blob = ctx.once("blob", async { "x".repeat(4096) }).await;
    ctx.ask(Elicit::<Name>::form("Name?").key("name")).await?;
    Ok(blob.len().to_string())
}

async fn key_clash(ctx: Ctx) -> Result<String, ToolError> {
    let _ = tokio::join!(
        ctx.ask(Elicit::<Name>::form("One?").key("same")),
        ctx.ask(Elicit::<Color>::form("Two?").key("same")),
    );
    Ok("unreachable".into())
}

/// The question's wording, from the call.
#[derive(Deserialize, JsonSchema)]
pub struct Wording {
    /// How the question reads.
    pub text: String,
}

async fn derived_key(ctx: Ctx, Args(w): Args<Wording>) -> Result<String, ToolError> {
    match ctx.ask(Elicit::<Name>::form(w.text)).await? {
        Answer::Accept(Name { name }) => Ok(name),
        _ => Ok("-".into()),
    }
}

async fn derived_clash(ctx: Ctx) -> Result<String, ToolError> {
    let _ = tokio::join!(
        ctx.ask(Elicit::<Confirm>::form("Delete the database?")),
        ctx.ask(Elicit::<Confirm>::form("Empty the bin?")),
    );
    Ok("unreachable".into())
}

async fn ask_all_derived(ctx: Ctx) -> Result<String, ToolError> {
    let questions = ["a", "b", "c"].map(|k| Elicit::<Name>::form(format!("Name {k}?")));
    let answers = ctx.ask_all(questions).await?;
    Ok(answers
        .into_iter()
        .map(|a| a.accepted().map_or("-".into(), |n| n.name))
        .collect::<Vec<_>>()
        .join(","))
}

async fn confirm_twice(ctx: Ctx) -> Result<String, ToolError> {
    let first = ctx.ask(Elicit::<Confirm>::form("Sure?")).await?;
    let second = ctx.ask(Elicit::<Confirm>::form("Really sure?")).await?;
    let ok = |a: Answer<Confirm>| a.accepted().is_some_and(|c| c.ok);
    Ok(format!("{} {}", ok(first), ok(second)))
}

async fn nested(ctx: Ctx) -> Result<String, ToolError> {
    ctx.ask(Elicit::<Nested>::form("Nested?")).await?;
    Ok("unreachable".into())
}

#[allow(deprecated, reason = "the fixture shows logs beside progress")]
async fn progress(ctx: Ctx) -> String {
    // Not finite: never sent (spec: Progress › Progress Flow, values increase).
    ctx.progress(f64::NAN, Some(4.0), None);
    ctx.progress(f64::INFINITY, None, None);
    for i in 0..=4u8 {
        ctx.progress(f64::from(i), Some(4.0), Some("working"));
        ctx.log(tern_protocol::logging::LoggingLevel::Info, Some("test"), i);
    }
    "done".into()
}

async fn slow(ctx: Ctx, counters: Arc<Counters>) -> String {
    let watcher = ctx.clone();
    tokio::spawn(async move {
        watcher.cancelled().await;
        counters.cancelled_seen.fetch_add(1, Ordering::SeqCst);
        counters.cancel_seen.notify_one();
    });
    for i in 0..1000u16 {
        ctx.progress(f64::from(i), Some(1000.0), None);
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    "finished".into()
}

async fn confirm_for(ctx: Ctx, Args(w): Args<Who>) -> Result<String, ToolError> {
    let Answer::Accept(Confirm { ok }) = ctx
        .ask(Elicit::<Confirm>::form(format!("Confirm for {}?", w.who)).key("confirm"))
        .await?
    else {
        return Ok("no".into());
    };
    Ok(format!("{}: {ok}", w.who))
}

async fn once_only(ctx: Ctx) -> Result<String, ToolError> {
    let Answer::Accept(Confirm { ok }) = ctx.ask(Elicit::<Confirm>::form("Go?").key("go")).await?
    else {
        return Ok("no".into());
    };
    Ok(format!("went: {ok}"))
}

async fn flaky(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    ctx.ask(Elicit::<Confirm>::form("Go?").key("go")).await?;
    if counters.flaky_calls.fetch_add(1, Ordering::SeqCst) == 0 {
        return Err(ToolError::protocol(tern_protocol::ErrorObject::new(
            -32603,
            "backend hiccup",
        )));
    }
    Ok("done".into())
}

async fn slow_pay(ctx: Ctx, counters: Arc<Counters>) -> Result<String, ToolError> {
    ctx.ask(Elicit::<Confirm>::form("Pay?").key("go")).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let n = counters.slow_payments.fetch_add(1, Ordering::SeqCst) + 1;
    Ok(format!("slow payment #{n}"))
}

#[allow(clippy::unused_async, reason = "handlers are async fns")]
async fn later(counters: Arc<Counters>) -> Result<String, ToolError> {
    if counters.ready.load(Ordering::SeqCst) {
        Ok("ready now".into())
    } else {
        Err(ToolError::retry_later())
    }
}

#[derive(Deserialize, JsonSchema)]
pub struct Id {
    pub id: u64,
}

async fn delete(ctx: Ctx, Args(i): Args<Id>) -> Result<String, ToolError> {
    let Answer::Accept(Confirm { ok: true }) = ctx
        .ask(Elicit::<Confirm>::form("Delete it?").key("confirm"))
        .await?
    else {
        return Ok("kept".into());
    };
    Ok(format!("deleted {}", i.id))
}

async fn panics() -> String {
    panic!("a handler bug")
}

async fn typed(Args(c): Args<Count>) -> String {
    format!("count {}", c.count)
}

async fn no_args() -> &'static str {
    "ok"
}

async fn failing() -> Result<String, ToolError> {
    Err(ToolError::new("the backend is down"))
}

async fn item(Args(i): Args<ItemId>) -> ResourceContents {
    ResourceContents::Text(tern_protocol::content::TextResourceContents::new(
        format!("res://item/{}", i.id),
        format!("item {}", i.id),
    ))
}

#[derive(Deserialize, JsonSchema)]
pub struct ItemId {
    pub id: String,
}

/// The fixture server's builder (keys fixed, clock injected).
#[allow(clippy::too_many_lines, reason = "one registration per fixture tool")]
pub fn builder(counters: &Arc<Counters>, clock: Arc<ManualClock>) -> ServerBuilder {
    let c = Arc::clone(counters);
    let greet_tool = move |ctx: Ctx| greet(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let once_tool = move |ctx: Ctx| once(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let pay_tool = move |ctx: Ctx| pay(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let slow_tool = move |ctx: Ctx| slow(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let flaky_tool = move |ctx: Ctx| flaky(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let slow_pay_tool = move |ctx: Ctx| slow_pay(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let later_tool = move || later(Arc::clone(&c));
    let c = Arc::clone(counters);
    let transfer_tool = move |ctx: Ctx| transfer(ctx, Arc::clone(&c), false);
    let c = Arc::clone(counters);
    let transfer_failing = move |ctx: Ctx| transfer(ctx, Arc::clone(&c), true);
    let c = Arc::clone(counters);
    let wedge_tool = move |ctx: Ctx| wedge(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let boom_tool = move |ctx: Ctx| boom(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let prompt = move |ctx: Ctx| guarded_prompt(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let info = move |ctx: Ctx| call_info(ctx, Arc::clone(&c));
    let c = Arc::clone(counters);
    let read = move |ctx: Ctx| guarded_read(ctx, Arc::clone(&c));
    Server::builder("fixture", "1.0.0")
        .keys(KeyRing::parse(KEYS).unwrap())
        .clock(clock)
        .tool(ToolDef::new("greet", "Asks a name", greet_tool).elicits::<Name>())
        .tool(ToolDef::new("batch", "Two questions in one round", batch))
        .tool(ToolDef::new(
            "ask_all",
            "Three questions with ask_all",
            ask_all,
        ))
        .tool(ToolDef::new(
            "three_rounds",
            "Three dependent questions",
            three_rounds,
        ))
        .tool(ToolDef::new("once", "Memoises a step", once_tool))
        .tool(
            ToolDef::new("pay", "Single use, idempotent", pay_tool)
                .single_use()
                .idempotent_retry(),
        )
        .tool(ToolDef::new("login", "URL mode", login))
        .tool(ToolDef::new("sample", "Sampling", sample))
        .tool(ToolDef::new(
            "sample_tools",
            "Sampling with tools",
            sample_tools,
        ))
        .tool(ToolDef::new("roots", "Roots", roots))
        .tool(ToolDef::new(
            "fallback",
            "Takes another path without elicitation",
            fallback,
        ))
        .tool(ToolDef::new("big_state", "Grows its state", big_state))
        .tool(ToolDef::new(
            "key_clash",
            "Two questions, one key",
            key_clash,
        ))
        .tool(
            ToolDef::new("greet_asked", "Asks a name as a parameter", greet_asked)
                .elicits::<UserName>(),
        )
        .tool(ToolDef::new(
            "batch_asked",
            "Asks a name and a colour as parameters",
            batch_asked,
        ))
        .tool(ToolDef::new(
            "derived_key",
            "A question without .key",
            derived_key,
        ))
        .tool(ToolDef::new(
            "derived_clash",
            "Two forms of one type, no keys",
            derived_clash,
        ))
        .tool(ToolDef::new(
            "ask_all_derived",
            "ask_all without keys",
            ask_all_derived,
        ))
        .tool(ToolDef::new(
            "confirm_twice",
            "One form type asked twice",
            confirm_twice,
        ))
        .tool(ToolDef::new("nested", "Asks a nested form", nested))
        .tool(ToolDef::new("progress", "Progress and logs", progress))
        .tool(ToolDef::new("typed", "Typed arguments", typed))
        .tool(ToolDef::new(
            "confirm_for",
            "Arguments and a question",
            confirm_for,
        ))
        .tool(ToolDef::new(
            "slow",
            "Reports progress until cancelled",
            slow_tool,
        ))
        .tool(ToolDef::new("once_only", "Single use only", once_only).single_use())
        .tool(ToolDef::new("flaky", "Fails once after its question", flaky_tool).single_use())
        .tool(ToolDef::new("slow_pay", "Idempotent and slow", slow_pay_tool).idempotent_retry())
        .tool(ToolDef::new("later", "Not ready until told", later_tool))
        .tool(
            ToolDef::new("transfer", "An effect, then a slow audit", transfer_tool)
                .single_use()
                .idempotent_retry(),
        )
        .tool(
            ToolDef::new(
                "transfer_failing",
                "An effect, then a failing audit",
                transfer_failing,
            )
            .idempotent_retry(),
        )
        .tool(ToolDef::new("wedge", "An effect, then never ends", wedge_tool).idempotent_retry())
        .tool(ToolDef::new("boom", "An effect, then a panic", boom_tool).idempotent_retry())
        .tool(ToolDef::new("call_info", "Call id and round per leg", info))
        .tool(
            ToolDef::new(
                "debug_ctx",
                "Any arguments; shows Debug of its Ctx",
                debug_ctx,
            )
            .input_schema(
                serde_json::json!({"type": "object"})
                    .as_object()
                    .unwrap()
                    .clone(),
            ),
        )
        .tool(ToolDef::new(
            "until_valid",
            "Asks until the answer suits it",
            until_valid,
        ))
        .tool(ToolDef::new(
            "delete",
            "Binds a large integer argument",
            delete,
        ))
        .tool(ToolDef::new("panics", "Panics", panics))
        .tool(
            ToolDef::new(
                "greet_unbound",
                "Accepts answers without state",
                greet_unbound,
            )
            .accept_unsealed_answers(),
        )
        .tool(ToolDef::new("no_args", "No arguments", no_args))
        .tool(ToolDef::new("failing", "Fails", failing))
        .prompt(PromptDef::new(
            "ask_prompt",
            "Asks before answering",
            ask_prompt,
        ))
        .resource(ResourceDef::new("res://ask", "ask", ask_resource).mime_type("text/plain"))
        .resource_template(ResourceTemplateDef::new("res://item/{id}", "item", item))
        .prompt(PromptDef::new("guarded_prompt", "Idempotent prompt", prompt).idempotent_retry())
        .resource(ResourceDef::new("res://guarded", "guarded", read).idempotent_retry())
        .completion(CompletionDef::prompt("ask_prompt", |r| async move {
            ["alice", "bob", "carol"]
                .iter()
                .filter(|n| n.starts_with(&r.value))
                .map(|n| (*n).to_owned())
                .collect()
        }))
}

/// A client of a fresh fixture server.
pub fn client() -> (TestClient, Arc<Counters>, Arc<ManualClock>) {
    let counters = Arc::new(Counters::default());
    let clock = ManualClock::new();
    let server = builder(&counters, Arc::clone(&clock)).build().unwrap();
    (TestClient::new(server), counters, clock)
}

/// A verifier of two fixed tokens: `basic` (scope `mcp:basic`) and `write`
/// (`mcp:basic mcp:write`), both with the claim `tenant: acme`; the
/// transport's checks are under test, not the verifier.
pub struct TwoTokens;

impl tern_server::auth::TokenVerifier for TwoTokens {
    fn verify<'a>(
        &'a self,
        token: &'a str,
    ) -> tern_server::replay::BoxFuture<
        'a,
        Result<tern_server::auth::AccessToken, tern_server::auth::VerifyError>,
    > {
        Box::pin(async move {
            let scopes = match token {
                "basic" => vec!["mcp:basic".to_owned()],
                "write" => vec!["mcp:basic".to_owned(), "mcp:write".to_owned()],
                _ => return Err(tern_server::auth::VerifyError::Invalid("unknown".into())),
            };
            let mut t = tern_server::auth::AccessToken::new("https://as.example", "alice", scopes);
            t.claims.insert("tenant".into(), "acme".into());
            Ok(t)
        })
    }
}

/// What a handler sees of the caller's access token, as one line.
pub async fn whoami(ctx: Ctx) -> Result<String, ToolError> {
    Ok(match ctx.access_token() {
        None => "no token".to_owned(),
        Some(t) => format!(
            "{} {} [{}] tenant={} raw={}",
            t.issuer,
            t.subject,
            t.scopes.join(" "),
            t.claims
                .get("tenant")
                .and_then(serde_json::Value::as_str)
                .unwrap_or("-"),
            t.raw().unwrap_or("-")
        ),
    })
}
