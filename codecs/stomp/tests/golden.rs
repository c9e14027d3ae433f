//! Golden frames copied from the STOMP 1.2 specification
//! (https://stomp.github.io/stomp-specification-1.2.html), `^@` written as `\0`. Each is
//! decoded whole, split at every byte offset, fed byte by byte, with CRLF line ends, and
//! re-encoded.

mod common;

use bytes::BytesMut;
use common::{decode_all, decode_one, decoder_v12};
use stomp_codec::{Command, Decoded, Decoder, Encoder, Frame, Version};

struct Golden {
    /// Spec section the frame is taken from.
    section: &'static str,
    wire: &'static [u8],
    command: Command,
    headers: &'static [(&'static str, &'static str)],
    body: &'static [u8],
}

const ERROR_BODY: &[u8] = b"The message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\nHello queue a!\n-----\nDid not contain a destination header, which is REQUIRED\nfor message propagation.\n";

const GOLDEN: &[Golden] = &[
    Golden {
        section: "Connecting",
        wire: b"CONNECT\naccept-version:1.2\nhost:stomp.github.org\n\n\0",
        command: Command::Connect,
        headers: &[("accept-version", "1.2"), ("host", "stomp.github.org")],
        body: b"",
    },
    Golden {
        section: "CONNECT or STOMP Frame (STOMP in place of CONNECT)",
        wire: b"STOMP\naccept-version:1.2\nhost:stomp.github.org\n\n\0",
        command: Command::Stomp,
        headers: &[("accept-version", "1.2"), ("host", "stomp.github.org")],
        body: b"",
    },
    Golden {
        section: "CONNECTED Frame",
        wire: b"CONNECTED\nversion:1.2\n\n\0",
        command: Command::Connected,
        headers: &[("version", "1.2")],
        body: b"",
    },
    Golden {
        section: "Protocol Negotiation (client)",
        wire: b"CONNECT\naccept-version:1.0,1.1,2.0\nhost:stomp.github.org\n\n\0",
        command: Command::Connect,
        headers: &[("accept-version", "1.0,1.1,2.0"), ("host", "stomp.github.org")],
        body: b"",
    },
    Golden {
        section: "Protocol Negotiation (server answer)",
        wire: b"CONNECTED\nversion:1.1\n\n\0",
        command: Command::Connected,
        headers: &[("version", "1.1")],
        body: b"",
    },
    Golden {
        section: "Protocol Negotiation (no common version)",
        wire: b"ERROR\nversion:1.2,2.1\ncontent-type:text/plain\n\nSupported protocol versions are 1.2 2.1\0",
        command: Command::Error,
        headers: &[("version", "1.2,2.1"), ("content-type", "text/plain")],
        body: b"Supported protocol versions are 1.2 2.1",
    },
    Golden {
        section: "SEND",
        wire: b"SEND\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\n\0",
        command: Command::Send,
        headers: &[("destination", "/queue/a"), ("content-type", "text/plain")],
        body: b"hello queue a\n",
    },
    Golden {
        section: "SUBSCRIBE",
        wire: b"SUBSCRIBE\nid:0\ndestination:/queue/foo\nack:client\n\n\0",
        command: Command::Subscribe,
        headers: &[("id", "0"), ("destination", "/queue/foo"), ("ack", "client")],
        body: b"",
    },
    Golden {
        section: "UNSUBSCRIBE",
        wire: b"UNSUBSCRIBE\nid:0\n\n\0",
        command: Command::Unsubscribe,
        headers: &[("id", "0")],
        body: b"",
    },
    Golden {
        section: "ACK",
        wire: b"ACK\nid:12345\ntransaction:tx1\n\n\0",
        command: Command::Ack,
        headers: &[("id", "12345"), ("transaction", "tx1")],
        body: b"",
    },
    Golden {
        section: "NACK",
        wire: b"NACK\nid:12345\ntransaction:tx1\n\n\0",
        command: Command::Nack,
        headers: &[("id", "12345"), ("transaction", "tx1")],
        body: b"",
    },
    Golden {
        section: "BEGIN",
        wire: b"BEGIN\ntransaction:tx1\n\n\0",
        command: Command::Begin,
        headers: &[("transaction", "tx1")],
        body: b"",
    },
    Golden {
        section: "COMMIT",
        wire: b"COMMIT\ntransaction:tx1\n\n\0",
        command: Command::Commit,
        headers: &[("transaction", "tx1")],
        body: b"",
    },
    Golden {
        section: "ABORT",
        wire: b"ABORT\ntransaction:tx1\n\n\0",
        command: Command::Abort,
        headers: &[("transaction", "tx1")],
        body: b"",
    },
    Golden {
        // The spec's example has no blank line before the NUL; accepted on purpose.
        section: "DISCONNECT",
        wire: b"DISCONNECT\nreceipt:77\n\0",
        command: Command::Disconnect,
        headers: &[("receipt", "77")],
        body: b"",
    },
    Golden {
        section: "RECEIPT (answer to DISCONNECT, no blank line as in the spec)",
        wire: b"RECEIPT\nreceipt-id:77\n\0",
        command: Command::Receipt,
        headers: &[("receipt-id", "77")],
        body: b"",
    },
    Golden {
        section: "RECEIPT",
        wire: b"RECEIPT\nreceipt-id:message-12345\n\n\0",
        command: Command::Receipt,
        headers: &[("receipt-id", "message-12345")],
        body: b"",
    },
    Golden {
        section: "MESSAGE",
        wire: b"MESSAGE\nsubscription:0\nmessage-id:007\ndestination:/queue/a\ncontent-type:text/plain\n\nhello queue a\0",
        command: Command::Message,
        headers: &[
            ("subscription", "0"),
            ("message-id", "007"),
            ("destination", "/queue/a"),
            ("content-type", "text/plain"),
        ],
        body: b"hello queue a",
    },
    Golden {
        section: "ERROR (content-length:170 counts the body exactly)",
        wire: b"ERROR\nreceipt-id:message-12345\ncontent-type:text/plain\ncontent-length:170\nmessage:malformed frame received\n\nThe message:\n-----\nMESSAGE\ndestined:/queue/a\nreceipt:message-12345\n\nHello queue a!\n-----\nDid not contain a destination header, which is REQUIRED\nfor message propagation.\n\0",
        command: Command::Error,
        headers: &[
            ("receipt-id", "message-12345"),
            ("content-type", "text/plain"),
            ("content-length", "170"),
            ("message", "malformed frame received"),
        ],
        body: ERROR_BODY,
    },
    Golden {
        section: "Repeated Header Entries",
        wire: b"MESSAGE\nfoo:World\nfoo:Hello\n\n\0",
        command: Command::Message,
        headers: &[("foo", "World"), ("foo", "Hello")],
        body: b"",
    },
];

