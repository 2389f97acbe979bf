//! The audit's own wire: raw bytes to the server, so it can send what no
//! well-behaved client would (a doubled key, a header that contradicts the
//! body, a header sent a byte at a time). HTTP is HTTP/1.1 written by hand
//! on one connection per request (`Connection: close`), read to its end;
//! stdio is one child process, one line per message.

use std::fmt::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// What came back for one request.
#[derive(Debug, Clone, Default)]
pub(crate) struct Exchange {
    /// The HTTP status (none over stdio).
    pub(crate) status: Option<u16>,
    /// The JSON-RPC message answering the request, if one came.
    pub(crate) message: Option<Value>,
}

impl Exchange {
    /// The JSON-RPC error code, if the answer is an error.
    pub(crate) fn error_code(&self) -> Option<i64> {
        self.message.as_ref()?.get("error")?.get("code")?.as_i64()
    }

    /// The result object, if the answer is a result.
    pub(crate) fn result(&self) -> Option<&Value> {
        self.message.as_ref()?.get("result")
    }

    /// The result's `resultType` (absent = "complete", rule
    /// `result-type-absent`).
    pub(crate) fn result_type(&self) -> Option<&str> {
        self.result().map(|r| {
            r.get("resultType")
                .and_then(Value::as_str)
                .unwrap_or("complete")
        })
    }

    /// A short account for a report line: the status and the code or
    /// result type.
    pub(crate) fn describe(&self) -> String {
        let mut s = String::new();
        if let Some(status) = self.status {
            let _ = write!(s, "HTTP {status}, ");
        }
        match (&self.message, self.error_code(), self.result_type()) {
            (None, _, _) => s.push_str("no JSON-RPC answer"),
            (_, Some(code), _) => {
                let _ = write!(s, "error {code}");
            }
            (_, _, Some(kind)) => {
                s.push_str(kind);
                if self.result().and_then(|r| r.get("isError")) == Some(&Value::Bool(true)) {
                    s.push_str(" with isError");
                }
            }
            _ => s.push_str("an answer that is neither result nor error"),
        }
        s
    }
}

/// An HTTP endpoint, `http://HOST:PORT/PATH`.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// `HOST:PORT` to connect to (and to send as `Host`).
    pub(crate) authority: String,
    /// The request target.
    pub(crate) path: String,
}

impl Endpoint {
    /// Parses an `http://` URL (tern audit speaks plain HTTP/1.1 only).
    pub(crate) fn parse(url: &str) -> Result<Self, String> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| format!("{url}: tern audit needs an http:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(format!("{url}: no host"));
        }
        let authority = if authority.contains(':') && !authority.ends_with(']') {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        Ok(Self {
            authority,
            path: path.to_string(),
        })
    }
}

/// The transport under audit.
pub(crate) enum Wire {
    /// Streamable HTTP.
    Http {
        /// Where.
        endpoint: Endpoint,
        /// `--header` values sent on every request (e.g. authorization).
        extra: Vec<(String, String)>,
        /// The wait for one answer.
        timeout: Duration,
    },
    /// A child over stdio.
    Stdio(Box<StdioChild>),
}

/// A child process serving on its standard input and output.
pub(crate) struct StdioChild {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
    timeout: Duration,
}

impl Wire {
    /// Starts `command` as a child (its standard error discarded unless
    /// `verbose`).
    pub(crate) fn spawn(
        command: &[String],
        env: &[(String, String)],
        timeout: Duration,
        verbose: bool,
    ) -> std::io::Result<Self> {
        let (program, args) = command
            .split_first()
            .ok_or_else(|| std::io::Error::other("no command"))?;
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(if verbose {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .kill_on_drop(true)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| std::io::Error::other("no stdin"))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| std::io::Error::other("no stdout"))?;
        Ok(Self::Stdio(Box::new(StdioChild {
            child,
            stdin,
            stdout: BufReader::new(stdout).lines(),
            timeout,
        })))
    }

