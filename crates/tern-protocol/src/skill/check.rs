//! The checks a server and a host share: digests, names, the entry's
//! structural rules ([`Skill::validate`]) and a file read against its entry
//! ([`Skill::verify`]).

use std::collections::HashSet;
use std::fmt;

use sha2::{Digest as _, Sha256};

use super::frontmatter;
use super::{MAX_BYTES, MAX_FILES, MAX_NAME_LEN, SKILL_MD, Skill, SkillResources};

/// The digest of `bytes` as the extension writes it: `sha256:` and 64
/// lowercase hex digits.
pub fn digest(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let hash = Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in &hash {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 0x0f)]));
    }
    out
}

/// `digest` is `sha256:` and 64 lowercase hex digits.
pub fn is_valid_digest(digest: &str) -> bool {
    digest.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// `name` follows the Agent Skills naming rules: 1–64 characters of
/// `[a-z0-9-]`, no leading, trailing or doubled hyphen.
pub fn is_valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'-'))
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// A URI scheme: a letter, then letters, digits, `+`, `-` or `.`.
fn is_scheme(scheme: &str) -> bool {
    let mut bytes = scheme.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
        && bytes.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// The root of the skill whose `SKILL.md` is at `uri`: `uri` without
/// `/SKILL.md`, when `uri` is `<scheme>://<path>/SKILL.md` with a non-empty
/// last path segment, and no query or fragment.
pub(super) fn root_of(uri: &str) -> Option<&str> {
    let (scheme, rest) = uri.split_once("://")?;
    let root = uri.strip_suffix(&format!("/{SKILL_MD}"))?;
    let path = rest.strip_suffix(&format!("/{SKILL_MD}"))?;
    (is_scheme(scheme) && !path.is_empty() && !path.ends_with('/') && !uri.contains(['?', '#']))
        .then_some(root)
}

/// The last segment of a skill root (the skill's name by the extension's
/// rule): after its last `/`, or the authority when it has no path.
fn last_segment(root: &str) -> &str {
    let after_scheme = root.split_once("://").map_or(root, |(_, rest)| rest);
    after_scheme.rsplit('/').next().unwrap_or(after_scheme)
}

/// `uri` is a file strictly inside `root`: `<root>/` then segments that are
/// neither empty, `.` nor `..`, and no query or fragment.
pub(crate) fn is_within(root: &str, uri: &str) -> bool {
    uri.strip_prefix(root)
        .and_then(|rest| rest.strip_prefix('/'))
        .is_some_and(|rest| {
            !rest.contains(['?', '#'])
                && rest
                    .split('/')
                    .all(|segment| !matches!(segment, "" | "." | ".."))
                && !rest
                    .split('/')
                    .any(|s| s.eq_ignore_ascii_case("%2e") || s.eq_ignore_ascii_case("%2e%2e"))
        })
}

/// A skill entry that breaks the extension's rules, with every problem
/// found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSkill {
    uri: String,
    problems: Vec<String>,
}

impl InvalidSkill {
    /// The entry's `uri`.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// Each problem, in the order found.
    pub fn problems(&self) -> &[String] {
        &self.problems
    }
}

impl fmt::Display for InvalidSkill {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid skill entry: {}", self.problems.join("; "))
    }
}

impl std::error::Error for InvalidSkill {}

