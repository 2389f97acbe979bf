//! `rediss://`: the stores over TLS to a real `redis-server` listening with
//! a certificate of the test's own CA, trusted through
//! [`RedisOptions::ca_file`]; the same server refused when the CA is not
//! trusted.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tern_redis::{RedisOptions, RedisReplayStore, RedisTaskStore};
use tern_server::ReplayStore;
use tern_server::testing::{RealTime, replay_store_contract};
use tokio::process::{Child, Command};

/// A `redis-server` speaking TLS only, its files in a folder of its own.
struct TlsRedis {
    _child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

use tern_test_support::ports::free_port;

/// A CA, and a certificate for `localhost` / `127.0.0.1` it signed, as PEM
/// files in `dir`: `ca.pem`, `cert.pem`, `key.pem`.
fn certificates(dir: &Path) {
    let ca = tern_test_support::ca::TestCa::new("tern-redis test CA", dir);
    let leaf = ca.leaf(&["localhost", "127.0.0.1"]);
    std::fs::write(dir.join("cert.pem"), leaf.cert_pem).unwrap();
    std::fs::write(dir.join("key.pem"), leaf.key_pem).unwrap();
}

impl TlsRedis {
    async fn start() -> Self {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("tern-redis-tls-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        certificates(&dir);
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", "0"])
            .args(["--tls-port", &port.to_string()])
            .arg("--tls-cert-file")
            .arg(dir.join("cert.pem"))
            .arg("--tls-key-file")
            .arg(dir.join("key.pem"))
            .arg("--tls-ca-cert-file")
            .arg(dir.join("ca.pem"))
            .args(["--tls-auth-clients", "no", "--save", ""])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        // Ready once the port accepts (at most 200 tries, 25 ms apart).
        for _ in 0..200 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Self {
                    _child: child,
                    port,
                    dir,
                };
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server did not listen for TLS on port {port}");
    }

    fn url(&self) -> String {
        format!("rediss://localhost:{}", self.port)
    }

    fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_store_keeps_its_contract_over_rediss_with_the_ca_file_trusted() {
    let redis = TlsRedis::start().await;
    let (url, ca) = (redis.url(), redis.ca());
    let n = AtomicU64::new(0);
    replay_store_contract(|limits| {
        let (url, ca) = (url.clone(), ca.clone());
        // A prefix per store: the suite's stores share one Redis.
        let prefix = format!("tls{}", n.fetch_add(1, Ordering::Relaxed));
        async move {
            let options = RedisOptions::new()
                .prefix(prefix)
                .limits(limits)
                .ca_file(ca);
            let store = RedisReplayStore::connect(&url, options)
                .await
                .expect("connects over TLS");
            (
                Arc::new(store) as Arc<dyn ReplayStore>,
                Arc::new(RealTime) as _,
            )
        }
    })
    .await;
    // The task store over the same TLS connection setup.
    let tasks = RedisTaskStore::connect(&url, RedisOptions::new().prefix("tls-tasks").ca_file(&ca))
        .await
        .expect("connects over TLS");
    let nothing = tern_server::task::TaskStore::load(&tasks, "no-such-task", 0)
        .await
        .expect("a round trip over TLS");
    assert!(nothing.is_none());
}

#[tokio::test]
async fn a_rediss_server_whose_ca_is_not_trusted_is_refused() {
    let redis = TlsRedis::start().await;
    // The system's roots do not hold the test's CA.
    let refused = RedisReplayStore::connect(&redis.url(), RedisOptions::new().prefix("tls")).await;
    let e = refused.expect_err("an untrusted certificate is refused");
    let chain = format!("{e}: {:?}", std::error::Error::source(&e));
    assert!(
        chain.contains("certificate") || chain.contains("UnknownIssuer"),
        "{chain}"
    );
    // A CA file that does not exist is an error too, not the system roots.
    let missing = RedisOptions::new().ca_file(redis.dir.join("absent.pem"));
    assert!(
        RedisReplayStore::connect(&redis.url(), missing)
            .await
            .is_err()
    );
}
