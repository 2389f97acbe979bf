//! The Tasks extension on the client (issue 11), against tern's server in
//! process, over stdio and over HTTP: a task polled to its end with its
//! questions answered by the installed handlers, partial answers, the three
//! ways a task ends badly, cancel on drop, detach and resume by id.

use std::sync::{Arc, Mutex};

use serde_json::json;
use tern_client::{CallOptions, Client, ErrorKind, Started};
use tern_protocol::elicitation::ElicitResult;
use tern_protocol::task::{Task, TaskStatus};
use tern_protocol::{InputResponse, InputResponses};

use crate::handlers::Elicit;
use crate::harness::{Kind, Way, bounded, start, text};

fn tasks_client(conn: &crate::harness::Conn, handler: Elicit) -> Client {
    conn.client(Client::builder().tasks(true).elicitation(handler))
}

fn accept(content: serde_json::Value) -> InputResponse {
    let result: ElicitResult =
        serde_json::from_value(json!({"action": "accept", "content": content})).unwrap();
    InputResponse::from(result)
}

each_way! {
    /// `call_tool` on a tool that becomes a task: the client declares the
    /// extension, gets `resultType: "task"`, tells `on_task_created`, polls
    /// `tasks/get`, answers the task's question through `tasks/update` with
    /// the elicitation handler, reports each status change, and returns the
    /// tool's result.
    async fn a_task_is_polled_answered_and_completed(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = tasks_client(&conn, Elicit::fill(&[("name", "Ada")]));
        let created = Arc::new(Mutex::new(Vec::<Task>::new()));
        let statuses = Arc::new(Mutex::new(Vec::<TaskStatus>::new()));
        let (c, s) = (Arc::clone(&created), Arc::clone(&statuses));
        let options = CallOptions::default()
            .on_task_created(Arc::new(move |t: &Task| c.lock().unwrap().push(t.clone())))
            .on_task_status(Arc::new(move |t: &Task| s.lock().unwrap().push(t.status)));
        let result = bounded(client.call_tool_with("task_greet", None, &options)).await.unwrap();
        assert_eq!(text(&result), "Hello from a task, Ada!", "{way:?}");
        let created = created.lock().unwrap().clone();
        assert_eq!(created.len(), 1, "{way:?}");
        let id = created[0].task_id.clone();
        let statuses = statuses.lock().unwrap().clone();
        assert!(statuses.contains(&TaskStatus::InputRequired), "{statuses:?}");
        assert_eq!(statuses.last(), Some(&TaskStatus::Completed), "{statuses:?}");

        let log = &conn.log;
        let call = &log.requests("tools/call")[0];
        assert!(
            call["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["extensions"]
                .get("io.modelcontextprotocol/tasks")
                .is_some(),
            "the call declares the extension: {call}"
        );
        let updates = log.requests("tasks/update");
        assert_eq!(updates.len(), 1, "one question, answered once: {updates:?}");
        assert_eq!(updates[0]["params"]["taskId"], json!(id));
        assert_eq!(updates[0]["params"]["inputResponses"]["name"]["action"], "accept");
        assert!(log.requests("tasks/get").iter().all(|g| g["params"]["taskId"] == json!(id)));
        assert!(log.requests("tasks/cancel").is_empty(), "a completed call cancels nothing");
    }
}

each_way! {
    /// A client that does not declare the extension never gets a task: the
    /// same tool runs inline through MRTR.
    async fn without_the_extension_the_tool_runs_inline(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = conn.client(Client::builder().elicitation(Elicit::fill(&[("name", "Bo")])));
        let result = bounded(client.call_tool("task_greet", None)).await.unwrap();
        assert_eq!(text(&result), "Hello from a task, Bo!");
        assert!(conn.log.requests("tasks/get").is_empty(), "{way:?}");
        let client = conn.client(Client::builder().tasks(true).elicitation(Elicit::fill(&[("name", "Cy")])));
        let result = bounded(client.call_tool_with("task_greet", None, &CallOptions::default().without_tasks()))
            .await
            .unwrap();
        assert_eq!(text(&result), "Hello from a task, Cy!");
        assert!(conn.log.requests("tasks/get").is_empty(), "without_tasks: {way:?}");
    }
}

each_way! {
    /// Partial answers: a task asks two questions at once; one answer by
    /// `tasks/update` retires that key only (the next poll still asks the
    /// other), a second update the other, and the task completes.
    async fn partial_answers_retire_their_keys_only(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = tasks_client(&conn, Elicit::fill(&[]));
        let Started::Task(mut handle) =
            bounded(client.start_tool("task_batch", None, &CallOptions::default())).await.unwrap()
        else {
            panic!("the call did not become a task")
        };
        let asked = loop {
            let task = bounded(handle.get()).await.unwrap();
            if task.task.status == TaskStatus::InputRequired
                && task.input_requests.as_ref().is_some_and(|q| q.len() == 2)
            {
                break task.input_requests.unwrap();
            }
            assert_eq!(task.task.status, TaskStatus::Working, "{way:?}");
            tokio::task::yield_now().await;
        };
        let name_key = asked.keys().find(|k| k.as_str() == "name").unwrap().clone();
        let color_key = asked.keys().find(|k| k.as_str() == "color").unwrap().clone();
        let mut one = InputResponses::new();
        one.insert(name_key.clone(), accept(json!({"name": "Ada"})));
        bounded(handle.update(one)).await.unwrap();
        let after = bounded(handle.get()).await.unwrap();
        assert_eq!(after.task.status, TaskStatus::InputRequired);
        let left: Vec<&String> = after.input_requests.as_ref().unwrap().keys().collect();
        assert_eq!(left, vec![&color_key], "the answered key is gone at once: {way:?}");
        let mut two = InputResponses::new();
        two.insert(color_key, accept(json!({"color": "teal"})));
        bounded(handle.update(two)).await.unwrap();
        let result = bounded(handle.wait(&CallOptions::default())).await.unwrap();
        assert_eq!(text(&result), "Ada likes teal");
    }
}

each_way! {
    /// The three bad ends are distinct kinds: a task that failed
    /// (`TaskFailed`, with its error), one cancelled (`TaskCancelled`), and
    /// an id the server does not know (`TaskLost`, from `-32602`).
    async fn failed_cancelled_and_lost_are_distinct(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = tasks_client(&conn, Elicit::fill(&[]));
        let e = bounded(client.call_tool("task_fail", None)).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TaskFailed, "{e:#}");
        assert_eq!(e.rpc_error().map(|r| r.code), Some(-32000), "{e:#}");

        let Started::Task(mut handle) =
            bounded(client.start_tool("task_hang", None, &CallOptions::default())).await.unwrap()
        else {
            panic!("the call did not become a task")
        };
        bounded(handle.cancel()).await.unwrap();
        let e = bounded(handle.wait(&CallOptions::default())).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TaskCancelled, "{e:#}");

        let e = bounded(client.task("no-such-task").get()).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TaskLost, "{e:#}");
        assert_eq!(e.rpc_error().map(|r| r.code), Some(-32602));
    }
}

