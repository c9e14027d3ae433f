//! The one mapping between AMQP routing keys on `amq.topic` and tolk's common (MQTT-style)
//! topic space, plus the AMQP topic-exchange matcher used by declared topic exchanges.
//!
//! # The rule
//!
//! A routing key's words (split on `.`) are the topic's levels (split on `/`). Inside a word or
//! level, the two separators swap roles: a `/` inside a routing-key word stands for a literal
//! `.` inside a topic level, and a literal `.` inside a topic level is written `/` in the
//! routing key. So the whole translation is "swap every `.` with `/`", in both directions:
//!
//! | topic (MQTT, STOMP, WS-N)   | routing key (AMQP)          |
//! |-----------------------------|-----------------------------|
//! | `sensors/room.1/temp`       | `sensors.room/1.temp`       |
//! | `a/b/c`                     | `a.b.c`                     |
//! | `v1.2/x`                    | `v1/2.x`                    |
//!
//! Why a swap rather than an escape character: `/` can never appear inside a topic level and
//! `.` can never appear inside a routing-key word, so each separator is free to stand for the
//! other and no third character needs escaping. The mapping is a bijection on all strings (it
//! is its own inverse), so there is no malformed escape to refuse and every round trip is exact.
//! It is also what RabbitMQ's MQTT plugin does, so mixed deployments see the same keys.
//!
//! Binding keys map to filters word by word: `*` ↔ `+`, `#` ↔ `#`, other words swapped as above.
//! Refused (406 on the AMQP side), because MQTT filters cannot express them: `#` anywhere but
//! the last word, `+` or `#` inside a word (MQTT would read them as wildcards), and empty keys.
//! Published routing keys containing `+` or `#`, or empty ones, have no topic either.
//! Topics starting with `$` are not matched by a leading `*` or `#` (MQTT-4.7.2-1).

use thiserror::Error;
use tolk_core::topic::{self, TopicError};

/// Why a routing or binding key has no place in the common topic space.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum KeyError {
    /// The key translates to an invalid topic name or filter.
    #[error("routing key '{key}' is not a valid topic: {source}")]
    Topic {
        /// The key as given.
        key: String,
        /// What the topic rules say.
        source: TopicError,
    },
    /// `#` in a binding key is only allowed as the last word (MQTT-4.7.1-2).
    #[error("binding key '{key}': '#' must be the last word on amq.topic (MQTT filters allow '#' only at the end)")]
    HashNotLast {
        /// The key as given.
        key: String,
    },
    /// A word that MQTT would read as a wildcard.
    #[error(
        "binding key '{key}': the word '{word}' contains '+' or '#', which the common topic space reads as wildcards"
    )]
    WildcardInWord {
        /// The key as given.
        key: String,
        /// The offending word.
        word: String,
    },
}

/// Swaps `.` and `/`: routing key → topic and topic → routing key are both this function.
pub fn swap_separators(s: &str) -> String {
    // Exactly as long as `s` (the swapped characters are one byte each): a topic made from it
    // becomes a message's shared topic without a copy.
    let mut swapped = String::with_capacity(s.len());
    swapped.extend(s.chars().map(swap_separator));
    swapped
}

/// `.` for `/` and `/` for `.`; any other character as it is.
pub fn swap_separator(c: char) -> char {
    match c {
        '.' => '/',
        '/' => '.',
        c => c,
    }
}

/// The topic a message published to `amq.topic` with `routing_key` is published on.
pub fn routing_key_to_topic(routing_key: &str) -> Result<String, KeyError> {
    let topic = swap_separators(routing_key);
    topic::validate_name(&topic).map_err(|source| KeyError::Topic { key: routing_key.to_owned(), source })?;
    Ok(topic)
}

/// The routing key a message on `topic` is delivered with (from `amq.topic`). Total: every
/// topic has one (it may be longer than the 255 bytes a routing key can hold; callers check).
pub fn topic_to_routing_key(topic: &str) -> String {
    swap_separators(topic)
}

/// The topic filter a queue binding on `amq.topic` with `binding_key` subscribes to.
pub fn binding_key_to_filter(binding_key: &str) -> Result<String, KeyError> {
    let words: Vec<&str> = binding_key.split('.').collect();
    let mut levels = Vec::with_capacity(words.len());
    for (i, word) in words.iter().enumerate() {
        let level = match *word {
            "*" => "+".to_owned(),
            "#" if i + 1 == words.len() => "#".to_owned(),
            "#" => return Err(KeyError::HashNotLast { key: binding_key.to_owned() }),
            w if w.contains(['+', '#']) => {
                return Err(KeyError::WildcardInWord { key: binding_key.to_owned(), word: w.to_owned() });
            }
            w => swap_separators(w),
        };
        levels.push(level);
    }
    let filter = levels.join("/");
    topic::validate_filter(&filter).map_err(|source| KeyError::Topic { key: binding_key.to_owned(), source })?;
    Ok(filter)
}

