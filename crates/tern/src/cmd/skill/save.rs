//! `tern skill NAME --save DIR`: every file of a skill's manifest, each
//! verified, written under DIR — and nowhere else.
//!
//! The order keeps a bad server from writing anything: the paths are
//! planned first (each URI must lie inside the skill's folder; each
//! percent-decoded segment must be a plain name: not empty, `.` or `..`,
//! no `/`, `\` or NUL, nothing a terminal would act on); then every file is
//! read and verified (size, digest, `SKILL.md`'s frontmatter) into memory;
//! then DIR is checked (no target exists yet, no folder on the way is a
//! symbolic link or a file); only then is anything written: folders one
//! segment at a time (a symbolic link met on the way is refused, never
//! followed) and each file created new (`create_new`: it fails on anything
//! already there, a symbolic link included, so no write goes through one).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde_json::json;
use tern_protocol::skill::Skill;

use super::{Connected, emit, emit_json, flat, unverified};
use crate::exit::{EXIT_OK, EXIT_SERVER, EXIT_USAGE, Failure};

/// One file to write: where under DIR, from which URI.
struct Planned {
    segments: Vec<String>,
    uri: String,
}

/// Decodes `%XX` escapes; `None` for a malformed escape or bytes that are
/// not UTF-8.
fn percent_decode(segment: &str) -> Option<String> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = segment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A plain file or folder name: what a segment must decode to.
fn plain(name: &str) -> bool {
    !matches!(name, "" | "." | "..")
        && !name.contains(['/', '\\', '\0'])
        && tern::safe::line(name) == name
}

/// The refusal of a server's path (exit 3: its manifest cannot be used).
fn refused(skill: &Skill, uri: &str, why: &str) -> Failure {
    Failure {
        code: EXIT_SERVER,
        message: format!(
            "refused to save {}: {} {why}; nothing was written",
            flat(&skill.uri),
            flat(uri)
        ),
    }
}

/// Where each file of the manifest goes under DIR.
fn plan(skill: &Skill) -> Result<Vec<Planned>, Failure> {
    let Some(files) = skill.files() else {
        return Err(Failure {
            code: EXIT_SERVER,
            message: format!(
                "{} is a \"dynamic\" skill: it publishes no manifest of files to save (`tern skill` without --save shows its SKILL.md)",
                flat(&skill.uri)
            ),
        });
    };
    let mut planned = Vec::with_capacity(files.len());
    let mut seen = BTreeSet::new();
    for file in files {
        let Some(rel) = skill.path_of(&file.uri) else {
            return Err(refused(skill, &file.uri, "is outside the skill's folder"));
        };
        let mut segments = Vec::new();
        for raw in rel.split('/') {
            match percent_decode(raw) {
                Some(name) if plain(&name) => segments.push(name),
                _ => {
                    return Err(refused(
                        skill,
                        &file.uri,
                        "has a path segment that is not a plain name (empty, . or .., a slash, a backslash, NUL or a control character)",
                    ));
                }
            }
        }
        if !seen.insert(segments.clone()) {
            return Err(refused(skill, &file.uri, "names a file listed twice"));
        }
        planned.push(Planned {
            segments,
            uri: file.uri.clone(),
        });
    }
    // A file cannot also be a folder of another.
    for p in &planned {
        for depth in 1..p.segments.len() {
            if seen.contains(&p.segments[..depth]) {
                return Err(refused(
                    skill,
                    &p.uri,
                    "needs a folder where another file goes",
                ));
            }
        }
    }
    Ok(planned)
}

fn io_failure(path: &Path, what: &str, e: &std::io::Error) -> Failure {
    Failure {
        code: EXIT_USAGE,
        message: format!("cannot {what} {}: {e}", path.display()),
    }
}

/// Checks that nothing is in the way under `dir` (creating nothing):
/// every folder on the way is a real folder or absent, no target exists.
fn check_targets(dir: &Path, planned: &[Planned]) -> Result<(), Failure> {
    for p in planned {
        let mut at = dir.to_path_buf();
        for (i, segment) in p.segments.iter().enumerate() {
            at.push(segment);
            let last = i + 1 == p.segments.len();
            match std::fs::symlink_metadata(&at) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(Failure {
                        code: EXIT_USAGE,
                        message: format!(
                            "{} is a symbolic link: tern skill --save never writes through one; nothing was written",
                            at.display()
                        ),
                    });
                }
                Ok(_) if last => {
                    return Err(Failure {
                        code: EXIT_USAGE,
                        message: format!(
                            "{} exists: tern skill --save writes new files only (choose an empty folder); nothing was written",
                            at.display()
                        ),
                    });
                }
                Ok(m) if m.is_dir() => {}
                Ok(_) => {
                    return Err(Failure {
                        code: EXIT_USAGE,
                        message: format!(
                            "{} exists and is not a folder; nothing was written",
                            at.display()
                        ),
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                Err(e) => return Err(io_failure(&at, "read", &e)),
            }
        }
    }
    Ok(())
}

/// Writes `bytes` at `segments` under `dir`: each folder made one segment
/// at a time (a symbolic link on the way refused), the file created new.
fn write(dir: &Path, segments: &[String], bytes: &[u8]) -> Result<PathBuf, Failure> {
    let mut at = dir.to_path_buf();
    let (name, folders) = segments.split_last().unwrap_or((&segments[0], &[]));
    for folder in folders {
        at.push(folder);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
                return Err(Failure {
                    code: EXIT_USAGE,
                    message: format!(
                        "{} is not a folder tern made (a symbolic link or a file appeared); stopped",
                        at.display()
                    ),
                });
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir(&at).map_err(|e| io_failure(&at, "create", &e))?;
            }
            Err(e) => return Err(io_failure(&at, "read", &e)),
        }
    }
    at.push(name);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&at)
        .map_err(|e| io_failure(&at, "create", &e))?;
    file.write_all(bytes)
        .and_then(|()| file.sync_all())
        .map_err(|e| io_failure(&at, "write", &e))?;
    Ok(at)
}

