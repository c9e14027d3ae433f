//! Rules of the canonical topic space: what a valid topic name and topic filter are, and the
//! reference matcher. Levels are separated by `/`; `+` matches one level, `#` (last, alone)
//! matches the parent and any number of levels below; topics starting with `$` are not matched
//! by a filter whose first level is a wildcard (MQTT 3.1.1 §4.7, MQTT-4.7.2-1).

use thiserror::Error;

/// Longest topic or filter accepted, in bytes (MQTT's UTF-8 string limit, MQTT-4.7.3-3).
pub const MAX_TOPIC_LEN: usize = 65_535;

/// Why a topic name or filter was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum TopicError {
    /// Topics and filters must have at least one character (MQTT-4.7.3-1).
    #[error("topic is empty")]
    Empty,
    /// Longer than [`MAX_TOPIC_LEN`].
    #[error("topic is {0} bytes long, the limit is 65535")]
    TooLong(usize),
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

fn check_common(s: &str) -> Result<(), TopicError> {
    if s.is_empty() {
        return Err(TopicError::Empty);
    }
    if s.len() > MAX_TOPIC_LEN {
        return Err(TopicError::TooLong(s.len()));
    }
    if s.contains('\0') {
        return Err(TopicError::ContainsNul);
    }
    Ok(())
}

/// Checks a topic name that a message is published to.
pub fn validate_name(topic: &str) -> Result<(), TopicError> {
    check_common(topic)?;
    if topic.contains(['+', '#']) {
        return Err(TopicError::WildcardInName);
    }
    Ok(())
}

/// Checks a topic filter that a subscription uses.
pub fn validate_filter(filter: &str) -> Result<(), TopicError> {
    check_common(filter)?;
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

/// Reference matcher: does `filter` match `topic`? Both are assumed valid. The router's trie
/// must agree with this function for every input (checked by a property test).
pub fn matches(filter: &str, topic: &str) -> bool {
    if topic.starts_with('$') && (filter.starts_with('+') || filter.starts_with('#')) {
        return false;
    }
    let mut filter_levels = filter.split('/');
    let mut topic_levels = topic.split('/');
    loop {
        match (filter_levels.next(), topic_levels.next()) {
            (Some("#"), _) => return true,
            (Some("+"), Some(_)) => {}
            (Some(f), Some(t)) if f == t => {}
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
        assert_eq!(validate_name(&"x".repeat(65_536)), Err(TopicError::TooLong(65_536)));
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
}