impl Skill {
    /// Checks the entry against the extension's rules: `uri` is a
    /// `<scheme>://…/<name>/SKILL.md` whose `<name>` is `frontmatter.name`
    /// (a valid Agent Skills name); `frontmatter.description` is a
    /// non-empty string; a manifest lists the `SKILL.md` itself, every file
    /// once, each inside the skill's root, with a well-formed digest; and
    /// the manifest stays within [`MAX_FILES`] and [`MAX_BYTES`] (hosts
    /// must accept skills up to them; tern's refuses larger ones, which a
    /// server should not serve).
    pub fn validate(&self) -> Result<(), InvalidSkill> {
        let mut problems = Vec::new();
        let root = root_of(&self.uri);
        if root.is_none() {
            problems.push(format!(
                "uri {} is not a <scheme>://<skill-path>/{SKILL_MD} URI",
                crate::error::cut(&self.uri, 96)
            ));
        }
        match self.frontmatter.get("name") {
            Some(serde_json::Value::String(name)) => {
                if !is_valid_name(name) {
                    problems.push(format!(
                        "frontmatter name \"{}\" is not 1-64 characters of a-z, 0-9 and single \
                         inner hyphens",
                        crate::error::cut(name, 80)
                    ));
                }
                if let Some(root) = root
                    && last_segment(root) != name
                {
                    problems.push(format!(
                        "frontmatter name \"{}\" is not the last segment of the skill path \
                         (\"{}\")",
                        crate::error::cut(name, 80),
                        crate::error::cut(last_segment(root), 80)
                    ));
                }
            }
            _ => problems.push("frontmatter has no string name".to_owned()),
        }
        match self.frontmatter.get("description") {
            Some(serde_json::Value::String(d)) if !d.is_empty() => {}
            _ => problems.push("frontmatter has no non-empty string description".to_owned()),
        }
        if let (SkillResources::Files(files), Some(root)) = (&self.resources, root) {
            let mut seen = HashSet::with_capacity(files.len());
            let mut has_self = false;
            let mut total: u64 = 0;
            for file in files {
                let shown = crate::error::cut(&file.uri, 96);
                if !seen.insert(file.uri.as_str()) {
                    problems.push(format!("{shown} is listed more than once"));
                }
                if file.uri == self.uri {
                    has_self = true;
                } else if !is_within(root, &file.uri) {
                    problems.push(format!("{shown} is outside the skill's folder"));
                }
                if !is_valid_digest(&file.digest) {
                    problems.push(format!(
                        "{shown} has digest \"{}\", not sha256: and 64 lowercase hex digits",
                        crate::error::cut(&file.digest, 80)
                    ));
                }
                total = total.saturating_add(file.size);
            }
            if !has_self {
                problems.push(format!("the manifest does not list {SKILL_MD} itself"));
            }
            if files.len() > MAX_FILES {
                problems.push(format!(
                    "the manifest lists {} files, over the limit of {MAX_FILES}",
                    files.len()
                ));
            }
            if total > MAX_BYTES {
                problems.push(format!(
                    "the files add up to {total} bytes, over the limit of {MAX_BYTES}"
                ));
            }
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidSkill {
                uri: self.uri.clone(),
                problems,
            })
        }
    }

    /// `uri` is a file a host may read for this skill: listed in its
    /// manifest, or (a `"dynamic"` skill) its `SKILL.md` or inside its root.
    pub fn covers(&self, uri: &str) -> bool {
        match &self.resources {
            SkillResources::Files(_) => self.file(uri).is_some(),
            SkillResources::Dynamic => {
                uri == self.uri || self.root().is_some_and(|r| is_within(r, uri))
            }
        }
    }

    /// The path of `uri` under the skill's root (`references/FORMS.md`),
    /// when it is strictly inside it.
    pub fn path_of<'a>(&self, uri: &'a str) -> Option<&'a str> {
        let root = self.root()?;
        is_within(root, uri).then(|| &uri[root.len() + 1..])
    }

    /// Verifies `bytes`, read from `uri`, against this entry: the file must
    /// be in the manifest (a `"dynamic"` skill: inside its root), then have
    /// its size, then its digest; the skill's own `SKILL.md` must also be
    /// UTF-8 whose frontmatter equals the entry's, field by field. A host
    /// must not use a file (for `SKILL.md`: the skill) that fails.
    pub fn verify(&self, uri: &str, bytes: &[u8]) -> Result<(), VerifyError> {
        let fail = |kind, detail: String| VerifyError {
            kind,
            uri: uri.to_owned(),
            detail,
            differences: Vec::new(),
        };
        if !self.covers(uri) {
            return Err(fail(
                VerifyErrorKind::Unlisted,
                match self.resources {
                    SkillResources::Files(_) => "the skill's manifest does not list it",
                    SkillResources::Dynamic => "it is not inside the skill's folder",
                }
                .to_owned(),
            ));
        }
        if let Some(file) = self.file(uri) {
            if file.size != bytes.len() as u64 {
                return Err(fail(
                    VerifyErrorKind::Size,
                    format!(
                        "the manifest says {} bytes, {} were read",
                        file.size,
                        bytes.len()
                    ),
                ));
            }
            if digest(bytes) != file.digest {
                return Err(fail(
                    VerifyErrorKind::Digest,
                    "its SHA-256 digest is not the manifest's".to_owned(),
                ));
            }
        }
        if uri == self.uri {
            let text = std::str::from_utf8(bytes).map_err(|_| {
                fail(
                    VerifyErrorKind::Frontmatter,
                    format!("{SKILL_MD} is not UTF-8 text"),
                )
            })?;
            let parsed = frontmatter::parse(text).map_err(|e| {
                fail(
                    VerifyErrorKind::Frontmatter,
                    format!("its frontmatter cannot be read: {e}"),
                )
            })?;
            let differences = frontmatter::differences(&self.frontmatter, &parsed);
            if !differences.is_empty() {
                return Err(VerifyError {
                    kind: VerifyErrorKind::Frontmatter,
                    uri: uri.to_owned(),
                    detail: "its frontmatter is not the entry's".to_owned(),
                    differences,
                });
            }
        }
        Ok(())
    }
}

