//! The checks, in report order. Each sends its requests and judges the
//! answers; none stops the audit (a check that cannot run says n/a).

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::wire::{self, Exchange};
use super::{Asked, AuditArgs, Check, Session, Status, VERSION, sample};

type Io<T> = std::io::Result<T>;

/// Runs every check.
#[allow(
    clippy::too_many_lines,
    reason = "the checks in report order, one after another"
)]
pub(crate) async fn all(
    s: &mut Session,
    asked: &Asked,
    other: Option<&Asked>,
    args: &AuditArgs,
) -> Io<Vec<Check>> {
    let mut out = Vec::new();
    let effects = args.allow_effects;
    // requestState forgeries (the `requestState` rules of docs/rules.md).
    if asked.state.is_none() {
        {
            for (id, rule) in [
                ("state-tampered", "state-untrusted state-integrity"),
                ("state-truncated", "state-integrity"),
                ("state-extended", "state-integrity"),
                ("state-cross-tool", "state-bound-request"),
                ("state-cross-argument", "state-bound-request"),
                ("state-cross-resource", "state-bound-request"),
            ] {
                out.push(Check::new(
                    id,
                    rule,
                    Status::NotApplicable,
                    "the first leg carried no requestState",
                ));
            }
        }
    } else {
        {
            let state = &fresh(s, asked).await?.state.unwrap_or_default();
            let tampered = tamper(state);
            out.push(
                forged(
                    s,
                    asked,
                    "state-tampered",
                    "state-untrusted state-integrity",
                    "one character changed",
                    &call(asked, &asked.args),
                    &tampered,
                    effects,
                )
                .await?,
            );
            let cut = state.len().saturating_sub(8).max(state.len() / 2);
            out.push(
                forged(
                    s,
                    asked,
                    "state-truncated",
                    "state-integrity",
                    "its last characters cut",
                    &call(asked, &asked.args),
                    &state[..cut],
                    effects,
                )
                .await?,
            );
            let extended = format!("{state}-TAMPERED");
            out.push(
                forged(
                    s,
                    asked,
                    "state-extended",
                    "state-integrity",
                    "\"-TAMPERED\" appended",
                    &call(asked, &asked.args),
                    &extended,
                    effects,
                )
                .await?,
            );
            let state = &fresh(s, asked).await?.state.unwrap_or_default();
            out.push(match other {
                Some(o) => {
                    let params = json!({"name": o.tool, "arguments": o.args});
                    forged(s, asked, "state-cross-tool", "state-bound-request", &format!("presented on tool {}", o.tool), &("tools/call", params), state, effects).await?
                }
                None => Check::new(
                    "state-cross-tool",
                    "state-bound-request",
                    Status::NotApplicable,
                    "no second tool that asks (--other-tool NAME, or --allow-effects to look for one)",
                ),
            });
            let state = &fresh(s, asked).await?.state.unwrap_or_default();
            out.push(match sample::changed(&asked.args, &asked.schema) {
                Some(changed) => {
                    let what = format!(
                        "presented with argument {} changed",
                        changed.keys().next().map_or("", String::as_str)
                    );
                    forged(
                        s,
                        asked,
                        "state-cross-argument",
                        "state-bound-request",
                        &what,
                        &call(asked, &changed),
                        state,
                        effects,
                    )
                    .await?
                }
                None => Check::new(
                    "state-cross-argument",
                    "state-bound-request",
                    Status::NotApplicable,
                    "the tool has no argument to change",
                ),
            });
            let state = &fresh(s, asked).await?.state.unwrap_or_default();
            out.push(cross_resource(s, asked, state, effects).await?);
        }
    }
    out.push(unasked_key(s, asked).await?);
    out.push(wrong_shape(s, asked).await?);
    out.push(changed_question(s, asked).await?);
    out.push(missing(s, asked).await?);
    out.push(capability_none(s, asked).await?);
    out.push(capability_mode(s, asked).await?);
    out.push(not_mrtr_methods(s, asked).await?);
    out.extend(headers(s, asked, other).await?);
    out.push(duplicate_name(s, asked, other).await?);
    out.push(duplicate_argument(s, asked).await?);
    out.push(legacy_duplicate_name(s, asked, other).await?);
    out.extend(aggressive(s, args).await?);
    // Last: a single-use server consumes the state here.
    out.push(match &asked.state {
        Some(_) => {
            let asked = &fresh(s, asked).await?;
            replayed(
                s,
                asked,
                asked.state.as_deref().unwrap_or_default(),
                effects,
                args.single_use,
            )
            .await?
        }
        None => Check::new(
            "state-replayed",
            "state-single-use",
            Status::NotApplicable,
            "the first leg carried no requestState",
        ),
    });
    Ok(out)
}

