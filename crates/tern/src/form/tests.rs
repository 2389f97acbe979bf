//! The form engine, driven by a scripted console.

use super::*;
use serde_json::json;
use tern_protocol::elicitation::ElicitAction;

/// A console that plays lines and records what was shown.
struct Script {
    lines: std::collections::VecDeque<String>,
    shown: String,
}

impl Script {
    fn new(lines: &[&str]) -> Self {
        Self {
            lines: lines.iter().map(|l| (*l).to_owned()).collect(),
            shown: String::new(),
        }
    }
}

impl Console for Script {
    fn say(&mut self, text: &str) {
        self.shown.push_str(text);
    }
    fn ask(&mut self, prompt: &str) -> Option<String> {
        self.shown.push_str(prompt);
        self.lines.pop_front()
    }
}

fn form(schema: serde_json::Value) -> ElicitRequestFormParams {
    serde_json::from_value(json!({"mode": "form", "message": "Tell me", "requestedSchema": schema}))
        .unwrap()
}

fn run(schema: serde_json::Value, lines: &[&str]) -> (ElicitResult, String) {
    let mut s = Script::new(lines);
    let r = fill(&mut s, "srv", &form(schema), true);
    (r, s.shown)
}

#[test]
fn a_titled_select_is_answered_by_number_and_lists_titles() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {"region": {"type": "string", "title": "Region", "oneOf": [
            {"const": "eu-west-1", "title": "Ireland (eu-west-1)"}, {"const": "us-east-1", "title": "Virginia"}]}},
            "required": ["region"]}),
        &["", "7", "2"],
    );
    assert_eq!(r.action, ElicitAction::Accept);
    assert_eq!(r.content_object()["region"], "us-east-1");
    assert!(shown.contains("1) Ireland (eu-west-1)\n"), "{shown}");
    assert!(shown.contains("2) Virginia (us-east-1)\n"), "{shown}");
    assert!(
        shown.contains("Region (required)\n  1) Ireland (eu-west-1)\n"),
        "{shown}"
    );
    assert!(shown.contains("Choose [1-2]: "), "{shown}");
    assert!(shown.contains(":decline") && shown.contains(":cancel"));
    assert!(shown.contains("choose one option"));
}

#[test]
fn defaults_are_shown_and_used_on_empty_input() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "ada"},
            "size": {"type": "string", "enum": ["s", "m"], "default": "m"},
            "ok": {"type": "boolean", "default": true},
            "n": {"type": "integer", "default": 3}}}),
        &["", "", "", ""],
    );
    assert_eq!(
        serde_json::Value::Object(r.content_object()),
        json!({"name": "ada", "size": "m", "ok": true, "n": 3})
    );
    assert!(shown.contains("[ada]") && shown.contains("default 2") && shown.contains("[Y/n]"));
}

#[test]
fn optional_fields_left_empty_are_omitted() {
    let (r, _) = run(
        json!({"type": "object", "properties": {"nick": {"type": "string"}}}),
        &[""],
    );
    assert_eq!(r.action, ElicitAction::Accept);
    assert!(r.content_object().is_empty());
}

#[test]
fn required_fields_are_enforced() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {"nick": {"type": "string"}}, "required": ["nick"]}),
        &["", "bo"],
    );
    assert_eq!(r.content_object()["nick"], "bo");
    assert!(shown.contains("an answer is required"));
}

#[test]
fn decline_and_cancel_work_at_any_prompt_and_eof_cancels() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"}}});
    assert_eq!(
        run(schema.clone(), &["x", ":decline"]).0,
        ElicitResult::decline()
    );
    assert_eq!(run(schema.clone(), &[":cancel"]).0, ElicitResult::cancel());
    assert_eq!(run(schema, &["x"]).0, ElicitResult::cancel());
}

#[test]
fn formats_are_checked() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {
            "mail": {"type": "string", "format": "email"},
            "at": {"type": "string", "format": "date-time"},
            "day": {"type": "string", "format": "date"},
            "site": {"type": "string", "format": "uri"}}}),
        &[
            "nope",
            "a@b.example",
            "tomorrow",
            "2026-12-24T19:30:00Z",
            "2026-02-30",
            "2028-02-29",
            "not a uri",
            "https://x.example/",
        ],
    );
    assert_eq!(
        serde_json::Value::Object(r.content_object()),
        json!({"mail": "a@b.example", "at": "2026-12-24T19:30:00Z", "day": "2028-02-29", "site": "https://x.example/"})
    );
    assert_eq!(shown.matches("  ! not a valid").count(), 3, "{shown}");
    assert!(
        shown.contains("\"tomorrow\" is not a date and time; e.g. 2026-12-24 19:30 (UTC)"),
        "{shown}"
    );
}

#[test]
fn date_times_are_read_forgivingly_and_sent_as_rfc_3339() {
    for (typed, sent) in [
        ("2026-12-24T19:30:00Z", "2026-12-24T19:30:00Z"),
        ("2026-12-24 19:30", "2026-12-24T19:30:00Z"),
        ("2026-12-24 19:30:15", "2026-12-24T19:30:15Z"),
        ("2026-12-24 19:30 UTC", "2026-12-24T19:30:00Z"),
        ("2026-12-24T19:30+01:00", "2026-12-24T19:30:00+01:00"),
        ("2026-12-24", "2026-12-24T00:00:00Z"),
    ] {
        assert_eq!(date_time(typed).unwrap(), sent, "{typed}");
    }
    for bad in [
        "tomorrow",
        "2026-02-30 10:00",
        "2026-12-24 25:00",
        "2026-12-24 1:2:3:4",
    ] {
        assert!(date_time(bad).is_err(), "{bad}");
    }
    let (r, _) = run(
        json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time", "title": "When"}}}),
        &["2026-12-24 19:30"],
    );
    assert_eq!(r.content_object()["at"], "2026-12-24T19:30:00Z");
}

