//! Character-level XML: which characters may appear at all, in names, and as white space;
//! decoding references and line ends on the way in, escaping on the way out.

use std::borrow::Cow;

use crate::error::{StreamError, malformed};

/// XML 1.0 `S`: the only white space between markup, and what keep-alives are made of.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// XML 1.0 `Char`: anything else cannot be written in a document, not even as a reference.
pub(crate) fn is_xml_char(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..='\u{10FFFF}')
}

/// XML 1.0 `NameStartChar`, checked exactly so that every name we accept is one any other
/// parser accepts when we write it back.
fn is_name_start(c: char) -> bool {
    matches!(c,
        ':' | 'A'..='Z' | '_' | 'a'..='z' | '\u{C0}'..='\u{D6}' | '\u{D8}'..='\u{F6}' | '\u{F8}'..='\u{2FF}'
        | '\u{370}'..='\u{37D}' | '\u{37F}'..='\u{1FFF}' | '\u{200C}'..='\u{200D}' | '\u{2070}'..='\u{218F}'
        | '\u{2C00}'..='\u{2FEF}' | '\u{3001}'..='\u{D7FF}' | '\u{F900}'..='\u{FDCF}' | '\u{FDF0}'..='\u{FFFD}'
        | '\u{10000}'..='\u{EFFFF}')
}

/// XML 1.0 `NameChar`.
fn is_name_char(c: char) -> bool {
    is_name_start(c) || matches!(c, '-' | '.' | '0'..='9' | '\u{B7}' | '\u{300}'..='\u{36F}' | '\u{203F}'..='\u{2040}')
}

/// Reads the XML `Name` starting at byte `*at` of `s` and moves `*at` past it; the name may be
/// followed by anything (the caller checks what comes next).
pub(crate) fn name<'a>(s: &'a str, at: &mut usize) -> Result<&'a str, StreamError> {
    let rest = s.get(*at..).ok_or_else(|| malformed("name expected"))?;
    let mut len = 0;
    for c in rest.chars() {
        if !(if len == 0 { is_name_start(c) } else { is_name_char(c) }) {
            break;
        }
        len += c.len_utf8();
    }
    if len == 0 {
        return Err(malformed("name expected"));
    }
    *at += len;
    Ok(&rest[..len])
}

/// Splits a name into prefix ("" for none) and local part, refusing what Namespaces in XML
/// §3 does not call a QName (`:a`, `a:`, `a:b:c`, `a:1`).
pub(crate) fn split_qname(name: &str) -> Result<(&str, &str), StreamError> {
    match name.split_once(':') {
        None => Ok(("", name)),
        Some((prefix, local))
            if !prefix.is_empty() && !local.contains(':') && local.chars().next().is_some_and(is_name_start) =>
        {
            Ok((prefix, local))
        }
        Some(_) => Err(StreamError::NotWellFormed(format!("{name:?} is not a qualified name"))),
    }
}

/// What a run of characters is, for [`decode`].
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// Character data: references decoded, line ends normalised (XML 1.0 §2.11).
    Text,
    /// An attribute value: also white space to spaces (XML 1.0 §3.3.3), and no `<`.
    Attribute,
    /// A CDATA section's content: line ends only.
    CData,
}

/// Decodes raw characters as they appear in a document into their value: line-end and
/// attribute-value normalisation, the five predefined entities and character references.
/// Borrows when nothing changes, the common case. Any other entity is `restricted-xml`
/// (RFC 6120 §11.1: no DTD, so nothing else could be defined); characters XML does not allow,
/// raw or referenced, are `not-well-formed`.
pub(crate) fn decode(raw: &str, context: Context) -> Result<Cow<'_, str>, StreamError> {
    let b = raw.as_bytes();
    let attr = context == Context::Attribute;
    let mut out = String::new();
    let (mut start, mut i) = (0, 0);
    while let Some(&c) = b.get(i) {
        let (replacement, len) = match c {
            b'&' if context != Context::CData => reference(&b[i..])?,
            b'\r' => (if attr { ' ' } else { '\n' }, if b.get(i + 1) == Some(&b'\n') { 2 } else { 1 }),
            b'\n' | b'\t' if attr => (' ', 1),
            b'<' if attr => return Err(malformed("'<' in an attribute value")),
            0..=0x1F if !is_space(c) => return Err(malformed("control character")),
            // U+FFFE and U+FFFF, the two non-characters of the BMP that UTF-8 can carry.
            0xEF if matches!(b.get(i + 1..i + 3), Some([0xBF, 0xBE | 0xBF])) => {
                return Err(malformed("U+FFFE or U+FFFF"));
            }
            _ => {
                i += 1;
                continue;
            }
        };
        out.push_str(&raw[start..i]);
        out.push(replacement);
        i += len;
        start = i;
    }
    if start == 0 {
        return Ok(Cow::Borrowed(raw));
    }
    out.push_str(&raw[start..]);
    Ok(Cow::Owned(out))
}

