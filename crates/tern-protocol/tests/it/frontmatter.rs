//! The SKILL.md frontmatter corpus (`tests/fixtures/frontmatter/corpus.json`):
//! tricky YAML and the JSON the YAML 1.2 core schema gives it, or the error
//! tern gives. The expectations were derived from the YAML 1.2.2 core
//! schema (YAML 1.2.2, section 10.3.2) and cross-checked against npm `yaml@2` (the parser the
//! official conformance suite compares with) by `crosscheck.mjs` beside the
//! corpus; the cases where tern refuses what `yaml@2` reads are marked
//! there.

use serde_json::Value;
use tern_protocol::skill::frontmatter;

fn cases() -> Vec<Value> {
    let corpus: Value =
        serde_json::from_str(include_str!("../fixtures/frontmatter/corpus.json")).unwrap();
    corpus["cases"].as_array().unwrap().clone()
}

fn text_of(case: &Value) -> String {
    let eol = if case["crlf"] == true { "\r\n" } else { "\n" };
    let lines: Vec<&str> = case["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    let bom = if case["bom"] == true { "\u{feff}" } else { "" };
    format!("{bom}{}", lines.join(eol))
}

#[test]
fn every_case_reads_as_the_core_schema_says() {
    let cases = cases();
    assert!(cases.len() > 50, "the corpus is there");
    let mut failures = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().unwrap();
        let text = text_of(case);
        match (
            frontmatter::parse(&text),
            case.get("json"),
            case.get("error"),
        ) {
            (Ok(read), Some(Value::Object(want)), _) => {
                let differences = frontmatter::differences(want, &read);
                if !differences.is_empty() {
                    failures.push(format!("{name}: {differences:?}"));
                }
            }
            (Err(e), _, Some(Value::String(want))) => {
                if !e.to_string().contains(want.as_str()) {
                    failures.push(format!("{name}: the error is {e:?}, not one with {want:?}"));
                }
            }
            (Ok(read), _, _) => failures.push(format!("{name}: read {read:?}, expected an error")),
            (Err(e), _, _) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn numbers_keep_their_json_types() {
    let read = frontmatter::parse(
        "---\nname: n\ndescription: d\nint: 42\nexp: 1e3\nzero: -0\nbig: 9007199254740993\n---\n",
    )
    .unwrap();
    assert_eq!(serde_json::to_string(&read["int"]).unwrap(), "42");
    assert_eq!(serde_json::to_string(&read["exp"]).unwrap(), "1000.0");
    assert_eq!(serde_json::to_string(&read["zero"]).unwrap(), "-0.0");
    assert_eq!(
        serde_json::to_string(&read["big"]).unwrap(),
        "9007199254740993",
        "exact within 64 bits"
    );
}

#[test]
fn the_body_follows_the_closing_line() {
    let (yaml, body) =
        frontmatter::split("\u{feff}---\r\nname: a\r\n---  \r\n# Title\r\n").unwrap();
    assert_eq!(yaml, "name: a");
    assert_eq!(body, "# Title\r\n");
    let (yaml, body) = frontmatter::split("---\nname: a\n---").unwrap();
    assert_eq!((yaml, body), ("name: a", ""));
}

#[test]
fn errors_say_where() {
    let e = frontmatter::parse("---\nname: a\ndescription: b\nname: c\n---\n").unwrap_err();
    assert_eq!(e.line(), Some(3), "{e}");
    assert!(e.to_string().starts_with("frontmatter line 3:"), "{e}");
}

#[test]
fn numbers_compare_by_value_and_absent_is_not_null() {
    let a = serde_json::json!({"x": 1000, "y": [1.5, {"z": null}]});
    let b = serde_json::json!({"x": 1000.0, "y": [1.5, {"z": null}]});
    let (Value::Object(a), Value::Object(b)) = (a, b) else {
        unreachable!()
    };
    assert!(frontmatter::differences(&a, &b).is_empty());
    let c = serde_json::json!({"x": 1000, "y": [1.5, {}]});
    let Value::Object(c) = c else { unreachable!() };
    assert_eq!(
        frontmatter::differences(&a, &c),
        ["y[1].z: the entry has null, SKILL.md has nothing"]
    );
    let d = serde_json::json!({"x": "1000", "y": [1.5, {"z": null}], "w": true});
    let Value::Object(d) = d else { unreachable!() };
    assert_eq!(
        frontmatter::differences(&a, &d),
        [
            "w: the entry has nothing, SKILL.md has true",
            "x: the entry has 1000, SKILL.md has \"1000\""
        ]
    );
}