/// A new first leg of the chosen tool, so each check presents a state no
/// other check used (a single-use server consumes a state on its first
/// retry, and asks again with a new one).
async fn fresh(s: &mut Session, asked: &Asked) -> Io<Asked> {
    let tool = json!({"name": asked.tool, "inputSchema": asked.schema});
    let (x, again) = super::first_leg(s, &tool, Some(asked.args.clone())).await?;
    Ok(if x.result_type() == Some("input_required") {
        again
    } else {
        asked.clone()
    })
}

/// The chosen tool's `tools/call` params with these arguments.
fn call(asked: &Asked, args: &Map<String, Value>) -> (&'static str, Value) {
    ("tools/call", json!({"name": asked.tool, "arguments": args}))
}

/// One character of `state` changed, in its middle.
fn tamper(state: &str) -> String {
    let mut chars: Vec<char> = state.chars().collect();
    let i = chars.len() / 2;
    if let Some(c) = chars.get_mut(i) {
        *c = if *c == 'A' { 'B' } else { 'A' };
    }
    chars.into_iter().collect()
}

/// Valid answers to every question asked.
fn answers(asked: &Asked) -> Map<String, Value> {
    asked
        .requests
        .iter()
        .map(|(k, r)| (k.clone(), sample::answer(r)))
        .collect()
}

/// A forged state on `target`: refused with a JSON-RPC error passes.
/// Without `effects` it carries no answers, so a server that takes the
/// forgery asks again rather than finishing.
#[allow(
    clippy::too_many_arguments,
    reason = "one call per forgery, each spelled out"
)]
async fn forged(
    s: &mut Session,
    asked: &Asked,
    id: &'static str,
    rule: &'static str,
    what: &str,
    target: &(&'static str, Value),
    state: &str,
    effects: bool,
) -> Io<Check> {
    let (method, params) = target;
    let mut p = params.as_object().cloned().unwrap_or_default();
    p.insert("requestState".into(), json!(state));
    if effects {
        p.insert("inputResponses".into(), Value::Object(answers(asked)));
    }
    let x = s
        .send(method, &Value::Object(p), &sample::all_capabilities())
        .await?;
    Ok(if x.error_code().is_some() {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!("requestState {what}: refused ({})", x.describe()),
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "requestState {what}: served ({}), not refused",
                x.describe()
            ),
        )
    })
}

