//! Topic rules in the syntax of Mosquitto's bridge `topic` lines, so that users' existing
//! lines work as they are:
//!
//! ```text
//! pattern [[[ out | in | both ] qos-level] local-prefix remote-prefix]
//! ```
//!
//! The direction defaults to `out` and the QoS to 0. A prefix is put in front of the pattern on
//! its side: locally a rule covers `local-prefix + pattern`, remotely `remote-prefix + pattern`,
//! and a topic crossing the bridge swaps one prefix for the other. `""` (or `''`) writes an
//! empty prefix. With an empty pattern the two prefixes are whole topics, mapped one to the
//! other. Prefixes hold no wildcards.

use std::fmt;
use std::str::FromStr;

use tolk_core::QoS;
use tolk_core::topic;

/// Which way messages cross the bridge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// From here to the remote.
    Out,
    /// From the remote to here.
    In,
    /// Both ways.
    Both,
}

impl Direction {
    /// Whether messages leave through this rule.
    pub fn goes_out(self) -> bool {
        matches!(self, Direction::Out | Direction::Both)
    }

    /// Whether messages come in through this rule.
    pub fn comes_in(self) -> bool {
        matches!(self, Direction::In | Direction::Both)
    }
}

/// One `topic` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicRule {
    /// The topic filter, between the prefixes.
    pub pattern: String,
    /// Which way messages go.
    pub direction: Direction,
    /// The highest QoS a message crosses with (the remote subscription's, for `in`).
    pub qos: QoS,
    /// Put before the pattern here.
    pub local_prefix: String,
    /// Put before the pattern at the remote.
    pub remote_prefix: String,
}

/// Why a `topic` line was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("topic rule {line:?}: {reason}")]
pub struct RuleError {
    line: String,
    reason: String,
}

impl FromStr for TopicRule {
    type Err = RuleError;

    fn from_str(line: &str) -> Result<Self, RuleError> {
        let fail = |reason: &str| RuleError { line: line.to_owned(), reason: reason.to_owned() };
        let words: Vec<String> = line.split_whitespace().map(unquote).collect();
        let (pattern, direction, qos, local_prefix, remote_prefix) = match words.as_slice() {
            [] => return Err(fail("empty")),
            [pattern] => (pattern, "out", "0", "", ""),
            [pattern, direction] => (pattern, direction.as_str(), "0", "", ""),
            [pattern, direction, qos] => (pattern, direction.as_str(), qos.as_str(), "", ""),
            [pattern, direction, qos, local] => (pattern, direction.as_str(), qos.as_str(), local.as_str(), ""),
            [pattern, direction, qos, local, remote] => {
                (pattern, direction.as_str(), qos.as_str(), local.as_str(), remote.as_str())
            }
            _ => return Err(fail("more than five words (pattern, direction, QoS, local and remote prefix)")),
        };
        let direction = match direction {
            "out" => Direction::Out,
            "in" => Direction::In,
            "both" => Direction::Both,
            _ => return Err(fail("the direction is out, in or both")),
        };
        let qos = qos.parse::<u8>().ok().and_then(QoS::from_level).ok_or_else(|| fail("the QoS is 0, 1 or 2"))?;
        for prefix in [local_prefix, remote_prefix] {
            if prefix.contains(['+', '#']) {
                return Err(fail("a prefix holds no wildcards"));
            }
        }
        if pattern.is_empty() && (local_prefix.is_empty() || remote_prefix.is_empty()) {
            return Err(fail("an empty pattern needs both prefixes (the two topics it maps)"));
        }
        let rule = TopicRule {
            pattern: pattern.clone(),
            direction,
            qos,
            local_prefix: local_prefix.to_owned(),
            remote_prefix: remote_prefix.to_owned(),
        };
        for filter in [rule.local_filter(), rule.remote_filter()] {
            topic::validate_filter(&filter).map_err(|e| fail(&format!("{filter:?}: {e}")))?;
        }
        Ok(rule)
    }
}

