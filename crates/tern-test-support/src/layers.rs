//! The floors of a crate, checked from its sources.
//!
//! A crate names its floors, lowest first, as module paths (`"engine"`
//! covers `engine` and every module below it, unless a longer path is
//! listed too). [`check`] reads every `.rs` file under `src/` (the
//! `#[cfg(test)] mod tests` part of a file aside) and each path that names
//! another module of the crate — in a `use` line, a `use crate::{…}` group,
//! or inline (`crate::a::b::f()`, `super::x`) — and fails on one that runs
//! up a floor: the lower module would then depend on the higher, and the
//! two would form a circle the floors exist to prevent. Circles allowed on
//! purpose are listed with why ([`Circle`]); the check fails if one is no
//! longer there, so the list stays true.
//!
//! The reading is lexical, not a compiler's: comments are dropped first,
//! and `crate::` inside a string literal would count (none does today).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// An import allowed to run up a floor, and why.
#[derive(Debug, Clone, Copy)]
pub struct Circle {
    /// The module that imports (`"engine::runner"`).
    pub from: &'static str,
    /// The module it imports, on a higher floor (`"task::runner"`).
    pub to: &'static str,
    /// Why the two cannot be one floor or the other way round.
    pub why: &'static str,
}

/// One file's module path in the crate (`src/engine/mod.rs` → `engine`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let parts: Vec<&str> = parts
        .iter()
        .map(String::as_str)
        .filter(|p| *p != "mod")
        .collect();
    match parts.as_slice() {
        ["lib" | "main"] | [] => String::new(),
        _ => parts.join("::"),
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text of a file without its comments and its test module.
fn code_of(text: &str) -> String {
    let text = text
        .find("#[cfg(test)]\nmod tests")
        .map_or(text, |i| &text[..i]);
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every module path `code` names, resolved against `known` (the longest
/// known prefix), as seen from module `me`.
fn targets(code: &str, me: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let resolve = |path: &str, out: &mut BTreeSet<String>| {
        let parts: Vec<&str> = path.split("::").collect();
        for n in (1..=parts.len()).rev() {
            let candidate = parts[..n].join("::");
            if known.contains(&candidate) {
                out.insert(candidate);
                return;
            }
        }
    };
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == ':';
    for (prefix, base) in [("crate::", String::new()), ("super::", parent(me))] {
        let mut rest = code;
        while let Some(i) = rest.find(prefix) {
            let before = rest[..i].chars().next_back();
            rest = &rest[i + prefix.len()..];
            if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                continue;
            }
            if rest.starts_with('{') {
                // A group: `crate::{a::b, c}` (nested groups read flat).
                let end = rest.find('}').unwrap_or(rest.len());
                for item in rest[1..end].split([',', '{']) {
                    let item = item.trim();
                    if !item.is_empty() {
                        resolve(&join(&base, item), &mut out);
                    }
                }
                continue;
            }
            let path: String = rest.chars().take_while(|c| ident(*c)).collect();
            let path = path.trim_end_matches(':');
            if !path.is_empty() {
                resolve(&join(&base, path), &mut out);
            }
        }
    }
    // A module's own parent counts: a child listed on a lower floor than
    // its parent must not use it.
    out.remove(me);
    out.retain(|t| !t.is_empty());
    out
}

fn parent(me: &str) -> String {
    me.rsplit_once("::")
        .map_or_else(String::new, |(p, _)| p.to_owned())
}

fn join(base: &str, path: &str) -> String {
    if base.is_empty() {
        path.to_owned()
    } else {
        format!("{base}::{path}")
    }
}

/// The floor of `module`: that of its longest listed prefix.
fn floor_of(module: &str, floors: &[&[&str]]) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (floor, names) in floors.iter().enumerate() {
        for name in *names {
            let covers = module == *name || module.starts_with(&format!("{name}::"));
            if covers && best.is_none_or(|(len, _)| name.len() > len) {
                best = Some((name.len(), floor));
            }
        }
    }
    best.map(|(_, floor)| floor)
}

/// Checks the crate whose manifest folder is `manifest_dir` against
/// `floors` (lowest first); `circles` are the imports allowed up a floor.
/// Every module must sit on a floor (the crate root aside), every import
/// must go down or stay level, and every allowed circle must still exist.
///
/// # Panics
///
/// With every finding, when there is one.
pub fn check(manifest_dir: &str, floors: &[&[&str]], circles: &[Circle]) {
    let src = Path::new(manifest_dir).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    all.sort();
    let modules: Vec<(String, PathBuf)> = all
        .iter()
        .map(|f| (module_of(&src, f), f.clone()))
        .collect();
    let known: BTreeSet<String> = modules.iter().map(|(m, _)| m.clone()).collect();
    let mut findings = String::new();
    let mut used = BTreeSet::new();
    for (module, file) in &modules {
        if module.is_empty() {
            continue;
        }
        let Some(mine) = floor_of(module, floors) else {
            let _ = writeln!(findings, "{module} ({}) is on no floor", file.display());
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap_or_default();
        for target in targets(&code_of(&text), module, &known) {
            let Some(theirs) = floor_of(&target, floors) else {
                continue;
            };
            if theirs <= mine {
                continue;
            }
            if let Some(c) = circles.iter().find(|c| {
                c.from == module && (target == c.to || target.starts_with(&format!("{}::", c.to)))
            }) {
                used.insert((c.from, c.to));
                continue;
            }
            let _ = writeln!(
                findings,
                "{module} (floor {mine}) uses {target} (floor {theirs}): an import up a floor"
            );
        }
    }
    for c in circles {
        if !used.contains(&(c.from, c.to)) {
            let _ = writeln!(
                findings,
                "the allowed circle {} -> {} is gone: take it off the list",
                c.from, c.to
            );
        }
    }
    assert!(findings.is_empty(), "layering:\n{findings}");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn paths_resolve_to_the_longest_known_module() {
        let k = known(&[
            "engine",
            "engine::guard",
            "engine::runner",
            "task",
            "task::runner",
            "error",
        ]);
        let code = "use crate::engine::runner::Leg;\nuse crate::{error::Error, task};\nfn f() { crate::task::runner::go(); super::guard::x(); }";
        let t = targets(code, "engine::guard", &k);
        assert_eq!(
            t,
            known(&["engine::runner", "error", "task", "task::runner"])
        );
        // `super::guard` from engine::guard is engine::guard itself: dropped.
        let t = targets("use super::Engine;", "engine::guard", &k);
        assert_eq!(t, known(&["engine"]), "a parent counts");
    }

    #[test]
    fn comments_and_tests_are_not_read() {
        let code = code_of(
            "use a;\n// crate::task\nfn f() {}\n#[cfg(test)]\nmod tests {\n use crate::task; }\n",
        );
        assert!(!code.contains("crate::task"), "{code}");
    }

    #[test]
    fn a_module_takes_the_floor_of_its_longest_listed_prefix() {
        let floors: &[&[&str]] = &[&["engine"], &["engine::api"]];
        assert_eq!(floor_of("engine::runner", floors), Some(0));
        assert_eq!(floor_of("engine::api::x", floors), Some(1));
        assert_eq!(floor_of("other", floors), None);
    }

    /// A crate of three files in a scratch folder: `low` uses `high`.
    fn scratch(name: &str, low: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tern-layers-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join("src/lib.rs"), "mod low;\nmod high;\n").unwrap();
        std::fs::write(dir.join("src/low.rs"), low).unwrap();
        std::fs::write(dir.join("src/high.rs"), "use crate::low::f;\n").unwrap();
        dir
    }

    fn outcome(dir: &Path, circles: &[Circle]) -> Result<(), String> {
        let floors: &[&[&str]] = &[&["low"], &["high"]];
        let dir = dir.to_str().unwrap().to_owned();
        let circles = circles.to_vec();
        std::panic::catch_unwind(move || check(&dir, floors, &circles))
            .map_err(|e| e.downcast_ref::<String>().cloned().unwrap_or_default())
    }

    #[test]
    fn an_import_up_a_floor_fails_and_an_allowed_circle_must_exist() {
        let clean = scratch("clean", "pub fn f() {}\n");
        assert!(outcome(&clean, &[]).is_ok());
        let up = scratch("up", "pub fn f() { crate::high::g(); }\n");
        let why = outcome(&up, &[]).unwrap_err();
        assert!(why.contains("low (floor 0) uses high (floor 1)"), "{why}");
        let allowed = Circle {
            from: "low",
            to: "high",
            why: "a test",
        };
        assert!(outcome(&up, &[allowed]).is_ok());
        let gone = outcome(&clean, &[allowed]).unwrap_err();
        assert!(gone.contains("is gone"), "{gone}");
        let _ = std::fs::remove_dir_all(clean);
        let _ = std::fs::remove_dir_all(up);
    }
}
