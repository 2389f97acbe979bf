//! `tern prompt NAME [key=value ...]` (`prompts/get`) and `tern read URI`
//! (`resources/read`): the other two requests that can ask questions.

use std::fmt::Write as _;

use tern_protocol::JsonObject;

use super::Connected;
use super::args::prompt_arguments;
use crate::advice::failure;
use crate::exit::{EXIT_SERVER, Failure, usage};
use crate::rounds::First;

/// `tern prompt`: the prompt checked (it exists, its required arguments
/// are given), then `prompts/get`.
pub(super) async fn prompt(c: &Connected, name: String, pairs: &[String]) -> Result<u8, Failure> {
    let args = prompt_arguments(pairs)?;
    check_prompt(c, &name, &args).await?;
    c.parkable().await?;
    let ended = c
        .run(&First::Prompt(name, Some(args).filter(|a| !a.is_empty())))
        .await?;
    c.finish(ended, None)
}

/// `tern read`: `resources/read`; a failure names the resources it has
/// when the URI is not among them.
pub(super) async fn read(c: &Connected, uri: String) -> Result<u8, Failure> {
    let d = &c.driver;
    c.parkable().await?;
    match c.run(&First::Read(uri.clone())).await {
        Ok(ended) => c.finish(ended, None),
        Err(mut f) => {
            if f.code == EXIT_SERVER
                && let Ok(list) = d.wait("resources/list", d.client.list_resources()).await
                && !list.iter().any(|r| r.uri == uri)
            {
                let hint = crate::suggest::did_you_mean(&uri, list.iter().map(|r| r.uri.as_str()));
                let _ = write!(f.message, "\n(`{uri}` is not among its resources{hint})");
            }
            Err(f)
        }
    }
}

/// A prompt that exists, with its required arguments.
async fn check_prompt(c: &Connected, name: &str, args: &JsonObject) -> Result<(), Failure> {
    let d = &c.driver;
    let prompts = match d.wait_raw("prompts/list", d.client.list_prompts()).await? {
        Ok(p) => p,
        Err(e) if e.rpc_error().is_some() => return Ok(()),
        Err(e) => return Err(failure(&e, &d.session)),
    };
    let Some(p) = prompts.iter().find(|p| p.name == name) else {
        let hint = crate::suggest::did_you_mean(name, prompts.iter().map(|p| p.name.as_str()));
        return Err(usage(format!(
            "{} has no prompt `{name}`{hint}; `tern prompts` lists its {} prompts",
            d.who(),
            prompts.len()
        )));
    };
    let missing: Vec<&str> = p
        .arguments
        .iter()
        .flatten()
        .filter(|a| a.required == Some(true) && !args.contains_key(&a.name))
        .map(|a| a.name.as_str())
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(usage(format!(
            "the prompt {name} needs {}: add {}",
            missing.join(", "),
            missing
                .iter()
                .map(|m| format!("{m}=VALUE"))
                .collect::<Vec<_>>()
                .join(" ")
        )))
    }
}
