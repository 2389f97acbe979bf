//! The Tasks extension on the client
//! (<https://modelcontextprotocol.io/extensions/tasks/overview>): a
//! `tools/call` answered with a task is followed by polling `tasks/get`, its
//! questions answered through `tasks/update` by the same handlers (and presets)
//! that answer MRTR rounds.
//!
//! - Polling honours the task's `pollIntervalMs`, clamped to
//!   [`MIN_POLL`]..[`MAX_POLL`], [`DEFAULT_POLL`] when absent, with ±10 %
//!   jitter so many clients do not poll in step; a poll that fails on the
//!   transport is retried after a doubling pause, [`MAX_POLL_FAILURES`] in
//!   a row at most.
//! - A key is answered once over the task's life: the server never reuses
//!   one (a re-asked question gets a new key), so a key seen again on a
//!   later poll — its answer not yet taken — is not answered twice.
//! - `failed`, `cancelled` and a `-32602` mid-poll (the task expired, or
//!   this server never knew it) are three distinct [`ErrorKind`]s:
//!   `TaskFailed`, `TaskCancelled`, `TaskLost`.
//! - A [`TaskHandle`] made by a call cancels its task when dropped (the
//!   call's future was dropped: nobody waits for the outcome);
//!   [`TaskHandle::detach`] keeps it running and hands back its id, which
//!   [`Client::task`] resumes, from any process, as a handle that does not
//!   cancel on drop.
//!
//! [`ErrorKind`]: crate::ErrorKind

use std::collections::HashSet;
use std::hash::{BuildHasher as _, Hasher as _};
use std::time::Duration;

use serde_json::Value;
use tern_protocol::error::code;
use tern_protocol::task::{
    CreateTaskResult, DetailedTask, Task, TaskRequestParams, TaskStatus, UpdateTaskRequestParams,
};
use tern_protocol::tool::CallToolResult;
use tern_protocol::{ClientRequest, InputRequests, JsonObject, ServerResult, method};

use super::manual::{Call, Leg as _};
use super::mrtr::Driven;
use super::{CallOptions, Client};
use crate::error::ClientError;

/// The shortest pause between two polls, whatever the server asks.
pub const MIN_POLL: Duration = Duration::from_millis(20);
/// The longest pause between two polls, whatever the server asks.
pub const MAX_POLL: Duration = Duration::from_secs(30);
/// The pause when the task gives no `pollIntervalMs`.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);
/// Polls failing on the transport in a row before the wait gives up.
pub const MAX_POLL_FAILURES: u32 = 5;

/// How a `tools/call` started: completed within its MRTR rounds, or a task
/// to follow ([`Client::start_tool`]).
#[derive(Debug)]
#[non_exhaustive]
pub enum Started {
    /// The call completed without becoming a task.
    Complete(CallToolResult),
    /// The call became a task.
    Task(TaskHandle),
}

/// A task on the server: poll it, answer it, wait for it, cancel it, or
/// detach from it. Made by a call, it cancels the task when dropped unless
/// detached; made by [`Client::task`], it does not.
///
/// ```no_run
/// # async fn run(client: tern_client::Client) -> Result<(), tern_client::ClientError> {
/// use tern_client::{CallOptions, Started};
///
/// let options = CallOptions::default();
/// match client.start_tool("nightly_report", None, &options).await? {
///     Started::Complete(result) => println!("done at once: {result:?}"),
///     Started::Task(task) => {
///         // Keep the id (a file, a database): any process can follow it later.
///         let id = task.detach();
///         let mut again = client.task(id);
///         let result = again.wait(&options).await?;
///         println!("{result:?}");
///     }
///     _ => {}
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TaskHandle {
    client: Client,
    id: String,
    target: String,
    cancel_on_drop: bool,
    /// Keys answered so far (never answered twice).
    answered: HashSet<String>,
    /// The last status and message reported to `on_task_status`.
    reported: Option<(TaskStatus, Option<String>)>,
}

