//! The repository explains itself: a clone with nothing beside it resolves
//! every citation in its code, scripts and docs.
//!
//! - No citation points outside the repository: not to the notes some
//!   checkouts keep beside them, nor to their numbering (rule numbers such as
//!   an `S` or `C` followed by a digit, bare `§` sections). A `§` is allowed
//!   only after an RFC, OAuth, HTML or issue reference on the same line.
//! - Every rule id cited (a backticked id after the word rule or rules, a
//!   list of them joined by commas and "and", or an unquoted id with a
//!   hyphen after it in a message) is a heading of `docs/rules.md`.
//! - Every section of `docs/design.md` cited as the path, a comma and the
//!   section's name in double quotes is a heading there.
//!
//! This file is not read: its own examples would trip it. `tern`'s audit
//! tests check the rule column of `tern audit` against the same page
//! (`crates/tern/tests/it/audit.rs`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::rules_page::{defined_rules, is_rule_id, repository};

fn root() -> PathBuf {
    repository(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's own text: `crates/`, `scripts/`, `docs/`, `.ci/`, the
/// top-level Markdown files, the workspace manifest and `spec/README.md`
/// (the rest of `spec/` is the official files, copied unchanged).
fn files() -> Vec<PathBuf> {
    let root = root();
    let mut out = Vec::new();
    for dir in ["crates", "scripts", "docs", ".ci"] {
        walk(&root.join(dir), &mut out);
    }
    for entry in std::fs::read_dir(&root).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            out.push(path);
        }
    }
    out.push(root.join("Cargo.toml"));
    out.push(root.join("spec/README.md"));
    out.sort();
    assert!(out.len() > 200, "the walk found only {} files", out.len());
    out
}

fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            if !matches!(
                name.as_str(),
                "target" | "node_modules" | "proptest-regressions"
            ) && !name.starts_with('.')
            {
                walk(&path, out);
            }
            continue;
        }
        let text_file = match path.extension().and_then(|e| e.to_str()) {
            Some(ext) => matches!(ext, "rs" | "md" | "toml" | "py" | "json" | "sh" | "txt"),
            // Scripts without an extension.
            None => true,
        };
        if text_file {
            out.push(path);
        }
    }
}

/// Each file's path (relative to the root) and text.
fn texts() -> Vec<(String, String)> {
    let root = root();
    files()
        .into_iter()
        .filter_map(|path| {
            let text = std::fs::read_to_string(&path).ok()?;
            let name = path
                .strip_prefix(&root)
                .unwrap_or(&path)
                .display()
                .to_string();
            Some((name, text))
        })
        .filter(|(name, _)| name != "crates/tern-protocol/tests/it/house.rs")
        .collect()
}

/// `text` with line breaks inside comments joined: a newline, the next
/// line's indentation and comment marker (`///`, `//!`, `//`, `#`) become one
/// space, so a citation wrapped over two comment lines reads as one.
fn joined(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut lines = text.lines();
    if let Some(first) = lines.next() {
        out.push_str(first);
    }
    for line in lines {
        let rest = line.trim_start();
        let rest = ["///", "//!", "//", "#"]
            .iter()
            .find_map(|m| rest.strip_prefix(m))
            .unwrap_or(rest);
        out.push(' ');
        out.push_str(rest.trim_start());
    }
    out
}

