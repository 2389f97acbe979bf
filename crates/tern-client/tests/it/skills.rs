//! The Skills extension on the client: listing and getting skills (entries
//! checked), files read and verified against their entry, folders read —
//! against a tern server, through a transport that can tamper with what it
//! answers, and records every request the server was sent.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tern_client::transport::{BoxFuture, Exchange, Incoming, Outgoing, Transport};
use tern_client::{Client, ClientError, ErrorKind};
use tern_protocol::jsonrpc::Message;
use tern_protocol::skill::{VerifyErrorKind, digest};
use tern_server::skill::SkillCatalog;
use tern_server::{CallContext, Server};
use tokio::sync::mpsc;

const SKILL_MD: &str = "---\nname: refunds\ndescription: Refund a payment\nmetadata:\n  team: billing\n---\n# Refunds\n\nUse [the note](templates/note.md).\n";
const NOTE: &str = "Dear customer,";
const MD_URI: &str = "skill://acme/refunds/SKILL.md";
const NOTE_URI: &str = "skill://acme/refunds/templates/note.md";

type Tamper = Arc<dyn Fn(&str, &Value, &mut Value) + Send + Sync>;

/// `Server::handle` in process; `tamper(method, params, result)` may
/// change a result before the client sees it; every request is recorded.
struct Tampering {
    server: Server,
    tamper: Tamper,
    sent: Arc<Mutex<Vec<(String, Value)>>>,
}

impl std::fmt::Debug for Tampering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tampering")
    }
}