    /// Whether this is HTTP (the header checks apply).
    pub(crate) fn is_http(&self) -> bool {
        matches!(self, Self::Http { .. })
    }

    /// Sends `body` (one JSON-RPC request whose id is `id`) with `headers`
    /// (HTTP only) and waits for its answer.
    pub(crate) async fn send(
        &mut self,
        id: &str,
        body: &str,
        headers: &[(String, String)],
    ) -> std::io::Result<Exchange> {
        match self {
            Self::Http {
                endpoint,
                extra,
                timeout,
            } => {
                let mut all: Vec<(String, String)> = headers.to_vec();
                all.extend(extra.iter().cloned());
                let raw = tokio::time::timeout(*timeout, http_post(endpoint, body, &all))
                    .await
                    .map_err(|_| {
                        std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time")
                    })??;
                Ok(parse_http(&raw, id))
            }
            Self::Stdio(child) => child.send(id, body).await,
        }
    }

    /// Ends the child, if any.
    pub(crate) async fn close(self) {
        if let Self::Stdio(mut child) = self {
            drop(child.stdin);
            let _ = tokio::time::timeout(Duration::from_secs(2), child.child.wait()).await;
            let _ = child.child.kill().await;
        }
    }
}

impl StdioChild {
    async fn send(&mut self, id: &str, body: &str) -> std::io::Result<Exchange> {
        // One line: a body holding a raw newline would be two messages.
        let line = body.replace('\n', " ");
        self.stdin.write_all(line.as_bytes()).await?;
        self.stdin.write_all(b"\n").await?;
        self.stdin.flush().await?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let next = tokio::time::timeout(left, self.stdout.next_line())
                .await
                .map_err(|_| {
                    std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer in time")
                })??;
            let Some(line) = next else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the server closed its output",
                ));
            };
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue;
            };
            if answers(&message, id) {
                return Ok(Exchange {
                    status: None,
                    message: Some(message),
                });
            }
        }
    }
}

/// Whether `message` is the response to request `id` (or an id-less error,
/// which answers a request the server could not read).
fn answers(message: &Value, id: &str) -> bool {
    if message.get("method").is_some() {
        return false;
    }
    match message.get("id") {
        Some(Value::String(s)) => s == id,
        None | Some(Value::Null) => message.get("error").is_some(),
        _ => false,
    }
}

/// The bytes of one HTTP/1.1 POST with `headers` (each written as given,
/// repeated names included) and the answer read to its end.
async fn http_post(
    endpoint: &Endpoint,
    body: &str,
    headers: &[(String, String)],
) -> std::io::Result<Vec<u8>> {
    let mut head = format!("POST {} HTTP/1.1\r\n", endpoint.path);
    if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
        let _ = write!(head, "Host: {}\r\n", endpoint.authority);
    }
    head.push_str("Content-Type: application/json\r\n");
    head.push_str("Accept: application/json, text/event-stream\r\n");
    let _ = write!(
        head,
        "Content-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        let _ = write!(head, "{name}: {value}\r\n");
    }
    head.push_str("\r\n");
    let mut stream = TcpStream::connect(&endpoint.authority).await?;
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    let mut raw = Vec::new();
    // Bounded: an answer past 16 MiB is cut (it is not what is audited).
    let mut limited = (&mut stream).take(16 << 20);
    match limited.read_to_end(&mut raw).await {
        Ok(_) => {}
        // A reset after a complete answer still leaves the answer.
        Err(e) if !raw.is_empty() && e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => return Err(e),
    }
    Ok(raw)
}

/// One POST of `body` (a request with id `id`, or a notification) with
/// `headers`, as a 2025-11-25 session would send it: the answer, and the
/// `Mcp-Session-Id` it named, if any.
pub(crate) async fn session_post(
    endpoint: &Endpoint,
    id: &str,
    body: &str,
    headers: &[(String, String)],
) -> std::io::Result<(Exchange, Option<String>)> {
    let raw = http_post(endpoint, body, headers).await?;
    let text = String::from_utf8_lossy(&raw);
    let head = text.split_once("\r\n\r\n").map_or(&*text, |(h, _)| h);
    let session = head.lines().skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("mcp-session-id")
            .then(|| value.trim().to_owned())
    });
    Ok((parse_http(&raw, id), session))
}

