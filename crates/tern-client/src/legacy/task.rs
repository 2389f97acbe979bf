//! 2025-11-25 tasks on the legacy leg (2025-11-25 Basic, Utilities:
//! [Tasks](https://modelcontextprotocol.io/specification/2025-11-25/basic/utilities/tasks),
//! experimental in that revision).
//!
//! A server that declares `tasks.requests.tools.call` may mark a tool
//! `execution.taskSupport: "required"`: the client MUST call it as a task
//! ("Tool-Level Negotiation"). On such a session the first `tools/call`
//! lists the tools once (the leg's own `tools/list`, all pages) to learn
//! which; a call of one of them is sent with the `task` param, answered by a
//! `CreateTaskResult`, then polled with `tasks/get` at the task's
//! `pollInterval` (clamped to [`MIN_POLL`, `MAX_POLL`]) until it leaves
//! `working`; on `input_required` or a terminal status the leg sends
//! `tasks/result`, which blocks until the task ends and carries the task's
//! questions (`elicitation/create` with the related-task `_meta`) as requests
//! of their own, answered by the call's handlers like any live question.
//! The call's exchange then gets what `tasks/result` returned, exactly what
//! the `tools/call` would have ("Result Retrieval"). Dropping the exchange
//! sends `tasks/cancel`. A tool with `"optional"` support is called as a
//! plain request.

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tern_protocol::error::ErrorObject;
use tern_protocol::jsonrpc::RequestId;
use tern_protocol::method;
use tokio::sync::mpsc;

#[cfg(feature = "http")]
use super::http::LegacyHttp;
use crate::client::{DEFAULT_POLL, MAX_POLL, MIN_POLL};
use crate::error::ClientError;
use crate::transport::stdio::ChildProcess;
use crate::transport::{Exchange, Incoming, Outgoing, Transport};

/// The most pages of `tools/list` read to learn which tools need a task.
const MAX_PAGES: usize = 100;

/// How long a task is followed when it gives no `ttl` (it may not outlive
/// its `ttl`, so that bounds the polling otherwise): 24 h.
const NO_TTL_LIMIT: Duration = Duration::from_secs(24 * 3600);

/// Where a 2025 session's requests go.
#[derive(Clone)]
pub(crate) enum Session {
    Stdio(Arc<ChildProcess>),
    #[cfg(feature = "http")]
    Http(Arc<LegacyHttp>),
}

impl Session {
    async fn send(&self, out: Outgoing) -> Result<Exchange, ClientError> {
        match self {
            Self::Stdio(child) => child.send(out).await,
            #[cfg(feature = "http")]
            Self::Http(http) => http.send(out).await,
        }
    }

    /// The listeners of the session's notifications no request takes.
    pub(super) fn listeners(&self) -> &crate::transport::SessionListeners {
        match self {
            Self::Stdio(child) => child.listeners(),
            #[cfg(feature = "http")]
            Self::Http(http) => http.listeners(),
        }
    }
}

/// The server offers task-augmented `tools/call` (its `initialize` result).
pub(crate) fn offers_tool_tasks(init: &Value) -> bool {
    init["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object()
}

fn next_id() -> RequestId {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    RequestId::from(format!("tern-task-{}", NEXT.fetch_add(1, Ordering::Relaxed)).as_str())
}

/// One request of the leg's own, awaited; its live questions and
/// notifications go to `forward` (the call's exchange), if any.
pub(super) async fn request(
    session: &Session,
    version: &str,
    method: &str,
    params: Value,
    forward: Option<&mpsc::Sender<Result<Incoming, ClientError>>>,
) -> Result<Result<Value, ErrorObject>, ClientError> {
    let id = next_id();
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
    let out = Outgoing {
        id,
        method: method.to_owned(),
        name: None,
        protocol_version: version.to_owned(),
        header_params: Vec::new(),
        progress_token: None,
        body,
    };
    let mut exchange = session.send(out).await?;
    loop {
        match exchange.next().await {
            Some(Ok(Incoming::Result(raw))) => {
                exchange.disarm();
                let value = serde_json::from_str(raw.get()).map_err(|e| {
                    ClientError::protocol(format!("the {method} result cannot be read")).because(e)
                })?;
                return Ok(Ok(value));
            }
            Some(Ok(Incoming::Error(e))) => {
                exchange.disarm();
                return Ok(Err(e));
            }
            Some(Ok(other)) => {
                if let Some(tx) = forward {
                    let _ = tx.send(Ok(other)).await;
                }
            }
            Some(Err(e)) => return Err(e),
            None => {
                return Err(ClientError::transport(format!(
                    "the server closed before answering {method}"
                )));
            }
        }
    }
}

/// The names of the tools whose `execution.taskSupport` is `required`.
pub(crate) async fn required_tools(
    session: &Session,
    version: &str,
) -> Result<HashSet<String>, ClientError> {
    let mut names = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map_or_else(|| json!({}), |c| json!({"cursor": c}));
        let page = request(session, version, method::TOOLS_LIST, params, None)
            .await?
            .map_err(ClientError::rpc)?;
        for tool in page["tools"].as_array().into_iter().flatten() {
            if tool["execution"]["taskSupport"] == "required"
                && let Some(name) = tool["name"].as_str()
            {
                names.insert(name.to_owned());
            }
        }
        match page["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok(names),
        }
    }
    Ok(names)
}

