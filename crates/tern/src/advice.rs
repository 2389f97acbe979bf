//! What a client error means: its exit code, and advice the person can act
//! on (a refused connection, a 401, a 404, a program not on PATH, a dead
//! server's last words).

use std::fmt::Write as _;

use tern_client::ClientError;
use tern_client::transport::stdio::ChildWatch;
use tern_protocol::error::code;

use crate::exit::{EXIT_NEEDS_INPUT, EXIT_REFUSED, EXIT_SERVER, EXIT_TRANSPORT, Failure};
use crate::terminal::Session;

/// Advice when a program cannot be started.
pub(crate) fn spawn_hint(program: &str) -> String {
    if program.contains('/') {
        String::new()
    } else {
        format!(" (is `{program}` installed and on PATH?)")
    }
}

/// The first `std::io::Error` in `e`'s causes.
fn io_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a std::io::Error> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            return Some(io);
        }
        cause = c.source();
    }
    None
}

/// `HOST:PORT` of an `http(s)://` URL.
pub(crate) fn authority(url: &str) -> &str {
    url.split_once("://").map_or(url, |(_, rest)| {
        rest.split(['/', '?', '#']).next().unwrap_or(rest)
    })
}

/// Advice for an HTTP failure: what the person can do.
fn http_advice(e: &ClientError, url: &str) -> Option<String> {
    let text = format!("{e:#}");
    if let Some(io) = io_cause(e) {
        let addr = authority(url);
        return Some(match io.kind() {
            std::io::ErrorKind::ConnectionRefused => format!(
                "nothing is listening at {addr} (connection refused): is the server running? (e.g. tern serve demo --http {addr})"
            ),
            std::io::ErrorKind::TimedOut => format!("{addr} did not accept the connection in time"),
            _ => format!("cannot reach {addr}: {io}"),
        });
    }
    if text.contains("dns error") || text.contains("failed to lookup") {
        return Some(format!(
            "the host of {url} is not known (check its spelling)"
        ));
    }
    if text.contains("HTTP 401") {
        return Some(format!(
            "{url} wants authorization: run `tern login --url {url}` (or pass --header 'Authorization: Bearer TOKEN')"
        ));
    }
    if text.contains("404") {
        let path = url
            .split_once("://")
            .and_then(|(_, r)| r.find('/').map(|i| &r[i..]))
            .unwrap_or("");
        return Some(if path.is_empty() || path == "/" {
            format!(
                "{url} answered 404 Not Found: MCP servers usually serve at a path; try {}/mcp",
                url.trim_end_matches('/')
            )
        } else {
            format!(
                "{url} answered 404 Not Found: is {path} the server's MCP endpoint? (tern serve demo serves /mcp)"
            )
        });
    }
    None
}

/// What a client error means for the exit code, with advice.
pub(crate) fn failure(e: &ClientError, session: &Session) -> Failure {
    if let Some(rpc) = e.rpc_error() {
        if let Some(f) = needs_input(rpc, session) {
            return f;
        }
        // The chain is one line; the server's message in it stays one.
        return Failure {
            code: EXIT_SERVER,
            message: tern::safe::line(&format!("{e:#}")).into_owned(),
        };
    }
    if e.is_transport() {
        let advice = session.url.as_deref().and_then(|url| http_advice(e, url));
        return Failure {
            code: EXIT_TRANSPORT,
            message: match advice {
                Some(a) => a,
                None => format!("{}: {e:#}", session.fallback_name),
            },
        };
    }
    let code = if e.is_handler() && session.refused() {
        EXIT_REFUSED
    } else if e.is_handler() || e.is_unanswerable() || e.is_answer() {
        EXIT_NEEDS_INPUT
    } else {
        EXIT_SERVER
    };
    // `{:#}`: the error and its causes (a handler's own reason, the
    // decoder's), as one line.
    Failure {
        code,
        message: tern::safe::line(&format!("{e:#}")).into_owned(),
    }
}

