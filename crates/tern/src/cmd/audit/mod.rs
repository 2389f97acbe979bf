//! `tern audit`: the attack kit, pointed at a server of your own.
//!
//! ```text
//! tern audit (--url URL [--header NAME:VALUE]... | -- COMMAND ARGS...)
//!            [--tool NAME [--args JSON]] [--other-tool NAME]
//!            [--allow-effects] [--aggressive] [--json] [--timeout SECONDS]
//! ```
//!
//! It audits the tool named with `--tool` (one whose first leg answers
//! `input_required`; with `--allow-effects` the default is the first in
//! `tools/list` whose first leg asks) and sends what a hostile client
//! would: forged `requestState` (tampered, truncated, extended, moved to
//! another tool, argument or resource, replayed), answers the server never
//! asked for or of the wrong shape, first legs that leave out the
//! capability the question needs, `requestState` on methods that may not
//! answer `input_required`, and over HTTP headers that contradict the body,
//! the duplicated-key trick included (over HTTP on a 2025-11-25 session of
//! the same endpoint too, where a server may decode by another path). Each
//! check prints one line: pass, fail or n/a, the rules it tests and what
//! was seen; then a summary. The rules are ids of `docs/rules.md` in tern's
//! repository (each a heading there, with its section of the 2026-07-28
//! specification); the report's last line says so. Exit status 0 when
//! nothing failed, 1 when a check failed, 2 on a usage error, 4 when the
//! server cannot be reached.
//!
//! Effects: the audit never answers a question in a way that lets a correct
//! server finish its final leg, unless `--allow-effects` is given (then the
//! forged states also carry valid answers, and the replay check runs a call
//! to its end twice). Choosing a tool runs first legs, and a tool that asks
//! nothing completes its first: so without `--allow-effects` nothing is
//! chosen, `--tool` is required (a named tool that does not ask on its
//! first leg has run once: the audit stops there). A server that fails a check
//! may of course do what it should have refused. The slow-header,
//! oversize-body and connection-share probes (HTTP) hold a connection for
//! up to a minute, send up to 64 MiB, and hold up to 256 connections from
//! one address (a server with no per-peer share lets one address take
//! them all): only with `--aggressive`.

mod checks;
mod sample;
mod wire;

use std::time::Duration;

use clap::Args;
use serde::Serialize;
use serde_json::{Map, Value, json};

use wire::{Endpoint, Exchange, Wire};

/// Exit status when every check passed (or did not apply).
const EXIT_PASSED: u8 = 0;
/// Exit status when a check failed.
const EXIT_FAILED: u8 = 1;
/// Exit status on a usage error.
const EXIT_USAGE: u8 = 2;
/// Exit status when the server cannot be started or reached.
const EXIT_TRANSPORT: u8 = 4;

/// The protocol revision audited.
const VERSION: &str = "2026-07-28";

/// Where the rule ids of the report are defined, printed under it.
const RULES_PAGE: &str = concat!(
    "rules: docs/rules.md of ",
    env!("CARGO_PKG_REPOSITORY"),
    " (each id is a heading there)"
);

