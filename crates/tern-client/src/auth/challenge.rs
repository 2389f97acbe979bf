//! `WWW-Authenticate` (RFC 9110 §11.6.1, RFC 6750 §3): the `Bearer`
//! challenge's parameters — `resource_metadata` (RFC 9728 §5.1), `scope`,
//! `error`.

/// A `Bearer` challenge a server answered with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Challenge {
    /// `resource_metadata`: where the Protected Resource Metadata is.
    pub resource_metadata: Option<String>,
    /// `scope`, split on spaces.
    pub scope: Option<Vec<String>>,
    /// `error` (`invalid_token`, `insufficient_scope`, …).
    pub error: Option<String>,
}

impl Challenge {
    /// Whether this is a step-up challenge (RFC 6750 §3.1
    /// `insufficient_scope`).
    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }

    /// The `Bearer` challenge among the header values, if any (other
    /// schemes and malformed parameters are skipped, never an error: the
    /// flow then falls back to the well-known locations).
    pub fn parse<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Self> {
        values.into_iter().find_map(parse_one)
    }
}

fn is_tchar(c: char) -> bool {
    c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c)
}

/// A cursor over one header value.
struct Cursor<'a>(&'a str);

impl<'a> Cursor<'a> {
    fn skip_ws(&mut self) {
        self.0 = self.0.trim_start_matches([' ', '\t']);
    }

    fn token(&mut self) -> Option<&'a str> {
        self.skip_ws();
        let end = self.0.find(|c| !is_tchar(c)).unwrap_or(self.0.len());
        if end == 0 {
            return None;
        }
        let (t, rest) = self.0.split_at(end);
        self.0 = rest;
        Some(t)
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if let Some(rest) = self.0.strip_prefix(c) {
            self.0 = rest;
            true
        } else {
            false
        }
    }

    fn quoted(&mut self) -> Option<String> {
        let mut out = String::new();
        let mut chars = self.0.char_indices();
        // The opening quote was eaten by the caller.
        while let Some((i, c)) = chars.next() {
            match c {
                '"' => {
                    self.0 = &self.0[i + 1..];
                    return Some(out);
                }
                '\\' => out.push(chars.next()?.1),
                c => out.push(c),
            }
        }
        None
    }
}

fn parse_one(value: &str) -> Option<Challenge> {
    let mut cur = Cursor(value);
    // Several challenges may share one header value: find `Bearer`.
    loop {
        let scheme = cur.token()?;
        let bearer = scheme.eq_ignore_ascii_case("bearer");
        let mut challenge = Challenge::default();
        loop {
            let save = cur.0;
            let Some(name) = cur.token() else {
                break;
            };
            if !cur.eat('=') {
                // The next challenge's scheme.
                cur.0 = save;
                break;
            }
            let value = if cur.eat('"') {
                cur.quoted()?
            } else {
                cur.token().unwrap_or_default().to_owned()
            };
            match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => challenge.resource_metadata = Some(value),
                "scope" => {
                    challenge.scope = Some(
                        value
                            .split(' ')
                            .filter(|s| !s.is_empty())
                            .map(str::to_owned)
                            .collect(),
                    );
                }
                "error" => challenge.error = Some(value),
                _ => {}
            }
            cur.eat(',');
        }
        if bearer {
            return Some(challenge);
        }
        cur.eat(',');
        if cur.0.trim().is_empty() {
            return None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Challenge;

    #[test]
    fn reads_the_bearer_parameters() {
        let c = Challenge::parse([
            r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write", resource_metadata="http://localhost:1/.well-known/oauth-protected-resource/mcp""#,
        ])
        .unwrap();
        assert!(c.insufficient_scope());
        assert_eq!(c.scope.unwrap(), ["mcp:basic", "mcp:write"]);
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("http://localhost:1/.well-known/oauth-protected-resource/mcp")
        );
    }

    #[test]
    fn finds_bearer_after_another_scheme_and_unquotes() {
        let c =
            Challenge::parse([r#"Basic realm="x", Bearer realm="a \"b\"", error=invalid_token"#])
                .unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.scope, None);
        assert_eq!(Challenge::parse(["Basic realm=\"x\""]), None);
        assert_eq!(Challenge::parse(["Bearer"]), Some(Challenge::default()));
    }

    #[test]
    fn malformed_values_are_skipped_not_fatal() {
        assert_eq!(Challenge::parse(["Bearer scope=\"unterminated"]), None);
        assert_eq!(Challenge::parse([""]), None);
        assert_eq!(Challenge::parse(["=,=,"]), None);
    }
}
