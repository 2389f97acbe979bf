//! One catalogue of every upstream that is up: tools and prompts under
//! `{prefix}{separator}{name}` (the name alone with prefix `""`), routed by a
//! lookup table — never by splitting a name on the separator —, resources
//! and templates routed by the upstream that lists them, then by its
//! `uriPrefixes`, then by template match.
//!
//! At start a collision (two upstreams' entries under one name), a name
//! over [`MAX_NAME_LEN`] characters or outside `[A-Za-z0-9_.-]` refuses the
//! catalogue with a message naming both sides; at run time (an upstream
//! came back with new entries) the newer entry is dropped and logged, so
//! what clients already use keeps its meaning. Every entry is passed on
//! with every member the upstream sent; only the name changes.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::config::{MAX_NAME_LEN, UpstreamConfig, valid_name_chars};
use crate::upstream::Listed;

/// Where a public name leads: the upstream (its index in the file) and the
/// name it knows the entry by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    /// The upstream's index among the configured ones.
    pub upstream: usize,
    /// The entry's name (or URI) at the upstream.
    pub name: String,
}

/// One list and its routes.
#[derive(Debug, Clone, Default)]
pub struct Section {
    /// The entries as listed to clients.
    pub items: Vec<Value>,
    /// Public name → route.
    pub routes: HashMap<String, Route>,
    /// Tools with `x-mcp-header` arguments: their header parameters.
    pub headers: HashMap<String, Vec<tern_protocol::header::HeaderParam>>,
    /// The names of upstreams that are down, as they last listed them:
    /// not listed, but a call to one fails fast with a retry hint rather
    /// than "unknown".
    pub dormant: HashMap<String, Route>,
}

impl Section {
    /// Where `name` leads: a listed entry, else a down upstream's.
    pub fn route(&self, name: &str) -> Option<&Route> {
        self.routes.get(name).or_else(|| self.dormant.get(name))
    }
}

/// The merged catalogue (module docs).
#[derive(Debug, Clone, Default)]
pub struct Catalogue {
    /// Tools.
    pub tools: Section,
    /// Prompts.
    pub prompts: Section,
    /// Resources (URIs unchanged).
    pub resources: Section,
    /// Resource templates (URI templates unchanged), in list order.
    pub templates: Vec<(Value, usize)>,
    /// `uriPrefixes`, longest first.
    pub prefixes: Vec<(String, usize)>,
    /// The least `ttlMs` any upstream's list said.
    pub ttl_ms: Option<u64>,
    /// Some upstream's list was `private`.
    pub private: bool,
}

/// At start, refuse; at run time, drop and log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strictness {
    /// At start: any collision or bad name refuses the catalogue.
    Refuse,
    /// At run time: the newer entry is dropped.
    Drop,
}

impl Catalogue {
    /// The catalogue of `upstreams` (each with its lists, `None` while
    /// down). `previous`: the catalogue before this change, whose entries
    /// win a collision at run time. `dormant`: what the upstreams that are
    /// down listed last, by index, routed but not listed.
    pub fn build(
        separator: &str,
        upstreams: &[(&UpstreamConfig, Option<Arc<Listed>>)],
        previous: Option<&Catalogue>,
        strictness: Strictness,
    ) -> Result<Self, String> {
        Self::build_with(separator, upstreams, &[], previous, strictness)
    }

