//! `tern discover`, `tools`, `prompts`, `resources`: what a server offers.

use serde_json::json;

use super::{Connected, emit, emit_json};
use crate::exit::{EXIT_OK, EXIT_SERVER, Failure};
use crate::output;

/// `tern discover`: `server/discover`.
pub(super) async fn discover(c: &Connected) -> Result<u8, Failure> {
    let d = &c.driver;
    let r = d.wait("server/discover", d.client.discover()).await?;
    if c.json {
        emit_json(&r);
    } else {
        emit(&output::discover(&r));
    }
    Ok(EXIT_OK)
}

/// `tern tools`: every tool.
pub(super) async fn tools(c: &Connected) -> Result<u8, Failure> {
    let d = &c.driver;
    let tools = d.wait("tools/list", d.client.list_tools()).await?;
    if c.json {
        emit_json(&json!({ "tools": tools }));
    } else {
        emit(&output::tools(&tools));
    }
    Ok(EXIT_OK)
}

/// What a list command lists, for [`offers`].
#[derive(Clone, Copy)]
enum Offer {
    Prompts,
    Resources,
}

/// Whether the server's capabilities declare `what` (its `server/discover`,
/// or on a 2025 session its `initialize` result, which costs no request).
/// A server that declares nothing of it is not asked to list it: it would
/// answer `-32601` (2025-11-25 Server Features: a server that supports
/// prompts or resources MUST declare the capability). When the
/// capabilities cannot be read the list is asked anyway.
#[allow(
    clippy::print_stderr,
    reason = "the note goes beside the (empty) list, on standard error"
)]
async fn offers(c: &Connected, what: Offer) -> Result<bool, Failure> {
    let d = &c.driver;
    let Ok(found) = d.wait_raw("server/discover", d.client.discover()).await? else {
        return Ok(true);
    };
    let (declared, noun) = match what {
        Offer::Prompts => (found.capabilities.prompts.is_some(), "prompts"),
        Offer::Resources => (found.capabilities.resources.is_some(), "resources"),
    };
    if !declared {
        eprintln!(
            "tern: {} offers no {noun} (its capabilities declare none)",
            tern::safe::line(&d.who())
        );
    }
    Ok(declared)
}

/// `tern prompts`: every prompt.
pub(super) async fn prompts(c: &Connected) -> Result<u8, Failure> {
    let d = &c.driver;
    if !offers(c, Offer::Prompts).await? {
        if c.json {
            emit_json(&json!({ "prompts": [] }));
        }
        return Ok(EXIT_OK);
    }
    let prompts = d.wait("prompts/list", d.client.list_prompts()).await?;
    if c.json {
        emit_json(&json!({ "prompts": prompts }));
    } else {
        emit(&output::prompts(&prompts));
    }
    Ok(EXIT_OK)
}

/// `tern resources`: every resource and resource template.
pub(super) async fn resources(c: &Connected) -> Result<u8, Failure> {
    let d = &c.driver;
    if !offers(c, Offer::Resources).await? {
        if c.json {
            emit_json(&json!({ "resources": [], "resourceTemplates": [] }));
        }
        return Ok(EXIT_OK);
    }
    let resources = d.wait("resources/list", d.client.list_resources()).await?;
    let templates = match d
        .wait(
            "resources/templates/list",
            d.client.list_resource_templates(),
        )
        .await
    {
        Err(f) if f.code == EXIT_SERVER => Vec::new(),
        other => other?,
    };
    if c.json {
        emit_json(&json!({ "resources": resources, "resourceTemplates": templates }));
    } else {
        emit(&output::resources(&resources, &templates));
    }
    Ok(EXIT_OK)
}
