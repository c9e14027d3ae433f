//! One test per class of malformed input, plus the framing rules around them (content-length,
//! NULs in bodies, escapes per version). Every malformed case is also fed byte by byte, so the
//! error must surface on partial input exactly as on whole input.

mod common;

use bytes::BytesMut;
use common::{decode_one, decoder_v12, error_whole, first_error};
use stomp_codec::{Command, DecodeError, Decoded, Decoder, Version};

/// Asserts that `wire` fails with `want`, whether fed whole or byte by byte.
fn assert_fails(mut make: impl FnMut() -> Decoder, wire: &[u8], want: DecodeError) {
    assert_eq!(error_whole(&mut make(), wire), Some(want.clone()), "whole");
    assert_eq!(first_error(&mut make(), wire), Some(want), "byte by byte");
}

#[test]
fn non_nul_after_counted_body_is_an_error() {
    // Spec "Header content-length": the body is exactly that many octets, then the NUL.
    assert_fails(
        decoder_v12,
        b"SEND\ncontent-length:3\n\nabcX\0",
        DecodeError::MissingNul { content_length: 3, offset: 26, found: b'X' },
    );
}

#[test]
fn counted_body_not_yet_complete_waits() {
    // A content-length larger than what has arrived is simply "need more bytes".
    let mut decoder = decoder_v12();
    let mut buf = BytesMut::from(&b"SEND\ncontent-length:10\n\nabc"[..]);
    assert_eq!(decoder.decode(&mut buf), Ok(None));
}

#[test]
fn header_line_without_colon_is_an_error() {
    assert_fails(
        decoder_v12,
        b"SEND\ndestination:/a\nno colon here\n\n\0",
        DecodeError::MissingColon { line: 3, offset: 20, snippet: "no colon here".into() },
    );
}

#[test]
fn header_line_with_empty_name_is_an_error() {
    assert_fails(decoder_v12, b"SEND\n:value\n\n\0", DecodeError::EmptyHeaderName { line: 2, offset: 5 });
}

#[test]
fn unknown_command_is_an_error_carrying_the_command() {
    assert_fails(decoder_v12, b"PUBLISH\n\n\0", DecodeError::UnknownCommand { command: "PUBLISH".into() });
    assert_fails(decoder_v12, b"send\n\n\0", DecodeError::UnknownCommand { command: "send".into() });
    // A lone CR that is not part of a CRLF is not a heart-beat.
    assert_fails(decoder_v12, b"\r\rSEND\n\n\0", DecodeError::UnknownCommand { command: "\r\rSEND".into() });
}

#[test]
fn undefined_escape_is_an_error() {
    // Spec "Value Encoding": "Undefined escape sequences such as \t MUST be treated as a fatal
    // protocol error."
    assert_fails(
        decoder_v12,
        b"SEND\ndestination:/a\\tb\n\n\0",
        DecodeError::InvalidEscape { line: 2, offset: 19, found: Some(b't') },
    );
    assert_fails(
        decoder_v12,
        b"SEND\nname\\:value\n\n\0",
        DecodeError::InvalidEscape { line: 2, offset: 9, found: None },
    );
}

#[test]
fn escapes_are_decoded_in_names_and_values() {
    let frame = decode_one(&mut decoder_v12(), b"MESSAGE\na\\cb:x\\ny\\\\z\\r\nplain:a\\\\\n\n\0");
    assert_eq!(frame.header("a:b"), Some("x\ny\\z\r"));
    assert_eq!(frame.header("plain"), Some("a\\"));

    let mut v11 = Decoder::default();
    v11.set_version(Version::V1_1);
    let frame = decode_one(&mut v11, b"SEND\nk:a\\cb\n\n\0");
    assert_eq!(frame.header("k"), Some("a:b"));
}

#[test]
fn connect_and_connected_are_never_unescaped() {
    // Spec "Value Encoding": CONNECT and CONNECTED frames do not escape.
    for wire in
        [&b"CONNECT\nlogin:a\\tb\\c\n\n\0"[..], b"STOMP\nlogin:a\\tb\\c\n\n\0", b"CONNECTED\nserver:a\\tb\\c\n\n\0"]
    {
        let frame = decode_one(&mut decoder_v12(), wire);
        let (_, value) = frame.headers.iter().next().unwrap();
        assert_eq!(value, "a\\tb\\c");
    }
}

