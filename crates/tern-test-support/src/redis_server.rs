//! One real `redis-server` per test: a free loopback port, a data folder of
//! its own, readiness by a bounded retry of `PING`, killed on drop.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

use crate::ports::free_port;

/// A running `redis-server` on 127.0.0.1.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts a server with AOF on and `appendfsync always`, as the store's
    /// docs prescribe, so a restart keeps what it acknowledged.
    ///
    /// # Panics
    /// When redis-server is missing or does not answer `PING` within 5 s.
    pub async fn start() -> Self {
        let mut dir = std::env::temp_dir();
        dir.push(format!(
            "tern-redis-test-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("redis-server's data folder");
        let mut server = Self {
            child: None,
            port: free_port(),
            dir,
        };
        server.spawn().await;
        server
    }

    async fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .args(["--maxmemory-policy", "noeviction"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server is installed (scripts/test installs it)");
        self.child = Some(child);
        for _ in 0..200 {
            if self.ping().await {
                return;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("redis-server did not answer PING on port {}", self.port);
    }

    async fn ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)).await else {
            return false;
        };
        if stream.write_all(b"PING\r\n").await.is_err() {
            return false;
        }
        let mut reply = [0u8; 7];
        stream.read_exact(&mut reply).await.is_ok() && &reply == b"+PONG\r\n"
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL: no goodbye) and keeps it down.
    pub async fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill().await;
        }
    }

    /// Starts it again on the same port and data folder.
    ///
    /// # Panics
    /// As [`RedisServer::start`].
    pub async fn restart(&mut self) {
        self.kill().await;
        self.spawn().await;
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            let _ = child.start_kill();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
