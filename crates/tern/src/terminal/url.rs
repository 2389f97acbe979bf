//! URL consent that cannot be fooled: only `https` (and `http` with a
//! warning) is opened, as one argument that cannot be read as an option;
//! the full URL and its host are shown, userinfo flagged.

use std::fmt::Write as _;
use std::process::Stdio;

use tern_protocol::elicitation::{ElicitRequestUrlParams, ElicitResult};

use crate::form::{self, CANCEL, Console, Input};

/// What tern makes of a URL a server asks it to open.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct UrlCheck {
    /// The URL as parsed and written again (what the opener is given), or
    /// `None` when tern refuses to open it.
    pub(crate) open: Option<String>,
    /// The host (and port) the page is on, as the parser reads it.
    pub(crate) host: String,
    /// Why tern will not open it.
    pub(crate) refusal: Option<String>,
    /// What the person should know before agreeing.
    pub(crate) warnings: Vec<String>,
}

/// Checks a URL elicitation's URL: only `https` (and `http`, with a
/// warning) is ever opened; any other scheme is refused (`javascript:`,
/// `file:`, `data:`, a word starting with `-` that is no URL at all); a host
/// on this machine or a private network is refused unless the server itself
/// is reached there (`local_server`: a local `--url`), since a remote
/// server has no business sending the browser to a local address (a page
/// that changes a router's settings, a development server's admin);
/// a user name or password before the host (`user@`) is flagged.
pub(crate) fn check_url(raw: &str, local_server: bool) -> UrlCheck {
    let refuse = |host: String, why: String| UrlCheck {
        open: None,
        host,
        refusal: Some(why),
        warnings: Vec::new(),
    };
    let Ok(url) = tern_client::auth::Url::parse(raw.trim()) else {
        return refuse(
            String::new(),
            "it is not an absolute URL (tern opens only https:// and http:// pages)".into(),
        );
    };
    let host = match (url.host_str(), url.port()) {
        (Some(h), Some(p)) => format!("{h}:{p}"),
        (Some(h), None) => h.to_owned(),
        (None, _) => String::new(),
    };
    let host = tern::safe::line(&host).into_owned();
    let mut warnings = Vec::new();
    match url.scheme() {
        "https" => {}
        "http" => warnings.push(
            "plain http: the page, and anything you type on it, travels unencrypted".to_owned(),
        ),
        other => {
            return refuse(
                host,
                format!(
                    "its scheme is {}: (tern opens only https:// and http:// pages)",
                    tern::safe::line(other)
                ),
            );
        }
    }
    if host.is_empty() {
        return refuse(host, "it names no host".into());
    }
    if tern_client::auth::is_local(&url) && !local_server {
        return refuse(
            host.clone(),
            format!(
                "{host} is this machine or a private network, and the server is not: a remote server may not send your browser there"
            ),
        );
    }
    if !url.username().is_empty() || url.password().is_some() {
        let user = if url.password().is_some() {
            format!("{}:…", url.username())
        } else {
            url.username().to_owned()
        };
        warnings.push(format!(
            "the URL puts `{}@` before its host, which can make it look like another site: the page is on {host}",
            tern::safe::line(&user)
        ));
    }
    UrlCheck {
        open: Some(url.to_string()),
        host,
        refusal: None,
        warnings,
    }
}

/// URL mode: show who asks and the whole URL, ask consent, open only with it
/// and only a URL [`check_url`] lets through. tern's own lines (the header,
/// `URL:`, `Host:`, the warnings) are [`Console::mark`]ed, after an SGR
/// reset.
pub(super) fn url_consent(
    console: &mut dyn Console,
    asker: &str,
    params: &ElicitRequestUrlParams,
    local_server: bool,
) -> ElicitResult {
    let check = check_url(&params.url, local_server);
    console.mark(&format!("\n-- {asker} --\n"));
    console.say(&format!("{}\n", form::server_text(&params.message)));
    let mut lines = format!(
        "  URL:  {}\n  Host: {}\n",
        tern::safe::line(&params.url),
        if check.host.is_empty() {
            "(none)"
        } else {
            &check.host
        }
    );
    for w in &check.warnings {
        let _ = writeln!(lines, "  ! warning: {w}");
    }
    if let Some(why) = &check.refusal {
        let _ = writeln!(
            lines,
            "  ! tern will not open this URL: {why}. Declined for you."
        );
        console.mark(&lines);
        return ElicitResult::decline();
    }
    let _ = writeln!(
        lines,
        "(Accepting only opens the page; the server learns the outcome itself. Type {CANCEL} to dismiss.)"
    );
    console.mark(&lines);
    let Some(url) = check.open else {
        return ElicitResult::decline();
    };
    loop {
        match form::read(console, "Open this URL in your browser? [y/N]: ") {
            Input::Decline => {
                console.say("Declined.\n");
                return ElicitResult::decline();
            }
            Input::Cancel => {
                console.say("Cancelled.\n");
                return ElicitResult::cancel();
            }
            Input::Line(l) => match l.to_ascii_lowercase().as_str() {
                "y" | "yes" => {
                    match open_browser(&url) {
                        Ok(opener) => console.say(&format!(
                            "Opened with {opener}. Finish there; tern carries on.\n"
                        )),
                        Err(why) => console.say(&format!(
                            "Could not open a browser ({why}). Open this URL yourself:\n  {url}\n"
                        )),
                    }
                    return ElicitResult::consent();
                }
                "" | "n" | "no" => {
                    console.say("Declined.\n");
                    return ElicitResult::decline();
                }
                _ => console.say("  ! answer y or n\n"),
            },
        }
    }
}

