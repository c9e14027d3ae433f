//! `amqp-codec` (the AMQP 0-9-1 framing checks in front of `amq-protocol`) on arbitrary
//! bytes.
//!
//! Input: one mode byte, one split byte (see `tolk_fuzz::chunks`), then the stream. Mode bit 0
//! starts the stream with `check_protocol_header` as a connection does, bit 1 uses the
//! smallest `frame_max` (4096) instead of the default (131072).
//!
//! Checked: no panic; the stream fed in the chosen chunks gives the same frames and the same
//! outcome as fed whole; every decoded method, content header and heartbeat encodes and decodes
//! back to itself. Field tables can hold floats, and NaN is not equal to itself, so when a
//! value differs the two are compared by their encodings instead.
#![no_main]

use amq_protocol::frame::{AMQPFrame, WriteContext, gen_frame};
use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use amqp_codec::{Encoder, FRAME_MIN_SIZE, Frame, FrameError, check_protocol_header, decode};

/// Feeds `wire` in `chunks`; stops at the first error.
fn decode_all(header_first: bool, frame_max: u32, wire: &[u8], chunks: &[usize]) -> (Vec<Frame>, Option<FrameError>) {
    let mut header_done = !header_first;
    tolk_fuzz::feed(wire, chunks, |buf, _| {
        if !header_done {
            if buf.is_empty() || !check_protocol_header(buf)? {
                return Ok(None);
            }
            header_done = true;
        }
        decode(buf, frame_max)
    })
}

/// The bytes `frame` encodes to, by the front end's encoder where it has one.
fn encode(frame: &Frame) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    match frame {
        Frame::Method(channel, method) => {
            Encoder::default().method(&mut out, *channel, (**method).clone()).expect("encode a decoded method")
        }
        Frame::Header(channel, header) => {
            let frame = AMQPFrame::Header(*channel, (**header).clone());
            out = gen_frame(&frame)(WriteContext::from(out)).expect("encode a decoded content header").into_inner().0;
        }
        Frame::Heartbeat => Encoder::heartbeat(&mut out),
        // Body frames are not decoded beyond their payload; nothing to round-trip.
        Frame::Body(..) => return None,
    }
    Some(out)
}

/// Equal, or (for values holding a NaN) encoded the same.
fn same(a: &Frame, b: &Frame) -> bool {
    a == b || encode(a).is_some_and(|wire| encode(b).as_ref() == Some(&wire))
}

/// Equal outcomes. Two errors carry evidence that depends on how much was buffered, and are
/// compared without it.
fn same_error(a: &Option<FrameError>, b: &Option<FrameError>) -> bool {
    match (a, b) {
        (Some(FrameError::BadProtocolHeader(_)), Some(FrameError::BadProtocolHeader(_))) => true,
        // The type octet is refused as soon as it arrives; the channel is reported as 0 while
        // its two octets are not buffered yet.
        (Some(FrameError::UnknownType { frame_type: x, .. }), Some(FrameError::UnknownType { frame_type: y, .. })) => {
            x == y
        }
        _ => a == b,
    }
}

fn round_trip(frame: &Frame) {
    let Some(wire) = encode(frame) else { return };
    // Decoded without a frame_max: the frame fitted in the one it was decoded with, and its
    // re-encoding is the same size, but that is not what this checks.
    let mut buf = BytesMut::from(&wire[..]);
    match decode(&mut buf, u32::MAX) {
        Ok(Some(back)) => {
            if &back != frame {
                let again = encode(&back);
                assert_eq!(
                    again.as_deref(),
                    Some(&wire[..]),
                    "decode(encode(frame)) differs: {frame:?} came back as {back:?}"
                );
            }
            assert!(buf.is_empty(), "an encoded frame left {:02x?}", &buf[..]);
        }
        other => panic!("decode(encode(frame)) gave {other:?} for {frame:?}; encoded as {wire:02x?}"),
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, split, wire @ ..] = data else { return };
    let header_first = mode & 1 != 0;
    let frame_max = if mode & 2 != 0 { FRAME_MIN_SIZE } else { 131_072 };

    let (whole, whole_err) = decode_all(header_first, frame_max, wire, &[wire.len()]);
    let (parts, parts_err) = decode_all(header_first, frame_max, wire, &tolk_fuzz::chunks(*split, wire.len()));
    assert!(
        whole.len() == parts.len() && whole.iter().zip(&parts).all(|(a, b)| same(a, b)),
        "frames differ between whole and split input: {whole:?} vs {parts:?}"
    );
    assert!(same_error(&whole_err, &parts_err), "whole input ends in {whole_err:?}, split input in {parts_err:?}");

    for frame in &whole {
        round_trip(frame);
    }
});
