//! Which session each peer address (IP and port) belongs to, and how many sessions each IP
//! address holds, for `max_clients_per_address`. The count is kept here, updated with every
//! binding, so that checking the limit on a CONNECT flood costs one lookup, not a scan.
//!
//! Counted by IP address, not by IP and port: one host can open as many ports as it likes. Each
//! IPv6 address counts on its own, not its /64: the sensors of a 6LoWPAN network share a prefix.
//! This module knows sessions only by their keys.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use foldhash::fast::RandomState;

use crate::outbox_watch::ClientKey;

/// Peer address → session, plus sessions per IP address.
#[derive(Default)]
pub(crate) struct Addresses {
    by_addr: HashMap<SocketAddr, ClientKey, RandomState>,
    per_ip: HashMap<IpAddr, usize, RandomState>,
}

impl Addresses {
    /// The session at `addr`.
    pub(crate) fn get(&self, addr: SocketAddr) -> Option<ClientKey> {
        self.by_addr.get(&addr).copied()
    }

    /// Sessions bound to any port of `ip`.
    pub(crate) fn sessions_at(&self, ip: IpAddr) -> usize {
        self.per_ip.get(&ip).copied().unwrap_or(0)
    }

    /// Binds `addr` to `key`; returns the session it was bound to before, if any.
    pub(crate) fn insert(&mut self, addr: SocketAddr, key: ClientKey) -> Option<ClientKey> {
        let previous = self.by_addr.insert(addr, key);
        if previous.is_none() {
            *self.per_ip.entry(addr.ip()).or_default() += 1;
        }
        previous
    }

    /// Unbinds `addr`; returns the session it was bound to, if any.
    pub(crate) fn remove(&mut self, addr: SocketAddr) -> Option<ClientKey> {
        let key = self.by_addr.remove(&addr)?;
        if let Some(count) = self.per_ip.get_mut(&addr.ip()) {
            *count -= 1;
            if *count == 0 {
                self.per_ip.remove(&addr.ip());
            }
        }
        Some(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_counted_per_ip_address_whatever_the_port() {
        let mut addresses = Addresses::default();
        let a1: SocketAddr = "10.0.0.1:1000".parse().unwrap();
        let a2: SocketAddr = "10.0.0.1:2000".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:1000".parse().unwrap();
        assert_eq!(addresses.insert(a1, 1), None);
        assert_eq!(addresses.insert(a2, 2), None);
        assert_eq!(addresses.insert(b, 3), None);
        assert_eq!(addresses.sessions_at(a1.ip()), 2);
        // Rebinding an address to another session does not count twice.
        assert_eq!(addresses.insert(a2, 4), Some(2));
        assert_eq!(addresses.sessions_at(a1.ip()), 2);
        assert_eq!(addresses.remove(a1), Some(1));
        assert_eq!(addresses.remove(a1), None);
        assert_eq!(addresses.remove(a2), Some(4));
        assert_eq!(addresses.sessions_at(a1.ip()), 0);
        assert!(!addresses.per_ip.contains_key(&a1.ip()), "no empty entries left behind");
        assert_eq!(addresses.get(b), Some(3));
    }
}
