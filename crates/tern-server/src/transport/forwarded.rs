//! Who the client is behind a trusted proxy: the one forwarded header the
//! proxy sets, read from the right, past every trusted hop.
//!
//! A proxy such as nginx appends the address it received a request from to
//! `X-Forwarded-For` (`$proxy_add_x_forwarded_for`) and passes on whatever
//! the client sent before it, so only the elements the trusted proxies added
//! can be believed: the client is the right-most element that is not itself
//! a trusted proxy. Exactly one header is read, `Forwarded` (RFC 7239) or
//! `X-Forwarded-For`, never both: a proxy writes one and passes a client's
//! own copy of the other through untouched.
//!
//! | the right-most untrusted element | the client |
//! |---|---|
//! | an IP address (`192.0.2.7`, `2001:db8::1`, `[2001:db8::1]:4711`, `192.0.2.7:80`) | that address |
//! | `unknown`, an obfuscated identifier (`_hidden`), anything unparsable | the TCP peer (the proxy): such a client cannot be told apart |
//! | none: no header, or every element trusted | the left-most element when there is one, else the TCP peer |
//!
//! A request from an address outside the trusted networks keeps its TCP
//! peer as its client, whatever it says in the header.

use std::net::IpAddr;
use std::str::FromStr;

use http::HeaderMap;

/// The forwarded header a trusted proxy sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `Forwarded` (RFC 7239), its `for=` parameters.
    Forwarded,
    /// `X-Forwarded-For`: addresses separated by commas.
    XForwardedFor,
}

impl FromStr for ForwardedHeader {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.eq_ignore_ascii_case("forwarded") {
            Ok(Self::Forwarded)
        } else if s.eq_ignore_ascii_case("x-forwarded-for") {
            Ok(Self::XForwardedFor)
        } else {
            Err(format!(
                "unknown forwarded header {s:?}: forwarded or x-forwarded-for"
            ))
        }
    }
}

/// An address range that is not a network (`CIDR`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidNetwork(String);

impl std::fmt::Display for InvalidNetwork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} is not a network (e.g. 10.0.0.0/8, 127.0.0.1, fd00::/8)",
            self.0
        )
    }
}

impl std::error::Error for InvalidNetwork {}

/// The networks of the proxies in front of the server, and the header they
/// set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedProxies {
    networks: Vec<ipnet::IpNet>,
    header: ForwardedHeader,
}

impl TrustedProxies {
    /// Proxies in `networks` (CIDRs such as `10.0.0.0/8`; a bare address is
    /// one host) that set `header`.
    pub fn new<I, S>(networks: I, header: ForwardedHeader) -> Result<Self, InvalidNetwork>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let networks = networks
            .into_iter()
            .map(|n| {
                let n = n.as_ref().trim();
                n.parse::<ipnet::IpNet>()
                    .or_else(|_| n.parse::<IpAddr>().map(ipnet::IpNet::from))
                    .map(|net| net.trunc())
                    .map_err(|_| InvalidNetwork(n.chars().take(64).collect()))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { networks, header })
    }

    /// The header read.
    pub fn header(&self) -> ForwardedHeader {
        self.header
    }

    /// `ip` is one of the trusted proxies.
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.networks.iter().any(|n| n.contains(&ip))
    }

    /// The client of a request that came from `peer` with `headers` (module
    /// docs' table).
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.contains(peer) {
            return peer;
        }
        let name = match self.header {
            ForwardedHeader::Forwarded => http::header::FORWARDED,
            ForwardedHeader::XForwardedFor => http::HeaderName::from_static("x-forwarded-for"),
        };
        // Every line of the header, in order, is one list.
        let mut elements: Vec<&str> = Vec::new();
        for value in headers.get_all(name) {
            let Ok(value) = value.to_str() else {
                return peer;
            };
            elements.extend(value.split(',').map(str::trim));
        }
        let mut leftmost = None;
        for element in elements.iter().rev() {
            let node = match self.header {
                ForwardedHeader::Forwarded => for_of(element),
                ForwardedHeader::XForwardedFor => Some(*element),
            };
            let Some(ip) = node.and_then(address) else {
                // unknown, obfuscated or unparsable: not a client we can
                // tell apart.
                return peer;
            };
            if !self.contains(ip) {
                return canonical(ip);
            }
            leftmost = Some(ip);
        }
        leftmost.map_or(peer, canonical)
    }
}

/// The `for=` of one `Forwarded` element (`for=...;proto=...;by=...`).
fn for_of(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.trim().split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| value.trim().trim_matches('"'))
    })
}

