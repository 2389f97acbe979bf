//! `tern questions TOOL [key=value ...]`: a call's first round of
//! questions for a person (keys, fields, types, allowed values), and as an
//! answers file `--answers FILE` accepts.

use serde_json::{Value, json};
use tern_client::Round;
use tern_protocol::elicitation::ElicitRequestParams;
use tern_protocol::{InputRequest, InputRequests, JsonObject};

use super::args::tool_arguments;
use super::call::checked_arguments;
use super::{Connected, emit_json, print_completed};
use crate::answers::{describe_fields, facts};
use crate::exit::{EXIT_OK, EXIT_SERVER, Failure};
use crate::rounds::First;

/// `tern questions`: the first round's questions (to standard error, for
/// people) and an answers file for them (to standard output, for
/// `--answers FILE`); `--json` prints the questions themselves.
pub(super) async fn questions(
    c: &Connected,
    tool: &str,
    pairs: &[String],
    args: Option<&str>,
) -> Result<u8, Failure> {
    let args = tool_arguments(pairs, args)?;
    let args = checked_arguments(c, tool, args).await?;
    let d = &c.driver;
    match d.first(&First::Tool(tool.to_owned(), args)).await? {
        Round::Complete(done) => {
            eprintln!(
                "tern: {tool} asked no questions: its first round completed the call (it ran):"
            );
            Ok(print_completed(&done, c.json, Some(tool)))
        }
        Round::InputRequired(pending) => {
            if c.json {
                emit_json(&pending.input_requests);
            } else {
                eprint!(
                    "{}",
                    tern::safe::text(&describe(tool, &pending.input_requests))
                );
                emit_json(&template(&pending.input_requests));
            }
            Ok(EXIT_OK)
        }
        _ => Err(Failure {
            code: EXIT_SERVER,
            message: "the server's reply is an outcome this tern does not know".into(),
        }),
    }
}

/// The questions, for a person.
pub(crate) fn describe(tool: &str, requests: &InputRequests) -> String {
    let mut out = format!(
        "{} asks {} question{} in its first round:\n",
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
    out.push_str(
        "\nAn answers file for them follows on standard output (edit it, then: tern call ... --answers FILE).\n\
         Later rounds depend on these answers and are not shown; a key a server derives from a question's text changes when the text does.\n",
    );
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
