//! [`Scanner`]: finds where the markup token at the front of a buffer ends, resuming where the
//! previous call stopped, so that a client sending one byte at a time costs linear time.
//!
//! A token is a start tag, an end tag, a run of character data, a CDATA section or the XML
//! declaration. The scanner only finds boundaries (and refuses what RFC 6120 §11.1 forbids as
//! soon as it can tell); [`crate::tag`] and [`crate::tree`] read the finished token.

use crate::chars::is_space;
use crate::error::StreamError;

/// What kind of token the scanner found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// Character data up to (not including) the next `<`.
    Text,
    /// `<name …>` or `<name …/>`.
    Start,
    /// `</name>`.
    End,
    /// `<![CDATA[…]]>`.
    CData,
    /// `<?xml …?>`.
    Decl,
}

const CDATA_OPEN: &[u8] = b"<![CDATA[";
const DECL_OPEN: &[u8] = b"<?xml";

/// The resumable state of one token search.
#[derive(Debug, Default)]
pub(crate) struct Scanner {
    /// The kind of the token being scanned, once its first bytes have told.
    kind: Option<Kind>,
    /// Where the terminator search resumes.
    pos: usize,
    /// The open quote inside a start tag (`'` or `"`), 0 outside one.
    quote: u8,
}

impl Scanner {
    /// Whether no token is half-scanned.
    pub(crate) fn is_idle(&self) -> bool {
        self.kind.is_none()
    }

    /// Finds the token at the front of `buf`: its kind and length, or `None` when `buf` holds
    /// only part of it. The token may be at most `budget` bytes: a longer one is a policy
    /// violation as soon as more than `budget` bytes of it are buffered (the first few bytes
    /// that say what the token is are always looked at first, so the outcome does not depend
    /// on how the input was split). `buf` must only have grown since the previous call.
    pub(crate) fn scan(&mut self, buf: &[u8], budget: usize) -> Result<Option<(Kind, usize)>, StreamError> {
        if self.pos > buf.len() {
            // The caller broke the contract (the front changed); start over rather than panic.
            *self = Scanner::default();
        }
        let kind = match self.kind {
            Some(kind) => kind,
            None => match classify(buf)? {
                Some((kind, pos)) => {
                    (self.kind, self.pos) = (Some(kind), pos);
                    kind
                }
                None => return Ok(None),
            },
        };
        // Character data ends before its terminator, so its window has room for one more byte.
        let limit = if kind == Kind::Text { budget.saturating_add(1) } else { budget };
        let window = &buf[..buf.len().min(limit)];
        let from = self.pos.min(window.len());
        let end = match kind {
            Kind::Text => find(window, from, b"<").map(|at| at - 1),
            Kind::End => find(window, from, b">"),
            Kind::CData => find(window, from, b"]]>"),
            Kind::Decl => find(window, from, b"?>"),
            Kind::Start => self.tag_end(window, from),
        };
        if let Some(len) = end {
            *self = Scanner::default();
            return Ok(Some((kind, len)));
        }
        if buf.len() > budget {
            return Err(StreamError::PolicyViolation(format!("element larger than {budget} bytes")));
        }
        // Resume far enough back to see a terminator split across two reads.
        self.pos = match kind {
            Kind::CData => window.len().saturating_sub(2),
            Kind::Decl => window.len().saturating_sub(1),
            _ => window.len(),
        }
        .max(from);
        Ok(None)
    }

    /// The length of a start tag: up to the first `>` outside a quoted attribute value.
    fn tag_end(&mut self, window: &[u8], from: usize) -> Option<usize> {
        for (i, &c) in window.iter().enumerate().skip(from) {
            if self.quote != 0 {
                if c == self.quote {
                    self.quote = 0;
                }
            } else if c == b'\'' || c == b'"' {
                self.quote = c;
            } else if c == b'>' {
                return Some(i + 1);
            }
        }
        None
    }
}

/// The length up to and including the first `needle` at or after `from`.
fn find(window: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    window.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|at| from + at + needle.len())
}

