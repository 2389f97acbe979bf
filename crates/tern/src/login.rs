//! `tern login` / `tern logout`: OAuth grants kept in the user's config
//! folder, used by every `--url` command.
//!
//! - **Where**: `tokens.json` in tern's config folder (`$XDG_CONFIG_HOME/tern`,
//!   else `~/.config/tern`; see [`crate`]'s `servers.json` for the other
//!   systems). The folder is made `0700`, the file `0600`; each write goes to
//!   a temporary file in the same folder, synced, then renamed over the old
//!   one, so a reader never sees half a file.
//! - **Locks**: `tokens.write.lock` around each read-modify-write, and
//!   `tokens.refresh.lock` around a refresh, so two processes never spend
//!   the same (rotated) refresh token: the second waits, then finds the
//!   first one's fresh grant. A lock is a file made with `create_new`; one
//!   older than [`STALE_LOCK`] (a process that died holding it) is broken;
//!   waiting is bounded by [`LOCK_WAIT`].
//! - **The browser**: [`LoopbackBrowser`] listens on `127.0.0.1:PORT`
//!   (`/callback`) for the redirect, prints the authorization URL and opens
//!   it with `$TERN_BROWSER` (a command the URL is appended to), else
//!   `xdg-open` / `open` when there is one.

use std::io::Write as _;
use std::path::{Path, PathBuf};
#[cfg(test)]
use std::sync::Arc;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use tern_client::ClientError;
use tern_client::auth::{Browser, Grant, TokenKey, TokenStore, Url};
use tern_client::transport::BoxFuture;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A lock file older than this belongs to a dead process: 60 s.
pub const STALE_LOCK: Duration = Duration::from_secs(60);
/// How long to wait for a lock: 15 s.
pub const LOCK_WAIT: Duration = Duration::from_secs(15);
/// How long the loopback redirect is waited for: 5 minutes.
pub const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// tern's config folder (`…/tern`), if one is known.
pub fn folder() -> Option<PathBuf> {
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
    };
    let base = if cfg!(windows) {
        std::env::var_os("APPDATA").map(PathBuf::from)
    } else if cfg!(target_os = "macos") {
        home().map(|h| h.join("Library/Application Support"))
    } else {
        std::env::var_os("XDG_CONFIG_HOME")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .or_else(|| home().map(|h| h.join(".config")))
    }?;
    Some(base.join("tern"))
}

/// A held lock file, removed when dropped.
#[derive(Debug)]
pub struct FileLock(PathBuf);

/// Between two tries of a held lock: 20 ms.
const LOCK_POLL: Duration = Duration::from_millis(20);

impl FileLock {
    /// One try: the lock, or `None` while another holds it. A stale lock is
    /// removed and taken again at once; one that cannot be removed (not
    /// ours to remove, or not a file) counts as held, so the caller waits
    /// and gives up at its deadline.
    fn try_take(path: &Path) -> std::io::Result<Option<Self>> {
        let create = || {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(path)
        };
        let mut result = create();
        if matches!(&result, Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists) {
            let stale = std::fs::metadata(path)
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > STALE_LOCK);
            if stale && std::fs::remove_file(path).is_ok() {
                result = create();
            }
        }
        match result {
            Ok(mut f) => {
                let _ = writeln!(f, "{}", std::process::id());
                Ok(Some(Self(path.to_owned())))
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn timed_out(path: &Path) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("{} is held by another tern", path.display()),
        )
    }