#[test]
fn stomp_1_0_and_pre_negotiation_take_headers_verbatim() {
    let wire = b"SEND\ndestination:/a\\tb\n\n\0";
    let frame = decode_one(&mut Decoder::default(), wire);
    assert_eq!(frame.header("destination"), Some("/a\\tb"));
    let mut v10 = Decoder::default();
    v10.set_version(Version::V1_0);
    let frame = decode_one(&mut v10, wire);
    assert_eq!(frame.header("destination"), Some("/a\\tb"));
}

#[test]
fn header_values_keep_colons_and_blanks() {
    // Only the first colon separates; values are not trimmed (spec "STOMP Frames").
    let frame = decode_one(&mut decoder_v12(), b"SEND\nurl: http://x:1 \n\n\0");
    assert_eq!(frame.header("url"), Some(" http://x:1 "));
}

#[test]
fn invalid_utf8_in_a_header_is_an_error() {
    assert_fails(decoder_v12, b"SEND\ndestination:/a\xff\n\n\0", DecodeError::InvalidUtf8 { line: 2, offset: 19 });
    assert_fails(Decoder::default, b"CONNECT\nlo\xc3gin:x\n\n\0", DecodeError::InvalidUtf8 { line: 2, offset: 10 });
}

#[test]
fn binary_bodies_need_no_utf8() {
    let frame = decode_one(&mut decoder_v12(), b"SEND\n\n\xff\xfe\0");
    assert_eq!(&frame.body[..], b"\xff\xfe");
}

#[test]
fn nul_inside_a_header_line_is_an_error() {
    assert_fails(decoder_v12, b"SEND\nkey:va\0lue\n\n\0", DecodeError::NulInHeader { line: 2, offset: 11 });
}

#[test]
fn invalid_content_length_is_an_error() {
    for value in ["abc", "-1", "", "1e3", "99999999999999999999999"] {
        let wire = format!("SEND\ncontent-length:{value}\n\n\0");
        assert_fails(decoder_v12, wire.as_bytes(), DecodeError::InvalidContentLength { line: 2, value: value.into() });
    }
}

#[test]
fn counted_body_may_contain_nuls() {
    let frame = decode_one(&mut decoder_v12(), b"SEND\ncontent-length:5\n\na\0b\0c\0");
    assert_eq!(&frame.body[..], b"a\0b\0c");
}

#[test]
fn first_content_length_wins() {
    // Spec "Repeated Header Entries" applies to content-length too.
    let frame = decode_one(&mut decoder_v12(), b"SEND\ncontent-length:2\ncontent-length:junk\n\nab\0");
    assert_eq!(&frame.body[..], b"ab");
    assert_eq!(frame.headers.get_all("content-length").count(), 2);
}

#[test]
fn body_without_content_length_ends_at_first_nul() {
    let mut decoder = decoder_v12();
    let mut buf = BytesMut::from(&b"SEND\n\nab\0cd\0"[..]);
    let Ok(Some(Decoded::Frame(frame))) = decoder.decode(&mut buf) else {
        panic!("expected a frame");
    };
    assert_eq!(&frame.body[..], b"ab");
    assert_eq!(&buf[..], b"cd\0", "exactly one frame consumed");
}

#[test]
fn nul_instead_of_blank_line_with_a_body_announced_is_an_error() {
    assert_fails(
        decoder_v12,
        b"SEND\ncontent-length:4\n\0",
        DecodeError::UnterminatedHeaders { offset: 22, content_length: 4 },
    );
}

#[test]
fn frames_without_headers_decode() {
    let frame = decode_one(&mut decoder_v12(), b"DISCONNECT\n\n\0");
    assert_eq!(frame.command, Command::Disconnect);
    assert!(frame.headers.is_empty());
}

#[test]
fn decoder_recovers_a_clean_state_after_an_error() {
    let mut decoder = decoder_v12();
    let mut buf = BytesMut::from(&b"BOGUS\n\n\0"[..]);
    assert!(decoder.decode(&mut buf).is_err());
    let mut fresh = BytesMut::from(&b"SEND\n\n\0"[..]);
    assert!(matches!(decoder.decode(&mut fresh), Ok(Some(Decoded::Frame(_)))));
}
