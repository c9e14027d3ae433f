//! MQTT 5 topic aliases (§3.3.2.3.4), both directions, scoped to one network connection
//! (MQTT-3.3.2-7: aliases do not survive a reconnect).
//!
//! Inbound, the client names topics by alias up to the maximum we advertised. Outbound, we give
//! the first topics we send an alias each, up to the client's Topic Alias Maximum (and our own
//! configured maximum, to bound memory), and send later messages on those topics with an empty
//! topic name. Aliases are never reassigned: once the table is full, new topics go out in full.

use std::collections::HashMap;
use std::num::NonZeroU16;

use rmqtt_codec::v5::DisconnectReasonCode;
use thiserror::Error;
use tolk_core::ByteString;

/// A client used topic aliases wrongly; each closes the connection with its reason code.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AliasError {
    /// Alias 0 or above the advertised maximum (MQTT-3.3.2-9/10: 0x94).
    #[error("topic alias {alias} is outside 1..={max}")]
    OutOfRange {
        /// The alias the client sent.
        alias: u16,
        /// Our advertised Topic Alias Maximum.
        max: u16,
    },
    /// An empty topic with an alias that was never defined (§4.13: 0x82 protocol error).
    #[error("topic alias {0} was never defined on this connection")]
    Unknown(u16),
    /// An empty topic and no alias (MQTT-4.7.3-1).
    #[error("PUBLISH has an empty topic and no topic alias")]
    EmptyTopic,
}

impl AliasError {
    /// The DISCONNECT reason code for this mistake.
    pub fn reason_code(&self) -> DisconnectReasonCode {
        match self {
            AliasError::OutOfRange { .. } => DisconnectReasonCode::TopicAliasInvalid,
            AliasError::Unknown(_) | AliasError::EmptyTopic => DisconnectReasonCode::ProtocolError,
        }
    }
}

/// Both directions' aliases of one connection: 16 bytes in every connection's task, the two
/// maxima and one pointer. The tables are allocated together on the first alias either way,
/// since most clients use none.
#[derive(Debug, Default)]
pub struct TopicAliases {
    /// Inbound: the Topic Alias Maximum we advertised in CONNACK.
    inbound_max: u16,
    /// Outbound: the client's Topic Alias Maximum (within our own).
    outbound_max: u16,
    tables: Option<Box<Tables>>,
}

/// The aliases defined so far, once there is one.
#[derive(Debug, Default)]
struct Tables {
    /// Aliases the client defined towards us.
    inbound: HashMap<u16, ByteString>,
    /// Aliases we defined towards the client.
    outbound: HashMap<String, NonZeroU16>,
}

/// How to send a topic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutboundTopic {
    /// Full topic, no alias.
    Plain,
    /// Full topic plus a new alias for it.
    Define(NonZeroU16),
    /// Empty topic plus the alias defined earlier.
    Use(NonZeroU16),
}

impl TopicAliases {
    /// Tables accepting inbound aliases `1..=inbound_max` (what we advertised in CONNACK) and
    /// defining at most `outbound_max` outbound ones (0: the client accepts none).
    pub fn new(inbound_max: u16, outbound_max: u16) -> Self {
        TopicAliases { inbound_max, outbound_max, tables: None }
    }

    /// The topic a PUBLISH is for: its own topic (recording the alias if it carries one), or
    /// the topic an earlier PUBLISH bound to its alias.
    pub fn resolve(&mut self, topic: &ByteString, alias: Option<NonZeroU16>) -> Result<ByteString, AliasError> {
        let Some(alias) = alias.map(NonZeroU16::get) else {
            return if topic.is_empty() { Err(AliasError::EmptyTopic) } else { Ok(topic.clone()) };
        };
        if alias > self.inbound_max {
            return Err(AliasError::OutOfRange { alias, max: self.inbound_max });
        }
        if topic.is_empty() {
            return self.tables.as_ref().and_then(|t| t.inbound.get(&alias)).cloned().ok_or(AliasError::Unknown(alias));
        }
        // A copy of its own: the topic as received shares the whole read buffer it came in,
        // which a table of aliases must not keep.
        self.tables.get_or_insert_default().inbound.insert(alias, ByteString::from(&**topic));
        Ok(topic.clone())
    }