each_way! {
    /// Dropping a call that became a task cancels the task: the call's
    /// future is dropped once `on_task_created` has the id, and the task,
    /// followed again by id, ends `cancelled`.
    async fn dropping_the_call_cancels_its_task(way) {
        let conn = start(way, Kind::Fixture).await;
        let client = tasks_client(&conn, Elicit::fill(&[]));
        let (tx, rx) = tokio::sync::oneshot::channel::<String>();
        let tx = Mutex::new(Some(tx));
        let options = CallOptions::default().on_task_created(Arc::new(move |t: &Task| {
            if let Some(tx) = tx.lock().unwrap().take() {
                let _ = tx.send(t.task_id.clone());
            }
        }));
        let call = client.call_tool_with("task_hang", None, &options);
        let id = tokio::select! {
            _ = call => panic!("task_hang ended without a cancel"),
            id = bounded(rx) => id.unwrap(),
        };
        // The call's future is dropped here; its handle sends tasks/cancel.
        let e = bounded(client.task(id).wait(&CallOptions::default())).await.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::TaskCancelled, "{way:?}: {e:#}");
        assert_eq!(conn.log.requests("tasks/cancel").len(), 1, "{way:?}");
    }
}

each_way! {
    /// Detaching keeps the task running and hands back its id; a handle made
    /// from the id alone (a second client over HTTP and in process, the same
    /// child over stdio, whose tasks live in that process's memory) follows
    /// it to its end, answering its question; dropping that handle cancels
    /// nothing.
    async fn a_detached_task_is_resumed_by_id(way) {
        let conn = start(way, Kind::Fixture).await;
        let first = tasks_client(&conn, Elicit::fill(&[("name", "Grace")]));
        let Started::Task(handle) =
            bounded(first.start_tool("task_greet", None, &CallOptions::default())).await.unwrap()
        else {
            panic!("the call did not become a task")
        };
        assert!(handle.cancels_on_drop());
        let id = handle.detach();
        let second = if way == Way::Stdio {
            first.clone()
        } else {
            tasks_client(&conn, Elicit::fill(&[("name", "Grace")]))
        };
        let resumed = second.task(id.clone());
        assert!(!resumed.cancels_on_drop());
        let status = bounded(resumed.get()).await.unwrap().task.status;
        assert!(!status.is_terminal(), "the detached task still runs: {status:?}");
        drop(resumed);
        let mut again = second.task(id);
        let result = bounded(again.wait(&CallOptions::default())).await.unwrap();
        assert_eq!(text(&result), "Hello from a task, Grace!");
        assert!(conn.log.requests("tasks/cancel").is_empty(), "{way:?}");
    }
}