    /// [`Self::build`], with the last lists of the upstreams that are down.
    pub fn build_with(
        separator: &str,
        upstreams: &[(&UpstreamConfig, Option<Arc<Listed>>)],
        dormant: &[(usize, Arc<Listed>)],
        previous: Option<&Catalogue>,
        strictness: Strictness,
    ) -> Result<Self, String> {
        let mut out = Self::default();
        out.add_dormant(separator, upstreams, dormant);
        // At run time entries already known go first, so a newcomer loses.
        let mut order: Vec<usize> = (0..upstreams.len()).collect();
        if let Some(previous) = previous {
            let known = |i: &usize| {
                !previous
                    .tools
                    .routes
                    .values()
                    .chain(previous.prompts.routes.values())
                    .any(|r| r.upstream == *i)
            };
            order.sort_by_key(known);
        }
        for &index in &order {
            let (config, listed) = &upstreams[index];
            for prefix in &config.uri_prefixes {
                out.prefixes.push((prefix.clone(), index));
            }
            let Some(listed) = listed else {
                continue;
            };
            if let Some(ttl) = listed.ttl_ms {
                out.ttl_ms = Some(out.ttl_ms.map_or(ttl, |t| t.min(ttl)));
            }
            out.private |= listed.private;
            for tool in &listed.tools {
                let Some(name) = tool["name"].as_str() else {
                    continue;
                };
                if !config.tool_allowed(name) {
                    continue;
                }
                add(
                    &mut out.tools,
                    "tool",
                    separator,
                    config,
                    index,
                    tool,
                    name,
                    upstreams,
                    strictness,
                )?;
            }
            for prompt in &listed.prompts {
                let Some(name) = prompt["name"].as_str() else {
                    continue;
                };
                add(
                    &mut out.prompts,
                    "prompt",
                    separator,
                    config,
                    index,
                    prompt,
                    name,
                    upstreams,
                    strictness,
                )?;
            }
            out.add_resources(config, index, listed, upstreams, strictness)?;
            for template in &listed.templates {
                if template["uriTemplate"].is_string() {
                    out.templates.push((template.clone(), index));
                }
            }
        }
        out.prefixes
            .sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        Ok(out)
    }

    /// The names a down upstream listed last: routed, not listed.
    fn add_dormant(
        &mut self,
        separator: &str,
        upstreams: &[(&UpstreamConfig, Option<Arc<Listed>>)],
        dormant: &[(usize, Arc<Listed>)],
    ) {
        for (index, listed) in dormant {
            let config = upstreams[*index].0;
            for (section, entries) in [
                (&mut self.tools, &listed.tools),
                (&mut self.prompts, &listed.prompts),
            ] {
                for name in entries.iter().filter_map(|e| e["name"].as_str()) {
                    section.dormant.insert(
                        config.public_name(separator, name),
                        Route {
                            upstream: *index,
                            name: name.to_owned(),
                        },
                    );
                }
            }
        }
    }

    /// An upstream's resources, by URI (not namespaced).
    fn add_resources(
        &mut self,
        config: &UpstreamConfig,
        index: usize,
        listed: &Listed,
        upstreams: &[(&UpstreamConfig, Option<Arc<Listed>>)],
        strictness: Strictness,
    ) -> Result<(), String> {
        for resource in &listed.resources {
            let Some(uri) = resource["uri"].as_str() else {
                continue;
            };
            if let Some(other) = self.resources.routes.get(uri) {
                let message = format!(
                    "the resource {uri} is listed by both `{}` and `{}`",
                    upstreams[other.upstream].0.name, config.name
                );
                match strictness {
                    Strictness::Refuse => return Err(message),
                    Strictness::Drop => {
                        tracing::warn!("{message}; the newer entry is dropped");
                        continue;
                    }
                }
            }
            self.resources.routes.insert(
                uri.to_owned(),
                Route {
                    upstream: index,
                    name: uri.to_owned(),
                },
            );
            self.resources.items.push(resource.clone());
        }
        Ok(())
    }

    /// The upstream that serves `uri`: the one that lists it, else the one
    /// whose `uriPrefixes` hold the longest prefix of it, else the first
    /// whose template matches it.
    pub fn resource_upstream(&self, uri: &str) -> Option<usize> {
        if let Some(route) = self.resources.routes.get(uri) {
            return Some(route.upstream);
        }
        if let Some((_, index)) = self
            .prefixes
            .iter()
            .find(|(p, _)| uri.starts_with(p.as_str()))
        {
            return Some(*index);
        }
        self.templates.iter().find_map(|(t, index)| {
            t["uriTemplate"]
                .as_str()
                .filter(|template| template_matches(template, uri))
                .map(|_| *index)
        })
    }
}

