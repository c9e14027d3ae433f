//! Rules of the canonical topic space: what a valid topic name and topic filter are, and the
//! reference matcher. Levels are separated by `/`; `+` matches one level, `#` (last, alone)
//! matches the parent and any number of levels below; topics starting with `$` are not matched
//! by a filter whose first level is a wildcard (MQTT 3.1.1 §4.7, MQTT-4.7.2-1).

use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Longest topic or filter any protocol can carry, in bytes (MQTT's UTF-8 string limit,
/// MQTT-4.7.3-3); [`TopicLimits::max_bytes`] may only lower it.
pub const MAX_TOPIC_LEN: usize = 65_535;

/// How long and how deep a topic name or filter may be. Every front end checks its topics
/// against these before they reach the trie, so one limit protects every protocol; each
/// answers an over-limit topic with its own refusal (SUBACK failure, MQTT-SN return code,
/// STOMP ERROR, AMQP channel close, WS-N InvalidTopicExpressionFault).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TopicLimits {
    /// Most levels (`/`-separated parts) in a topic or filter. 128 is EMQX's default: real
    /// topic trees are under 10 levels deep, and a filter of thousands of levels is an attack
    /// on the matcher's time and memory.
    pub max_levels: usize,
    /// Most bytes in a topic or filter, at most 65,535 (MQTT's own limit, the default).
    pub max_bytes: usize,
}

impl Default for TopicLimits {
    fn default() -> Self {
        TopicLimits { max_levels: 128, max_bytes: MAX_TOPIC_LEN }
    }
}

/// The limits in force for the whole process. Topic validity is checked in every front end,
/// often deep in translation code that has no router at hand, and one broker process has one
/// topic space; so the limits are process-wide, set once at start by [`set_limits`].
static MAX_LEVELS: AtomicUsize = AtomicUsize::new(128);
static MAX_BYTES: AtomicUsize = AtomicUsize::new(MAX_TOPIC_LEN);

/// Puts `limits` in force for every later check (the router does this when it is made).
pub fn set_limits(limits: TopicLimits) {
    MAX_LEVELS.store(limits.max_levels.max(1), Ordering::Relaxed);
    MAX_BYTES.store(limits.max_bytes.clamp(1, MAX_TOPIC_LEN), Ordering::Relaxed);
}

/// The limits in force.
pub fn limits() -> TopicLimits {
    TopicLimits { max_levels: MAX_LEVELS.load(Ordering::Relaxed), max_bytes: MAX_BYTES.load(Ordering::Relaxed) }
}

/// Why a topic name or filter was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TopicError {
    /// Topics and filters must have at least one character (MQTT-4.7.3-1).
    #[error("topic is empty")]
    Empty,
    /// Longer than the configured [`TopicLimits::max_bytes`].
    #[error("topic is {0} bytes long, the limit is {1}")]
    TooLong(usize, usize),
    /// More levels than the configured [`TopicLimits::max_levels`].
    #[error("topic has {0} levels, the limit is {1}")]
    TooDeep(usize, usize),
    /// U+0000 is forbidden in MQTT strings (MQTT-1.5.3-2).
    #[error("topic contains a NUL character")]
    ContainsNul,
    /// A topic name (not a filter) contained `+` or `#` (MQTT-3.3.2-2).
    #[error("topic name contains a wildcard ('+' or '#')")]
    WildcardInName,
    /// `+` or `#` shared a level with other characters, or `#` was not last (MQTT-4.7.1-2/3).
    #[error("wildcard '{0}' must occupy a whole level ('#' only as the last level)")]
    MisplacedWildcard(char),
}

/// The checks names and filters share, in one pass over the bytes: every publish makes it, so
/// it looks at each byte once. Returns whether a wildcard character (`+` or `#`) occurs, which a
/// name refuses and a filter must then place.
fn check_common(s: &str) -> Result<bool, TopicError> {
    if s.is_empty() {
        return Err(TopicError::Empty);
    }
    let limits = limits();
    if s.len() > limits.max_bytes {
        return Err(TopicError::TooLong(s.len(), limits.max_bytes));
    }
    let (mut levels, mut nul, mut wildcard) = (1, false, false);
    for &b in s.as_bytes() {
        match b {
            b'/' => {
                levels += 1;
                // It stops early on a hostile topic, and counts its levels only to say so.
                if levels > limits.max_levels {
                    return Err(TopicError::TooDeep(s.bytes().filter(|&b| b == b'/').count() + 1, limits.max_levels));
                }
            }
            0 => nul = true,
            b'+' | b'#' => wildcard = true,
            _ => {}
        }
    }
    if nul {
        return Err(TopicError::ContainsNul);
    }
    Ok(wildcard)
}