/// The pages of a `-32042` at the terminal, one at a time, each through
/// [`url_consent`] (so [`check_url`] decides what may be opened); `true`
/// when the person agreed to every one, and the call is worth retrying.
pub(crate) async fn open_required_pages(
    session: &std::sync::Arc<super::Session>,
    pages: Vec<ElicitRequestUrlParams>,
) -> bool {
    for page in pages {
        let asker = format!(
            "{} needs you to open a web page before the call can go on",
            session.local_name
        );
        let local = session.local_server;
        let answer = session
            .with_terminal(move |_, console| url_consent(console, &asker, &page, local))
            .await;
        if !matches!(answer, Ok(r) if r.action == tern_protocol::elicitation::ElicitAction::Accept)
        {
            return false;
        }
    }
    true
}

/// Opens `url` (checked by [`check_url`] and written again by the URL
/// parser, so it starts with `https:` or `http:` and no opener reads it as
/// an option) with [`tern::login::browser_command`], as one argument; says
/// which.
fn open_browser(url: &str) -> Result<String, String> {
    let words = tern::login::browser_command();
    let (program, args) = words.split_first().ok_or("no browser command")?;
    std::process::Command::new(program)
        .args(args)
        .arg(url)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("{program}: {e}"))
        .and_then(|s| {
            if s.success() {
                Ok(program.clone())
            } else {
                Err(format!("{program} failed: {s}"))
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_and_http_urls_are_opened() {
        let ok = check_url("https://auth.example/start?x=1", false);
        assert_eq!(ok.open.as_deref(), Some("https://auth.example/start?x=1"));
        assert_eq!(ok.host, "auth.example");
        assert!(ok.warnings.is_empty() && ok.refusal.is_none());
        let http = check_url("http://auth.example:8080/", false);
        assert!(http.open.is_some());
        assert!(http.warnings[0].contains("plain http"), "{http:?}");
        for bad in [
            "javascript:alert(1)",
            "file:///etc/passwd",
            "data:text/html,<script>x</script>",
            "-x",
            "--new-window=evil",
            "ftp://files.example/x",
            "auth.example/no-scheme",
        ] {
            let c = check_url(bad, true);
            assert!(c.open.is_none() && c.refusal.is_some(), "{bad}: {c:?}");
        }
    }

    #[test]
    fn local_hosts_are_opened_only_for_a_local_server() {
        for local in [
            "http://127.0.0.1:8080/x",
            "http://localhost/",
            "https://192.168.0.1/",
            "http://169.254.169.254/latest",
            "http://[::1]/",
        ] {
            let remote = check_url(local, false);
            assert!(remote.open.is_none(), "{local}: {remote:?}");
            assert!(
                remote
                    .refusal
                    .as_deref()
                    .unwrap()
                    .contains("private network"),
                "{remote:?}"
            );
            assert!(check_url(local, true).open.is_some(), "{local}");
        }
    }

    #[test]
    fn userinfo_is_flagged_and_the_host_is_the_real_one() {
        let c = check_url("https://login.bank.example@evil.example/", false);
        assert_eq!(c.host, "evil.example");
        assert!(c.open.is_some());
        assert!(
            c.warnings
                .iter()
                .any(|w| w.contains("`login.bank.example@`") && w.contains("evil.example")),
            "{c:?}"
        );
        let c = check_url("https://u:secret@evil.example/", false);
        assert!(c.warnings.iter().any(|w| w.contains("`u:…@`")), "{c:?}");
        assert!(!c.warnings.iter().any(|w| w.contains("secret")), "{c:?}");
    }

    #[test]
    fn a_url_with_control_characters_is_opened_only_as_the_parser_writes_it() {
        let c = check_url("https://evil.example/a b\u{1b}[8m", false);
        let open = c.open.unwrap();
        assert!(!open.contains(['\u{1b}', ' ']), "{open}");
        assert!(open.starts_with("https://evil.example/"), "{open}");
    }
}