#[allow(
    clippy::too_many_arguments,
    reason = "one entry and everything its check names"
)]
fn add(
    section: &mut Section,
    what: &str,
    separator: &str,
    config: &UpstreamConfig,
    index: usize,
    entry: &Value,
    name: &str,
    upstreams: &[(&UpstreamConfig, Option<Arc<Listed>>)],
    strictness: Strictness,
) -> Result<(), String> {
    let public = config.public_name(separator, name);
    let problem = if public.chars().count() > MAX_NAME_LEN {
        Some(format!(
            "the {what} `{public}` of `{}` is longer than {MAX_NAME_LEN} characters; give the upstream a shorter prefix",
            config.name
        ))
    } else if !valid_name_chars(&public) {
        Some(format!(
            "the {what} `{public}` of `{}` has a character outside [A-Za-z0-9_.-]",
            config.name
        ))
    } else {
        section.routes.get(&public).map(|other| {
            format!(
                "the {what} `{public}` comes from both `{}` and `{}`; give one of them a prefix",
                upstreams[other.upstream].0.name, config.name
            )
        })
    };
    if let Some(message) = problem {
        return match strictness {
            Strictness::Refuse => Err(message),
            Strictness::Drop => {
                tracing::warn!("{message}; the newer entry is dropped");
                Ok(())
            }
        };
    }
    section.dormant.remove(&public);
    if let Some(params) = entry["inputSchema"]
        .as_object()
        .and_then(|schema| tern_protocol::header::header_params(schema).ok())
        .filter(|p| !p.is_empty())
    {
        section.headers.insert(public.clone(), params);
    }
    let mut listed = entry.clone();
    listed["name"] = Value::String(public.clone());
    section.items.push(listed);
    section.routes.insert(
        public,
        Route {
            upstream: index,
            name: name.to_owned(),
        },
    );
    Ok(())
}

/// `uri` fits the RFC 6570 `template` (level 1 and 2: `{var}` takes no `/`,
/// `{+var}` and `{#var}` take anything; other operators match one segment).
pub fn template_matches(template: &str, uri: &str) -> bool {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return false;
        };
        parts.push((rest[..open].to_owned(), None));
        let expr = &rest[open + 1..open + close];
        parts.push((String::new(), Some(expr.starts_with(['+', '#']))));
        rest = &rest[open + close + 1..];
    }
    parts.push((rest.to_owned(), None));
    fits(&parts, uri)
}

