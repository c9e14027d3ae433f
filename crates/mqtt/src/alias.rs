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

/// Aliases the client defined towards us.
#[derive(Debug, Default)]
pub struct InboundAliases {
    max: u16,
    /// Allocated on the first alias: most clients use none, and every connection holds a table.
    #[expect(clippy::box_collection, reason = "an unused table costs 8 bytes boxed, 48 inline")]
    topics: Option<Box<HashMap<u16, String>>>,
}

impl InboundAliases {
    /// A table accepting aliases `1..=max` (what we advertised in CONNACK).
    pub fn new(max: u16) -> Self {
        InboundAliases { max, topics: None }
    }

    /// The topic a PUBLISH is for: its own topic (recording the alias if it carries one), or
    /// the topic an earlier PUBLISH bound to its alias.
    pub fn resolve(&mut self, topic: &str, alias: Option<NonZeroU16>) -> Result<String, AliasError> {
        let Some(alias) = alias.map(NonZeroU16::get) else {
            return if topic.is_empty() { Err(AliasError::EmptyTopic) } else { Ok(topic.to_owned()) };
        };
        if alias > self.max {
            return Err(AliasError::OutOfRange { alias, max: self.max });
        }
        if topic.is_empty() {
            return self.topics.as_ref().and_then(|t| t.get(&alias)).cloned().ok_or(AliasError::Unknown(alias));
        }
        self.topics.get_or_insert_default().insert(alias, topic.to_owned());
        Ok(topic.to_owned())
    }
}

/// Aliases we defined towards the client.
#[derive(Debug, Default)]
pub struct OutboundAliases {
    max: u16,
    /// Allocated on the first alias, like [`InboundAliases`]'s table.
    #[expect(clippy::box_collection, reason = "an unused table costs 8 bytes boxed, 48 inline")]
    by_topic: Option<Box<HashMap<String, NonZeroU16>>>,
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

impl OutboundAliases {
    /// A table of at most `max` aliases (0 = the client accepts none).
    pub fn new(max: u16) -> Self {
        OutboundAliases { max, by_topic: None }
    }

    /// Decides how to send `topic`, defining a new alias while there is room.
    pub fn assign(&mut self, topic: &str) -> OutboundTopic {
        if let Some(&alias) = self.by_topic.as_ref().and_then(|t| t.get(topic)) {
            return OutboundTopic::Use(alias);
        }
        let next = self.by_topic.as_ref().map_or(0, |t| t.len()) + 1;
        match u16::try_from(next).ok().filter(|n| *n <= self.max).and_then(NonZeroU16::new) {
            Some(alias) => {
                self.by_topic.get_or_insert_default().insert(topic.to_owned(), alias);
                OutboundTopic::Define(alias)
            }
            None => OutboundTopic::Plain,
        }
    }

    /// Forgets a definition that was never sent (the packet carrying it was dropped), so that
    /// the next message on the topic defines it again.
    pub fn forget(&mut self, topic: &str) {
        // Only the most recent definition can be forgotten without leaving a gap.
        if let Some(table) = self.by_topic.as_mut()
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
    fn inbound_defines_then_uses_and_rejects_mistakes() {
        let mut t = InboundAliases::new(2);
        assert_eq!(t.resolve("x/y", a(1)).unwrap(), "x/y");
        assert_eq!(t.resolve("", a(1)).unwrap(), "x/y");
        assert_eq!(t.resolve("z", a(1)).unwrap(), "z", "redefinition is allowed");
        assert_eq!(t.resolve("", a(1)).unwrap(), "z");
        assert_eq!(t.resolve("", a(2)), Err(AliasError::Unknown(2)));
        assert_eq!(t.resolve("q", a(3)), Err(AliasError::OutOfRange { alias: 3, max: 2 }));
        assert_eq!(t.resolve("", None), Err(AliasError::EmptyTopic));
        assert_eq!(AliasError::OutOfRange { alias: 3, max: 2 }.reason_code(), DisconnectReasonCode::TopicAliasInvalid);
    }

    #[test]
    fn outbound_fills_the_table_then_sends_plain() {
        let mut t = OutboundAliases::new(1);
        assert_eq!(t.assign("a"), OutboundTopic::Define(NonZeroU16::new(1).unwrap()));
        assert_eq!(t.assign("a"), OutboundTopic::Use(NonZeroU16::new(1).unwrap()));
        assert_eq!(t.assign("b"), OutboundTopic::Plain);
        t.forget("a");
        assert_eq!(t.assign("b"), OutboundTopic::Define(NonZeroU16::new(1).unwrap()));
        assert_eq!(OutboundAliases::new(0).assign("a"), OutboundTopic::Plain);
    }
}
