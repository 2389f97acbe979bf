//! Values built with the constructors serialise to JSON the official schema
//! accepts: the easy path writes valid wire data (`resultType`, `ttlMs` and
//! `cacheScope` included).

use tern_protocol::capabilities::ServerCapabilities;
use tern_protocol::completion::CompleteResult;
use tern_protocol::content::{ResourceContents, TextResourceContents};
use tern_protocol::discover::DiscoverResult;
use tern_protocol::progress::ProgressNotificationParams;
use tern_protocol::prompt::{ListPromptsResult, Prompt};
use tern_protocol::resource::{
    ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult, Resource,
};
use tern_protocol::result::CacheScope;
use tern_protocol::subscription::SubscriptionsListenResult;
use tern_protocol::task::{CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskStatus};
use tern_protocol::tool::{CallToolResult, ListToolsResult, Tool};
use tern_protocol::{ClientCapabilities, ProgressToken, RequestId, ServerNotification};

use crate::schema::validate;

fn check(name: &str, value: &impl serde::Serialize) {
    let json = serde_json::to_value(value).unwrap();
    let errors = validate(name, &json);
    assert!(errors.is_empty(), "{name} {json}: {errors:?}");
}

#[test]
fn constructed_results_are_schema_valid() {
    let tool = Tool::new("t", Tool::no_arguments_schema()).with_description("d");
    check(
        "ListToolsResult",
        &ListToolsResult::new(vec![tool], 60_000, CacheScope::Public),
    );
    check("CallToolResult", &CallToolResult::text("hi"));
    check("CallToolResult", &CallToolResult::error("broken"));
    check("CallToolResult", &CallToolResult::default());
    check(
        "ListPromptsResult",
        &ListPromptsResult::new(vec![Prompt::new("p")], 0, CacheScope::Private),
    );
    check(
        "ListResourcesResult",
        &ListResourcesResult::new(vec![Resource::new("file:///a", "a")], 1, CacheScope::Public),
    );
    check(
        "ListResourceTemplatesResult",
        &ListResourceTemplatesResult::new(vec![], 1, CacheScope::Public),
    );
    let contents = vec![ResourceContents::Text(TextResourceContents::new(
        "file:///a",
        "x",
    ))];
    check(
        "ReadResourceResult",
        &ReadResourceResult::new(contents, 0, CacheScope::Private),
    );
    check(
        "DiscoverResult",
        &DiscoverResult::new(
            vec!["2026-07-28".into()],
            ServerCapabilities::default(),
            0,
            CacheScope::Private,
        ),
    );
    let many: Vec<String> = (0..150).map(|i| i.to_string()).collect();
    let completion = CompleteResult::new(many);
    assert_eq!(completion.completion.values.len(), 100);
    assert_eq!(completion.completion.has_more, Some(true));
    check("CompleteResult", &completion);
    check(
        "SubscriptionsListenResult",
        &SubscriptionsListenResult::new(RequestId::from("listen-1")),
    );
    let task = Task::new("t-1", TaskStatus::Working, "2026-07-28T10:00:00Z", None);
    check("CreateTaskResult", &CreateTaskResult::new(task.clone()));
    let detailed = DetailedTask {
        task,
        input_requests: None,
        result: None,
        error: None,
    };
    check("GetTaskResult", &GetTaskResult::new(detailed));
    let progress =
        ServerNotification::Progress(ProgressNotificationParams::new(ProgressToken::from(7), 0.5));
    check("ProgressNotification", &progress);
    let caps = ClientCapabilities::default()
        .with_elicitation_form()
        .with_elicitation_url()
        .with_sampling()
        .with_roots();
    check("ClientCapabilities", &caps);
}
