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

/// `tern prompts`: every prompt.
pub(super) async fn prompts(c: &Connected) -> Result<u8, Failure> {
    let d = &c.driver;
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