fn expected(golden: &Golden) -> Frame {
    Frame {
        command: golden.command,
        headers: golden.headers.iter().copied().collect(),
        body: bytes::Bytes::from_static(golden.body),
    }
}

#[test]
fn golden_frames_decode_whole() {
    for golden in GOLDEN {
        let frame = decode_one(&mut decoder_v12(), golden.wire);
        assert_eq!(frame, expected(golden), "{}", golden.section);
    }
}

#[test]
fn repeated_header_first_wins() {
    // Spec "Repeated Header Entries": "the value of the foo header is just World".
    let golden = GOLDEN.last().unwrap();
    let frame = decode_one(&mut decoder_v12(), golden.wire);
    assert_eq!(frame.header("foo"), Some("World"));
}

#[test]
fn golden_frames_split_at_every_offset() {
    for golden in GOLDEN {
        let want = expected(golden);
        for split in 0..golden.wire.len() {
            let mut decoder = decoder_v12();
            let mut buf = BytesMut::from(&golden.wire[..split]);
            assert_eq!(decoder.decode(&mut buf), Ok(None), "{} split at {split}", golden.section);
            assert_eq!(buf.len(), split, "nothing consumed on partial input");
            buf.extend_from_slice(&golden.wire[split..]);
            let got = decoder.decode(&mut buf);
            assert_eq!(got, Ok(Some(Decoded::Frame(want.clone()))), "{} split at {split}", golden.section);
            assert!(buf.is_empty());
        }
    }
}

