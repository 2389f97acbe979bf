//! Property tests: generated MRTR, elicitation and Tasks values serialise to
//! JSON the official schema accepts, and decode back to themselves.

use indexmap::IndexMap;
use proptest::prelude::*;
use serde::Serialize;
use serde::de::DeserializeOwned;
use tern_protocol::content::{Role, TextContent};
use tern_protocol::elicitation::{
    BooleanSchema, ElicitRequestFormParams, ElicitRequestParams, ElicitRequestUrlParams,
    ElicitResult, ElicitValue, LegacyTitledEnumSchema, NumberKind, NumberSchema, PrimitiveSchema,
    RequestedSchema, StringFormat, StringSchema, TitledItems, TitledMultiSelectEnumSchema,
    TitledOption, TitledSingleSelectEnumSchema, UntitledItems, UntitledMultiSelectEnumSchema,
    UntitledSingleSelectEnumSchema,
};
use tern_protocol::error::ErrorObject;
use tern_protocol::mrtr::InputResponseRequestParams;
use tern_protocol::result::{CompleteTag, TaskTag};
use tern_protocol::roots::{ListRootsResult, Root};
use tern_protocol::sampling::{
    CreateMessageRequestParams, CreateMessageResult, SamplingContent, SamplingContentBlock,
    SamplingMessage, StopReason,
};
use tern_protocol::task::{CreateTaskResult, DetailedTask, GetTaskResult, Task, TaskStatus};
use tern_protocol::{
    ClientCapabilities, InputRequest, InputRequiredResult, InputResponse, InputResponses,
    JsonObject, RequestMeta,
};

use crate::schema::validate;

fn text() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9 _.,?-]{0,16}"
}

fn key() -> impl Strategy<Value = String> {
    "[a-z][a-z_]{0,9}"
}

fn options() -> impl Strategy<Value = Vec<String>> {
    prop::collection::vec("[a-z]{1,6}", 1..4)
}

fn titled() -> impl Strategy<Value = Vec<TitledOption>> {
    prop::collection::vec(
        ("[a-z]{1,6}", text()).prop_map(|(v, t)| TitledOption::new(v, t)),
        1..4,
    )
}

fn opt_text() -> impl Strategy<Value = Option<String>> {
    prop::option::of(text())
}

fn field() -> impl Strategy<Value = PrimitiveSchema> {
    let format = prop::option::of(prop_oneof![
        Just(StringFormat::Email),
        Just(StringFormat::Uri),
        Just(StringFormat::Date),
        Just(StringFormat::DateTime)
    ]);
    prop_oneof![
        (
            opt_text(),
            opt_text(),
            prop::option::of(0..10u64),
            format,
            opt_text()
        )
            .prop_map(|(title, description, min_length, format, default)| {
                PrimitiveSchema::String(StringSchema {
                    title,
                    description,
                    min_length,
                    max_length: min_length.map(|m| m + 10),
                    format,
                    default,
                    ..Default::default()
                })
            }),
        (
            any::<bool>(),
            prop::option::of(-1000i32..1000),
            prop::option::of(0.0f64..1.0)
        )
            .prop_map(|(int, min, default)| {
                PrimitiveSchema::Number(NumberSchema {
                    kind: if int {
                        NumberKind::Integer
                    } else {
                        NumberKind::Number
                    },
                    minimum: min.map(f64::from),
                    default: if int { None } else { default },
                    ..Default::default()
                })
            }),
        (opt_text(), prop::option::of(any::<bool>())).prop_map(|(title, default)| {
            PrimitiveSchema::Boolean(BooleanSchema {
                title,
                default,
                ..Default::default()
            })
        }),
        options().prop_map(|options| PrimitiveSchema::UntitledSingleSelect(
            UntitledSingleSelectEnumSchema {
                default: options.first().cloned(),
                options,
                ..Default::default()
            }
        )),
        titled().prop_map(|one_of| PrimitiveSchema::TitledSingleSelect(
            TitledSingleSelectEnumSchema {
                one_of,
                ..Default::default()
            }
        )),
        options().prop_map(
            |options| PrimitiveSchema::LegacyTitled(LegacyTitledEnumSchema {
                enum_names: Some(options.iter().map(|o| o.to_uppercase()).collect()),
                options,
                ..Default::default()
            })
        ),
        (options(), prop::option::of(0..3u64)).prop_map(|(options, min_items)| {
            PrimitiveSchema::UntitledMultiSelect(UntitledMultiSelectEnumSchema {
                min_items,
                items: UntitledItems {
                    options,
                    ..Default::default()
                },
                ..Default::default()
            })
        }),
        titled().prop_map(|any_of| PrimitiveSchema::TitledMultiSelect(
            TitledMultiSelectEnumSchema {
                items: TitledItems { any_of },
                ..Default::default()
            }
        )),
    ]
}

