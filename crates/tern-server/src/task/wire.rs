//! `tasks/get`, `tasks/update` and `tasks/cancel` (Tasks extension › Task
//! Polling, Task Update Requests, Task Cancellation).
//!
//! In order: the request must declare the extension (`-32021`, a MUST for
//! all three); the task must exist, be unexpired and belong to the caller
//! (otherwise the same `-32602` for all three cases, so ids of other
//! principals cannot be probed); acks are `{resultType:"complete"}`.

use tern_protocol::error::ErrorObject;
use tern_protocol::result::EmptyResult;
use tern_protocol::task::{DetailedTask, TaskRequestParams, TaskStatus, UpdateTaskRequestParams};

use super::runner::task_view;
use super::view::GetView;
use super::{TaskRecord, Tasks, missing_extension, owner_of, request_declared};
use crate::call::CallContext;
use crate::json::{Json, to_json};

/// The one refusal of an unknown, expired or foreign task id.
fn unknown_task() -> ErrorObject {
    ErrorObject::invalid_params("Unknown or expired taskId")
}

/// The detailed view of a record (`DetailedTask`).
pub(crate) fn detailed(r: &TaskRecord) -> DetailedTask {
    DetailedTask {
        task: task_view(r),
        input_requests: (r.status == TaskStatus::InputRequired).then(|| r.input_requests.clone()),
        result: match (&r.status, &r.result) {
            (TaskStatus::Completed, Some(serde_json::Value::Object(o))) => Some(o.clone()),
            _ => None,
        },
        error: (r.status == TaskStatus::Failed)
            .then(|| r.error.clone())
            .flatten(),
    }
}

/// `tasks/get`'s result for `record`.
fn get_json(record: &TaskRecord) -> Json {
    // Rules task-recovery-no-status and meta-prefix: the attempt shows under
    // tern's own key, never as a status.
    let meta = record.journal.as_ref().map(|j| {
        let mut meta = tern_protocol::meta::ResultMeta::default();
        meta.extra
            .insert(super::attempt_meta_key(), serde_json::json!(j.attempt));
        meta
    });
    to_json(&GetView {
        record,
        meta: meta.as_ref(),
    })
}

/// The runner's lease of a running task has run out: reading it must go
/// through [`Tasks::modify`], which ends or hands on the task.
fn lease_lapsed(record: &TaskRecord, now: u64) -> bool {
    !record.status.is_terminal() && record.lease.as_ref().is_some_and(|l| l.expires_at <= now)
}

impl Tasks {
    /// The current view of task `task_id`, if the caller owns it (for
    /// `subscriptions/listen`: unknown and foreign ids alike are `None`).
    pub(crate) async fn owned_view(
        &self,
        task_id: &str,
        principal: &crate::principal::Principal,
    ) -> Option<DetailedTask> {
        match self.modify(task_id, |_, _| None::<()>).await {
            Ok(Some((record, _))) if record.owner == owner_of(principal) => Some(detailed(&record)),
            _ => None,
        }
    }

    /// The caller may see `record`.
    fn owns(record: &TaskRecord, call: &CallContext) -> bool {
        record.owner == owner_of(&call.principal)
    }

    /// `tasks/get`: the task with its `inputRequests`, `result` or `error`.
    pub(crate) async fn get(
        &self,
        params: TaskRequestParams,
        call: &CallContext,
    ) -> Result<Json, ErrorObject> {
        if !request_declared(&params.meta) {
            return Err(missing_extension("tasks/get"));
        }
        // The common case: the answer written from the record where the
        // store keeps it (one view, no copy). A lease that has lapsed goes
        // the long way below instead.
        let now = self.now_ms();
        let mut answer = None;
        let mut lapsing = false;
        let shown = self
            .store
            .read(&params.task_id, now, &mut |record| {
                lapsing = lease_lapsed(record, now);
                if !lapsing {
                    answer = Some(if Self::owns(record, call) {
                        Ok(get_json(record))
                    } else {
                        Err(unknown_task())
                    });
                }
            })
            .await
            .map_err(super::store_failed)?;
        if !shown {
            return Err(unknown_task());
        }
        if let Some(answer) = answer {
            return answer;
        }
        // Through `modify`, so a lapsed lease is written as `failed` once.
        let found = self.modify(&params.task_id, |_, _| None::<()>).await?;
        match found {
            Some((record, _)) if Self::owns(&record, call) => Ok(get_json(&record)),
            _ => Err(unknown_task()),
        }
    }

    /// `tasks/update`: applies the answers to outstanding keys before it
    /// acks (a poll right after sees them gone); unknown, answered or
    /// superseded keys are ignored, a partial set is fine.
    pub(crate) async fn update(
        &self,
        params: UpdateTaskRequestParams,
        call: &CallContext,
    ) -> Result<Json, ErrorObject> {
        if !request_declared(&params.meta) {
            return Err(missing_extension("tasks/update"));
        }
        let responses = params.input_responses;
        let mut foreign = false;
        let found = self
            .modify(&params.task_id, |r, now| {
                foreign = !Self::owns(r, call);
                if foreign || r.status.is_terminal() {
                    return None;
                }
                let keys: Vec<String> = responses
                    .keys()
                    .filter(|k| r.input_requests.contains_key(*k))
                    .map(str::to_owned)
                    .collect();
                if keys.is_empty() {
                    return None;
                }
                for key in keys {
                    if let Some(value) = responses.raw(&key) {
                        r.input_requests.shift_remove(&key);
                        r.answers.insert(key, value.clone());
                    }
                }
                if r.input_requests.is_empty() {
                    r.status = TaskStatus::Working;
                }
                r.last_updated_at = now;
                Some(())
            })
            .await?;
        match found {
            None => Err(unknown_task()),
            Some(_) if foreign => Err(unknown_task()),
            Some((record, changed)) => {
                if changed.is_some()
                    && let Some(local) = self.local(&record.task_id)
                {
                    local.wake();
                }
                Ok(to_json(&EmptyResult::default()))
            }
        }
    }

    /// `tasks/cancel`: asks the body to stop (cooperative); on a terminal
    /// task, the same empty ack.
    pub(crate) async fn cancel(
        &self,
        params: TaskRequestParams,
        call: &CallContext,
    ) -> Result<Json, ErrorObject> {
        if !request_declared(&params.meta) {
            return Err(missing_extension("tasks/cancel"));
        }
        let mut foreign = false;
        let found = self
            .modify(&params.task_id, |r, now| {
                foreign = !Self::owns(r, call);
                if foreign || r.status.is_terminal() || r.cancel_requested {
                    return None;
                }
                r.cancel_requested = true;
                r.status_message = Some("Cancelling".to_owned());
                r.last_updated_at = now;
                Some(())
            })
            .await?;
        match found {
            None => Err(unknown_task()),
            Some(_) if foreign => Err(unknown_task()),
            Some((record, changed)) => {
                if changed.is_some()
                    && let Some(local) = self.local(&record.task_id)
                {
                    local.wake();
                }
                Ok(to_json(&EmptyResult::default()))
            }
        }
    }
}