#[test]
fn golden_frames_byte_by_byte() {
    for golden in GOLDEN {
        let mut decoder = decoder_v12();
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for &byte in golden.wire {
            buf.extend_from_slice(&[byte]);
            if let Some(item) = decoder.decode(&mut buf).unwrap() {
                frames.push(item);
            }
        }
        assert_eq!(frames, [Decoded::Frame(expected(golden))], "{}", golden.section);
    }
}

/// Rewrites every LF before the body as CRLF (STOMP 1.2 "STOMP Frames": EOL may be CRLF).
fn with_crlf(wire: &[u8], body_len: usize) -> Vec<u8> {
    let head_len = wire.len() - body_len - 1;
    let mut out = Vec::new();
    for &byte in &wire[..head_len] {
        if byte == b'\n' {
            out.push(b'\r');
        }
        out.push(byte);
    }
    out.extend_from_slice(&wire[head_len..]);
    out
}

#[test]
fn golden_frames_with_crlf_line_ends() {
    for golden in GOLDEN {
        let wire = with_crlf(golden.wire, golden.body.len());
        for split in 0..wire.len() {
            let mut decoder = decoder_v12();
            let mut buf = BytesMut::from(&wire[..split]);
            assert_eq!(decoder.decode(&mut buf), Ok(None), "{}", golden.section);
            buf.extend_from_slice(&wire[split..]);
            assert_eq!(
                decoder.decode(&mut buf),
                Ok(Some(Decoded::Frame(expected(golden)))),
                "{} split at {split}",
                golden.section
            );
        }
    }
}

#[test]
fn golden_stream_with_heart_beats_between_frames() {
    // Spec "Heart-beating": EOLs between frames are heart-beats; "frame" in the BNF also
    // allows EOLs after the NUL.
    let mut stream = Vec::new();
    let mut want = Vec::new();
    for (index, golden) in GOLDEN.iter().enumerate() {
        stream.extend_from_slice(golden.wire);
        want.push(Decoded::Frame(expected(golden)));
        let eol: &[u8] = if index % 2 == 0 { b"\n" } else { b"\r\n" };
        for _ in 0..index % 3 {
            stream.extend_from_slice(eol);
            want.push(Decoded::HeartBeat);
        }
    }
    assert_eq!(decode_all(&mut decoder_v12(), &stream), want);

    // Same stream fed in awkward 7-byte pieces.
    let mut decoder = decoder_v12();
    let mut buf = BytesMut::new();
    let mut got = Vec::new();
    for chunk in stream.chunks(7) {
        buf.extend_from_slice(chunk);
        while let Some(item) = decoder.decode(&mut buf).unwrap() {
            got.push(item);
        }
    }
    assert_eq!(got, want);
}

#[test]
fn decoded_frames_do_not_borrow_the_read_buffer() {
    // nats split_test.go habit: overwrite the read buffer after decoding and check the frame.
    let golden = &GOLDEN[6];
    let mut decoder = decoder_v12();
    let mut buf = BytesMut::from(golden.wire);
    buf.extend_from_slice(b"SEND\n");
    let Some(Decoded::Frame(frame)) = decoder.decode(&mut buf).unwrap() else {
        panic!("expected a frame");
    };
    for byte in buf.iter_mut() {
        *byte = b'X';
    }
    buf.extend_from_slice(&[b'Y'; 4096]);
    assert_eq!(frame, expected(golden));
}

#[test]
fn golden_frames_re_encode_to_equal_frames() {
    let mut encoder = Encoder::new();
    encoder.set_version(Version::V1_2);
    for golden in GOLDEN {
        let frame = expected(golden);
        let mut wire = BytesMut::new();
        encoder.encode(&frame, &mut wire).unwrap();
        let mut again = decode_one(&mut decoder_v12(), &wire);
        // The encoder adds content-length to bodies that lack one.
        if !frame.body.is_empty() && !frame.headers.contains("content-length") {
            assert_eq!(again.headers.remove("content-length"), 1, "{}", golden.section);
        }
        assert_eq!(again, frame, "{}", golden.section);
    }
}

#[test]
fn golden_frames_decode_before_negotiation() {
    // None of the golden frames uses escapes, so they read the same in every mode.
    for golden in GOLDEN {
        assert_eq!(decode_one(&mut Decoder::default(), golden.wire), expected(golden));
    }
}
