//! The MRTR driver (spec: Multi Round-Trip Requests › Client Requirements
//! (Basic Workflow); the client rules of docs/rules.md): rounds until the call
//! completes, within the round and time bounds, the questions of a round
//! answered concurrently by the installed handlers (or the presets), and the
//! answers carried typed from the handlers into the retry.

use std::time::Duration;

use serde_json::Value;
use tern_protocol::elicitation::ElicitRequestParams;
use tern_protocol::mrtr::InputRequest;
use tern_protocol::prompt::GetPromptResult;
use tern_protocol::resource::ReadResourceResult;
use tern_protocol::roots::ListRootsResult;
use tern_protocol::task::CreateTaskResult;
use tern_protocol::tool::CallToolResult;
use tern_protocol::{InputRequests, InputResponse, InputResponses, JsonObject, Outcome};

use super::manual::{Call, Leg};
use super::{CallOptions, Client};
use crate::error::ClientError;
use crate::handler::Question;
use crate::limits::Limit;

/// Backoff before retrying a state-only round (load shedding): 50 ms
/// doubling to 2 s.
fn backoff(shed_rounds: u32) -> Duration {
    Duration::from_millis(50u64.saturating_mul(1 << shed_rounds.min(6))).min(Duration::from_secs(2))
}

fn deadline_passed(while_: &str) -> ClientError {
    ClientError::limit(
        Limit::Deadline,
        format!("the call's deadline passed {while_}"),
    )
}

/// Where the MRTR rounds of a call ended: its result, or a task
/// (`tools/call` only, and only when the request declared the extension:
/// the decoder refuses `resultType: "task"` anywhere else, rule
/// `result-type-extensions`).
pub(super) enum Driven<T> {
    Done(T),
    Task(Box<CreateTaskResult>),
}

impl Client {
    /// One leg of `call` with this leg's answers and state.
    pub(super) async fn leg<T: Leg>(
        &self,
        call: &Call,
        responses: Option<&InputResponses>,
        request_state: Option<&str>,
        options: &CallOptions,
    ) -> Result<Outcome<T>, ClientError> {
        let build = |meta| call.request(meta, responses.cloned(), request_state.map(str::to_owned));
        let result = self.request(call.method(), &build, options).await?;
        T::outcome(result)
    }

    /// The MRTR driver: rounds until the call completes, within the round
    /// and time bounds (rule `bounded-rounds`).
    async fn drive<T: Leg>(&self, call: Call, options: &CallOptions) -> Result<T, ClientError> {
        match self.rounds::<T>(&call, options).await? {
            Driven::Done(done) => Ok(done),
            Driven::Task(created) => {
                let mut handle = self.created_task(&created, call.target(), options);
                let result = handle.follow(options).await?;
                T::from_task(result)
            }
        }
    }

    /// The MRTR rounds of a call, until it completes or becomes a task.
    pub(super) async fn rounds<T: Leg>(
        &self,
        call: &Call,
        options: &CallOptions,
    ) -> Result<Driven<T>, ClientError> {
        let limits = self.inner.limits;
        let deadline = tokio::time::Instant::now() + limits.deadline;
        let mut round = 0;
        let mut responses: Option<InputResponses> = None;
        let mut state: Option<String> = None;
        let mut shed = 0;
        loop {
            let leg = self.leg::<T>(call, responses.as_ref(), state.as_deref(), options);
            let ir = match tokio::time::timeout_at(deadline, leg)
                .await
                .map_err(|_| deadline_passed("while the server worked"))??
            {
                Outcome::Complete(done) => return Ok(Driven::Done(done)),
                Outcome::InputRequired(ir) => ir,
                Outcome::Task(created) => return Ok(Driven::Task(Box::new(created))),
            };
            round += 1;
            if round >= limits.max_rounds {
                return Err(ClientError::limit(
                    Limit::Rounds,
                    format!(
                        "the server asked for more than {} rounds",
                        limits.max_rounds
                    ),
                ));
            }
            let requests = ir.input_requests.unwrap_or_default();
            if let Some(on_round) = &options.on_round {
                let keys: Vec<String> = requests.keys().cloned().collect();
                on_round(round, &keys);
            }
            if requests.is_empty() {
                // A state-only round (load shedding): retry, after a growing
                // pause (rule `answer-before-retry` allows retrying at once).
                tokio::time::sleep_until(
                    (tokio::time::Instant::now() + backoff(shed)).min(deadline),
                )
                .await;
                shed += 1;
                responses = None;
            } else {
                shed = 0;
                let answers = tokio::time::timeout_at(
                    deadline,
                    self.answer_all(call.method(), call.target(), &requests, options),
                )
                .await
                .map_err(|_| deadline_passed("while answering"))??;
                responses = Some(answers);
            }
            // Rules `echo-state-exactly`, `no-invented-state`: the state
            // exactly as received, or none. Rule `round-isolated`: it lives
            // in this call's loop only.
            state = ir.request_state;
        }
    }

