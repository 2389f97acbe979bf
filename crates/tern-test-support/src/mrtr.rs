//! The MRTR handlers both fixture servers register (tern-server's own tests
//! and the server tern-client is tested against), with the question types
//! they ask: one copy, so a change to how a question reads is made once.
//! Each fixture registers them under its builder, beside its own tools
//! (feature `server`).

use schemars::JsonSchema;
use serde::Deserialize;
use tern_server::{Answer, Args, Ctx, Elicit, ListRoots, Sample, ToolError, Uri};

/// A form with one text field.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Name {
    /// Your name
    pub name: String,
}

/// A second form, for two questions in one round.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Color {
    /// Favourite colour
    pub color: String,
}

/// The argument of the `ask_prompt` prompt.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct Who {
    /// Who the prompt is for.
    pub who: String,
}

/// Two questions in one round (`tokio::join!` of two asks).
///
/// # Errors
/// When the round ends otherwise than with both answers.
pub async fn batch(ctx: Ctx) -> Result<String, ToolError> {
    let (name, color) = tokio::join!(
        ctx.ask(Elicit::<Name>::form("Name?").key("name")),
        ctx.ask(Elicit::<Color>::form("Colour?").key("color")),
    );
    let (Answer::Accept(Name { name }), Answer::Accept(Color { color })) = (name?, color?) else {
        return Ok("incomplete".into());
    };
    Ok(format!("{name} likes {color}"))
}

/// A URL-mode elicitation: `consented`, `declined` or `cancelled`.
///
/// # Errors
/// When the question cannot be asked.
pub async fn login(ctx: Ctx) -> Result<String, ToolError> {
    match ctx
        .ask(Elicit::url("Sign in", "https://example.com/login?flow=1").key("login"))
        .await?
    {
        Answer::Accept(()) => Ok("consented".into()),
        Answer::Decline => Ok("declined".into()),
        Answer::Cancel => Ok("cancelled".into()),
    }
}

/// A sampling question: `model: text`.
///
/// # Errors
/// When the question cannot be asked.
#[allow(deprecated, reason = "sampling is deprecated and still supported")]
pub async fn sample(ctx: Ctx) -> Result<String, ToolError> {
    let reply = ctx
        .ask(Sample::text("Capital of France?", 50).key("capital"))
        .await?;
    Ok(format!(
        "{}: {}",
        reply.model,
        reply.text().unwrap_or_default()
    ))
}

/// The client's roots, comma-separated.
///
/// # Errors
/// When the question cannot be asked.
#[allow(deprecated, reason = "roots are deprecated and still supported")]
pub async fn roots(ctx: Ctx) -> Result<String, ToolError> {
    let roots = ctx.ask(ListRoots::new().key("roots")).await?;
    Ok(roots
        .iter()
        .map(|r| r.uri.as_str())
        .collect::<Vec<_>>()
        .join(","))
}

/// Asks again until the name has three letters: a client answering "x"
/// never gets a result (the round bound, rule `bounded-rounds`).
///
/// # Errors
/// When the question cannot be asked (the round bound included).
pub async fn until_valid(ctx: Ctx) -> Result<String, ToolError> {
    loop {
        let Answer::Accept(Name { name }) = ctx
            .ask(Elicit::<Name>::form("A name of 3 letters or more?").key("name"))
            .await?
        else {
            return Ok("none".into());
        };
        if name.len() >= 3 {
            return Ok(name);
        }
    }
}

/// A prompt that asks before answering.
///
/// # Errors
/// When the question cannot be asked.
pub async fn ask_prompt(ctx: Ctx, Args(w): Args<Who>) -> Result<String, ToolError> {
    let Answer::Accept(Color { color }) = ctx
        .ask(Elicit::<Color>::form("Colour?").key("color"))
        .await?
    else {
        return Ok(format!("{} has no colour", w.who));
    };
    Ok(format!("{} likes {color}", w.who))
}

/// A resource that asks who reads it.
///
/// # Errors
/// When the question cannot be asked.
pub async fn ask_resource(ctx: Ctx, Uri(uri): Uri) -> Result<String, ToolError> {
    let Answer::Accept(Name { name }) = ctx
        .ask(Elicit::<Name>::form("Reader?").key("reader"))
        .await?
    else {
        return Ok("anonymous".into());
    };
    Ok(format!("{uri} for {name}"))
}