/// The pause before the next poll: the server's interval clamped, or the
/// default, with ±10 % jitter.
fn poll_pause(poll_interval_ms: Option<i64>) -> Duration {
    let base = poll_interval_ms
        .and_then(|ms| u64::try_from(ms).ok())
        .map_or(DEFAULT_POLL, Duration::from_millis)
        .clamp(MIN_POLL, MAX_POLL);
    // A random number from the standard library's per-instance hash keys:
    // jitter needs no stronger randomness.
    let random = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    let per_mille = 900 + u32::try_from(random % 201).unwrap_or(100);
    base * per_mille / 1000
}

/// The pause after `failures` polls failed in a row: the poll interval
/// doubled each time, at most [`MAX_POLL`].
fn error_pause(poll_interval_ms: Option<i64>, failures: u32) -> Duration {
    poll_pause(poll_interval_ms)
        .saturating_mul(1 << failures.min(8))
        .min(MAX_POLL)
}

impl Client {
    /// A handle on the task `task_id`, created earlier by this or another
    /// client (another process, after a restart: the id is all it takes).
    /// The server checks it belongs to this client's principal. The handle
    /// does not cancel the task when dropped. Over stdio a fresh child
    /// process only knows the tasks of a durable store.
    pub fn task(&self, task_id: impl Into<String>) -> TaskHandle {
        let id = task_id.into();
        TaskHandle {
            client: self.clone(),
            target: id.clone(),
            id,
            cancel_on_drop: false,
            answered: HashSet::new(),
            reported: None,
        }
    }

    /// The handle of a task a call of `target` just created: reported to
    /// `on_task_created`, cancelled when dropped.
    pub(super) fn created_task(
        &self,
        created: &CreateTaskResult,
        target: &str,
        options: &CallOptions,
    ) -> TaskHandle {
        if let Some(on_created) = &options.on_task_created {
            on_created(&created.task);
        }
        TaskHandle {
            client: self.clone(),
            id: created.task.task_id.clone(),
            target: target.to_owned(),
            cancel_on_drop: true,
            answered: HashSet::new(),
            reported: Some((created.task.status, created.task.status_message.clone())),
        }
    }

    /// Calls a tool through its MRTR rounds and stops there: the result if
    /// it completed, or the task it became, to follow, detach from or
    /// cancel.
    pub async fn start_tool(
        &self,
        name: &str,
        arguments: Option<Value>,
        options: &CallOptions,
    ) -> Result<Started, ClientError> {
        let call = Call::tool(name, arguments)?;
        Ok(match self.rounds::<CallToolResult>(&call, options).await? {
            Driven::Done(done) => Started::Complete(done),
            Driven::Task(created) => Started::Task(self.created_task(&created, name, options)),
        })
    }

    /// Sends one `tasks/*` request built from a fresh `_meta`.
    async fn task_request(
        &self,
        m: &str,
        build: &(dyn Fn(tern_protocol::meta::RequestMeta) -> ClientRequest + Send + Sync),
        options: &CallOptions,
    ) -> Result<ServerResult, ClientError> {
        self.request(m, build, options).await
    }
}

impl TaskHandle {
    /// The task's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Whether dropping this handle cancels the task.
    pub fn cancels_on_drop(&self) -> bool {
        self.cancel_on_drop
    }

    /// Keeps the task running when this handle goes, and hands back its id
    /// (to persist, and resume with [`Client::task`]).
    pub fn detach(mut self) -> String {
        self.cancel_on_drop = false;
        std::mem::take(&mut self.id)
    }

    /// One `tasks/get`.
    ///
    /// # Errors
    /// `TaskLost` on `-32602`; the server's other errors as they are.
    pub async fn get(&self) -> Result<DetailedTask, ClientError> {
        self.get_with(&CallOptions::default()).await
    }