    /// Takes the lock file `path`, waiting at most [`LOCK_WAIT`], from
    /// synchronous code. On a multi-threaded tokio runtime the wait is
    /// `block_in_place`, so the runtime's other tasks go on.
    pub fn acquire(path: &Path) -> std::io::Result<Self> {
        let wait = || Self::acquire_within(path, LOCK_WAIT);
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(wait)
            }
            _ => wait(),
        }
    }

    /// Takes the lock file `path`, waiting at most `wait` (every try checks
    /// the deadline, then sleeps).
    pub fn acquire_within(path: &Path, wait: Duration) -> std::io::Result<Self> {
        let deadline = std::time::Instant::now() + wait;
        loop {
            if let Some(lock) = Self::try_take(path)? {
                return Ok(lock);
            }
            if std::time::Instant::now() >= deadline {
                return Err(Self::timed_out(path));
            }
            std::thread::sleep(LOCK_POLL);
        }
    }

    /// [`Self::acquire_within`] for async code: the waits are
    /// `tokio::time::sleep`, the runtime is never blocked.
    pub async fn acquire_async(path: &Path, wait: Duration) -> std::io::Result<Self> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(lock) = Self::try_take(path)? {
                return Ok(lock);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Self::timed_out(path));
            }
            tokio::time::sleep(LOCK_POLL).await;
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Grants in `tokens.json` of a folder (module docs).
#[derive(Debug)]
pub struct FileTokenStore {
    dir: PathBuf,
    /// Serialises this process's writers (the lock file serialises
    /// processes).
    writing: Mutex<()>,
}

impl FileTokenStore {
    /// The store in `dir` (made on the first write).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Self {
            dir: dir.into(),
            writing: Mutex::new(()),
        }
    }

    /// The store in tern's config folder.
    pub fn default_store() -> Option<Self> {
        folder().map(Self::new)
    }

    /// The file.
    pub fn path(&self) -> PathBuf {
        self.dir.join("tokens.json")
    }

    /// Every grant kept (an unreadable file reads as none, with a warning).
    pub fn grants(&self) -> Vec<Grant> {
        match std::fs::read(self.path()) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!("{} is not a token file: {e}", self.path().display());
                Vec::new()
            }),
            Err(_) => Vec::new(),
        }
    }

    fn make_dir(&self) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700))?;
        }
        Ok(())
    }

    fn write(&self, grants: &[Grant]) -> std::io::Result<()> {
        let tmp = self
            .dir
            .join(format!(".tokens.json.{}.tmp", std::process::id()));
        let mut options = std::fs::OpenOptions::new();
        options.write(true).create(true).truncate(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt as _;
            options.mode(0o600);
        }
        let mut file = options.open(&tmp)?;
        file.write_all(&serde_json::to_vec_pretty(grants).map_err(std::io::Error::other)?)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&tmp, self.path())
    }

    /// Changes the grants with `f` under the write lock.
    pub fn update(&self, f: impl FnOnce(&mut Vec<Grant>)) -> std::io::Result<()> {
        let _process = self
            .writing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.make_dir()?;
        let _lock = FileLock::acquire(&self.dir.join("tokens.write.lock"))?;
        let mut grants = self.grants();
        f(&mut grants);
        self.write(&grants)
    }

    /// Forgets every grant obtained for `endpoint`; how many there were.
    pub fn remove_endpoint(&self, endpoint: &str) -> std::io::Result<usize> {
        let mut removed = 0;
        self.update(|grants| {
            let before = grants.len();
            grants.retain(|g| g.endpoint != endpoint);
            removed = before - grants.len();
        })?;
        Ok(removed)
    }
}

impl TokenStore for FileTokenStore {
    fn get(&self, key: &TokenKey) -> Option<Grant> {
        self.grants().into_iter().find(|g| g.key == *key)
    }

    fn find(&self, endpoint: &str) -> Option<Grant> {
        self.grants().into_iter().find(|g| g.endpoint == endpoint)
    }

    fn put(&self, grant: Grant) {
        if let Err(e) = self.update(|grants| {
            grants.retain(|g| g.key != grant.key);
            grants.push(grant);
        }) {
            tracing::warn!("cannot save the token in {}: {e}", self.path().display());
        }
    }

    fn remove(&self, key: &TokenKey) {
        if let Err(e) = self.update(|grants| grants.retain(|g| g.key != *key)) {
            tracing::warn!("cannot update {}: {e}", self.path().display());
        }
    }

