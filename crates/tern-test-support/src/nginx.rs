//! A real nginx in front of servers under test, one helper for every crate:
//! a free loopback port, a generated configuration in a scratch folder, a
//! bounded wait for readiness, the process killed on drop. Two shapes:
//!
//! - [`Nginx::start`]: round robin over replicas (nginx's default: no
//!   stickiness), buffering off (SSE), each request's upstream logged with
//!   its `X-Test-Id` ([`Nginx::upstreams`]) — the fleet tests;
//! - [`Nginx::rechunking`]: one upstream, 1 KiB proxy buffers, so what it
//!   forwards arrives re-chunked in pieces of nginx's size (the proxy that
//!   showed multibyte text cut between two reads).
//!
//! nginx comes from Debian's packages (`scripts/test` installs it); a
//! missing binary fails the test with that advice, it never skips it.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ports::{Scratch, free_port};

/// A running nginx.
#[derive(Debug)]
pub struct Nginx {
    child: Child,
    /// The port it listens on (127.0.0.1).
    pub port: u16,
    dir: PathBuf,
    /// The scratch folder it made for itself, removed on drop.
    _own: Option<Scratch>,
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

/// The configuration around one `http` block's `upstream` and `location`.
fn config(dir: &Path, port: u16, http: &str, location: &str) -> String {
    let d = dir.display();
    format!(
        "daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 256; }}
http {{
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
{http}
    server {{
        listen 127.0.0.1:{port};
        location / {{
{location}
        }}
    }}
}}
"
    )
}

impl Nginx {
    /// Round robin over `upstreams` (`host:port`), its files in `dir`;
    /// `max_fails=0`: a replica is never marked down, so one restarted a
    /// moment ago takes traffic at once (a refused connection moves the
    /// request to the next replica anyway).
    ///
    /// # Panics
    /// When nginx is missing, or does not accept connections within 5 s.
    pub fn start(upstreams: &[String], dir: &Path) -> Self {
        let mut servers = String::new();
        for u in upstreams {
            let _ = writeln!(servers, "        server {u} max_fails=0;");
        }
        let d = dir.display();
        let http = format!(
            "    log_format upstream '$http_x_test_id $upstream_addr $status';
    access_log {d}/access.log upstream;
    upstream tern {{
{servers}    }}"
        );
        let location = "            proxy_pass http://tern;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header Forwarded \"\";
            proxy_buffering off;
            proxy_request_buffering off;
            proxy_read_timeout 60s;
            proxy_connect_timeout 2s;";
        let port = free_port();
        Self::spawn(port, dir, &config(dir, port, &http, location), None)
            .unwrap_or_else(|why| panic!("{why}"))
    }

    /// One upstream, re-chunking: `proxy_buffering off` and a 1 KiB
    /// buffer, so nginx forwards what it has as it arrives, in pieces of its
    /// own size (1,024 bytes cut three-byte characters), chunked anew for
    /// the client. A few attempts at a free port, each waited for 5 s.
    ///
    /// # Panics
    /// When nginx is missing or does not start.
    pub fn rechunking(upstream: SocketAddr) -> Self {
        let location = format!(
            "            proxy_pass http://{upstream};
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
            proxy_buffering off;
            proxy_buffer_size 1k;
            chunked_transfer_encoding on;"
        );
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            let scratch = Scratch::new("nginx");
            let dir = scratch.0.clone();
            let conf = config(&dir, port, "    access_log off;", &location);
            match Self::spawn(port, &dir, &conf, Some(scratch)) {
                Ok(nginx) => return nginx,
                Err(why) => last_error = why,
            }
        }
        panic!("nginx did not start: {last_error}");
    }

    fn spawn(port: u16, dir: &Path, conf: &str, own: Option<Scratch>) -> Result<Self, String> {
        let bin = binary();
        assert!(
            bin.is_file(),
            "nginx is needed at {} (scripts/test installs it: apt-get install nginx)",
            bin.display()
        );
        let path = dir.join("nginx.conf");
        std::fs::write(&path, conf).map_err(|e| format!("nginx.conf: {e}"))?;
        let child = Command::new(&bin)
            .arg("-p")
            .arg(dir)
            .arg("-c")
            .arg(&path)
            .arg("-e")
            .arg(dir.join("error.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            // Its own messages go to error.log (`-e`), read on failure.
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("nginx does not start: {e}"))?;
        let mut nginx = Self {
            child,
            port,
            dir: dir.to_owned(),
            _own: own,
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        for _ in 0..200 {
            if let Ok(Some(status)) = nginx.child.try_wait() {
                let log = std::fs::read_to_string(dir.join("error.log")).unwrap_or_default();
                return Err(format!("nginx exited ({status}): {log}"));
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok() {
                return Ok(nginx);
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        Err("nginx did not accept connections within 5 s".into())
    }

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The upstream that served each request, by its `X-Test-Id`, in order
    /// ([`Nginx::start`] only).
    pub fn upstreams(&self) -> HashMap<String, Vec<String>> {
        let log = std::fs::read_to_string(self.dir.join("access.log")).unwrap_or_default();
        let mut out: HashMap<String, Vec<String>> = HashMap::new();
        for line in log.lines() {
            // `ID UPSTREAMS STATUS`; UPSTREAMS is `a, b` when nginx tried a
            // dead replica first: the last one served.
            let Some((id, rest)) = line.split_once(' ') else {
                continue;
            };
            let Some((upstreams, _status)) = rest.rsplit_once(' ') else {
                continue;
            };
            let served = upstreams.rsplit(", ").next().unwrap_or(upstreams);
            out.entry(id.to_owned())
                .or_default()
                .push(served.to_owned());
        }
        out
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
