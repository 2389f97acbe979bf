//! A real nginx in front of a server, re-chunking what it forwards: the
//! proxy that showed multibyte text being cut between two reads (issue 10).
//!
//! One helper, as for every real server in tests: a free loopback port, a
//! generated configuration in a scratch folder, a bounded wait for
//! readiness, and the process killed on drop. nginx comes from Debian's
//! packages; `scripts/test` installs it when missing. A missing binary fails
//! the test with that advice, it never skips it.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running nginx proxying `http://127.0.0.1:PORT/` to one upstream.
#[derive(Debug)]
pub struct Nginx {
    child: Child,
    dir: PathBuf,
    port: u16,
}

/// The nginx binary: `TERN_NGINX`, else `nginx` on the `PATH`, else Debian's.
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("TERN_NGINX") {
        return path.into();
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("nginx"))
            .find(|candidate| candidate.is_file())
    });
    on_path.unwrap_or_else(|| PathBuf::from("/usr/sbin/nginx"))
}

/// A port free on 127.0.0.1 at the time of asking.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

fn config(dir: &std::path::Path, port: u16, upstream: SocketAddr) -> String {
    let d = dir.display();
    // proxy_buffering off and a 1 KiB buffer: nginx forwards what it has as
    // it arrives, in pieces of its own size (1,024 bytes cut three-byte Thai
    // characters), re-chunked for the client.
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            proxy_buffer_size 1k;
            chunked_transfer_encoding on;
        }}
    }}
}}
"
    )
}

impl Nginx {
    /// Starts nginx in front of `upstream` and waits until it accepts
    /// connections (bounded: a few attempts at a free port, each waited for
    /// at most five seconds).
    pub fn start(upstream: SocketAddr) -> Self {
        let bin = binary();
        assert!(
            bin.is_file(),
            "nginx is needed at {} (scripts/test installs it: apt-get install nginx)",
            bin.display()
        );
        let mut last_error = String::new();
        for attempt in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "tern-client-it-nginx-{}-{port}-{attempt}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).expect("nginx's scratch folder");
            let conf = dir.join("nginx.conf");
            std::fs::write(&conf, config(&dir, port, upstream)).expect("nginx.conf");
            let child = Command::new(&bin)
                .arg("-p")
                .arg(&dir)
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(dir.join("error.log"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                // Its own messages go to error.log (`-e`), read on failure.
                .stderr(Stdio::null())
                .spawn()
                .expect("nginx starts");
            let mut nginx = Self { child, dir, port };
            match nginx.wait_ready() {
                Ok(()) => return nginx,
                Err(why) => last_error = why, // dropped: killed, folder removed
            }
        }
        panic!("nginx did not start: {last_error}");
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], self.port));
        for _ in 0..200 {
            if let Some(status) = self.child.try_wait().map_err(|e| e.to_string())? {
                let log = std::fs::read_to_string(self.dir.join("error.log")).unwrap_or_default();
                return Err(format!("nginx exited ({status}): {log}"));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err("nginx did not accept connections within 5 s".into())
    }

    /// The proxied endpoint.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
