//! `mqttsn_codec` on arbitrary bytes: the datagram decoders and the stream framer.
//!
//! Input: one split byte (see `tolk_fuzz::chunks`), then the bytes. They are decoded as one
//! datagram with [`decode`] and [`decode_bytes`], and as a stream with [`decode_stream`] fed
//! whole and in the chosen chunks.
//!
//! Checked: no panic; both datagram decoders agree; the stream gives the same messages and the
//! same outcome whole and split; every decoded message encodes (it came from at most 65 535
//! octets) and decodes back to itself.
#![no_main]

use bytes::{Bytes, BytesMut};
use libfuzzer_sys::fuzz_target;
use mqttsn_codec::{DEFAULT_MAX_MESSAGE_LEN, DecodeError, Message, decode, decode_bytes, decode_stream, encode};

fn round_trip(message: &Message) {
    let mut out = BytesMut::new();
    if let Err(e) = encode(message, &mut out) {
        panic!("a decoded message does not encode: {e}: {message:?}");
    }
    match decode_bytes(out.clone().freeze()) {
        Ok(back) => assert_eq!(&back, message, "decode(encode(message)) differs; encoded as {:02x?}", &out[..]),
        Err(e) => panic!("decode(encode(message)) failed: {e}; {message:?} encoded as {:02x?}", &out[..]),
    }
}

/// Frames `wire` fed in `chunks`; stops at the first error.
fn stream(wire: &[u8], chunks: &[usize], max: usize) -> (Vec<Message>, Option<DecodeError>) {
    tolk_fuzz::feed(wire, chunks, |buf, _| decode_stream(buf, max))
}

fuzz_target!(|data: &[u8]| {
    let [split, wire @ ..] = data else { return };

    let copied = decode(wire);
    let shared = decode_bytes(Bytes::copy_from_slice(wire));
    assert_eq!(copied, shared, "decode and decode_bytes disagree");
    if let Ok(message) = &copied {
        round_trip(message);
    }

    // A small limit now and then, so that the limit check is reached by short inputs.
    let max = if split & 0x80 != 0 { 64 } else { DEFAULT_MAX_MESSAGE_LEN };
    let (whole, whole_err) = stream(wire, &[wire.len()], max);
    let (parts, parts_err) = stream(wire, &tolk_fuzz::chunks(*split, wire.len()), max);
    assert_eq!(whole, parts, "stream messages differ between whole and split input");
    assert_eq!(whole_err, parts_err, "stream outcome differs between whole and split input");
    for message in &whole {
        round_trip(message);
    }
});