async fn cross_resource(s: &mut Session, asked: &Asked, state: &str, effects: bool) -> Io<Check> {
    let caps = sample::all_capabilities();
    let list = s.send("resources/list", &json!({}), &caps).await?;
    let uri = list
        .result()
        .and_then(|r| r.get("resources"))
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(|r| r.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(uri) = uri {
        let target = ("resources/read", json!({"uri": uri}));
        return forged(
            s,
            asked,
            "state-cross-resource",
            "state-bound-request",
            &format!("presented on resources/read {uri}"),
            &target,
            state,
            effects,
        )
        .await;
    }
    let prompts = s.send("prompts/list", &json!({}), &caps).await?;
    let prompt = prompts
        .result()
        .and_then(|r| r.get("prompts"))
        .and_then(Value::as_array)
        .and_then(|a| {
            a.iter().find(|p| {
                p.get("arguments")
                    .and_then(Value::as_array)
                    .is_none_or(|args| {
                        args.iter()
                            .all(|a| a.get("required") != Some(&Value::Bool(true)))
                    })
            })
        })
        .and_then(|p| p.get("name"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(name) = prompt {
        let target = ("prompts/get", json!({"name": name}));
        return forged(
            s,
            asked,
            "state-cross-resource",
            "state-bound-request",
            &format!("presented on prompts/get {name}"),
            &target,
            state,
            effects,
        )
        .await;
    }
    Ok(Check::new(
        "state-cross-resource",
        "state-bound-request",
        Status::NotApplicable,
        "no resource, and no prompt without required arguments",
    ))
}

/// The outcome of a leg without what may differ between two equal legs.
fn outcome(x: &Exchange) -> Value {
    if let Some(code) = x.error_code() {
        return json!({"error": code});
    }
    let mut r = x.result().cloned().unwrap_or(Value::Null);
    if let Some(o) = r.as_object_mut() {
        o.remove("_meta");
        o.remove("requestState");
    }
    r
}

async fn replayed(
    s: &mut Session,
    asked: &Asked,
    state: &str,
    effects: bool,
    single_use: bool,
) -> Io<Check> {
    let (id, rule) = ("state-replayed", "state-single-use");
    if !effects {
        return Ok(Check::new(
            id,
            rule,
            Status::NotApplicable,
            "a replay follows a finished call: needs --allow-effects",
        ));
    }
    let mut p = call(asked, &asked.args).1;
    p["requestState"] = json!(state);
    p["inputResponses"] = Value::Object(answers(asked));
    let caps = sample::all_capabilities();
    let first = s.send("tools/call", &p, &caps).await?;
    if first.error_code().is_some() {
        return Ok(Check::new(
            id,
            rule,
            Status::NotApplicable,
            format!(
                "the answered leg itself failed ({}), nothing to replay",
                first.describe()
            ),
        ));
    }
    let again = s.send("tools/call", &p, &caps).await?;
    Ok(if again.error_code().is_some() {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!(
                "the answered state sent again: refused ({})",
                again.describe()
            ),
        )
    } else if outcome(&first) == outcome(&again) && single_use {
        // Declared single use: the same answer is the stored outcome.
        Check::new(
            id,
            rule,
            Status::Pass,
            format!(
                "the answered state sent again: the stored outcome again ({})",
                again.describe()
            ),
        )
    } else if outcome(&first) == outcome(&again) {
        // A deterministic tool run twice answers the same: from outside
        // that cannot be told from a stored outcome.
        Check::new(
            id,
            rule,
            Status::NotApplicable,
            format!(
                "inconclusive: the answered state sent again gave the same outcome ({}), a stored one or the call run again; pass --single-use if the tool is meant to be",
                again.describe()
            ),
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "the answered state sent again ran the call again with another outcome ({} then {})",
                first.describe(),
                again.describe()
            ),
        )
    })
}

/// Whether `x` asks again for every key of the first leg.
fn asks_again(x: &Exchange, asked: &Asked) -> bool {
    x.result_type() == Some("input_required")
        && x.result()
            .and_then(|r| r.get("inputRequests"))
            .and_then(Value::as_object)
            .is_some_and(|r| asked.requests.keys().all(|k| r.contains_key(k)))
}

/// The chosen tool's retry with `responses` (and the first leg's state).
async fn retry(
    s: &mut Session,
    asked: &Asked,
    responses: Option<Map<String, Value>>,
) -> Io<Exchange> {
    let asked = &fresh(s, asked).await?;
    let mut p = call(asked, &asked.args).1;
    if let Some(state) = &asked.state {
        p["requestState"] = json!(state);
    }
    if let Some(r) = responses {
        p["inputResponses"] = Value::Object(r);
    }
    s.send("tools/call", &p, &sample::all_capabilities()).await
}

async fn unasked_key(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = (
        "answer-unasked-key",
        "answers-unknown-ignored answers-missing-ask-again",
    );
    let mut r = Map::new();
    r.insert(
        "tern-audit-never-asked".into(),
        json!({"action": "accept", "content": {"x": "y"}}),
    );
    let x = retry(s, asked, Some(r)).await?;
    Ok(if asks_again(&x, asked) {
        Check::new(
            id,
            rule,
            Status::Pass,
            "an answer for a key never asked (and none for those asked): ignored, asked again",
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "an answer for a key never asked: {}, not ignored and asked again",
                x.describe()
            ),
        )
    })
}

async fn wrong_shape(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = ("answer-wrong-shape", "answers-validated");
    let r = asked
        .requests
        .iter()
        .map(|(k, q)| (k.clone(), sample::wrong_shape(q)))
        .collect();
    let x = retry(s, asked, Some(r)).await?;
    Ok(if x.error_code().is_some() {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!("answers of the wrong shape: refused ({})", x.describe()),
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "answers of the wrong shape: {}, not a JSON-RPC error",
                x.describe()
            ),
        )
    })
}