/// The fragments that name the notes outside the repository, assembled here
/// so that this file does not contain them.
fn outside_fragments() -> Vec<String> {
    let section = '\u{a7}';
    vec![
        format!("digest {section}"),
        format!("Digest {section}"),
        format!("DESIGN {section}"),
        format!("spec {section}"),
        ["spec", " digest"].concat(),
        ["DESIGN", ".md"].concat(),
        ["..", "/shared"].concat(),
        ["shared", "/spec"].concat(),
    ]
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A token like `S7`, `S10c`, `C12` or `R4` at word boundaries: the
/// numbering of notes outside the repository. `C0` and `C1` name control
/// characters unless written as a citation (`C1:`, `(C1)`, `C1–C12`); `C2`
/// followed by two hex digits is a UTF-8 byte; a token after `%` is
/// percent-encoding.
fn foreign_rule_ids(line: &str) -> Vec<String> {
    let chars: Vec<char> = line.chars().collect();
    let mut found = Vec::new();
    for (i, &c) in chars.iter().enumerate() {
        let before = if i > 0 { chars[i - 1] } else { ' ' };
        if !matches!(c, 'S' | 'C' | 'R') || is_word(before) || before == '%' {
            continue;
        }
        let digits: String = chars[i + 1..]
            .iter()
            .take_while(|d| d.is_ascii_digit())
            .collect();
        if digits.is_empty() || digits.len() > 2 || digits.starts_with('0') && digits != "0" {
            continue;
        }
        let mut end = i + 1 + digits.len();
        if chars.get(end).is_some_and(|s| matches!(s, 'a'..='c')) {
            end += 1;
        }
        if chars.get(end).is_some_and(|&n| is_word(n)) {
            continue;
        }
        let token: String = chars[i..end].iter().collect();
        let after: String = chars[end..].iter().take(3).collect();
        if c == 'C' && (token == "C0" || token == "C1") {
            let cited = after.starts_with(':')
                || after.starts_with('\u{2013}')
                || (before == '(' && after.starts_with(')'));
            if !cited {
                continue;
            }
        }
        if token == "C2"
            && after.len() == 3
            && after.starts_with(' ')
            && after[1..].chars().all(|h| h.is_ascii_hexdigit())
        {
            continue;
        }
        found.push(token);
    }
    found
}

/// Whether the `§` at byte `at` of `text` follows an RFC, OAuth, HTML or
/// issue reference within the 48 characters before it.
fn section_sign_is_external(text: &str, at: usize) -> bool {
    let before: String = text[..at]
        .chars()
        .rev()
        .take(48)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    ["RFC", "OAuth", "HTML", "issue"]
        .iter()
        .any(|r| before.contains(r))
}

#[test]
fn no_citation_points_outside_the_repository() {
    let fragments = outside_fragments();
    let mut bad = Vec::new();
    for (name, text) in texts() {
        for (n, line) in text.lines().enumerate() {
            for f in &fragments {
                if line.contains(f.as_str()) {
                    bad.push(format!("{name}:{}: {f:?}", n + 1));
                }
            }
            for token in foreign_rule_ids(line) {
                bad.push(format!("{name}:{}: {token}", n + 1));
            }
        }
        let flat = joined(&text);
        for (at, _) in flat.match_indices('\u{a7}') {
            let next = flat[at + '\u{a7}'.len_utf8()..].chars().next();
            if next.is_some_and(|c| c.is_ascii_digit()) && !section_sign_is_external(&flat, at) {
                let excerpt: String = flat[at..].chars().take(24).collect();
                bad.push(format!("{name}: a bare section sign: {excerpt:?}"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "citations outside the repository (cite the official specification by \
         section name, docs/rules.md by id, docs/design.md by section):\n{}",
        bad.join("\n")
    );
}

/// The ids cited after each `rule ` / `rules ` of `text`: backticked
/// (`` `a` ``, `` `a`, `b` ``, `` `a` and `b` ``) or bare when they have a
/// rule id's shape (`rule a-b` in a message).
fn cited_rules(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in ["rule ", "rules ", "Rule ", "Rules "] {
        for (at, _) in text.match_indices(word) {
            if text[..at].chars().next_back().is_some_and(is_word) {
                continue;
            }
            let mut rest = &text[at + word.len()..];
            loop {
                if let Some(quoted) = rest.strip_prefix('`') {
                    let Some(close) = quoted.find('`') else { break };
                    out.push(quoted[..close].to_owned());
                    rest = &quoted[close + 1..];
                } else {
                    let end = rest
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                        .unwrap_or(rest.len());
                    if !is_rule_id(&rest[..end]) {
                        break;
                    }
                    out.push(rest[..end].to_owned());
                    rest = &rest[end..];
                }
                let Some(next) = [", and ", ", ", " and ", " or ", " to "]
                    .iter()
                    .find_map(|sep| rest.strip_prefix(sep))
                    .filter(|r| r.starts_with('`'))
                else {
                    break;
                };
                rest = next;
            }
        }
    }
    out
}

#[test]
fn every_cited_rule_is_defined_in_docs_rules_md() {
    let defined: BTreeSet<String> = defined_rules(&root()).into_iter().collect();
    assert!(defined.len() >= 30, "docs/rules.md defines {defined:?}");
    let mut cited = BTreeSet::new();
    let mut bad = Vec::new();
    for (name, text) in texts() {
        for id in cited_rules(&joined(&text)) {
            if !defined.contains(&id) {
                bad.push(format!("{name}: rule {id:?}"));
            }
            cited.insert(id);
        }
    }
    assert!(
        bad.is_empty(),
        "rule ids cited but not defined in docs/rules.md:\n{}",
        bad.join("\n")
    );
    // The check reads what the code cites: most ids are cited somewhere.
    assert!(
        cited.len() >= 25,
        "only {} ids cited: {cited:?}",
        cited.len()
    );
}

#[test]
fn every_cited_design_section_exists() {
    let design = std::fs::read_to_string(root().join("docs/design.md")).unwrap();
    let sections: BTreeSet<&str> = design
        .lines()
        // Sections and their subsections (`## ` and `### ` headings).
        .filter_map(|l| l.strip_prefix("## ").or_else(|| l.strip_prefix("### ")))
        .map(str::trim)
        .collect();
    let mut bad = Vec::new();
    let mut cited = 0;
    for (name, text) in texts() {
        let flat = joined(&text);
        for (at, m) in flat.match_indices("docs/design.md, \"") {
            // The quoted names that follow: `"A", "B" and "C"`.
            let mut rest = &flat[at + m.len() - 1..];
            while let Some(quoted) = rest.strip_prefix('"') {
                let Some(close) = quoted.find('"') else { break };
                let section = &quoted[..close];
                cited += 1;
                if !sections.contains(section) {
                    bad.push(format!("{name}: {section:?}"));
                }
                rest = &quoted[close + 1..];
                rest = [", ", " and ", ", and "]
                    .iter()
                    .find_map(|sep| rest.strip_prefix(sep))
                    .unwrap_or("");
            }
        }
    }
    assert!(
        bad.is_empty(),
        "docs/design.md sections cited but not there (it has {sections:?}):\n{}",
        bad.join("\n")
    );
    assert!(
        cited >= 10,
        "only {cited} citations of docs/design.md found"
    );
}

#[test]
fn the_checks_catch_what_they_look_for() {
    assert_eq!(foreign_rule_ids("a rule (S7) and S10c: x"), ["S7", "S10c"]);
    assert_eq!(foreign_rule_ids("C1–C12 and (C1)"), ["C1", "C12", "C1"]);
    assert!(foreign_rule_ids("C0 and C1 controls, C1 CSI, UTF-8 `C2 80`").is_empty());
    assert!(foreign_rule_ids("%C3%A9 s10c_name ASCII S3x").is_empty());
    let flat = joined("x (RFC 9068 \u{a7}2.1, \u{a7}4) and\n/// (OAuth 2.1\n/// \u{a7}1.5)");
    assert!(
        flat.match_indices('\u{a7}')
            .all(|(at, _)| section_sign_is_external(&flat, at))
    );
    let bare = "see \u{a7}8.3 there";
    assert!(!section_sign_is_external(
        bare,
        bare.find('\u{a7}').unwrap()
    ));
    assert_eq!(
        cited_rules(&joined(
            "(rules `a-b`, `c-d` and `e-f`), rule\n/// `g-h`; (rule i-j) the rule of x; rules `k-l` to `m-n`"
        )),
        ["g-h", "i-j", "a-b", "c-d", "e-f", "k-l", "m-n"]
    );
}
