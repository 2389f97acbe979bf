//! A tool that *requires* a task (listed with `execution.taskSupport:
//! "required"`, or refused with the `-32021` naming the Tasks extension
//! before it ran), called on a 2025-11-25 session (the *await* strategy;
//! a 2026-07-28 client without the extension gets the `-32021` the Tasks
//! extension requires): the gateway declares
//! the extension upstream itself, creates the task, polls it (`tasks/get`,
//! at the task's `pollIntervalMs`, between 50 ms and 2 s) and answers with
//! its result.
//!
//! The task's questions (status `input_required`) become the leg's
//! `input_required`, the routing naming the task (`{"u": upstream, "t":
//! its id}`): under the *await* strategy (the 2025 session) tern-server
//! asks them live on the session and calls again with the answers, which go
//! to the task as `tasks/update`; under MRTR the client answers them in its
//! retry. A downstream request cancelled, or dropped with its connection,
//! while the gateway follows the task cancels it (`tasks/cancel`).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::error::{ErrorObject, code};
use tern_protocol::task::TASKS_EXTENSION;
use tern_protocol::{InputRequests, method};
use tern_server::relay::{RelayLeg, RelayOutcome};

use crate::upstream::{Extras, Upstream};

/// The routing member naming the upstream task.
const TASK: &str = "t";

/// The shortest pause between two polls.
const MIN_POLL: Duration = Duration::from_millis(50);
/// The longest pause between two polls.
const MAX_POLL: Duration = Duration::from_secs(2);

/// The tool entry requires a task.
pub fn requires_task(tool: &Value) -> bool {
    tool["execution"]["taskSupport"] == "required"
}

/// A first leg of `tools/call` under the await strategy (a 2025-11-25
/// session) from a client without the Tasks extension: one the gateway may
/// follow as a task should the tool require one. A 2026-07-28 client that
/// did not declare the extension gets the upstream's `-32021` (Tasks
/// extension › Capability Negotiation).
pub(crate) fn may_follow(leg: &RelayLeg) -> bool {
    leg.live
        && leg.method == method::TOOLS_CALL
        && leg.routing.is_none()
        && !leg.ctx.client_capabilities().extension(TASKS_EXTENSION)
}

/// `e` is the `-32021` of a tool that requires the Tasks extension (sent
/// before the tool ran: Tasks extension › Capability Negotiation).
pub(crate) fn needs_tasks(e: &ErrorObject) -> bool {
    e.code == code::MISSING_REQUIRED_CLIENT_CAPABILITY
        && e.data.as_ref().is_some_and(|d| {
            d["requiredCapabilities"]["extensions"]
                .get(TASKS_EXTENSION)
                .is_some()
        })
}

/// The routing of a leg is a task-bridged round's.
pub fn is_tasked(routing: Option<&Value>) -> bool {
    routing.is_some_and(|r| r.get(TASK).is_some())
}

/// The upstream task a task-bridged round's routing follows.
pub(crate) fn task_of(routing: &Value) -> Option<&str> {
    routing.get(TASK).and_then(Value::as_str)
}

/// What the gateway declares upstream for `ctx`'s call of a task-required
/// tool: the client's capabilities and the Tasks extension.
pub(crate) fn capabilities(ctx: &tern_server::Ctx) -> tern_protocol::ClientCapabilities {
    ctx.client_capabilities()
        .clone()
        .with_extension(TASKS_EXTENSION)
}

/// One leg of a task-required tool for a client without the extension:
/// the task created (first leg) or answered (a retry), then followed.
pub(crate) async fn leg(
    upstream: &Arc<Upstream>,
    leg: RelayLeg,
    params: Value,
    header_params: Vec<(String, String)>,
) -> Result<RelayOutcome, ErrorObject> {
    let capabilities = capabilities(&leg.ctx);
    let task_id = if let Some(id) = leg.routing.as_ref().and_then(task_of) {
        let responses = leg.input_responses.as_ref().map_or_else(
            || json!({}),
            |r| serde_json::to_value(r).unwrap_or_default(),
        );
        upstream
            .request(
                method::TASKS_UPDATE,
                json!({"taskId": id, "inputResponses": responses}),
                &capabilities,
            )
            .await?;
        id.to_owned()
    } else {
        let extras = Extras {
            header_params,
            ..Extras::default()
        };
        let created = upstream
            .relay(leg.method, params, &capabilities, extras)
            .await?;
        match created["resultType"].as_str() {
            Some("task") => created["taskId"]
                .as_str()
                .ok_or_else(|| unreadable(upstream.name()))?
                .to_owned(),
            // It asked under MRTR before becoming a task: its rounds would
            // each need the extension declared again, which this bridge
            // does not follow.
            Some("input_required") => {
                return Err(ErrorObject::new(
                    code::INTERNAL_ERROR,
                    format!(
                        "The upstream server `{}` asked before creating the task the tool \
                         requires; the gateway follows only tasks created at once",
                        upstream.name()
                    ),
                ));
            }
            // The upstream ran it at once after all.
            _ => return Ok(RelayOutcome::Complete(created)),
        }
    };
    follow(upstream, &leg, &task_id, &capabilities).await
}