async fn changed_question(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = (
        "answer-changed-question",
        "answers-validated answers-missing-ask-again",
    );
    let r = asked
        .requests
        .iter()
        .map(|(k, q)| (k.clone(), sample::other_question(q)))
        .collect();
    let x = retry(s, asked, Some(r)).await?;
    let tool_error = x.result().and_then(|r| r.get("isError")) == Some(&Value::Bool(true));
    Ok(if x.error_code().is_some() || asks_again(&x, asked) {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!(
                "answers made for another question: not used ({})",
                x.describe()
            ),
        )
    } else if tool_error {
        Check::new(
            id,
            rule,
            Status::Fail,
            "answers made for another question: the call ended with a tool error (isError), not a JSON-RPC error (rule answers-validated) or a new question (rule answers-missing-ask-again)",
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "answers made for another question: {}, taken as answers",
                x.describe()
            ),
        )
    })
}

async fn missing(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = (
        "answer-missing",
        "no-assumed-retry answers-missing-ask-again",
    );
    let x = retry(s, asked, Some(Map::new())).await?;
    Ok(if asks_again(&x, asked) {
        Check::new(
            id,
            rule,
            Status::Pass,
            "a retry without the answers: asked again",
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "a retry without the answers: {}, not asked again",
                x.describe()
            ),
        )
    })
}

/// Whether a first leg sent with `caps` was answered within rule
/// `ask-declared-only`: `-32021` naming what is required, or a result asking
/// nothing undeclared.
fn gated(x: &Exchange, caps: &Value) -> Result<String, String> {
    if x.error_code() == Some(-32021) {
        let data = x
            .message
            .as_ref()
            .and_then(|m| m.pointer("/error/data/requiredCapabilities"));
        return match data {
            Some(d) if d.is_object() => Ok(format!("-32021, requiredCapabilities {d}")),
            _ => Err("-32021 without data.requiredCapabilities".into()),
        };
    }
    if let Some(code) = x.error_code() {
        return Err(format!("error {code}, not -32021"));
    }
    let Some(result) = x.result() else {
        return Err(x.describe());
    };
    let requests = result
        .get("inputRequests")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let bad: Vec<&String> = requests
        .iter()
        .filter(|(_, r)| !sample::allowed(r, caps))
        .map(|(k, _)| k)
        .collect();
    if bad.is_empty() {
        Ok(format!("{} asking nothing undeclared", x.describe()))
    } else {
        Err(format!("asked {bad:?} of a kind not declared"))
    }
}

async fn capability_none(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = ("capability-none", "ask-declared-only");
    let caps = json!({});
    let (method, params) = call(asked, &asked.args);
    let x = s.send(method, &params, &caps).await?;
    Ok(match gated(&x, &caps) {
        Ok(what) => Check::new(
            id,
            rule,
            Status::Pass,
            format!("first leg declaring no capability: {what}"),
        ),
        Err(what) => Check::new(
            id,
            rule,
            Status::Fail,
            format!("first leg declaring no capability: {what}"),
        ),
    })
}

async fn capability_mode(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = ("capability-other-kind", "ask-declared-only");
    let Some(caps) = asked.requests.values().next().and_then(sample::without) else {
        return Ok(Check::new(
            id,
            rule,
            Status::NotApplicable,
            "the question has no sub-capability to leave out",
        ));
    };
    let (method, params) = call(asked, &asked.args);
    let x = s.send(method, &params, &caps).await?;
    Ok(match gated(&x, &caps) {
        Ok(what) => Check::new(
            id,
            rule,
            Status::Pass,
            format!("first leg declaring only {caps}: {what}"),
        ),
        Err(what) => Check::new(
            id,
            rule,
            Status::Fail,
            format!("first leg declaring only {caps}: {what}"),
        ),
    })
}

async fn not_mrtr_methods(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = ("input-required-elsewhere", "input-required-methods");
    let mut extra = Map::new();
    if let Some(state) = &asked.state {
        extra.insert("requestState".into(), json!(state));
    }
    extra.insert("inputResponses".into(), Value::Object(answers(asked)));
    let mut bad = Vec::new();
    let mut seen = Vec::new();
    for method in [
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
    ] {
        let x = s
            .send(
                method,
                &Value::Object(extra.clone()),
                &sample::all_capabilities(),
            )
            .await?;
        if x.result_type() == Some("input_required") {
            bad.push(method);
        }
        seen.push(format!("{method}: {}", x.describe()));
    }
    Ok(if bad.is_empty() {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!(
                "requestState and inputResponses on other methods: none answered input_required ({})",
                seen.join("; ")
            ),
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!("input_required answered on {}", bad.join(", ")),
        )
    })
}

