//! The Skills extension in the demo and in `tern skills` / `tern skill`:
//! the demo's skill in process, the commands over stdio, and hand-written
//! HTTP servers for what the demo never does (a tampered file, names that
//! leave the folder, two skills of one name, no extension at all).

use serde_json::{Value, json};
use tern_protocol::skill::{Skill, digest};
use tern_server::testing::TestClient;

use crate::fake::{Fake, result};
use crate::served::{code, stderr, stdout, tern};

/// A fresh folder of this test's own.
fn folder(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tern-skills-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

const DEMO_MD: &str = include_str!("../../skills/tern/demo-tour/SKILL.md");

#[tokio::test]
async fn the_demo_serves_its_skill_as_the_extension_says() {
    let c = TestClient::new(tern::demo::server().unwrap());
    let d = c.send("server/discover", json!({})).await.result().unwrap();
    assert_eq!(
        d["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true})
    );
    assert!(
        d["instructions"]
            .as_str()
            .unwrap()
            .contains("skill://tern/demo-tour/SKILL.md")
    );
    let list = c.send("skills/list", json!({})).await.result().unwrap();
    let skill: Skill = serde_json::from_value(list["skills"][0].clone()).unwrap();
    skill.validate().unwrap();
    for file in skill.files().unwrap() {
        let r = c
            .send("resources/read", json!({"uri": file.uri}))
            .await
            .result()
            .unwrap();
        let text = r["contents"][0]["text"].as_str().unwrap();
        skill.verify(&file.uri, text.as_bytes()).unwrap();
    }
    // The demo's other resources are listed first, as before.
    let r = c.send("resources/list", json!({})).await.result().unwrap();
    assert_eq!(r["resources"][0]["uri"], "demo://greeting");
    assert!(
        r["resources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|r| r["uri"] == "skill://tern/demo-tour/SKILL.md" && r["name"] == "demo-tour")
    );
}

#[test]
fn tern_skills_lists_name_description_and_uri() {
    let o = tern(&["skills", "--demo"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "demo-tour  Walk a user through the tern demo server's tools, each of which asks a question before it answers.\n    skill://tern/demo-tour/SKILL.md\n"
    );
    let o = tern(&["skills", "--demo", "--json"]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["skills"][0]["frontmatter"]["name"], "demo-tour");
    assert_eq!(v["invalid"], json!([]));
}

#[test]
fn tern_skill_shows_skill_md_by_name_or_uri() {
    for name in ["demo-tour", "skill://tern/demo-tour/SKILL.md"] {
        let o = tern(&["skill", name, "--demo"]);
        assert_eq!(code(&o), 0, "{name}: {}", stderr(&o));
        assert_eq!(stdout(&o), DEMO_MD, "{name}");
    }
    let o = tern(&["skill", "demo-tuor", "--demo"]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("has no skill `demo-tuor` (did you mean `demo-tour`?)"),
        "{}",
        stderr(&o)
    );
    // An unknown URI is the server's -32602.
    let o = tern(&["skill", "skill://tern/nope/SKILL.md", "--demo"]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("-32602"), "{}", stderr(&o));
}

#[test]
fn tern_skill_save_writes_every_file_verified() {
    let dir = folder("save");
    let to = dir.join("demo-tour");
    let o = tern(&[
        "skill",
        "demo-tour",
        "--demo",
        "--save",
        &to.display().to_string(),
    ]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), "SKILL.md\nreferences/questions.md\n");
    assert_eq!(
        std::fs::read_to_string(to.join("SKILL.md")).unwrap(),
        DEMO_MD
    );
    assert!(to.join("references/questions.md").is_file());
    assert!(stderr(&o).contains("saved 2 files"), "{}", stderr(&o));
    // Nothing is overwritten.
    let o = tern(&[
        "skill",
        "demo-tour",
        "--demo",
        "--save",
        &to.display().to_string(),
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("writes new files only"),
        "{}",
        stderr(&o)
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(unix)]
#[test]
fn tern_skill_save_never_writes_through_a_symlink() {
    let dir = folder("symlink");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    // A folder on the way that is a link out of DIR.
    let to = dir.join("to");
    std::fs::create_dir_all(&to).unwrap();
    std::os::unix::fs::symlink(&outside, to.join("references")).unwrap();
    let o = tern(&[
        "skill",
        "demo-tour",
        "--demo",
        "--save",
        &to.display().to_string(),
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("is a symbolic link"), "{}", stderr(&o));
    assert!(
        std::fs::read_dir(&outside).unwrap().next().is_none(),
        "nothing written outside"
    );
    assert!(!to.join("SKILL.md").exists(), "nothing written at all");
    // A dangling link where a file goes.
    let to = dir.join("to2");
    std::fs::create_dir_all(&to).unwrap();
    std::os::unix::fs::symlink(outside.join("planted"), to.join("SKILL.md")).unwrap();
    let o = tern(&[
        "skill",
        "demo-tour",
        "--demo",
        "--save",
        &to.display().to_string(),
    ]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(
        !outside.join("planted").exists(),
        "the link was not followed"
    );
    let _ = std::fs::remove_dir_all(dir);
}

// ---- hand-written servers ---------------------------------------------

const MD: &str = "---\nname: refunds\ndescription: Refund a payment\n---\n# Refunds\n";

fn entry(uri: &str, files: &[(&str, &str)]) -> Value {
    let name = uri
        .trim_end_matches("/SKILL.md")
        .rsplit('/')
        .next()
        .unwrap();
    json!({
        "uri": uri,
        "frontmatter": {"name": name, "description": "Refund a payment"},
        "resources": files.iter().map(|(u, text)| json!({"uri": u, "digest": digest(text.as_bytes()), "size": text.len()})).collect::<Vec<_>>(),
    })
}

fn no_method(body: &Value) -> (u16, Value) {
    (
        200,
        json!({"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32601, "message": "no"}}),
    )
}

fn discover(body: &Value, skills: bool) -> (u16, Value) {
    let mut caps = json!({"resources": {}});
    if skills {
        caps["extensions"] = json!({"io.modelcontextprotocol/skills": {}});
    }
    result(
        body,
        json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": caps,
               "ttlMs": 0, "cacheScope": "private"}),
    )
}

fn read(body: &Value, text: &str) -> (u16, Value) {
    result(
        body,
        json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
               "contents": [{"uri": body["params"]["uri"], "mimeType": "text/markdown", "text": text}]}),
    )
}

fn list(body: &Value, skills: Value) -> (u16, Value) {
    result(
        body,
        json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private", "skills": skills}),
    )
}

/// Lists one skill whose SKILL.md it then serves changed.
#[allow(clippy::unnecessary_wraps, reason = "a Handler")]
fn tampering(_: &str, body: &Value) -> Option<(u16, Value)> {
    Some(match body["method"].as_str() {
        Some("server/discover") => discover(body, true),
        Some("skills/list") => list(
            body,
            json!([entry(
                "skill://acme/refunds/SKILL.md",
                &[("skill://acme/refunds/SKILL.md", MD)]
            )]),
        ),
        Some("resources/read") => read(body, &MD.replace("Refunds", "Evil!!!")),
        _ => no_method(body),
    })
}

/// Two skills named `refunds`, and one whose manifest holds a name that
/// decodes to a path separator.
#[allow(clippy::unnecessary_wraps, reason = "a Handler")]
fn twins(_: &str, body: &Value) -> Option<(u16, Value)> {
    const SLASHED: &str = "skill://c/sneaky/a%2F..%2F..%2Fescape.md";
    Some(match body["method"].as_str() {
        Some("server/discover") => discover(body, true),
        Some("skills/list") => list(
            body,
            json!([
                entry(
                    "skill://a/refunds/SKILL.md",
                    &[("skill://a/refunds/SKILL.md", MD)]
                ),
                entry(
                    "skill://b/refunds/SKILL.md",
                    &[("skill://b/refunds/SKILL.md", MD)]
                ),
                entry(
                    "skill://c/sneaky/SKILL.md",
                    &[("skill://c/sneaky/SKILL.md", MD), (SLASHED, "x")]
                ),
                entry(
                    "skill://d/dotted/SKILL.md",
                    &[
                        ("skill://d/dotted/SKILL.md", MD),
                        ("skill://d/dotted/../../escape.md", "x")
                    ]
                ),
            ]),
        ),
        Some("skills/get") if body["params"]["uri"] == "skill://b/refunds/SKILL.md" => result(
            body,
            json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                   "skill": entry("skill://b/refunds/SKILL.md", &[("skill://b/refunds/SKILL.md", MD)])}),
        ),
        Some("resources/read") if body["params"]["uri"] == SLASHED => read(body, "x"),
        Some("resources/read") => read(body, MD),
        _ => no_method(body),
    })
}

/// A 2026-07-28 server that does not declare the extension.
#[allow(clippy::unnecessary_wraps, reason = "a Handler")]
fn without_skills(_: &str, body: &Value) -> Option<(u16, Value)> {
    Some(match body["method"].as_str() {
        Some("server/discover") => discover(body, false),
        _ => no_method(body),
    })
}

fn url(fake: &Fake) -> String {
    format!("http://{}/mcp", fake.addr)
}

#[test]
fn a_tampered_skill_md_is_neither_shown_nor_saved() {
    let fake = Fake::start(tampering);
    let o = tern(&["skill", "refunds", "--url", &url(&fake)]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert_eq!(stdout(&o), "", "nothing of it shown");
    assert!(stderr(&o).contains("digest"), "{}", stderr(&o));
    let dir = folder("tampered");
    let o = tern(&[
        "skill",
        "refunds",
        "--url",
        &url(&fake),
        "--save",
        &dir.display().to_string(),
    ]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("nothing was written"), "{}", stderr(&o));
    assert!(!dir.exists(), "not even the folder");
}

#[test]
fn an_ambiguous_name_is_refused_with_the_uris_to_choose_from() {
    let fake = Fake::start(twins);
    let o = tern(&["skill", "refunds", "--url", &url(&fake)]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains("serves 2 skills named `refunds`"), "{err}");
    assert!(
        err.contains("skill://a/refunds/SKILL.md") && err.contains("skill://b/refunds/SKILL.md"),
        "{err}"
    );
    // By URI it is the one named.
    let o = tern(&["skill", "skill://b/refunds/SKILL.md", "--url", &url(&fake)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert_eq!(stdout(&o), MD);
}

#[test]
fn paths_that_would_leave_the_folder_are_refused() {
    let fake = Fake::start(twins);
    // `..` in the manifest: the entry breaks the extension's rules and is
    // refused when listed, so there is no such skill to save.
    let o = tern(&["skills", "--url", &url(&fake)]);
    assert_eq!(code(&o), 0, "{}", stderr(&o));
    assert!(
        stderr(&o).contains("skill://d/dotted/SKILL.md")
            && stderr(&o).contains("outside the skill's folder"),
        "{}",
        stderr(&o)
    );
    assert!(!stdout(&o).contains("dotted"), "{}", stdout(&o));
    // An escaped slash: listed (a URI segment may hold %2F), refused by
    // --save before anything is read or written.
    let dir = folder("sneaky");
    let o = tern(&[
        "skill",
        "sneaky",
        "--url",
        &url(&fake),
        "--save",
        &dir.display().to_string(),
    ]);
    assert_eq!(code(&o), 3, "{}", stderr(&o));
    assert!(stderr(&o).contains("not a plain name"), "{}", stderr(&o));
    assert!(!dir.exists(), "nothing written");
    assert!(!std::env::temp_dir().join("escape.md").exists());
}

#[test]
fn a_server_without_the_extension_says_so() {
    let fake = Fake::start(without_skills);
    let o = tern(&["skills", "--url", &url(&fake)]);
    assert_eq!(code(&o), 0, "as tern prompts for a server without prompts");
    assert_eq!(stdout(&o), "");
    assert!(stderr(&o).contains("offers no skills"), "{}", stderr(&o));
    let o = tern(&["skills", "--url", &url(&fake), "--json"]);
    assert_eq!(
        stdout(&o).trim(),
        r#"{
  "skills": []
}"#
    );
    let o = tern(&["skill", "refunds", "--url", &url(&fake)]);
    assert_eq!(code(&o), 2, "{}", stderr(&o));
    assert!(stderr(&o).contains("offers no skills"), "{}", stderr(&o));
}
