//! Sampling at the terminal: the prompt shown, the reply typed, or
//! produced by a `--sampler` command.

use std::io::IsTerminal;
use std::process::Stdio;
use std::sync::Arc;

use tern_client::transport::BoxFuture;
use tern_client::{HandlerError, Question, Sampling};
use tern_protocol::content::Role;
use tern_protocol::content::TextContent;
use tern_protocol::sampling::{
    CreateMessageRequestParams, CreateMessageResult, SamplingContent, SamplingContentBlock,
    StopReason,
};
use tern_protocol::{InputRequest, InputResponse};
use tokio::io::AsyncWriteExt;

use super::Session;
use super::elicit::{LivePresets, not_here};
use crate::form::{self, CANCEL, DECLINE};

/// Who writes sampling replies.
#[derive(Debug, Clone)]
pub(crate) enum Sampler {
    /// The person types them.
    Human,
    /// A command (run by `sh -c`) reads the prompt on stdin and writes the
    /// reply on stdout.
    Command(String),
}

/// Answers sampling requests.
#[derive(Debug)]
pub(crate) struct TerminalSampling {
    /// The shared session.
    pub(crate) session: Arc<Session>,
    /// Prompting is allowed.
    pub(crate) interactive: bool,
    /// Who replies.
    pub(crate) sampler: Sampler,
    /// Preset answers to a 2025 server's live questions.
    pub(crate) live: LivePresets,
}

/// The conversation as plain text: the system prompt, then each message
/// (labelled when there is more than one speaker or a system prompt).
pub(crate) fn prompt_text(params: &CreateMessageRequestParams) -> String {
    let plain = params.system_prompt.is_none()
        && params.messages.len() == 1
        && params.messages[0].role == Role::User;
    let mut parts = Vec::new();
    if let Some(system) = &params.system_prompt {
        parts.push(format!("System: {system}"));
    }
    for m in &params.messages {
        let text: Vec<String> = m
            .content
            .blocks()
            .iter()
            .map(|b| match b {
                SamplingContentBlock::Text(t) => t.text.clone(),
                SamplingContentBlock::Image(i) => format!("[image, {}]", i.mime_type),
                SamplingContentBlock::Audio(a) => format!("[audio, {}]", a.mime_type),
                SamplingContentBlock::ToolUse(t) => format!(
                    "[tool call {} {}]",
                    t.name,
                    serde_json::Value::Object(t.input.clone())
                ),
                SamplingContentBlock::ToolResult(r) => {
                    format!("[tool result for {}]", r.tool_use_id)
                }
            })
            .collect();
        let text = text.join("\n");
        if plain {
            parts.push(text);
        } else {
            let who = match m.role {
                Role::User => "User",
                Role::Assistant => "Assistant",
            };
            parts.push(format!("{who}: {text}"));
        }
    }
    parts.join("\n\n")
}

fn reply(text: String, model: String) -> CreateMessageResult {
    CreateMessageResult {
        role: Role::Assistant,
        content: SamplingContent::One(SamplingContentBlock::Text(TextContent::new(text))),
        model,
        stop_reason: Some(StopReason::EndTurn),
        meta: None,
    }
}

impl Sampling for TerminalSampling {
    fn create_message(
        &self,
        question: Question,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, HandlerError>> {
        Box::pin(async move {
            match self
                .live
                .answer(&question.key, &InputRequest::sampling(params.clone()))
            {
                Some(Ok(InputResponse::Sampling(reply))) => return Ok(*reply),
                Some(Ok(_)) => {
                    return Err(HandlerError(format!(
                        "the preset answer for `{}` is not a sampling reply",
                        question.key
                    )));
                }
                Some(Err(e)) => return Err(e),
                None => {}
            }
            let prompt = prompt_text(&params);
            match &self.sampler {
                Sampler::Command(command) => {
                    if std::io::stderr().is_terminal() {
                        let asker = self.session.asker(&question, "asks for a completion");
                        self.session.progress.interrupt();
                        eprintln!("tern: {asker}; running `{command}`");
                    }
                    let text = run_sampler(command, &prompt).await?;
                    Ok(reply(text, command.clone()))
                }
                Sampler::Human => {
                    if !self.interactive {
                        return Err(not_here(&question.key));
                    }
                    let max = params.max_tokens;
                    let text = self
                        .session
                        .with_terminal(move |s, console| {
                            console.mark(&format!(
                                "\n-- {} --\n(You are the model; at most ~{max} tokens.)\n",
                                s.asker(&question, "asks for a completion"),
                            ));
                            console.say(&format!(
                                "{}\n(Type the reply and end it with an empty line; type {DECLINE} or {CANCEL} to refuse, which stops the call.)\n",
                                form::server_text(&prompt)
                            ));
                            let mut lines: Vec<String> = Vec::new();
                            loop {
                                let prompt = if lines.is_empty() { "> " } else { ". " };
                                match console.ask(prompt) {
                                    None => return None,
                                    Some(l) if matches!(l.trim(), DECLINE | CANCEL) => return None,
                                    Some(l) if l.trim().is_empty() && !lines.is_empty() => break,
                                    Some(l) if l.trim().is_empty() => {}
                                    Some(l) => lines.push(l),
                                }
                            }
                            console.say("Sending your reply.\n");
                            Some(lines.join("\n"))
                        })
                        .await?;
                    if let Some(text) = text {
                        Ok(reply(text, "human".into()))
                    } else {
                        self.session.refuse();
                        Err(HandlerError("you refused the sampling request".into()))
                    }
                }
            }
        })
    }
}

/// Runs the `--sampler` command with `prompt` on its standard input.
async fn run_sampler(command: &str, prompt: &str) -> Result<String, HandlerError> {
    let fail =
        |e: &dyn std::fmt::Display| HandlerError(format!("the sampler `{command}` failed: {e}"));
    let mut child = tokio::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| fail(&e))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A sampler that does not read its input is not an error.
        let _ = stdin.write_all(prompt.as_bytes()).await;
        drop(stdin);
    }
    let out = child.wait_with_output().await.map_err(|e| fail(&e))?;
    if !out.status.success() {
        return Err(fail(&out.status));
    }
    let text = String::from_utf8(out.stdout).map_err(|e| fail(&e))?;
    Ok(text.trim_end_matches(['\r', '\n']).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_protocol::sampling::SamplingMessage;

    #[test]
    fn a_single_user_message_is_the_prompt_itself() {
        let mut p = CreateMessageRequestParams {
            messages: vec![SamplingMessage::user_text("Summarise: x")],
            max_tokens: 10,
            ..Default::default()
        };
        assert_eq!(prompt_text(&p), "Summarise: x");
        p.system_prompt = Some("Be brief".into());
        assert_eq!(prompt_text(&p), "System: Be brief\n\nUser: Summarise: x");
    }

    #[tokio::test]
    async fn a_sampler_command_reads_the_prompt_and_writes_the_reply() {
        assert_eq!(run_sampler("tr a-z A-Z", "hello\n").await.unwrap(), "HELLO");
        assert!(run_sampler("exit 3", "x").await.is_err());
    }
}
