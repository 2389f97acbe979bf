//! Which servers spoke 2025 on an earlier run (spec: Versioning and
//! Compatibility › Backward Compatibility with Initialization-Based Versions:
//! the era is cached per server), so that `tern call` does not pay the era
//! probe on every run.
//!
//! - **Where**: `$TERN_ERA_CACHE`, else `$XDG_CACHE_HOME/tern/eras.json`,
//!   else `~/.cache/tern/eras.json` (`~/Library/Caches/tern` on macOS,
//!   `%LOCALAPPDATA%\tern` on Windows). `TERN_ERA_CACHE=off` turns it off.
//! - **Key**: an HTTP server's URL; a command's words with the folder it
//!   runs in (the same words elsewhere may start another server).
//! - **What**: only "this server spoke 2025". A modern server answers the
//!   probe in one round trip; the costly probes are against 2025 servers
//!   (one that ignores the probe costs its whole timeout, one that exits on
//!   it a restart). A modern verdict removes the entry.
//! - **Lifetime**: a day from the probe that found it (a run that used the
//!   entry does not extend it, so a server that moved to 2026-07-28 but
//!   still serves 2025 sessions is probed again within a day). A stale
//!   entry for a modern-only server costs one refused `initialize`, then
//!   the probe runs as if there were no entry
//!   ([`tern_client::legacy::DualEra::legacy_hint`]).
//! - **Safety**: at most [`MAX_ENTRIES`], the oldest dropped; written to a
//!   temporary file and renamed, so concurrent runs never read half a file;
//!   an unreadable file is treated as empty.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tern_client::legacy::Era;

/// How long a verdict is trusted.
pub(crate) const LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// The most servers remembered.
pub(crate) const MAX_ENTRIES: usize = 256;

/// The cache file, unless turned off or no folder is known.
fn path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TERN_ERA_CACHE").filter(|p| !p.is_empty()) {
        return (p != "off").then(|| PathBuf::from(p));
    }
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
    };
    let folder = if cfg!(windows) {
        std::env::var_os("LOCALAPPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        home().map(|h| h.join("Library/Caches"))
    } else {
        std::env::var_os("XDG_CACHE_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| home().map(|h| h.join(".cache")))
    }?;
    Some(folder.join("tern").join("eras.json"))
}

/// The key of a command run in the current folder.
pub(crate) fn command_key(program: &str, args: &[String]) -> String {
    let cwd = std::env::current_dir()
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    let mut words = vec![cwd, program.to_owned()];
    words.extend(args.iter().cloned());
    serde_json::to_string(&words).unwrap_or_default()
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Key → the 2025 version it spoke and when (seconds since the epoch).
type Entries = BTreeMap<String, (String, u64)>;

fn load(path: &std::path::Path) -> Entries {
    std::fs::read(path)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default()
}

/// Whether `key` spoke 2025 within the last [`LIFETIME`].
pub(crate) fn spoke_legacy(key: &str) -> bool {
    let Some(path) = path() else { return false };
    load(&path)
        .get(key)
        .is_some_and(|(_, at)| now().saturating_sub(*at) < LIFETIME.as_secs())
}

/// Records the era `key` was found to speak this run.
pub(crate) fn record(key: &str, era: &Era) {
    let Some(path) = path() else { return };
    let mut entries = load(&path);
    let changed = match era {
        Era::Legacy(version) => {
            if entries.get(key).is_some_and(|(v, _)| v == version) {
                false
            } else {
                entries.insert(key.to_owned(), (version.clone(), now()));
                true
            }
        }
        _ => entries.remove(key).is_some(),
    };
    if !changed {
        return;
    }
    while entries.len() > MAX_ENTRIES {
        let oldest = entries
            .iter()
            .min_by_key(|(_, (_, at))| *at)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => entries.remove(&k),
            None => break,
        };
    }
    if let Err(e) = write(&path, &entries) {
        tracing::debug!(error = %e, "the era cache was not written");
    }
}

fn write(path: &std::path::Path, entries: &Entries) -> std::io::Result<()> {
    if let Some(folder) = path.parent() {
        std::fs::create_dir_all(folder)?;
    }
    let tmp = path.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(
        &tmp,
        serde_json::to_vec(entries).map_err(std::io::Error::other)?,
    )?;
    std::fs::rename(&tmp, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
