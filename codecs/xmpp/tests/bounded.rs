//! Hostile input costs bounded memory and linear time: entity expansion is refused before
//! anything is expanded, deep nesting is refused at the limit without using the call stack,
//! and a client sending one byte at a time costs no more than one sending everything at once.
//!
//! Allocations are counted per thread by a wrapping global allocator, so the tests running in
//! parallel do not disturb each other's counts.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use common::{HEADER, bytewise, whole};
use xmpp_codec::{Event, Limits, StreamError, StreamReader, parse_document};

struct Counting;

thread_local! {
    static ALLOCATED: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + layout.size()));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = ALLOCATED.try_with(|a| a.set(a.get() + new_size));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f` and returns its result with the bytes this thread allocated meanwhile.
fn allocated_by<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let before = ALLOCATED.with(Cell::get);
    let result = f();
    (result, ALLOCATED.with(Cell::get) - before)
}

const LOLZ: &str = r#"<?xml version="1.0"?>
<!DOCTYPE lolz [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
<lolz>&lol9;</lolz>"#;

#[test]
fn billion_laughs_is_refused_without_expanding() {
    let restricted = |e: &StreamError| matches!(e, StreamError::RestrictedXml(_));

    let (result, bytes) = allocated_by(|| parse_document(LOLZ.as_bytes(), &Limits::default()));
    assert!(result.as_ref().is_err_and(restricted), "{result:?}");
    assert!(bytes < 1024, "parse_document allocated {bytes} bytes");

    // As a stream: the DTD before the header, or the entities used in a stanza.
    let (outcome, bytes) = allocated_by(|| whole(LOLZ.as_bytes()));
    assert!(outcome.error.as_ref().is_some_and(restricted), "{outcome:?}");
    assert!(bytes < 4096, "the reader allocated {bytes} bytes");
    let in_stanza = format!("{HEADER}<message><body>&lol9;</body></message>");
    let (outcome, bytes) = allocated_by(|| bytewise(in_stanza.as_bytes()));
    assert_eq!(outcome.error, Some(StreamError::RestrictedXml("entity reference &lol9;".into())));
    assert!(bytes < 16 * 1024, "the reader allocated {bytes} bytes");
}

#[test]
fn a_megabyte_of_nesting_is_refused_at_the_depth_limit() {
    // A megabyte of `<a>`, as a client would send it in 30-byte reads. The error comes as soon
    // as the seventeenth level arrives, in the second read; a server closes there.
    let megabyte = "<a>".repeat(350_000);
    let ((error, reads), bytes) = allocated_by(|| {
        let mut reader = StreamReader::new(Limits::default());
        let mut buf = BytesMut::from(HEADER.as_bytes());
        assert!(matches!(reader.next(&mut buf), Ok(Some(Event::StreamOpen(_)))));
        let mut outcome = None;
        for (i, read) in megabyte.as_bytes().chunks(30).enumerate() {
            buf.extend_from_slice(read);
            match reader.next(&mut buf) {
                Ok(None) => {}
                Ok(Some(event)) => panic!("unexpected {event:?}"),
                Err(e) => {
                    outcome = Some((e, i + 1));
                    break;
                }
            }
        }
        outcome.expect("a megabyte of nesting was accepted")
    });
    assert_eq!(reads, 2);
    assert_eq!(error, StreamError::PolicyViolation("elements nested deeper than 16".into()));
    assert!(bytes < 32 * 1024, "allocated {bytes} bytes");

    // Whole, as a document: the same, and no stack overflow.
    let doc = "<a>".repeat(350_000);
    let (result, bytes) =
        allocated_by(|| parse_document(doc.as_bytes(), &Limits { max_stanza_bytes: 2 << 20, ..Limits::default() }));
    assert_eq!(result, Err(StreamError::PolicyViolation("elements nested deeper than 16".into())));
    assert!(bytes < 32 * 1024, "allocated {bytes} bytes");

    // With the depth limit lifted, the explicit stacks still cope (and the size limit ends it).
    let limits =
        Limits { max_depth: usize::MAX, max_nodes: usize::MAX, max_stanza_bytes: 1 << 20, ..Limits::default() };
    let deep = format!("<a>{}", "<b>".repeat(300_000));
    assert_eq!(
        parse_document(deep.as_bytes(), &limits).map(|_| ()),
        Err(StreamError::NotWellFormed("the document ends inside markup".into()))
    );
}

#[test]
fn byte_at_a_time_costs_linear_time() {
    // One text run, one start tag and many small elements, each about 60 KB.
    let text = format!("<message><body>{}</body></message>", "a".repeat(60_000));
    let tag = format!("<message id='{}'/>", "b".repeat(60_000));
    let many = format!("<message>{}</message>", "<b>c</b>".repeat(1300));
    for stanza in [text, tag, many] {
        let wire = format!("{HEADER}{stanza}");
        let start = Instant::now();
        let outcome = bytewise(wire.as_bytes());
        let elapsed = start.elapsed();
        assert_eq!(outcome.error, None);
        assert_eq!(outcome.events.len(), 2);
        // Quadratic rescanning would take minutes here; linear takes milliseconds.
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?} for {} bytes", wire.len());
        assert_eq!(outcome, whole(wire.as_bytes()));
    }
}

#[test]
fn a_long_namespace_name_is_not_multiplied_by_the_node_count() {
    let uri = "u".repeat(30_000);
    // Declared once, inherited by 8000 elements: 240 MB of copies if nothing stopped it.
    let stanza = format!("{HEADER}<r xmlns='urn:{uri}'>{}</r>", "<a/>".repeat(8000));
    let limits = Limits { max_nodes: usize::MAX, ..Limits::default() };
    let (outcome, bytes) = allocated_by(|| common::feed(limits, stanza.as_bytes(), &[]));
    assert_eq!(
        outcome.error,
        Some(StreamError::PolicyViolation("namespace names repeated in too many elements".into()))
    );
    assert!(bytes < 2 << 20, "allocated {bytes} bytes");
    // The same through a prefix the stream header declares and attributes use.
    let header = format!(
        "<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams' xmlns:p='{uri}'>"
    );
    let wire = format!("{header}<m>{}</m>", "<a p:x=''/>".repeat(5000));
    let (outcome, bytes) = allocated_by(|| common::feed(limits, wire.as_bytes(), &[]));
    assert_eq!(outcome.error.map(|e| e.condition()), Some("policy-violation"));
    assert!(bytes < 2 << 20, "allocated {bytes} bytes");
    // Real stanzas are far from the budget.
    let atom = format!("{HEADER}<r xmlns='http://www.w3.org/2005/Atom'>{}</r>", "<a/>".repeat(4000));
    assert_eq!(whole(atom.as_bytes()).error, None);
}
