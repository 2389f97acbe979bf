//! Manual mode (rule `bounded-rounds`: callers may opt out of auto-resolution):
//! one leg at a time, the questions handed back as a serialisable
//! [`PendingRound`] that any client, in any process, resumes — for
//! `tools/call`, `prompts/get` and `resources/read` alike (rule
//! `input-required-methods`: the three methods that may ask).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_protocol::meta::RequestMeta;
use tern_protocol::prompt::{GetPromptRequestParams, GetPromptResult};
use tern_protocol::resource::{ReadResourceRequestParams, ReadResourceResult};
use tern_protocol::tool::{CallToolRequestParams, CallToolResult};
use tern_protocol::{
    ClientRequest, InputRequests, InputResponses, JsonObject, Outcome, ServerResult, method,
};

use super::{CallOptions, Client};
use crate::error::ClientError;

/// A call that may be answered with questions (rule `input-required-methods`),
/// as parked in a [`PendingRound`]: its method and its params without `_meta`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", content = "params")]
#[non_exhaustive]
pub enum Call {
    /// `tools/call`.
    #[serde(rename = "tools/call")]
    Tool {
        /// The tool.
        name: String,
        /// Its arguments.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<JsonObject>,
    },
    /// `prompts/get`.
    #[serde(rename = "prompts/get")]
    Prompt {
        /// The prompt.
        name: String,
        /// Its arguments, as strings.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        arguments: Option<BTreeMap<String, String>>,
    },
    /// `resources/read`.
    #[serde(rename = "resources/read")]
    Resource {
        /// The resource.
        uri: String,
    },
}

impl Call {
    /// A `tools/call`; `arguments` must be a JSON object when given (the
    /// schema's `arguments` is one).
    pub fn tool(name: impl Into<String>, arguments: Option<Value>) -> Result<Self, ClientError> {
        let arguments = match arguments {
            None => None,
            Some(Value::Object(o)) => Some(o),
            Some(other) => {
                return Err(ClientError::request(format!(
                    "tool arguments must be a JSON object, not {other}"
                )));
            }
        };
        Ok(Self::Tool {
            name: name.into(),
            arguments,
        })
    }

    /// A `prompts/get`; every argument must be a string (the schema's prompt
    /// arguments are).
    pub fn prompt(
        name: impl Into<String>,
        arguments: Option<JsonObject>,
    ) -> Result<Self, ClientError> {
        let arguments = arguments
            .map(|args| {
                args.into_iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => Ok((k, s)),
                        other => Err(ClientError::request(format!(
                            "prompt argument `{k}` must be a string, not {other}"
                        ))),
                    })
                    .collect::<Result<BTreeMap<_, _>, _>>()
            })
            .transpose()?;
        Ok(Self::Prompt {
            name: name.into(),
            arguments,
        })
    }

    /// A `resources/read`.
    pub fn resource(uri: impl Into<String>) -> Self {
        Self::Resource { uri: uri.into() }
    }

    /// The method.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Tool { .. } => method::TOOLS_CALL,
            Self::Prompt { .. } => method::PROMPTS_GET,
            Self::Resource { .. } => method::RESOURCES_READ,
        }
    }

    /// The tool name, prompt name or resource URI.
    pub fn target(&self) -> &str {
        match self {
            Self::Tool { name, .. } | Self::Prompt { name, .. } => name,
            Self::Resource { uri } => uri,
        }
    }

    /// This call as a typed request: the same method and params on every
    /// leg (rule `retry-repeats-request`), with this leg's answers and state
    /// (rules `echo-state-exactly`, `no-invented-state`).
    pub(super) fn request(
        &self,
        meta: RequestMeta,
        input_responses: Option<InputResponses>,
        request_state: Option<String>,
    ) -> ClientRequest {
        match self {
            Self::Tool { name, arguments } => ClientRequest::CallTool(CallToolRequestParams {
                name: name.clone(),
                arguments: arguments.clone(),
                input_responses,
                request_state,
                meta,
            }),
            Self::Prompt { name, arguments } => ClientRequest::GetPrompt(GetPromptRequestParams {
                name: name.clone(),
                arguments: arguments.clone(),
                input_responses,
                request_state,
                meta,
            }),
            Self::Resource { uri } => ClientRequest::ReadResource(ReadResourceRequestParams {
                uri: uri.clone(),
                input_responses,
                request_state,
                meta,
            }),
        }
    }
}

