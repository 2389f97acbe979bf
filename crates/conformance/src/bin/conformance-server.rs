//! The server the official conformance suite drives (`conformance server
//! --url http://127.0.0.1:PORT/mcp --requirements 2026-07-28`), written only
//! against tern's public API. It exposes the fixtures of the suite's server
//! contract (tools, resources, prompts, completion and the MRTR tools) and
//! of the Skills extension's scenarios (a small skill catalogue).
//!
//! Usage: `conformance-server [--port PORT]` (default 3000, or `PORT` from the
//! environment; 0 picks a free port). The address is printed on standard error.

use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use tern_protocol::content::{
    AudioContent, BlobResourceContents, EmbeddedResource, ImageContent, ResourceContents, Role,
    TextResourceContents,
};
use tern_protocol::error::ErrorObject;
use tern_protocol::logging::LoggingLevel;
use tern_protocol::prompt::PromptMessage;
use tern_protocol::tool::CallToolResult;
use tern_protocol::{ClientCapabilities, ContentBlock, JsonObject};
use tern_server::skill::{SkillCatalog, SkillCatalogError};
use tern_server::transport::http::{self, Http};
use tern_server::{
    Answer, Args, Changes, CompletionDef, Ctx, Elicit, ListRoots, PromptDef, ResourceDef,
    ResourceTemplateDef, Sample, Server, TaskSupport, ToolDef, ToolError,
};

const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==";
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

fn image() -> ContentBlock {
    ContentBlock::Image(ImageContent {
        data: PNG.into(),
        mime_type: "image/png".into(),
        annotations: None,
        meta: None,
    })
}

fn embedded(uri: &str, mime: &str, text: &str) -> ContentBlock {
    ContentBlock::Resource(EmbeddedResource {
        resource: ResourceContents::Text(TextResourceContents {
            mime_type: Some(mime.into()),
            ..TextResourceContents::new(uri, text)
        }),
        annotations: None,
        meta: None,
    })
}

async fn simple_text() -> &'static str {
    "This is a simple text response for testing."
}

async fn image_content() -> Vec<ContentBlock> {
    vec![image()]
}

async fn audio_content() -> Vec<ContentBlock> {
    vec![ContentBlock::Audio(AudioContent {
        data: WAV.into(),
        mime_type: "audio/wav".into(),
        annotations: None,
        meta: None,
    })]
}

async fn embedded_resource() -> Vec<ContentBlock> {
    vec![embedded(
        "test://embedded-resource",
        "text/plain",
        "This is an embedded resource content.",
    )]
}

async fn multiple_content_types() -> Vec<ContentBlock> {
    vec![
        ContentBlock::text("Multiple content types test:"),
        image(),
        embedded(
            "test://mixed-content-resource",
            "application/json",
            r#"{"test":"data","value":123}"#,
        ),
    ]
}

async fn error_handling() -> CallToolResult {
    CallToolResult::error("This tool intentionally returns an error for testing")
}

async fn tool_with_progress(ctx: Ctx) -> String {
    for step in [0.0, 50.0, 100.0] {
        ctx.progress(step, Some(100.0), None);
        if step < 100.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let token = ctx
        .meta()
        .progress_token
        .as_ref()
        .map(|t| serde_json::to_string(t).unwrap_or_default());
    format!(
        "Progress completed{}",
        token.map(|t| format!(" for token {t}")).unwrap_or_default()
    )
}

async fn missing_capability(ctx: Ctx) -> Result<&'static str, ToolError> {
    if !ctx.client_capabilities().sampling() {
        return Err(ToolError::protocol(ErrorObject::missing_capability(
            "This tool requires the sampling capability",
            ClientCapabilities::default().with_sampling(),
        )));
    }
    Ok("Success")
}

async fn streaming_elicitation(ctx: Ctx) -> &'static str {
    ctx.progress(1.0, Some(1.0), Some("streaming"));
    "Streaming complete"
}

#[allow(
    deprecated,
    reason = "the suite's logging scenario is about deprecated logging"
)]
async fn logging_tool(ctx: Ctx) -> &'static str {
    ctx.log(
        LoggingLevel::Info,
        Some("conformance"),
        "test_logging_tool ran",
    );
    "Logged"
}

