//! Header text escaping (spec "Value Encoding"): `\r`, `\n`, `\c` and `\\` stand for carriage
//! return, line feed, colon and backslash. Owns checking, decoding and encoding of escapes;
//! deciding *whether* a frame is escaped belongs to the decoder and encoder.

use bytes::{BufMut, BytesMut};

/// Which escape set applies when writing header text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Escaping {
    /// STOMP 1.0 and the CONNECT/CONNECTED frames: text is written verbatim.
    Verbatim,
    /// STOMP 1.1: `\n`, `\c`, `\\` (1.1 has no `\r` escape).
    V1_1,
    /// STOMP 1.2: `\r`, `\n`, `\c`, `\\`.
    V1_2,
}

/// An escape sequence the spec does not define ("MUST be treated as a fatal protocol error").
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct BadEscape {
    /// Offset of the backslash within the checked text.
    pub offset: usize,
    /// The byte after the backslash, `None` when the text ends with a lone backslash.
    pub found: Option<u8>,
}

/// Checks every escape in `raw`; `Ok(true)` when there is at least one, so the caller knows
/// whether decoding would change anything. `\r` is accepted for 1.1 peers too: it cannot be
/// mistaken for anything else and rejecting it would only punish clients that escape eagerly.
pub(crate) fn check(raw: &[u8]) -> Result<bool, BadEscape> {
    let mut escaped = false;
    let mut iter = raw.iter().enumerate();
    while let Some((offset, &byte)) = iter.next() {
        if byte != b'\\' {
            continue;
        }
        match iter.next() {
            Some((_, b'r' | b'n' | b'c' | b'\\')) => escaped = true,
            Some((_, &other)) => {
                return Err(BadEscape { offset, found: Some(other) });
            }
            None => {
                return Err(BadEscape { offset, found: None });
            }
        }
    }
    Ok(escaped)
}

/// Decodes escapes in text that [`check`] accepted. An unexpected sequence (impossible after
/// `check`) is kept as written rather than panicking.
pub(crate) fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('r') => out.push('\r'),
            Some('n') => out.push('\n'),
            Some('c') => out.push(':'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The escape for `byte` under `escaping`, or `None` when it is written as is.
fn escape_of(byte: u8, escaping: Escaping) -> Option<&'static [u8]> {
    match (escaping, byte) {
        (Escaping::Verbatim, _) => None,
        (Escaping::V1_2, b'\r') => Some(b"\\r"),
        (_, b'\n') => Some(b"\\n"),
        (_, b':') => Some(b"\\c"),
        (_, b'\\') => Some(b"\\\\"),
        _ => None,
    }
}

/// Writes `text` with `escaping` applied. The caller has already rejected the bytes that this
/// escaping cannot carry (see [`unrepresentable`]).
pub(crate) fn write_escaped(text: &str, escaping: Escaping, dst: &mut BytesMut) {
    let bytes = text.as_bytes();
    if escaping == Escaping::Verbatim || !bytes.iter().any(|&b| escape_of(b, escaping).is_some()) {
        dst.put_slice(bytes);
        return;
    }
    for &byte in bytes {
        match escape_of(byte, escaping) {
            Some(escape) => dst.put_slice(escape),
            None => dst.put_u8(byte),
        }
    }
}

/// The first character of `text` that cannot be written under `escaping` without corrupting
/// the frame: NUL always (no escape exists and it ends frames for many peers), CR and LF when
/// they are not escaped, and `:` in a name when it is not escaped.
pub(crate) fn unrepresentable(text: &str, escaping: Escaping, is_name: bool) -> Option<char> {
    text.chars().find(|&c| match c {
        '\0' => true,
        '\n' => escaping == Escaping::Verbatim,
        '\r' => escaping != Escaping::V1_2,
        ':' => is_name && escaping == Escaping::Verbatim,
        _ => false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_accepts_defined_escapes() {
        assert_eq!(check(br"plain"), Ok(false));
        assert_eq!(check(br"a\r\n\c\\b"), Ok(true));
    }

    #[test]
    fn check_rejects_undefined_and_trailing_escapes() {
        // Spec "Value Encoding": "Undefined escape sequences such as \t MUST be treated as a
        // fatal protocol error."
        assert_eq!(check(br"ab\t"), Err(BadEscape { offset: 2, found: Some(b't') }));
        assert_eq!(check(br"ab\"), Err(BadEscape { offset: 2, found: None }));
    }

    #[test]
    fn unescape_decodes_every_sequence() {
        assert_eq!(unescape(r"a\r\n\c\\b"), "a\r\n:\\b");
    }

    #[test]
    fn escape_round_trips() {
        let mut out = BytesMut::new();
        write_escaped("a\r\n:\\b", Escaping::V1_2, &mut out);
        assert_eq!(&out[..], br"a\r\n\c\\b");
        let text = std::str::from_utf8(&out).unwrap();
        assert_eq!(unescape(text), "a\r\n:\\b");
    }

    #[test]
    fn v1_1_has_no_cr_escape() {
        assert_eq!(unrepresentable("a\rb", Escaping::V1_1, false), Some('\r'));
        assert_eq!(unrepresentable("a\nb", Escaping::V1_1, false), None);
        assert_eq!(unrepresentable("a:b", Escaping::Verbatim, false), None);
        assert_eq!(unrepresentable("a:b", Escaping::Verbatim, true), Some(':'));
        assert_eq!(unrepresentable("a\0", Escaping::V1_2, false), Some('\0'));
    }
}
