//! The client the official conformance suite drives (`conformance client
//! --command conformance-client --requirements 2026-07-28`), written only
//! against tern's public API.
//!
//! The suite runs it as `conformance-client <server URL>` with the scenario in
//! `MCP_CONFORMANCE_SCENARIO` and extra data in `MCP_CONFORMANCE_CONTEXT`.
//! Exit status 0 when the scenario's steps ran, 1 otherwise.

use std::process::ExitCode;

use serde_json::{Value, json};
use tern_client::auth::{FollowRedirect, OAuth, OAuthConfig, PreRegistered};
use tern_client::legacy::DualEra;
use tern_client::transport::BoxFuture;
use tern_client::transport::http::HttpTransport;
use tern_client::{
    CallOptions, Client, ClientError, Elicitation, HandlerError, Question, Round, Sampling,
    StaticRoots,
};
use tern_protocol::Implementation;
use tern_protocol::content::{Role, TextContent};
use tern_protocol::elicitation::{
    ElicitRequestFormParams, ElicitRequestUrlParams, ElicitResult, ElicitValue, NumberKind,
    PrimitiveSchema, StringFormat,
};
use tern_protocol::roots::Root;
use tern_protocol::sampling::{
    CreateMessageRequestParams, CreateMessageResult, SamplingContent, SamplingContentBlock,
    StopReason,
};

/// Accepts every form with a plausible value per field, and consents to URLs.
struct AcceptAll;

fn sample(field: &PrimitiveSchema) -> ElicitValue {
    match field {
        PrimitiveSchema::String(s) => match (&s.default, s.format) {
            (Some(d), _) => ElicitValue::String(d.clone()),
            (None, Some(StringFormat::Email)) => "test@example.com".into(),
            (None, Some(StringFormat::Uri)) => "https://example.com".into(),
            (None, Some(StringFormat::Date)) => "2026-07-28".into(),
            (None, Some(StringFormat::DateTime)) => "2026-07-28T00:00:00Z".into(),
            (None, None) => "test".into(),
        },
        PrimitiveSchema::Number(n) => {
            let v = n.default.or(n.minimum).unwrap_or(1.0);
            #[allow(
                clippy::cast_possible_truncation,
                reason = "a sample value within the field's bounds"
            )]
            let whole = v as i64;
            if n.kind == NumberKind::Integer || v.fract() == 0.0 {
                ElicitValue::from(whole)
            } else {
                ElicitValue::Number(serde_json::Number::from_f64(v).unwrap_or_else(|| 1.into()))
            }
        }
        PrimitiveSchema::Boolean(b) => ElicitValue::Bool(b.default.unwrap_or(true)),
        PrimitiveSchema::UntitledSingleSelect(e) => e
            .default
            .clone()
            .or_else(|| e.options.first().cloned())
            .unwrap_or_default()
            .into(),
        PrimitiveSchema::LegacyTitled(e) => e
            .default
            .clone()
            .or_else(|| e.options.first().cloned())
            .unwrap_or_default()
            .into(),
        PrimitiveSchema::TitledSingleSelect(e) => e
            .default
            .clone()
            .or_else(|| e.one_of.first().map(|o| o.value.clone()))
            .unwrap_or_default()
            .into(),
        PrimitiveSchema::UntitledMultiSelect(e) => {
            ElicitValue::Strings(e.items.options.iter().take(1).cloned().collect())
        }
        PrimitiveSchema::TitledMultiSelect(e) => ElicitValue::Strings(
            e.items
                .any_of
                .iter()
                .take(1)
                .map(|o| o.value.clone())
                .collect(),
        ),
    }
}

impl Elicitation for AcceptAll {
    fn form(
        &self,
        _question: Question,
        params: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        let content = params
            .requested_schema
            .properties
            .iter()
            .map(|(k, f)| (k.clone(), sample(f)))
            .collect();
        Box::pin(async move { Ok(ElicitResult::accept(content)) })
    }

    fn url(
        &self,
        _question: Question,
        _params: ElicitRequestUrlParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        Box::pin(async { Ok(ElicitResult::consent()) })
    }

    fn supports_url(&self) -> bool {
        true
    }
}

/// Answers every sampling request with a fixed text.
struct FixedModel;