#[derive(Deserialize, JsonSchema)]
struct Name {
    name: String,
}

#[derive(Deserialize, JsonSchema)]
struct Color {
    color: String,
}

#[derive(Deserialize, JsonSchema)]
struct Confirm {
    ok: bool,
}

#[derive(Deserialize, JsonSchema)]
struct Context {
    context: String,
}

async fn mrtr_elicitation(ctx: Ctx) -> Result<String, ToolError> {
    match ctx
        .ask(Elicit::<Name>::form("What is your name?").key("user_name"))
        .await?
    {
        Answer::Accept(Name { name }) => Ok(format!("Hello, {name}!")),
        Answer::Decline => Ok("The user declined.".into()),
        Answer::Cancel => Ok("The user cancelled.".into()),
    }
}

#[allow(
    deprecated,
    reason = "the suite tests the deprecated sampling input request"
)]
async fn mrtr_sampling(ctx: Ctx) -> Result<String, ToolError> {
    let reply = ctx
        .ask(Sample::text("What is the capital of France?", 100).key("capital_question"))
        .await?;
    Ok(format!(
        "The model answered: {}",
        reply.text().unwrap_or_default()
    ))
}

#[allow(
    deprecated,
    reason = "the suite tests the deprecated roots input request"
)]
async fn mrtr_roots(ctx: Ctx) -> Result<String, ToolError> {
    let roots = ctx.ask(ListRoots::new().key("client_roots")).await?;
    Ok(format!("Found {} root(s)", roots.len()))
}

async fn mrtr_request_state(ctx: Ctx) -> Result<String, ToolError> {
    match ctx
        .ask(Elicit::<Confirm>::form("Please confirm").key("confirm"))
        .await?
    {
        Answer::Accept(Confirm { ok }) => Ok(format!("state-ok: confirmed={ok}")),
        _ => Ok("state-ok: not confirmed".into()),
    }
}

#[allow(deprecated, reason = "the suite asks all three kinds at once")]
async fn mrtr_multiple(ctx: Ctx) -> Result<String, ToolError> {
    let (name, greeting, roots) = tokio::join!(
        ctx.ask(Elicit::<Name>::form("What is your name?").key("user_name")),
        ctx.ask(Sample::text("Generate a greeting", 50).key("greeting")),
        ctx.ask(ListRoots::new().key("client_roots")),
    );
    let name = name?
        .accepted()
        .map_or_else(|| "someone".into(), |n| n.name);
    Ok(format!(
        "{} for {name}; {} root(s)",
        greeting?.text().unwrap_or("hello"),
        roots?.len()
    ))
}

async fn mrtr_multi_round(ctx: Ctx) -> Result<String, ToolError> {
    let Answer::Accept(Name { name }) = ctx
        .ask(Elicit::<Name>::form("Step 1: What is your name?").key("step1"))
        .await?
    else {
        return Ok("Stopped at step 1".into());
    };
    let Answer::Accept(Color { color }) = ctx
        .ask(Elicit::<Color>::form("Step 2: What is your favorite color?").key("step2"))
        .await?
    else {
        return Ok("Stopped at step 2".into());
    };
    Ok(format!("{name}'s favorite color is {color}"))
}

async fn mrtr_tampered(ctx: Ctx) -> Result<String, ToolError> {
    ctx.ask(Elicit::<Confirm>::form("Please confirm").key("confirm"))
        .await?;
    Ok("confirmed".into())
}

#[allow(
    deprecated,
    reason = "sampling is the fallback when elicitation is not declared"
)]
async fn mrtr_capabilities(ctx: Ctx) -> Result<String, ToolError> {
    let question = Elicit::<Name>::form("What is your name?").key("user_name");
    if ctx.can_ask(&question) {
        let name = ctx
            .ask(question)
            .await?
            .accepted()
            .map_or_else(|| "someone".into(), |n| n.name);
        return Ok(format!("Hello, {name}!"));
    }
    // Rule `ask-declared-only`: no elicitation was declared, so none is sent.
    let reply = ctx
        .ask(Sample::text("Say hello", 50).key("sample_input"))
        .await?;
    Ok(reply.text().unwrap_or("hello").to_owned())
}

