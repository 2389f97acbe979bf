//! `tern audit` as a process: every check passes against the demo over HTTP
//! and stdio, and each check fails against a server with the fault it looks
//! for. The faulty servers are the real demo (or a tern-server of the
//! test's own) behind a tower service that breaks one rule: it drops the
//! requestState, trusts the headers, decodes duplicate keys last-wins,
//! widens the capabilities, refuses a retry without every answer, takes any
//! answer, or answers `input_required` on a list.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tern_server::transport::accept::{ServeOptions, serve_service};
use tern_server::transport::http::{Http, McpService};
use tern_server::{Answer, Args, Ctx, Elicit, Server, ToolDef, ToolError};

#[path = "../../../tern-protocol/tests/it/rules_page.rs"]
mod rules_page;

/// Runs `tern audit ARGS --json`; its exit status and the checks by id.
/// Every check's rule column must name ids that `docs/rules.md` defines.
async fn audit(args: &[&str]) -> (i32, BTreeMap<String, (String, String)>) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("audit")
        .arg("--json")
        .args(args)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), out)
        .await
        .expect("the audit ends")
        .unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| {
        panic!(
            "a JSON report; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let defined = rules_page::defined_rules(&rules_page::repository(env!("CARGO_MANIFEST_DIR")));
    for c in report["checks"].as_array().unwrap() {
        let rule = c["rule"].as_str().unwrap();
        assert!(!rule.is_empty(), "{c}");
        for id in rule.split(' ') {
            assert!(
                defined.iter().any(|d| d == id),
                "check {} cites rule {id:?}, which docs/rules.md does not define",
                c["id"]
            );
        }
    }
    let checks = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_string(),
                (
                    c["status"].as_str().unwrap().to_string(),
                    c["detail"].as_str().unwrap().to_string(),
                ),
            )
        })
        .collect();
    (out.status.code().unwrap_or(-1), checks)
}

fn failed(checks: &BTreeMap<String, (String, String)>) -> Vec<&str> {
    checks
        .iter()
        .filter(|(_, (s, _))| s == "fail")
        .map(|(id, _)| id.as_str())
        .collect()
}

/// What the faulty front does wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Nothing: the front only forwards.
    None,
    /// Drops every incoming requestState (so forged ones are "served").
    IgnoreState,
    /// Sets every Mcp-* and version header from the body.
    TrustHeaders,
    /// Decodes the body last-wins and forwards it re-encoded, `Mcp-Name`
    /// set to what it serves.
    LastWins,
    /// The same, the headers left as sent: the server's own header check
    /// then compares `Mcp-Name` with the last copy.
    LastWinsOwnHeaders,
    /// Declares every capability whatever the client said.
    WidenCapabilities,
    /// Refuses (-32602) a retry that does not answer every question.
    RefuseIncomplete,
    /// Takes any answer: an accepted form becomes the first region.
    TakeAnyAnswer,
    /// Answers `input_required` to a list that carries a `requestState`.
    InputRequiredOnLists,
}

#[derive(Clone)]
struct Front {
    inner: McpService,
    fault: Fault,
}

fn json_response(status: u16, body: &Value) -> Response<Body> {
    let mut r = Response::new(Body::from(body.to_string()));
    *r.status_mut() = axum::http::StatusCode::from_u16(status).unwrap();
    r.headers_mut()
        .insert("content-type", HeaderValue::from_static("application/json"));
    r
}

