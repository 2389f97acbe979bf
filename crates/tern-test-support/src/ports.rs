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
    /// A new, empty folder named after `what`, this process and a counter.
    ///
    /// The name is never reused within a process (a port is: two tests that
    /// asked for a free port at once could be given the same one, and one's
    /// drop removed the other's folder), and the folder is created with
    /// `create_dir`, so a leftover from an earlier process of the same id is
    /// skipped rather than shared.
    ///
    /// # Panics
    /// When the folder cannot be made.
    pub fn new(what: &str) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let base = std::env::temp_dir();
        loop {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let dir = base.join(format!("tern-it-{what}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Self(dir),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {} // taken: the next number
                Err(e) => panic!("{}: {e}", dir.display()),
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