    async fn get_with(&self, options: &CallOptions) -> Result<DetailedTask, ClientError> {
        let id = self.id.clone();
        let build = move |meta| {
            ClientRequest::GetTask(TaskRequestParams {
                task_id: id.clone(),
                meta,
            })
        };
        match self
            .client
            .task_request(method::TASKS_GET, &build, options)
            .await
        {
            Ok(ServerResult::GetTask(r)) => Ok(r.task),
            Ok(_) => Err(ClientError::protocol(
                "the server's reply is not a tasks/get result",
            )),
            Err(e) => Err(self.lost_or(e)),
        }
    }

    /// `-32602` on a task request means the server does not know the task.
    fn lost_or(&self, e: ClientError) -> ClientError {
        match e.rpc_error() {
            Some(rpc) if rpc.code == code::INVALID_PARAMS => {
                ClientError::task_lost(&self.id, rpc.clone())
            }
            _ => e,
        }
    }

    /// Sends answers with `tasks/update` (a partial set is fine; the server
    /// ignores keys it no longer asks).
    ///
    /// # Errors
    /// `TaskLost` on `-32602`; the server's other errors as they are.
    pub async fn update(
        &self,
        responses: tern_protocol::InputResponses,
    ) -> Result<(), ClientError> {
        self.update_with(responses, &CallOptions::default()).await
    }

    async fn update_with(
        &self,
        responses: tern_protocol::InputResponses,
        options: &CallOptions,
    ) -> Result<(), ClientError> {
        let id = self.id.clone();
        let build = move |meta| {
            ClientRequest::UpdateTask(UpdateTaskRequestParams {
                task_id: id.clone(),
                input_responses: responses.clone(),
                meta,
            })
        };
        match self
            .client
            .task_request(method::TASKS_UPDATE, &build, options)
            .await
        {
            Ok(ServerResult::Empty(_)) => Ok(()),
            Ok(_) => Err(ClientError::protocol(
                "the server's reply is not an acknowledgement",
            )),
            Err(e) => Err(self.lost_or(e)),
        }
    }

    /// Asks the server to cancel the task (cooperative: it may still end
    /// `completed`); this handle no longer cancels it on drop.
    ///
    /// # Errors
    /// `TaskLost` on `-32602`; the server's other errors as they are.
    pub async fn cancel(&mut self) -> Result<(), ClientError> {
        self.cancel_on_drop = false;
        cancel(&self.client, &self.id).await
    }

    /// Follows the task to its end: polls, reports its status to
    /// `options`, answers its questions with the client's handlers and
    /// `options`' presets, and returns the tool's result.
    ///
    /// # Errors
    /// `TaskFailed` (the task's error is [`ClientError::rpc_error`]),
    /// `TaskCancelled`, `TaskLost`; a handler's failure to answer (the task
    /// is left as it is: cancel or drop the handle); a transport failing
    /// [`MAX_POLL_FAILURES`] polls in a row.
    pub async fn wait(&mut self, options: &CallOptions) -> Result<CallToolResult, ClientError> {
        let result = self.follow(options).await?;
        CallToolResult::from_task(result)
    }