fn form() -> impl Strategy<Value = ElicitRequestFormParams> {
    (
        text(),
        prop::collection::vec((key(), field()), 0..5),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(message, fields, required, explicit)| {
            let properties: IndexMap<String, PrimitiveSchema> = fields.into_iter().collect();
            let required = required.then(|| properties.keys().take(1).cloned().collect());
            let mut params = ElicitRequestFormParams::new(
                message,
                RequestedSchema {
                    properties,
                    required,
                    ..Default::default()
                },
            );
            if !explicit {
                params.mode = None;
            }
            params
        })
}

fn url_params() -> impl Strategy<Value = ElicitRequestUrlParams> {
    (text(), "[a-z]{1,8}")
        .prop_map(|(m, path)| ElicitRequestUrlParams::new(m, format!("https://example.com/{path}")))
}

fn input_request() -> impl Strategy<Value = InputRequest> {
    prop_oneof![
        form().prop_map(|f| InputRequest::elicit(ElicitRequestParams::Form(f))),
        url_params().prop_map(|u| InputRequest::elicit(ElicitRequestParams::Url(u))),
        (text(), 1..4096u64).prop_map(|(t, max_tokens)| InputRequest::sampling(
            CreateMessageRequestParams {
                messages: vec![SamplingMessage::user_text(t)],
                max_tokens,
                ..Default::default()
            }
        )),
        Just(InputRequest::roots()),
    ]
}

fn input_required() -> impl Strategy<Value = InputRequiredResult> {
    (
        prop::collection::vec((key(), input_request()), 0..4),
        prop::option::of("[A-Za-z0-9._-]{1,40}"),
    )
        .prop_map(|(requests, state)| {
            if requests.is_empty() {
                InputRequiredResult::state_only(state.unwrap_or_else(|| "t1.k.state".into()))
            } else {
                InputRequiredResult::new(requests.into_iter().collect(), state)
            }
        })
}

fn elicit_value() -> impl Strategy<Value = ElicitValue> {
    prop_oneof![
        text().prop_map(ElicitValue::String),
        any::<i32>().prop_map(|n| ElicitValue::from(i64::from(n))),
        any::<bool>().prop_map(ElicitValue::Bool),
        options().prop_map(ElicitValue::Strings),
    ]
}

fn elicit_result() -> impl Strategy<Value = ElicitResult> {
    prop_oneof![
        prop::collection::vec((key(), elicit_value()), 0..4)
            .prop_map(|c| ElicitResult::accept(c.into_iter().collect())),
        Just(ElicitResult::consent()),
        Just(ElicitResult::decline()),
        Just(ElicitResult::cancel()),
    ]
}

fn input_response() -> impl Strategy<Value = InputResponse> {
    prop_oneof![
        elicit_result().prop_map(InputResponse::from),
        (
            text(),
            "[a-z0-9-]{1,12}",
            prop::option::of(Just(StopReason::EndTurn))
        )
            .prop_map(
                |(t, model, stop_reason)| InputResponse::from(CreateMessageResult {
                    role: Role::Assistant,
                    content: SamplingContent::One(SamplingContentBlock::Text(TextContent::new(t))),
                    model,
                    stop_reason,
                    meta: None,
                })
            ),
        prop::collection::vec("[a-z]{1,8}", 0..3).prop_map(|dirs| InputResponse::from(
            ListRootsResult {
                roots: dirs
                    .into_iter()
                    .map(|d| Root::new(format!("file:///home/{d}")))
                    .collect(),
            }
        )),
    ]
}