/// A node's address: `ip`, `ip:port`, `[v6]` or `[v6]:port`.
fn address(node: &str) -> Option<IpAddr> {
    if let Some(rest) = node.strip_prefix('[') {
        let (v6, _) = rest.split_once(']')?;
        return v6.parse::<std::net::Ipv6Addr>().ok().map(IpAddr::V6);
    }
    node.parse::<IpAddr>().ok().or_else(|| {
        let (host, port) = node.rsplit_once(':')?;
        port.parse::<u16>().ok()?;
        host.parse::<std::net::Ipv4Addr>().ok().map(IpAddr::V4)
    })
}

/// An IPv4-mapped IPv6 address as its IPv4 one.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        IpAddr::V4(_) => ip,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(name: &str, values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_client_is_the_right_most_untrusted_element() {
        let t = TrustedProxies::new(["127.0.0.1", "10.0.0.0/8"], ForwardedHeader::XForwardedFor)
            .unwrap();
        let from = ip("127.0.0.1");
        let cases = [
            (vec!["192.0.2.7"], "192.0.2.7"),
            // A client's own made-up element is left of what nginx added.
            (vec!["6.6.6.6, 192.0.2.7"], "192.0.2.7"),
            (vec!["6.6.6.6", "192.0.2.7, 10.1.2.3"], "192.0.2.7"),
            (vec!["192.0.2.7:5000"], "192.0.2.7"),
            (vec!["[2001:db8::1]:443"], "2001:db8::1"),
            (vec!["2001:db8::1"], "2001:db8::1"),
            (vec!["::ffff:192.0.2.9"], "192.0.2.9"),
            // Fallbacks: the TCP peer.
            (vec!["unknown"], "127.0.0.1"),
            (vec!["192.0.2.7, garbage"], "127.0.0.1"),
            (vec![], "127.0.0.1"),
            // Every hop trusted: the left-most.
            (vec!["10.0.0.9, 10.0.0.1"], "10.0.0.9"),
        ];
        for (values, want) in cases {
            let got = t.client(from, &headers("x-forwarded-for", &values));
            assert_eq!(got, ip(want), "{values:?}");
        }
        // Not from a trusted proxy: its header is not believed.
        let spoofed = headers("x-forwarded-for", &["192.0.2.7"]);
        assert_eq!(t.client(ip("127.0.0.5"), &spoofed), ip("127.0.0.5"));
        // The other header is not read.
        let other = headers("forwarded", &["for=192.0.2.7"]);
        assert_eq!(t.client(from, &other), from);
    }

    #[test]
    fn forwarded_reads_its_for_parameters() {
        let t = TrustedProxies::new(["127.0.0.0/8"], ForwardedHeader::Forwarded).unwrap();
        let from = ip("127.0.0.1");
        let cases = [
            (
                vec!["for=192.0.2.60;proto=http;by=203.0.113.43"],
                "192.0.2.60",
            ),
            (
                vec![r#"for="[2001:db8:cafe::17]:4711""#],
                "2001:db8:cafe::17",
            ),
            (vec!["for=6.6.6.6, for=192.0.2.1;proto=https"], "192.0.2.1"),
            (vec!["For=192.0.2.2"], "192.0.2.2"),
            (vec!["for=_hidden"], "127.0.0.1"),
            (vec!["for=unknown"], "127.0.0.1"),
            (vec!["proto=https"], "127.0.0.1"),
        ];
        for (values, want) in cases {
            let got = t.client(from, &headers("forwarded", &values));
            assert_eq!(got, ip(want), "{values:?}");
        }
        let xff = headers("x-forwarded-for", &["192.0.2.7"]);
        assert_eq!(t.client(from, &xff), from, "X-Forwarded-For is not read");
    }

    #[test]
    fn networks_parse_or_say_why_not() {
        assert!(TrustedProxies::new(["fd00::/8", "192.0.2.1"], ForwardedHeader::Forwarded).is_ok());
        let e = TrustedProxies::new(["10.0.0.0/33"], ForwardedHeader::Forwarded).unwrap_err();
        assert!(e.to_string().contains("10.0.0.0/33"), "{e}");
        let t = TrustedProxies::new(["10.1.2.3/8"], ForwardedHeader::Forwarded).unwrap();
        assert!(t.contains(ip("10.200.0.1")), "a host's bits are dropped");
        assert!(t.contains(ip("::ffff:10.0.0.1")));
        assert_eq!(
            "X-Forwarded-For".parse(),
            Ok(ForwardedHeader::XForwardedFor)
        );
        assert!("via".parse::<ForwardedHeader>().is_err());
    }
}
