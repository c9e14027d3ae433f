//! A realistic client session (slixmpp's first steps: STARTTLS, SASL PLAIN, a pubsub publish)
//! read whole, byte by byte and in arbitrary pieces: the events must be identical.

mod common;

use common::{HEADER, bytewise, feed, whole};
use proptest::prelude::*;
use xmpp_codec::{CLIENT_NS, Element, Event, Limits, Node, StreamHeader};

const ATOM: &str = "http://www.w3.org/2005/Atom";
const PUBSUB: &str = "http://jabber.org/protocol/pubsub";

fn session() -> String {
    [
        HEADER,
        "<starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'/>",
        HEADER,
        "<auth xmlns='urn:ietf:params:xml:ns:xmpp-sasl' mechanism='PLAIN'>AGp1bGlldABwYXNz</auth>",
        "<iq type='set' id='x'><pubsub xmlns='http://jabber.org/protocol/pubsub'><publish node='a/b'>\
         <item id='1'><entry xmlns='http://www.w3.org/2005/Atom'><title>hi &amp; bye</title></entry></item>\
         </publish></pubsub></iq>",
        " \n",
        "</stream:stream>",
    ]
    .concat()
}

fn expected() -> Vec<Event> {
    let header =
        StreamHeader { to: Some("example.org".into()), from: None, version: Some("1.0".into()), lang: None, id: None };
    let entry = Element::new("entry", ATOM).with_child(Element::new("title", ATOM).with_text("hi & bye"));
    let iq = Element::new("iq", CLIENT_NS).with_attr("type", "set").with_attr("id", "x").with_child(
        Element::new("pubsub", PUBSUB).with_child(
            Element::new("publish", PUBSUB)
                .with_attr("node", "a/b")
                .with_child(Element::new("item", PUBSUB).with_attr("id", "1").with_child(entry)),
        ),
    );
    vec![
        Event::StreamOpen(header.clone()),
        Event::Element(Element::new("starttls", "urn:ietf:params:xml:ns:xmpp-tls")),
        Event::StreamOpen(header),
        Event::Element(
            Element::new("auth", "urn:ietf:params:xml:ns:xmpp-sasl")
                .with_attr("mechanism", "PLAIN")
                .with_text("AGp1bGlldABwYXNz"),
        ),
        Event::Element(iq),
        Event::StreamClose,
    ]
}

#[test]
fn whole_session() {
    let outcome = whole(session().as_bytes());
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.events, expected());
    assert!(outcome.left.is_empty());
    let Event::Element(iq) = &outcome.events[4] else { unreachable!() };
    let item =
        iq.child("pubsub", PUBSUB).and_then(|p| p.child("publish", PUBSUB)).and_then(|p| p.child("item", PUBSUB));
    assert_eq!(item.and_then(|i| i.child("entry", ATOM)).map(|e| e.children.len()), Some(1));
    assert_eq!(
        item.unwrap().elements().next().unwrap().child("title", ATOM).unwrap().children,
        [Node::Text("hi & bye".into())]
    );
}

#[test]
fn byte_by_byte_session() {
    let outcome = bytewise(session().as_bytes());
    assert_eq!(outcome.error, None);
    assert_eq!(outcome.events, expected());
    assert!(outcome.left.is_empty());
}

#[test]
fn each_event_consumes_exactly_its_bytes() {
    let wire = session();
    let mut reader = xmpp_codec::StreamReader::new(Limits::default());
    let mut buf = bytes::BytesMut::from(wire.as_bytes());
    let open = reader.next(&mut buf).unwrap();
    assert!(matches!(open, Some(Event::StreamOpen(_))));
    assert_eq!(&buf[..], &wire.as_bytes()[HEADER.len()..]);
    assert!(matches!(reader.next(&mut buf).unwrap(), Some(Event::Element(_))));
    assert!(buf.starts_with(b"<?xml version='1.0'?><stream:stream"));
    reader.reset();
    for _ in 0..3 {
        assert!(reader.next(&mut buf).unwrap().is_some());
    }
    // The keep-alive is still there until the next call, which consumes it with the close.
    assert_eq!(&buf[..], b" \n</stream:stream>");
    assert_eq!(reader.next(&mut buf).unwrap(), Some(Event::StreamClose));
    assert!(buf.is_empty());
    assert_eq!(reader.next(&mut buf).unwrap(), None);
    buf.extend_from_slice(b"\r\n\t ");
    assert_eq!(reader.next(&mut buf).unwrap(), None);
    assert!(buf.is_empty());
}

#[test]
fn keep_alives_are_consumed_at_once() {
    let mut reader = xmpp_codec::StreamReader::new(Limits::default());
    let mut buf = bytes::BytesMut::from(HEADER.as_bytes());
    assert!(matches!(reader.next(&mut buf), Ok(Some(Event::StreamOpen(_)))));
    for _ in 0..1000 {
        buf.extend_from_slice(b" ");
        assert_eq!(reader.next(&mut buf), Ok(None));
        assert!(buf.is_empty());
    }
    // Part of a stanza is consumed into the reader, token by token.
    buf.extend_from_slice(b"<message to='a'><body>hel");
    assert_eq!(reader.next(&mut buf), Ok(None));
    assert_eq!(&buf[..], b"hel");
    buf.extend_from_slice(b"lo</body></message>");
    let Ok(Some(Event::Element(message))) = reader.next(&mut buf) else { panic!() };
    assert_eq!(message.child("body", CLIENT_NS).map(Element::text).as_deref(), Some("hello"));
    assert!(buf.is_empty());
}

#[test]
fn header_variants() {
    let outcome = whole(
        b"\xEF\xBB\xBF \n<s:stream xmlns:s='http://etherx.jabber.org/streams' xmlns=\"jabber:client\" xml:lang='de' \
          from='juliet@im.example.com' to='im.example.com' version='1.0' id='x&amp;y' \
          xmlns:db='jabber:server:dialback'><message db:k='v'/></s:stream>",
    );
    assert_eq!(outcome.error, None);
    assert_eq!(
        outcome.events,
        [
            Event::StreamOpen(StreamHeader {
                to: Some("im.example.com".into()),
                from: Some("juliet@im.example.com".into()),
                version: Some("1.0".into()),
                lang: Some("de".into()),
                id: Some("x&y".into()),
            }),
            // The header's declaration travels with the attribute that uses it.
            Event::Element(
                Element::new("message", CLIENT_NS)
                    .with_attr("xmlns:db", "jabber:server:dialback")
                    .with_attr("db:k", "v")
            ),
            Event::StreamClose,
        ]
    );
    // A self-closed header opens and closes the stream.
    let outcome = whole(b"<stream:stream xmlns='jabber:client' xmlns:stream='http://etherx.jabber.org/streams'/>");
    assert_eq!(outcome.events, [Event::StreamOpen(StreamHeader::default()), Event::StreamClose]);
}

proptest! {
    #[test]
    fn random_splits_give_the_same_events(cuts in prop::collection::vec(0usize..1200, 0..40)) {
        let wire = session();
        let outcome = feed(Limits::default(), wire.as_bytes(), &cuts);
        prop_assert_eq!(outcome.error, None);
        prop_assert_eq!(outcome.events, expected());
        prop_assert!(outcome.left.is_empty());
    }
}