/// Says what token starts `buf` and where its terminator search starts, from at most nine
/// bytes; `None` when those bytes have not all arrived. Comments, DOCTYPEs, other `<!`
/// declarations and processing instructions are refused here, before anything is buffered.
fn classify(buf: &[u8]) -> Result<Option<(Kind, usize)>, StreamError> {
    let prefix_of = |pattern: &[u8]| {
        let n = buf.len().min(pattern.len());
        buf[..n] == pattern[..n]
    };
    Ok(Some(match buf {
        [] | [b'<'] => return Ok(None),
        [b'<', b'/', ..] => (Kind::End, 2),
        [b'<', b'!', ..] if prefix_of(CDATA_OPEN) => {
            if buf.len() < CDATA_OPEN.len() {
                return Ok(None);
            }
            (Kind::CData, CDATA_OPEN.len())
        }
        [b'<', b'!', ..] => {
            return Err(StreamError::RestrictedXml("comments, DTDs and markup declarations are not allowed".into()));
        }
        [b'<', b'?', ..] if prefix_of(DECL_OPEN) => match buf.get(DECL_OPEN.len()) {
            None => return Ok(None),
            Some(&c) if is_space(c) => (Kind::Decl, DECL_OPEN.len()),
            Some(_) => return Err(pi()),
        },
        [b'<', b'?', ..] => return Err(pi()),
        [b'<', ..] => (Kind::Start, 1),
        _ => (Kind::Text, 1),
    }))
}

fn pi() -> StreamError {
    StreamError::RestrictedXml("processing instructions are not allowed".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scans `input` fed one byte at a time; the token found and how many calls said "more".
    fn bytewise(input: &[u8], budget: usize) -> Result<Option<(Kind, usize)>, StreamError> {
        let mut scanner = Scanner::default();
        for n in 1..=input.len() {
            if let Some(found) = scanner.scan(&input[..n], budget)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }

    #[test]
    fn token_boundaries_whole_and_bytewise() {
        let cases: &[(&[u8], Kind, usize)] = &[
            (b"<a b='>' c=\"'>\">rest", Kind::Start, 16),
            (b"<a/>x", Kind::Start, 4),
            (b"</a >x", Kind::End, 5),
            (b"text<", Kind::Text, 4),
            (b"<![CDATA[a]b]]c]]]>x", Kind::CData, 19),
            (b"<?xml version='1.0'?>x", Kind::Decl, 21),
        ];
        for &(input, kind, len) in cases {
            assert_eq!(Scanner::default().scan(input, 100), Ok(Some((kind, len))), "{input:?}");
            assert_eq!(bytewise(input, 100), Ok(Some((kind, len))), "{input:?} bytewise");
        }
    }

    #[test]
    fn incomplete_tokens_wait() {
        for input in [&b"<"[..], b"<a b='>", b"text", b"<![CDA", b"<![CDATA[x]]", b"<?xml", b"<?xml v?", b"</a"] {
            assert_eq!(Scanner::default().scan(input, 100), Ok(None), "{input:?}");
        }
    }

    #[test]
    fn restricted_markup_is_refused_at_once() {
        for input in [&b"<!-"[..], b"<!DOCTYPE", b"<![INCLUDE[", b"<?php", b"<?xml-stylesheet", b"<?xml?>"] {
            assert!(matches!(Scanner::default().scan(input, 100), Err(StreamError::RestrictedXml(_))), "{input:?}");
        }
    }

    #[test]
    fn budget_is_enforced_on_partial_tokens() {
        assert_eq!(Scanner::default().scan(b"<a>", 3), Ok(Some((Kind::Start, 3))));
        assert_eq!(Scanner::default().scan(b"abc<", 3), Ok(Some((Kind::Text, 3))));
        assert_eq!(bytewise(b"abc<", 3), Ok(Some((Kind::Text, 3))));
        assert!(matches!(Scanner::default().scan(b"abcd<", 3), Err(StreamError::PolicyViolation(_))));
        assert_eq!(Scanner::default().scan(b"<a ", 3), Ok(None));
        assert!(matches!(Scanner::default().scan(b"<a  ", 3), Err(StreamError::PolicyViolation(_))));
        assert!(matches!(bytewise(b"<a b='c'>", 8), Err(StreamError::PolicyViolation(_))));
        // The kind is decided before the budget: same error whole or split.
        assert!(matches!(bytewise(b"<!--", 1), Err(StreamError::RestrictedXml(_))));
    }
}