    fn lock<'a>(&'a self, _key: &'a TokenKey) -> BoxFuture<'a, Option<Box<dyn Send>>> {
        Box::pin(async move {
            self.make_dir().ok()?;
            let path = self.dir.join("tokens.refresh.lock");
            match FileLock::acquire_async(&path, LOCK_WAIT).await {
                Ok(lock) => Some(Box::new(lock) as Box<dyn Send>),
                Err(e) => {
                    tracing::warn!("refreshing without the lock: {e}");
                    None
                }
            }
        })
    }
}

/// The command that opens a web page: `$TERN_BROWSER` (words split on
/// white space; the URL is appended as one more argument), else `open` on
/// macOS, else `xdg-open`. `tern login` and URL elicitation both use it.
pub fn browser_command() -> Vec<String> {
    let command = std::env::var("TERN_BROWSER")
        .ok()
        .filter(|c| !c.trim().is_empty());
    match command {
        Some(c) => c.split_whitespace().map(str::to_owned).collect(),
        None if cfg!(target_os = "macos") => vec!["open".into()],
        None => vec!["xdg-open".into()],
    }
}

/// The login's browser: a loopback listener for the redirect (module docs).
#[derive(Debug)]
pub struct LoopbackBrowser {
    listener: Mutex<Option<std::net::TcpListener>>,
    port: u16,
}

impl LoopbackBrowser {
    /// Listens on a free port of 127.0.0.1.
    pub fn new() -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        Ok(Self {
            listener: Mutex::new(Some(listener)),
            port,
        })
    }

    fn open(url: &str) {
        let words = browser_command();
        let spawned = std::process::Command::new(&words[0])
            .args(&words[1..])
            .arg(url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if spawned.is_err() {
            eprintln!("tern: no browser could be opened; open the URL above yourself");
        }
    }

    async fn wait(&self) -> Result<String, ClientError> {
        let std_listener = self
            .listener
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .ok_or_else(|| ClientError::authorization("the login listener was used already"))?;
        let listener = tokio::net::TcpListener::from_std(std_listener)
            .map_err(|e| ClientError::authorization(format!("the login listener: {e}")))?;
        loop {
            let (mut stream, _) = listener
                .accept()
                .await
                .map_err(|e| ClientError::authorization(format!("the login listener: {e}")))?;
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 8192 {
                match stream.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let text = String::from_utf8_lossy(&head);
            let target = text
                .lines()
                .next()
                .and_then(|l| l.strip_prefix("GET "))
                .and_then(|l| l.split(' ').next())
                .unwrap_or("");
            if target.starts_with("/callback") {
                let page = "<!doctype html><title>tern</title><p>tern is authorized. You can close this window.";
                let _ = stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
                            page.len()
                        )
                        .as_bytes(),
                    )
                    .await;
                return Ok(format!("http://127.0.0.1:{}{target}", self.port));
            }
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
        }
    }
}

impl Browser for LoopbackBrowser {
    fn redirect_uri(&self) -> String {
        format!("http://127.0.0.1:{}/callback", self.port)
    }

