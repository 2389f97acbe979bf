//! The gateway's file: the `mcpServers` (Claude Desktop, Cursor) or
//! `servers` (VS Code) JSON that `tern servers` reads — each upstream a
//! `command` with `args` and `env`, or a `url` with `headers` — plus optional
//! keys per upstream, and a top-level `gateway` object:
//!
//! ```json
//! {"gateway": {"separator": "__"},
//!  "mcpServers": {
//!    "demo": {"command": "tern", "args": ["serve", "demo", "--stdio"],
//!             "allow": ["provision_database"], "timeout": 30, "concurrency": 8},
//!    "docs": {"url": "https://docs.example.com/mcp", "headers": {"Authorization": "Bearer …"},
//!             "prefix": "", "era": "2025-11-25", "caFile": "ca.pem",
//!             "uriPrefixes": ["docs://"], "roots": ["file:///srv/docs"], "dedupe": true}}}
//! ```
//!
//! | key | meaning | default |
//! |---|---|---|
//! | `allow` / `deny` | tool names (the upstream's own) listed and callable / not | all / none |
//! | `prefix` | the namespace of its tools and prompts (`""`: none) | the upstream's name |
//! | `era` | `"2026-07-28"` or `"2025-11-25"`: no probe | probed |
//! | `timeout` | seconds one request to it may take | 60 |
//! | `healthInterval` | seconds between health probes of an HTTP upstream | 10 |
//! | `caFile` | PEM CAs trusted for its `https://` URL | the system's |
//! | `roots` | `file://` URIs answered to its `roots/list` | none |
//! | `uriPrefixes` | resource URIs it serves beyond those it lists | none |
//! | `concurrency` | requests in flight to it at most | unbounded |
//! | `dedupe` | the gateway relays a duplicated retry once ([`crate::dedupe`]) | `false` |
//! | `auth` | `"login"` (HTTP): `tern login`'s grant for its URL is its token | none |
//! | `principals` | callers who may see and call it (with `scopes`: either lets in) | everyone |
//! | `scopes` | access-token scopes any one of which lets a caller in | everyone |
//!
//! Values of `headers` and `env` may name the gateway's environment
//! variables, `${NAME}` (or `${env:NAME}`): the file need not hold the
//! secrets.
//!
//! `gateway.separator` (default `__`) joins prefix and name;
//! `gateway.heldTtl` (seconds, default 600) is how long a call to a
//! 2025-11-25 upstream that asked live is held for its retry, and
//! `gateway.maxHeldPerPrincipal` (default 16) how many are held per
//! principal at most ([`crate::bridge`]). Unknown members
//! (`type`, `disabled`, …) are ignored, as `tern servers` ignores them;
//! a known member of the wrong type is an error naming it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use serde_json::{Map, Value};

/// The most characters a gateway name (prefix, separator and name) may have.
pub const MAX_NAME_LEN: usize = 128;

/// The default separator of prefix and name.
pub const DEFAULT_SEPARATOR: &str = "__";

/// The default time one upstream request may take: 60 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How often an HTTP upstream that is up is probed by default: 10 s.
pub const DEFAULT_HEALTH_INTERVAL: Duration = Duration::from_secs(10);

/// The revision an upstream is pinned to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EraPin {
    /// 2026-07-28: spoken at once, never probed.
    Modern,
    /// 2025-11-25: `initialize` at once, never probed.
    Legacy,
}

/// How to reach an upstream. Its `Debug` shows the names of headers and
/// environment variables, never their values (credentials live there).
#[derive(Clone, PartialEq, Eq)]
pub enum Wire {
    /// A child process over stdio.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Added to its environment.
        env: IndexMap<String, String>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Sent on every request (credentials: never logged).
        headers: IndexMap<String, String>,
    },
}

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        /// A map shown by its keys, each value as `<redacted>`.
        struct Redacted<'a>(&'a IndexMap<String, String>);
        impl std::fmt::Debug for Redacted<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_map()
                    .entries(self.0.keys().map(|k| (k, format_args!("<redacted>"))))
                    .finish()
            }
        }
        match self {
            Self::Stdio { command, args, env } => f
                .debug_struct("Stdio")
                .field("command", command)
                .field("args", args)
                .field("env", &Redacted(env))
                .finish(),
            Self::Http { url, headers } => f
                .debug_struct("Http")
                .field("url", url)
                .field("headers", &Redacted(headers))
                .finish(),
        }
    }
}