/// The status and the JSON-RPC message answering `id` in a raw HTTP answer
/// (JSON, or an SSE stream whose events carry messages).
fn parse_http(raw: &[u8], id: &str) -> Exchange {
    let text = String::from_utf8_lossy(raw);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok());
    let mut chunked = false;
    let mut sse = false;
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            let (name, value) = (
                name.trim().to_ascii_lowercase(),
                value.trim().to_ascii_lowercase(),
            );
            if name == "transfer-encoding" && value.contains("chunked") {
                chunked = true;
            }
            if name == "content-type" && value.starts_with("text/event-stream") {
                sse = true;
            }
        }
    }
    let body = if chunked {
        dechunk(body)
    } else {
        body.to_string()
    };
    let message = if sse {
        sse_messages(&body).into_iter().find(|m| answers(m, id))
    } else {
        serde_json::from_str::<Value>(body.trim()).ok()
    };
    Exchange { status, message }
}

fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = size.split(';').next().unwrap_or("").trim();
        let Ok(n) = usize::from_str_radix(size, 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            out.push_str(after.get(..n.min(after.len())).unwrap_or(""));
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
    out
}

/// The JSON messages of an SSE body (`data:` lines, joined per event).
fn sse_messages(body: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let normal = body.replace("\r\n", "\n");
    for event in normal.split("\n\n") {
        let data: Vec<&str> = event
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| d.strip_prefix(' ').unwrap_or(d))
            .collect();
        if data.is_empty() {
            continue;
        }
        if let Ok(v) = serde_json::from_str(&data.join("\n")) {
            out.push(v);
        }
    }
    out
}

/// `--aggressive`: sends a request's headers one byte per `every`, up to
/// `limit`; returns how long the server kept the connection open (`None`
/// when it was still open at `limit`).
pub(crate) async fn slow_headers(
    endpoint: &Endpoint,
    every: Duration,
    limit: Duration,
) -> std::io::Result<Option<Duration>> {
    let head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nX-Tern-Audit: {}",
        endpoint.path,
        endpoint.authority,
        "a".repeat(4096)
    );
    let mut stream = TcpStream::connect(&endpoint.authority).await?;
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    for byte in head.as_bytes() {
        if start.elapsed() >= limit {
            return Ok(None);
        }
        if stream.write_all(std::slice::from_ref(byte)).await.is_err() {
            return Ok(Some(start.elapsed()));
        }
        // The server may answer (408) or close while we wait.
        match tokio::time::timeout(every, stream.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return Ok(Some(start.elapsed())),
            Ok(Ok(_)) => {
                // An answer (e.g. 408): wait for the close.
                let _ = tokio::time::timeout(every, stream.read_to_end(&mut Vec::new())).await;
                return Ok(Some(start.elapsed()));
            }
            Err(_) => {}
        }
    }
    Ok(None)
}