fn status() -> impl Strategy<Value = TaskStatus> {
    prop_oneof![
        Just(TaskStatus::Working),
        Just(TaskStatus::InputRequired),
        Just(TaskStatus::Completed),
        Just(TaskStatus::Failed),
        Just(TaskStatus::Cancelled),
    ]
}

fn task() -> impl Strategy<Value = Task> {
    (
        "[a-f0-9]{8,32}",
        status(),
        opt_text(),
        prop::option::of(0..86_400_000i64),
        prop::option::of(100..60_000i64),
    )
        .prop_map(
            |(task_id, status, status_message, ttl_ms, poll_interval_ms)| Task {
                task_id,
                status,
                status_message,
                created_at: "2026-07-28T10:30:00Z".into(),
                last_updated_at: "2026-07-28T10:31:00Z".into(),
                ttl_ms,
                poll_interval_ms,
            },
        )
}

fn detailed_task() -> impl Strategy<Value = DetailedTask> {
    (task(), input_required(), text()).prop_map(|(task, ir, message)| {
        let status = task.status;
        let mut requests = ir.input_requests.unwrap_or_default();
        if requests.is_empty() {
            requests.insert("name".into(), InputRequest::roots());
        }
        DetailedTask {
            task,
            input_requests: (status == TaskStatus::InputRequired).then_some(requests),
            result: (status == TaskStatus::Completed).then(|| {
                serde_json::to_value(tern_protocol::tool::CallToolResult::text(message.clone()))
                    .unwrap()
                    .as_object()
                    .cloned()
                    .unwrap()
            }),
            error: (status == TaskStatus::Failed).then(|| ErrorObject::new(-32603, message)),
        }
    })
}

/// Serialises `value`, checks the schema accepts it as `type_name`, and that
/// it decodes back to itself.
fn check<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    type_name: &str,
    value: &T,
) -> Result<(), TestCaseError> {
    let json = serde_json::to_value(value).unwrap();
    let errors = validate(type_name, &json);
    prop_assert!(errors.is_empty(), "{type_name} {json} rejected: {errors:?}");
    let back: T = serde_json::from_value(json.clone())
        .map_err(|e| TestCaseError::fail(format!("{json}: {e}")))?;
    prop_assert_eq!(&back, value);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn input_required_results_are_schema_valid(ir in input_required()) {
        check("InputRequiredResult", &ir)?;
    }

    #[test]
    fn elicitation_forms_are_schema_valid(f in form()) {
        check("ElicitRequestFormParams", &f)?;
    }

    #[test]
    fn elicitation_urls_are_schema_valid(u in url_params()) {
        check("ElicitRequestURLParams", &u)?;
    }

    #[test]
    fn elicit_results_are_schema_valid(r in elicit_result()) {
        check("ElicitResult", &r)?;
    }

    #[test]
    fn input_responses_are_schema_valid(entries in prop::collection::vec((key(), input_response()), 0..4), state in prop::option::of("[a-z0-9.]{1,20}")) {
        let responses: InputResponses = entries.into_iter().collect();
        check("InputResponses", &responses)?;
        let params = InputResponseRequestParams {
            input_responses: Some(responses),
            request_state: state,
            meta: RequestMeta::new("2026-07-28", ClientCapabilities::default().with_elicitation_form()),
        };
        check("InputResponseRequestParams", &params)?;
    }

    #[test]
    fn tasks_are_schema_valid(t in task(), d in detailed_task()) {
        check("Task", &t)?;
        check("DetailedTask", &d)?;
        check("CreateTaskResult", &CreateTaskResult { result_type: TaskTag, task: t, meta: None })?;
        check("GetTaskResult", &GetTaskResult { result_type: CompleteTag, task: d, meta: None })?;
    }
}

#[test]
fn input_response_objects_stay_raw_until_read() {
    let mut responses = InputResponses::new();
    responses.insert("a", ElicitResult::decline());
    let json: JsonObject =
        serde_json::from_value(serde_json::to_value(&responses).unwrap()).unwrap();
    assert_eq!(json["a"], serde_json::json!({"action": "decline"}));
    assert!(
        responses
            .decode("a", tern_protocol::InputKind::Roots)
            .unwrap()
            .is_err()
    );
    assert!(
        responses
            .decode("b", tern_protocol::InputKind::Elicitation)
            .is_none()
    );
}
