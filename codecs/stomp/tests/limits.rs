//! One test per limit in `Limits`: the value at the limit is accepted, one past it is rejected,
//! and the rejection happens on partial input, before the offending line or body completes.

mod common;

use bytes::BytesMut;
use common::{decode_one, error_whole, first_error};
use stomp_codec::{DecodeError, Decoded, Decoder, Limits, Version};

fn decoder(limits: Limits) -> Decoder {
    let mut decoder = Decoder::new(limits);
    decoder.set_version(Version::V1_2);
    decoder
}

#[test]
fn defaults_are_documented_values() {
    let limits = Limits::default();
    assert_eq!(limits.max_frame_size, 1024 * 1024);
    assert_eq!(limits.max_headers, 64);
    assert_eq!(limits.max_header_line, 8 * 1024);
    assert_eq!(limits.max_command_line, 32);
}

#[test]
fn header_count_over_the_limit() {
    let limits = Limits::default();
    let frame_with = |count: usize| {
        let mut wire = String::from("SEND\n");
        for i in 0..count {
            wire.push_str(&format!("h{i}:v\n"));
        }
        wire.push_str("\n\0");
        wire
    };
    let frame = decode_one(&mut decoder(limits), frame_with(64).as_bytes());
    assert_eq!(frame.headers.len(), 64);
    let wire = frame_with(65);
    let want = DecodeError::TooManyHeaders { limit: 64 };
    assert_eq!(error_whole(&mut decoder(limits), wire.as_bytes()), Some(want.clone()));
    // Partial input: the frame is rejected as soon as the 65th header line ends.
    let cut = wire.find("h64:v\n").unwrap() + "h64:v\n".len();
    assert_eq!(error_whole(&mut decoder(limits), &wire.as_bytes()[..cut]), Some(want));
}

#[test]
fn header_line_over_the_limit_on_partial_input() {
    let limits = Limits { max_header_line: 16, ..Limits::default() };
    // Exactly 16 bytes, even followed by the CR of a CRLF, is fine.
    let line = "k:01234567890123";
    assert_eq!(line.len(), 16);
    let frame = decode_one(&mut decoder(limits), format!("SEND\n{line}\r\n\r\n\0").as_bytes());
    assert_eq!(frame.header("k"), Some("01234567890123"));

    // A peer that never ends its line is cut off at byte 17, without any LF arriving.
    let mut dec = decoder(limits);
    let mut buf = BytesMut::from(&b"SEND\nk:01234567890123"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    buf.extend_from_slice(b"4");
    assert_eq!(dec.decode(&mut buf), Err(DecodeError::HeaderLineTooLong { line: 2, limit: 16 }));
    // The same when the over-long line arrives complete.
    assert_eq!(
        error_whole(&mut decoder(limits), b"SEND\nk:012345678901234\n\n\0"),
        Some(DecodeError::HeaderLineTooLong { line: 2, limit: 16 })
    );
}

#[test]
fn default_header_line_limit_is_enforced_without_an_eol() {
    let mut dec = decoder(Limits::default());
    let mut buf = BytesMut::from(&b"SEND\nkey:"[..]);
    buf.extend_from_slice(&vec![b'a'; 8 * 1024]);
    assert_eq!(dec.decode(&mut buf), Err(DecodeError::HeaderLineTooLong { line: 2, limit: 8 * 1024 }));
}

#[test]
fn command_line_over_the_limit_on_partial_input() {
    let limits = Limits::default();
    let mut dec = decoder(limits);
    let mut buf = BytesMut::from(&[b'A'; 32][..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    buf.extend_from_slice(b"A");
    assert_eq!(dec.decode(&mut buf), Err(DecodeError::CommandLineTooLong { limit: 32 }));
    assert_eq!(first_error(&mut decoder(limits), &[b'x'; 100]), Some(DecodeError::CommandLineTooLong { limit: 32 }));
}

#[test]
fn frame_size_counts_command_headers_body_and_nul() {
    let wire = b"SEND\ncontent-length:3\n\nabc\0";
    let exact = Limits { max_frame_size: wire.len(), ..Limits::default() };
    decode_one(&mut decoder(exact), wire);
    let one_less = Limits { max_frame_size: wire.len() - 1, ..Limits::default() };
    assert!(matches!(error_whole(&mut decoder(one_less), wire), Some(DecodeError::FrameTooLarge { .. })));
    // Without content-length the same frame is measured when its NUL is found.
    let wire = b"SEND\n\nabc\0";
    let exact = Limits { max_frame_size: wire.len(), ..Limits::default() };
    decode_one(&mut decoder(exact), wire);
    let one_less = Limits { max_frame_size: wire.len() - 1, ..Limits::default() };
    assert_eq!(error_whole(&mut decoder(one_less), wire), Some(DecodeError::FrameTooLarge { at_least: 10, limit: 9 }));
}

#[test]
fn declared_content_length_over_the_limit_is_rejected_before_the_body() {
    let limits = Limits::default();
    let mut dec = decoder(limits);
    // The header line alone announces 2 MiB: rejected as soon as that line ends.
    let mut buf = BytesMut::from(&b"SEND\ncontent-length:2097152\n"[..]);
    assert_eq!(
        dec.decode(&mut buf),
        Err(DecodeError::FrameTooLarge { at_least: 28 + 1 + 2_097_152 + 1, limit: 1024 * 1024 })
    );
    // usize::MAX does not overflow the arithmetic.
    let wire = format!("SEND\ncontent-length:{}\n\n", usize::MAX);
    assert!(matches!(error_whole(&mut decoder(limits), wire.as_bytes()), Some(DecodeError::FrameTooLarge { .. })));
}

#[test]
fn buffered_body_over_the_limit_is_rejected_before_its_nul() {
    let limits = Limits { max_frame_size: 64, ..Limits::default() };
    let mut dec = decoder(limits);
    let mut buf = BytesMut::from(&b"SEND\n\n"[..]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    // 6 head bytes + 57 body bytes + the NUL still due = 64: still acceptable.
    buf.extend_from_slice(&[b'x'; 57]);
    assert_eq!(dec.decode(&mut buf), Ok(None));
    buf.extend_from_slice(b"x");
    assert_eq!(dec.decode(&mut buf), Err(DecodeError::FrameTooLarge { at_least: 65, limit: 64 }));
}

#[test]
fn buffered_headers_over_the_frame_limit_are_rejected() {
    let limits = Limits { max_frame_size: 32, ..Limits::default() };
    let wire = b"SEND\nh1:aaaaaaaaaa\nh2:bbbbbbbbbb\nh3:c\n\n\0";
    assert!(matches!(first_error(&mut decoder(limits), wire), Some(DecodeError::FrameTooLarge { limit: 32, .. })));
}

#[test]
fn pipelined_frames_are_measured_one_by_one() {
    // A buffer holding many small frames is not mistaken for one big frame.
    let limits = Limits { max_frame_size: 16, ..Limits::default() };
    let one = b"SEND\nk:v\n\nbody\0";
    assert!(one.len() <= 16);
    let wire: Vec<u8> = one.iter().copied().cycle().take(one.len() * 50).collect();
    let mut dec = decoder(limits);
    let mut buf = BytesMut::from(&wire[..]);
    let mut frames = 0;
    while let Some(item) = dec.decode(&mut buf).unwrap() {
        assert!(matches!(item, Decoded::Frame(_)));
        frames += 1;
    }
    assert_eq!(frames, 50);
}
