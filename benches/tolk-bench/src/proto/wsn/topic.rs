//! Canonical (MQTT-style) topics and filters as WS-Topics 1.3 expressions, and back.
//!
//! Topic levels must be XML NCNames in an expression; other characters use the `_xHHHH_`
//! escape of .NET's `XmlConvert`, the convention tolk reads (docs/translation.md). The bench
//! escapes conservatively: every character outside ASCII letters, digits, `-`, `.` and `_`
//! (and a first character that is not a letter or `_`), and every `_` followed by `x`, so the
//! run id's hex level (`0a1b2c`) arrives as `_x0030_a1b2c` and means `0a1b2c` again.

/// The Concrete dialect (WS-Topics 1.3 §7.2): one topic path, no wildcards.
pub const CONCRETE: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Concrete";

/// The Full dialect (WS-Topics 1.3 §7.3): paths with `*` and `//.`.
pub const FULL: &str = "http://docs.oasis-open.org/wsn/t-1/TopicExpression/Full";

/// One canonical level as an NCName.
fn encode_level(level: &str) -> String {
    if level.is_empty() {
        return "_x0000_".to_owned();
    }
    let mut out = String::with_capacity(level.len());
    let mut chars = level.chars().peekable();
    let mut first = true;
    while let Some(c) = chars.next() {
        let allowed = match c {
            'A'..='Z' | 'a'..='z' => true,
            '_' => chars.peek() != Some(&'x'),
            '0'..='9' | '-' | '.' => !first,
            _ => false,
        };
        match (allowed, u32::from(c)) {
            (true, _) => out.push(c),
            (false, code @ 0..=0xFFFF) => out.push_str(&format!("_x{code:04X}_")),
            (false, code) => out.push_str(&format!("_x{code:08X}_")),
        }
        first = false;
    }
    out
}

/// One NCName level back to canonical text, undoing `_xHHHH_` and `_xHHHHHHHH_`.
fn decode_level(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    'outer: while let Some(c) = rest.chars().next() {
        if let Some(hex) = rest.strip_prefix("_x") {
            for digits in [4, 8] {
                let escaped = hex.get(..digits).filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()));
                if let Some(h) = escaped
                    && hex.as_bytes().get(digits) == Some(&b'_')
                    && let Some(decoded) = u32::from_str_radix(h, 16).ok().and_then(char::from_u32)
                {
                    if decoded != '\0' {
                        out.push(decoded);
                    }
                    rest = &hex[digits + 1..];
                    continue 'outer;
                }
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// A topic as the text of a Concrete-dialect `wsnt:Topic`, without a namespace prefix.
pub fn concrete(topic: &str) -> String {
    topic.split('/').map(encode_level).collect::<Vec<_>>().join("/")
}

/// A filter as a `wsnt:TopicExpression` (dialect, text): Concrete without wildcards, else Full
/// with `+` → `*` and a final `#` → `//.`. `None` for `#` alone, which a Subscribe without
/// Filter means.
pub fn expression(filter: &str) -> Option<(&'static str, String)> {
    let (path, descendants) = match filter.strip_suffix("#") {
        Some("") => return None,
        Some(parent) => (parent.trim_end_matches('/'), true),
        None => (filter, false),
    };
    let steps: Vec<String> =
        path.split('/').map(|level| if level == "+" { "*".to_owned() } else { encode_level(level) }).collect();
    let text = steps.join("/") + if descendants { "//." } else { "" };
    let dialect = if descendants || path.split('/').any(|l| l == "+") { FULL } else { CONCRETE };
    Some((dialect, text))
}

/// The canonical topic of a `wsnt:Topic` text naming one topic (`tns:a/b` → `a/b`): the
/// namespace prefix of each step is dropped, as tolk keeps namespaces out of the topic space.
pub fn canonical(text: &str) -> String {
    text.trim()
        .split('/')
        .map(|step| decode_level(step.split_once(':').map_or(step, |(_, local)| local)))
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_that_are_not_ncnames_are_escaped_and_come_back() {
        for (level, name) in [
            ("burst", "burst"),
            ("0a1b2c", "_x0030_a1b2c"),
            ("p-1.x", "p-1.x"),
            ("room 1", "room_x0020_1"),
            ("_x0031_", "_x005F_x0031_"),
            ("a_b", "a_b"),
            ("", "_x0000_"),
            ("é", "_x00E9_"),
            ("\u{1F600}", "_x0001F600_"),
        ] {
            assert_eq!(encode_level(level), name);
            assert_eq!(canonical(&encode_level(level)), level);
        }
    }

    #[test]
    fn filters_become_concrete_or_full_expressions() {
        assert_eq!(expression("tolkbench/0ab/t"), Some((CONCRETE, "tolkbench/_x0030_ab/t".to_owned())));
        assert_eq!(expression("a/+/c"), Some((FULL, "a/*/c".to_owned())));
        assert_eq!(expression("a/#"), Some((FULL, "a//.".to_owned())));
        assert_eq!(expression("+/#"), Some((FULL, "*//.".to_owned())));
        assert_eq!(expression("#"), None);
    }

    #[test]
    fn topics_written_by_tolk_read_back() {
        assert_eq!(canonical("tns:tolkbench/_x0030_ab/burst"), "tolkbench/0ab/burst");
        assert_eq!(canonical(" a:x/a:y "), "x/y");
        assert_eq!(concrete("tolkbench/1/t"), "tolkbench/_x0031_/t");
    }
}
