//! Human-readable output of results (the `--json` output is the results
//! themselves). Every string of the server's passes [`tern::safe`]: names,
//! titles and descriptions in lists as one line ([`flat`]), results as text.

use std::fmt::Write as _;

use serde_json::Value;
use tern_protocol::JsonObject;
use tern_protocol::content::{ContentBlock, ResourceContents, Role};
use tern_protocol::discover::DiscoverResult;
use tern_protocol::prompt::{GetPromptResult, Prompt};
use tern_protocol::resource::{ReadResourceResult, Resource, ResourceTemplate};
use tern_protocol::tool::{CallToolResult, Tool};

/// A server's string for a one-line field of a list: white space (newlines
/// included) folded to single spaces, the rest made safe
/// ([`tern::safe::line`]).
fn flat(s: &str) -> String {
    let folded: Vec<&str> = s.split_whitespace().collect();
    tern::safe::line(&folded.join(" ")).into_owned()
}

/// A server's text (a result, instructions), made safe
/// ([`tern::safe::text`]).
fn text(s: &str) -> std::borrow::Cow<'_, str> {
    tern::safe::text(s)
}

/// The arguments of an input schema: `name* type  description` lines.
fn schema_arguments(schema: &JsonObject, out: &mut String) {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(props) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, p) in props {
        let kind = match p.get("type") {
            Some(Value::String(t)) => t.clone(),
            Some(Value::Array(ts)) => ts
                .iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("|"),
            _ if p.get("enum").is_some() || p.get("oneOf").is_some() => "choice".into(),
            _ => "any".into(),
        };
        let mark = if required.contains(&name.as_str()) {
            "*"
        } else {
            ""
        };
        let _ = write!(out, "    {}{mark}: {}", flat(name), flat(&kind));
        if let Some(d) = p.get("description").and_then(Value::as_str) {
            let _ = write!(out, "  {}", flat(d));
        }
        out.push('\n');
    }
}

/// `tern tools`.
pub(crate) fn tools(tools: &[Tool]) -> String {
    let mut out = String::new();
    if tools.is_empty() {
        out.push_str("(no tools)\n");
    }
    for t in tools {
        let _ = write!(out, "{}", flat(&t.name));
        if let Some(title) = t
            .title
            .as_deref()
            .or(t.annotations.as_ref().and_then(|a| a.title.as_deref()))
        {
            let _ = write!(out, " ({})", flat(title));
        }
        if let Some(d) = &t.description {
            let _ = write!(out, "  {}", flat(d));
        }
        out.push('\n');
        schema_arguments(&t.input_schema, &mut out);
    }
    if tools
        .iter()
        .any(|t| t.input_schema.get("required").is_some())
    {
        out.push_str("(* required)\n");
    }
    out
}

/// `tern prompts`.
pub(crate) fn prompts(prompts: &[Prompt]) -> String {
    let mut out = String::new();
    if prompts.is_empty() {
        out.push_str("(no prompts)\n");
    }
    for p in prompts {
        let _ = write!(out, "{}", flat(&p.name));
        if let Some(title) = &p.title {
            let _ = write!(out, " ({})", flat(title));
        }
        if let Some(d) = &p.description {
            let _ = write!(out, "  {}", flat(d));
        }
        out.push('\n');
        for a in p.arguments.iter().flatten() {
            let mark = if a.required == Some(true) { "*" } else { "" };
            let _ = write!(out, "    {}{mark}", flat(&a.name));
            if let Some(d) = &a.description {
                let _ = write!(out, "  {}", flat(d));
            }
            out.push('\n');
        }
    }
    out
}

/// `tern resources`.
pub(crate) fn resources(resources: &[Resource], templates: &[ResourceTemplate]) -> String {
    let mut out = String::new();
    if resources.is_empty() && templates.is_empty() {
        out.push_str("(no resources)\n");
    }
    for r in resources {
        let _ = write!(
            out,
            "{}  {}",
            flat(&r.uri),
            flat(r.title.as_deref().unwrap_or(&r.name))
        );
        if let Some(m) = &r.mime_type {
            let _ = write!(out, " [{}]", flat(m));
        }
        if let Some(d) = &r.description {
            let _ = write!(out, "  {}", flat(d));
        }
        out.push('\n');
    }
    if !templates.is_empty() {
        out.push_str("templates:\n");
    }
    for t in templates {
        let _ = write!(
            out,
            "  {}  {}",
            flat(&t.uri_template),
            flat(t.title.as_deref().unwrap_or(&t.name))
        );
        if let Some(m) = &t.mime_type {
            let _ = write!(out, " [{}]", flat(m));
        }
        if let Some(d) = &t.description {
            let _ = write!(out, "  {}", flat(d));
        }
        out.push('\n');
    }
    out
}