impl Transport for Tampering {
    fn send(&self, out: Outgoing) -> BoxFuture<'_, Result<Exchange, ClientError>> {
        Box::pin(async move {
            let Ok(Message::Request(request)) = Message::from_slice(out.body.as_bytes()) else {
                panic!("not a request: {}", out.body);
            };
            let params: Value = request
                .params
                .as_deref()
                .map_or(Value::Null, |p| serde_json::from_str(p.get()).unwrap());
            self.sent
                .lock()
                .unwrap()
                .push((request.method.clone(), params.clone()));
            let reply = self.server.handle(&request, CallContext::default()).await;
            let incoming = match reply.outcome {
                Ok(raw) => {
                    let mut result: Value = serde_json::from_str(raw.get()).unwrap();
                    (self.tamper)(&request.method, &params, &mut result);
                    Incoming::Result(serde_json::value::to_raw_value(&result).unwrap())
                }
                Err(e) => Incoming::Error(e),
            };
            let (tx, rx) = mpsc::channel(1);
            tx.send(Ok(incoming)).await.unwrap();
            Ok(Exchange::new(rx, None))
        })
    }

    fn close(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

fn catalog() -> SkillCatalog {
    SkillCatalog::builder()
        .skill(
            "acme/refunds",
            [("SKILL.md", SKILL_MD), ("templates/note.md", NOTE)],
        )
        .skill(
            "git-workflow",
            [(
                "SKILL.md",
                "---\nname: git-workflow\ndescription: Use git\n---\n",
            )],
        )
        .build()
        .unwrap()
}

struct Setup {
    client: Client,
    sent: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Setup {
    fn methods(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .map(|(m, _)| m.clone())
            .collect()
    }

    fn reads(&self) -> Vec<String> {
        self.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, _)| m == "resources/read")
            .map(|(_, p)| p["uri"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn setup_with(
    server: Server,
    tamper: impl Fn(&str, &Value, &mut Value) + Send + Sync + 'static,
) -> Setup {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let client = Client::builder().build(Tampering {
        server,
        tamper: Arc::new(tamper),
        sent: Arc::clone(&sent),
    });
    Setup { client, sent }
}

fn setup(tamper: impl Fn(&str, &Value, &mut Value) + Send + Sync + 'static) -> Setup {
    setup_with(
        Server::builder("skills", "1")
            .skills(catalog())
            .page_size(1)
            .build()
            .unwrap(),
        tamper,
    )
}

fn untouched() -> Setup {
    setup(|_, _, _| {})
}

/// Replaces the text of a read of `uri`.
fn read_as(uri: &'static str, text: String) -> impl Fn(&str, &Value, &mut Value) + Send + Sync {
    move |m, p, r| {
        if m == "resources/read" && p["uri"] == uri {
            r["contents"][0]["text"] = json!(text);
        }
    }
}

fn verify_kind(e: &ClientError) -> Option<VerifyErrorKind> {
    assert_eq!(e.kind(), ErrorKind::Verification, "{e:#}");
    e.verify_error()
        .map(tern_protocol::skill::VerifyError::kind)
}

#[tokio::test]
async fn skills_are_listed_every_page_and_nothing_is_prefetched() {
    let s = untouched();
    let listing = s.client.skills().await.unwrap();
    let uris: Vec<&str> = listing.skills.iter().map(|k| k.uri.as_str()).collect();
    assert_eq!(uris, [MD_URI, "skill://git-workflow/SKILL.md"]);
    assert!(listing.invalid.is_empty());
    assert_eq!(
        s.methods(),
        ["server/discover", "skills/list", "skills/list"],
        "two pages of one; no file read"
    );
    let skill = s.client.skill(MD_URI).await.unwrap();
    assert_eq!(skill, listing.skills[0]);
    assert!(s.reads().is_empty(), "nothing prefetched");
}

#[tokio::test]
async fn files_read_verified_and_folders_listed() {
    let s = untouched();
    let skill = s.client.skill(MD_URI).await.unwrap();
    let md = s.client.read_skill_md(&skill).await.unwrap();
    assert_eq!(md.text.as_deref(), Some(SKILL_MD));
    assert!(md.verified);
    let note = s.client.read_skill_file(&skill, NOTE_URI).await.unwrap();
    assert_eq!(note.bytes, NOTE.as_bytes());
    let children = s
        .client
        .read_skill_directory("skill://acme/refunds")
        .await
        .unwrap();
    let names: Vec<(&str, Option<&str>)> = children
        .iter()
        .map(|c| (c.name.as_str(), c.mime_type.as_deref()))
        .collect();
    assert_eq!(
        names,
        [
            ("SKILL.md", Some("text/markdown")),
            ("templates", Some("inode/directory"))
        ]
    );
}

#[tokio::test]
async fn a_tampered_body_fails_the_digest() {
    let s = setup(read_as(MD_URI, SKILL_MD.replace("Refunds\n", "Evil!!!\n")));
    let skill = s.client.skill(MD_URI).await.unwrap();
    let e = s.client.read_skill_md(&skill).await.unwrap_err();
    assert_eq!(verify_kind(&e), Some(VerifyErrorKind::Digest));
    assert!(format!("{e:#}").contains("digest"), "{e:#}");
}

#[tokio::test]
async fn extra_bytes_fail_the_size() {
    let s = setup(read_as(NOTE_URI, format!("{NOTE} and more")));
    let skill = s.client.skill(MD_URI).await.unwrap();
    let e = s
        .client
        .read_skill_file(&skill, NOTE_URI)
        .await
        .unwrap_err();
    assert_eq!(verify_kind(&e), Some(VerifyErrorKind::Size));
}

#[tokio::test]
async fn a_changed_frontmatter_with_a_matching_digest_is_refused() {
    // The server's entry covers the tampered bytes (digest and size), but
    // the entry's frontmatter is the original one.
    let tampered = SKILL_MD.replace("Refund a payment", "Refund every payment");
    let (bytes, size) = (digest(tampered.as_bytes()), tampered.len());
    let text = tampered.clone();
    let s = setup(move |m, p, r| {
        let fix = |entry: &mut Value| {
            for f in entry["resources"].as_array_mut().into_iter().flatten() {
                if f["uri"] == MD_URI {
                    f["digest"] = json!(bytes);
                    f["size"] = json!(size);
                }
            }
        };
        match m {
            "skills/get" => fix(&mut r["skill"]),
            "skills/list" => r["skills"].as_array_mut().unwrap().iter_mut().for_each(fix),
            "resources/read" if p["uri"] == MD_URI => r["contents"][0]["text"] = json!(text),
            _ => {}
        }
    });
    let skill = s.client.skill(MD_URI).await.unwrap();
    let e = s.client.read_skill_md(&skill).await.unwrap_err();
    assert_eq!(verify_kind(&e), Some(VerifyErrorKind::Frontmatter));
    let differences = e.verify_error().unwrap().differences();
    assert_eq!(differences.len(), 1, "{differences:?}");
    assert!(
        differences[0].starts_with("description:"),
        "{differences:?}"
    );
}

#[tokio::test]
async fn an_unlisted_file_is_refused_before_anything_is_sent() {
    let s = untouched();
    let skill = s.client.skill(MD_URI).await.unwrap();
    let before = s.methods().len();
    for uri in [
        "skill://acme/refunds/templates/secret.md",
        "skill://git-workflow/SKILL.md",
        "skill://acme/refunds/../git-workflow/SKILL.md",
        "file:///etc/passwd",
    ] {
        let e = s.client.read_skill_file(&skill, uri).await.unwrap_err();
        assert_eq!(verify_kind(&e), Some(VerifyErrorKind::Unlisted), "{uri}");
    }
    assert_eq!(s.methods().len(), before, "nothing was sent");
}

#[tokio::test]
async fn invalid_entries_are_reported_and_the_others_kept() {
    let s = setup(|m, _, r| {
        if m == "skills/list" {
            let skills = r["skills"].as_array_mut().unwrap();
            if skills[0]["uri"] == MD_URI {
                // A broken digest, and an entry that is not one.
                skills[0]["resources"][0]["digest"] = json!("sha256:NOPE");
                skills.push(json!({"uri": "skill://x/SKILL.md", "frontmatter": {"name": "x"}}));
            }
        }
    });
    let listing = s.client.skills().await.unwrap();
    assert_eq!(listing.skills.len(), 1);
    assert_eq!(listing.skills[0].uri, "skill://git-workflow/SKILL.md");
    let reasons: Vec<(usize, &str, &str)> = listing
        .invalid
        .iter()
        .map(|e| (e.index, e.uri.as_deref().unwrap_or(""), e.reason.as_str()))
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_eq!((reasons[0].0, reasons[0].1), (0, MD_URI));
    assert!(reasons[0].2.contains("64 lowercase hex"), "{reasons:?}");
    assert_eq!((reasons[1].0, reasons[1].1), (1, "skill://x/SKILL.md"));
    assert!(reasons[1].2.contains("resources"), "{reasons:?}");
}

#[tokio::test]
async fn a_skills_get_answer_for_another_skill_is_refused() {
    let s = setup(|m, _, r| {
        if m == "skills/get" {
            r["skill"]["uri"] = json!("skill://git-workflow/SKILL.md");
        }
    });
    let e = s.client.skill(MD_URI).await.unwrap_err();
    assert!(e.is_protocol(), "{e:#}");
    let e = untouched()
        .client
        .skill("skill://nope/SKILL.md")
        .await
        .unwrap_err();
    assert_eq!(e.rpc_error().map(|e| e.code), Some(-32602), "{e:#}");
}

#[tokio::test]
async fn nothing_is_sent_to_a_server_without_the_extension() {
    let s = setup_with(
        Server::builder("plain", "1")
            .resource(tern_server::ResourceDef::new("demo://x", "x", || async {
                "x".to_owned()
            }))
            .build()
            .unwrap(),
        |_, _, _| {},
    );
    for e in [
        s.client.skills().await.unwrap_err(),
        s.client.skill(MD_URI).await.unwrap_err(),
        s.client
            .read_skill_directory("skill://acme")
            .await
            .unwrap_err(),
    ] {
        assert!(e.is_not_offered(), "{e:#}");
    }
    assert!(
        s.methods().iter().all(|m| m == "server/discover"),
        "{:?}",
        s.methods()
    );
}

#[tokio::test]
async fn directory_reads_need_directory_read() {
    let s = setup(|m, _, r| {
        if m == "server/discover" {
            r["capabilities"]["extensions"]["io.modelcontextprotocol/skills"] = json!({});
        }
    });
    let e = s
        .client
        .read_skill_directory("skill://acme/refunds")
        .await
        .unwrap_err();
    assert!(e.is_not_offered(), "{e:#}");
    assert!(!s.methods().contains(&"resources/directory/read".to_owned()));
    // skills/list still works with `{}`.
    assert_eq!(s.client.skills().await.unwrap().skills.len(), 2);
}