/// `--aggressive`: opens up to `most` kept-alive connections from this one
/// address, a cheap request on each, holding them all; returns how many
/// were held when one was refused (a `503`, or closed unanswered), or
/// `None` when all `most` were served. Every connection is closed before it
/// returns.
pub(crate) async fn connection_share(
    endpoint: &Endpoint,
    extra: &[(String, String)],
    most: usize,
) -> std::io::Result<Option<usize>> {
    let body = r#"{"jsonrpc":"2.0","id":"tern-audit-share","method":"ping"}"#;
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: ping\r\nContent-Length: {}\r\n",
        endpoint.path,
        endpoint.authority,
        body.len()
    );
    for (n, v) in extra {
        let _ = write!(head, "{n}: {v}\r\n");
    }
    head.push_str("\r\n");
    head.push_str(body);
    let mut open = Vec::with_capacity(most);
    for n in 0..most {
        let Ok(Ok(mut stream)) = tokio::time::timeout(
            Duration::from_secs(5),
            TcpStream::connect(&endpoint.authority),
        )
        .await
        else {
            return Ok(Some(n));
        };
        if stream.write_all(head.as_bytes()).await.is_err() {
            return Ok(Some(n));
        }
        let mut answer = Vec::new();
        let mut buf = [0u8; 1024];
        let status = loop {
            match tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await {
                Ok(Ok(0) | Err(_)) | Err(_) => break None,
                Ok(Ok(k)) => {
                    answer.extend_from_slice(&buf[..k]);
                    if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                        break parse_http(&answer, "").status;
                    }
                    if answer.len() > 64 * 1024 {
                        break None;
                    }
                }
            }
        };
        match status {
            Some(503) | None => return Ok(Some(n)),
            Some(_) => open.push(stream),
        }
    }
    Ok(None)
}

/// `--aggressive`: announces a body of `declared` bytes and sends up to
/// `limit` of it; returns the status the server answered with and how many
/// bytes it took before refusing (`None`: it took all of `limit` without a
/// word).
pub(crate) async fn oversize_body(
    endpoint: &Endpoint,
    extra: &[(String, String)],
    declared: u64,
    limit: u64,
    timeout: Duration,
) -> std::io::Result<Option<(Option<u16>, u64)>> {
    let mut head = format!(
        "POST {} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\nContent-Length: {declared}\r\nConnection: close\r\n",
        endpoint.path, endpoint.authority
    );
    for (n, v) in extra {
        let _ = write!(head, "{n}: {v}\r\n");
    }
    head.push_str("\r\n");
    let stream = TcpStream::connect(&endpoint.authority).await?;
    let (mut read, mut write) = stream.into_split();
    write.write_all(head.as_bytes()).await?;
    let chunk = vec![b' '; 64 * 1024];
    // Bounded in bytes (the answer to an oversize body is a status line,
    // not what is audited) and in time; aborted, not left running, when the
    // wait for it ends.
    let reader = tokio::spawn(async move {
        let mut raw = Vec::new();
        let mut limited = (&mut read).take(64 * 1024);
        let _ = tokio::time::timeout(timeout, limited.read_to_end(&mut raw)).await;
        raw
    });
    let abort = reader.abort_handle();
    let start = Instant::now();
    let mut sent: u64 = 0;
    while sent < limit && start.elapsed() < timeout {
        if reader.is_finished() {
            break;
        }
        match tokio::time::timeout(Duration::from_secs(5), write.write_all(&chunk)).await {
            Ok(Ok(())) => sent += chunk.len() as u64,
            Ok(Err(_)) | Err(_) => break,
        }
    }
    let _ = write.shutdown().await;
    let raw = tokio::time::timeout(Duration::from_secs(5), reader)
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    abort.abort();
    if sent >= limit && raw.is_empty() {
        return Ok(None);
    }
    let status = parse_http(&raw, "").status;
    Ok(Some((status, sent)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_server::transport::http::{Http, ServeOptions, serve_with};

    /// A tern server on loopback with `per_peer` connections per peer.
    async fn serving(per_peer: usize) -> Endpoint {
        let server = tern_server::Server::builder("audited", "1")
            .build()
            .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let options = ServeOptions::default()
            .max_connections(64)
            .max_connections_per_peer(per_peer);
        tokio::spawn(serve_with(
            listener,
            Http::new(server),
            "/mcp",
            options,
            std::future::pending(),
        ));
        Endpoint::parse(&format!("http://127.0.0.1:{port}/mcp")).unwrap()
    }

    #[tokio::test]
    async fn the_connection_share_probe_finds_a_per_peer_cap_or_its_absence() {
        let capped = serving(4).await;
        assert_eq!(connection_share(&capped, &[], 16).await.unwrap(), Some(4));
        let open = serving(64).await;
        assert_eq!(connection_share(&open, &[], 16).await.unwrap(), None);
    }
}
