//! Which consumer addresses push delivery may connect to: the `push.consumer_allow` list
//! (networks, addresses, host names) and, always, not the broker itself. Without this the
//! broker POSTs wherever a Subscribe tells it to (a blind SSRF), and a consumer address naming
//! the broker's own endpoint under another name (`localhost` for `127.0.0.1`) makes every
//! Notify come back to it, thousands of times a second.
//!
//! The same check runs at Subscribe (to answer with a fault) and in the push client's
//! connector on every new connection (DNS answers change), on the very addresses then
//! connected to. Names are resolved with tokio's `lookup_host`, which runs the system resolver
//! on the blocking pool, so no runtime worker waits on DNS.

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::fault::shorten;

/// One `consumer_allow` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AllowEntry {
    /// An address block; a single address is a block of one (prefix 32 or 128).
    Network {
        /// The block's address (IPv4-mapped IPv6 addresses are kept as IPv4).
        addr: IpAddr,
        /// Leading bits that must match.
        prefix: u8,
    },
    /// A host name, lowercase, without a trailing dot.
    Name(String),
}

impl AllowEntry {
    /// Reads `"192.168.0.0/16"`, `"10.0.0.5"`, `"fd00::/8"` or `"dashboard.lan"`.
    pub(crate) fn parse(text: &str) -> Result<AllowEntry, String> {
        let text = text.trim();
        let (addr, prefix) = match text.split_once('/') {
            Some((addr, prefix)) => (addr, Some(prefix)),
            None => (text, None),
        };
        let Ok(addr) = addr.parse::<IpAddr>().map(|a| a.to_canonical()) else {
            return match prefix {
                None if is_host_name(text) => Ok(AllowEntry::Name(normalise_host(text))),
                _ => Err(format!("{text:?} is not a network (\"10.0.0.0/8\"), an address or a host name")),
            };
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(AllowEntry::Network { addr, prefix })
    }

    /// Whether this entry lets the broker connect to `ip`, reached as `host` (lowercase).
    fn allows(&self, host: &str, ip: IpAddr) -> bool {
        match self {
            AllowEntry::Network { addr, prefix } => in_network(ip.to_canonical(), *addr, *prefix),
            AllowEntry::Name(name) => name == host,
        }
    }
}

fn in_network(ip: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let bits = |a: IpAddr| match a {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32u32),
        IpAddr::V6(v6) => (u128::from(v6), 128u32),
    };
    let ((a, width), (n, net_width)) = (bits(ip), bits(network));
    let shift = width.saturating_sub(u32::from(prefix));
    width == net_width && a.checked_shr(shift).unwrap_or(0) == n.checked_shr(shift).unwrap_or(0)
}

/// RFC 1123 host name: dot-separated labels of letters, digits, `-` (and `_`, which some LANs
/// use), each 1 to 63 characters, 253 in all; a trailing dot allowed.
fn is_host_name(text: &str) -> bool {
    let name = text.strip_suffix('.').unwrap_or(text);
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            (1..=63).contains(&label.len())
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
                && !label.starts_with('-')
                && !label.ends_with('-')
        })
}

fn normalise_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Why a consumer address is refused.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Refused {
    /// It reaches the broker's own HTTP listener.
    #[error("{0} is this broker's own HTTP endpoint: notifications would loop")]
    Loop(SocketAddr),
    /// None of its addresses is in `push.consumer_allow`.
    #[error("{host} ({addresses}) is not in the broker's push.consumer_allow list")]
    NotAllowed {
        /// The host as given.
        host: String,
        /// What it resolved to.
        addresses: String,
    },
    /// It could not be resolved in time.
    #[error("{host} cannot be resolved: {reason}")]
    Unresolvable {
        /// The host as given.
        host: String,
        /// The resolver's answer.
        reason: String,
    },
}

/// The consumer addresses this broker may connect to.
pub(crate) struct ConsumerPolicy {
    /// `push.consumer_allow`; empty allows any host.
    allow: Vec<AllowEntry>,
    /// The broker's HTTP listener, which serves the WS-N endpoint, once it is bound.
    http_addr: Arc<OnceLock<SocketAddr>>,
    /// Longest wait for the resolver.
    resolve_timeout: Duration,
}

impl ConsumerPolicy {
    /// A policy from the (validated) allow-list; invalid entries are skipped.
    pub(crate) fn new(allow: &[String], http_addr: Arc<OnceLock<SocketAddr>>, resolve_timeout: Duration) -> Self {
        let allow = allow.iter().filter_map(|entry| AllowEntry::parse(entry).ok()).collect();
        ConsumerPolicy { allow, http_addr, resolve_timeout }
    }