/// Checks a topic name that a message is published to.
pub fn validate_name(topic: &str) -> Result<(), TopicError> {
    if check_common(topic)? {
        return Err(TopicError::WildcardInName);
    }
    Ok(())
}

/// Checks a topic filter that a subscription uses.
pub fn validate_filter(filter: &str) -> Result<(), TopicError> {
    if !check_common(filter)? {
        return Ok(());
    }
    let mut levels = filter.split('/').peekable();
    while let Some(level) = levels.next() {
        match level {
            "+" => {}
            "#" if levels.peek().is_none() => {}
            "#" => return Err(TopicError::MisplacedWildcard('#')),
            _ if level.contains('+') => return Err(TopicError::MisplacedWildcard('+')),
            _ if level.contains('#') => return Err(TopicError::MisplacedWildcard('#')),
            _ => {}
        }
    }
    Ok(())
}

/// Whether a filter contains a wildcard, i.e. can match more than one topic.
pub fn has_wildcard(filter: &str) -> bool {
    filter.split('/').any(|level| level == "+" || level == "#")
}

/// Does `filter` match `topic`? Both are assumed valid. The router's trie must agree with this
/// function for every input (checked by a property test in the trie). One pass over the bytes
/// of both, without splitting: the access-control list calls it for every rule on every
/// publish and delivery.
pub fn matches(filter: &str, topic: &str) -> bool {
    let (f, t) = (filter.as_bytes(), topic.as_bytes());
    if t.first() == Some(&b'$') && matches!(f.first(), Some(b'+' | b'#')) {
        return false;
    }
    // `i` and `j` are at the start of a level in `f` and `t`.
    let (mut i, mut j) = (0, 0);
    loop {
        let wildcard_level = |c: u8| f[i] == c && (i + 1 == f.len() || f[i + 1] == b'/');
        if i < f.len() && wildcard_level(b'#') {
            return true;
        }
        if i < f.len() && wildcard_level(b'+') {
            while j < t.len() && t[j] != b'/' {
                j += 1;
            }
            i += 1;
        } else {
            while i < f.len() && f[i] != b'/' {
                if j == t.len() || t[j] != f[i] {
                    return false;
                }
                i += 1;
                j += 1;
            }
            if j < t.len() && t[j] != b'/' {
                return false;
            }
        }
        // Both at the end of a level: a `/` or the end.
        match (i == f.len(), j == t.len()) {
            (true, true) => return true,
            (true, false) => return false,
            // `sport/#` matches `sport`: the parent level of a trailing `#`.
            (false, true) => return &f[i..] == b"/#",
            (false, false) => {
                i += 1;
                j += 1;
            }
        }
    }
}