/// One upstream of the file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct UpstreamConfig {
    /// Its name in the file.
    pub name: String,
    /// How to reach it.
    pub wire: Wire,
    /// Tools listed and callable (the upstream's own names); `None`: all.
    pub allow: Option<Vec<String>>,
    /// Tools neither listed nor callable.
    pub deny: Vec<String>,
    /// The namespace of its tools and prompts; `""`: none.
    pub prefix: String,
    /// The era it is pinned to; `None`: probed.
    pub era: Option<EraPin>,
    /// How long one request to it may take.
    pub timeout: Duration,
    /// How often an HTTP upstream that is up is probed.
    pub health_interval: Duration,
    /// CAs trusted for its `https://` URL.
    pub ca_file: Option<PathBuf>,
    /// What its `roots/list` is answered with.
    pub roots: Vec<String>,
    /// Resource URI prefixes routed to it beyond what it lists.
    pub uri_prefixes: Vec<String>,
    /// Requests in flight to it at most.
    pub concurrency: Option<usize>,
    /// The gateway relays a duplicated retry once ([`crate::dedupe`]).
    pub dedupe: bool,
    /// `"auth": "login"`: `tern login`'s grant for its URL is its bearer
    /// token.
    pub login: bool,
    /// Who may see and call it.
    pub access: Access,
}

/// Who may see and call an upstream's entries: a caller whose principal is
/// one of `principals`, or whose access token holds one of `scopes`;
/// everyone when both are empty. Others neither see its entries listed
/// nor reach them (they are unknown to them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    /// Principals let in (as the endpoint names them: a `--tokens` file's
    /// name, or an OAuth token's `ISSUER SUBJECT`).
    pub principals: Vec<String>,
    /// Scopes any one of which lets a caller in.
    pub scopes: Vec<String>,
}

impl Access {
    /// Everyone may.
    pub fn is_open(&self) -> bool {
        self.principals.is_empty() && self.scopes.is_empty()
    }

    /// The caller `principal` (with the scopes of its token) may.
    pub fn allows(&self, principal: Option<&str>, scopes: &[String]) -> bool {
        self.is_open()
            || principal.is_some_and(|p| self.principals.iter().any(|q| q == p))
            || scopes.iter().any(|s| self.scopes.contains(s))
    }
}

impl UpstreamConfig {
    /// The tool `name` (the upstream's own) may be listed and called.
    pub fn tool_allowed(&self, name: &str) -> bool {
        self.allow
            .as_ref()
            .is_none_or(|a| a.iter().any(|n| n == name))
            && !self.deny.iter().any(|n| n == name)
    }

    /// The gateway's name for the upstream's `name`.
    pub fn public_name(&self, separator: &str, name: &str) -> String {
        if self.prefix.is_empty() {
            name.to_owned()
        } else {
            format!("{}{separator}{name}", self.prefix)
        }
    }
}

/// The whole file.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct GatewayConfig {
    /// Joins prefix and name.
    pub separator: String,
    /// The upstreams, in file order.
    pub upstreams: Vec<UpstreamConfig>,
    /// `gateway.heldTtl`: seconds a call to a 2025 upstream that asked live
    /// is held for its retry (and the relayed states' TTL); `None`: the
    /// default ([`crate::bridge::BridgeOptions`]). Read at start only.
    pub held_ttl: Option<Duration>,
    /// `gateway.maxHeldPerPrincipal`: such calls held per principal at
    /// most; `None`: the default. Read at start only.
    pub max_held_per_principal: Option<usize>,
}

/// A name fits the gateway's alphabet, `[A-Za-z0-9_.-]`.
pub fn valid_name_chars(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A servers file's list of strings (`args`, `allow`, …): absent or `null`
/// is empty; anything but an array of strings is an error naming `what`.
///
/// # Errors
/// When the value is not an array of strings.
pub fn strings(v: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| format!("{what} must hold strings"))
            })
            .collect(),
        Some(_) => Err(format!("{what} must be an array of strings")),
    }
}

/// A servers file's object of strings (`env`, `headers`): numbers and
/// booleans are taken as their text; absent or `null` is empty.
///
/// # Errors
/// When the value is not an object of strings, numbers or booleans.
pub fn map(v: Option<&Value>, what: &str) -> Result<IndexMap<String, String>, String> {
    match v {
        None | Some(Value::Null) => Ok(IndexMap::new()),
        Some(Value::Object(o)) => o
            .iter()
            .map(|(k, x)| match x {
                Value::String(s) => Ok((k.clone(), s.clone())),
                Value::Number(n) => Ok((k.clone(), n.to_string())),
                Value::Bool(b) => Ok((k.clone(), b.to_string())),
                _ => Err(format!("{what}.{k} must be a string")),
            })
            .collect(),
        Some(_) => Err(format!("{what} must be an object of strings")),
    }
}