async fn mrtr_prompt(ctx: Ctx) -> Result<Vec<PromptMessage>, ToolError> {
    let context = match ctx
        .ask(Elicit::<Context>::form("What context should the prompt use?").key("user_context"))
        .await?
    {
        Answer::Accept(Context { context }) => context,
        _ => "no context".into(),
    };
    Ok(vec![PromptMessage {
        role: Role::User,
        content: ContentBlock::text(format!("Use this context: {context}")),
    }])
}

#[derive(Deserialize, JsonSchema)]
struct PromptArgs {
    /// First argument
    arg1: String,
    /// Second argument
    arg2: String,
}

async fn prompt_with_arguments(Args(a): Args<PromptArgs>) -> String {
    format!(
        "Prompt with arguments: arg1='{}', arg2='{}'",
        a.arg1, a.arg2
    )
}

#[derive(Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ResourceArg {
    /// URI of the resource to embed
    resource_uri: String,
}

async fn prompt_with_embedded_resource(Args(a): Args<ResourceArg>) -> Vec<PromptMessage> {
    vec![
        PromptMessage {
            role: Role::User,
            content: embedded(
                &a.resource_uri,
                "text/plain",
                "Embedded resource content for testing.",
            ),
        },
        PromptMessage {
            role: Role::User,
            content: ContentBlock::text("Please process the embedded resource above."),
        },
    ]
}

async fn prompt_with_image() -> Vec<PromptMessage> {
    vec![
        PromptMessage {
            role: Role::User,
            content: image(),
        },
        PromptMessage {
            role: Role::User,
            content: ContentBlock::text("Please analyze the image above."),
        },
    ]
}

#[derive(Deserialize, JsonSchema)]
struct ItemId {
    id: String,
}

async fn template_data(Args(i): Args<ItemId>) -> ResourceContents {
    let text = json!({"id": i.id, "templateTest": true, "data": format!("Data for ID: {}", i.id)})
        .to_string();
    ResourceContents::Text(TextResourceContents {
        mime_type: Some("application/json".into()),
        ..TextResourceContents::new(format!("test://template/{}/data", i.id), text)
    })
}

async fn static_binary() -> ResourceContents {
    ResourceContents::Blob(BlobResourceContents {
        uri: "test://static-binary".into(),
        mime_type: Some("image/png".into()),
        blob: PNG.into(),
        meta: None,
    })
}

#[derive(Deserialize, JsonSchema)]
struct HeaderArgs {
    /// The region, mirrored into the `Mcp-Param-Region` header.
    region: String,
}

async fn header_param(Args(h): Args<HeaderArgs>) -> String {
    format!("region {}", h.region)
}

fn object(value: serde_json::Value) -> JsonObject {
    match value {
        serde_json::Value::Object(o) => o,
        _ => JsonObject::new(),
    }
}

fn json_schema_2020_12() -> JsonObject {
    object(json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {
            "address": {
                "$anchor": "addressDef",
                "type": "object",
                "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
                "required": ["street", "city"]
            }
        },
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contact": {"anyOf": [{"type": "string", "format": "email"}, {"type": "string", "pattern": "^\\+[0-9]+$"}]},
            "kind": {"type": "string", "enum": ["person", "company"]},
            "vat": {"type": "string"}
        },
        "allOf": [{"required": ["name"]}, {"anyOf": [{"required": ["address"]}, {"required": ["contact"]}]}],
        "if": {"properties": {"kind": {"const": "company"}}},
        "then": {"required": ["vat"]},
        "else": {},
        "additionalProperties": false
    }))
}

// The Tasks extension's fixtures (the suite's `tasks-*` scenarios).

#[derive(Deserialize, JsonSchema)]
struct Greet {
    name: String,
}

async fn greet(Args(g): Args<Greet>) -> String {
    format!("Hello, {}!", g.name)
}

#[derive(Deserialize, JsonSchema)]
struct SlowCompute {
    /// How long the work takes.
    seconds: f64,
    /// A label echoed in the result.
    #[serde(default)]
    label: Option<String>,
}

