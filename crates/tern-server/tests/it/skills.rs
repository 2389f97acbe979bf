//! The Skills extension on the server: a `SkillCatalog` built in code and
//! from a folder, served as the extension's specification says, on the
//! 2026-07-28 wire and on a 2025-11-25 session.

use std::collections::BTreeSet;

use base64::Engine as _;
use serde_json::{Value, json};
use tern_protocol::ClientCapabilities;
use tern_protocol::skill::{Skill, digest};
use tern_server::Server;
use tern_server::skill::SkillCatalog;
use tern_server::testing::TestClient;
use tern_server::transport::stdio::{StdioOptions, serve};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

const REFUNDS: &str = "---\nname: refunds\ndescription: Refund a payment\nmetadata:\n  team: billing\n  version: \"2\"\n---\n# Refunds\n\nSee [the note](templates/note.md).\n";
const PARTIAL: &str =
    "---\nname: partial\ndescription: Refund part of a payment\n---\n# Partial refunds\n";
const GIT: &str =
    "---\nname: git-workflow\ndescription: Branch, commit, review\nlicense: MIT\n---\nUse git.\n";
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

fn catalog() -> SkillCatalog {
    SkillCatalog::builder()
        .skill(
            "acme/refunds",
            [
                ("SKILL.md", REFUNDS.as_bytes()),
                ("templates/note.md", b"Dear customer,".as_slice()),
                ("templates/logo.png", PNG),
            ],
        )
        .skill("acme/refunds/partial", [("SKILL.md", PARTIAL)])
        .skill("git-workflow", [("SKILL.md", GIT)])
        .build()
        .unwrap()
}

fn server(page_size: usize) -> Server {
    Server::builder("skills", "1")
        .skills(catalog())
        .page_size(page_size)
        .build()
        .unwrap()
}

fn skill_of(value: &Value) -> Skill {
    serde_json::from_value(value.clone()).unwrap()
}

/// Every page of `method` (at most 20), `field`'s items.
async fn walk(client: &TestClient, method: &str, params: Value, field: &str) -> Vec<Vec<Value>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..20 {
        let mut p = params.clone();
        if let Some(c) = &cursor {
            p["cursor"] = json!(c);
        }
        let r = client.send(method, p).await.result().unwrap();
        assert_eq!(r["resultType"], "complete", "{method}");
        assert!(
            r["ttlMs"].is_u64() && r["cacheScope"].is_string(),
            "{method}: {r}"
        );
        pages.push(r[field].as_array().unwrap().clone());
        match r["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => return pages,
        }
    }
    panic!("{method} did not end");
}

#[tokio::test]
async fn the_extension_is_declared_with_directory_read_and_resources() {
    let client = TestClient::new(server(100));
    let d = client
        .send("server/discover", json!({}))
        .await
        .result()
        .unwrap();
    assert_eq!(
        d["capabilities"]["extensions"]["io.modelcontextprotocol/skills"],
        json!({"directoryRead": true}),
        "settings straight under the id"
    );
    assert!(d["capabilities"]["resources"].is_object());
    let bare = TestClient::new(Server::builder("plain", "1").build().unwrap());
    let d = bare
        .send("server/discover", json!({}))
        .await
        .result()
        .unwrap();
    assert!(d["capabilities"].get("extensions").is_none(), "{d}");
    for method in ["skills/list", "skills/get", "resources/directory/read"] {
        let e = bare
            .send(method, json!({"uri": "skill://a/SKILL.md"}))
            .await
            .result()
            .unwrap_err();
        assert_eq!(e.code, -32601, "{method} on a server without skills");
    }
}

#[tokio::test]
async fn skills_list_pages_whole_entries_and_each_validates() {
    let client = TestClient::new(server(1));
    let pages = walk(&client, "skills/list", json!({}), "skills").await;
    assert_eq!(pages.len(), 3, "one entry a page");
    let skills: Vec<Skill> = pages.iter().flatten().map(skill_of).collect();
    let uris: Vec<&str> = skills.iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "skill://acme/refunds/SKILL.md",
            "skill://acme/refunds/partial/SKILL.md",
            "skill://git-workflow/SKILL.md"
        ]
    );
    for skill in &skills {
        skill.validate().unwrap();
    }
    // The frontmatter verbatim, and the nested skill's files in the
    // enclosing manifest.
    assert_eq!(
        json!(skills[0].frontmatter),
        json!({"name": "refunds", "description": "Refund a payment",
               "metadata": {"team": "billing", "version": "2"}})
    );
    let files: BTreeSet<&str> = skills[0]
        .files()
        .unwrap()
        .iter()
        .map(|f| f.uri.as_str())
        .collect();
    assert_eq!(
        files,
        BTreeSet::from([
            "skill://acme/refunds/SKILL.md",
            "skill://acme/refunds/partial/SKILL.md",
            "skill://acme/refunds/templates/logo.png",
            "skill://acme/refunds/templates/note.md",
        ])
    );
    let md = skills[0].file("skill://acme/refunds/SKILL.md").unwrap();
    assert_eq!(
        (md.size, md.digest.as_str()),
        (REFUNDS.len() as u64, digest(REFUNDS.as_bytes()).as_str())
    );
    // A cursor that is not one of ours.
    let e = client
        .send("skills/list", json!({"cursor": "nope"}))
        .await
        .result()
        .unwrap_err();
    assert_eq!(e.code, -32602);
}

