//! The exit codes of the client subcommands, their help text, and
//! [`Failure`]: a failed run's code and message. A leaf: every other
//! module may use it, it uses none of them.

/// Exit code: success.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: the tool reported an error (`isError`), or the person declined
/// or cancelled a question (what the server answered then is still printed).
pub(crate) const EXIT_REFUSED: u8 = 1;
/// Exit code: usage error (bad arguments, unreadable `--answers` file).
pub(crate) const EXIT_USAGE: u8 = 2;
/// Exit code: the server answered with a JSON-RPC error, sent a reply tern
/// could not use, or took more rounds or time than allowed.
pub(crate) const EXIT_SERVER: u8 = 3;
/// Exit code: the server could not be started or reached, or went away.
pub(crate) const EXIT_TRANSPORT: u8 = 4;
/// Exit code: the server needs input this run cannot give: `-32021` (a
/// required client capability is missing, e.g. elicitation under
/// `--no-input`), a question with no handler or preset answer, or a preset
/// answer the server asked again for, or `-32042` (a 2025 server's pages
/// to open first) without a person to open them.
pub(crate) const EXIT_NEEDS_INPUT: u8 = 5;
/// Exit code: the round is parked (`--park FILE`): the server asked, the
/// round (or the task that asks) is in FILE, and `tern resume FILE`
/// continues it.
pub(crate) const EXIT_PARKED: u8 = 6;
/// Exit code: interrupted (Ctrl-C): 128 + SIGINT, as shells report it.
pub(crate) const EXIT_INTERRUPTED: u8 = 130;

/// The exit codes' text.
macro_rules! exit_codes {
    () => {
        "\
Exit codes:
  0  success
  1  the tool reported an error (isError), or you declined or cancelled a
     question (the server's fallback result is still printed)
  2  usage error (bad arguments, unknown tool or prompt, arguments its
     schema refuses, a preset answer that does not fit its question,
     unreadable --answers or --config file)
  3  the server answered with an error (JSON-RPC error, unusable reply, or
     more rounds than allowed, or no answer within --timeout)
  4  transport error: the server could not be started or reached, or went
     away (its exit status and last lines of standard error are shown)
  5  the server needs input this run cannot give: -32021 missing client
     capability (e.g. elicitation under --no-input), a question with no
     preset answer when tern may not prompt, a preset answer the server
     asked for again, or -32042 (2025: web pages to open first; their URLs
     are shown, and at a terminal tern offers to open them and retries)
  6  parked (--park FILE): the server asked; the round (call, questions,
     requestState, no secrets) or the task that asks is in FILE and `tern
     resume FILE --answer KEY=VALUE` continues it from any process
  130  interrupted (Ctrl-C): a request in flight is cancelled
     (notifications/cancelled over stdio, the stream closed over HTTP); at
     a question nothing is sent"
    };
}

pub(crate) use exit_codes;

/// The exit codes, for each subcommand's `--help`.
pub(crate) const EXIT_CODES_HELP: &str = exit_codes!();

/// A failed run: its exit code and what to tell the person.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: u8,
    /// The message (printed as `tern: MESSAGE`).
    pub(crate) message: String,
}

pub(crate) fn usage(message: impl Into<String>) -> Failure {
    Failure {
        code: EXIT_USAGE,
        message: message.into(),
    }
}
