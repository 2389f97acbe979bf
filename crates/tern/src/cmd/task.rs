//! `tern task get|wait|cancel ID`, and what Ctrl-C does to a task being
//! followed.

use std::time::Duration;

use serde_json::json;
use tern_client::Client;

use super::{Connected, TaskAction, emit, emit_json};
use crate::exit::{EXIT_OK, Failure};
use crate::output;
use crate::terminal::Session;

/// `tern task get|wait|cancel ID`.
pub(super) async fn task(c: &Connected, action: TaskAction, id: &str) -> Result<u8, Failure> {
    let d = &c.driver;
    let handle = d.client.task(id);
    match action {
        TaskAction::Get => {
            let task = d.task_request(id, "tasks/get", handle.get()).await?;
            if c.json {
                emit_json(&task);
            } else {
                emit(&format!(
                    "task {id}: {}\n",
                    crate::rounds::task_line(&task.task)
                ));
                if let Some(Ok(result)) = task.call_tool_result() {
                    emit(&output::call(&result));
                }
                if let Some(e) = &task.error {
                    emit(&format!("error: {}\n", tern::safe::line(&e.to_string())));
                }
            }
            Ok(EXIT_OK)
        }
        TaskAction::Wait => {
            let mut sent = std::collections::HashMap::new();
            let ended = d.follow_task(id, id, &mut sent).await?;
            c.finish(ended, None)
        }
        TaskAction::Cancel => {
            let mut handle = handle;
            d.task_request(id, "tasks/cancel", handle.cancel()).await?;
            if c.json {
                emit_json(&json!({"taskId": id, "cancelRequested": true}));
            } else {
                eprintln!(
                    "tern: asked {} to cancel task {id} (it stops at its next check; tern task get {id} shows how it ended)",
                    d.who()
                );
            }
            Ok(EXIT_OK)
        }
    }
}

/// Ctrl-C while following task `id`: offers (on a terminal) to cancel it,
/// else leaves it running; what happened, for the exit message.
pub(super) async fn task_interrupted(
    client: &Client,
    session: &Session,
    id: &str,
    interactive: bool,
) -> String {
    let cancel = interactive && {
        eprint!(
            "\ntern: task {id} is still running on {}. Cancel it? [y/N] ",
            session.fallback_name
        );
        let line = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).map(|_| line)
        });
        matches!(
            tokio::time::timeout(Duration::from_secs(60), line).await,
            Ok(Ok(Ok(l))) if matches!(l.trim(), "y" | "Y" | "yes")
        )
    };
    if cancel {
        match client.task(id).cancel().await {
            Ok(()) => format!("interrupted: asked the server to cancel task {id}"),
            Err(e) => format!("interrupted: task {id} could not be cancelled: {e}"),
        }
    } else {
        format!(
            "interrupted: task {id} is left running; `tern task wait {id}` follows it and `tern task cancel {id}` cancels it (with the same server options)"
        )
    }
}
