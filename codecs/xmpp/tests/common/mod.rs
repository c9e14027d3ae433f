//! Helpers shared by the integration tests: a client's stream header, and feeding a reader
//! whole, byte by byte or in arbitrary pieces.
#![allow(dead_code)]

use bytes::BytesMut;
use xmpp_codec::{Element, Event, Limits, StreamError, StreamReader};

/// A stream header as slixmpp sends it.
pub const HEADER: &str = "<?xml version='1.0'?><stream:stream to='example.org' xmlns='jabber:client' \
                          xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>";

/// Everything a reader made of some input.
#[derive(Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The events, in order.
    pub events: Vec<Event>,
    /// The error that stopped reading, if one did.
    pub error: Option<StreamError>,
    /// What was left in the buffer at the end.
    pub left: Vec<u8>,
}

/// Feeds `wire` cut at `cuts` (positions, in any order; out-of-range ones ignored), reading
/// events after each piece until the reader wants more. After a `<starttls/>` element the
/// reader is reset, as a server does once TLS is up.
pub fn feed(limits: Limits, wire: &[u8], cuts: &[usize]) -> Outcome {
    let mut cuts: Vec<usize> = cuts.iter().copied().filter(|&c| c > 0 && c < wire.len()).collect();
    cuts.sort_unstable();
    cuts.dedup();
    cuts.push(wire.len());
    let mut reader = StreamReader::new(limits);
    let mut buf = BytesMut::new();
    let mut events = Vec::new();
    let mut at = 0;
    for cut in cuts {
        buf.extend_from_slice(&wire[at..cut]);
        at = cut;
        loop {
            match reader.next(&mut buf) {
                Ok(Some(event)) => {
                    if matches!(&event, Event::Element(e) if e.name == "starttls") {
                        reader.reset();
                    }
                    events.push(event);
                }
                Ok(None) => break,
                Err(e) => return Outcome { events, error: Some(e), left: buf.to_vec() },
            }
        }
    }
    Outcome { events, error: None, left: buf.to_vec() }
}

/// Feeds `wire` in one piece.
pub fn whole(wire: &[u8]) -> Outcome {
    feed(Limits::default(), wire, &[])
}

/// Feeds `wire` one byte at a time.
pub fn bytewise(wire: &[u8]) -> Outcome {
    feed(Limits::default(), wire, &(1..wire.len()).collect::<Vec<_>>())
}

/// The error `HEADER` + `body` ends in, checked to be the same whole and byte by byte.
pub fn error_after_header(body: &str) -> StreamError {
    let wire = format!("{HEADER}{body}");
    let outcome = whole(wire.as_bytes());
    assert_eq!(outcome.error, bytewise(wire.as_bytes()).error, "whole and bytewise differ for {body:?}");
    outcome.error.unwrap_or_else(|| panic!("no error for {body:?}: {:?}", outcome.events))
}

/// The one element `HEADER` + `body` gives, which must read without error.
pub fn element_after_header(body: &str) -> Element {
    let outcome = whole(format!("{HEADER}{body}").as_bytes());
    assert_eq!(outcome.error, None);
    match &outcome.events[..] {
        [Event::StreamOpen(_), Event::Element(e)] => e.clone(),
        other => panic!("expected the header and one element, got {other:?}"),
    }
}