/// `tern audit`'s arguments.
#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools, reason = "command-line flags")]
pub(crate) struct AuditArgs {
    /// Audit the Streamable HTTP endpoint at URL (http:// only).
    #[arg(long, value_name = "URL")]
    pub(crate) url: Option<String>,
    /// Send the header NAME:VALUE on every HTTP request (e.g.
    /// authorization; repeatable).
    #[arg(long = "header", value_name = "NAME:VALUE")]
    pub(crate) header: Vec<String>,
    /// Add KEY=VALUE to a stdio server's environment (repeatable).
    #[arg(short = 'e', long = "env", value_name = "KEY=VALUE")]
    pub(crate) env: Vec<String>,
    /// The tool to audit: one whose first leg asks (`input_required`).
    /// Needed unless --allow-effects is given; then the default is the first
    /// in tools/list whose first leg asks.
    #[arg(long, value_name = "NAME")]
    pub(crate) tool: Option<String>,
    /// The tool's arguments as a JSON object (default: made up from its
    /// inputSchema).
    #[arg(long, value_name = "JSON")]
    pub(crate) args: Option<String>,
    /// A second tool that asks, for the cross-tool check (default with
    /// --allow-effects: the next tool that asks).
    #[arg(long, value_name = "NAME")]
    pub(crate) other_tool: Option<String>,
    /// Let the audit finish calls (valid answers with forged states, the
    /// replay check, and choosing a tool by calling each): for servers whose
    /// tools have no effects that matter.
    #[arg(long)]
    pub(crate) allow_effects: bool,
    /// The audited tool is meant to be single use (rule state-single-use): a
    /// replay answered with the first outcome again then counts as the stored
    /// outcome (pass); without it that is inconclusive (n/a), since a
    /// deterministic tool run twice answers the same.
    #[arg(long)]
    pub(crate) single_use: bool,
    /// Also probe the HTTP server's timeouts and limits: headers sent a
    /// byte a second (up to 65 s), a body of 1 GiB announced (up to 64 MiB
    /// sent).
    #[arg(long)]
    pub(crate) aggressive: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub(crate) json: bool,
    /// Wait at most SECONDS for each answer.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    pub(crate) timeout: f64,
    /// Show a stdio server's standard error.
    #[arg(short, long)]
    pub(crate) verbose: bool,
    /// Audit this server, run as a child over stdio; last, after `--`.
    #[arg(last = true, value_name = "COMMAND ARGS")]
    pub(crate) command: Vec<String>,
}

/// A check's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Status {
    /// The server did what the rule asks.
    Pass,
    /// It did not.
    Fail,
    /// Allowed, but against the spec's guidance (the exit status stays 0).
    Warn,
    /// The check does not apply (e.g. header checks over stdio).
    #[serde(rename = "n/a")]
    NotApplicable,
}

/// One line of the report.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Check {
    /// The check's name.
    pub(crate) id: &'static str,
    /// The rules it checks: ids of `docs/rules.md`, space-separated.
    pub(crate) rule: &'static str,
    /// Its outcome.
    pub(crate) status: Status,
    /// What was sent and seen.
    pub(crate) detail: String,
}

impl Check {
    fn new(
        id: &'static str,
        rule: &'static str,
        status: Status,
        detail: impl Into<String>,
    ) -> Self {
        Self {
            id,
            rule,
            status,
            detail: detail.into(),
        }
    }
}

/// The whole report.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Report {
    target: String,
    transport: &'static str,
    tool: String,
    asked: Vec<String>,
    checks: Vec<Check>,
    summary: Summary,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Summary {
    passed: usize,
    failed: usize,
    warned: usize,
    not_applicable: usize,
}

/// A tool and the first leg that asked.
#[derive(Debug, Clone)]
pub(crate) struct Asked {
    /// The tool.
    pub(crate) tool: String,
    /// Its input schema.
    pub(crate) schema: Value,
    /// The arguments of the first leg.
    pub(crate) args: Map<String, Value>,
    /// `inputRequests` of the answer.
    pub(crate) requests: Map<String, Value>,
    /// `requestState` of the answer.
    pub(crate) state: Option<String>,
}

/// The connection and the request ids.
pub(crate) struct Session {
    wire: Wire,
    next: u64,
    /// Each tool's `x-mcp-header` arguments (from `tools/list`).
    header_params: std::collections::HashMap<String, Vec<tern_protocol::header::HeaderParam>>,
}

impl Session {
    /// A fresh request id.
    fn id(&mut self) -> String {
        self.next += 1;
        format!("tern-audit-{}", self.next)
    }

    /// Whether the header checks apply.
    pub(crate) fn is_http(&self) -> bool {
        self.wire.is_http()
    }

