//! A client that calls one tool and answers the server's questions from
//! its command line, as a script would: each form field named in a
//! `field=value` pair is answered with that value, and a question with a
//! field left unanswered is declined. tern's client drives the rounds (the
//! retry, the answers under the keys asked, the `requestState` echoed).
//!
//! ```sh
//! cargo run -p tern-client --example answering_client -- \
//!     provision_database '{"name":"orders"}' region=eu-west-1 \
//!     -- target/debug/examples/asking_tool
//! cargo run -p tern-client --example answering_client -- \
//!     add '{"a":2,"b":3}' --url http://127.0.0.1:8080/mcp
//! ```
//!
//! It prints each question on standard error and the result's text on
//! standard output; exit status 1 when the tool reports an error.

#![allow(
    clippy::print_stdout,
    reason = "an example prints what it serves or gets"
)]

use std::collections::HashMap;
use tern_client::transport::BoxFuture;
use tern_client::transport::http::HttpTransport;
use tern_client::transport::stdio::ChildProcess;
use tern_client::{Client, Elicitation, HandlerError, Question};
use tern_protocol::elicitation::{
    ElicitRequestFormParams, ElicitResult, ElicitValue, PrimitiveSchema,
};

/// Answers form fields from `field=value` pairs.
struct FromArgs(HashMap<String, String>);

impl Elicitation for FromArgs {
    fn form(
        &self,
        question: Question,
        params: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        eprintln!(
            "{} asks ({}): {}",
            question.target, question.key, params.message
        );
        let mut content = indexmap::IndexMap::new();
        for (field, schema) in &params.requested_schema.properties {
            let Some(text) = self.0.get(field) else {
                eprintln!("  no answer for {field}: declining");
                return Box::pin(async { Ok(ElicitResult::decline()) });
            };
            let value = match schema {
                PrimitiveSchema::Boolean(_) => ElicitValue::Bool(text == "true"),
                PrimitiveSchema::Number(_) => {
                    let Ok(n) = text.parse::<serde_json::Number>() else {
                        let why = format!("{field} wants a number, not {text:?}");
                        return Box::pin(async move { Err(HandlerError(why)) });
                    };
                    ElicitValue::Number(n)
                }
                _ => ElicitValue::from(text.as_str()),
            };
            eprintln!("  {field} = {text}");
            content.insert(field.clone(), value);
        }
        Box::pin(async move { Ok(ElicitResult::accept(content)) })
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (ours, command) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (&args[..], &[][..]),
    };
    let [tool, arguments, rest @ ..] = ours else {
        return Err("usage: answering_client TOOL ARGS_JSON [field=value]... \
                    (--url URL | -- COMMAND [ARGS]...)"
            .into());
    };
    let mut url = None;
    let mut answers = HashMap::new();
    let mut rest = rest.iter();
    while let Some(arg) = rest.next() {
        if arg == "--url" {
            url = rest.next().cloned();
        } else if let Some((field, value)) = arg.split_once('=') {
            answers.insert(field.to_owned(), value.to_owned());
        } else {
            return Err(format!("not a field=value answer: {arg}").into());
        }
    }
    let builder = Client::builder().elicitation(FromArgs(answers));
    let client = match (url, command) {
        (Some(url), _) => builder.build(HttpTransport::new(&url)?),
        (None, [program, args @ ..]) => builder.build(ChildProcess::spawn(program, args)?),
        (None, []) => return Err("give --url URL or -- COMMAND".into()),
    };
    let result = client
        .call_tool(tool, Some(serde_json::from_str(arguments)?))
        .await;
    client.close().await;
    let result = result?;
    for block in &result.content {
        if let Some(text) = block.as_text() {
            println!("{text}");
        }
    }
    if result.is_error == Some(true) {
        std::process::exit(1);
    }
    Ok(())
}
