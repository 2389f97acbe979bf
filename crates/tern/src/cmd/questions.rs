//! `tern questions TOOL [key=value ...]`: a call's first round of
//! questions for a person (keys, fields, types, allowed values), and as an
//! answers file `--answers FILE` accepts.

use serde_json::{Value, json};
use tern_client::Round;
use tern_client::legacy::Era;
use tern_protocol::elicitation::ElicitRequestParams;
use tern_protocol::task::{Task, TaskStatus};
use tern_protocol::{InputRequest, InputRequests, JsonObject};

use super::args::tool_arguments;
use super::call::checked_arguments;
use super::{Connected, emit_json, print_completed};
use crate::answers::{describe_fields, facts};
use crate::exit::{EXIT_OK, EXIT_SERVER, Failure};
use crate::rounds::First;

/// What `tern questions` says after the questions.
const AFTER: &str = "\nAn answers file for them follows on standard output (edit it, then: tern call ... --answers FILE).\n\
     Later rounds depend on these answers and are not shown; the keys are the server's (tern servers derive them from what a question is, some servers from its text, which changes when the text does).\n";

/// `tern questions`: the first round's questions (to standard error, for
/// people) and an answers file for them (to standard output, for
/// `--answers FILE`); `--json` prints the questions themselves. On a
/// 2025-11-25 server the questions come only while the tool runs, so it is
/// run only with `run` (`--run`); a call that became a task (Tasks
/// extension) is followed until it asks, then cancelled.
pub(super) async fn questions(
    c: &Connected,
    tool: &str,
    (pairs, args): (&[String], Option<&str>),
    run: bool,
) -> Result<u8, Failure> {
    let args = tool_arguments(pairs, args)?;
    let args = checked_arguments(c, tool, args).await?;
    let d = &c.driver;
    let first = First::Tool(tool.to_owned(), args);
    if let Some(Era::Legacy(version)) = c.dual.as_ref().and_then(|t| t.era()) {
        return legacy(c, tool, &first, &version, run).await;
    }
    match d.first(&first).await? {
        Round::Complete(done) => {
            eprintln!(
                "tern: {tool} asked no questions: its first round completed the call (it ran):"
            );
            Ok(print_completed(&done, c.json, Some(tool)))
        }
        Round::InputRequired(pending) => Ok(show(c, tool, &pending.input_requests)),
        Round::Task(task) => task_questions(c, tool, task).await,
        _ => Err(Failure {
            code: EXIT_SERVER,
            message: "the server's reply is an outcome this tern does not know".into(),
        }),
    }
}

/// The questions, described on standard error and as an answers file (or
/// `--json`) on standard output.
fn show(c: &Connected, tool: &str, requests: &InputRequests) -> u8 {
    if c.json {
        emit_json(requests);
    } else {
        eprint!(
            "{}",
            tern::safe::text(&format!(
                "{}{AFTER}",
                describe(tool, requests, "in its first round")
            ))
        );
        emit_json(&template(requests));
    }
    EXIT_OK
}