    /// The standard headers of a request (HTTP): version, method, name,
    /// and `Mcp-Param-*` for the tool's `x-mcp-header` arguments.
    pub(crate) fn headers(&self, method: &str, params: &Value) -> Vec<(String, String)> {
        let mut h = vec![
            ("MCP-Protocol-Version".to_string(), VERSION.to_string()),
            ("Mcp-Method".to_string(), method.to_string()),
        ];
        let name = match method {
            "tools/call" | "prompts/get" => params.get("name"),
            "resources/read" => params.get("uri"),
            _ => None,
        };
        if let Some(Value::String(name)) = name {
            h.push(("Mcp-Name".to_string(), name.clone()));
            if method == "tools/call"
                && let Some(annotated) = self.header_params.get(name)
            {
                for p in annotated {
                    let mut v = params.get("arguments");
                    for step in &p.path {
                        v = v.and_then(|v| v.get(step));
                    }
                    let text = match v {
                        Some(Value::String(s)) => tern_protocol::header::encode_value(s),
                        Some(Value::Number(n)) => n.to_string(),
                        Some(Value::Bool(b)) => b.to_string(),
                        _ => continue,
                    };
                    h.push((format!("Mcp-Param-{}", p.name), text));
                }
            }
        }
        h
    }

    /// `params` with the required `_meta` (this request's capabilities).
    pub(crate) fn with_meta(params: &Value, caps: &Value) -> Value {
        let mut p = params.as_object().cloned().unwrap_or_default();
        p.insert(
            "_meta".into(),
            json!({
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": caps,
                "io.modelcontextprotocol/clientInfo": {"name": "tern-audit", "version": env!("CARGO_PKG_VERSION")}
            }),
        );
        Value::Object(p)
    }

    /// Sends a well-formed request.
    pub(crate) async fn send(
        &mut self,
        method: &str,
        params: &Value,
        caps: &Value,
    ) -> std::io::Result<Exchange> {
        let headers = self.headers(method, params);
        self.send_with(method, params, caps, &headers).await
    }

    /// Sends a request with these headers instead of the standard ones.
    pub(crate) async fn send_with(
        &mut self,
        method: &str,
        params: &Value,
        caps: &Value,
        headers: &[(String, String)],
    ) -> std::io::Result<Exchange> {
        let id = self.id();
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": Self::with_meta(params, caps)});
        self.wire.send(&id, &body.to_string(), headers).await
    }

    /// Sends a request whose params are the raw JSON text `params` (for
    /// bodies `serde_json` would not write, such as a doubled key).
    pub(crate) async fn send_raw(
        &mut self,
        method: &str,
        params: &str,
        headers: &[(String, String)],
    ) -> std::io::Result<Exchange> {
        let id = self.id();
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":{},"params":{params}}}"#,
            Value::String(id.clone()),
            Value::String(method.to_string())
        );
        self.wire.send(&id, &body, headers).await
    }

    /// The HTTP endpoint and its extra headers (the aggressive probes).
    pub(crate) fn endpoint(&self) -> Option<(&Endpoint, &[(String, String)])> {
        match &self.wire {
            Wire::Http {
                endpoint, extra, ..
            } => Some((endpoint, extra)),
            Wire::Stdio(_) => None,
        }
    }
}

/// Why the audit could not run: an exit status and a message.
pub(crate) struct Stop {
    /// The exit status.
    pub(crate) code: u8,
    /// What to say.
    pub(crate) message: String,
}

fn usage(message: impl Into<String>) -> Stop {
    Stop {
        code: EXIT_USAGE,
        message: message.into(),
    }
}

fn transport(e: &std::io::Error) -> Stop {
    Stop {
        code: EXIT_TRANSPORT,
        message: format!("the server cannot be reached: {e}"),
    }
}