impl Sampling for FixedModel {
    fn create_message(
        &self,
        _question: Question,
        _params: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, HandlerError>> {
        Box::pin(async {
            Ok(CreateMessageResult {
                role: Role::Assistant,
                content: SamplingContent::One(SamplingContentBlock::Text(TextContent::new("ok"))),
                model: "tern-conformance".into(),
                stop_reason: Some(StopReason::EndTurn),
                meta: None,
            })
        })
    }
}

/// Arguments for a tool from its schema: a plausible value per required
/// property.
fn sample_arguments(schema: &tern_protocol::JsonObject) -> Value {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = serde_json::Map::new();
    if let Some(Value::Object(props)) = schema.get("properties") {
        for (name, prop) in props {
            if !required.contains(&name.as_str()) {
                continue;
            }
            let value = match prop.get("type").and_then(Value::as_str) {
                Some("integer" | "number") => json!(1),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => json!("test"),
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

async fn tools_call(client: &Client) -> Result<(), ClientError> {
    client.list_tools().await?;
    let result = client
        .call_tool("add_numbers", Some(json!({"a": 2, "b": 3})))
        .await?;
    eprintln!(
        "add_numbers: {:?}",
        result.content.first().and_then(|c| c.as_text())
    );
    Ok(())
}

async fn request_state(client: &Client) -> Result<(), ClientError> {
    let options = CallOptions::default();
    let round = client
        .call_tool_once("test_mrtr_echo_state", Some(json!({})), &options)
        .await?;
    let Round::InputRequired(pending) = round else {
        eprintln!("test_mrtr_echo_state completed at once");
        return Ok(());
    };
    // While that round waits, an unrelated call carries nothing of it (rule
    // `round-isolated`).
    client
        .call_tool("test_mrtr_unrelated", Some(json!({})))
        .await?;
    let answers = client.answer(&pending, &options).await?;
    client.resume_tool(&pending, &answers, &options).await?;
    client
        .call_tool("test_mrtr_no_state", Some(json!({})))
        .await?;
    client
        .call_tool("test_mrtr_no_result_type", Some(json!({})))
        .await?;
    Ok(())
}

async fn standard_headers(client: &Client) -> Result<(), ClientError> {
    let tools = client.list_tools().await?;
    for tool in &tools {
        if let Err(e) = client
            .call_tool(&tool.name, Some(sample_arguments(&tool.input_schema)))
            .await
        {
            eprintln!("{}: {e}", tool.name);
        }
    }
    for resource in client.list_resources().await? {
        if let Err(e) = client
            .read_resource(&resource.uri, &CallOptions::default())
            .await
        {
            eprintln!("{}: {e}", resource.uri);
        }
    }
    for prompt in client.list_prompts().await? {
        let args: tern_protocol::JsonObject = prompt
            .arguments
            .iter()
            .flatten()
            .filter(|a| a.required == Some(true))
            .map(|a| (a.name.clone(), Value::String("test".into())))
            .collect();
        if let Err(e) = client
            .get_prompt(&prompt.name, Some(args), &CallOptions::default())
            .await
        {
            eprintln!("{}: {e}", prompt.name);
        }
    }
    Ok(())
}

async fn custom_headers(client: &Client, context: &Value) -> Result<(), ClientError> {
    client.list_tools().await?;
    for call in context["toolCalls"].as_array().into_iter().flatten() {
        let name = call["name"].as_str().unwrap_or_default();
        if let Err(e) = client
            .call_tool(name, Some(call["arguments"].clone()))
            .await
        {
            eprintln!("{name}: {e}");
        }
    }
    Ok(())
}

async fn invalid_tool_headers(client: &Client) -> Result<(), ClientError> {
    // Tools with invalid x-mcp-header annotations are dropped from the list.
    let tools = client.list_tools().await?;
    for tool in &tools {
        let mut args = sample_arguments(&tool.input_schema);
        if tool.name == "valid_tool" {
            args = json!({"region": "us-east-1"});
        }
        client.call_tool(&tool.name, Some(args)).await?;
    }
    Ok(())
}

async fn schema_preservation(client: &Client) -> Result<(), ClientError> {
    let tools = client.list_tools().await?;
    if let Some(tool) = tools.iter().find(|t| t.name == "json_schema_2020_12_tool") {
        client
            .call_tool(
                "json_schema_echo",
                Some(json!({"schema": tool.input_schema})),
            )
            .await?;
    }
    Ok(())
}

/// Lists the tools and calls each one with sample arguments (the 2025
/// scenarios whose mock asks questions from inside its tools).
async fn call_every_tool(client: &Client) -> Result<(), ClientError> {
    for tool in client.list_tools().await? {
        let result = client
            .call_tool(&tool.name, Some(sample_arguments(&tool.input_schema)))
            .await?;
        eprintln!(
            "{}: {:?}",
            tool.name,
            result.content.first().and_then(|c| c.as_text())
        );
    }
    Ok(())
}

/// The Skills extension's client scenarios (`sep-2640-client-*`): the
/// skills listed (which reads no file: nothing is prefetched); with `load`,
/// the first skill loaded as a host loads one — its `SKILL.md` read and
/// verified against the entry (size, digest, frontmatter). A file that
/// fails stops the load there: no other file of the skill is read, and the
/// run fails (the verify scenarios serve a tampered `SKILL.md`).
async fn skills(client: &Client, load: bool) -> Result<(), ClientError> {
    let listing = client.skills().await?;
    for invalid in &listing.invalid {
        eprintln!(
            "skills/list entry {} refused: {}",
            invalid.index, invalid.reason
        );
    }
    if !load {
        return Ok(());
    }
    let Some(skill) = listing.skills.first() else {
        eprintln!("no skill to load");
        return Ok(());
    };
    let md = client.read_skill_md(skill).await?;
    eprintln!("{} loaded ({} bytes, verified)", md.uri, md.bytes.len());
    Ok(())
}

/// The CIMD URL the suite's `auth/basic-cimd` expects as the client id.
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// OAuth for an `auth/*` scenario: the suite's mock authorization servers
/// consent by themselves (a redirect read from `Location`); a pre-registered
/// client when the context gives one; the suite's CIMD URL.
fn oauth(url: &str, context: &Value) -> Result<OAuth, ClientError> {
    let mut config =
        OAuthConfig::new("tern-conformance-client").client_metadata_url(CLIENT_METADATA_URL);
    // The client credentials extension: the context's client, no user.
    config.client_credentials = context["name"].as_str() == Some("auth/client-credentials-basic");
    if let Some(id) = context["client_id"].as_str() {
        config = config.pre_registered(PreRegistered::new(
            context["issuer"].as_str().map(str::to_owned),
            id,
            context["client_secret"].as_str().map(str::to_owned),
        ));
    }
    OAuth::new(
        url,
        config,
        FollowRedirect::new("http://localhost:3000/callback")?,
    )
}

/// The authorized calls of every `auth/*` scenario: `tools/list`, then
/// `tools/call test-tool`.
async fn authorized_calls(client: &Client) -> Result<(), ClientError> {
    client.list_tools().await?;
    client.call_tool("test-tool", Some(json!({}))).await?;
    Ok(())
}

/// The transport for the wire the harness asks for (the suite's client
/// contract): `MCP_CONFORMANCE_PROTOCOL_VERSION` of a 2025 version means a 2025
/// session (no probe: the harness said so), anything else the modern wire.
fn transport(
    url: &str,
    oauth: Option<OAuth>,
) -> Result<Box<dyn FnOnce(tern_client::ClientBuilder) -> Client>, ClientError> {
    let wire = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_default();
    if tern_protocol::legacy::is_session_era(&wire) {
        let mut t = DualEra::http(url)?.assume_legacy();
        if let Some(oauth) = oauth {
            t = t.with_oauth(oauth)?;
        }
        Ok(Box::new(move |b| b.build(t)))
    } else {
        let mut t = HttpTransport::new(url)?;
        if let Some(oauth) = oauth {
            t = t.with_oauth(oauth)?;
        }
        Ok(Box::new(move |b| b.build(t)))
    }
}

async fn run(scenario: &str, url: &str, context: &Value) -> Result<(), String> {
    let oauth = if scenario.starts_with("auth/") {
        Some(oauth(url, context).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let build = transport(url, oauth).map_err(|e| e.to_string())?;
    let client = build(
        Client::builder()
            .info(Implementation::new(
                "tern-conformance-client",
                env!("CARGO_PKG_VERSION"),
            ))
            .elicitation(AcceptAll)
            .sampling(FixedModel)
            .roots(StaticRoots(vec![Root::new("file:///tmp/tern-conformance")])),
    );
    let outcome = match scenario {
        "tools_call" => tools_call(&client).await,
        "initialize" => client.list_tools().await.map(|_| ()),
        "elicitation-sep1034-client-defaults" | "sse-retry" => call_every_tool(&client).await,
        "request-metadata" => {
            async {
                client.discover().await?;
                client.list_tools().await.map(|_| ())
            }
            .await
        }
        "sep-2322-client-request-state" => request_state(&client).await,
        "http-standard-headers" => standard_headers(&client).await,
        "http-custom-headers" => custom_headers(&client, context).await,
        "http-invalid-tool-headers" => invalid_tool_headers(&client).await,
        "json-schema-ref-no-deref" => client.list_tools().await.map(|_| ()),
        "json-schema-2020-12-preservation" => schema_preservation(&client).await,
        "sep-2640-client-no-prefetch" => skills(&client, false).await,
        other if other.starts_with("sep-2640-client-verify-") => skills(&client, true).await,
        other if other.starts_with("auth/") => authorized_calls(&client).await,
        other => return Err(format!("unknown scenario {other:?}")),
    };
    outcome.map_err(|e| format!("{e:#}"))
}

fn main() -> ExitCode {
    conformance::init_logs();
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!("usage: conformance-client <server URL> (scenario in MCP_CONFORMANCE_SCENARIO)");
        return ExitCode::FAILURE;
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let Ok(runtime) = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    else {
        eprintln!("conformance-client: cannot start the runtime");
        return ExitCode::FAILURE;
    };
    match runtime.block_on(run(&scenario, &url, &context)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance-client: {e}");
            ExitCode::FAILURE
        }
    }
}