/// A word of a `topic` line without the quotes Mosquitto allows around an empty prefix.
fn unquote(word: &str) -> String {
    match word {
        "\"\"" | "''" => String::new(),
        _ => word.to_owned(),
    }
}

impl TopicRule {
    /// What the rule covers here.
    pub fn local_filter(&self) -> String {
        format!("{}{}", self.local_prefix, self.pattern)
    }

    /// What the rule covers at the remote.
    pub fn remote_filter(&self) -> String {
        format!("{}{}", self.remote_prefix, self.pattern)
    }

    /// The remote topic for a local one this rule covers.
    pub fn to_remote(&self, local: &str) -> Option<String> {
        swap(local, &self.local_filter(), &self.local_prefix, &self.remote_prefix)
    }

    /// The local topic for a remote one this rule covers.
    pub fn to_local(&self, remote: &str) -> Option<String> {
        swap(remote, &self.remote_filter(), &self.remote_prefix, &self.local_prefix)
    }
}

/// `topic` with `from` swapped for `to`, if `filter` covers it.
fn swap(topic: &str, filter: &str, from: &str, to: &str) -> Option<String> {
    if !topic::matches(filter, topic) {
        return None;
    }
    let rest = topic.strip_prefix(from)?;
    Some(format!("{to}{rest}"))
}

impl fmt::Display for TopicRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quoted = |s: &str| if s.is_empty() { "\"\"".to_owned() } else { s.to_owned() };
        let direction = match self.direction {
            Direction::Out => "out",
            Direction::In => "in",
            Direction::Both => "both",
        };
        write!(
            f,
            "{} {direction} {} {} {}",
            quoted(&self.pattern),
            self.qos as u8,
            quoted(&self.local_prefix),
            quoted(&self.remote_prefix)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(line: &str) -> TopicRule {
        line.parse().unwrap()
    }

    #[test]
    fn mosquittos_forms_parse_with_its_defaults() {
        let r = rule("sensors/#");
        assert_eq!(
            (r.direction, r.qos, r.local_filter(), r.remote_filter()),
            (Direction::Out, QoS::AtMostOnce, "sensors/#".into(), "sensors/#".into())
        );
        let r = rule("cmd/# in 1 site1/ ''");
        assert_eq!((r.direction, r.qos), (Direction::In, QoS::AtLeastOnce));
        assert_eq!((r.local_filter(), r.remote_filter()), ("site1/cmd/#".into(), "cmd/#".into()));
        let r = rule("# both 2 \"\" gw7/");
        assert_eq!((r.local_filter(), r.remote_filter()), ("#".into(), "gw7/#".into()));
        assert_eq!(rule(&r.to_string()), r, "written back the way it reads");
    }

    #[test]
    fn topics_swap_prefixes_both_ways() {
        let r = rule("temp/+ both 1 local/ remote/x/");
        assert_eq!(r.to_remote("local/temp/a").as_deref(), Some("remote/x/temp/a"));
        assert_eq!(r.to_local("remote/x/temp/b").as_deref(), Some("local/temp/b"));
        assert_eq!(r.to_remote("local/temp/a/b"), None, "not covered");
        assert_eq!(r.to_local("local/temp/a"), None);
        let whole = rule("\"\" out 0 here/now there/then");
        assert_eq!(whole.to_remote("here/now").as_deref(), Some("there/then"));
    }

    #[test]
    fn bad_lines_are_refused_with_the_reason() {
        for (line, reason) in [
            ("", "empty"),
            ("a sideways", "direction"),
            ("a out 3", "QoS"),
            ("a out 1 x/+/ y/", "wildcards"),
            ("\"\" out 1 x/", "both prefixes"),
            ("a out 1 b c d", "five words"),
            ("a/#/b", "\"a/#/b\""),
        ] {
            let e = line.parse::<TopicRule>().unwrap_err().to_string();
            assert!(e.contains(reason), "{line:?}: {e}");
        }
    }
}
