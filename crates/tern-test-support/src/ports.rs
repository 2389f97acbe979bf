//! Loopback ports and scratch folders for tests.

use std::path::PathBuf;

/// A port free on 127.0.0.1 at the time of asking.
///
/// # Panics
/// When no port can be bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A scratch folder under the system's temporary folder, removed on drop.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    /// A new, empty folder named after `what`, this process and a free port.
    ///
    /// # Panics
    /// When the folder cannot be made.
    pub fn new(what: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "tern-it-{what}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
