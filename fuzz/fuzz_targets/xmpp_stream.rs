//! `xmpp_codec::StreamReader` (what the XMPP front end runs on a client's bytes) and
//! `parse_document` (what it runs on published payloads) on arbitrary bytes.
//!
//! Input: one mode byte, one split byte (see `tolk_fuzz::chunks`), then the stream. Mode bit 0
//! picks small limits, bit 1 resets the reader after each `<starttls/>` as a server does once
//! TLS is up (the next bytes then start a new stream header).
//!
//! Checked: no panic; the stream fed in the chosen chunks gives the same events and the same
//! outcome (the same error, or needing more) as fed whole; every element read, from the stream
//! or as a document, written standalone (`to_bytes`) parses back with `parse_document` to
//! itself, and written into a stream (`write_to`) reads back to itself.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use xmpp_codec::{CLIENT_NS, Element, Event, Limits, StreamError, StreamReader, parse_document};

/// A client stream header, for reading back what `write_to` wrote.
const HEADER: &[u8] =
    b"<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' version='1.0'>";

/// Feeds `wire` in `chunks`; stops at the first error.
fn read_all(
    limits: Limits,
    reset_after_starttls: bool,
    wire: &[u8],
    chunks: &[usize],
) -> (Vec<Event>, Option<StreamError>) {
    let mut reader = StreamReader::new(limits);
    let mut seen = 0;
    tolk_fuzz::feed(wire, chunks, |buf, so_far: &[Event]| {
        // Reset once after each new <starttls/>, before reading on.
        if so_far.len() > seen {
            seen = so_far.len();
            if reset_after_starttls && matches!(so_far.last(), Some(Event::Element(e)) if e.name == "starttls") {
                reader.reset();
            }
        }
        reader.next(buf)
    })
}

/// The round trips every element read must survive. Written forms may be longer than what
/// was read (escapes, declarations), so the size limit is lifted; the others stay.
fn round_trip(element: &Element, limits: Limits) {
    let limits = Limits { max_stanza_bytes: usize::MAX, ..limits };
    let bytes = element.to_bytes();
    match parse_document(&bytes, &limits) {
        Ok(back) => assert_eq!(&back, element, "written standalone as {}", String::from_utf8_lossy(&bytes)),
        Err(e) => panic!("an element's own bytes do not parse: {e}\n{}", String::from_utf8_lossy(&bytes)),
    }

    let mut wire = HEADER.to_vec();
    element.write_to(&mut wire, CLIENT_NS);
    let mut reader = StreamReader::new(limits);
    let mut buf = BytesMut::from(&wire[..]);
    let open = reader.next(&mut buf);
    assert!(matches!(open, Ok(Some(Event::StreamOpen(_)))), "{open:?}");
    match reader.next(&mut buf) {
        Ok(Some(Event::Element(back))) => {
            assert_eq!(&back, element, "written into a stream as {}", String::from_utf8_lossy(&wire))
        }
        other => panic!("an element written into a stream reads back as {other:?}\n{}", String::from_utf8_lossy(&wire)),
    }
    assert!(buf.is_empty(), "{} bytes left after the element", buf.len());
}

fuzz_target!(|data: &[u8]| {
    let [mode, split, wire @ ..] = data else { return };
    let limits = if mode & 1 != 0 {
        Limits { max_stanza_bytes: 256, max_depth: 4, max_attributes: 3, max_nodes: 12 }
    } else {
        Limits::default()
    };
    let reset = mode & 2 != 0;

    let (whole, whole_error) = read_all(limits, reset, wire, &[wire.len()]);
    let (split_events, split_error) = read_all(limits, reset, wire, &tolk_fuzz::chunks(*split, wire.len()));
    assert_eq!(whole, split_events, "events differ between whole and split input");
    assert_eq!(whole_error, split_error, "whole and split input end differently");

    for event in &whole {
        if let Event::Element(element) = event {
            round_trip(element, limits);
        }
    }
    if let Ok(element) = parse_document(wire, &limits) {
        round_trip(&element, limits);
    }
});
