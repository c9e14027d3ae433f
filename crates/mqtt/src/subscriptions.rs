//! A session's own record of its subscriptions: the options the client asked for (the router
//! keeps the routing copy), whether each is a `$share` group membership, and the subscription
//! identifier. Kept with the session so a persistent session can rejoin its shared groups on
//! reconnect and answer UNSUBSCRIBE correctly.

use std::collections::BTreeMap;

use rmqtt_codec::v5::SubscriptionOptions;
use tolk_core::topic::{self, TopicError};

/// What a topic filter in SUBSCRIBE refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FilterKind<'a> {
    /// An ordinary filter, routed to this session's outbox.
    Plain(&'a str),
    /// `$share/<group>/<filter>` (MQTT 5 §4.8.2): one member of the group gets each message.
    Shared {
        /// The share name.
        group: &'a str,
        /// The filter after the share name.
        filter: &'a str,
    },
}

/// Splits and validates a filter from SUBSCRIBE or UNSUBSCRIBE.
pub fn parse_filter(filter: &str) -> Result<FilterKind<'_>, TopicError> {
    let Some(rest) = filter.strip_prefix("$share/") else {
        topic::validate_filter(filter)?;
        return Ok(FilterKind::Plain(filter));
    };
    // MQTT-4.8.2-1/2: the share name is at least one character, no '/', '+' or '#'.
    let (group, inner) = rest.split_once('/').ok_or(TopicError::Empty)?;
    if group.is_empty() {
        return Err(TopicError::Empty);
    }
    if group.contains(['+', '#']) {
        return Err(TopicError::MisplacedWildcard(if group.contains('+') { '+' } else { '#' }));
    }
    topic::validate_filter(inner)?;
    Ok(FilterKind::Shared { group, filter: inner })
}

/// One subscription as the client asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubEntry {
    /// QoS, no-local, retain-as-published, retain handling.
    pub options: SubscriptionOptions,
    /// MQTT 5 subscription identifier given with the SUBSCRIBE.
    pub id: Option<u32>,
    /// For `$share` subscriptions: the consumer tag under which the session joined the group.
    pub shared_tag: Option<u64>,
}

/// The session's subscriptions, keyed by the filter exactly as the client wrote it. A B-tree
/// rather than a hash map: 24 bytes instead of 48 in every session (most have a few
/// subscriptions or none, and a publisher's none), looked up only on SUBSCRIBE.
#[derive(Debug, Default)]
pub struct Subscriptions {
    map: BTreeMap<String, SubEntry>,
    last_tag: u64,
}

impl Subscriptions {
    /// Number of subscriptions (limited by `max_subscriptions_per_session`).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The entry for `filter`.
    pub fn get(&self, filter: &str) -> Option<&SubEntry> {
        self.map.get(filter)
    }

    /// A fresh consumer tag for a shared-group membership (0 is left to plain subscriptions).
    pub fn next_tag(&mut self) -> u64 {
        self.last_tag += 1;
        self.last_tag
    }

    /// Records (or replaces) a subscription.
    pub fn insert(&mut self, filter: &str, entry: SubEntry) {
        self.map.insert(filter.to_owned(), entry);
    }

    /// Forgets a subscription.
    pub fn remove(&mut self, filter: &str) -> Option<SubEntry> {
        self.map.remove(filter)
    }

    /// The subscription identifier of the shared membership with consumer tag `tag` (queue
    /// deliveries do not carry one).
    pub fn id_for_tag(&self, tag: u64) -> Option<u32> {
        self.map.values().find(|e| e.shared_tag == Some(tag)).and_then(|e| e.id)
    }

    /// Every subscription: `(filter as written, entry)`.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &SubEntry)> {
        self.map.iter().map(|(f, e)| (f.as_str(), e))
    }

    /// Every shared membership: `(filter as written, entry)`.
    pub fn shared(&self) -> impl Iterator<Item = (&str, &SubEntry)> {
        self.map.iter().filter(|(_, e)| e.shared_tag.is_some()).map(|(f, e)| (f.as_str(), e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_filters_are_split_and_checked() {
        assert_eq!(parse_filter("a/+"), Ok(FilterKind::Plain("a/+")));
        assert_eq!(parse_filter("$share/g/a/#"), Ok(FilterKind::Shared { group: "g", filter: "a/#" }));
        assert!(parse_filter("$share/g").is_err(), "no filter");
        assert!(parse_filter("$share//a").is_err(), "empty group");
        assert!(parse_filter("$share/g+/a").is_err(), "wildcard in group");
        assert!(parse_filter("$share/g/a/#/b").is_err(), "bad inner filter");
        assert!(parse_filter("a/#/b").is_err());
    }

    #[test]
    fn tags_find_their_subscription_id() {
        let mut subs = Subscriptions::default();
        let tag = subs.next_tag();
        subs.insert(
            "$share/g/t",
            SubEntry { options: SubscriptionOptions::default(), id: Some(4), shared_tag: Some(tag) },
        );
        subs.insert("x", SubEntry { options: SubscriptionOptions::default(), id: Some(5), shared_tag: None });
        assert_eq!(subs.id_for_tag(tag), Some(4));
        assert_eq!(subs.shared().count(), 1);
    }
}