    /// Decides how to send `topic`, defining a new alias while there is room.
    pub fn assign(&mut self, topic: &str) -> OutboundTopic {
        if let Some(&alias) = self.tables.as_ref().and_then(|t| t.outbound.get(topic)) {
            return OutboundTopic::Use(alias);
        }
        let next = self.tables.as_ref().map_or(0, |t| t.outbound.len()) + 1;
        match u16::try_from(next).ok().filter(|n| *n <= self.outbound_max).and_then(NonZeroU16::new) {
            Some(alias) => {
                self.tables.get_or_insert_default().outbound.insert(topic.to_owned(), alias);
                OutboundTopic::Define(alias)
            }
            None => OutboundTopic::Plain,
        }
    }

    /// Forgets a definition that was never sent (the packet carrying it was dropped), so that
    /// the next message on the topic defines it again.
    pub fn forget(&mut self, topic: &str) {
        // Only the most recent definition can be forgotten without leaving a gap.
        if let Some(table) = self.tables.as_mut().map(|t| &mut t.outbound)
            && let Some(alias) = table.get(topic)
            && usize::from(alias.get()) == table.len()
        {
            table.remove(topic);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(n: u16) -> Option<NonZeroU16> {
        NonZeroU16::new(n)
    }

    #[test]
    fn an_alias_keeps_a_copy_of_its_topic_not_the_read_buffer() {
        let frame = bytes::Bytes::from(vec![b'a'; 4096]);
        let topic = ByteString::try_from(frame.slice(0..3)).unwrap();
        let mut t = TopicAliases::new(1, 0);
        let now = t.resolve(&topic, a(1)).unwrap();
        assert!(frame.as_ptr_range().contains(&now.as_bytes().as_ptr()), "the message shares its frame");
        let kept = t.resolve(&"".into(), a(1)).unwrap();
        assert_eq!(kept, "aaa");
        assert!(!frame.as_ptr_range().contains(&kept.as_bytes().as_ptr()), "the alias table does not");
    }

    #[test]
    fn inbound_defines_then_uses_and_rejects_mistakes() {
        let mut t = TopicAliases::new(2, 0);
        assert_eq!(t.resolve(&"x/y".into(), a(1)).unwrap(), "x/y");
        assert_eq!(t.resolve(&"".into(), a(1)).unwrap(), "x/y");
        assert_eq!(t.resolve(&"z".into(), a(1)).unwrap(), "z", "redefinition is allowed");
        assert_eq!(t.resolve(&"".into(), a(1)).unwrap(), "z");
        assert_eq!(t.resolve(&"".into(), a(2)), Err(AliasError::Unknown(2)));
        assert_eq!(t.resolve(&"q".into(), a(3)), Err(AliasError::OutOfRange { alias: 3, max: 2 }));
        assert_eq!(t.resolve(&"".into(), None), Err(AliasError::EmptyTopic));
        assert_eq!(AliasError::OutOfRange { alias: 3, max: 2 }.reason_code(), DisconnectReasonCode::TopicAliasInvalid);
    }

    #[test]
    fn outbound_fills_the_table_then_sends_plain() {
        let mut t = TopicAliases::new(0, 1);
        assert_eq!(t.assign("a"), OutboundTopic::Define(NonZeroU16::new(1).unwrap()));
        assert_eq!(t.assign("a"), OutboundTopic::Use(NonZeroU16::new(1).unwrap()));
        assert_eq!(t.assign("b"), OutboundTopic::Plain);
        t.forget("a");
        assert_eq!(t.assign("b"), OutboundTopic::Define(NonZeroU16::new(1).unwrap()));
        assert_eq!(TopicAliases::new(2, 0).assign("a"), OutboundTopic::Plain);
    }
}
