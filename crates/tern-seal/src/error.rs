//! Errors of sealing and opening.

use core::fmt;

/// The one error [`Sealer::open`](crate::Sealer::open) returns.
///
/// Its `Display` is always "invalid or expired requestState", whatever went
/// wrong, so that a client learns nothing about which check failed (rules
/// `state-untrusted`, `state-integrity`): the server answers `-32602 Invalid
/// params` with that text. The real reason, [`OpenError::reason`], is for the
/// server's log only.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct OpenError {
    reason: OpenFailure,
}

impl OpenError {
    /// The message every failure shows.
    pub const MESSAGE: &'static str = "invalid or expired requestState";

    pub(crate) fn new(reason: OpenFailure) -> OpenError {
        OpenError { reason }
    }

    /// Why the token was refused. For logs only: never send it to the client.
    pub fn reason(&self) -> OpenFailure {
        self.reason
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(Self::MESSAGE)
    }
}

impl fmt::Debug for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenError")
            .field("reason", &self.reason)
            .finish()
    }
}

impl std::error::Error for OpenError {}

/// Why [`Sealer::open`](crate::Sealer::open) refused a token, in the order the
/// checks run. For logs only.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenFailure {
    /// The token is longer than `max_token_len`; nothing was decoded.
    TooLarge,
    /// The token or its decrypted envelope is not well formed.
    Malformed,
    /// The token (or its envelope) is of a format version this build does not
    /// know.
    UnknownVersion,
    /// The token names a key id the ring does not hold (retired, or never ours).
    UnknownKey,
    /// Authenticated decryption failed: tampered, truncated or forged (rule
    /// `state-integrity`).
    Decrypt,
    /// The token's expiry has passed (rule `state-expiry`).
    Expired,
    /// The token claims to be issued too far in the future.
    NotYetValid,
    /// The token was sealed for another audience.
    Audience,
    /// The token was sealed for another principal (rule
    /// `state-bound-principal`).
    Principal,
    /// The token was sealed for another method (rule `state-bound-request`).
    Method,
    /// The token was sealed for another target (tool, prompt or resource; rule
    /// `state-bound-request`).
    Target,
    /// The token was sealed for other arguments (rule `state-bound-request`).
    Arguments,
}

impl OpenFailure {
    /// A short, stable, lowercase name for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            OpenFailure::TooLarge => "too_large",
            OpenFailure::Malformed => "malformed",
            OpenFailure::UnknownVersion => "unknown_version",
            OpenFailure::UnknownKey => "unknown_key",
            OpenFailure::Decrypt => "decrypt",
            OpenFailure::Expired => "expired",
            OpenFailure::NotYetValid => "not_yet_valid",
            OpenFailure::Audience => "audience",
            OpenFailure::Principal => "principal",
            OpenFailure::Method => "method",
            OpenFailure::Target => "target",
            OpenFailure::Arguments => "arguments",
        }
    }
}

impl fmt::Display for OpenFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why [`Sealer::seal`](crate::Sealer::seal) could not make a token.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealError {
    /// The token would be `len` bytes, over the sealer's `max_token_len`.
    /// The state (usually the accumulated answers) is too large.
    TooLarge {
        /// The length the token would have had.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The method name is longer than 255 bytes.
    MethodTooLong,
    /// `now` is before 1970, or `now + ttl` is not representable.
    Clock,
    /// The arguments hold a number the digest cannot bind exactly (see
    /// [`crate::arguments_digest`]).
    InexactArguments,
}

impl SealError {
    /// The arguments cannot be bound exactly: the caller's fault, not the
    /// server's.
    pub fn is_inexact_arguments(&self) -> bool {
        matches!(self, SealError::InexactArguments)
    }
}

impl fmt::Display for SealError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SealError::TooLarge { len, max } => write!(
                f,
                "requestState would be {len} bytes, over the limit of {max} bytes"
            ),
            SealError::MethodTooLong => f.write_str("method name longer than 255 bytes"),
            SealError::Clock => {
                f.write_str("clock before 1970 or expiry out of range for requestState")
            }
            SealError::InexactArguments => {
                f.write_str("the arguments hold a number that cannot be represented exactly")
            }
        }
    }
}

impl std::error::Error for SealError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_error_display_never_varies() {
        for reason in [
            OpenFailure::TooLarge,
            OpenFailure::Decrypt,
            OpenFailure::Principal,
            OpenFailure::Arguments,
        ] {
            let error = OpenError::new(reason);
            assert_eq!(error.to_string(), "invalid or expired requestState");
            assert_eq!(error.reason(), reason);
            assert!(format!("{error:?}").contains(&format!("{reason:?}")));
        }
    }

    #[test]
    fn seal_error_messages() {
        let error = SealError::TooLarge {
            len: 70_000,
            max: 65_536,
        };
        assert_eq!(
            error.to_string(),
            "requestState would be 70000 bytes, over the limit of 65536 bytes"
        );
    }
}
