//! This test binary as an upstream server: the parent's gateway config runs
//! it as `--exact child::entry` with `TERN_GATEWAY_IT_ROLE=upstream` in its
//! environment; without the role, `entry` does nothing.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tern_server::transport::stdio::{StdioOptions, serve};
use tern_server::{
    Answer, Ctx, Elicit, PromptDef, ResourceDef, ResourceTemplateDef, Server, ToolDef, ToolError,
};

/// The environment variable naming the role.
pub const ROLE: &str = "TERN_GATEWAY_IT_ROLE";
/// Which upstream it is (its tools' text says so).
pub const WHO: &str = "TERN_GATEWAY_IT_WHO";
/// A file whose presence makes the child exit at once (a failing restart).
pub const FAIL_IF: &str = "TERN_GATEWAY_IT_FAIL_IF";
/// A file `task_hold` appends a line to when its task is cancelled: read
/// after the child is gone.
pub const CANCELLED_TO: &str = "TERN_GATEWAY_IT_CANCELLED_TO";

#[test]
fn entry() {
    if std::env::var(ROLE).is_err() {
        return; // an ordinary test run
    }
    // A restart that fails while this file exists.
    if std::env::var(FAIL_IF).is_ok_and(|f| std::path::Path::new(&f).exists()) {
        std::process::exit(4);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let _ = serve(
            upstream(),
            tokio::io::stdin(),
            tokio::io::stdout(),
            StdioOptions::default(),
        )
        .await;
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
}

#[derive(Deserialize, JsonSchema)]
struct Name {
    name: String,
}

async fn ask_name(ctx: Ctx) -> Result<String, ToolError> {
    let who = std::env::var(WHO).unwrap_or_default();
    let Answer::Accept(Name { name }) = ctx.ask(Elicit::<Name>::form("Your name?")).await? else {
        return Ok(format!("{who}: declined"));
    };
    Ok(format!("{who}: hello {name}"))
}

/// [`ask_name`], run only as a task.
async fn task_ask(ctx: Ctx) -> Result<String, ToolError> {
    let greeting = ask_name(ctx.clone()).await?;
    Ok(format!("{greeting} (task {})", ctx.is_task()))
}

/// The capabilities the request declared, as JSON.
async fn caps(ctx: Ctx) -> String {
    serde_json::to_string(ctx.client_capabilities()).unwrap()
}

/// Exits the process mid-call: an upstream that dies.
async fn crash() -> String {
    std::process::exit(3);
}

#[derive(Deserialize, JsonSchema)]
struct Go {
    go: bool,
}

/// Effects made by this process: what dedupe must keep to one per round.
static EFFECTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Asks to go, then makes an effect (unguarded: every leg that reaches it
/// with the answer makes one).
async fn effect(ctx: Ctx) -> Result<String, ToolError> {
    let Answer::Accept(Go { go: true }) = ctx.ask(Elicit::<Go>::form("Go?").key("go")).await?
    else {
        return Ok("stopped".into());
    };
    let n = EFFECTS.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
    Ok(format!("effect #{n}"))
}

/// Asks to go, then exits: an upstream lost after the leg was sent.
async fn effect_then_die(ctx: Ctx) -> Result<String, ToolError> {
    let _ = ctx.ask(Elicit::<Go>::form("Go?").key("go")).await?;
    std::process::exit(3);
}

/// The effects so far.
async fn effects() -> String {
    EFFECTS
        .load(std::sync::atomic::Ordering::SeqCst)
        .to_string()
}

/// Calls of `hold` that began, and that saw their cancellation.
static HELD: [std::sync::atomic::AtomicU64; 2] = [
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
];

/// Says it began (progress, when asked), then holds until it is cancelled.
async fn hold(ctx: Ctx) -> String {
    HELD[0].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    ctx.progress(1.0, Some(2.0), Some("holding"));
    // Its future is dropped when it is cancelled: the cleanup work sees it.
    let watch = ctx.clone();
    tokio::spawn(async move {
        watch.cancelled().await;
        HELD[1].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    std::future::pending::<()>().await;
    "held to the end".into()
}

/// `began N, cancelled M` of `hold`.
async fn held() -> String {
    let n = |i: usize| HELD[i].load(std::sync::atomic::Ordering::SeqCst);
    format!("began {}, cancelled {}", n(0), n(1))
}

/// Tasks of `task_hold` that began, and that saw their cancellation.
static TASK_HELD: [std::sync::atomic::AtomicU64; 2] = [
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
];

/// As a task: says it began, then holds until the task is cancelled.
async fn task_hold(ctx: Ctx) -> String {
    TASK_HELD[0].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let watch = ctx.clone();
    tokio::spawn(async move {
        watch.cancelled().await;
        TASK_HELD[1].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if let Ok(path) = std::env::var(CANCELLED_TO) {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .unwrap();
            writeln!(file, "cancelled").unwrap();
        }
    });
    std::future::pending::<()>().await;
    "held to the end".into()
}

/// `began N, cancelled M` of `task_hold`.
async fn task_held() -> String {
    let n = |i: usize| TASK_HELD[i].load(std::sync::atomic::Ordering::SeqCst);
    format!("began {}, cancelled {}", n(0), n(1))
}

/// Tasks of `task_ask_hold` that asked, and that saw their cancellation.
static TASK_ASKED: [std::sync::atomic::AtomicU64; 2] = [
    std::sync::atomic::AtomicU64::new(0),
    std::sync::atomic::AtomicU64::new(0),
];

/// As a task: asks to go, and counts its cancellation while it waits.
async fn task_ask_hold(ctx: Ctx) -> Result<String, ToolError> {
    TASK_ASKED[0].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let watch = ctx.clone();
    tokio::spawn(async move {
        watch.cancelled().await;
        TASK_ASKED[1].fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    ctx.ask(Elicit::<Go>::form("Go?").key("go")).await?;
    Ok("went".into())
}

/// `asked N, cancelled M` of `task_ask_hold`.
async fn task_ask_held() -> String {
    let n = |i: usize| TASK_ASKED[i].load(std::sync::atomic::Ordering::SeqCst);
    format!("asked {}, cancelled {}", n(0), n(1))
}

/// As a task: asks to go, then goes.
async fn task_go(ctx: Ctx) -> Result<String, ToolError> {
    let Answer::Accept(Go { go: true }) = ctx.ask(Elicit::<Go>::form("Go?").key("go")).await?
    else {
        return Ok("stopped".into());
    };
    Ok("went".into())
}

fn upstream() -> Server {
    let who = std::env::var(WHO).unwrap_or_default();
    let builder = Server::builder(format!("upstream-{who}"), "1");
    let changes = builder.changes();
    let relist = changes.clone();
    let readme = format!("{who}://readme");
    builder
        .tool(ToolDef::new("hold", "Waits to be cancelled", hold))
        .tool(
            ToolDef::new("task_go", "A task that asks to go", task_go)
                .elicits::<Go>()
                .task(tern_server::TaskSupport::Required)
                .task_from_start(),
        )
        .tool(ToolDef::new("held", "What hold saw", held))
        .tool(
            ToolDef::new(
                "task_hold",
                "Holds, as a task only, until cancelled",
                task_hold,
            )
            .task(tern_server::TaskSupport::Required)
            .task_from_start(),
        )
        .tool(ToolDef::new("task_held", "What task_hold saw", task_held))
        .tool(
            ToolDef::new(
                "task_ask_hold",
                "Asks, as a task only, and counts its cancellation",
                task_ask_hold,
            )
            .elicits::<Go>()
            .task(tern_server::TaskSupport::Required)
            .task_from_start(),
        )
        .tool(ToolDef::new(
            "task_ask_held",
            "What task_ask_hold saw",
            task_ask_held,
        ))
        .tool(ToolDef::new("touch", "Its readme changed", move || {
            let (changes, readme) = (changes.clone(), readme.clone());
            async move {
                changes.resource_updated(readme);
                "touched".to_owned()
            }
        }))
        .tool(ToolDef::new("relist", "Its tool list changed", move || {
            let changes = relist.clone();
            async move {
                changes.tools_changed();
                "relisted".to_owned()
            }
        }))
        .tool(ToolDef::new("ask_name", "Asks a name", ask_name).elicits::<Name>())
        .tool(ToolDef::new("caps", "The declared capabilities", caps))
        .tool(
            ToolDef::new("task_ask", "Asks a name, as a task only", task_ask)
                .elicits::<Name>()
                .task(tern_server::TaskSupport::Required)
                .task_from_start(),
        )
        .tool(ToolDef::new("crash", "Exits", crash))
        .tool(ToolDef::new("effect", "Asks, then makes an effect", effect).elicits::<Go>())
        .tool(ToolDef::new("effect_then_die", "Asks, then exits", effect_then_die).elicits::<Go>())
        .tool(ToolDef::new("effects", "The effects so far", effects))
        .prompt(PromptDef::new("greeting", "A greeting", move || {
            let who = std::env::var(WHO).unwrap_or_default();
            async move { format!("greetings from {who}") }
        }))
        .resource(ResourceDef::new(
            format!("{who}://readme"),
            "readme",
            move || {
                let who = std::env::var(WHO).unwrap_or_default();
                async move { format!("readme of {who}") }
            },
        ))
        .resource_template(ResourceTemplateDef::new(
            format!("{who}-files://{{path}}"),
            "files",
            move |tern_server::Uri(uri): tern_server::Uri| async move { format!("file {uri}") },
        ))
        .build()
        .unwrap()
}
