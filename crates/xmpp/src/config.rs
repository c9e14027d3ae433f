//! The `[xmpp]` section of the broker configuration: where to listen, the service's domain and
//! every per-connection limit. Field docs are the user documentation.

use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Settings of the XMPP client listener and its publish-subscribe service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct XmppConfig {
    /// Start the XMPP listener.
    pub enabled: bool,
    /// Address and port of the client-to-server listener (5222 is XMPP's registered port).
    /// STARTTLS is offered on it when the broker has a `[tls]` section.
    pub bind: SocketAddr,
    /// Address and port of a listener where TLS starts at once (XEP-0368, conventionally
    /// 5223); needs the broker's `[tls]` section. None: no such listener.
    pub tls_bind: Option<SocketAddr>,
    /// The domain clients log in to (their JIDs are `user@domain`); the publish-subscribe
    /// service is `pubsub.<domain>`. A stream opened to another domain is refused with
    /// `host-unknown`.
    pub domain: String,
    /// Refuse to authenticate a client on a stream without TLS (STARTTLS is then `required`).
    pub require_tls: bool,
    /// Keep each XMPP publish as its node's last item (the topic's retained message), as
    /// XEP-0060's persistent nodes do, so that `items` requests and new subscribers get it.
    pub retain_items: bool,
    /// Most simultaneous XMPP connections; more are accepted and closed at once.
    pub max_connections: usize,
    /// Most simultaneous connections from one IP address.
    pub max_connections_per_address: usize,
    /// Largest stanza accepted from a client, in bytes; a bigger one ends the stream with
    /// `policy-violation` (RFC 6120 §13.12 asks servers to take at least 10,000).
    pub max_stanza_bytes: usize,
    /// Deepest element nesting accepted in a stanza (the stanza itself is level 1).
    pub max_depth: usize,
    /// Stanzas one connection may send per second, a second's worth at once; a client sending
    /// faster is slowed down (its stream is read no faster), not closed. 0 = no limit.
    pub max_stanzas_per_second: u32,
    /// Time a new connection has to authenticate and bind a resource before it is closed.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Longest a client may stay silent (whitespace keep-alives count) before it is closed.
    /// `0s` = no bound.
    #[serde(with = "humantime_serde")]
    pub max_silence: Duration,
    /// Time pending output may wait without the socket taking any of it before the client is
    /// dropped as a slow consumer.
    #[serde(with = "humantime_serde")]
    pub write_timeout: Duration,
    /// Subscriptions one connection may hold; more are refused with `policy-violation`.
    pub max_subscriptions: usize,
}

/// The port XMPP clients connect to by default (IANA `xmpp-client`).
pub const fn default_port() -> u16 {
    5222
}

impl Default for XmppConfig {
    fn default() -> Self {
        XmppConfig {
            enabled: true,
            bind: SocketAddr::from(([0, 0, 0, 0], default_port())),
            tls_bind: None,
            domain: "localhost".to_owned(),
            require_tls: false,
            retain_items: true,
            max_connections: 10_000,
            max_connections_per_address: 100,
            max_stanza_bytes: 64 * 1024,
            max_depth: 16,
            max_stanzas_per_second: 10_000,
            connect_timeout: Duration::from_secs(10),
            max_silence: Duration::from_secs(3600),
            write_timeout: Duration::from_secs(30),
            max_subscriptions: 256,
        }
    }
}

impl XmppConfig {
    /// The JID of the publish-subscribe service.
    pub fn pubsub_jid(&self) -> String {
        format!("pubsub.{}", self.domain)
    }

    /// The stream reader's bounds.
    pub fn limits(&self) -> xmpp_codec::Limits {
        xmpp_codec::Limits {
            max_stanza_bytes: self.max_stanza_bytes,
            max_depth: self.max_depth,
            ..xmpp_codec::Limits::default()
        }
    }

    /// Why this configuration cannot run, if it cannot.
    pub fn validate(&self) -> Result<(), String> {
        if self.domain.is_empty() || self.domain.len() > 1023 || !self.domain.chars().all(domain_char) {
            return Err(format!("xmpp.domain {:?} is not a domain name", self.domain));
        }
        if self.max_stanza_bytes < 10_000 {
            return Err("xmpp.max_stanza_bytes must be at least 10000 (RFC 6120 §13.12)".to_owned());
        }
        Ok(())
    }
}

fn domain_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '-' || c == '.'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_listen_on_5222_for_localhost() {
        let config = XmppConfig::default();
        assert_eq!(config.bind.port(), 5222);
        assert_eq!(config.pubsub_jid(), "pubsub.localhost");
        assert_eq!(config.validate(), Ok(()));
        let bad = XmppConfig { domain: "a b".into(), ..XmppConfig::default() };
        assert!(bad.validate().is_err());
    }
}