/// `out` (a legacy `tools/call`) as a task: sent with the `task` param, then
/// followed (module docs); the exchange gets the tool's result.
pub(crate) fn call(
    session: Session,
    out: &Outgoing,
    version: String,
) -> Result<Exchange, ClientError> {
    let mut body: Value = serde_json::from_str(&out.body)
        .map_err(|e| ClientError::request("the request cannot be rewritten").because(e))?;
    body["params"]["task"] = json!({});
    let params = body["params"].take();
    let (tx, rx) = mpsc::channel(64);
    tokio::spawn(async move {
        match follow(&session, &version, params, &tx).await {
            Ok(Followed::Done(reply)) => {
                let _ = tx.send(Ok(reply)).await;
            }
            Ok(Followed::Abandoned(task_id)) => cancel(session, version, task_id),
            Err(e) => {
                let _ = tx.send(Err(e)).await;
            }
        }
    });
    Ok(Exchange::new(rx, None))
}

enum Followed {
    Done(Incoming),
    /// The caller went away while the task ran.
    Abandoned(String),
}

fn raw(value: &Value) -> Incoming {
    Incoming::Result(serde_json::value::to_raw_value(value).unwrap_or_default())
}

async fn follow(
    session: &Session,
    version: &str,
    params: Value,
    tx: &mpsc::Sender<Result<Incoming, ClientError>>,
) -> Result<Followed, ClientError> {
    let created = match request(session, version, method::TOOLS_CALL, params, Some(tx)).await? {
        Ok(created) => created,
        Err(e) => return Ok(Followed::Done(Incoming::Error(e))),
    };
    // A server that ran the call as a plain request answered it already.
    let Some(mut task) = created.get("task").filter(|t| t.is_object()).cloned() else {
        return Ok(Followed::Done(raw(&created)));
    };
    let Some(task_id) = task["taskId"].as_str().map(str::to_owned) else {
        return Err(ClientError::protocol("the CreateTaskResult has no taskId"));
    };
    let limit = task["ttl"]
        .as_u64()
        .map_or(NO_TTL_LIMIT, Duration::from_millis);
    let until = Instant::now() + limit;
    while task["status"] == "working" {
        if Instant::now() >= until {
            return Err(ClientError::transport(format!(
                "task {task_id} was still working when its ttl ran out"
            )));
        }
        let pause = task["pollInterval"]
            .as_u64()
            .map_or(DEFAULT_POLL, Duration::from_millis)
            .clamp(MIN_POLL, MAX_POLL);
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = tx.closed() => return Ok(Followed::Abandoned(task_id)),
        }
        task = request(
            session,
            version,
            method::TASKS_GET,
            json!({"taskId": task_id}),
            None,
        )
        .await?
        .map_err(ClientError::rpc)?;
    }
    // input_required or an end: `tasks/result` brings the questions, then
    // blocks until the task ends.
    let result = tokio::select! {
        r = request(session, version, method::TASKS_RESULT, json!({"taskId": task_id}), Some(tx)) => r?,
        () = tx.closed() => return Ok(Followed::Abandoned(task_id)),
    };
    Ok(Followed::Done(match result {
        Ok(value) => raw(&value),
        Err(e) => Incoming::Error(e),
    }))
}

/// `tasks/cancel` for a task nobody waits for any more (in the background).
fn cancel(session: Session, version: String, task_id: String) {
    tokio::spawn(async move {
        let sent = request(
            &session,
            &version,
            method::TASKS_CANCEL,
            json!({"taskId": task_id}),
            None,
        );
        if tokio::time::timeout(Duration::from_secs(5), sent)
            .await
            .is_err()
        {
            tracing::debug!(task = %task_id, "tasks/cancel was not answered");
        }
    });
}
