//! Reading finished tag tokens (as [`crate::scan`] delimits them) into names and decoded
//! attribute values, and checking the XML declaration. Namespaces are [`crate::tree`]'s job.

use std::borrow::Cow;

use crate::chars::{Context, decode, is_space, name};
use crate::error::{StreamError, malformed};

/// An attribute as written: its name (prefix included) and decoded value.
pub(crate) type Attribute<'a> = (&'a str, Cow<'a, str>);

/// A start tag's pieces, borrowing from the token.
pub(crate) struct StartTag<'a> {
    /// The element name as written, prefix included.
    pub(crate) name: &'a str,
    /// Every attribute, namespace declarations included, in document order.
    pub(crate) attrs: Vec<Attribute<'a>>,
    /// `<name …/>`: the element is also closed.
    pub(crate) empty: bool,
}

/// Reads `<name attr='value' …>` or `<name …/>`. More than `max_attrs` attributes is a policy
/// violation, found before the rest is decoded.
pub(crate) fn start_tag(tok: &str, max_attrs: usize) -> Result<StartTag<'_>, StreamError> {
    let body = tok.strip_prefix('<').and_then(|t| t.strip_suffix('>')).ok_or_else(|| malformed("bad start tag"))?;
    // The scanner ends a tag at its first `>` outside quotes, so a `/` before it is markup.
    let (body, empty) = match body.strip_suffix('/') {
        Some(body) => (body, true),
        None => (body, false),
    };
    let mut at = 0;
    let name = name(body, &mut at)?;
    let attrs = attributes(body, at, max_attrs)?;
    Ok(StartTag { name, attrs, empty })
}

/// Reads `</name>` (white space allowed before the `>`) into the name.
pub(crate) fn end_tag(tok: &str) -> Result<&str, StreamError> {
    let body = tok.strip_prefix("</").and_then(|t| t.strip_suffix('>')).ok_or_else(|| malformed("bad end tag"))?;
    let mut at = 0;
    let name = name(body, &mut at)?;
    if !body.as_bytes()[at..].iter().all(|&c| is_space(c)) {
        return Err(malformed("junk in an end tag"));
    }
    Ok(name)
}

/// Checks `<?xml version='1.x' [encoding='UTF-8'] [standalone='yes|no']?>`: anything but
/// UTF-8 is refused (RFC 6120 §11.6), since the reader never transcodes.
pub(crate) fn declaration(tok: &str) -> Result<(), StreamError> {
    let body =
        tok.strip_prefix("<?xml").and_then(|t| t.strip_suffix("?>")).ok_or_else(|| malformed("bad XML declaration"))?;
    let attrs = attributes(body, 0, 3)
        .map_err(|e| if let StreamError::PolicyViolation(_) = e { malformed("bad XML declaration") } else { e })?;
    let mut attrs = attrs.iter().peekable();
    match attrs.next() {
        Some(("version", v)) if v.starts_with("1.") && v.len() > 2 && v[2..].bytes().all(|c| c.is_ascii_digit()) => {}
        _ => return Err(malformed("XML declaration without version 1.x")),
    }
    if let Some((_, encoding)) = attrs.next_if(|(n, _)| *n == "encoding")
        && !encoding.eq_ignore_ascii_case("UTF-8")
    {
        return Err(StreamError::UnsupportedEncoding(format!(
            "encoding {encoding:?} declared, only UTF-8 is accepted"
        )));
    }
    attrs.next_if(|(n, v)| *n == "standalone" && (v == "yes" || v == "no"));
    match attrs.next() {
        None => Ok(()),
        Some(_) => Err(malformed("bad XML declaration")),
    }
}

/// Reads `(S name S? = S? quoted-value)* S?` from `s[at..]`.
fn attributes(s: &str, mut at: usize, max: usize) -> Result<Vec<Attribute<'_>>, StreamError> {
    let b = s.as_bytes();
    let skip_space = |at: &mut usize| {
        while b.get(*at).is_some_and(|&c| is_space(c)) {
            *at += 1;
        }
    };
    let mut attrs = Vec::new();
    loop {
        let before = at;
        skip_space(&mut at);
        if at >= b.len() {
            return Ok(attrs);
        }
        if at == before {
            return Err(malformed("white space expected before an attribute"));
        }
        if attrs.len() == max {
            return Err(StreamError::PolicyViolation(format!("more than {max} attributes on an element")));
        }
        let name = name(s, &mut at)?;
        skip_space(&mut at);
        if b.get(at) != Some(&b'=') {
            return Err(malformed("'=' expected after an attribute name"));
        }
        at += 1;
        skip_space(&mut at);
        let quote = match b.get(at) {
            Some(&q @ (b'\'' | b'"')) => q,
            _ => return Err(malformed("quoted attribute value expected")),
        };
        at += 1;
        let len = b[at..].iter().position(|&c| c == quote).ok_or_else(|| malformed("unterminated attribute value"))?;
        let value = decode(&s[at..at + len], Context::Attribute)?;
        at += len + 1;
        attrs.push((name, value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_tags() {
        let tag = start_tag("<iq type='set'\n id=\"a&amp;b\" xml:lang = 'en'>", 8).unwrap();
        assert_eq!(tag.name, "iq");
        assert!(!tag.empty);
        let attrs: Vec<(&str, &str)> = tag.attrs.iter().map(|(n, v)| (*n, v.as_ref())).collect();
        assert_eq!(attrs, [("type", "set"), ("id", "a&b"), ("xml:lang", "en")]);
        let tag = start_tag("<a b='/'/>", 8).unwrap();
        assert!(tag.empty);
        assert_eq!(tag.attrs[0].1, "/");
        assert!(start_tag("<a/>", 0).unwrap().empty);
    }

    #[test]
    fn malformed_start_tags() {
        for bad in
            ["<a b>", "<a b=c>", "<a b='c'd='e'>", "<a b='c>", "<a/ >", "< a>", "<a =''>", "<a b='<'>", "<a\u{1}>"]
        {
            assert!(matches!(start_tag(bad, 8), Err(StreamError::NotWellFormed(_))), "{bad:?}");
        }
        assert!(matches!(start_tag("<a b='' c='' d=''>", 2), Err(StreamError::PolicyViolation(_))));
    }

    #[test]
    fn end_tags() {
        assert_eq!(end_tag("</stream:stream>").unwrap(), "stream:stream");
        assert_eq!(end_tag("</a \n>").unwrap(), "a");
        for bad in ["</>", "</a b>", "</ a>", "</a/>"] {
            assert!(end_tag(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn declarations() {
        for good in [
            "<?xml version='1.0'?>",
            "<?xml version=\"1.0\" encoding=\"utf-8\" standalone='yes' ?>",
            "<?xml version='1.1' encoding='UTF-8'?>",
        ] {
            assert_eq!(declaration(good), Ok(()), "{good}");
        }
        assert_eq!(
            declaration("<?xml version='1.0' encoding='UTF-16'?>"),
            Err(StreamError::UnsupportedEncoding("encoding \"UTF-16\" declared, only UTF-8 is accepted".into()))
        );
        for bad in [
            "<?xml ?>",
            "<?xml encoding='UTF-8'?>",
            "<?xml version='2.0'?>",
            "<?xml version='1.0' standalone='maybe'?>",
            "<?xml version='1.0' foo='bar'?>",
            "<?xml version='1.0' standalone='yes' encoding='UTF-8'?>",
        ] {
            assert!(matches!(declaration(bad), Err(StreamError::NotWellFormed(_))), "{bad}");
        }
    }
}