/// A 2025-11-25 server: no question is known before the tool runs.
async fn legacy(
    c: &Connected,
    tool: &str,
    first: &First,
    version: &str,
    run: bool,
) -> Result<u8, Failure> {
    let who = tern::safe::line(&c.driver.who()).into_owned();
    if !run {
        eprintln!(
            "tern: {who} speaks {version}: a server of that revision asks its questions only while the tool runs \
             (requests of its own, with no key to preset in advance), so tern cannot show {tool}'s questions without running it.\n\
             `tern questions --run ...` runs {tool} and shows each question it asks, refused (the tool takes its fallback, effects included); \
             `tern call` at a terminal asks them, and --answer live-1=... answers the first in a pipe."
        );
        return Ok(EXIT_OK);
    }
    // The run's handlers refuse every question (tern questions never
    // prompts) and keep them.
    let outcome = c.driver.run(first).await;
    let asked: InputRequests = std::mem::take(
        &mut *c
            .driver
            .session
            .refused_live
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
    .into_iter()
    .collect();
    if asked.is_empty() {
        outcome?;
        eprintln!("tern: {tool} ran and asked no questions");
        return Ok(EXIT_OK);
    }
    eprintln!(
        "tern: {tool} ran; each question below was refused as it was asked (the tool took its fallback)"
    );
    Ok(show(c, tool, &asked))
}

/// Tries to follow a task until it asks: at most this many polls.
const TASK_POLLS: u32 = 100;

/// A call that became a task: its questions come in the task record once
/// it is `input_required`; the task is cancelled after (it was only asked
/// for its questions).
async fn task_questions(c: &Connected, tool: &str, task: Task) -> Result<u8, Failure> {
    let d = &c.driver;
    let mut handle = d.client.task(task.task_id.clone());
    let mut pause = task.poll_interval_ms.unwrap_or(200);
    let mut found = None;
    for _ in 0..TASK_POLLS {
        let now = d.wait("tasks/get", handle.get()).await?;
        match now.task.status {
            TaskStatus::InputRequired => {
                found = now.input_requests;
                break;
            }
            TaskStatus::Working => {}
            _ => break,
        }
        let ms = u64::try_from(pause.clamp(20, 5_000)).unwrap_or(200);
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        pause = now.task.poll_interval_ms.unwrap_or(pause);
    }
    let _ = handle.cancel().await;
    match found {
        Some(requests) if !requests.is_empty() => {
            eprintln!(
                "tern: {tool} runs as a task ({}); it asks the questions below, and was cancelled after",
                tern::safe::line(&task.task_id)
            );
            Ok(show(c, tool, &requests))
        }
        _ => {
            eprintln!(
                "tern: {tool} runs as a task ({}) and asked no questions before it ended or was cancelled",
                tern::safe::line(&task.task_id)
            );
            Ok(EXIT_OK)
        }
    }
}

/// The questions, for a person.
pub(crate) fn describe(tool: &str, requests: &InputRequests, when: &str) -> String {
    let mut out = format!(
        "{} asks {} question{} {when}:\n",
        tern::safe::line(tool),
        requests.len(),
        if requests.len() == 1 { "" } else { "s" }
    );
    for (key, q) in requests {
        // The keys, messages and URLs are the server's: one line each.
        let key = tern::safe::line(key);
        let text = match q {
            InputRequest::Elicitation(e) => match &e.params {
                ElicitRequestParams::Form(f) => format!(
                    "\n{key}: a form: {}\n{}\n  e.g. --answer {key}.FIELD=VALUE{}\n",
                    tern::safe::line(f.message.trim()),
                    describe_fields(f, "  "),
                    if f.requested_schema.properties.len() == 1 {
                        format!(" or --answer {key}=VALUE")
                    } else {
                        String::new()
                    }
                ),
                ElicitRequestParams::Url(u) => format!(
                    "\n{key}: asks you to open {} ({})\n  e.g. --answer '{key}={{\"action\":\"accept\"}}'\n",
                    tern::safe::line(&u.url),
                    tern::safe::line(u.message.trim())
                ),
            },
            InputRequest::Sampling(_) => {
                format!("\n{key}: asks for a completion (sampling); --sampler COMMAND answers it\n")
            }
            InputRequest::Roots(_) => {
                format!("\n{key}: asks for the roots; --root PATH answers it\n")
            }
            #[allow(unreachable_patterns, reason = "InputRequest may grow variants")]
            _ => format!("\n{key}: a question of a kind tern does not know\n"),
        };
        out.push_str(&text);
    }
    out
}

/// An answers file: each form accepted with its defaults (or a first
/// option, or an example), other questions with a placeholder answer.
pub(crate) fn template(requests: &InputRequests) -> Value {
    let mut out = JsonObject::new();
    for (key, q) in requests {
        let answer = match q {
            InputRequest::Elicitation(e) => match &e.params {
                ElicitRequestParams::Form(f) => {
                    let content: JsonObject = f
                        .requested_schema
                        .properties
                        .iter()
                        .map(|(name, field)| (name.clone(), facts(field).example))
                        .collect();
                    json!({"action": "accept", "content": content})
                }
                ElicitRequestParams::Url(_) => json!({"action": "accept"}),
            },
            InputRequest::Sampling(_) => json!({
                "role": "assistant",
                "content": {"type": "text", "text": "..."},
                "model": "human"
            }),
            InputRequest::Roots(_) => json!({"roots": []}),
            #[allow(unreachable_patterns, reason = "InputRequest may grow variants")]
            _ => Value::Null,
        };
        out.insert(key.clone(), answer);
    }
    Value::Object(out)
}