    fn authorize(&self, url: Url) -> BoxFuture<'_, Result<String, ClientError>> {
        Box::pin(async move {
            eprintln!("tern: to authorize, open this URL:\n\n  {url}\n");
            Self::open(url.as_str());
            tokio::time::timeout(LOGIN_TIMEOUT, self.wait())
                .await
                .map_err(|_| {
                    ClientError::authorization(format!(
                        "no authorization came back within {LOGIN_TIMEOUT:?}"
                    ))
                })?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("tern-login-unit-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    fn grant(endpoint: &str, token: &str) -> Grant {
        serde_json::from_value(serde_json::json!({
            "key": {"resource": endpoint, "issuer": "https://as.example", "client_id": "c"},
            "endpoint": endpoint, "access_token": token, "refresh_token": null,
            "expires_at": null, "scopes": [], "token_endpoint": "https://as.example/token",
            "client_secret": null, "auth_method": "none"
        }))
        .unwrap()
    }

    #[test]
    fn grants_are_kept_replaced_and_forgotten() {
        let dir = scratch("store");
        let store = FileTokenStore::new(&dir);
        assert!(store.find("https://a.example/mcp").is_none(), "no file yet");
        store.put(grant("https://a.example/mcp", "t1"));
        store.put(grant("https://b.example/mcp", "t2"));
        store.put(grant("https://a.example/mcp", "t3"));
        assert_eq!(store.grants().len(), 2);
        assert_eq!(
            store.find("https://a.example/mcp").unwrap().access_token,
            "t3"
        );
        // Another store on the same folder (another process) reads the same.
        let other = FileTokenStore::new(&dir);
        assert_eq!(
            other.find("https://b.example/mcp").unwrap().access_token,
            "t2"
        );
        assert_eq!(other.remove_endpoint("https://a.example/mcp").unwrap(), 1);
        assert!(store.find("https://a.example/mcp").is_none());
        // No temporary or lock file is left behind.
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["tokens.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_garbled_file_reads_as_no_grant() {
        let dir = scratch("garbled");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tokens.json"), "{not json").unwrap();
        let store = FileTokenStore::new(&dir);
        assert!(store.grants().is_empty());
        store.put(grant("https://a.example/mcp", "t"));
        assert_eq!(store.grants().len(), 1, "a put rewrites it whole");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_refresh_lock_holds_a_second_holder_off_until_released() {
        let dir = scratch("lock");
        let store = Arc::new(FileTokenStore::new(&dir));
        let key = grant("https://a.example/mcp", "t").key;
        let first = store.lock(&key).await.expect("the lock");
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        let s = Arc::clone(&store);
        let k = key.clone();
        let waiter = tokio::spawn(async move {
            let second = s.lock(&k).await;
            let _ = tx.send(second.is_some());
        });
        // The second holder is still waiting while the first holds it (it
        // has had several polls' time).
        tokio::time::sleep(LOCK_POLL * 5).await;
        assert!(rx.try_recv().is_err());
        drop(first);
        let taken = tokio::time::timeout(LOCK_WAIT, rx).await.unwrap().unwrap();
        assert!(taken, "taken once released");
        waiter.await.unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A stale lock that cannot be removed (here a folder, which
    /// `remove_file` refuses even to root) is waited on like a held one
    /// and given up at the deadline: no endless retry.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_stale_lock_that_cannot_be_removed_times_out() {
        let dir = scratch("stuck");
        let path = dir.join("x.lock");
        std::fs::create_dir_all(&path).unwrap();
        std::fs::File::open(&path)
            .unwrap()
            .set_modified(SystemTime::now() - STALE_LOCK - Duration::from_secs(1))
            .unwrap();
        let wait = Duration::from_millis(200);
        // Synchronous: on a thread of its own, so a spin cannot hang the test.
        let (tx, rx) = std::sync::mpsc::channel();
        let p = path.clone();
        std::thread::spawn(move || {
            let _ = tx.send(FileLock::acquire_within(&p, wait).map(drop));
        });
        let e = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("acquire_within returned")
            .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
        // Async: the same, and the runtime stays free meanwhile.
        let ticks = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let t = Arc::clone(&ticks);
        let ticker = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_millis(10)).await;
                t.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let e = tokio::time::timeout(
            Duration::from_secs(10),
            FileLock::acquire_async(&path, wait),
        )
        .await
        .expect("acquire_async returned")
        .unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::TimedOut, "{e}");
        ticker.abort();
        assert!(ticks.load(std::sync::atomic::Ordering::Relaxed) > 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_stale_lock_is_broken() {
        let dir = scratch("stale");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.lock");
        let file = std::fs::File::create(&path).unwrap();
        file.set_modified(SystemTime::now() - STALE_LOCK - Duration::from_secs(1))
            .unwrap();
        drop(file);
        let lock = FileLock::acquire(&path).unwrap();
        drop(lock);
        assert!(!path.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