    /// The addresses of `host:port` the broker may connect to, in the resolver's order.
    /// Refused when any of them is the broker itself (a loop, whichever address the
    /// connection would take), or when none is allowed. `host` may be an IP literal, IPv6 in
    /// brackets as URIs write it.
    pub(crate) async fn addresses(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, Refused> {
        let host = normalise_host(host.trim_start_matches('[').trim_end_matches(']'));
        let unresolvable = |reason: String| Refused::Unresolvable { host: shorten(&host), reason };
        let lookup = tokio::net::lookup_host((host.as_str(), port));
        let resolved: Vec<SocketAddr> = tokio::time::timeout(self.resolve_timeout, lookup)
            .await
            .map_err(|_| unresolvable(format!("no answer within {:?}", self.resolve_timeout)))?
            .map_err(|e| unresolvable(e.to_string()))?
            .collect();
        if let Some(own) = resolved.iter().find(|a| self.is_broker(**a)) {
            return Err(Refused::Loop(*own));
        }
        let allowed: Vec<SocketAddr> = resolved
            .iter()
            .copied()
            .filter(|a| self.allow.is_empty() || self.allow.iter().any(|e| e.allows(&host, a.ip())))
            .collect();
        if allowed.is_empty() {
            let addresses = resolved.iter().map(|a| a.ip().to_string()).collect::<Vec<_>>().join(", ");
            return Err(Refused::NotAllowed { host: shorten(&host), addresses: shorten(&addresses) });
        }
        Ok(allowed)
    }

    /// Whether a connection to `addr` would reach the broker's HTTP listener: its port, on a
    /// loopback, unspecified or local interface address. Unknown before the listener is bound.
    fn is_broker(&self, addr: SocketAddr) -> bool {
        let Some(own) = self.http_addr.get() else { return false };
        let ip = addr.ip().to_canonical();
        addr.port() == own.port()
            && (ip.is_loopback() || ip.is_unspecified() || ip == own.ip().to_canonical() || is_local_interface(ip))
    }
}

/// Whether `ip` is an address of this host: binding a socket to it succeeds only then. The
/// kernel answers from its interface list (one system call, nothing sent, no waiting), which
/// spares a platform-specific interface enumeration.
fn is_local_interface(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind((ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> ConsumerPolicy {
        let allow: Vec<String> = allow.iter().map(|s| (*s).to_owned()).collect();
        let http = Arc::new(OnceLock::from(SocketAddr::from(([0, 0, 0, 0], 8080))));
        ConsumerPolicy::new(&allow, http, Duration::from_secs(5))
    }

    #[test]
    fn entries_parse_networks_addresses_and_names() {
        let net = |a: &str, prefix| AllowEntry::Network { addr: a.parse().unwrap(), prefix };
        assert_eq!(AllowEntry::parse("192.168.0.0/16"), Ok(net("192.168.0.0", 16)));
        assert_eq!(AllowEntry::parse(" 10.0.0.5 "), Ok(net("10.0.0.5", 32)));
        assert_eq!(AllowEntry::parse("fd00::/8"), Ok(net("fd00::", 8)));
        assert_eq!(AllowEntry::parse("::ffff:10.1.2.3"), Ok(net("10.1.2.3", 32)));
        assert_eq!(AllowEntry::parse("Dashboard.LAN."), Ok(AllowEntry::Name("dashboard.lan".into())));
        for bad in ["10.0.0.0/33", "fd00::/129", "10.0.0.0/x", "host/8", "a b", "", "-x.lan", "x..lan", "http://x"] {
            assert!(AllowEntry::parse(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn networks_match_by_prefix() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert!(in_network(ip("192.168.7.9"), ip("192.168.0.0"), 16));
        assert!(!in_network(ip("192.169.0.1"), ip("192.168.0.0"), 16));
        assert!(in_network(ip("8.8.8.8"), ip("0.0.0.0"), 0));
        assert!(in_network(ip("fd00::1"), ip("fd00::"), 8));
        assert!(in_network(ip("::1"), ip("::"), 0));
        assert!(!in_network(ip("10.0.0.1"), ip("::"), 0), "families never match each other");
        let entry = AllowEntry::parse("10.0.0.0/8").unwrap();
        assert!(entry.allows("x", ip("::ffff:10.9.9.9")), "IPv4-mapped addresses are IPv4");
    }

    #[tokio::test]
    async fn the_broker_itself_is_refused_under_any_name() {
        let any = policy(&[]);
        for host in ["localhost", "127.0.0.1", "127.1.2.3", "[::1]", "0.0.0.0"] {
            assert!(matches!(any.addresses(host, 8080).await, Err(Refused::Loop(_))), "{host}");
        }
        assert!(any.addresses("127.0.0.1", 8081).await.is_ok(), "another port on this host is another service");
        let unbound = ConsumerPolicy::new(&[], Arc::default(), Duration::from_secs(5));
        assert!(unbound.addresses("localhost", 8080).await.is_ok(), "own port unknown before it is bound");
    }

    #[tokio::test]
    async fn the_allow_list_restricts_consumers() {
        let lan = policy(&["10.0.0.0/8", "localhost"]);
        assert!(lan.addresses("10.1.2.3", 80).await.is_ok());
        assert!(matches!(lan.addresses("192.168.1.1", 80).await, Err(Refused::NotAllowed { .. })));
        assert!(lan.addresses("LOCALHOST", 9).await.is_ok(), "names match case-insensitively");
        assert!(matches!(lan.addresses("127.0.0.1", 9).await, Err(Refused::NotAllowed { .. })));
        assert!(matches!(lan.addresses("localhost", 8080).await, Err(Refused::Loop(_))), "never the broker");
        assert!(matches!(lan.addresses("no-such-host.invalid", 80).await, Err(Refused::Unresolvable { .. })));
    }
}
