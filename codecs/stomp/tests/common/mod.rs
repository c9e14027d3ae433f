//! Helpers shared by the integration tests: feeding a decoder whole, split, or byte by byte.
#![allow(dead_code)]

use bytes::BytesMut;
use stomp_codec::{DecodeError, Decoded, Decoder, Frame, Version};

/// A decoder that has negotiated STOMP 1.2, the usual state after CONNECT.
pub fn decoder_v12() -> Decoder {
    let mut decoder = Decoder::default();
    decoder.set_version(Version::V1_2);
    decoder
}

/// Decodes everything in `bytes`, failing on an error or on leftover bytes.
pub fn decode_all(decoder: &mut Decoder, bytes: &[u8]) -> Vec<Decoded> {
    let mut buf = BytesMut::from(bytes);
    let mut out = Vec::new();
    while let Some(item) = decoder.decode(&mut buf).expect("decode failed") {
        out.push(item);
    }
    assert!(buf.is_empty(), "leftover bytes: {:?}", &buf[..]);
    out
}

/// Decodes exactly one frame from `bytes`, which must hold nothing else.
pub fn decode_one(decoder: &mut Decoder, bytes: &[u8]) -> Frame {
    match decode_all(decoder, bytes).as_slice() {
        [Decoded::Frame(frame)] => frame.clone(),
        other => panic!("expected one frame, got {other:?}"),
    }
}

/// Feeds `bytes` one byte at a time and returns the first error, if any.
pub fn first_error(decoder: &mut Decoder, bytes: &[u8]) -> Option<DecodeError> {
    let mut buf = BytesMut::new();
    for &byte in bytes {
        buf.extend_from_slice(&[byte]);
        loop {
            match decoder.decode(&mut buf) {
                Ok(Some(_)) => continue,
                Ok(None) => break,
                Err(err) => return Some(err),
            }
        }
    }
    None
}

/// Feeds the whole input at once and returns the first error, if any.
pub fn error_whole(decoder: &mut Decoder, bytes: &[u8]) -> Option<DecodeError> {
    let mut buf = BytesMut::from(bytes);
    loop {
        match decoder.decode(&mut buf) {
            Ok(Some(_)) => continue,
            Ok(None) => return None,
            Err(err) => return Some(err),
        }
    }
}