/// A header check's verdict: `-32020` (with 400) passes; `also` lists other
/// codes that pass.
fn header_verdict(id: &'static str, what: &str, x: &Exchange, also: &[i64]) -> Check {
    let rule = "http-header-mismatch";
    match x.error_code() {
        Some(code) if (code == -32020 || also.contains(&code)) && x.status == Some(400) => {
            Check::new(
                id,
                rule,
                Status::Pass,
                format!("{what}: refused ({})", x.describe()),
            )
        }
        Some(_) => Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "{what}: refused, but {} (expected -32020 with 400)",
                x.describe()
            ),
        ),
        None => Check::new(
            id,
            rule,
            Status::Fail,
            format!("{what}: served ({})", x.describe()),
        ),
    }
}

fn replace(headers: &[(String, String)], name: &str, value: Option<&str>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = headers
        .iter()
        .filter(|(n, _)| !n.eq_ignore_ascii_case(name))
        .cloned()
        .collect();
    if let Some(v) = value {
        out.push((name.to_string(), v.to_string()));
    }
    out
}

async fn headers(s: &mut Session, asked: &Asked, other: Option<&Asked>) -> Io<Vec<Check>> {
    let ids = [
        "header-name-mismatch",
        "header-name-missing",
        "header-method-mismatch",
        "header-version-mismatch",
        "header-name-repeated",
    ];
    if !s.is_http() {
        return Ok(ids
            .iter()
            .map(|id| {
                Check::new(
                    id,
                    "http-header-mismatch",
                    Status::NotApplicable,
                    "HTTP only",
                )
            })
            .collect());
    }
    let caps = sample::all_capabilities();
    let (method, params) = call(asked, &asked.args);
    let standard = s.headers(method, &params);
    let other_name = other.map_or("tern_audit_other_tool", |o| o.tool.as_str());
    let mut out = Vec::new();
    let h = replace(&standard, "Mcp-Name", Some(other_name));
    let x = s.send_with(method, &params, &caps, &h).await?;
    out.push(header_verdict(
        ids[0],
        &format!("Mcp-Name {other_name} on a call to {}", asked.tool),
        &x,
        &[],
    ));
    let h = replace(&standard, "Mcp-Name", None);
    let x = s.send_with(method, &params, &caps, &h).await?;
    out.push(header_verdict(
        ids[1],
        "tools/call without Mcp-Name",
        &x,
        &[],
    ));
    let h = replace(&standard, "Mcp-Method", Some("tools/list"));
    let x = s.send_with(method, &params, &caps, &h).await?;
    out.push(header_verdict(
        ids[2],
        "Mcp-Method tools/list on a tools/call",
        &x,
        &[],
    ));
    let h = replace(&standard, "MCP-Protocol-Version", Some("1999-01-01"));
    let x = s.send_with(method, &params, &caps, &h).await?;
    out.push(header_verdict(
        ids[3],
        &format!("MCP-Protocol-Version 1999-01-01, body {VERSION}"),
        &x,
        &[-32022],
    ));
    let mut h = standard.clone();
    h.push(("Mcp-Name".into(), other_name.to_string()));
    let x = s.send_with(method, &params, &caps, &h).await?;
    out.push(header_verdict(
        ids[4],
        &format!("a second Mcp-Name ({other_name})"),
        &x,
        &[],
    ));
    Ok(out)
}

/// `tools/call` params text naming `first`, then `last`, as `"name"`.
fn raw_params_named(first: &str, last: &str, arguments: &str) -> String {
    let meta = Session::with_meta(&json!({}), &sample::all_capabilities());
    format!(
        r#"{{"name":{},"name":{},"arguments":{arguments},"_meta":{}}}"#,
        Value::String(first.to_string()),
        Value::String(last.to_string()),
        meta["_meta"]
    )
}

