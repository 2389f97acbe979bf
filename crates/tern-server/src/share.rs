//! One caller's share of a resource the whole server holds a cap on (listen
//! streams, SSE responses, requests in flight): a count per key, taken and
//! given back with a slot, so one caller at its share cannot lock others out
//! of what is left below the server-wide cap.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::principal::Principal;

/// Counts per caller.
#[derive(Debug, Default)]
pub(crate) struct Shares(Mutex<HashMap<Arc<str>, usize>>);

/// One caller's slot; given back when dropped.
#[derive(Debug)]
pub(crate) struct ShareSlot {
    shares: Arc<Shares>,
    key: Arc<str>,
}

impl Shares {
    /// A slot for `key`, or `None` when it already holds `max`.
    pub(crate) fn take(self: &Arc<Self>, key: &str, max: usize) -> Option<ShareSlot> {
        let mut map = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if map.get(key).copied().unwrap_or(0) >= max {
            return None;
        }
        let key: Arc<str> = Arc::from(key);
        *map.entry(Arc::clone(&key)).or_insert(0) += 1;
        Some(ShareSlot {
            shares: Arc::clone(self),
            key,
        })
    }
}

impl Drop for ShareSlot {
    fn drop(&mut self) {
        let mut map = self.shares.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.key);
            }
        }
    }
}

/// The peer a share is keyed by: an IPv4 address as it is (an IPv4-mapped
/// IPv6 address as its IPv4 one), an IPv6 address by its /64, the prefix a
/// single host is normally given (RFC 6177, RFC 7421): one IPv6 host holds
/// 2^64 addresses, and keyed by each it would be any number of peers.
pub(crate) fn peer_of(ip: std::net::IpAddr) -> std::net::IpAddr {
    use std::net::{IpAddr, Ipv6Addr};
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(Ipv6Addr::from_bits(v6.to_bits() & !u128::from(u64::MAX))),
        },
    }
}

/// [`peer_of`] written as a share key: `192.0.2.1`, or `2001:db8::/64`.
///
/// Every anonymous HTTP request names its peer, so an IPv4 address is
/// written digit by digit into one allocation of its exact size, not through
/// the formatter (1.35k of a plain call's 77k instructions went there).
pub(crate) fn peer_name(ip: std::net::IpAddr) -> Arc<str> {
    match peer_of(ip) {
        std::net::IpAddr::V4(v4) => {
            let mut text = [0_u8; 15];
            let mut len = 0;
            for (i, octet) in v4.octets().into_iter().enumerate() {
                if i > 0 {
                    text[len] = b'.';
                    len += 1;
                }
                let mut digits = itoa::Buffer::new();
                let digits = digits.format(octet).as_bytes();
                text[len..len + digits.len()].copy_from_slice(digits);
                len += digits.len();
            }
            // Digits and dots: always ASCII.
            std::str::from_utf8(&text[..len]).map_or_else(|_| v4.to_string().into(), Into::into)
        }
        std::net::IpAddr::V6(v6) => format!("{v6}/64").into(),
    }
}

/// Whose share a request counts against: its authenticated principal, else
/// the anonymous peer (an HTTP client's address, `stdio`); `None` when the
/// transport names neither (all such callers then share the server-wide
/// cap only).
pub(crate) fn caller_key(principal: &Principal, peer: Option<&str>) -> Option<String> {
    match (principal.id(), peer) {
        (Some(id), _) => Some(format!("principal:{id}")),
        (None, Some(peer)) => Some(format!("peer:{peer}")),
        (None, None) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_peer_is_written_as_the_formatter_writes_it() {
        for octets in [
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [127, 0, 0, 1],
            [10, 99, 100, 9],
        ] {
            let ip = std::net::Ipv4Addr::from(octets);
            assert_eq!(&*peer_name(ip.into()), ip.to_string());
        }
        // Every width of every octet.
        for n in 0_u8..=255 {
            let ip = std::net::Ipv4Addr::new(n, n.wrapping_mul(7), 255 - n, n / 3);
            assert_eq!(&*peer_name(ip.into()), ip.to_string());
        }
    }

    #[test]
    fn an_ipv6_host_is_one_peer_by_its_64_and_mapped_ipv4_is_ipv4() {
        let a: std::net::IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: std::net::IpAddr = "2001:db8:1:2:ffff:ffff:ffff:ffff".parse().unwrap();
        let other: std::net::IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(peer_of(a), peer_of(b));
        assert_ne!(peer_of(a), peer_of(other));
        assert_eq!(&*peer_name(a), "2001:db8:1:2::/64");
        let mapped: std::net::IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(&*peer_name(mapped), "192.0.2.7");
        let v4: std::net::IpAddr = "192.0.2.7".parse().unwrap();
        assert_eq!(peer_of(v4), v4);
    }
}