/// A round the server asked and nobody has answered yet (manual mode). It
/// serialises, so it can be parked (a hosted UI waiting for a person) and
/// resumed by another [`Client`], in another process:
/// `{"method", "params", "inputRequests", "requestState", "round"}`.
///
/// ```no_run
/// # async fn run(client: tern_client::Client) -> Result<(), Box<dyn std::error::Error>> {
/// use tern_client::{CallOptions, Round};
/// use tern_protocol::InputResponses;
///
/// let options = CallOptions::default();
/// let round = client.call_tool_once("deploy", Some(serde_json::json!({"env": "prod"})), &options).await?;
/// if let Round::InputRequired(pending) = round {
///     // Keep the round anywhere (a file, a queue, another process)…
///     let saved = serde_json::to_string(&pending)?;
///     // …and finish it later, with the answers under the keys asked.
///     let pending: tern_client::PendingRound = serde_json::from_str(&saved)?;
///     let answers: InputResponses = serde_json::from_value(serde_json::json!({
///         "approve": {"action": "accept", "content": {"approve": true}}
///     }))?;
///     let done = client.resume_tool(&pending, &answers, &options).await?;
///     println!("{done:?}");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PendingRound {
    /// The call, repeated on the retry (rule `retry-repeats-request`).
    #[serde(flatten)]
    pub call: Call,
    /// The questions.
    #[serde(default)]
    pub input_requests: InputRequests,
    /// The server's state, echoed byte for byte on the retry (rule
    /// `echo-state-exactly`), or absent (rule `no-invented-state`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// How many rounds this call has taken so far.
    pub round: u32,
}

impl PendingRound {
    /// A task's outstanding questions (status `input_required`) as a round
    /// of `tool`, to answer with [`Client::answer`]: the answers go to
    /// [`crate::TaskHandle::update`], never to [`Client::resume`].
    ///
    /// # Errors
    /// Never for a tool name; kept fallible like [`Call::tool`].
    pub fn of_task(tool: &str, input_requests: InputRequests) -> Result<Self, ClientError> {
        Ok(Self {
            call: Call::tool(tool, None)?,
            input_requests,
            request_state: None,
            round: 0,
        })
    }

    /// The method of the call (`tools/call`, `prompts/get`, `resources/read`).
    pub fn method(&self) -> &'static str {
        self.call.method()
    }
}

/// The outcome of one leg in manual mode.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Round<T> {
    /// The final result.
    Complete(T),
    /// The server asks first.
    InputRequired(PendingRound),
    /// The call became a task (`tools/call` on a client that declares the
    /// Tasks extension): follow it with [`Client::task`].
    Task(tern_protocol::task::Task),
}

/// The final result of a resumed round, of whichever method it was.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Completed {
    /// `tools/call`.
    Tool(CallToolResult),
    /// `prompts/get`.
    Prompt(GetPromptResult),
    /// `resources/read`.
    Resource(ReadResourceResult),
}

/// The outcome of one leg of a call whose final result is `Self`.
pub(super) trait Leg: Sized {
    /// `result` (already decoded by method and `resultType`) as this leg's
    /// outcome.
    fn outcome(result: ServerResult) -> Result<Outcome<Self>, ClientError>;

    /// A completed task's `result` as this leg's result (only `tools/call`
    /// can become a task; the decoder refuses a task anywhere else).
    fn from_task(result: JsonObject) -> Result<Self, ClientError> {
        let _ = result;
        Err(unexpected("task"))
    }
}

fn unexpected(what: &str) -> ClientError {
    ClientError::protocol(format!("the server's reply is not a {what} result"))
}

impl Leg for CallToolResult {
    fn outcome(result: ServerResult) -> Result<Outcome<Self>, ClientError> {
        match result {
            ServerResult::CallTool(o) => Ok(o),
            _ => Err(unexpected(method::TOOLS_CALL)),
        }
    }

    fn from_task(result: JsonObject) -> Result<Self, ClientError> {
        CallToolResult::deserialize(Value::Object(result)).map_err(|e| {
            ClientError::protocol("the completed task's result is not a tools/call result")
                .because(e)
        })
    }
}

impl Leg for GetPromptResult {
    fn outcome(result: ServerResult) -> Result<Outcome<Self>, ClientError> {
        match result {
            ServerResult::GetPrompt(o) => Ok(o),
            _ => Err(unexpected(method::PROMPTS_GET)),
        }
    }
}

impl Leg for ReadResourceResult {
    fn outcome(result: ServerResult) -> Result<Outcome<Self>, ClientError> {
        match result {
            ServerResult::ReadResource(o) => Ok(o),
            _ => Err(unexpected(method::RESOURCES_READ)),
        }
    }
}

fn map_outcome<T, U>(o: Outcome<T>, f: impl FnOnce(T) -> U) -> Outcome<U> {
    match o {
        Outcome::Complete(r) => Outcome::Complete(f(r)),
        Outcome::InputRequired(ir) => Outcome::InputRequired(ir),
        Outcome::Task(t) => Outcome::Task(t),
    }
}

impl Leg for Completed {
    fn outcome(result: ServerResult) -> Result<Outcome<Self>, ClientError> {
        match result {
            ServerResult::CallTool(o) => Ok(map_outcome(o, Self::Tool)),
            ServerResult::GetPrompt(o) => Ok(map_outcome(o, Self::Prompt)),
            ServerResult::ReadResource(o) => Ok(map_outcome(o, Self::Resource)),
            _ => Err(unexpected("tools/call, prompts/get or resources/read")),
        }
    }
}