/// Sleeps `seconds` in a task; stops (and ends `cancelled`) on `tasks/cancel`.
async fn slow_compute(ctx: Ctx, Args(a): Args<SlowCompute>) -> Result<String, ToolError> {
    let label = a.label.unwrap_or_default();
    if a.seconds <= 0.0 {
        // The immediate path: no task for instant work.
        return Ok(format!("Computed {label} at once"));
    }
    ctx.into_task().await;
    ctx.progress(0.0, Some(1.0), Some("computing"));
    let wait = Duration::from_secs_f64(a.seconds.min(3600.0));
    tokio::select! {
        () = tokio::time::sleep(wait) => Ok(format!("Computed {label} in {} s", a.seconds)),
        () = ctx.cancelled() => Err(ToolError::new("Cancelled")),
    }
}

/// A task that ends with a tool error after about a second.
async fn failing_job(ctx: Ctx) -> Result<String, ToolError> {
    ctx.into_task().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    Err(ToolError::new("The job failed"))
}

/// A task that ends with a JSON-RPC error.
async fn protocol_error_job(ctx: Ctx) -> Result<String, ToolError> {
    ctx.into_task().await;
    Err(ToolError::protocol(ErrorObject::new(
        -32603,
        "The job hit an internal error",
    )))
}

#[derive(Deserialize, JsonSchema)]
struct DeleteConfirm {
    /// Delete it?
    confirm: bool,
}

#[derive(Deserialize, JsonSchema)]
struct Filename {
    filename: String,
}

/// A task with one question.
async fn confirm_delete(ctx: Ctx, Args(f): Args<Filename>) -> Result<String, ToolError> {
    ctx.into_task().await;
    let answer = ctx
        .ask(Elicit::<DeleteConfirm>::form(format!("Delete {}?", f.filename)).key("confirm_delete"))
        .await?;
    Ok(match answer {
        Answer::Accept(DeleteConfirm { confirm: true }) => format!("Deleted {}", f.filename),
        _ => format!("Kept {}", f.filename),
    })
}

#[derive(Deserialize, JsonSchema)]
struct NameAndConfirm {
    /// A name.
    #[serde(default)]
    name: Option<String>,
    /// Go ahead?
    #[serde(default)]
    confirm: Option<bool>,
}

/// A task with two questions outstanding at once.
async fn multi_input(ctx: Ctx) -> Result<String, ToolError> {
    ctx.into_task().await;
    let (first, second) = tokio::join!(
        ctx.ask(Elicit::<NameAndConfirm>::form("First input").key("first")),
        ctx.ask(Elicit::<NameAndConfirm>::form("Second input").key("second")),
    );
    let name = |a: Answer<NameAndConfirm>| match a {
        Answer::Accept(v) if v.confirm != Some(false) => v.name.unwrap_or_default(),
        _ => "nothing".to_owned(),
    };
    Ok(format!("Got {} and {}", name(first?), name(second?)))
}

/// MRTR first (the user's name), then a task.
async fn tool_with_task(ctx: Ctx) -> Result<String, ToolError> {
    let answer = ctx
        .ask(Elicit::<Name>::form("What is your name?").key("user_name"))
        .await?;
    let Answer::Accept(Name { name }) = answer else {
        return Ok("The user declined.".into());
    };
    ctx.into_task().await;
    Ok(format!("Hello, {name}! (finished in a task)"))
}

/// The Skills extension's fixture (`sep-2640-skills-enumeration`,
/// `-manifest`, `-directory`): the skills under `crates/conformance/skills`,
/// embedded. The first one listed (`skill://acme/pdf-processing`) has
/// subfolders, which the directory scenario needs to see an
/// `inode/directory` child; its frontmatter exercises YAML 1.2 typing
/// (a folded description, a quoted version, `yes` as a string).
fn skills() -> Result<SkillCatalog, SkillCatalogError> {
    SkillCatalog::builder()
        .skill(
            "acme/pdf-processing",
            [
                (
                    "SKILL.md",
                    include_str!("../../skills/acme/pdf-processing/SKILL.md"),
                ),
                (
                    "references/FORMS.md",
                    include_str!("../../skills/acme/pdf-processing/references/FORMS.md"),
                ),
                (
                    "templates/invoice.md",
                    include_str!("../../skills/acme/pdf-processing/templates/invoice.md"),
                ),
            ],
        )
        .skill(
            "git-workflow",
            [(
                "SKILL.md",
                include_str!("../../skills/git-workflow/SKILL.md"),
            )],
        )
        .build()
}