#[tokio::test]
async fn skills_get_answers_every_served_skill_and_32602_otherwise() {
    let client = TestClient::new(server(100));
    let r = client
        .send(
            "skills/get",
            json!({"uri": "skill://acme/refunds/partial/SKILL.md"}),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(r["resultType"], "complete");
    assert!(r.get("nextCursor").is_none());
    assert!(r["ttlMs"].is_u64() && r["cacheScope"].is_string());
    assert_eq!(skill_of(&r["skill"]).name(), Some("partial"));
    for unknown in [
        "skill://mcp-conformance-nonexistent-skill-9f3a2b/SKILL.md",
        "skill://acme/refunds",
        "skill://acme/refunds/templates/note.md",
    ] {
        let e = client
            .send("skills/get", json!({"uri": unknown}))
            .await
            .result()
            .unwrap_err();
        assert_eq!(e.code, -32602, "{unknown}");
    }
}

#[tokio::test]
async fn every_file_reads_back_as_its_manifest_says() {
    let client = TestClient::new(server(100));
    let list = client
        .send("skills/list", json!({}))
        .await
        .result()
        .unwrap();
    for entry in list["skills"].as_array().unwrap() {
        let skill = skill_of(entry);
        for file in skill.files().unwrap() {
            let r = client
                .send("resources/read", json!({"uri": file.uri}))
                .await
                .result()
                .unwrap();
            assert!(r["ttlMs"].is_u64() && r["cacheScope"].is_string());
            let content = &r["contents"][0];
            assert_eq!(content["uri"], json!(file.uri));
            let bytes = match (content["text"].as_str(), content["blob"].as_str()) {
                (Some(text), None) => text.as_bytes().to_vec(),
                (None, Some(blob)) => base64::engine::general_purpose::STANDARD
                    .decode(blob)
                    .unwrap(),
                _ => panic!("text or blob: {content}"),
            };
            skill.verify(&file.uri, &bytes).unwrap();
            if file.uri.ends_with("/SKILL.md") {
                assert_eq!(content["mimeType"], "text/markdown");
                assert!(content["text"].is_string(), "SKILL.md is text");
            }
            if file.uri == "skill://acme/refunds/templates/logo.png" {
                assert_eq!(content["mimeType"], "image/png");
                assert!(content["blob"].is_string(), "binary is a blob");
            }
        }
    }
    let e = client
        .send(
            "resources/read",
            json!({"uri": "skill://acme/refunds/templates/missing.md"}),
        )
        .await
        .result()
        .unwrap_err();
    assert_eq!(e.code, -32602);
}

#[tokio::test]
async fn each_skill_md_is_listed_with_its_frontmatter_name_and_description() {
    let client = TestClient::new(server(100));
    let r = client
        .send("resources/list", json!({}))
        .await
        .result()
        .unwrap();
    let listed: Vec<(&str, &str, &str, &str)> = r["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["uri"].as_str().unwrap(),
                r["name"].as_str().unwrap(),
                r["description"].as_str().unwrap(),
                r["mimeType"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (
                "skill://acme/refunds/SKILL.md",
                "refunds",
                "Refund a payment",
                "text/markdown"
            ),
            (
                "skill://acme/refunds/partial/SKILL.md",
                "partial",
                "Refund part of a payment",
                "text/markdown"
            ),
            (
                "skill://git-workflow/SKILL.md",
                "git-workflow",
                "Branch, commit, review",
                "text/markdown"
            ),
        ]
    );
}

#[tokio::test]
async fn directories_list_their_direct_children() {
    let client = TestClient::new(server(2));
    let pages = walk(
        &client,
        "resources/directory/read",
        json!({"uri": "skill://acme/refunds"}),
        "resources",
    )
    .await;
    assert_eq!(pages.len(), 2, "paged like the lists");
    let children: Vec<(String, String)> = pages
        .iter()
        .flatten()
        .map(|c| {
            (
                c["uri"].as_str().unwrap().to_owned(),
                c["mimeType"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        children,
        [
            (
                "skill://acme/refunds/SKILL.md".to_owned(),
                "text/markdown".to_owned()
            ),
            (
                "skill://acme/refunds/partial".to_owned(),
                "inode/directory".to_owned()
            ),
            (
                "skill://acme/refunds/templates".to_owned(),
                "inode/directory".to_owned()
            ),
        ]
    );
    let r = client
        .send(
            "resources/directory/read",
            json!({"uri": "skill://acme/refunds/templates"}),
        )
        .await
        .result()
        .unwrap();
    assert_eq!(r["resources"].as_array().unwrap().len(), 2);
    assert!(r["ttlMs"].is_u64() && r["cacheScope"].is_string(), "{r}");
    // The organisational prefix is a folder too.
    let r = client
        .send("resources/directory/read", json!({"uri": "skill://acme"}))
        .await
        .result()
        .unwrap();
    assert_eq!(r["resources"][0]["uri"], "skill://acme/refunds");
    for not_a_dir in [
        "skill://acme/refunds/SKILL.md",
        "skill://acme/refunds/templates/note.md",
        "skill://acme/refunds/",
        "skill://nowhere",
        "file:///etc",
    ] {
        let e = client
            .send("resources/directory/read", json!({"uri": not_a_dir}))
            .await
            .result()
            .unwrap_err();
        assert_eq!(e.code, -32602, "{not_a_dir}");
    }
}

#[tokio::test]
async fn skills_are_not_gated_on_the_clients_capabilities() {
    let client = TestClient::new(server(100)).with_capabilities(ClientCapabilities::default());
    for (method, params) in [
        ("skills/list", json!({})),
        (
            "skills/get",
            json!({"uri": "skill://git-workflow/SKILL.md"}),
        ),
        (
            "resources/directory/read",
            json!({"uri": "skill://git-workflow"}),
        ),
        (
            "resources/read",
            json!({"uri": "skill://git-workflow/SKILL.md"}),
        ),
    ] {
        client.send(method, params).await.result().unwrap();
    }
}

#[tokio::test]
async fn a_request_state_on_a_skill_file_is_refused_as_any_unknown_state() {
    let client = TestClient::new(server(100));
    let e = client
        .send(
            "resources/read",
            json!({"uri": "skill://git-workflow/SKILL.md", "requestState": "t1.x.y"}),
        )
        .await
        .result()
        .unwrap_err();
    assert_eq!(e.code, -32602);
    assert!(e.message.contains("requestState"), "{}", e.message);
}

#[test]
fn a_catalogue_built_in_code_fails_on_any_broken_rule() {
    let fails = |path: &str, files: Vec<(&str, &str)>, why: &str| {
        let e = SkillCatalog::builder()
            .skill(path, files)
            .build()
            .unwrap_err();
        assert!(e.to_string().contains(why), "{path}: {e}");
    };
    fails("refunds", vec![("notes.md", "x")], "has no SKILL.md");
    fails(
        "refunds",
        vec![("SKILL.md", "---\nname: other\ndescription: d\n---\n")],
        "not the skill's folder name",
    );
    fails(
        "Refunds",
        vec![("SKILL.md", "---\nname: Refunds\ndescription: d\n---\n")],
        "not 1-64 characters",
    );
    fails(
        "refunds",
        vec![("SKILL.md", "---\nname: refunds\n---\n")],
        "description",
    );
    fails(
        "refunds",
        vec![("SKILL.md", "no frontmatter")],
        "does not begin with a ---",
    );
    fails(
        "refunds",
        vec![(
            "SKILL.md",
            "---\nname: refunds\ndescription: d\nname: again\n---\n",
        )],
        "repeated",
    );
    fails(
        "a/../refunds",
        vec![("SKILL.md", "x")],
        "no empty, . or .. segment",
    );
    fails(
        "refunds",
        vec![("SKILL.md", "x"), ("../escape", "y")],
        "no empty, . or ..",
    );
    let e = SkillCatalog::builder()
        .skill("a/refunds", [("SKILL.md", REFUNDS)])
        .skill("a/refunds", [("SKILL.md", REFUNDS)])
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("given twice"), "{e}");
    let many: Vec<(String, &str)> = std::iter::once(("SKILL.md".to_owned(), GIT))
        .chain((0..512).map(|i| (format!("f{i}"), "")))
        .collect();
    let e = SkillCatalog::builder()
        .skill("git-workflow", many)
        .build()
        .unwrap_err();
    assert!(e.to_string().contains("over the limit of 512"), "{e}");
}

/// A folder tree for `from_dir`, removed on drop.
struct Tree(std::path::PathBuf);

impl Tree {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("tern-skills-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    fn file(&self, path: &str, bytes: impl AsRef<[u8]>) -> &Self {
        let path = self.0.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
        self
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn a_folder_of_skills_is_read_and_the_bad_ones_skipped_with_a_warning() {
    let tree = Tree::new("dir");
    tree.file("acme/refunds/SKILL.md", REFUNDS)
        .file("acme/refunds/templates/note.md", "Dear customer,")
        .file("acme/refunds/.hidden", "never served")
        .file("acme/refunds/partial/SKILL.md", PARTIAL)
        .file("git-workflow/SKILL.md", GIT)
        .file("git-workflow/.git/config", "[core]")
        .file("broken/SKILL.md", "---\nname: broken\n---\n")
        .file(
            "misnamed/SKILL.md",
            "---\nname: other\ndescription: d\n---\n",
        )
        .file("notes.md", "outside every skill")
        .file(
            "nested-meta/SKILL.md",
            "---\nname: nested-meta\ndescription: d\nmetadata:\n  deep: {a: 1}\n---\n",
        );
    let big = vec![b'x'; 9 * 1024 * 1024];
    tree.file(
        "huge/SKILL.md",
        "---\nname: huge\ndescription: too big\n---\n",
    )
    .file("huge/a.bin", &big)
    .file("huge/b.bin", &big);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink("/etc/passwd", tree.0.join("git-workflow/passwd")).unwrap();
        std::os::unix::fs::symlink(tree.0.join("acme"), tree.0.join("git-workflow/loop")).unwrap();
    }
    let catalog = SkillCatalog::from_dir(&tree.0).unwrap();
    let uris: Vec<&str> = catalog.skills().iter().map(|s| s.uri.as_str()).collect();
    assert_eq!(
        uris,
        [
            "skill://acme/refunds/SKILL.md",
            "skill://acme/refunds/partial/SKILL.md",
            "skill://git-workflow/SKILL.md",
            "skill://nested-meta/SKILL.md"
        ]
    );
    let served: BTreeSet<&str> = catalog
        .skills()
        .iter()
        .flat_map(|s| s.files().unwrap())
        .map(|f| f.uri.as_str())
        .collect();
    assert!(
        !served
            .iter()
            .any(|u| u.contains("hidden") || u.contains(".git"))
    );
    assert!(
        !served
            .iter()
            .any(|u| u.contains("passwd") || u.contains("loop"))
    );
    assert!(catalog.file("skill://notes.md").is_none());
    let warnings: Vec<String> = catalog.warnings().iter().map(ToString::to_string).collect();
    let warned = |what: &str, why: &str| {
        assert!(
            warnings.iter().any(|w| w.contains(what) && w.contains(why)),
            "{what}: {why} in {warnings:#?}"
        );
    };
    warned("broken", "no non-empty string description");
    warned("misnamed", "not the skill's folder name");
    warned("huge", "over the limit");
    // Served, with a warning: hosts may refuse it.
    warned("nested-meta", "metadata does not map strings to strings");
    assert!(catalog.skill("skill://nested-meta/SKILL.md").is_some());
    #[cfg(unix)]
    warned("passwd", "symbolic link");
    // An unreadable root is the one error.
    let e = SkillCatalog::from_dir(tree.0.join("nowhere")).unwrap_err();
    assert!(e.is_io(), "{e}");
}

/// The skills server over stdio with one `subscriptions/listen` of
/// `filter` open: the server's handle, its output lines after the
/// acknowledgement, the acknowledgement, and its input (held by the test:
/// a closed input ends the session).
async fn listening(
    filter: Value,
) -> (
    Server,
    tokio::io::Lines<BufReader<tokio::io::DuplexStream>>,
    Value,
    tokio::io::DuplexStream,
) {
    let server = server(100);
    let (mut input, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, output) = tokio::io::duplex(1 << 16);
    let handle = server.clone();
    tokio::spawn(serve(
        server,
        server_in,
        server_out,
        StdioOptions::default(),
    ));
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let listen = json!({"jsonrpc": "2.0", "id": "l", "method": "subscriptions/listen",
        "params": {"notifications": filter, "_meta": meta}});
    input
        .write_all(format!("{listen}\n").as_bytes())
        .await
        .unwrap();
    let mut lines = BufReader::new(output).lines();
    let ack: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    (handle, lines, ack, input)
}

#[tokio::test]
async fn replacing_the_catalogue_announces_resources_list_changed() {
    let (handle, mut lines, ack, _input) = listening(json!({"resourcesListChanged": true})).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    // The same listing: nothing to announce.
    assert!(!handle.replace_skills(catalog()));
    let smaller = SkillCatalog::builder()
        .skill("git-workflow", [("SKILL.md", GIT)])
        .build()
        .unwrap();
    assert!(handle.replace_skills(smaller));
    let n: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(n["method"], "notifications/resources/list_changed");
    let client = TestClient::new(handle);
    let r = client
        .send("skills/list", json!({}))
        .await
        .result()
        .unwrap();
    assert_eq!(r["skills"].as_array().unwrap().len(), 1);
    let e = client
        .send(
            "resources/read",
            json!({"uri": "skill://acme/refunds/SKILL.md"}),
        )
        .await
        .result()
        .unwrap_err();
    assert_eq!(e.code, -32602, "the old catalogue's files are gone");
}

#[tokio::test]
async fn a_listen_may_follow_a_skill_file_and_hears_it_change() {
    let uri = "skill://git-workflow/SKILL.md";
    let (handle, mut lines, ack, _input) = listening(json!({"resourceSubscriptions": [uri]})).await;
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"]["resourceSubscriptions"],
        json!([uri])
    );
    // The same files: no update; a changed SKILL.md: its update.
    handle.replace_skills(catalog());
    let changed = format!("{GIT}\nOne more line.\n");
    let next = SkillCatalog::builder()
        .skill("git-workflow", [("SKILL.md", changed.as_str())])
        .build()
        .unwrap();
    handle.replace_skills(next);
    let line = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
        .await
        .expect("the update comes within 10 s");
    let n: Value = serde_json::from_str(&line.unwrap().unwrap()).unwrap();
    assert_eq!(n["method"], "notifications/resources/updated", "{n}");
    assert_eq!(n["params"]["uri"], uri);
}

#[tokio::test]
async fn a_2025_session_gets_the_declaration_and_the_methods_without_cache_fields() {
    let server = server(100);
    let (mut input, server_in) = tokio::io::duplex(1 << 16);
    let (server_out, output) = tokio::io::duplex(1 << 16);
    tokio::spawn(serve(
        server,
        server_in,
        server_out,
        StdioOptions::default(),
    ));
    let mut lines = BufReader::new(output).lines();
    let mut exchange = async |message: Value| -> Value {
        input
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
        if message.get("id").is_none() {
            return Value::Null;
        }
        serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap()
    };
    let init = exchange(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "old", "version": "1"}}}),
    )
    .await;
    assert_eq!(
        init["result"]["capabilities"]["extensions"],
        json!({"io.modelcontextprotocol/skills": {"directoryRead": true}})
    );
    exchange(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    let list = exchange(json!({"jsonrpc": "2.0", "id": 1, "method": "skills/list"})).await;
    let result = &list["result"];
    assert_eq!(result["skills"].as_array().unwrap().len(), 3, "{list}");
    for modern in ["resultType", "ttlMs", "cacheScope"] {
        assert!(result.get(modern).is_none(), "{modern} on a 2025 session");
    }
    let get = exchange(json!({"jsonrpc": "2.0", "id": 2, "method": "skills/get",
        "params": {"uri": "skill://git-workflow/SKILL.md"}}))
    .await;
    skill_of(&get["result"]["skill"]).validate().unwrap();
    let dir = exchange(
        json!({"jsonrpc": "2.0", "id": 3, "method": "resources/directory/read",
        "params": {"uri": "skill://acme/refunds"}}),
    )
    .await;
    assert_eq!(dir["result"]["resources"].as_array().unwrap().len(), 3);
    let unknown = exchange(json!({"jsonrpc": "2.0", "id": 4, "method": "skills/get",
        "params": {"uri": "skill://nope/SKILL.md"}}))
    .await;
    assert_eq!(unknown["error"]["code"], -32602);
    let read = exchange(
        json!({"jsonrpc": "2.0", "id": 5, "method": "resources/read",
        "params": {"uri": "skill://git-workflow/SKILL.md"}}),
    )
    .await;
    assert_eq!(read["result"]["contents"][0]["text"], GIT);
}
