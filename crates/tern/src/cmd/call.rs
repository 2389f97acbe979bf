//! `tern call TOOL [key=value ...]`: `tools/call`, its arguments checked
//! against the tool's `inputSchema` first.

use tern_protocol::JsonObject;
use tern_protocol::tool::Tool;

use super::Connected;
use super::args::tool_arguments;
use crate::advice::failure;
use crate::exit::{Failure, usage};
use crate::rounds::First;

/// `tern call`.
pub(super) async fn call(
    c: &Connected,
    tool: String,
    pairs: &[String],
    args: Option<&str>,
) -> Result<u8, Failure> {
    let args = tool_arguments(pairs, args)?;
    let args = checked_arguments(c, &tool, args).await?;
    c.parkable().await?;
    let ended = c.run(&First::Tool(tool.clone(), args)).await?;
    c.finish(ended, Some(&tool))
}

/// The tool named `name`, with "did you mean" when it does not exist;
/// `None` when the server cannot list its tools.
async fn find_tool(c: &Connected, name: &str) -> Result<Option<Tool>, Failure> {
    let d = &c.driver;
    let tools = match d.wait_raw("tools/list", d.client.list_tools()).await? {
        Ok(t) => t,
        // A server that cannot list its tools: the call says the rest.
        Err(e) if e.rpc_error().is_some() => return Ok(None),
        Err(e) => return Err(failure(&e, &d.session)),
    };
    if let Some(t) = tools.iter().find(|t| t.name == name) {
        return Ok(Some(t.clone()));
    }
    let hint = crate::suggest::did_you_mean(name, tools.iter().map(|t| t.name.as_str()));
    Err(usage(format!(
        "{} has no tool `{name}`{hint}; `tern tools` lists its {} tools",
        d.who(),
        tools.len()
    )))
}

/// The arguments checked against the tool's schema (and typed by it).
pub(super) async fn checked_arguments(
    c: &Connected,
    tool: &str,
    mut args: JsonObject,
) -> Result<JsonObject, Failure> {
    if let Some(t) = find_tool(c, tool).await? {
        crate::schema::check(&mut args, &t.input_schema).map_err(|problems| {
            usage(format!(
                "the arguments do not fit {tool}'s input schema:\n  {}\n(`tern tools` shows its arguments)",
                problems.join("\n  ")
            ))
        })?;
    }
    Ok(args)
}