fn build(
    changes_for_hooks: &mut Option<Changes>,
    skills: SkillCatalog,
) -> Result<Server, tern_server::BuildError> {
    let builder = Server::builder("tern-conformance-server", env!("CARGO_PKG_VERSION"));
    let changes = builder.changes();
    *changes_for_hooks = Some(changes.clone());
    let tools_changed = changes.clone();
    let trigger_tools = move || {
        let changes = tools_changed.clone();
        async move {
            changes.tools_changed();
            "tools/list_changed sent"
        }
    };
    let prompts_changed = changes;
    let trigger_prompts = move || {
        let changes = prompts_changed.clone();
        async move {
            changes.prompts_changed();
            "prompts/list_changed sent"
        }
    };
    let mut region_schema = object(
        json!({"type": "object", "properties": {"region": {"type": "string", "description": "The region", "x-mcp-header": "Region"}}, "required": ["region"]}),
    );
    region_schema.insert("additionalProperties".into(), false.into());
    let builder = legacy_fixtures::register(builder);
    builder
        .instructions("The tern conformance server: every fixture of the MCP conformance suite's server contract.")
        .skills(skills)
        .tool(ToolDef::new("test_simple_text", "Returns a simple text response", simple_text))
        .tool(ToolDef::new("test_image_content", "Returns an image", image_content))
        .tool(ToolDef::new("test_audio_content", "Returns audio", audio_content))
        .tool(ToolDef::new("test_embedded_resource", "Returns an embedded resource", embedded_resource))
        .tool(ToolDef::new("test_multiple_content_types", "Returns text, an image and a resource", multiple_content_types))
        .tool(ToolDef::new("test_error_handling", "Returns a tool error", error_handling))
        .tool(ToolDef::new("test_tool_with_progress", "Reports progress 0, 50, 100", tool_with_progress))
        .tool(ToolDef::new("test_missing_capability", "Needs the sampling capability", missing_capability))
        .tool(ToolDef::new("test_streaming_elicitation", "Streams a notification, then the result", streaming_elicitation))
        .tool(ToolDef::new("test_logging_tool", "Logs a message when the request set a log level", logging_tool))
        .tool(ToolDef::new("test_trigger_tool_change", "Announces a tool list change", trigger_tools))
        .tool(ToolDef::new("test_trigger_prompt_change", "Announces a prompt list change", trigger_prompts))
        .tool(
            ToolDef::new("test_input_required_result_elicitation", "MRTR: asks the user's name", mrtr_elicitation)
                .elicits::<Name>()
                // The suite answers `user_name` on calls that never saw round 1.
                .accept_unsealed_answers(),
        )
        .tool(ToolDef::new("test_input_required_result_sampling", "MRTR: asks the client's model", mrtr_sampling))
        .tool(ToolDef::new("test_input_required_result_list_roots", "MRTR: asks the client's roots", mrtr_roots))
        .tool(ToolDef::new("test_input_required_result_request_state", "MRTR: a question with state", mrtr_request_state).elicits::<Confirm>())
        .tool(ToolDef::new("test_input_required_result_multiple_inputs", "MRTR: three questions in one round", mrtr_multiple).elicits::<Name>())
        .tool(ToolDef::new("test_input_required_result_multi_round", "MRTR: two dependent rounds", mrtr_multi_round).elicits::<Name>().elicits::<Color>())
        .tool(ToolDef::new("test_input_required_result_tampered_state", "MRTR: refuses tampered state", mrtr_tampered).elicits::<Confirm>())
        .tool(ToolDef::new("test_input_required_result_capabilities", "MRTR: asks only what the client declared", mrtr_capabilities).elicits::<Name>())
        .tool(ToolDef::new("json_schema_2020_12_tool", "Takes a JSON Schema 2020-12 input", simple_text).input_schema(json_schema_2020_12()))
        .tool(ToolDef::new("greet", "Greets by name", greet))
        .tool(ToolDef::new("slow_compute", "Sleeps `seconds` in a task", slow_compute).task(TaskSupport::Optional))
        .tool(ToolDef::new("failing_job", "A task that ends with a tool error", failing_job).task(TaskSupport::Required))
        .tool(ToolDef::new("protocol_error_job", "A task that ends with a JSON-RPC error", protocol_error_job).task(TaskSupport::Optional))
        .tool(ToolDef::new("confirm_delete", "A task that asks one question", confirm_delete).task(TaskSupport::Optional).elicits::<DeleteConfirm>())
        .tool(ToolDef::new("multi_input", "A task that asks two questions at once", multi_input).task(TaskSupport::Optional).elicits::<NameAndConfirm>())
        .tool(ToolDef::new("test_tool_with_task", "MRTR first, then a task", tool_with_task).task(TaskSupport::Optional).elicits::<Name>())
        .tool(ToolDef::new("test_header_param", "Mirrors `region` into Mcp-Param-Region", header_param).input_schema(region_schema))
        .resource(
            ResourceDef::new("test://static-text", "static-text", || async { "This is the content of the static text resource.".to_owned() })
                .description("A static text resource")
                .mime_type("text/plain"),
        )
        .resource(ResourceDef::new("test://static-binary", "static-binary", static_binary).description("A static PNG").mime_type("image/png"))
        .resource_template(
            ResourceTemplateDef::new("test://template/{id}/data", "template-data", template_data)
                .description("Data for an id")
                .mime_type("application/json"),
        )
        .prompt(PromptDef::new("test_simple_prompt", "A simple prompt", || async { "This is a simple prompt for testing.".to_owned() }))
        .prompt(PromptDef::new("test_prompt_with_arguments", "A prompt with two arguments", prompt_with_arguments))
        .prompt(PromptDef::new("test_prompt_with_embedded_resource", "A prompt embedding a resource", prompt_with_embedded_resource))
        .prompt(PromptDef::new("test_prompt_with_image", "A prompt with an image", prompt_with_image))
        .prompt(
            PromptDef::new("test_input_required_result_prompt", "MRTR: a prompt that asks for context first", mrtr_prompt)
                .elicits::<Context>(),
        )
        .completion(CompletionDef::prompt("test_prompt_with_arguments", |r| async move {
            ["test", "testing", "tested", "value1", "value2"].iter().filter(|v| v.starts_with(&r.value)).map(|v| (*v).to_owned()).collect()
        }))
        .build()
}

