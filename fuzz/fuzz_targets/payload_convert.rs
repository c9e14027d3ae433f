//! `payload_codec::convert` (what the core runs to re-encode a payload for a subscriber) on
//! arbitrary bytes, without a Protobuf schema. The first byte picks the formats: its high
//! nibble `from`, its low nibble `to` (each modulo 6, in `Format::ALL` order: json, cbor, xml,
//! senml_json, senml_cbor, protobuf); the rest is the payload.
//!
//! Checked: no panic (nor stack overflow: the depth bound must hold on every path); whatever
//! `convert` writes is valid in its own format and readable into the JSON model; and that
//! JSON value survives CBOR and the W3C XML representation exactly (where the value fits XML,
//! which cannot hold control characters, and the output bound).
#![no_main]

use libfuzzer_sys::fuzz_target;
use payload_codec::{ConvertError, Format, Limits, convert};
use serde_json::Value;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, payload)) = data.split_first() else { return };
    let from = Format::ALL[usize::from(pick >> 4) % Format::ALL.len()];
    let to = Format::ALL[usize::from(pick & 0x0f) % Format::ALL.len()];
    let limits = Limits::default();

    let Ok(out) = convert(payload, from, to, None, &limits) else { return };
    if from == to {
        assert_eq!(out, payload, "the same format out must be the payload untouched");
    }
    if let Err(e) = convert(&out, to, to, None, &limits) {
        panic!("{from:?} -> {to:?} wrote what {to:?} does not read: {e}\n{}", String::from_utf8_lossy(&out));
    }
    let json = match convert(&out, to, Format::Json, None, &limits) {
        Ok(json) => json,
        Err(ConvertError::TooLarge(_)) => return,
        Err(e) => panic!("{to:?} output does not read as JSON: {e}\n{}", String::from_utf8_lossy(&out)),
    };
    let value: Value = serde_json::from_slice(&json).expect("convert wrote invalid JSON");

    for via in [Format::Cbor, Format::Xml] {
        let there = match convert(&json, Format::Json, via, None, &limits) {
            Ok(there) => there,
            Err(ConvertError::TooLarge(_)) => continue,
            Err(ConvertError::Encode { .. }) if via == Format::Xml => continue,
            Err(e) => panic!("JSON -> {via:?} failed: {e}\n{}", String::from_utf8_lossy(&json)),
        };
        let back = match convert(&there, via, Format::Json, None, &limits) {
            Ok(back) => back,
            Err(ConvertError::TooLarge(_)) => continue,
            Err(e) => panic!("{via:?} written from JSON does not read back: {e}\n{}", String::from_utf8_lossy(&there)),
        };
        let back: Value = serde_json::from_slice(&back).expect("convert wrote invalid JSON");
        assert_eq!(back, value, "JSON -> {via:?} -> JSON changed the value");
    }
});