fn text(s: &Map<String, Value>, what: &str, k: &str) -> Result<Option<String>, String> {
    match s.get(k) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(v)) => Ok(Some(v.clone())),
        Some(_) => Err(format!("{what}.{k} must be a string")),
    }
}

fn upstream(name: &str, what: &str, s: &Map<String, Value>) -> Result<UpstreamConfig, String> {
    let wire = match (text(s, what, "command")?, text(s, what, "url")?) {
        (Some(_), Some(_)) => return Err(format!("{what} has both a command and a url; keep one")),
        (None, None) => return Err(format!("{what} has neither a command nor a url")),
        (Some(command), None) => Wire::Stdio {
            command,
            args: strings(s.get("args"), &format!("{what}.args"))?,
            env: expanded(
                map(s.get("env"), &format!("{what}.env"))?,
                &format!("{what}.env"),
            )?,
        },
        (None, Some(url)) => Wire::Http {
            url,
            headers: expanded(
                map(s.get("headers"), &format!("{what}.headers"))?,
                &format!("{what}.headers"),
            )?,
        },
    };
    let login = match text(s, what, "auth")?.as_deref() {
        None => false,
        Some("login") if matches!(wire, Wire::Http { .. }) => true,
        Some("login") => {
            return Err(format!(
                "{what}.auth `login` is for an HTTP upstream (a url)"
            ));
        }
        Some(other) => return Err(format!("{what}.auth `{other}` is not `login`")),
    };
    let access = Access {
        principals: strings(s.get("principals"), &format!("{what}.principals"))?,
        scopes: strings(s.get("scopes"), &format!("{what}.scopes"))?,
    };
    let allow = match s.get("allow") {
        None | Some(Value::Null) => None,
        v => Some(strings(v, &format!("{what}.allow"))?),
    };
    let prefix = text(s, what, "prefix")?.unwrap_or_else(|| name.to_owned());
    if !valid_name_chars(&prefix) {
        return Err(format!(
            "{what}.prefix `{prefix}` has a character outside [A-Za-z0-9_.-]"
        ));
    }
    let era = match text(s, what, "era")?.as_deref() {
        None => None,
        Some(tern_protocol::version::LATEST) => Some(EraPin::Modern),
        Some(tern_protocol::legacy::LATEST) => Some(EraPin::Legacy),
        Some(other) => {
            return Err(format!(
                "{what}.era `{other}` is neither {} nor {}",
                tern_protocol::version::LATEST,
                tern_protocol::legacy::LATEST
            ));
        }
    };
    let timeout = seconds(s, what, "timeout", DEFAULT_TIMEOUT, (0.0, "0"))?;
    let health_interval = seconds(
        s,
        what,
        "healthInterval",
        DEFAULT_HEALTH_INTERVAL,
        (0.0, "0"),
    )?;
    let concurrency = match s.get("concurrency") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .filter(|n| *n >= 1)
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| format!("{what}.concurrency must be a whole number, at least 1"))?,
        ),
    };
    let dedupe = match s.get("dedupe") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(format!("{what}.dedupe must be true or false")),
    };
    let roots = strings(s.get("roots"), &format!("{what}.roots"))?;
    if let Some(bad) = roots.iter().find(|r| !r.starts_with("file://")) {
        return Err(format!("{what}.roots: `{bad}` is not a file:// URI"));
    }
    Ok(UpstreamConfig {
        name: name.to_owned(),
        wire,
        allow,
        deny: strings(s.get("deny"), &format!("{what}.deny"))?,
        prefix,
        era,
        timeout,
        health_interval,
        ca_file: text(s, what, "caFile")?.map(PathBuf::from),
        roots,
        uri_prefixes: strings(s.get("uriPrefixes"), &format!("{what}.uriPrefixes"))?,
        concurrency,
        dedupe,
        login,
        access,
    })
}

