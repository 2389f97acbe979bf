//! The `Host` and `Origin` stage: DNS rebinding defence, each header read
//! strictly as a URL authority and compared exactly.

/// Which `Origin` / `Host` values are accepted.
#[derive(Debug, Clone)]
pub(super) enum Allow {
    /// Loopback, plus the listed values.
    Loopback(Vec<String>),
    /// Anything (behind a proxy that checks it, say).
    Any,
}

/// The host of an authority `host[:port]` (RFC 3986 §3.2.2, without
/// userinfo: neither `Host` nor an `Origin` has one), read strictly: an
/// IPv6 literal only in brackets with nothing after them but `:port`, a
/// port all digits, a name of the characters a reg-name allows. Anything
/// else is `None`, and refused: `[::1].evil.example` is not loopback.
pub(super) fn host_of(authority: &str) -> Option<&str> {
    let port_ok =
        |port: &str| (1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit());
    if let Some(rest) = authority.strip_prefix('[') {
        let (literal, after) = rest.split_once(']')?;
        let port_fine = after.is_empty() || after.strip_prefix(':').is_some_and(port_ok);
        return (port_fine && literal.parse::<std::net::Ipv6Addr>().is_ok()).then_some(literal);
    }
    let host = match authority.rsplit_once(':') {
        Some((host, port)) if port_ok(port) => host,
        Some(_) => return None,
        None => authority,
    };
    let name_ok = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=%".contains(&b));
    name_ok.then_some(host)
}

/// The authority of an `Origin` (RFC 6454 §7: `scheme "://" host [":"
/// port]`, nothing after it); `null` and anything else is `None`.
pub(super) fn origin_authority(origin: &str) -> Option<&str> {
    let (scheme, authority) = origin.split_once("://")?;
    let scheme_ok = scheme
        .bytes()
        .next()
        .is_some_and(|b| b.is_ascii_alphabetic())
        && scheme
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b));
    (scheme_ok && host_of(authority).is_some()).then_some(authority)
}

pub(super) fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

impl Allow {
    /// An allowed origin is one of the list, exactly (case aside), or a
    /// well-formed origin whose host is loopback.
    pub(super) fn origin_ok(&self, origin: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Loopback(list) => {
                list.iter().any(|o| o.eq_ignore_ascii_case(origin))
                    || origin_authority(origin)
                        .and_then(host_of)
                        .is_some_and(is_loopback)
            }
        }
    }

    /// An allowed host is a well-formed authority whose host is loopback,
    /// or one of the list, exactly, with or without its port.
    pub(super) fn host_ok(&self, host: &str) -> bool {
        match self {
            Self::Any => true,
            Self::Loopback(list) => {
                let Some(name) = host_of(host) else {
                    return false;
                };
                is_loopback(name)
                    || list
                        .iter()
                        .any(|h| h.eq_ignore_ascii_case(host) || h.eq_ignore_ascii_case(name))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_origins_and_hosts() {
        let allow = Allow::Loopback(vec!["https://app.example.com".into()]);
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "http://[::1]:8080",
            "https://app.example.com",
        ] {
            assert!(allow.origin_ok(ok), "{ok}");
        }
        for bad in [
            "http://evil.example.com",
            "null",
            "http://localhost.evil.com",
            "http://[::1].evil.example",
            "http://[::1]evil.example:80",
            "http://127.0.0.1@evil.example",
            "http://localhost/path",
            "http://localhost:80:80",
            "http://[::1",
            "://localhost",
        ] {
            assert!(!allow.origin_ok(bad), "{bad}");
        }
        assert!(
            allow.host_ok("localhost:3000")
                && allow.host_ok("127.0.0.1:1")
                && allow.host_ok("[::1]:9")
                && allow.host_ok("[::1]")
        );
        for bad in [
            "evil.example.com",
            "[::1].evil.example",
            "[::1]x",
            "[::1]:x",
            "[127.0.0.1]",
            "127.0.0.1:",
            "127.0.0.1:123456",
            "user@127.0.0.1",
            "localhost/..",
            "",
        ] {
            assert!(!allow.host_ok(bad), "{bad:?}");
        }
        assert!(Allow::Any.host_ok("evil.example.com"));
    }
}
