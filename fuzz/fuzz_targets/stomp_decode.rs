//! `stomp_codec::Decoder` on arbitrary bytes.
//!
//! Input: one mode byte, one split byte (see `tolk_fuzz::chunks`), then the stream. Mode bits
//! 0-1 pick the negotiated version (none yet, 1.0, 1.1, 1.2), bit 2 small limits.
//!
//! Checked: no panic; the stream fed in the chosen chunks gives the same frames, heart-beats
//! and outcome (the same error variant, any size-limit error for a size-limit error, or
//! needing more) as the stream fed whole; and every
//! decoded frame that the encoder accepts decodes back to itself (plus the `content-length`
//! the encoder adds to a body that had none).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use stomp_codec::{DecodeError, Decoded, Decoder, Encoder, Frame, Limits, Version};

#[derive(Debug)]
enum End {
    NeedMore,
    Error(DecodeError),
}

/// Feeds `wire` in `chunks`, decoding after each; stops at the first error.
fn decode_all(mut decoder: Decoder, wire: &[u8], chunks: &[usize]) -> (Vec<Decoded>, End) {
    let (items, error) = tolk_fuzz::feed(wire, chunks, |buf, _| decoder.decode(buf));
    (items, error.map_or(End::NeedMore, End::Error))
}

/// A size limit crossed. When a frame crosses two (a long header line in a frame that is also
/// too large), which one is seen first depends on how much is buffered, so they compare equal.
fn is_limit(e: &DecodeError) -> bool {
    matches!(
        e,
        DecodeError::FrameTooLarge { .. }
            | DecodeError::HeaderLineTooLong { .. }
            | DecodeError::CommandLineTooLong { .. }
            | DecodeError::TooManyHeaders { .. }
    )
}

fn same_end(a: &End, b: &End) -> bool {
    match (a, b) {
        (End::NeedMore, End::NeedMore) => true,
        (End::Error(a), End::Error(b)) if is_limit(a) && is_limit(b) => true,
        (End::Error(a), End::Error(b)) => std::mem::discriminant(a) == std::mem::discriminant(b),
        _ => false,
    }
}

fn round_trip(frame: &Frame, version: Option<Version>) {
    let mut encoder = Encoder::new();
    let mut decoder = Decoder::new(Limits {
        max_frame_size: usize::MAX,
        max_headers: usize::MAX,
        max_header_line: usize::MAX,
        max_command_line: usize::MAX,
    });
    if let Some(version) = version {
        encoder.set_version(version);
        decoder.set_version(version);
    }
    let mut wire = BytesMut::new();
    if encoder.encode(frame, &mut wire).is_err() {
        return;
    }
    let mut expected = frame.clone();
    if expected.header("content-length").is_none() && !expected.body.is_empty() {
        expected.headers.push("content-length", expected.body.len().to_string());
    }
    let encoded = wire.clone();
    match decoder.decode(&mut wire) {
        Ok(Some(Decoded::Frame(back))) => {
            assert_eq!(back, expected, "decode(encode(frame)) differs; encoded as {:?}", encoded);
            assert!(wire.is_empty(), "encoded frame left {:?} after one frame", wire);
        }
        other => panic!("decode(encode(frame)) gave {other:?} for {frame:?}, encoded as {encoded:?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, split, wire @ ..] = data else { return };
    let version = match mode & 3 {
        0 => None,
        1 => Some(Version::V1_0),
        2 => Some(Version::V1_1),
        _ => Some(Version::V1_2),
    };
    let limits = if mode & 4 != 0 {
        Limits { max_frame_size: 256, max_headers: 4, max_header_line: 48, max_command_line: 12 }
    } else {
        Limits::default()
    };
    let decoder = || {
        let mut decoder = Decoder::new(limits);
        if let Some(version) = version {
            decoder.set_version(version);
        }
        decoder
    };

    let (whole, whole_end) = decode_all(decoder(), wire, &[wire.len()]);
    let (split_items, split_end) = decode_all(decoder(), wire, &tolk_fuzz::chunks(*split, wire.len()));
    assert_eq!(whole, split_items, "frames differ between whole and split input");
    assert!(same_end(&whole_end, &split_end), "whole input ends in {whole_end:?}, split input in {split_end:?}");

    for item in &whole {
        if let Decoded::Frame(frame) = item {
            round_trip(frame, version);
        }
    }
});