/// The seconds of key `k` (`default` when absent): a number above `least.0`
/// (`least.1` as the message says it) up to a day.
fn seconds(
    s: &Map<String, Value>,
    what: &str,
    k: &str,
    default: Duration,
    least: (f64, &str),
) -> Result<Duration, String> {
    match s.get(k) {
        None | Some(Value::Null) => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|t| t.is_finite() && *t > least.0 && *t <= 86_400.0)
            .map(Duration::from_secs_f64)
            .ok_or_else(|| {
                format!(
                    "{what}.{k} must be a number of seconds, {} to 86400",
                    least.1
                )
            }),
    }
}

/// `values` with their `${NAME}` replaced.
fn expanded(
    values: IndexMap<String, String>,
    what: &str,
) -> Result<IndexMap<String, String>, String> {
    values
        .into_iter()
        .map(|(k, v)| {
            let v = crate::credentials::expand(&v, &format!("{what}.{k}"))?;
            Ok((k, v))
        })
        .collect()
}

impl GatewayConfig {
    /// The configuration in `text`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        let separator = match root.get("gateway").and_then(|g| g.get("separator")) {
            None | Some(Value::Null) => DEFAULT_SEPARATOR.to_owned(),
            Some(Value::String(s)) if !s.is_empty() && valid_name_chars(s) => s.clone(),
            Some(_) => {
                return Err(
                    "gateway.separator must be a non-empty string of [A-Za-z0-9_.-]".into(),
                );
            }
        };
        let gateway = root.get("gateway");
        let held_ttl = match gateway.and_then(|g| g.get("heldTtl")) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_f64() {
                Some(secs) if secs.is_finite() && secs > 0.0 && secs <= 86_400.0 => {
                    Some(Duration::from_secs_f64(secs))
                }
                _ => {
                    return Err("gateway.heldTtl must be seconds, above 0 and at most 86400".into());
                }
            },
        };
        let max_held_per_principal = match gateway.and_then(|g| g.get("maxHeldPerPrincipal")) {
            None | Some(Value::Null) => None,
            Some(v) => match v.as_u64() {
                Some(n) if n >= 1 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
                _ => {
                    return Err(
                        "gateway.maxHeldPerPrincipal must be an integer of at least 1".into(),
                    );
                }
            },
        };
        let mut found = false;
        let mut upstreams: Vec<UpstreamConfig> = Vec::new();
        for section in ["mcpServers", "servers"] {
            let Some(servers) = root.get(section) else {
                continue;
            };
            found = true;
            let servers = servers
                .as_object()
                .ok_or_else(|| format!("`{section}` must be an object of NAME: server"))?;
            for (name, s) in servers {
                let what = format!("{section}.{name}");
                let s = s
                    .as_object()
                    .ok_or_else(|| format!("{what} must be an object"))?;
                if upstreams.iter().any(|u| &u.name == name) {
                    return Err(format!(
                        "{what}: an upstream of that name is already defined"
                    ));
                }
                upstreams.push(upstream(name, &what, s)?);
            }
        }
        if !found {
            return Err(
                "no `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code) object".into(),
            );
        }
        if upstreams.is_empty() {
            return Err("no upstream servers in the file".into());
        }
        Ok(Self {
            separator,
            upstreams,
            held_ttl,
            max_held_per_principal,
        })
    }

    /// The configuration in the file at `path`.
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_desktop_files_are_read_with_the_gateway_keys() {
        let c = GatewayConfig::parse(
            r#"{"gateway": {"separator": "."},
                "mcpServers": {"demo": {"command": "tern", "args": ["serve", "demo", "--stdio"],
                    "allow": ["a", "b"], "deny": ["b"], "timeout": 2.5, "concurrency": 4, "type": "stdio"}},
                "servers": {"docs": {"url": "https://d/mcp", "headers": {"Authorization": "Bearer x"},
                    "prefix": "", "era": "2025-11-25", "caFile": "ca.pem", "roots": ["file:///srv"],
                    "uriPrefixes": ["docs://"], "dedupe": true}}}"#,
        )
        .unwrap();
        assert_eq!(c.separator, ".");
        let demo = &c.upstreams[0];
        assert_eq!(demo.prefix, "demo");
        assert!(demo.tool_allowed("a") && !demo.tool_allowed("b") && !demo.tool_allowed("c"));
        assert_eq!(demo.timeout, Duration::from_millis(2500));
        assert_eq!(demo.concurrency, Some(4));
        assert_eq!(demo.public_name(".", "a"), "demo.a");
        let docs = &c.upstreams[1];
        assert_eq!(docs.public_name("__", "read"), "read");
        assert_eq!(docs.era, Some(EraPin::Legacy));
        assert!(docs.dedupe);
        assert_eq!(docs.uri_prefixes, ["docs://"]);
        assert!(
            matches!(&docs.wire, Wire::Http { headers, .. } if headers["Authorization"] == "Bearer x")
        );
    }

    #[test]
    fn debug_output_names_headers_and_env_but_never_their_values() {
        let c = GatewayConfig::parse(
            r#"{"mcpServers": {
                "http": {"url": "https://d/mcp", "headers": {"Authorization": "Bearer sekrit-1"}},
                "stdio": {"command": "srv", "args": ["--stdio"], "env": {"API_KEY": "sekrit-2"}}}}"#,
        )
        .unwrap();
        let shown = format!("{c:?}");
        for name in [
            "Authorization",
            "API_KEY",
            "https://d/mcp",
            "srv",
            "--stdio",
        ] {
            assert!(shown.contains(name), "{name} not in {shown}");
        }
        assert!(!shown.contains("sekrit"), "a value shown: {shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn credentials_come_from_the_environment_and_access_from_the_lists() {
        let c = GatewayConfig::parse(
            r#"{"servers": {
                "api": {"url": "http://h/mcp", "headers": {"X-Path": "${PATH}", "X-Cost": "$$5"},
                        "auth": "login", "scopes": ["ops"]},
                "tool": {"command": "t", "env": {"P": "${env:PATH}"}, "principals": ["bob"]},
                "open": {"command": "o"}}}"#,
        )
        .unwrap();
        let path = std::env::var("PATH").unwrap();
        let api = &c.upstreams[0];
        assert!(api.login);
        assert!(matches!(&api.wire, Wire::Http { headers, .. }
            if headers["X-Path"] == path && headers["X-Cost"] == "$5"));
        let tool = &c.upstreams[1];
        assert!(!tool.login);
        assert!(matches!(&tool.wire, Wire::Stdio { env, .. } if env["P"] == path));
        let scoped = ["ops".to_owned()];
        assert!(api.access.allows(None, &scoped));
        assert!(!api.access.allows(Some("bob"), &[]));
        assert!(tool.access.allows(Some("bob"), &[]));
        assert!(!tool.access.allows(Some("alice"), &scoped));
        assert!(!tool.access.allows(None, &[]));
        assert!(c.upstreams[2].access.is_open());
        assert!(c.upstreams[2].access.allows(None, &[]));
    }

    #[test]
    fn each_bad_key_is_named() {
        for (file, says) in [
            ("{}", "mcpServers"),
            (r#"{"servers": {}}"#, "no upstream"),
            (r#"{"servers": {"x": {}}}"#, "neither"),
            (
                r#"{"servers": {"x": {"command": "a", "url": "b"}}}"#,
                "both",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "era": "2024"}}}"#,
                "x.era",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "timeout": -1}}}"#,
                "x.timeout",
            ),
            (
                r#"{"servers": {"x": {"url": "http://h/mcp", "healthInterval": 0}}}"#,
                "x.healthInterval",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "concurrency": 0}}}"#,
                "x.concurrency",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "dedupe": "yes"}}}"#,
                "x.dedupe",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "prefix": "a b"}}}"#,
                "x.prefix",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "roots": ["/srv"]}}}"#,
                "file://",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "allow": "t"}}}"#,
                "x.allow",
            ),
            (
                r#"{"gateway": {"separator": "/"}, "servers": {"x": {"command": "a"}}}"#,
                "separator",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "a"}}, "servers": {"x": {"command": "b"}}}"#,
                "already",
            ),
            ("nope", "not JSON"),
            (
                r#"{"servers": {"x": {"command": "a", "auth": "login"}}}"#,
                "for an HTTP upstream",
            ),
            (
                r#"{"servers": {"x": {"url": "http://h/mcp", "auth": "oauth"}}}"#,
                "x.auth",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "principals": "bob"}}}"#,
                "x.principals",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "scopes": [1]}}}"#,
                "x.scopes",
            ),
            (
                r#"{"servers": {"x": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${TERN_GATEWAY_TEST_NEVER_SET}"}}}}"#,
                "servers.x.headers.Authorization: the environment variable TERN_GATEWAY_TEST_NEVER_SET is not set",
            ),
        ] {
            let err = GatewayConfig::parse(file).unwrap_err();
            assert!(err.contains(says), "{file}: {err}");
        }
    }
}