/// `tools/call` params text with `dup` (raw members) spliced in before the
/// rest.
fn raw_params(asked: &Asked, dup: &str, arguments: &str) -> String {
    let meta = Session::with_meta(&json!({}), &sample::all_capabilities());
    format!(
        r#"{{{dup}"name":{},"arguments":{arguments},"_meta":{}}}"#,
        Value::String(asked.tool.clone()),
        meta["_meta"]
    )
}

async fn duplicate_name(s: &mut Session, asked: &Asked, other: Option<&Asked>) -> Io<Check> {
    let (id, rule) = (
        "duplicate-key-name",
        "no-duplicate-members http-header-mismatch",
    );
    let decoy = other.map_or("tern_audit_other_tool", |o| o.tool.as_str());
    // "name" twice, each order, `Mcp-Name` naming the audited tool: a
    // last-wins decoder serves the audited tool in the first probe, a
    // first-wins one in the second (the issue's trick: a gateway peeking
    // at one copy, the server serving the other). Only a server that
    // reads neither copy alone refuses both: a last-wins server's own
    // -32020 in the second probe does not hide what it served in the first.
    let mut served = Vec::new();
    let mut refused = Vec::new();
    for (first, last) in [(decoy, asked.tool.as_str()), (asked.tool.as_str(), decoy)] {
        let params = raw_params_named(first, last, &Value::Object(asked.args.clone()).to_string());
        let mut h = s.headers(
            "tools/call",
            &json!({"name": asked.tool, "arguments": asked.args}),
        );
        h.retain(|(n, _)| n != "Mcp-Name");
        h.push(("Mcp-Name".into(), asked.tool.clone()));
        let x = s.send_raw("tools/call", &params, &h).await?;
        let order = format!("{first}, then {last}");
        if x.error_code().is_some() {
            refused.push(format!("{order}: refused ({})", x.describe()));
        } else {
            served.push(format!("{order}: served ({})", x.describe()));
        }
    }
    Ok(if served.is_empty() {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!("params with \"name\" twice: {}", refused.join("; ")),
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!("params with \"name\" twice: {}", served.join("; ")),
        )
    })
}

async fn duplicate_argument(s: &mut Session, asked: &Asked) -> Io<Check> {
    let (id, rule) = ("duplicate-key-argument", "no-duplicate-members");
    let Some((name, value)) = asked.args.iter().next() else {
        return Ok(Check::new(
            id,
            rule,
            Status::NotApplicable,
            "the tool has no argument",
        ));
    };
    let changed = sample::changed(&asked.args, &asked.schema)
        .and_then(|c| c.get(name).cloned())
        .unwrap_or_else(|| value.clone());
    let mut members: Vec<String> = asked
        .args
        .iter()
        .map(|(k, v)| format!("{}:{v}", Value::String(k.clone())))
        .collect();
    members.push(format!("{}:{changed}", Value::String(name.clone())));
    let arguments = format!("{{{}}}", members.join(","));
    let params = raw_params(asked, "", &arguments);
    let h = s.headers(
        "tools/call",
        &json!({"name": asked.tool, "arguments": asked.args}),
    );
    let x = s.send_raw("tools/call", &params, &h).await?;
    Ok(if x.error_code().is_some() {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!("arguments with {name} twice: refused ({})", x.describe()),
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!("arguments with {name} twice: served ({})", x.describe()),
        )
    })
}