/// `tern skill NAME --save DIR`.
#[allow(
    clippy::print_stderr,
    reason = "the summary goes to standard error, the paths to standard output"
)]
pub(super) async fn save(c: &Connected, skill: &Skill, dir: &Path) -> Result<u8, Failure> {
    let planned = plan(skill)?;
    let d = &c.driver;
    // Every file read and verified before anything is written.
    let mut contents = Vec::with_capacity(planned.len());
    for p in &planned {
        let file = d
            .wait_raw("resources/read", d.client.read_skill_file(skill, &p.uri))
            .await?
            .map_err(|e| {
                let mut f = unverified(c, &e);
                f.message.push_str("; nothing was written");
                f
            })?;
        contents.push(file.bytes);
    }
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => {
            return Err(Failure {
                code: EXIT_USAGE,
                message: format!("{} is not a folder", dir.display()),
            });
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| io_failure(dir, "create", &e))?;
        }
        Err(e) => return Err(io_failure(dir, "read", &e)),
    }
    check_targets(dir, &planned)?;
    let mut written = Vec::with_capacity(planned.len());
    let mut total = 0usize;
    for (p, bytes) in planned.iter().zip(&contents) {
        write(dir, &p.segments, bytes).map_err(|mut f| {
            if !written.is_empty() {
                let _ = write!(
                    f.message,
                    " ({} of the {} files were written before)",
                    written.len(),
                    planned.len()
                );
            }
            f
        })?;
        total += bytes.len();
        written.push(json!({"path": p.segments.join("/"), "uri": p.uri, "size": bytes.len()}));
    }
    if c.json {
        emit_json(&json!({
            "skill": skill.uri,
            "dir": dir.display().to_string(),
            "files": written,
        }));
    } else {
        let mut lines = String::new();
        for p in &planned {
            lines.push_str(&p.segments.join("/"));
            lines.push('\n');
        }
        emit(&lines);
    }
    eprintln!(
        "tern: saved {} files of {} ({total} bytes, each verified) in {}",
        planned.len(),
        flat(&skill.uri),
        dir.display()
    );
    Ok(EXIT_OK)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(uris: &[&str]) -> Skill {
        let files: Vec<_> = uris
            .iter()
            .map(|u| json!({"uri": u, "digest": tern_protocol::skill::digest(b""), "size": 0}))
            .collect();
        serde_json::from_value(json!({
            "uri": "skill://acme/refunds/SKILL.md",
            "frontmatter": {"name": "refunds", "description": "d"},
            "resources": files
        }))
        .unwrap()
    }

    #[test]
    fn paths_are_planned_inside_the_folder_only() {
        let ok = plan(&skill(&[
            "skill://acme/refunds/SKILL.md",
            "skill://acme/refunds/a%20b/c%C3%A9.md",
        ]))
        .unwrap();
        assert_eq!(ok[1].segments, ["a b", "cé.md"]);
        for bad in [
            "skill://acme/refunds/../escape.md",
            "skill://acme/refunds/%2E%2E/escape.md",
            "skill://acme/refunds/a%2Fb",
            "skill://acme/refunds/a%5Cb",
            "skill://acme/refunds/%00",
            "skill://acme/refunds/%1B%5B2J",
            "skill://acme/refunds/a%",
            "skill://acme/refunds/%FF",
            "skill://acme/other/x.md",
            "/etc/passwd",
            "skill://acme/refunds//x",
        ] {
            let e = plan(&skill(&["skill://acme/refunds/SKILL.md", bad]))
                .err()
                .unwrap_or_else(|| panic!("{bad} was planned"));
            assert_eq!(e.code, EXIT_SERVER, "{bad}: {}", e.message);
        }
        let e = plan(&skill(&[
            "skill://acme/refunds/SKILL.md",
            "skill://acme/refunds/a",
            "skill://acme/refunds/a/b",
        ]))
        .err()
        .unwrap();
        assert!(e.message.contains("needs a folder"), "{}", e.message);
        let e = plan(&skill(&[
            "skill://acme/refunds/SKILL.md",
            "skill://acme/refunds/a%20b",
            "skill://acme/refunds/a b",
        ]))
        .err()
        .unwrap();
        assert!(e.message.contains("listed twice"), "{}", e.message);
    }
}