#[test]
fn the_hint_is_shown_once_per_run_and_labels_once_per_field() {
    let schema = json!({"type": "object", "properties": {"at": {"type": "string", "format": "date-time", "title": "When"}}, "required": ["at"]});
    let mut s = Script::new(&["2026-12-24 19:30"]);
    fill(&mut s, "srv", &form(schema.clone()), false);
    assert!(!s.shown.contains(":decline"), "{}", s.shown);
    assert_eq!(s.shown.matches("When").count(), 1, "{}", s.shown);
    let (_, shown) = run(schema, &["2026-12-24 19:30"]);
    assert_eq!(shown.matches(":decline").count(), 1, "{shown}");
}

#[test]
fn the_summary_sends_changes_or_refuses() {
    let lines = vec!["region: region = eu-west-1".to_owned()];
    let mut s = Script::new(&[""]);
    assert!(matches!(review(&mut s, &lines), Summary::Send));
    assert!(
        s.shown.contains("1) region: region = eu-west-1"),
        "{}",
        s.shown
    );
    let mut s = Script::new(&["7", "1"]);
    assert!(matches!(review(&mut s, &lines), Summary::Change(0)));
    assert!(s.shown.contains("type a number from 1 to 1"), "{}", s.shown);
    let mut s = Script::new(&[":decline"]);
    assert!(matches!(review(&mut s, &lines), Summary::Refuse(r) if r == ElicitResult::decline()));
    let mut s = Script::new(&[]);
    assert!(matches!(review(&mut s, &lines), Summary::Refuse(r) if r == ElicitResult::cancel()));
}

#[test]
fn numbers_respect_kind_and_bounds() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "x": {"type": "number", "minimum": 0.5}}}),
        &["0", "2.5", "abc", "10", "0.1", "0.75"],
    );
    assert_eq!(
        serde_json::Value::Object(r.content_object()),
        json!({"n": 10, "x": 0.75})
    );
    assert!(shown.contains("whole number, 1 to 10"));
    assert!(shown.contains("at least 1, please"));
    assert!(shown.contains("is not a whole number"));
    assert!(shown.contains("at least 0.5, please"));
}

#[test]
fn required_fields_refuse_an_empty_answer_and_ask_again() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {
            "n": {"type": "number", "title": "Count"},
            "b": {"type": "boolean", "title": "Sure"},
            "m": {"type": "array", "title": "Tags", "items": {"type": "string", "enum": ["x", "y"]}}},
            "required": ["n", "b", "m"]}),
        &["", "2.5", "", "y", "", "2"],
    );
    assert_eq!(
        serde_json::Value::Object(r.content_object()),
        json!({"n": 2.5, "b": true, "m": ["y"]})
    );
    assert_eq!(
        shown.matches("  ! an answer is required\n").count(),
        1,
        "{shown}"
    );
    assert!(
        shown.contains("  ! an answer is required: y or n\n"),
        "{shown}"
    );
    assert!(shown.contains("  ! choose at least 1\n"), "{shown}");
    // The label is the prompt, repeated only when the answer was refused.
    assert_eq!(
        shown.matches("Count (required) (number): ").count(),
        2,
        "{shown}"
    );
    assert_eq!(shown.matches("Sure (required)").count(), 2, "{shown}");
}

#[test]
fn booleans_take_yes_and_no() {
    let (r, _) = run(
        json!({"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"type": "boolean"}}, "required": ["a", "b"]}),
        &["maybe", "YES", "", "n"],
    );
    assert_eq!(
        serde_json::Value::Object(r.content_object()),
        json!({"a": true, "b": false})
    );
}

#[test]
fn multi_selects_take_several_numbers_or_values_within_bounds() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {
            "t": {"type": "array", "title": "Toppings", "minItems": 1, "maxItems": 2,
                  "items": {"anyOf": [{"const": "ch", "title": "Cheese"}, {"const": "ol", "title": "Olives"}, {"const": "ba", "title": "Basil"}]}},
            "u": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}, "default": ["b"]}}}),
        &["1,2,3", "9", "1, ba", ""],
    );
    assert_eq!(
        serde_json::Value::Object(r.content_object()),
        json!({"t": ["ch", "ba"], "u": ["b"]})
    );
    assert!(shown.contains("3) Basil (ba)"));
    assert!(shown.contains("choose at most 2"));
    assert!(shown.contains("[2]"));
}

#[test]
fn legacy_enum_names_are_titles() {
    let (r, shown) = run(
        json!({"type": "object", "properties": {"c": {"type": "string", "enum": ["r", "g"], "enumNames": ["Red", "Green"]}}}),
        &["g"],
    );
    assert_eq!(r.content_object()["c"], "g");
    assert!(shown.contains("1) Red (r)"));
}