    /// [`Self::wait`], the result still as JSON.
    pub(super) async fn follow(
        &mut self,
        options: &CallOptions,
    ) -> Result<JsonObject, ClientError> {
        let mut failures = 0u32;
        let mut interval: Option<i64> = None;
        loop {
            let task = match self.get_with(options).await {
                Ok(task) => {
                    failures = 0;
                    task
                }
                Err(e) if e.is_transport() && failures + 1 < MAX_POLL_FAILURES => {
                    failures += 1;
                    tokio::time::sleep(error_pause(interval, failures)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            interval = task.task.poll_interval_ms;
            self.report(&task.task, options);
            match task.task.status {
                TaskStatus::Completed => {
                    self.cancel_on_drop = false;
                    return task.result.ok_or_else(|| {
                        ClientError::protocol("a completed task without its result")
                    });
                }
                TaskStatus::Failed => {
                    self.cancel_on_drop = false;
                    let error = task.error.unwrap_or_else(|| {
                        tern_protocol::ErrorObject::new(
                            code::INTERNAL_ERROR,
                            "the task failed without an error",
                        )
                    });
                    return Err(ClientError::task_failed(&self.id, error));
                }
                TaskStatus::Cancelled => {
                    self.cancel_on_drop = false;
                    return Err(ClientError::task_cancelled(&self.id));
                }
                TaskStatus::InputRequired => {
                    let fresh: InputRequests = task
                        .input_requests
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|(key, _)| !self.answered.contains(key))
                        .collect();
                    if fresh.is_empty() {
                        // Answered already, not yet taken: poll again later.
                        tokio::time::sleep(poll_pause(interval)).await;
                        continue;
                    }
                    let answers = self
                        .client
                        .answer_all(method::TOOLS_CALL, &self.target, &fresh, options)
                        .await?;
                    self.answered.extend(fresh.into_keys());
                    // The server applies the answers before it acks, so the
                    // next poll, at once, already sees them gone.
                    self.update_with(answers, options).await?;
                }
                TaskStatus::Working => tokio::time::sleep(poll_pause(interval)).await,
            }
        }
    }

    fn report(&mut self, task: &Task, options: &CallOptions) {
        let now = (task.status, task.status_message.clone());
        if self.reported.as_ref() != Some(&now) {
            if let Some(on_status) = &options.on_task_status {
                on_status(task);
            }
            self.reported = Some(now);
        }
    }
}

async fn cancel(client: &Client, id: &str) -> Result<(), ClientError> {
    let task_id = id.to_owned();
    let build = move |meta| {
        ClientRequest::CancelTask(TaskRequestParams {
            task_id: task_id.clone(),
            meta,
        })
    };
    match client
        .task_request(method::TASKS_CANCEL, &build, &CallOptions::default())
        .await
    {
        Ok(ServerResult::Empty(_)) => Ok(()),
        Ok(_) => Err(ClientError::protocol(
            "the server's reply is not an acknowledgement",
        )),
        Err(e) => match e.rpc_error() {
            Some(rpc) if rpc.code == code::INVALID_PARAMS => {
                Err(ClientError::task_lost(id, rpc.clone()))
            }
            _ => Err(e),
        },
    }
}

impl Drop for TaskHandle {
    /// A handle made by a call and not detached cancels its task: the call
    /// was dropped, nobody waits for its outcome. The cancel is sent in the
    /// background (on the current Tokio runtime, if there is one).
    fn drop(&mut self) {
        if !self.cancel_on_drop {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let client = self.client.clone();
            let id = std::mem::take(&mut self.id);
            runtime.spawn(async move {
                if let Err(e) = cancel(&client, &id).await {
                    tracing::debug!(task = %id, error = %e, "cancelling a dropped call's task failed");
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_poll_interval_is_clamped_defaulted_and_jittered() {
        for _ in 0..50 {
            let p = poll_pause(Some(500));
            assert!(p >= Duration::from_millis(450) && p <= Duration::from_millis(550));
            let p = poll_pause(None);
            assert!(p >= DEFAULT_POLL * 9 / 10 && p <= DEFAULT_POLL * 11 / 10);
            assert!(poll_pause(Some(0)) >= MIN_POLL * 9 / 10);
            assert!(poll_pause(Some(-5)) >= DEFAULT_POLL * 9 / 10);
            assert!(poll_pause(Some(i64::MAX)) <= MAX_POLL * 11 / 10);
        }
    }

    #[test]
    fn failed_polls_back_off_up_to_the_maximum() {
        assert!(error_pause(Some(100), 1) >= Duration::from_millis(180));
        assert!(error_pause(Some(100), 3) >= Duration::from_millis(720));
        assert!(error_pause(Some(100), 30) <= MAX_POLL);
    }
}
