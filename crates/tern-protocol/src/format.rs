//! The string `format`s of an elicitation field (spec: Elicitation › Requested
//! Schema, JSON Schema formats `email`, `uri`, `date`, `date-time`): one
//! checker for the server that validates answers and the client that collects
//! them, so the two agree on what counts.

use crate::elicitation::StringFormat;

impl StringFormat {
    /// Whether `value` is in this format: an e-mail address (RFC 5321
    /// mailbox: `local@domain`, a dotless domain such as `localhost`
    /// included), an absolute URI (`scheme:rest`), a real `YYYY-MM-DD` day,
    /// or an RFC 3339 date-time with its offset.
    pub fn accepts(self, value: &str) -> bool {
        match self {
            Self::Email => is_email(value),
            Self::Uri => is_uri(value),
            Self::Date => is_date(value),
            Self::DateTime => is_date_time(value),
        }
    }
}

/// `local@domain`, with a dotted-or-plain domain of non-empty labels.
fn is_email(v: &str) -> bool {
    let Some((local, domain)) = v.rsplit_once('@') else {
        return false;
    };
    !local.is_empty()
        && !domain.is_empty()
        && !v.chars().any(|c| c.is_whitespace() || c.is_control())
        && !local.contains('@')
        && domain.split('.').all(|label| !label.is_empty())
}

/// An absolute URI: `scheme:rest`, no spaces.
fn is_uri(v: &str) -> bool {
    let Some((scheme, rest)) = v.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !rest.is_empty()
        && !v.chars().any(|c| c.is_whitespace() || c.is_control())
}

fn digits(s: &str) -> Option<u32> {
    (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
        .then(|| s.parse().ok())
        .flatten()
}

/// `YYYY-MM-DD`, a real day (leap years included).
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    if !text.is_ascii() || bytes.len() != 10 || bytes[4] != b'-' || bytes[7] != b'-' {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (
        digits(&text[0..4]),
        digits(&text[5..7]),
        digits(&text[8..10]),
    ) else {
        return false;
    };
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// RFC 3339 `date-time`: `YYYY-MM-DDThh:mm:ss[.frac](Z|±hh:mm)`.
fn is_date_time(v: &str) -> bool {
    let Some((date, time)) = v.split_once(['T', 't']) else {
        return false;
    };
    if !is_date(date) {
        return false;
    }
    let (clock, offset) = if let Some(t) = time.strip_suffix(['Z', 'z']) {
        (t, None)
    } else if let Some(i) = time.rfind(['+', '-']) {
        (&time[..i], Some(&time[i + 1..]))
    } else {
        return false;
    };
    if let Some(off) = offset {
        let Some((h, m)) = off.split_once(':') else {
            return false;
        };
        if h.len() != 2
            || m.len() != 2
            || digits(h).is_none_or(|h| h >= 24)
            || digits(m).is_none_or(|m| m >= 60)
        {
            return false;
        }
    }
    let (hms, frac) = match clock.split_once('.') {
        Some((hms, frac)) => (hms, Some(frac)),
        None => (clock, None),
    };
    if frac.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit())) {
        return false;
    }
    let parts: Vec<&str> = hms.split(':').collect();
    let [h, m, s] = parts.as_slice() else {
        return false;
    };
    h.len() == 2
        && m.len() == 2
        && s.len() == 2
        && digits(h).is_some_and(|h| h < 24)
        && digits(m).is_some_and(|m| m < 60)
        && digits(s).is_some_and(|s| s <= 60)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_real_days_with_plain_digits() {
        assert!(is_date("2000-02-29") && is_date("2024-02-29"));
        assert!(!is_date("2025-02-29") && !is_date("1900-02-29") && !is_date("2024-13-01"));
        assert!(
            !is_date("2024-+1-01") && !is_date("+024-01-01"),
            "a sign is not a digit"
        );
    }

    #[test]
    fn date_times_follow_rfc_3339() {
        assert!(is_date_time("2026-12-24T19:30:00.123+05:30"));
        assert!(is_date_time("2026-12-24t19:30:60z"));
        assert!(is_date_time("2026-07-28T10:30:00.5+02:00"));
        assert!(!is_date_time("2026-12-24T25:30:00Z"));
        assert!(
            !is_date_time("2026-12-24T19:30:00"),
            "the offset is required"
        );
        assert!(!is_date_time("2026-12-24 19:30:00Z"));
        assert!(!is_date_time("2026-07-28T10:+1:00Z"));
    }

    #[test]
    fn emails_and_uris() {
        assert!(is_email("a@b.co") && is_email("root@localhost"));
        assert!(
            !is_email("a b@c.d") && !is_email("@c.d") && !is_email("a@c..d") && !is_email("a@")
        );
        assert!(is_uri("urn:isbn:1") && is_uri("https://example.com/x"));
        assert!(!is_uri("1http://x") && !is_uri("/relative") && !is_uri("no scheme"));
    }

    #[test]
    fn accepts_dispatches_on_the_format() {
        assert!(StringFormat::Email.accepts("a@b.co") && !StringFormat::Email.accepts("a.b.co"));
        assert!(
            StringFormat::Date.accepts("2026-07-28") && !StringFormat::Date.accepts("28/07/2026")
        );
        assert!(StringFormat::Uri.accepts("mailto:a@b") && !StringFormat::Uri.accepts("a@b"));
        assert!(StringFormat::DateTime.accepts("2026-07-28T00:00:00Z"));
        assert!(!StringFormat::DateTime.accepts("2026-07-28"));
    }
}
