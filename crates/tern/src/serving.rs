//! What every served process of `tern` shares, fleet or not: the key file
//! (`--keys`) and the signals that stop it.

use std::path::Path;

use tern_server::KeyRing;

/// Reads and parses a key file.
///
/// # Errors
/// The file cannot be read or is not a key ring.
pub fn read_keys(path: &Path) -> Result<KeyRing, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    KeyRing::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `SIGINT` or `SIGTERM`: what stops a served process (a terminal's Ctrl-C,
/// or a supervisor's stop).
pub async fn stop_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
