//! Property tests: encode→decode identity on arbitrary frames for every version, split
//! independence, and "arbitrary bytes never panic" (with small limits so limit paths run too).

use bytes::{Bytes, BytesMut};
use proptest::prelude::*;
use stomp_codec::{Command, DecodeError, Decoded, Decoder, Encoder, Frame, Headers, Limits, Version};

fn command() -> impl Strategy<Value = Command> {
    prop::sample::select(Command::ALL.to_vec())
}

fn version() -> impl Strategy<Value = Option<Version>> {
    prop::option::of(prop::sample::select(Version::ALL.to_vec()))
}

/// Header text that `version` can carry for `command`: anything but NUL when escapes apply
/// (no CR under 1.1), no CR/LF (and no colon in names) when text is written verbatim. Names
/// are at most 10 chars, so `content-length` is never generated.
fn header_strategy(command: Command, version: Version) -> BoxedStrategy<Headers> {
    let escaped = command.uses_header_escapes() && version.escapes_headers();
    let (name, value) = match (escaped, version) {
        (true, Version::V1_2) => ("[a-z0-9:\\\\\r\n é-]{1,10}", "[a-z0-9:\\\\\r\n é/-]{0,16}"),
        (true, _) => ("[a-z0-9:\\\\\n é-]{1,10}", "[a-z0-9:\\\\\n é/-]{0,16}"),
        (false, _) => ("[a-z0-9\\\\ é-]{1,10}", "[a-z0-9:\\\\ é/-]{0,16}"),
    };
    prop::collection::vec((name, value), 0..8).prop_map(|pairs| pairs.into_iter().collect()).boxed()
}

fn frame_for(version: Version) -> impl Strategy<Value = Frame> {
    command().prop_flat_map(move |command| {
        (header_strategy(command, version), prop::collection::vec(any::<u8>(), 0..64))
            .prop_map(move |(headers, body)| Frame { command, headers, body: Bytes::from(body) })
    })
}

fn any_frame() -> impl Strategy<Value = (Version, Frame)> {
    prop::sample::select(Version::ALL.to_vec())
        .prop_flat_map(|version| frame_for(version).prop_map(move |frame| (version, frame)))
}

fn codec(version: Version) -> (Encoder, Decoder) {
    let mut encoder = Encoder::new();
    encoder.set_version(version);
    let mut decoder = Decoder::default();
    decoder.set_version(version);
    (encoder, decoder)
}

/// Decodes all of `chunks` in order; the items before the first error, and whether one came.
fn run(decoder: &mut Decoder, chunks: &[&[u8]]) -> (Vec<Decoded>, Option<DecodeError>) {
    let mut buf = BytesMut::new();
    let mut items = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(item)) => items.push(item),
                Ok(None) => break,
                Err(err) => return (items, Some(err)),
            }
        }
    }
    (items, None)
}

/// Bytes drawn mostly from STOMP's own vocabulary, so random input reaches deep states.
fn stompish_bytes() -> impl Strategy<Value = Vec<u8>> {
    let token = prop_oneof![
        Just(&b"SEND"[..]),
        Just(&b"CONNECT"[..]),
        Just(&b"MESSAGE"[..]),
        Just(&b"\n"[..]),
        Just(&b"\r\n"[..]),
        Just(&b"\r"[..]),
        Just(&b":"[..]),
        Just(&b"\\"[..]),
        Just(&b"\\c"[..]),
        Just(&b"\\t"[..]),
        Just(&b"\0"[..]),
        Just(&b"content-length:"[..]),
        Just(&b"content-length:3"[..]),
        Just(&b"content-length:99999999999999999999"[..]),
        Just(&b"destination:/q"[..]),
        Just(&b"\xff\xc3"[..]),
        Just(&b"7"[..]),
        Just(&b"abc"[..]),
    ];
    prop::collection::vec(token, 0..48).prop_map(|tokens| tokens.concat())
}

fn small_limits() -> impl Strategy<Value = Limits> {
    (1usize..256, 0usize..8, 0usize..64, 0usize..16).prop_map(
        |(max_frame_size, max_headers, max_header_line, max_command_line)| Limits {
            max_frame_size,
            max_headers,
            max_header_line,
            max_command_line,
        },
    )
}

proptest! {
    #[test]
    fn encode_then_decode_is_identity((version, frame) in any_frame()) {
        let (encoder, mut decoder) = codec(version);
        let mut wire = BytesMut::new();
        encoder.encode(&frame, &mut wire).unwrap();
        let mut buf = wire.clone();
        let decoded = decoder.decode(&mut buf).unwrap();
        prop_assert!(buf.is_empty());
        let mut expected = frame.clone();
        if !frame.body.is_empty() {
            expected.headers.push("content-length", frame.body.len().to_string());
        }
        prop_assert_eq!(decoded, Some(Decoded::Frame(expected)));
    }

    #[test]
    fn encoded_frames_decode_the_same_when_split((version, frame) in any_frame(), split in any::<prop::sample::Index>()) {
        let (encoder, mut whole) = codec(version);
        let mut wire = BytesMut::new();
        encoder.encode(&frame, &mut wire).unwrap();
        let at = split.index(wire.len());
        let (_, mut split_decoder) = codec(version);
        prop_assert_eq!(
            run(&mut split_decoder, &[&wire[..at], &wire[at..]]),
            run(&mut whole, &[&wire[..]])
        );
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        version in version(),
        limits in small_limits(),
        chunk in 1usize..16,
    ) {
        let mut decoder = Decoder::new(limits);
        if let Some(version) = version {
            decoder.set_version(version);
        }
        let chunks: Vec<&[u8]> = bytes.chunks(chunk).collect();
        run(&mut decoder, &chunks);
    }

    #[test]
    fn stompish_bytes_never_panic_and_split_consistently(
        bytes in stompish_bytes(),
        version in version(),
        small in any::<bool>(),
        limits in small_limits(),
        chunk in 1usize..9,
    ) {
        let limits = if small { limits } else { Limits::default() };
        let make = || {
            let mut decoder = Decoder::new(limits);
            if let Some(version) = version {
                decoder.set_version(version);
            }
            decoder
        };
        let chunks: Vec<&[u8]> = bytes.chunks(chunk).collect();
        let (split_items, split_err) = run(&mut make(), &chunks);
        let (whole_items, whole_err) = run(&mut make(), &[&bytes[..]]);
        // Frames and heart-beats never depend on how the input was split; an error, if any,
        // happens either way (its evidence may differ: a partial line is measured earlier).
        prop_assert_eq!(split_items, whole_items);
        prop_assert_eq!(split_err.is_some(), whole_err.is_some());
    }
}
