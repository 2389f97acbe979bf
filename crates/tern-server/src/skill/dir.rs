//! [`SkillCatalog::from_dir`]: a folder of Agent Skills, read once.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tern_protocol::skill::{MAX_BYTES, MAX_FILES, SKILL_MD};

use super::catalog::{
    Catalog, CatalogWarning, Problems, Segments, SkillCatalog, SkillCatalogError, Source, assemble,
};

/// How deep the walk goes below the root.
const MAX_DEPTH: usize = 32;

/// What the walk found: regular files by path, with their size.
struct Walk {
    files: BTreeMap<Segments, (PathBuf, u64)>,
    warnings: Vec<CatalogWarning>,
}

fn walk(root: &Path, dir: &Path, at: &Segments, out: &mut Walk) -> Result<(), SkillCatalogError> {
    let shown = |p: &Path| p.display().to_string();
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if at.is_empty() => return Err(SkillCatalogError::io(shown(root), &e)),
        Err(e) => {
            out.warnings
                .push(CatalogWarning::new(shown(dir), format!("skipped: {e}")));
            return Ok(());
        }
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) => {
                out.warnings.push(CatalogWarning::new(
                    shown(dir),
                    format!("skipped an entry: {e}"),
                ));
                continue;
            }
        };
        let path = entry.path();
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            out.warnings.push(CatalogWarning::new(
                shown(&path),
                "skipped: the name is not UTF-8",
            ));
            continue;
        };
        // Hidden entries (.git, .DS_Store) are not part of a skill.
        if name.starts_with('.') {
            continue;
        }
        // `file_type` does not follow symlinks: a link is skipped, never
        // followed out of the folder.
        let kind = match entry.file_type() {
            Ok(kind) => kind,
            Err(e) => {
                out.warnings
                    .push(CatalogWarning::new(shown(&path), format!("skipped: {e}")));
                continue;
            }
        };
        let mut here = at.clone();
        here.push(name);
        if kind.is_symlink() {
            out.warnings.push(CatalogWarning::new(
                shown(&path),
                "skipped: a symbolic link",
            ));
        } else if kind.is_dir() {
            if here.len() > MAX_DEPTH {
                out.warnings.push(CatalogWarning::new(
                    shown(&path),
                    format!("skipped: deeper than {MAX_DEPTH} folders"),
                ));
            } else {
                walk(root, &path, &here, out)?;
            }
        } else if kind.is_file() {
            let size = entry.metadata().map_or(0, |m| m.len());
            out.files.insert(here, (path, size));
        } else {
            out.warnings.push(CatalogWarning::new(
                shown(&path),
                "skipped: not a regular file",
            ));
        }
    }
    Ok(())
}

impl SkillCatalog {
    /// Reads a folder of Agent Skills into a catalogue: every folder
    /// holding a `SKILL.md` is a skill, its path under `root` the skill's
    /// path (`root/acme/refunds/SKILL.md` is `skill://acme/refunds/SKILL.md`),
    /// and every file under it one of its files (a nested skill's files
    /// are in the enclosing skill's manifest too). The files are read once,
    /// into memory.
    ///
    /// Hidden entries (names starting with `.`) are left out; symbolic
    /// links and other special files are skipped, never followed. A skill
    /// that cannot be served — over 512 files or 16 MiB, a file that cannot
    /// be read, a `SKILL.md` that is not UTF-8, whose frontmatter cannot be
    /// read, whose name is not its folder's or breaks the naming rules, or
    /// with no description — is skipped, and each is named in
    /// [`Self::warnings`] (and logged). Only a `root` that cannot be read is
    /// an error.
    pub fn from_dir(root: impl AsRef<Path>) -> Result<Self, SkillCatalogError> {
        let root = root.as_ref();
        let mut found = Walk {
            files: BTreeMap::new(),
            warnings: Vec::new(),
        };
        walk(root, root, &Vec::new(), &mut found)?;
        let mut warnings = found.warnings;
        let skill_dirs: Vec<Segments> = found
            .files
            .keys()
            .filter(|p| p.last().is_some_and(|n| n == SKILL_MD))
            .map(|p| p[..p.len() - 1].to_vec())
            .collect();
        let mut sources = Vec::new();
        // Each file read once, a nested skill's too.
        let mut read: BTreeMap<&Segments, Arc<[u8]>> = BTreeMap::new();
        'skills: for dir in skill_dirs {
            let origin = root.join(dir.join("/")).display().to_string();
            if dir.is_empty() {
                warnings.push(CatalogWarning::new(
                    origin,
                    "skipped: a SKILL.md at the root has no skill path (put the skill in a \
                     folder named as the skill)",
                ));
                continue;
            }
            let mine: Vec<(&Segments, &(PathBuf, u64))> = found
                .files
                .range(dir.clone()..)
                .take_while(|(p, _)| p.starts_with(&dir))
                .collect();
            // The limits first, from the sizes: a skill over them is not read.
            let total: u64 = mine.iter().map(|(_, (_, size))| size).sum();
            if mine.len() > MAX_FILES || total > MAX_BYTES {
                warnings.push(CatalogWarning::new(
                    origin,
                    format!(
                        "skipped: {} files of {total} bytes, over the limit of {MAX_FILES} files \
                         or {MAX_BYTES} bytes",
                        mine.len()
                    ),
                ));
                continue;
            }
            let mut files = BTreeMap::new();
            for (path, (on_disk, _)) in mine {
                if let Some(bytes) = read.get(path) {
                    files.insert(path[dir.len()..].to_vec(), Arc::clone(bytes));
                    continue;
                }
                match std::fs::read(on_disk) {
                    Ok(bytes) => {
                        let bytes = Arc::<[u8]>::from(bytes);
                        read.insert(path, Arc::clone(&bytes));
                        files.insert(path[dir.len()..].to_vec(), bytes);
                    }
                    Err(e) => {
                        warnings.push(CatalogWarning::new(
                            origin,
                            format!("skipped: {} cannot be read: {e}", on_disk.display()),
                        ));
                        continue 'skills;
                    }
                }
            }
            sources.push(Source {
                path: dir,
                origin,
                files,
            });
        }
        let mut catalog: Catalog = assemble(&sources, Problems::Skip)?;
        for warning in &warnings {
            tracing::warn!(path = %warning.path(), "skills: {}", warning.message());
        }
        warnings.append(&mut catalog.warnings);
        catalog.warnings = warnings;
        Ok(Self {
            inner: Arc::new(catalog),
        })
    }
}
