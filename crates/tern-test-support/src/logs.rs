//! Logs a test reads back: [`Captured`], a writer into a shared buffer for
//! a `tracing_subscriber::fmt` subscriber, and [`global`], the test
//! binary's global DEBUG subscriber writing into one.

use std::sync::{Arc, Mutex, OnceLock};

/// A writer into a shared buffer; clones share it.
#[derive(Clone, Debug, Default)]
pub struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.lock()).into_owned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Everything this test binary logs at DEBUG from the first call on, each
/// span's close included (a line with its fields, recorded ones too).
/// Global, since a thread-local subscriber can miss callsites another test
/// registered first; so its lines are every test's, and a test picks its
/// own by something only it logs.
///
/// # Panics
///
/// If another global subscriber was installed first.
pub fn global() -> Captured {
    static CAPTURED: OnceLock<Captured> = OnceLock::new();
    CAPTURED
        .get_or_init(|| {
            let captured = Captured::default();
            let writer = captured.clone();
            let subscriber = tracing_subscriber::fmt()
                .with_max_level(tracing::Level::DEBUG)
                .with_ansi(false)
                .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
                .with_writer(move || writer.clone())
                .finish();
            tracing::subscriber::set_global_default(subscriber)
                .expect("no other global subscriber in this test binary");
            captured
        })
        .clone()
}
