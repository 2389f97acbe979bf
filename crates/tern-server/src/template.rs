//! Matching URIs against RFC 6570 URI templates, for resource templates.
//!
//! Supported: literal text, `{var}` (simple expansion: one value without `/`,
//! `?` or `#`, percent-decoded) and `{+var}` (reserved expansion: any text,
//! `/` included). Other operators are refused when the template is
//! registered.

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Var { name: String, reserved: bool },
}

/// A parsed URI template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses `template`, or says why it is not supported.
    pub(crate) fn parse(template: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while !rest.is_empty() {
            if let Some(start) = rest.find('{') {
                if start > 0 {
                    parts.push(Part::Literal(rest[..start].to_owned()));
                }
                let end = rest[start..].find('}').ok_or("unclosed `{`")? + start;
                let expr = &rest[start + 1..end];
                let (reserved, name) = match expr.strip_prefix('+') {
                    Some(name) => (true, name),
                    None => (false, expr),
                };
                if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                    return Err(format!(
                        "unsupported expression `{{{expr}}}`: only {{var}} and {{+var}} are supported"
                    ));
                }
                if matches!(parts.last(), Some(Part::Var { .. })) {
                    return Err("two variables must be separated by literal text".into());
                }
                parts.push(Part::Var {
                    name: name.to_owned(),
                    reserved,
                });
                rest = &rest[end + 1..];
            } else {
                if rest.contains('}') {
                    return Err("unopened `}`".into());
                }
                parts.push(Part::Literal(rest.to_owned()));
                rest = "";
            }
        }
        Ok(Self { parts })
    }

    /// The variables of `uri`, when it matches.
    pub(crate) fn matches(&self, uri: &str) -> Option<BTreeMap<String, String>> {
        let mut vars = BTreeMap::new();
        match_parts(&self.parts, uri, &mut vars).then_some(vars)
    }
}

fn match_parts(parts: &[Part], input: &str, vars: &mut BTreeMap<String, String>) -> bool {
    match parts.split_first() {
        None => input.is_empty(),
        Some((Part::Literal(lit), rest)) => input
            .strip_prefix(lit.as_str())
            .is_some_and(|tail| match_parts(rest, tail, vars)),
        Some((Part::Var { name, reserved }, rest)) => {
            // Try every split point, shortest value first; values are never empty.
            let ends = input
                .char_indices()
                .skip(1)
                .map(|(i, _)| i)
                .chain(std::iter::once(input.len()));
            for end in ends.filter(|&e| e > 0) {
                let value = &input[..end];
                if !*reserved && value.contains(['/', '?', '#']) {
                    break;
                }
                if match_parts(rest, &input[end..], vars) {
                    vars.insert(name.clone(), percent_decode(value));
                    return true;
                }
            }
            false
        }
    }
}

fn percent_decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let Some(b) = value
                .get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| value.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(template: &str, uri: &str) -> Option<Vec<(String, String)>> {
        UriTemplate::parse(template)
            .unwrap()
            .matches(uri)
            .map(|v| v.into_iter().collect())
    }

    #[test]
    fn matches_simple_and_reserved_variables() {
        assert_eq!(
            vars("test://template/{id}/data", "test://template/123/data"),
            Some(vec![("id".into(), "123".into())])
        );
        assert_eq!(
            vars("test://template/{id}/data", "test://template/1/2/data"),
            None
        );
        assert_eq!(
            vars("file:///{+path}", "file:///src/main.rs"),
            Some(vec![("path".into(), "src/main.rs".into())])
        );
        assert_eq!(
            vars("db://{name}", "db://my%20db"),
            Some(vec![("name".into(), "my db".into())])
        );
        assert_eq!(
            vars("db://{a}-{b}", "db://x-y-z"),
            Some(vec![("a".into(), "x".into()), ("b".into(), "y-z".into())])
        );
        assert_eq!(vars("db://{name}", "db://"), None);
        assert_eq!(vars("db://{name}", "other://x"), None);
    }

    #[test]
    fn refuses_unsupported_templates() {
        assert!(UriTemplate::parse("x://{/path}").is_err());
        assert!(UriTemplate::parse("x://{a,b}").is_err());
        assert!(UriTemplate::parse("x://{a}{b}").is_err());
        assert!(UriTemplate::parse("x://{a").is_err());
        assert!(UriTemplate::parse("x://a}").is_err());
    }
}
