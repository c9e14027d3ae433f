//! Topics as NATS subjects, and back.
//!
//! A topic's levels become a subject's tokens under a prefix: `sensors/room 1/t` at QoS 0 is
//! `tolk.0.sensors.room%201.t`. NATS gives `.`, spaces and `*`/`>` a meaning, so those, `%`
//! and control bytes are written `%XX` (hex) inside a token; an empty level is `%` alone,
//! which no escape produces. The mapping is one to one, so every subject maps back.
//!
//! Filters map level for level, `+` to `*` and `#` to `>`. `a/#` also matches `a` itself in
//! MQTT, while `a.>` does not in NATS, so it becomes two subjects, `a` and `a.>`.

use std::fmt::Write;

/// Whether a byte must be escaped inside a token.
fn escaped(b: u8) -> bool {
    matches!(b, b'.' | b' ' | b'*' | b'>' | b'%') || b < 0x20 || b == 0x7f
}

/// One topic level as a subject token.
fn token(level: &str, out: &mut String) {
    if level.is_empty() {
        out.push('%');
        return;
    }
    for c in level.chars() {
        if c.is_ascii() && escaped(c as u8) {
            let _ = write!(out, "%{:02X}", c as u8);
        } else {
            out.push(c);
        }
    }
}

/// The subject of `topic` under `prefix` (`tolk.0`, `tolk.1`, `$KV.tolk_retained`).
pub fn of_topic(prefix: &str, topic: &str) -> String {
    let mut out = String::with_capacity(prefix.len() + topic.len() + 8);
    out.push_str(prefix);
    for level in topic.split('/') {
        out.push('.');
        token(level, &mut out);
    }
    out
}

/// The topic of a subject under `prefix`; `None` when it is not one this mapping makes.
pub fn to_topic(prefix: &str, subject: &str) -> Option<String> {
    let rest = subject.strip_prefix(prefix)?.strip_prefix('.')?;
    let mut topic = String::with_capacity(rest.len());
    for (i, tok) in rest.split('.').enumerate() {
        if i > 0 {
            topic.push('/');
        }
        if tok == "%" {
            continue;
        }
        let bytes = tok.as_bytes();
        let mut at = 0;
        let mut level = Vec::with_capacity(bytes.len());
        while at < bytes.len() {
            if bytes[at] == b'%' {
                let hex = std::str::from_utf8(bytes.get(at + 1..at + 3)?).ok()?;
                let b = u8::from_str_radix(hex, 16).ok()?;
                if !escaped(b) {
                    return None;
                }
                level.push(b);
                at += 3;
            } else {
                level.push(bytes[at]);
                at += 1;
            }
        }
        topic.push_str(std::str::from_utf8(&level).ok()?);
    }
    Some(topic)
}

/// The subjects that cover `filter` under `prefix`.
pub fn of_filter(prefix: &str, filter: &str) -> Vec<String> {
    let mut out = String::with_capacity(prefix.len() + filter.len() + 8);
    out.push_str(prefix);
    let mut parent = None;
    for level in filter.split('/') {
        match level {
            "#" => {
                parent = Some(out.clone());
                out.push_str(".>");
            }
            "+" => out.push_str(".*"),
            _ => {
                out.push('.');
                token(level, &mut out);
            }
        }
    }
    match parent {
        // `#` alone: `prefix.>` covers every topic (a topic has one level at least).
        Some(parent) if parent != prefix => vec![parent, out],
        _ => vec![out],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topics_round_trip_with_the_special_bytes_escaped() {
        for (topic, subject) in [
            ("a/b", "p.a.b"),
            ("room 1/t.x", "p.room%201.t%2Ex"),
            ("/lead//trail/", "p.%.lead.%.trail.%"),
            ("100%/*/>", "p.100%25.%2A.%3E"),
            ("tab\there", "p.tab%09here"),
            ("ünï/$SYS", "p.ünï.$SYS"),
        ] {
            assert_eq!(of_topic("p", topic), subject);
            assert_eq!(to_topic("p", subject).as_deref(), Some(topic), "{subject}");
        }
    }

    #[test]
    fn foreign_subjects_do_not_map_back() {
        for subject in ["q.a", "p", "pa.b", "p.%2", "p.%41", "p.%zz", "p.a%"] {
            assert_eq!(to_topic("p", subject), None, "{subject}");
        }
    }

    #[test]
    fn filters_map_wildcards_and_keep_the_parent_of_a_multi_level_one() {
        assert_eq!(of_filter("p", "a/+/c"), ["p.a.*.c"]);
        assert_eq!(of_filter("p", "a/#"), ["p.a", "p.a.>"]);
        assert_eq!(of_filter("p", "#"), ["p.>"]);
        assert_eq!(of_filter("p", "+/x y/#"), ["p.*.x%20y", "p.*.x%20y.>"]);
    }
}