/// `tern audit` on its own runtime: the report's exit status, or the
/// reason it stopped.
pub(crate) fn command(args: AuditArgs) -> std::process::ExitCode {
    use std::process::ExitCode;
    let runtime = match super::runtime() {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let outcome = runtime.block_on(run(args));
    runtime.shutdown_background();
    match outcome {
        Ok(code) => ExitCode::from(code),
        Err(stop) => {
            eprintln!("tern audit: {}", tern::safe::text(&stop.message));
            ExitCode::from(stop.code)
        }
    }
}

/// Runs the audit; prints the report; returns the exit status.
pub(crate) async fn run(args: AuditArgs) -> Result<u8, Stop> {
    let timeout = Duration::try_from_secs_f64(args.timeout)
        .ok()
        .filter(|t| !t.is_zero())
        .ok_or_else(|| usage("--timeout: a positive number of seconds"))?;
    let (wire, target) = match (&args.url, args.command.is_empty()) {
        (Some(url), true) => {
            let endpoint = Endpoint::parse(url).map_err(usage)?;
            let extra = pairs(&args.header, ':', "--header")?;
            (
                Wire::Http {
                    endpoint,
                    extra,
                    timeout,
                },
                url.clone(),
            )
        }
        (None, false) => {
            let env = pairs(&args.env, '=', "--env")?;
            let wire = Wire::spawn(&args.command, &env, timeout, args.verbose)
                .map_err(|e| transport(&e))?;
            (wire, args.command.join(" "))
        }
        _ => return Err(usage("name the server: --url URL or -- COMMAND ARGS...")),
    };
    let mut session = Session {
        wire,
        next: 0,
        header_params: std::collections::HashMap::new(),
    };
    let outcome = audit(&mut session, &args).await;
    session.wire.close().await;
    let (asked, checks) = outcome?;
    let summary = Summary {
        passed: checks.iter().filter(|c| c.status == Status::Pass).count(),
        failed: checks.iter().filter(|c| c.status == Status::Fail).count(),
        warned: checks.iter().filter(|c| c.status == Status::Warn).count(),
        not_applicable: checks
            .iter()
            .filter(|c| c.status == Status::NotApplicable)
            .count(),
    };
    let failed = summary.failed;
    let report = Report {
        target,
        transport: if args.url.is_some() { "http" } else { "stdio" },
        tool: asked.tool.clone(),
        asked: asked.requests.keys().cloned().collect(),
        checks,
        summary,
    };
    print_report(&report, args.json);
    Ok(if failed == 0 {
        EXIT_PASSED
    } else {
        EXIT_FAILED
    })
}

fn pairs(words: &[String], sep: char, what: &str) -> Result<Vec<(String, String)>, Stop> {
    words
        .iter()
        .map(|w| {
            w.split_once(sep)
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
                .filter(|(k, _)| !k.is_empty())
                .ok_or_else(|| usage(format!("{what} {w}: expected NAME{sep}VALUE")))
        })
        .collect()
}

#[allow(clippy::print_stdout, reason = "the report is the command's output")]
fn print_report(report: &Report, as_json: bool) {
    if as_json {
        println!("{}", tern::safe::json(report));
        return;
    }
    // The tool's name, its question keys and the details quote the server.
    println!(
        "tern audit: {} ({}), tool {} (asks: {})",
        tern::safe::line(&report.target),
        report.transport,
        tern::safe::line(&report.tool),
        tern::safe::line(&report.asked.join(", "))
    );
    let rule_width = report
        .checks
        .iter()
        .map(|c| c.rule.len())
        .max()
        .unwrap_or(0);
    for c in &report.checks {
        let status = match c.status {
            Status::Pass => "PASS",
            Status::Fail => "FAIL",
            Status::Warn => "WARN",
            Status::NotApplicable => "n/a ",
        };
        println!(
            "{status}  {:<26} {:<rule_width$} {}",
            c.id,
            c.rule,
            tern::safe::line(&c.detail)
        );
    }
    println!(
        "audit summary: {} passed, {} failed, {} warned, {} not applicable",
        report.summary.passed,
        report.summary.failed,
        report.summary.warned,
        report.summary.not_applicable
    );
    println!("{RULES_PAGE}");
}

/// Lists the tools (following cursors, at most 20 pages).
async fn tools(session: &mut Session) -> Result<Vec<Value>, Stop> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..20 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let x = session
            .send("tools/list", &params, &sample::all_capabilities())
            .await
            .map_err(|e| transport(&e))?;
        let Some(result) = x.result() else {
            return Err(Stop {
                code: EXIT_FAILED,
                message: format!("tools/list: {}", x.describe()),
            });
        };
        if let Some(list) = result.get("tools").and_then(Value::as_array) {
            out.extend(list.iter().cloned());
        }
        match result.get("nextCursor").and_then(Value::as_str) {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    Ok(out)
}

/// The first leg of `tool` with every capability declared.
pub(crate) async fn first_leg(
    session: &mut Session,
    tool: &Value,
    args: Option<Map<String, Value>>,
) -> std::io::Result<(Exchange, Asked)> {
    let name = tool
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let schema = tool
        .get("inputSchema")
        .cloned()
        .unwrap_or_else(|| json!({}));
    let args = args.unwrap_or_else(|| sample::arguments(&schema));
    let x = session
        .send(
            "tools/call",
            &json!({"name": name, "arguments": args}),
            &sample::all_capabilities(),
        )
        .await?;
    let result = x.result();
    let asked = Asked {
        tool: name,
        schema,
        args,
        requests: result
            .and_then(|r| r.get("inputRequests"))
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default(),
        state: result
            .and_then(|r| r.get("requestState"))
            .and_then(Value::as_str)
            .map(str::to_string),
    };
    Ok((x, asked))
}

/// Chooses the tool (and a second one for the cross-tool check), then runs
/// every check.
async fn audit(session: &mut Session, args: &AuditArgs) -> Result<(Asked, Vec<Check>), Stop> {
    let list = tools(session).await?;
    for tool in &list {
        if let (Some(name), Some(Value::Object(schema))) = (
            tool.get("name").and_then(Value::as_str),
            tool.get("inputSchema"),
        ) && let Ok(annotated) = tern_protocol::header::header_params(schema)
        {
            session.header_params.insert(name.to_string(), annotated);
        }
    }
    let by_name = |name: &str| {
        list.iter()
            .find(|t| t.get("name").and_then(Value::as_str) == Some(name))
            .cloned()
    };
    let explicit_args = match &args.args {
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => Some(m),
            _ => return Err(usage("--args: expected a JSON object")),
        },
        None => None,
    };
    let mut asked: Option<Asked> = None;
    let mut tried = Vec::new();
    if let Some(name) = &args.tool {
        let tool = by_name(name).ok_or_else(|| usage(format!("no tool {name} in tools/list")))?;
        let (x, a) = first_leg(session, &tool, explicit_args)
            .await
            .map_err(|e| transport(&e))?;
        if x.result_type() != Some("input_required") {
            return Err(usage(format!(
                "tool {name} did not ask on its first leg ({}): name a tool that asks",
                x.describe()
            )));
        }
        asked = Some(a);
    } else if !args.allow_effects {
        // Choosing means calling each tool's first leg, and a tool that asks
        // nothing completes it: a final leg, which only --allow-effects may
        // run.
        let names: Vec<&str> = list
            .iter()
            .filter_map(|t| t.get("name").and_then(Value::as_str))
            .collect();
        return Err(usage(format!(
            "name a tool that asks with --tool (choosing one calls each tool, and one that asks nothing would run): tools: {}; or pass --allow-effects",
            names.join(", ")
        )));
    } else {
        for tool in &list {
            let (x, a) = first_leg(session, tool, None)
                .await
                .map_err(|e| transport(&e))?;
            tried.push(format!("{} ({})", a.tool, x.describe()));
            if x.result_type() == Some("input_required") {
                asked = Some(a);
                break;
            }
        }
    }
    let Some(asked) = asked else {
        return Err(usage(format!(
            "no tool asked on its first leg (tried: {}); name one with --tool and --args",
            tried.join(", ")
        )));
    };
    // The second tool that asks, for the cross-tool check.
    let mut other: Option<Asked> = None;
    if let Some(name) = &args.other_tool {
        let tool = by_name(name).ok_or_else(|| usage(format!("no tool {name} in tools/list")))?;
        let (x, a) = first_leg(session, &tool, None)
            .await
            .map_err(|e| transport(&e))?;
        if x.result_type() != Some("input_required") {
            return Err(usage(format!(
                "--other-tool {name} did not ask ({})",
                x.describe()
            )));
        }
        other = Some(a);
    } else if args.allow_effects {
        for tool in &list {
            let name = tool.get("name").and_then(Value::as_str).unwrap_or("");
            if name == asked.tool {
                continue;
            }
            let (x, a) = first_leg(session, tool, None)
                .await
                .map_err(|e| transport(&e))?;
            if x.result_type() == Some("input_required") {
                other = Some(a);
                break;
            }
        }
    }
    let mut checks = checks::all(session, &asked, other.as_ref(), args)
        .await
        .map_err(|e| transport(&e))?;
    checks.push(checks::composition(&list));
    Ok((asked, checks))
}