/// The duplicated-name trick on a 2025-11-25 session of the same endpoint:
/// a server that decodes its legacy requests by another path than its
/// stateless ones may read `name` last-wins there (and check a tool's
/// scope on the other copy). Only `-32602` for both orders passes: the
/// audited tool asks, so on a session that declared no capability it fails
/// in any case, and a failure of its own is not a refusal.
async fn legacy_duplicate_name(s: &mut Session, asked: &Asked, other: Option<&Asked>) -> Io<Check> {
    let (id, rule) = ("legacy-duplicate-key-name", "no-duplicate-members");
    let Some((endpoint, extra)) = s.endpoint() else {
        return Ok(Check::new(id, rule, Status::NotApplicable, "HTTP only"));
    };
    let init = json!({"jsonrpc": "2.0", "id": "tern-audit-init", "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "tern-audit", "version": env!("CARGO_PKG_VERSION")}}});
    let (answer, session) =
        wire::session_post(endpoint, "tern-audit-init", &init.to_string(), extra).await?;
    let Some(session) = session.filter(|_| answer.result().is_some()) else {
        return Ok(Check::new(
            id,
            rule,
            Status::NotApplicable,
            format!(
                "the endpoint opens no 2025-11-25 session ({})",
                answer.describe()
            ),
        ));
    };
    let mut headers = extra.to_vec();
    headers.push(("Mcp-Session-Id".into(), session));
    headers.push(("MCP-Protocol-Version".into(), "2025-11-25".into()));
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    wire::session_post(endpoint, "", initialized, &headers).await?;
    let decoy = other.map_or("tern_audit_other_tool", |o| o.tool.as_str());
    let arguments = Value::Object(asked.args.clone()).to_string();
    let mut served = Vec::new();
    let mut refused = Vec::new();
    for (n, (first, last)) in [(decoy, asked.tool.as_str()), (asked.tool.as_str(), decoy)]
        .into_iter()
        .enumerate()
    {
        let call_id = format!("tern-audit-legacy-{n}");
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":{},"name":{},"arguments":{arguments}}}}}"#,
            Value::String(call_id.clone()),
            Value::String(first.to_owned()),
            Value::String(last.to_owned()),
        );
        let (x, _) = wire::session_post(endpoint, &call_id, &body, &headers).await?;
        let order = format!("{first}, then {last}");
        if x.error_code() == Some(-32602) {
            refused.push(format!("{order}: refused ({})", x.describe()));
        } else {
            served.push(format!("{order}: {}", x.describe()));
        }
    }
    Ok(if served.is_empty() {
        Check::new(
            id,
            rule,
            Status::Pass,
            format!("on a session, \"name\" twice: {}", refused.join("; ")),
        )
    } else {
        Check::new(
            id,
            rule,
            Status::Fail,
            format!(
                "on a session, \"name\" twice was not refused as invalid params: {}",
                served.join("; ")
            ),
        )
    })
}

/// One address holding connections: a server with a per-peer share refuses
/// it well before its total (tern: 64 of 512); one that lets a single
/// address hold 256 has none, and that address can lock out everyone else.
async fn connection_share(
    endpoint: &wire::Endpoint,
    extra: &[(String, String)],
    (id, rule): (&'static str, &'static str),
) -> Io<Check> {
    let most = 256;
    Ok(match wire::connection_share(endpoint, extra, most).await? {
        Some(held) => Check::new(
            id,
            rule,
            Status::Pass,
            format!("one address refused after holding {held} connections"),
        ),
        None => Check::new(
            id,
            rule,
            Status::Fail,
            format!("one address held {most} kept-alive connections, none refused"),
        ),
    })
}

async fn aggressive(s: &mut Session, args: &AuditArgs) -> Io<Vec<Check>> {
    let (slow, big) = (
        ("slow-headers", "http-timeouts"),
        ("oversize-body", "http-limits"),
    );
    let share = ("connection-share", "http-limits");
    let Some((endpoint, extra)) = s.endpoint() else {
        return Ok(vec![
            Check::new(slow.0, slow.1, Status::NotApplicable, "HTTP only"),
            Check::new(big.0, big.1, Status::NotApplicable, "HTTP only"),
            Check::new(share.0, share.1, Status::NotApplicable, "HTTP only"),
        ]);
    };
    if !args.aggressive {
        return Ok(vec![
            Check::new(slow.0, slow.1, Status::NotApplicable, "needs --aggressive"),
            Check::new(big.0, big.1, Status::NotApplicable, "needs --aggressive"),
            Check::new(
                share.0,
                share.1,
                Status::NotApplicable,
                "needs --aggressive",
            ),
        ]);
    }
    let mut out = Vec::new();
    out.push(connection_share(endpoint, extra, share).await?);
    let limit = Duration::from_secs(65);
    out.push(
        match wire::slow_headers(endpoint, Duration::from_secs(1), limit).await? {
            Some(held) if held <= Duration::from_secs(61) => Check::new(
                slow.0,
                slow.1,
                Status::Pass,
                format!(
                    "headers a byte a second: dropped after {} s",
                    held.as_secs()
                ),
            ),
            Some(held) => Check::new(
                slow.0,
                slow.1,
                Status::Fail,
                format!(
                    "headers a byte a second: held {} s (more than 60)",
                    held.as_secs()
                ),
            ),
            None => Check::new(
                slow.0,
                slow.1,
                Status::Fail,
                format!(
                    "headers a byte a second: still open after {} s",
                    limit.as_secs()
                ),
            ),
        },
    );
    let (declared, most) = (1u64 << 30, 64u64 << 20);
    out.push(
        match wire::oversize_body(endpoint, extra, declared, most, Duration::from_secs(60)).await? {
            Some((status, sent)) if sent < most => Check::new(
                big.0,
                big.1,
                Status::Pass,
                format!(
                    "a 1 GiB body announced: refused after {} KiB ({})",
                    sent >> 10,
                    status.map_or("closed".to_string(), |s| format!("HTTP {s}"))
                ),
            ),
            Some((status, _)) => Check::new(
                big.0,
                big.1,
                Status::Fail,
                format!(
                    "a 1 GiB body announced: 64 MiB taken before {}",
                    status.map_or("a close".to_string(), |s| format!("HTTP {s}"))
                ),
            ),
            None => Check::new(
                big.0,
                big.1,
                Status::Fail,
                "a 1 GiB body announced: 64 MiB taken without an answer",
            ),
        },
    );
    Ok(out)
}

/// The keywords that constrain a value (presence assertions such as
/// `required` aside).
const CONSTRAINTS: &[&str] = &[
    "type",
    "enum",
    "const",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "items",
    "minItems",
    "maxItems",
    "multipleOf",
];

/// `Tool.inputSchema`'s guidance (2026-07-28 schema): with composition
/// keywords, declare `properties` at the root and keep the branches to
/// presence assertions, since a type constraint inside a branch that does
/// not match is not enforced. Each tool whose schema constrains a property
/// only inside a `oneOf` / `anyOf` / `allOf` branch is named (a warning: the
/// schema is valid, its constraints are weaker than they read).
pub(crate) fn composition(tools: &[Value]) -> Check {
    let mut found = Vec::new();
    let mut composed = false;
    for tool in tools {
        let name = tool.get("name").and_then(Value::as_str).unwrap_or("?");
        let Some(schema) = tool.get("inputSchema").and_then(Value::as_object) else {
            continue;
        };
        let root = schema.get("properties").and_then(Value::as_object);
        for keyword in ["oneOf", "anyOf", "allOf"] {
            let Some(branches) = schema.get(keyword).and_then(Value::as_array) else {
                continue;
            };
            composed = true;
            for (i, branch) in branches.iter().enumerate() {
                for (prop, s) in branch
                    .get("properties")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    let constrained = s
                        .as_object()
                        .is_some_and(|o| CONSTRAINTS.iter().any(|k| o.contains_key(*k)));
                    if constrained && !root.is_some_and(|r| r.contains_key(prop)) {
                        found.push(format!("{name}: {prop} in {keyword}[{i}]"));
                    }
                }
            }
        }
    }
    let (status, detail) = if !composed {
        (
            Status::NotApplicable,
            "no tool's inputSchema uses oneOf, anyOf or allOf".to_owned(),
        )
    } else if found.is_empty() {
        (
            Status::Pass,
            "every property a branch constrains is declared at the root".to_owned(),
        )
    } else {
        (
            Status::Warn,
            format!(
                "constrained only inside a branch (not enforced when the branch does not match): {}",
                found.join("; ")
            ),
        )
    };
    Check::new(
        "schema-composition",
        "input-schema-root-properties",
        status,
        detail,
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_constraint_only_inside_a_branch_is_a_warning_one_at_the_root_passes() {
        let branchy = json!({"name": "move", "inputSchema": {"type": "object", "oneOf": [
            {"properties": {"to": {"type": "string"}}, "required": ["to"]},
            {"properties": {"id": {"type": "integer", "minimum": 1}}, "required": ["id"]}
        ]}});
        let c = composition(&[branchy]);
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.detail.contains("move: to in oneOf[0]") && c.detail.contains("move: id in oneOf[1]"),
            "{}",
            c.detail
        );
        let rooted = json!({"name": "move", "inputSchema": {"type": "object",
            "properties": {"to": {"type": "string"}, "id": {"type": "integer"}},
            "anyOf": [{"required": ["to"]}, {"required": ["id"]}]}});
        assert_eq!(composition(&[rooted]).status, Status::Pass);
        let plain = json!({"name": "p", "inputSchema": {"type": "object", "properties": {}}});
        assert_eq!(composition(&[plain]).status, Status::NotApplicable);
    }
}