impl Front {
    async fn handle(mut self, request: Request<Body>) -> Response<Body> {
        let (mut parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, 8 << 20)
            .await
            .unwrap_or_default();
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        // A body with a doubled key is shorter once decoded and re-encoded:
        // only the last-wins fault changes such a body.
        let doubled = parsed
            .as_ref()
            .is_some_and(|v| v.to_string().len() != bytes.len());
        let mut bytes = bytes.to_vec();
        let last_wins = matches!(self.fault, Fault::LastWins | Fault::LastWinsOwnHeaders);
        if let Some(mut v) = parsed.filter(|_| !doubled || last_wins) {
            let method = v["method"].as_str().unwrap_or("").to_string();
            let params = &mut v["params"];
            let mrtr = matches!(
                method.as_str(),
                "tools/call" | "prompts/get" | "resources/read"
            );
            let changed = match self.fault {
                Fault::IgnoreState if mrtr => params
                    .as_object_mut()
                    .and_then(|p| p.remove("requestState"))
                    .is_some(),
                Fault::WidenCapabilities => {
                    params["_meta"]["io.modelcontextprotocol/clientCapabilities"] = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}});
                    true
                }
                Fault::LastWins | Fault::LastWinsOwnHeaders => doubled,
                Fault::TakeAnyAnswer => {
                    if let Some(r) = params
                        .get_mut("inputResponses")
                        .and_then(Value::as_object_mut)
                    {
                        for answer in r.values_mut() {
                            *answer = json!({"action": "accept", "content": {"region": "eu-west-1", "confirm": true}});
                        }
                    }
                    true
                }
                Fault::RefuseIncomplete
                    if mrtr
                        && params.get("requestState").is_some()
                        && !params["inputResponses"].as_object().is_some_and(|r| {
                            r.contains_key("region") || r.contains_key("confirm")
                        }) =>
                {
                    return json_response(
                        200,
                        &json!({"jsonrpc": "2.0", "id": v["id"], "error": {"code": -32602, "message": "missing answers"}}),
                    );
                }
                Fault::InputRequiredOnLists
                    if method.ends_with("/list") && params.get("requestState").is_some() =>
                {
                    return json_response(
                        200,
                        &json!({"jsonrpc": "2.0", "id": v["id"], "result": {"resultType": "input_required", "requestState": "again"}}),
                    );
                }
                Fault::TrustHeaders => {
                    let h = &mut parts.headers;
                    h.remove("mcp-name");
                    if let Some(name) = params
                        .get("name")
                        .or_else(|| params.get("uri"))
                        .and_then(Value::as_str)
                    {
                        h.insert("mcp-name", HeaderValue::from_str(name).unwrap());
                    }
                    h.insert("mcp-method", HeaderValue::from_str(&method).unwrap());
                    h.insert(
                        "mcp-protocol-version",
                        HeaderValue::from_static("2026-07-28"),
                    );
                    false
                }
                _ => false,
            };
            if changed {
                if self.fault == Fault::LastWins {
                    // serde_json keeps the last of a duplicated key; the
                    // header then matches what is served.
                    if let Some(name) = v["params"]["name"].as_str() {
                        parts
                            .headers
                            .insert("mcp-name", HeaderValue::from_str(name).unwrap());
                    }
                }
                bytes = v.to_string().into_bytes();
                parts
                    .headers
                    .insert("content-length", HeaderValue::from(bytes.len()));
            }
        }
        let request = Request::from_parts(parts, Body::from(bytes));
        tower::Service::call(&mut self.inner, request)
            .await
            .unwrap_or_else(|e| match e {})
    }
}

impl tower::Service<Request<Body>> for Front {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future =
        std::pin::Pin<Box<dyn Future<Output = Result<Response<Body>, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let front = self.clone();
        Box::pin(async move { Ok(front.handle(request).await) })
    }
}