fn unreadable(upstream: &str) -> ErrorObject {
    ErrorObject::new(
        code::INTERNAL_ERROR,
        format!("The upstream server `{upstream}` answered a task the gateway cannot read"),
    )
}

/// Cancels the upstream task when dropped armed: the downstream request
/// ended while the gateway followed the task — cancelled by its client (the
/// relayed leg is dropped then, [`crate::cancel`]) or its connection gone —
/// so the task does not run on for no one.
struct CancelOnDrop<'a> {
    upstream: &'a Arc<Upstream>,
    task_id: &'a str,
    capabilities: &'a tern_protocol::ClientCapabilities,
    armed: bool,
}

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        tracing::debug!(upstream = %self.upstream.name(), "a followed task's request ended: cancelling the task");
        self.upstream.send_parting(
            method::TASKS_CANCEL,
            json!({"taskId": self.task_id}),
            self.capabilities.clone(),
        );
    }
}

/// Polls the task until it ends or asks. Dropped before (the downstream
/// request gone), it cancels the task.
async fn follow(
    upstream: &Arc<Upstream>,
    leg: &RelayLeg,
    task_id: &str,
    capabilities: &tern_protocol::ClientCapabilities,
) -> Result<RelayOutcome, ErrorObject> {
    let mut cancel = CancelOnDrop {
        upstream,
        task_id,
        capabilities,
        armed: true,
    };
    loop {
        let task = upstream
            .request(method::TASKS_GET, json!({"taskId": task_id}), capabilities)
            .await?;
        let status = task["status"].as_str();
        if matches!(
            status,
            Some("completed" | "failed" | "cancelled" | "input_required")
        ) {
            // Ended, or waiting for answers the next leg brings: the task
            // is the upstream's to keep.
            cancel.armed = false;
        }
        match status {
            Some("completed") => {
                let result = task
                    .get("result")
                    .cloned()
                    .ok_or_else(|| unreadable(upstream.name()))?;
                return Ok(RelayOutcome::Complete(result));
            }
            Some("failed") => {
                let error = task
                    .get("error")
                    .cloned()
                    .and_then(|e| serde_json::from_value::<ErrorObject>(e).ok())
                    .ok_or_else(|| unreadable(upstream.name()))?;
                return Err(error);
            }
            Some("cancelled") => {
                return Err(ErrorObject::new(
                    code::INTERNAL_ERROR,
                    format!(
                        "The upstream server `{}` cancelled the task",
                        upstream.name()
                    ),
                ));
            }
            Some("input_required") => {
                let requests: InputRequests = task
                    .get("inputRequests")
                    .cloned()
                    .and_then(|r| serde_json::from_value(r).ok())
                    .ok_or_else(|| unreadable(upstream.name()))?;
                return Ok(RelayOutcome::InputRequired {
                    requests,
                    routing: json!({"u": upstream.name(), TASK: task_id}),
                });
            }
            _ => {}
        }
        let pause = task["pollIntervalMs"]
            .as_u64()
            .map_or(MIN_POLL * 4, Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL);
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = leg.ctx.cancelled() => {
                // A guarded leg, which runs on when its request is cancelled
                // ([`crate::cancel`]), sees the cancellation here.
                cancel.armed = false;
                let _ = upstream
                    .request(method::TASKS_CANCEL, json!({"taskId": task_id}), capabilities)
                    .await;
                return Err(ErrorObject::new(code::INTERNAL_ERROR, "The request was cancelled"));
            }
        }
    }
}