/// A JSON-RPC error that means the server needs input this run does not
/// give (`-32021`, `-32042`), as the exit code and advice for it — the same
/// whether a call, a prompt, a read or a task's outcome carried it.
pub(crate) fn needs_input(
    rpc: &tern_protocol::error::ErrorObject,
    session: &Session,
) -> Option<Failure> {
    if rpc.code == code::MISSING_REQUIRED_CLIENT_CAPABILITY {
        let needs = rpc
            .missing_capability_data()
            .and_then(|d| serde_json::to_value(d.required_capabilities).ok())
            .unwrap_or_default();
        let mut advice = Vec::new();
        if needs.get("elicitation").is_some() {
            advice.push("answer its questions in a terminal (without --no-input), or preset them with --answer KEY=VALUE / --answers FILE (tern questions shows them)");
        }
        if needs.get("roots").is_some() {
            advice.push("share folders with --root PATH");
        }
        if needs.get("sampling").is_some() {
            advice.push(
                "give a --sampler COMMAND, or type the reply in a terminal (without --no-input)",
            );
        }
        let needs = if needs.is_null() {
            String::new()
        } else {
            format!(" (it requires {needs})")
        };
        let advice = if advice.is_empty() {
            String::new()
        } else {
            format!("; {}", advice.join("; "))
        };
        return Some(Failure {
            code: EXIT_NEEDS_INPUT,
            message: format!(
                "the server needs input this run does not offer: {} [{}]{needs}{advice}",
                tern::safe::line(&rpc.message),
                rpc.code
            ),
        });
    }
    if rpc.code == code::LEGACY_URL_ELICITATION_REQUIRED {
        return Some(pages_required(rpc, session));
    }
    None
}

/// `-32042` (2025-11-25 Client Features, Elicitation: "URL Elicitation
/// Required Error"): the call cannot go on until the person visits the
/// pages in `data.elicitations`. Each URL is shown escaped, with its host
/// and what [`crate::terminal::check_url`] makes of it; the pages are kept
/// in the session for the command to offer at a terminal and retry.
fn pages_required(rpc: &tern_protocol::error::ErrorObject, session: &Session) -> Failure {
    let pages: Vec<tern_protocol::elicitation::ElicitRequestUrlParams> = rpc
        .data
        .as_ref()
        .and_then(|d| d.get("elicitations"))
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default();
    let mut message = format!(
        "the server needs you to open {} web page(s) before the call can go on: {} [{}]",
        pages.len(),
        tern::safe::line(&rpc.message),
        rpc.code
    );
    for page in &pages {
        let check = crate::terminal::check_url(&page.url, session.local_server);
        let _ = write!(
            message,
            "\n  {}\n  URL:  {}\n  Host: {}",
            tern::safe::line(&page.message),
            tern::safe::line(&page.url),
            if check.host.is_empty() {
                "(none)"
            } else {
                &check.host
            }
        );
        for w in &check.warnings {
            let _ = write!(message, "\n  ! warning: {w}");
        }
        if let Some(why) = &check.refusal {
            let _ = write!(message, "\n  ! tern would not open this URL: {why}");
        }
    }
    message.push_str(
        "\nopen it, finish there, then run the same command again (at a terminal tern offers to open it and retries)",
    );
    *session
        .pages
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = pages;
    Failure {
        code: EXIT_NEEDS_INPUT,
        message,
    }
}

/// A failure with the server's last words (its last lines of standard
/// error), when the server process is gone: a healthy server's stderr says
/// nothing about an ordinary JSON-RPC error, and would only bury it.
pub(crate) fn with_last_words(
    mut f: Failure,
    ended: Option<&ChildWatch>,
    watch: Option<&ChildWatch>,
) -> Failure {
    // A broken transport is the process's trouble even when its exit is
    // not seen yet; a JSON-RPC error counts only from a server that had
    // ended before tern closed it (`ended`).
    let watch = match f.code {
        EXIT_TRANSPORT => watch,
        EXIT_SERVER => ended,
        _ => None,
    };
    if let Some(watch) = watch
        && !f.message.contains("standard error")
    {
        let tail = watch.stderr_tail();
        if !tail.is_empty() {
            f.message
                .push_str("\nthe server's last lines of standard error:");
            for line in tail {
                let _ = write!(f.message, "\n  | {}", tern::safe::line(&line));
            }
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_authority_of_a_url() {
        assert_eq!(authority("http://127.0.0.1:9/mcp"), "127.0.0.1:9");
        assert_eq!(authority("http://h:1"), "h:1");
    }
}
