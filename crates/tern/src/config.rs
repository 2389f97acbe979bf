//! Servers by name, read from the JSON that desktop hosts use:
//!
//! ```json
//! {"mcpServers": {"demo": {"command": "tern", "args": ["serve", "demo", "--stdio"],
//!                          "env": {"TERN_LOG": "info"}},
//!                 "remote": {"url": "http://127.0.0.1:8080/mcp",
//!                            "headers": {"Authorization": "Bearer ..."}}}}
//! ```
//!
//! `mcpServers` is Claude Desktop's and Cursor's key, `servers` VS Code's;
//! both are read. Each server has a `command` (with `args` and `env`) or a
//! `url` (with `headers`); other members (`type`, `disabled`, …) are ignored.
//! VS Code's `${input:…}` and `${env:…}` placeholders are not expanded.
//!
//! The default file is `tern/servers.json` in the user's config folder
//! (`$XDG_CONFIG_HOME`, else `~/.config`; `~/Library/Application Support` on
//! macOS; `%APPDATA%` on Windows); `--config FILE` or `TERN_CONFIG` name
//! another.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;
use tern_gateway::config::{map, strings};

/// One server of a config file.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Entry {
    /// The program, for a stdio server.
    pub(crate) command: Option<String>,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// Its added environment.
    pub(crate) env: IndexMap<String, String>,
    /// The endpoint, for an HTTP server.
    pub(crate) url: Option<String>,
    /// Headers sent to it.
    pub(crate) headers: IndexMap<String, String>,
}

/// The default config file, if a config folder is known.
pub(crate) fn default_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TERN_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    tern::login::folder().map(|folder| folder.join("servers.json"))
}

/// The servers of a config file's text.
pub(crate) fn parse(text: &str) -> Result<IndexMap<String, Entry>, String> {
    let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let mut found = false;
    let mut out = IndexMap::new();
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
            let text = |k: &str| -> Result<Option<String>, String> {
                match s.get(k) {
                    None | Some(Value::Null) => Ok(None),
                    Some(Value::String(v)) => Ok(Some(v.clone())),
                    Some(_) => Err(format!("{what}.{k} must be a string")),
                }
            };
            let entry = Entry {
                command: text("command")?,
                args: strings(s.get("args"), &format!("{what}.args"))?,
                env: map(s.get("env"), &format!("{what}.env"))?,
                url: text("url")?,
                headers: map(s.get("headers"), &format!("{what}.headers"))?,
            };
            match (&entry.command, &entry.url) {
                (Some(_), Some(_)) => {
                    return Err(format!("{what} has both a command and a url; keep one"));
                }
                (None, None) => return Err(format!("{what} has neither a command nor a url")),
                _ => {}
            }
            out.insert(name.clone(), entry);
        }
    }
    if found {
        Ok(out)
    } else {
        Err("no `mcpServers` (Claude Desktop, Cursor) or `servers` (VS Code) object".into())
    }
}

/// The servers of the file at `path`.
pub(crate) fn load(path: &Path) -> Result<IndexMap<String, Entry>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the config file {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `KEY=***`: a value never printed.
pub(crate) fn redacted(map: &IndexMap<String, String>, sep: &str) -> Vec<String> {
    map.keys().map(|k| format!("{k}{sep}***")).collect()
}

/// `tern servers`: one server a line, values redacted.
pub(crate) fn listing(path: &Path, servers: &IndexMap<String, Entry>) -> String {
    let mut out = format!("{} ({} servers)\n", path.display(), servers.len());
    for (name, e) in servers {
        let mut line = format!("  {name}: ");
        if let Some(url) = &e.url {
            line.push_str(url);
            for h in redacted(&e.headers, ": ") {
                let _ = write!(line, "  [{h}]");
            }
        } else if let Some(command) = &e.command {
            let mut words = vec![command.clone()];
            words.extend(e.args.iter().cloned());
            line.push_str(&words.join(" "));
            for v in redacted(&e.env, "=") {
                let _ = write!(line, "  [{v}]");
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_desktop_and_vs_code_files_are_read() {
        let s = parse(r#"{"mcpServers": {"a": {"command": "tern", "args": ["serve", "demo", "--stdio"], "env": {"K": "secret"}}},
                         "servers": {"b": {"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x"}}}}"#).unwrap();
        assert_eq!(s["a"].command.as_deref(), Some("tern"));
        assert_eq!(s["a"].args, ["serve", "demo", "--stdio"]);
        assert_eq!(s["b"].headers["Authorization"], "Bearer x");
        let l = listing(Path::new("f.json"), &s);
        assert!(l.contains("a: tern serve demo --stdio  [K=***]"), "{l}");
        assert!(l.contains("[Authorization: ***]"), "{l}");
        assert!(!l.contains("secret") && !l.contains("Bearer"), "{l}");
    }

    #[test]
    fn bad_files_say_what_is_wrong() {
        assert!(parse("{}").unwrap_err().contains("mcpServers"));
        assert!(
            parse(r#"{"servers": {"x": {}}}"#)
                .unwrap_err()
                .contains("neither")
        );
        assert!(
            parse(r#"{"servers": {"x": {"command": "a", "args": [1]}}}"#)
                .unwrap_err()
                .contains("x.args")
        );
        assert!(parse("nope").unwrap_err().contains("not JSON"));
    }
}