/// Does `outer` match every topic that `inner` matches? Both are valid filters. An access rule
/// grants a subscription only when it covers the whole filter: `sensors/#` covers
/// `sensors/+/temp`, but `sensors/+` does not cover `sensors/#`. Iterative, like every walk over
/// levels here.
pub fn covers(outer: &str, inner: &str) -> bool {
    // A `$` topic is matched by `inner` only through a literal first level, which `outer` must
    // then match literally too.
    let inner_dollar = inner.starts_with('$');
    if inner_dollar && (outer.starts_with('+') || outer.starts_with('#')) {
        return false;
    }
    let mut outer_levels = outer.split('/');
    let mut inner_levels = inner.split('/');
    loop {
        match (outer_levels.next(), inner_levels.next()) {
            // `a/#` also matches `a` itself, so it covers an `inner` that ends one level early.
            (Some("#"), _) => return true,
            (Some(_), Some("#")) | (None, Some(_)) => return false,
            (Some("+"), Some(_)) => {}
            (Some(o), Some(i)) if o == i && i != "+" => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_filters_follow_mqtt_rules() {
        assert_eq!(validate_name(""), Err(TopicError::Empty));
        assert_eq!(validate_name("a/+"), Err(TopicError::WildcardInName));
        assert_eq!(validate_name("a\0b"), Err(TopicError::ContainsNul));
        assert!(validate_name("/").is_ok());
        assert!(validate_name("a//b").is_ok());
        assert!(validate_filter("#").is_ok());
        assert!(validate_filter("+/+/#").is_ok());
        assert_eq!(validate_filter("a/#/b"), Err(TopicError::MisplacedWildcard('#')));
        assert_eq!(validate_filter("a/b#"), Err(TopicError::MisplacedWildcard('#')));
        assert_eq!(validate_filter("a+/b"), Err(TopicError::MisplacedWildcard('+')));
        assert_eq!(validate_name(&"x".repeat(65_536)), Err(TopicError::TooLong(65_536, 65_535)));
        assert_eq!(validate_filter(&vec!["a"; 12_000].join("/")), Err(TopicError::TooDeep(12_000, 128)));
        assert!(validate_name(&vec!["a"; 128].join("/")).is_ok());
    }

    #[test]
    fn one_pass_keeps_the_order_of_refusals() {
        // Depth is refused first, then a NUL, then a wildcard in a name: the order of the
        // separate checks this one pass replaced.
        assert_eq!(validate_name(&format!("\0+{}", "/a".repeat(200))), Err(TopicError::TooDeep(201, 128)));
        assert_eq!(validate_name("+/a\0"), Err(TopicError::ContainsNul));
        assert_eq!(validate_filter("#/a\0"), Err(TopicError::ContainsNul));
        assert_eq!(validate_name("a/b#"), Err(TopicError::WildcardInName));
        assert!(validate_filter("a/b/c").is_ok());
        assert!(validate_filter("a/+/#").is_ok());
    }

    #[test]
    fn matcher_follows_the_spec_examples() {
        // MQTT 3.1.1 §4.7.1.2 and §4.7.1.3 non-normative examples.
        assert!(matches("sport/tennis/player1/#", "sport/tennis/player1"));
        assert!(matches("sport/tennis/player1/#", "sport/tennis/player1/ranking"));
        assert!(matches("sport/#", "sport"));
        assert!(matches("sport/tennis/+", "sport/tennis/player1"));
        assert!(!matches("sport/tennis/+", "sport/tennis/player1/ranking"));
        assert!(!matches("sport/+", "sport"));
        assert!(matches("sport/+", "sport/"));
        assert!(matches("+/+", "/finance"));
        assert!(matches("/+", "/finance"));
        assert!(!matches("+", "/finance"));
        // §4.7.2: $-topics.
        assert!(!matches("#", "$SYS/uptime"));
        assert!(!matches("+/monitor/Clients", "$SYS/monitor/Clients"));
        assert!(matches("$SYS/#", "$SYS/monitor/Clients"));
        assert!(matches("$SYS/monitor/+", "$SYS/monitor/Clients"));
    }

    use proptest::prelude::*;

    fn levels(wild: bool) -> impl Strategy<Value = String> {
        let level = prop_oneof![Just(""), Just("a"), Just("b"), Just("$s")].prop_map(str::to_owned);
        let level = if wild { prop_oneof![3 => level, 1 => Just("+".to_owned())].boxed() } else { level.boxed() };
        (prop::collection::vec(level, 1..4), any::<bool>()).prop_map(move |(mut l, hash)| {
            if wild && hash {
                l.push("#".into());
            }
            l.join("/")
        })
    }

    proptest! {
        /// `covers` never claims more than it may: every topic the inner filter matches, the
        /// outer one matches too.
        #[test]
        fn covering_filters_match_every_topic_of_the_covered_one(
            outer in levels(true),
            inner in levels(true),
            topics in prop::collection::vec(levels(false), 1..30),
        ) {
            prop_assume!(!outer.is_empty() && !inner.is_empty());
            if covers(&outer, &inner) {
                for t in topics.iter().filter(|t| !t.is_empty() && matches(&inner, t)) {
                    prop_assert!(matches(&outer, t), "{outer} covers {inner} but not {t}");
                }
            }
        }
    }

    #[test]
    fn a_filter_covers_another_only_when_it_matches_all_its_topics() {
        for (outer, inner) in [
            ("#", "a/b"),
            ("#", "+/#"),
            ("a/#", "a"),
            ("a/#", "a/+/c"),
            ("a/#", "a/#"),
            ("a/+", "a/b"),
            ("a/+", "a/+"),
            ("+/+", "a/+"),
            ("a/b", "a/b"),
            ("$SYS/#", "$SYS/x"),
        ] {
            assert!(covers(outer, inner), "{outer} should cover {inner}");
        }
        for (outer, inner) in [
            ("a/+", "a/#"),
            ("a/+", "a"),
            ("a/b", "a/+"),
            ("a", "a/#"),
            ("a", "a/b"),
            ("a/b", "a"),
            ("+/#", "$SYS/x"),
            ("#", "$SYS/#"),
            ("a/b/#", "a/#"),
        ] {
            assert!(!covers(outer, inner), "{outer} should not cover {inner}");
        }
    }
}