/// Decodes the reference at the start of `b` (which starts with `&`): its character and length.
fn reference(b: &[u8]) -> Result<(char, usize), StreamError> {
    if b.get(1) == Some(&b'#') {
        let (radix, start) = if b.get(2) == Some(&b'x') { (16, 3) } else { (10, 2) };
        let mut value: u32 = 0;
        let mut end = start;
        while let Some(digit) = b.get(end).and_then(|&d| char::from(d).to_digit(radix)) {
            value = value.saturating_mul(radix).saturating_add(digit);
            end += 1;
        }
        if end == start || b.get(end) != Some(&b';') {
            return Err(malformed("malformed character reference"));
        }
        let c = char::from_u32(value)
            .filter(|&c| is_xml_char(c))
            .ok_or_else(|| StreamError::NotWellFormed(format!("&#{value}; is not an XML character")))?;
        return Ok((c, end + 1));
    }
    let len = b[1..]
        .iter()
        .take_while(|&&c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b':' | 0x80..))
        .count();
    if len == 0 || b.get(1 + len) != Some(&b';') {
        return Err(malformed("'&' that does not start a reference"));
    }
    let c = match &b[1..1 + len] {
        b"lt" => '<',
        b"gt" => '>',
        b"amp" => '&',
        b"quot" => '"',
        b"apos" => '\'',
        name => {
            let name = String::from_utf8_lossy(name);
            return Err(StreamError::RestrictedXml(format!("entity reference &{name};")));
        }
    };
    Ok((c, len + 2))
}

/// Appends `s` escaped for character data (`attribute` false) or a single-quoted attribute
/// value. `>` is always escaped (no `]]>` can appear), and so are the characters [`decode`]
/// would normalise, so that a value reads back unchanged. Characters XML cannot carry at all
/// (control characters, possible only in elements built by hand) become U+FFFD: one bad value
/// must not make the whole stream unreadable for its recipient.
pub(crate) fn escape(out: &mut Vec<u8>, s: &str, attribute: bool) {
    let mut start = 0;
    for (i, c) in s.char_indices() {
        let replacement = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '\r' => "&#xD;",
            '\'' if attribute => "&apos;",
            '"' if attribute => "&quot;",
            '\n' if attribute => "&#xA;",
            '\t' if attribute => "&#x9;",
            c if !is_xml_char(c) => "\u{FFFD}",
            _ => continue,
        };
        out.extend_from_slice(&s.as_bytes()[start..i]);
        out.extend_from_slice(replacement.as_bytes());
        start = i + c.len_utf8();
    }
    out.extend_from_slice(&s.as_bytes()[start..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(raw: &str) -> Result<String, StreamError> {
        decode(raw, Context::Text).map(Cow::into_owned)
    }

    #[test]
    fn predefined_and_numeric_references() {
        assert_eq!(text("a &lt;b&gt; &amp; &quot;&apos; &#65;&#x42;&#x1F600;").unwrap(), "a <b> & \"' AB😀");
        assert!(matches!(decode("plain", Context::Text).unwrap(), Cow::Borrowed("plain")));
    }

    #[test]
    fn undefined_entities_are_restricted_and_bad_references_malformed() {
        assert_eq!(text("&foo;"), Err(StreamError::RestrictedXml("entity reference &foo;".into())));
        for bad in ["&", "& x", "&amp", "&#;", "&#x;", "&#0;", "&#xD800;", "&#x110000;", "&#99999999999;", "&#xFFFE;"] {
            assert!(matches!(text(bad), Err(StreamError::NotWellFormed(_))), "{bad:?}");
        }
    }

    #[test]
    fn raw_characters_xml_forbids() {
        for bad in ["a\u{0}b", "\u{1}", "\u{1F}", "\u{FFFE}", "\u{FFFF}"] {
            assert!(matches!(text(bad), Err(StreamError::NotWellFormed(_))), "{bad:?}");
        }
        assert_eq!(text("\u{FFFD}\u{EFFF}").unwrap(), "\u{FFFD}\u{EFFF}");
    }

    #[test]
    fn line_ends_and_attribute_white_space() {
        assert_eq!(text("a\r\nb\rc\n\td").unwrap(), "a\nb\nc\n\td");
        assert_eq!(decode("a\r\nb\rc\nd\te&#10;&#9;&#13;", Context::Attribute).unwrap(), "a b c d e\n\t\r");
        assert_eq!(decode("&amp;<\r\n", Context::CData).unwrap(), "&amp;<\n");
        assert!(decode("a<b", Context::Attribute).is_err());
    }

    #[test]
    fn escaping_reads_back() {
        let value = "<a href='x'>\"&\"</a>\r\n\t]]>\u{1}";
        let mut attr = Vec::new();
        escape(&mut attr, value, true);
        assert_eq!(
            String::from_utf8(attr.clone()).unwrap(),
            "&lt;a href=&apos;x&apos;&gt;&quot;&amp;&quot;&lt;/a&gt;&#xD;&#xA;&#x9;]]&gt;\u{FFFD}"
        );
        let back = decode(std::str::from_utf8(&attr).unwrap(), Context::Attribute).unwrap();
        assert_eq!(back, "<a href='x'>\"&\"</a>\r\n\t]]>\u{FFFD}");
        let mut text_out = Vec::new();
        escape(&mut text_out, value, false);
        assert_eq!(
            String::from_utf8(text_out).unwrap(),
            "&lt;a href='x'&gt;\"&amp;\"&lt;/a&gt;&#xD;\n\t]]&gt;\u{FFFD}"
        );
    }

    #[test]
    fn names_and_qnames() {
        let mut at = 1;
        assert_eq!(name("<stream:stream xmlns", &mut at).unwrap(), "stream:stream");
        assert_eq!(at, 14);
        for bad in ["<1a", "<-a", "< a", "<>"] {
            assert!(name(bad, &mut 1).is_err(), "{bad:?}");
        }
        assert_eq!(split_qname("a").unwrap(), ("", "a"));
        assert_eq!(split_qname("p:a").unwrap(), ("p", "a"));
        for bad in [":a", "a:", "a:b:c", "a:1", "a::b"] {
            assert!(split_qname(bad).is_err(), "{bad:?}");
        }
    }
}