/// `responses`, less the keys `pending` did not ask (rule
/// `retry-repeats-request`), each one it did ask checked to be an answer to
/// that kind of question: one that is not is an error, never silently dropped.
/// The answers kept go out as given.
fn fitted(
    pending: &PendingRound,
    responses: &InputResponses,
) -> Result<InputResponses, ClientError> {
    for (key, question) in &pending.input_requests {
        if let Some(Err(e)) = responses.decode(key, question.kind()) {
            return Err(ClientError::answer(format!(
                "the answer for `{key}` does not fit its question ({})",
                question.kind().method()
            ))
            .because(e));
        }
    }
    let mut asked = responses.clone();
    asked.retain(|key, _| pending.input_requests.contains_key(key));
    Ok(asked)
}

impl Client {
    /// One leg of `call`, then its outcome as a [`Round`].
    async fn once<T: Leg>(
        &self,
        call: Call,
        round: u32,
        responses: Option<&InputResponses>,
        request_state: Option<&str>,
        options: &CallOptions,
    ) -> Result<Round<T>, ClientError> {
        match self
            .leg::<T>(&call, responses, request_state, options)
            .await?
        {
            Outcome::Complete(r) => Ok(Round::Complete(r)),
            Outcome::InputRequired(ir) => Ok(Round::InputRequired(PendingRound {
                call,
                input_requests: ir.input_requests.unwrap_or_default(),
                request_state: ir.request_state,
                round: round + 1,
            })),
            Outcome::Task(created) => Ok(Round::Task(created.task)),
        }
    }

    /// Manual mode: one leg of `tools/call`; the questions come back as a
    /// [`PendingRound`] instead of being answered.
    pub async fn call_tool_once(
        &self,
        name: &str,
        arguments: Option<Value>,
        options: &CallOptions,
    ) -> Result<Round<CallToolResult>, ClientError> {
        self.once(Call::tool(name, arguments)?, 0, None, None, options)
            .await
    }

    /// Manual mode: one leg of `prompts/get`.
    pub async fn get_prompt_once(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        options: &CallOptions,
    ) -> Result<Round<GetPromptResult>, ClientError> {
        self.once(Call::prompt(name, arguments)?, 0, None, None, options)
            .await
    }

    /// Manual mode: one leg of `resources/read`.
    pub async fn read_resource_once(
        &self,
        uri: &str,
        options: &CallOptions,
    ) -> Result<Round<ReadResourceResult>, ClientError> {
        self.once(Call::resource(uri), 0, None, None, options).await
    }

    /// Manual mode: retries `pending`, of whichever method, with `responses`
    /// — from this client or any other. Only the keys it asked are sent (rule
    /// `retry-repeats-request`), each checked against its question first; the
    /// state goes back exactly as received (rule `echo-state-exactly`) or not
    /// at all (rule `no-invented-state`).
    pub async fn resume(
        &self,
        pending: &PendingRound,
        responses: &InputResponses,
        options: &CallOptions,
    ) -> Result<Round<Completed>, ClientError> {
        self.resume_as(pending, responses, options).await
    }

    async fn resume_as<T: Leg>(
        &self,
        pending: &PendingRound,
        responses: &InputResponses,
        options: &CallOptions,
    ) -> Result<Round<T>, ClientError> {
        let responses = fitted(pending, responses)?;
        self.once(
            pending.call.clone(),
            pending.round,
            Some(&responses).filter(|r| !r.is_empty()),
            pending.request_state.as_deref(),
            options,
        )
        .await
    }

    fn expect_method(pending: &PendingRound, m: &str) -> Result<(), ClientError> {
        if pending.method() == m {
            Ok(())
        } else {
            Err(ClientError::request(format!(
                "the parked round is a {}, not a {m}",
                pending.method()
            )))
        }
    }

    /// [`Client::resume`] for a `tools/call` round.
    pub async fn resume_tool(
        &self,
        pending: &PendingRound,
        responses: &InputResponses,
        options: &CallOptions,
    ) -> Result<Round<CallToolResult>, ClientError> {
        Self::expect_method(pending, method::TOOLS_CALL)?;
        self.resume_as(pending, responses, options).await
    }

    /// [`Client::resume`] for a `prompts/get` round.
    pub async fn resume_prompt(
        &self,
        pending: &PendingRound,
        responses: &InputResponses,
        options: &CallOptions,
    ) -> Result<Round<GetPromptResult>, ClientError> {
        Self::expect_method(pending, method::PROMPTS_GET)?;
        self.resume_as(pending, responses, options).await
    }

    /// [`Client::resume`] for a `resources/read` round.
    pub async fn resume_resource(
        &self,
        pending: &PendingRound,
        responses: &InputResponses,
        options: &CallOptions,
    ) -> Result<Round<ReadResourceResult>, ClientError> {
        Self::expect_method(pending, method::RESOURCES_READ)?;
        self.resume_as(pending, responses, options).await
    }

    /// Answers `pending`'s questions with this client's handlers (and the
    /// preset answers of `options`).
    pub async fn answer(
        &self,
        pending: &PendingRound,
        options: &CallOptions,
    ) -> Result<InputResponses, ClientError> {
        self.answer_all(
            pending.call.method(),
            pending.call.target(),
            &pending.input_requests,
            options,
        )
        .await
    }
}