/// Serves `server` behind a front with `fault` on a loopback port; its URL.
async fn serve(server: Server, fault: Fault) -> (String, tokio::sync::oneshot::Sender<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let front = Front {
        inner: Http::new(server).into_service(),
        fault,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(serve_service(
        listener,
        front,
        ServeOptions::default(),
        async move {
            let _ = stopped.await;
        },
    ));
    (url, stop)
}

async fn demo_behind(fault: Fault, extra: &[&str]) -> (i32, BTreeMap<String, (String, String)>) {
    let (url, _stop) = serve(tern::demo::server().unwrap(), fault).await;
    let mut args = vec![
        "--url",
        &url,
        "--tool",
        "provision_database",
        "--other-tool",
        "book_table",
    ];
    args.extend_from_slice(extra);
    audit(&args).await
}

#[tokio::test(flavor = "multi_thread")]
async fn every_check_passes_against_the_demo_over_stdio() {
    let tern = env!("CARGO_BIN_EXE_tern");
    // transfer_funds is single use (and idempotent): its replay answers the
    // stored outcome, which --single-use lets count.
    let (code, checks) = audit(&[
        "--allow-effects",
        "--tool",
        "transfer_funds",
        "--single-use",
        "--",
        tern,
        "serve",
        "demo",
        "--stdio",
    ])
    .await;
    assert_eq!(failed(&checks), Vec::<&str>::new());
    assert_eq!(code, 0);
    for id in [
        "state-tampered",
        "state-cross-tool",
        "state-replayed",
        "answer-missing",
        "capability-none",
        "duplicate-key-name",
    ] {
        assert_eq!(checks[id].0, "pass", "{id}: {}", checks[id].1);
    }
    assert_eq!(
        checks["header-name-mismatch"].0, "n/a",
        "header checks are HTTP only"
    );
    assert_eq!(
        checks["legacy-duplicate-key-name"].0, "n/a",
        "the legacy session probe is HTTP only"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn every_check_passes_against_the_demo_over_http() {
    let (code, checks) = demo_behind(Fault::None, &["--allow-effects"]).await;
    assert_eq!(failed(&checks), Vec::<&str>::new());
    assert_eq!(code, 0);
    let applicable = checks.values().filter(|(s, _)| s == "pass").count();
    assert_eq!(
        applicable, 21,
        "all but the three --aggressive probes and the replay ran: {checks:?}"
    );
    // provision_database is not single use and answers the same when run
    // again: the replay is inconclusive, not a pass.
    assert_eq!(checks["state-replayed"].0, "n/a", "{checks:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_allow_effects_the_replay_is_not_tried_and_nothing_completes() {
    let (code, checks) = demo_behind(Fault::None, &[]).await;
    assert_eq!(code, 0);
    assert_eq!(checks["state-replayed"].0, "n/a");
    // A tool with a counted effect: the whole audit never runs it.
    let counter = Arc::new(AtomicU64::new(0));
    let (url, _stop) = serve(ticket_server(Arc::clone(&counter), false), Fault::None).await;
    let (code, checks) = audit(&["--url", &url, "--tool", "issue_ticket"]).await;
    assert_eq!(code, 0, "{checks:?}");
    assert_eq!(counter.load(Ordering::SeqCst), 0, "no final leg ran");
    // Even forged states that a faulty server takes carry no answers.
    let counter = Arc::new(AtomicU64::new(0));
    let (url, _stop) = serve(
        ticket_server(Arc::clone(&counter), false),
        Fault::IgnoreState,
    )
    .await;
    let (code, _) = audit(&["--url", &url, "--tool", "issue_ticket"]).await;
    assert_eq!(code, 1);
    assert_eq!(counter.load(Ordering::SeqCst), 0, "no final leg ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn without_allow_effects_no_tool_is_chosen_by_calling_it() {
    // The first tool listed asks nothing: calling its first leg to see
    // whether it asks would run it. Without --tool the audit refuses to
    // choose, and nothing runs.
    let counter = Arc::new(AtomicU64::new(0));
    let stamps = Arc::clone(&counter);
    let stamp = ToolDef::new("stamp", "Stamps at once", move || {
        let stamps = Arc::clone(&stamps);
        async move { format!("stamp #{}", stamps.fetch_add(1, Ordering::SeqCst) + 1) }
    });
    let server = Server::builder("stamps", "1").tool(stamp).build().unwrap();
    let (url, _stop) = serve(server, Fault::None).await;
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["audit", "--url", &url])
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(60), out)
        .await
        .expect("the audit ends")
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("--tool") && stderr.contains("stamp"),
        "{stderr}"
    );
    assert_eq!(counter.load(Ordering::SeqCst), 0, "no tool ran");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_ignores_request_state_fails_the_state_checks() {
    let (code, checks) = demo_behind(Fault::IgnoreState, &[]).await;
    assert_eq!(code, 1);
    let f = failed(&checks);
    for id in [
        "state-tampered",
        "state-truncated",
        "state-extended",
        "state-cross-tool",
        "state-cross-argument",
        "state-cross-resource",
    ] {
        assert!(f.contains(&id), "{id} detects the fault: {checks:?}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_trusts_headers_fails_the_header_checks() {
    let (code, checks) = demo_behind(Fault::TrustHeaders, &[]).await;
    assert_eq!(code, 1);
    let f = failed(&checks);
    for id in [
        "header-name-mismatch",
        "header-name-missing",
        "header-method-mismatch",
        "header-version-mismatch",
        "header-name-repeated",
    ] {
        assert!(f.contains(&id), "{id} detects the fault: {checks:?}");
    }
    assert_eq!(
        checks["state-tampered"].0, "pass",
        "only the headers are broken"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_last_wins_decoder_fails_the_duplicate_key_checks() {
    let (code, checks) = demo_behind(Fault::LastWins, &[]).await;
    assert_eq!(code, 1);
    // The same proxy in front of a 2025-11-25 session serves the last copy.
    assert_eq!(
        failed(&checks),
        vec![
            "duplicate-key-argument",
            "duplicate-key-name",
            "legacy-duplicate-key-name"
        ]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_last_wins_decoder_checking_its_own_headers_fails_the_duplicate_name_check() {
    // Its -32020 for one order of the doubled "name" is no defence: in the
    // other order it serves the copy Mcp-Name names.
    let (code, checks) = demo_behind(Fault::LastWinsOwnHeaders, &[]).await;
    assert_eq!(code, 1);
    assert_eq!(
        failed(&checks),
        vec![
            "duplicate-key-argument",
            "duplicate-key-name",
            "legacy-duplicate-key-name"
        ],
        "{checks:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_asks_what_was_not_declared_fails_capability_gating() {
    let (code, checks) = demo_behind(Fault::WidenCapabilities, &[]).await;
    assert_eq!(code, 1);
    assert_eq!(
        failed(&checks),
        vec!["capability-none", "capability-other-kind"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_refuses_an_incomplete_retry_fails_the_reask_checks() {
    let (code, checks) = demo_behind(Fault::RefuseIncomplete, &[]).await;
    assert_eq!(code, 1);
    let f = failed(&checks);
    assert!(
        f.contains(&"answer-missing") && f.contains(&"answer-unasked-key"),
        "{checks:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_that_takes_any_answer_fails_the_answer_checks() {
    let (code, checks) = demo_behind(Fault::TakeAnyAnswer, &[]).await;
    assert_eq!(code, 1);
    let f = failed(&checks);
    assert!(
        f.contains(&"answer-wrong-shape") && f.contains(&"answer-changed-question"),
        "{checks:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn input_required_on_a_list_fails_input_required_elsewhere() {
    let (code, checks) = demo_behind(Fault::InputRequiredOnLists, &[]).await;
    assert_eq!(code, 1);
    assert_eq!(failed(&checks), vec!["input-required-elsewhere"]);
}

#[derive(Deserialize, JsonSchema)]
struct Confirm {
    /// Confirm
    confirm: bool,
}

#[derive(Deserialize, JsonSchema)]
struct Ticket {
    /// Who for.
    who: String,
}

fn ticket_server(counter: Arc<AtomicU64>, single_use: bool) -> Server {
    let tool = ToolDef::new(
        "issue_ticket",
        "Issues a numbered ticket after a confirmation",
        move |ctx: Ctx, Args(t): Args<Ticket>| {
            let counter = Arc::clone(&counter);
            async move {
                let Answer::Accept(Confirm { confirm: true }) = ctx
                    .ask(Elicit::<Confirm>::form("Issue it?").key("confirm"))
                    .await?
                else {
                    return Ok::<_, ToolError>("not issued".to_string());
                };
                Ok(format!(
                    "ticket #{} for {}",
                    counter.fetch_add(1, Ordering::SeqCst) + 1,
                    t.who
                ))
            }
        },
    )
    .elicits::<Confirm>();
    let tool = if single_use { tool.single_use() } else { tool };
    Server::builder("tickets", "1").tool(tool).build().unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replayable_effect_fails_the_replay_check_and_single_use_passes_it() {
    let counter = Arc::new(AtomicU64::new(0));
    let (url, _stop) = serve(ticket_server(Arc::clone(&counter), false), Fault::None).await;
    let (code, checks) = audit(&["--url", &url, "--allow-effects"]).await;
    assert_eq!(code, 1);
    assert_eq!(failed(&checks), vec!["state-replayed"], "{checks:?}");
    assert_eq!(
        counter.load(Ordering::SeqCst),
        2,
        "the replay ran the effect again"
    );

    // A tool that answers the same each time it runs: its re-run cannot
    // be told from a stored outcome, so the check is inconclusive, unless
    // the tool is declared single use.
    let runs = Arc::new(AtomicU64::new(0));
    let tally = Arc::clone(&runs);
    let same = ToolDef::new("confirm", "Confirms", move |ctx: Ctx| {
        let tally = Arc::clone(&tally);
        async move {
            ctx.ask(Elicit::<Confirm>::form("Sure?").key("confirm"))
                .await?;
            tally.fetch_add(1, Ordering::SeqCst);
            Ok::<_, ToolError>("confirmed".to_string())
        }
    })
    .elicits::<Confirm>();
    let server = Server::builder("same", "1").tool(same).build().unwrap();
    let (url, _stop) = serve(server, Fault::None).await;
    let (_, checks) = audit(&["--url", &url, "--allow-effects"]).await;
    assert_eq!(checks["state-replayed"].0, "n/a", "{checks:?}");
    assert!(
        checks["state-replayed"].1.contains("inconclusive"),
        "{checks:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 2, "it ran again");

    let counter = Arc::new(AtomicU64::new(0));
    let (url, _stop) = serve(ticket_server(Arc::clone(&counter), true), Fault::None).await;
    let (code, checks) = audit(&["--url", &url, "--allow-effects"]).await;
    assert_eq!(checks["state-replayed"].0, "pass", "{checks:?}");
    assert_eq!(failed(&checks), Vec::<&str>::new());
    assert_eq!(code, 0);
    assert_eq!(
        counter.load(Ordering::SeqCst),
        1,
        "single use: the effect ran once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn usage_mistakes_exit_2_with_a_reason() {
    let tern = env!("CARGO_BIN_EXE_tern");
    for (args, says) in [
        (
            vec![
                "audit",
                "--tool",
                "no_such_tool",
                "--",
                tern,
                "serve",
                "demo",
                "--stdio",
            ],
            "no tool no_such_tool",
        ),
        (
            vec![
                "audit",
                "--tool",
                "nightly_report",
                "--",
                tern,
                "serve",
                "demo",
                "--stdio",
            ],
            "did not ask",
        ),
        (vec!["audit", "--url", "ftp://example"], "http://"),
        (vec!["audit"], "name the server"),
    ] {
        let out = tokio::process::Command::new(tern)
            .args(&args)
            .output()
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
}

#[derive(Deserialize, JsonSchema)]
struct Placement {
    /// Where.
    region: String,
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_with_header_arguments_is_audited_with_its_mcp_param_headers() {
    // `region` is mirrored in `Mcp-Param-Region` (x-mcp-header): without
    // it the server refuses the first leg with -32020.
    let schema = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]});
    let tool = ToolDef::new(
        "place",
        "Places after a confirmation",
        |ctx: Ctx, Args(p): Args<Placement>| async move {
            let Answer::Accept(Confirm { confirm: true }) = ctx
                .ask(Elicit::<Confirm>::form("Place it?").key("confirm"))
                .await?
            else {
                return Ok::<_, ToolError>("not placed".to_string());
            };
            Ok(format!("placed in {}", p.region))
        },
    )
    .elicits::<Confirm>()
    .input_schema(schema.as_object().unwrap().clone());
    let server = Server::builder("placer", "1").tool(tool).build().unwrap();
    let (url, _stop) = serve(server, Fault::None).await;
    let (code, checks) = audit(&["--url", &url, "--tool", "place"]).await;
    assert_eq!(failed(&checks), Vec::<&str>::new());
    assert_eq!(code, 0);
    assert_eq!(checks["header-name-mismatch"].0, "pass");
}