each_way! {
    /// `notifications/tasks` on `subscriptions/listen`: a stream asking for
    /// task ids is acked with the ones the caller owns (an unknown id is
    /// silently left out), then told each change of the task, to its end;
    /// asking for task ids without declaring the extension is `-32021`.
    async fn a_listen_stream_follows_the_tasks_it_asked_for(way) {
        use tern_protocol::ServerNotification;
        use tern_protocol::subscription::SubscriptionFilter;
        let conn = start(way, Kind::Fixture).await;
        let client = tasks_client(&conn, Elicit::fill(&[]));
        let Started::Task(mut handle) =
            bounded(client.start_tool("task_hang", None, &CallOptions::default())).await.unwrap()
        else {
            panic!("the call did not become a task")
        };
        let id = handle.id().to_owned();
        let filter = SubscriptionFilter {
            task_ids: Some(vec![id.clone(), "no-such-task".into()]),
            ..SubscriptionFilter::default()
        };
        let mut stream = bounded(client.listen(filter.clone())).await.unwrap();
        let Some(Ok(ServerNotification::SubscriptionsAcknowledged(ack))) =
            bounded(stream.next()).await
        else {
            panic!("{way:?}: the acknowledgement comes first");
        };
        assert_eq!(ack.notifications.task_ids, Some(vec![id.clone()]), "{way:?}");
        bounded(handle.cancel()).await.unwrap();
        let ended = loop {
            match bounded(stream.next()).await {
                Some(Ok(ServerNotification::TaskStatus(n))) => {
                    assert_eq!(n.task.task.task_id, id);
                    if n.task.task.status.is_terminal() {
                        break n.task.task.status;
                    }
                }
                other => panic!("{way:?}: expected notifications/tasks, got {other:?}"),
            }
        };
        assert_eq!(ended, TaskStatus::Cancelled, "{way:?}");
        drop(stream);

        let plain = conn.client(Client::builder());
        let mut refused = bounded(plain.listen(filter)).await.unwrap();
        let first = bounded(refused.next()).await;
        let Some(Err(e)) = first else {
            panic!("{way:?}: expected -32021, got {first:?}")
        };
        assert_eq!(e.rpc_error().map(|r| r.code), Some(-32021), "{e:#}");
    }
}