/// Which check a skill file failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum VerifyErrorKind {
    /// The file is not in the skill's manifest.
    Unlisted,
    /// Its byte length is not the manifest's `size`.
    Size,
    /// Its SHA-256 is not the manifest's `digest`.
    Digest,
    /// (`SKILL.md`) its frontmatter is unreadable or differs from the
    /// entry's.
    Frontmatter,
}

/// A skill file that failed verification against its entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyError {
    kind: VerifyErrorKind,
    uri: String,
    detail: String,
    differences: Vec<String>,
}

impl VerifyError {
    /// Which check failed.
    pub fn kind(&self) -> VerifyErrorKind {
        self.kind
    }

    /// The file's URI.
    pub fn uri(&self) -> &str {
        &self.uri
    }

    /// The file is not in the manifest.
    pub fn is_unlisted(&self) -> bool {
        self.kind == VerifyErrorKind::Unlisted
    }

    /// Its size or digest is not the manifest's.
    pub fn is_mismatch(&self) -> bool {
        matches!(self.kind, VerifyErrorKind::Size | VerifyErrorKind::Digest)
    }

    /// Its frontmatter is not the entry's.
    pub fn is_frontmatter(&self) -> bool {
        self.kind == VerifyErrorKind::Frontmatter
    }

    /// For a frontmatter mismatch: one line per differing field.
    pub fn differences(&self) -> &[String] {
        &self.differences
    }
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} failed verification: {}", self.uri, self.detail)?;
        if !self.differences.is_empty() {
            write!(f, " ({})", self.differences.join("; "))?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyError {}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::SkillResource;
    use super::*;

    const SKILL_MD_TEXT: &str =
        "---\nname: refunds\ndescription: Refund a payment\n---\n# Refunds\n";

    fn skill(files: Vec<SkillResource>) -> Skill {
        Skill {
            uri: "skill://acme/refunds/SKILL.md".into(),
            frontmatter: serde_json::from_value(
                json!({"name": "refunds", "description": "Refund a payment"}),
            )
            .unwrap(),
            resources: SkillResources::Files(files),
            meta: None,
        }
    }

    fn good() -> Skill {
        skill(vec![
            SkillResource::of("skill://acme/refunds/SKILL.md", SKILL_MD_TEXT.as_bytes()),
            SkillResource::of("skill://acme/refunds/templates/note.md", b"Dear customer"),
        ])
    }

    #[test]
    fn digests_are_sha256_in_lowercase_hex() {
        // FIPS 180-2 test vector "abc".
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(is_valid_digest(&digest(b"")));
        for bad in [
            "sha256:BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
            "sha256:abc",
            "sha512:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        ] {
            assert!(!is_valid_digest(bad), "{bad}");
        }
    }

    #[test]
    fn names_follow_the_agent_skills_rules() {
        for ok in ["a", "pdf-processing", "v2", "a-b-c", &"x".repeat(64)] {
            assert!(is_valid_name(ok), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "a--b",
            "Refunds",
            "a_b",
            "a b",
            "é",
            &"x".repeat(65),
        ] {
            assert!(!is_valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn roots_and_containment() {
        assert_eq!(
            root_of("skill://acme/refunds/SKILL.md"),
            Some("skill://acme/refunds")
        );
        assert_eq!(root_of("skill://git/SKILL.md"), Some("skill://git"));
        assert_eq!(
            root_of("github://o/r/refunds/SKILL.md"),
            Some("github://o/r/refunds")
        );
        for bad in [
            "skill:///SKILL.md",
            "skill://SKILL.md",
            "skill://a//SKILL.md",
            "skill://a/skill.md",
            "skill://a/SKILL.md?x",
            "skill://a/SKILL.md#x",
            "1x://a/SKILL.md",
            "a/SKILL.md",
        ] {
            assert_eq!(root_of(bad), None, "{bad}");
        }
        let root = "skill://acme/refunds";
        assert!(is_within(root, "skill://acme/refunds/a/b.md"));
        for bad in [
            "skill://acme/refunds",
            "skill://acme/refunds/",
            "skill://acme/refundsx/a.md",
            "skill://acme/refunds/../x.md",
            "skill://acme/refunds/a/./b",
            "skill://acme/refunds/a//b",
            "skill://acme/refunds/%2E%2E/x",
            "skill://acme/refunds/a?b",
        ] {
            assert!(!is_within(root, bad), "{bad}");
        }
    }

    #[test]
    fn a_good_entry_validates() {
        good().validate().unwrap();
        let dynamic = Skill {
            resources: SkillResources::Dynamic,
            ..good()
        };
        dynamic.validate().unwrap();
    }

    #[test]
    fn every_broken_rule_is_named() {
        let mut s = good();
        s.uri = "skill://acme/other/SKILL.md".into();
        let e = s.validate().unwrap_err();
        assert!(e.to_string().contains("not the last segment"), "{e}");
        assert!(e.to_string().contains("does not list SKILL.md"), "{e}");

        let mut s = good();
        s.frontmatter.remove("description");
        assert!(
            s.validate()
                .unwrap_err()
                .to_string()
                .contains("description")
        );

        let mut s = good();
        s.frontmatter.insert("name".into(), json!("Refunds"));
        s.uri = "skill://acme/Refunds/SKILL.md".into();
        let e = s.validate().unwrap_err();
        assert!(e.to_string().contains("not 1-64 characters"), "{e}");

        let mut files = good().files().unwrap().to_vec();
        files.push(SkillResource::of("skill://acme/elsewhere.md", b""));
        files.push(files[0].clone());
        files.push(SkillResource {
            digest: "sha256:XYZ".into(),
            ..SkillResource::of("skill://acme/refunds/bad.md", b"")
        });
        let e = skill(files).validate().unwrap_err();
        assert_eq!(e.problems().len(), 3, "{e}");
        assert!(e.to_string().contains("outside the skill's folder"), "{e}");
        assert!(e.to_string().contains("more than once"), "{e}");
        assert!(e.to_string().contains("64 lowercase hex"), "{e}");
    }

    #[test]
    fn limits_are_counted_over_the_manifest() {
        let mut files = vec![SkillResource::of(
            "skill://acme/refunds/SKILL.md",
            SKILL_MD_TEXT.as_bytes(),
        )];
        for i in 1..MAX_FILES {
            files.push(SkillResource::of(format!("skill://acme/refunds/f{i}"), b""));
        }
        skill(files.clone()).validate().unwrap();
        files.push(SkillResource::of("skill://acme/refunds/one-more", b""));
        let e = skill(files).validate().unwrap_err();
        assert!(e.to_string().contains("over the limit of 512"), "{e}");

        let big = SkillResource {
            size: MAX_BYTES,
            ..SkillResource::of("skill://acme/refunds/big.bin", b"")
        };
        let e = skill(vec![
            SkillResource::of("skill://acme/refunds/SKILL.md", SKILL_MD_TEXT.as_bytes()),
            big,
        ])
        .validate()
        .unwrap_err();
        assert!(e.to_string().contains("over the limit of 16777216"), "{e}");
    }

    #[test]
    fn files_are_verified_size_then_digest_then_frontmatter() {
        let s = good();
        s.verify("skill://acme/refunds/SKILL.md", SKILL_MD_TEXT.as_bytes())
            .unwrap();
        s.verify("skill://acme/refunds/templates/note.md", b"Dear customer")
            .unwrap();
        let e = s
            .verify("skill://acme/refunds/templates/other.md", b"x")
            .unwrap_err();
        assert!(e.is_unlisted());
        let e = s
            .verify("skill://acme/refunds/templates/note.md", b"Dear customer!")
            .unwrap_err();
        assert_eq!(e.kind(), VerifyErrorKind::Size);
        let e = s
            .verify("skill://acme/refunds/templates/note.md", b"Dear custoMer")
            .unwrap_err();
        assert_eq!(e.kind(), VerifyErrorKind::Digest);

        // Bytes that match the manifest but whose frontmatter is not the
        // entry's (a server that re-digested a changed file).
        let changed = SKILL_MD_TEXT.replace("Refund a payment", "Refund every payment");
        let mut s = good();
        s.resources = SkillResources::Files(vec![SkillResource::of(
            "skill://acme/refunds/SKILL.md",
            changed.as_bytes(),
        )]);
        let e = s
            .verify("skill://acme/refunds/SKILL.md", changed.as_bytes())
            .unwrap_err();
        assert!(e.is_frontmatter());
        assert_eq!(e.differences().len(), 1, "{e}");
        assert!(e.differences()[0].starts_with("description:"), "{e}");
    }

    #[test]
    fn paths_under_the_root() {
        let s = good();
        assert_eq!(s.path_of("skill://acme/refunds/SKILL.md"), Some("SKILL.md"));
        assert_eq!(
            s.path_of("skill://acme/refunds/templates/note.md"),
            Some("templates/note.md")
        );
        for outside in [
            "skill://acme/refunds",
            "skill://acme/refundsx/a",
            "skill://acme/refunds/../x",
            "skill://acme/refunds//x",
        ] {
            assert_eq!(s.path_of(outside), None, "{outside}");
        }
        assert!(s.covers("skill://acme/refunds/templates/note.md"));
        assert!(!s.covers("skill://acme/refunds/templates/other.md"));
    }

    #[test]
    fn dynamic_skills_check_only_the_folder_and_the_frontmatter() {
        let s = Skill {
            resources: SkillResources::Dynamic,
            ..good()
        };
        s.verify("skill://acme/refunds/anything.md", b"x").unwrap();
        assert!(
            s.verify("skill://acme/other/x.md", b"x")
                .unwrap_err()
                .is_unlisted()
        );
        assert!(
            s.verify(
                "skill://acme/refunds/SKILL.md",
                b"---\nname: refunds\ndescription: x\n---\n"
            )
            .unwrap_err()
            .is_frontmatter()
        );
    }
}