/// `tern discover`.
pub(crate) fn discover(d: &DiscoverResult) -> String {
    let mut out = String::new();
    if let Some(info) = d.meta.as_ref().and_then(|m| m.server_info.as_ref()) {
        let _ = write!(out, "{} {}", flat(&info.name), flat(&info.version));
        if let Some(t) = &info.title {
            let _ = write!(out, " — {}", flat(t));
        }
        out.push('\n');
        if let Some(desc) = &info.description {
            let _ = writeln!(out, "  {}", flat(desc));
        }
    }
    let _ = writeln!(
        out,
        "protocol versions: {}",
        flat(&d.supported_versions.join(", "))
    );
    let caps = serde_json::to_value(&d.capabilities).unwrap_or_default();
    let list: Vec<String> = caps
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| {
            let subs: Vec<&str> = v
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(_, s)| !matches!(s, Value::Bool(false) | Value::Null))
                .map(|(s, _)| s.as_str())
                .collect();
            if subs.is_empty() {
                k.clone()
            } else {
                format!("{k} ({})", subs.join(", "))
            }
        })
        .collect();
    let _ = writeln!(
        out,
        "capabilities: {}",
        if list.is_empty() {
            "none".into()
        } else {
            flat(&list.join(", "))
        }
    );
    if let Some(i) = &d.instructions {
        let _ = writeln!(out, "instructions: {}", text(i));
    }
    out
}

fn resource_contents(c: &ResourceContents, out: &mut String) {
    match c {
        ResourceContents::Text(t) => {
            out.push_str(&text(&t.text));
            if !t.text.ends_with('\n') {
                out.push('\n');
            }
        }
        ResourceContents::Blob(b) => {
            let _ = writeln!(
                out,
                "[binary {}, {} base64 characters; use --json for the data]",
                flat(b.mime_type.as_deref().unwrap_or("data")),
                b.blob.len()
            );
        }
    }
}

/// One content block as text.
fn block(b: &ContentBlock, out: &mut String) {
    match b {
        ContentBlock::Text(t) => {
            out.push_str(&text(&t.text));
            if !t.text.ends_with('\n') {
                out.push('\n');
            }
        }
        ContentBlock::Image(i) => {
            let _ = writeln!(
                out,
                "[image {}; use --json for the data]",
                flat(&i.mime_type)
            );
        }
        ContentBlock::Audio(a) => {
            let _ = writeln!(
                out,
                "[audio {}; use --json for the data]",
                flat(&a.mime_type)
            );
        }
        ContentBlock::ResourceLink(r) => {
            let _ = writeln!(out, "[resource {} {}]", flat(&r.uri), flat(&r.name));
        }
        ContentBlock::Resource(e) => {
            let _ = writeln!(out, "[resource {}]", flat(e.resource.uri()));
            resource_contents(&e.resource, out);
        }
    }
}

/// `tern call`: the content blocks, or the structured content when there
/// are none.
pub(crate) fn call(r: &CallToolResult) -> String {
    let mut out = String::new();
    for b in &r.content {
        block(b, &mut out);
    }
    if r.content.is_empty()
        && let Some(s) = &r.structured_content
    {
        out.push_str(&tern::safe::json(s));
        out.push('\n');
    }
    out
}

/// `tern prompt`: each message under its role.
pub(crate) fn prompt(r: &GetPromptResult) -> String {
    let mut out = String::new();
    if let Some(d) = &r.description {
        let _ = writeln!(out, "{}\n", text(d));
    }
    for m in &r.messages {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let _ = writeln!(out, "[{role}]");
        block(&m.content, &mut out);
    }
    out
}

/// `tern read`.
pub(crate) fn read(r: &ReadResourceResult) -> String {
    let mut out = String::new();
    for c in &r.contents {
        resource_contents(c, &mut out);
    }
    out
}