fn main() -> std::process::ExitCode {
    conformance::init_logs();
    let mut port: u16 = std::env::var("PORT")
        .ok()
        .and_then(|p| p.parse().ok())
        .unwrap_or(3000);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        if let ("--port", Some(p)) = (arg.as_str(), args.next().and_then(|p| p.parse().ok())) {
            port = p;
        } else {
            eprintln!("usage: conformance-server [--port PORT]");
            return std::process::ExitCode::from(2);
        }
    }
    let mut hooks = None;
    let skills = match skills() {
        Ok(skills) => skills,
        Err(e) => {
            eprintln!("conformance-server: the skills fixture: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let server = match build(&mut hooks, skills) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("conformance-server: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build();
    let Ok(runtime) = runtime else {
        eprintln!("conformance-server: cannot start the runtime");
        return std::process::ExitCode::FAILURE;
    };
    let outcome = runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        eprintln!("conformance-server: listening on http://127.0.0.1:{port}/mcp");
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
        };
        http::serve(listener, Http::new(server), "/mcp", shutdown).await
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-server: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// The fixtures only the 2025-11-25 scenarios call (`--requirements
/// 2025-11-25`): served to legacy sessions by the same handlers, whose
/// questions become live `elicitation/create` / `sampling/createMessage`
/// requests there (and MRTR rounds on the modern wire).
mod legacy_fixtures {
    use std::borrow::Cow;
    use std::time::Duration;

    use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
    use serde::Deserialize;
    use tern_protocol::JsonObject;
    use tern_protocol::logging::LoggingLevel;
    use tern_server::{Answer, Args, Ctx, Elicit, Sample, ServerBuilder, ToolDef, ToolError};

    /// A form answer kept as it came, with a fixed schema.
    macro_rules! form {
        ($name:ident, $schema:tt) => {
            #[derive(Deserialize)]
            #[serde(transparent)]
            struct $name(JsonObject);

            impl std::fmt::Display for $name {
                fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    write!(f, "{}", serde_json::Value::Object(self.0.clone()))
                }
            }

            impl JsonSchema for $name {
                fn schema_name() -> Cow<'static, str> {
                    stringify!($name).into()
                }
                fn json_schema(_: &mut SchemaGenerator) -> Schema {
                    json_schema!($schema)
                }
            }
        };
    }

    form!(UserInfo, {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"}
        },
        "required": ["username", "email"]
    });

    form!(Defaults, {
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true}
        }
    });

    form!(Enums, {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"}
            ]},
            "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"}
            ]}}
        }
    });

    fn describe<T: std::fmt::Display>(answer: &Answer<T>) -> String {
        match answer {
            Answer::Accept(content) => format!("action=accept, content={content}"),
            Answer::Decline => "action=decline".into(),
            Answer::Cancel => "action=cancel".into(),
        }
    }

    #[allow(deprecated, reason = "the 2025 scenario is about logging")]
    async fn with_logging(ctx: Ctx) -> &'static str {
        ctx.log(LoggingLevel::Info, None, "Tool execution started");
        tokio::time::sleep(Duration::from_millis(50)).await;
        ctx.log(LoggingLevel::Info, None, "Tool processing data");
        tokio::time::sleep(Duration::from_millis(50)).await;
        ctx.log(LoggingLevel::Info, None, "Tool execution completed");
        "Tool with logging executed successfully"
    }

    #[derive(Deserialize, JsonSchema)]
    struct Prompt {
        /// The prompt to send to the LLM.
        prompt: String,
    }

    #[allow(deprecated, reason = "the 2025 scenario is about sampling")]
    async fn sampling(ctx: Ctx, Args(p): Args<Prompt>) -> Result<String, ToolError> {
        let reply = ctx.ask(Sample::text(p.prompt, 100)).await?;
        Ok(format!(
            "LLM response: {}",
            reply.text().unwrap_or_default()
        ))
    }

    #[derive(Deserialize, JsonSchema)]
    struct Message {
        /// The message to show the user.
        message: String,
    }

    async fn elicitation(ctx: Ctx, Args(m): Args<Message>) -> Result<String, ToolError> {
        let answer = ctx.ask(Elicit::<UserInfo>::form(m.message)).await?;
        Ok(format!("User response: {}", describe(&answer)))
    }

    async fn defaults(ctx: Ctx) -> Result<String, ToolError> {
        let answer = ctx
            .ask(Elicit::<Defaults>::form("Please review your details"))
            .await?;
        Ok(format!("Elicitation completed: {}", describe(&answer)))
    }

    async fn enums(ctx: Ctx) -> Result<String, ToolError> {
        let answer = ctx.ask(Elicit::<Enums>::form("Please choose")).await?;
        Ok(format!("Elicitation completed: {}", describe(&answer)))
    }

    pub(super) fn register(builder: ServerBuilder) -> ServerBuilder {
        builder
            .tool(ToolDef::new(
                "test_tool_with_logging",
                "Logs three messages while it runs",
                with_logging,
            ))
            .tool(ToolDef::new(
                "test_sampling",
                "Asks the client's model",
                sampling,
            ))
            .tool(
                ToolDef::new(
                    "test_elicitation",
                    "Asks the user for a username and email",
                    elicitation,
                )
                .elicits::<UserInfo>(),
            )
            .tool(
                ToolDef::new(
                    "test_elicitation_sep1034_defaults",
                    "A form with defaults",
                    defaults,
                )
                .elicits::<Defaults>(),
            )
            .tool(
                ToolDef::new(
                    "test_elicitation_sep1330_enums",
                    "A form with the five enum kinds",
                    enums,
                )
                .elicits::<Enums>(),
            )
    }
}