/// The binding key for a topic filter (documentation and tests; the inverse of
/// [`binding_key_to_filter`] for every filter without a literal `*` level).
pub fn filter_to_binding_key(filter: &str) -> String {
    filter
        .split('/')
        .map(|level| match level {
            "+" => "*".to_owned(),
            "#" => "#".to_owned(),
            l => swap_separators(l),
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn words(s: &str) -> Vec<&str> {
    if s.is_empty() { Vec::new() } else { s.split('.').collect() }
}

/// AMQP topic-exchange matching (AMQP 0-9-1 §3.1.3.3, RabbitMQ semantics): words split on `.`,
/// `*` matches exactly one word, `#` zero or more. An empty key has no words. Used by declared
/// topic exchanges; `amq.topic` goes through the router instead.
pub fn pattern_matches(pattern: &str, key: &str) -> bool {
    let p = words(pattern);
    let k = words(key);
    // reachable[j]: the pattern prefix processed so far can consume exactly k[..j]. O(|p|·|k|),
    // no backtracking, so many '#' words cannot make a publish slow.
    let mut reachable = vec![false; k.len() + 1];
    reachable[0] = true;
    for word in &p {
        let mut next = vec![false; k.len() + 1];
        match *word {
            "#" => {
                let mut any = false;
                for j in 0..=k.len() {
                    any |= reachable[j];
                    next[j] = any;
                }
            }
            w => {
                for j in 0..k.len() {
                    if reachable[j] && (w == "*" || w == k[j]) {
                        next[j + 1] = true;
                    }
                }
            }
        }
        reachable = next;
    }
    reachable[k.len()]
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn dots_inside_levels_survive_both_ways() {
        assert_eq!(routing_key_to_topic("sensors.room/1.temp").unwrap(), "sensors/room.1/temp");
        assert_eq!(topic_to_routing_key("sensors/room.1/temp"), "sensors.room/1.temp");
        assert_eq!(routing_key_to_topic("a..b").unwrap(), "a//b");
        assert_eq!(binding_key_to_filter("sensors.*.temp").unwrap(), "sensors/+/temp");
        assert_eq!(binding_key_to_filter("sensors.room/1.#").unwrap(), "sensors/room.1/#");
        assert_eq!(binding_key_to_filter("#").unwrap(), "#");
        assert_eq!(filter_to_binding_key("sensors/+/temp.c/#"), "sensors.*.temp/c.#");
    }

    #[test]
    fn keys_without_a_topic_are_refused_with_the_reason() {
        assert!(matches!(routing_key_to_topic(""), Err(KeyError::Topic { source: TopicError::Empty, .. })));
        assert!(matches!(
            routing_key_to_topic("a.+.b"),
            Err(KeyError::Topic { source: TopicError::WildcardInName, .. })
        ));
        assert!(matches!(binding_key_to_filter("#.a"), Err(KeyError::HashNotLast { .. })));
        assert!(matches!(binding_key_to_filter("a.+.b"), Err(KeyError::WildcardInWord { .. })));
        assert!(matches!(binding_key_to_filter("a.b#"), Err(KeyError::WildcardInWord { .. })));
        assert!(binding_key_to_filter("").is_err());
    }

    #[test]
    fn amqp_topic_matching_follows_rabbitmq() {
        assert!(pattern_matches("a.*.c", "a.b.c"));
        assert!(!pattern_matches("a.*.c", "a.c"));
        assert!(pattern_matches("a.#", "a"));
        assert!(pattern_matches("a.#.c", "a.c"));
        assert!(pattern_matches("a.#.c", "a.x.y.c"));
        assert!(pattern_matches("#", ""));
        assert!(pattern_matches("", ""));
        assert!(!pattern_matches("*", ""));
        assert!(pattern_matches("#.#.#.#.#.#.#.#.#.#.z", "a.b.c.d.e.f.g.h.i.j.k.l.m.n.z"));
        assert!(!pattern_matches("a.b", "a.b.c"));
    }

    fn word() -> impl Strategy<Value = String> {
        "[ab./é$]{0,3}".prop_map(|s| s.replace('.', "/"))
    }

    proptest! {
        /// The mapping is its own inverse on any string: topic → key → topic is exact.
        #[test]
        fn swap_round_trips(s in ".{0,40}") {
            prop_assert_eq!(swap_separators(&swap_separators(&s)), s.clone());
            if let Ok(topic) = routing_key_to_topic(&s) {
                prop_assert_eq!(topic_to_routing_key(&topic), s);
            }
        }

        /// Filters survive filter → binding key → filter.
        #[test]
        fn filter_round_trips(levels in prop::collection::vec(prop_oneof![3 => "[ab.é]{0,3}", 1 => Just("+".to_string())], 1..5), hash in any::<bool>()) {
            let mut levels = levels;
            if hash { levels.push("#".into()); }
            let filter = levels.join("/");
            prop_assume!(tolk_core::topic::validate_filter(&filter).is_ok());
            prop_assert_eq!(binding_key_to_filter(&filter_to_binding_key(&filter)).unwrap(), filter);
        }

        /// An AMQP client binding `key` on amq.topic receives exactly what the AMQP topic
        /// exchange would route to it (topics without a leading '$').
        #[test]
        fn bridge_matches_like_a_topic_exchange(
            pattern in prop::collection::vec(prop_oneof![3 => word(), 1 => Just("*".to_string())], 1..4),
            hash in any::<bool>(),
            key in prop::collection::vec(word(), 1..5),
        ) {
            let mut pattern = pattern;
            if hash { pattern.push("#".into()); }
            let pattern = pattern.join(".");
            let key = key.join(".");
            let (Ok(filter), Ok(topic)) = (binding_key_to_filter(&pattern), routing_key_to_topic(&key)) else {
                return Ok(());
            };
            prop_assume!(!topic.starts_with('$'));
            prop_assert_eq!(tolk_core::topic::matches(&filter, &topic), pattern_matches(&pattern, &key),
                "pattern {:?} key {:?}", pattern, key);
        }
    }
}