fn fits(parts: &[(String, Option<bool>)], uri: &str) -> bool {
    let Some(((literal, var), tail)) = parts.split_first() else {
        return uri.is_empty();
    };
    match var {
        None => uri
            .strip_prefix(literal.as_str())
            .is_some_and(|after| fits(tail, after)),
        Some(reserved) => {
            // At least one character, then the rest must fit.
            (1..=uri.len())
                .filter(|&n| uri.is_char_boundary(n))
                .any(|n| {
                    let taken = &uri[..n];
                    (*reserved || !taken.contains('/')) && fits(tail, &uri[n..])
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::GatewayConfig;

    #[allow(clippy::unnecessary_wraps, reason = "the shape Catalogue::build takes")]
    fn listed(tools: &[&str]) -> Option<Arc<Listed>> {
        Some(Arc::new(Listed {
            tools: tools
                .iter()
                .map(|n| json!({"name": n, "inputSchema": {"type": "object"}, "x-extra": 1}))
                .collect(),
            resources: vec![json!({"uri": "docs://a", "name": "a"})],
            templates: vec![json!({"uriTemplate": "files://{path}", "name": "f"})],
            ttl_ms: Some(9000),
            ..Listed::default()
        }))
    }

    fn config(file: &str) -> GatewayConfig {
        GatewayConfig::parse(file).unwrap()
    }

    #[test]
    fn names_are_namespaced_and_routed_by_table() {
        let c = config(
            r#"{"servers": {"a": {"command": "x"}, "b__c": {"command": "y", "deny": ["hidden"]}}}"#,
        );
        let ups = [
            (&c.upstreams[0], listed(&["t"])),
            (&c.upstreams[1], listed(&["t", "hidden"])),
        ];
        let cat = Catalogue::build("__", &ups[..1], None, Strictness::Refuse).unwrap();
        assert_eq!(cat.tools.items[0]["name"], "a__t");
        assert_eq!(cat.tools.items[0]["x-extra"], 1, "members kept");
        // A prefix holding the separator still routes right: by table.
        let cat = Catalogue::build(
            "__",
            &[(ups[0].0, ups[0].1.clone()), (ups[1].0, None)],
            None,
            Strictness::Refuse,
        )
        .unwrap();
        assert_eq!(cat.tools.routes.len(), 1);
        let only_b = [(ups[1].0, ups[1].1.clone())];
        let cat = Catalogue::build("__", &only_b, None, Strictness::Refuse).unwrap();
        assert_eq!(
            cat.tools.routes["b__c__t"],
            Route {
                upstream: 0,
                name: "t".into()
            }
        );
        assert!(!cat.tools.routes.contains_key("b__c__hidden"), "denied");
        assert_eq!(cat.ttl_ms, Some(9000));
    }

    #[test]
    fn collisions_are_refused_at_start_and_dropped_at_run_time() {
        let c = config(
            r#"{"servers": {"a": {"command": "x", "prefix": ""}, "b": {"command": "y", "prefix": ""}}}"#,
        );
        let a = (&c.upstreams[0], listed(&["t"]));
        let b = (&c.upstreams[1], listed(&["t"]));
        let err =
            Catalogue::build("__", &[a.clone(), b.clone()], None, Strictness::Refuse).unwrap_err();
        assert!(err.contains("`t` comes from both `a` and `b`"), "{err}");
        // b was there first: at run time a's returning entry loses.
        let before =
            Catalogue::build("__", &[(a.0, None), b.clone()], None, Strictness::Refuse).unwrap();
        let after = Catalogue::build("__", &[a, b], Some(&before), Strictness::Drop).unwrap();
        assert_eq!(after.tools.routes["t"].upstream, 1);
        assert_eq!(after.tools.items.len(), 1);
    }

    #[test]
    fn long_and_odd_names_are_refused() {
        let c = config(r#"{"servers": {"a": {"command": "x"}}}"#);
        let long = "n".repeat(126);
        let err = Catalogue::build(
            "__",
            &[(&c.upstreams[0], listed(&[&long]))],
            None,
            Strictness::Refuse,
        )
        .unwrap_err();
        assert!(err.contains("longer than 128"), "{err}");
        let ok = "n".repeat(125);
        assert!(
            Catalogue::build(
                "__",
                &[(&c.upstreams[0], listed(&[&ok]))],
                None,
                Strictness::Refuse
            )
            .is_ok()
        );
        let err = Catalogue::build(
            "__",
            &[(&c.upstreams[0], listed(&["a b"]))],
            None,
            Strictness::Refuse,
        )
        .unwrap_err();
        assert!(err.contains("outside"), "{err}");
    }

    #[test]
    fn resources_route_by_listing_then_prefix_then_template() {
        let c = config(
            r#"{"servers": {"a": {"command": "x"}, "b": {"command": "y", "uriPrefixes": ["docs://"]}}}"#,
        );
        let b_lists = Some(Arc::new(Listed {
            templates: vec![json!({"uriTemplate": "mail://{box}/{id}", "name": "m"})],
            ..Listed::default()
        }));
        let cat = Catalogue::build(
            "__",
            &[
                (&c.upstreams[0], listed(&["t"])),
                (&c.upstreams[1], b_lists),
            ],
            None,
            Strictness::Refuse,
        )
        .unwrap();
        assert_eq!(cat.resource_upstream("docs://a"), Some(0), "listed wins");
        assert_eq!(
            cat.resource_upstream("docs://other"),
            Some(1),
            "then the prefix"
        );
        assert_eq!(
            cat.resource_upstream("files://x"),
            Some(0),
            "then a template"
        );
        assert_eq!(cat.resource_upstream("mail://in/7"), Some(1));
        assert_eq!(
            cat.resource_upstream("files://x/y"),
            None,
            "{{path}} takes no slash"
        );
        assert_eq!(cat.resource_upstream("nope://"), None);
    }

    #[test]
    fn templates_match_as_rfc_6570_reads() {
        assert!(template_matches("a://{x}", "a://1"));
        assert!(!template_matches("a://{x}", "a://"));
        assert!(template_matches("a://{+path}", "a://1/2/3"));
        assert!(template_matches("a://{x}/b/{y}", "a://1/b/2"));
        assert!(!template_matches("a://{x}/b/{y}", "a://1/c/2"));
        assert!(!template_matches("a://{x", "a://1"));
    }
}