    /// Calls a tool, answering the server's questions until it completes.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Value>,
    ) -> Result<CallToolResult, ClientError> {
        self.call_tool_with(name, arguments, &CallOptions::default())
            .await
    }

    /// [`Self::call_tool`] with options.
    pub async fn call_tool_with(
        &self,
        name: &str,
        arguments: Option<Value>,
        options: &CallOptions,
    ) -> Result<CallToolResult, ClientError> {
        self.drive(Call::tool(name, arguments)?, options).await
    }

    /// Gets a prompt, answering the server's questions until it completes.
    /// Every argument must be a string.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        options: &CallOptions,
    ) -> Result<GetPromptResult, ClientError> {
        self.drive(Call::prompt(name, arguments)?, options).await
    }

    /// Reads a resource, answering the server's questions until it completes.
    pub async fn read_resource(
        &self,
        uri: &str,
        options: &CallOptions,
    ) -> Result<ReadResourceResult, ClientError> {
        self.drive(Call::resource(uri), options).await
    }

    /// Answers every question of a round concurrently; the first that fails
    /// cancels the others (rule `no-per-answer-error`: there is no per-answer
    /// error to send). Each answer is encoded once, straight from its typed
    /// form.
    pub(super) async fn answer_all(
        &self,
        method: &str,
        target: &str,
        requests: &InputRequests,
        options: &CallOptions,
    ) -> Result<InputResponses, ClientError> {
        let server = self.server_info();
        let jobs = requests.iter().map(|(key, request)| {
            let question = Question {
                key: key.clone(),
                server: server.clone(),
                method: method.to_owned(),
                target: target.to_owned(),
            };
            async move {
                let answer = match options.answers.answer(key, request) {
                    Some(Ok(preset)) => preset,
                    Some(Err(e)) => {
                        return Err(ClientError::answer(format!(
                            "the answer given for `{key}` does not fit its question"
                        ))
                        .because(e));
                    }
                    None => self.answer_one(question, request, options).await?,
                };
                Ok::<_, ClientError>((key.clone(), answer))
            }
        });
        let answers = futures_util::future::try_join_all(jobs).await?;
        Ok(answers.into_iter().collect())
    }

    pub(super) async fn answer_one(
        &self,
        question: Question,
        request: &InputRequest,
        options: &CallOptions,
    ) -> Result<InputResponse, ClientError> {
        let key = question.key.clone();
        let refused = |e: crate::HandlerError| {
            ClientError::handler(format!("`{key}` was not answered")).because(e)
        };
        match request {
            InputRequest::Elicitation(e) => {
                let handler = self
                    .inner
                    .elicitation
                    .as_ref()
                    .filter(|_| !options.drop_elicitation)
                    .ok_or_else(|| {
                        ClientError::unanswerable(format!(
                            "`{key}` is an elicitation and this client has no elicitation handler"
                        ))
                    })?;
                let result = match &e.params {
                    ElicitRequestParams::Form(form) if handler.supports_form() => {
                        handler.form(question, form.clone()).await
                    }
                    ElicitRequestParams::Url(url) if handler.supports_url() => {
                        handler.url(question, url.clone()).await
                    }
                    _ => {
                        return Err(ClientError::unanswerable(format!(
                            "`{key}` uses an elicitation mode this client did not declare"
                        )));
                    }
                };
                result.map(InputResponse::from).map_err(refused)
            }
            InputRequest::Sampling(s) => {
                let handler = self
                    .inner
                    .sampling
                    .as_ref()
                    .filter(|_| !options.drop_sampling)
                    .ok_or_else(|| {
                        ClientError::unanswerable(format!(
                            "`{key}` asks for sampling and this client has no sampling handler"
                        ))
                    })?;
                handler
                    .create_message(question, s.params.clone())
                    .await
                    .map(InputResponse::from)
                    .map_err(refused)
            }
            InputRequest::Roots(_) => {
                let handler = self
                    .inner
                    .roots
                    .as_ref()
                    .filter(|_| !options.drop_roots)
                    .ok_or_else(|| {
                        ClientError::unanswerable(format!(
                            "`{key}` asks for roots and this client has no roots handler"
                        ))
                    })?;
                handler
                    .list_roots(question)
                    .await
                    .map(|roots| InputResponse::from(ListRootsResult { roots }))
                    .map_err(refused)
            }
        }
    }
}
