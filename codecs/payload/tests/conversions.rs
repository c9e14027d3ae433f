//! Conversions through the public API: Protobuf from a `.proto` file read at run time, and
//! round trips between JSON, CBOR and XML on generated values.

use std::path::{Path, PathBuf};

use payload_codec::{ConvertError, Format, Limits, Schema, SchemaError, convert};
use proptest::prelude::*;
use serde_json::{Value, json};

fn proto() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/reading.proto")
}

#[test]
fn protobuf_reads_and_writes_the_proto3_json_mapping() {
    let schema = Schema::load(&proto(), "tolk.test.Reading").unwrap();
    assert_eq!(schema.message_name(), "tolk.test.Reading");
    let limits = Limits::default();
    let json = br#"{"sensor":"g1","value":21.5,"time":"1764201600000","tags":["roof","east"]}"#;
    let wire = convert(json, Format::Json, Format::Protobuf, Some(&schema), &limits).unwrap();
    // Field 1 (LEN) "g1"; field 2 (I64) 21.5; field 3 (VARINT); field 4 twice (LEN).
    assert_eq!(&wire[..4], &[0x0a, 0x02, b'g', b'1']);
    assert_eq!(&wire[4..13], &[0x11, 0, 0, 0, 0, 0, 0x80, 0x35, 0x40]);
    let back = convert(&wire, Format::Protobuf, Format::Json, Some(&schema), &limits).unwrap();
    assert_eq!(back, json);
    let cbor = convert(&wire, Format::Protobuf, Format::Cbor, Some(&schema), &limits).unwrap();
    assert_eq!(convert(&cbor, Format::Cbor, Format::Json, None, &limits).unwrap(), json);
}

#[test]
fn protobuf_refuses_what_its_type_does_not_have() {
    let schema = Schema::load(&proto(), "tolk.test.Reading").unwrap();
    let limits = Limits::default();
    assert!(matches!(
        convert(br#"{"humidity":3}"#, Format::Json, Format::Protobuf, Some(&schema), &limits),
        Err(ConvertError::Encode { .. })
    ));
    assert!(convert(&[0x0a, 0x7f], Format::Protobuf, Format::Json, Some(&schema), &limits).is_err());
    assert!(matches!(convert(b"{}", Format::Json, Format::Protobuf, None, &limits), Err(ConvertError::NoSchema)));
}

#[test]
fn a_schema_that_cannot_be_loaded_says_why() {
    let missing = Schema::load(Path::new("/nonexistent/x.proto"), "a.B").unwrap_err();
    assert!(matches!(missing, SchemaError::Compile { .. }), "{missing}");
    let wrong = Schema::load(&proto(), "Reading").unwrap_err();
    assert_eq!(
        wrong.to_string(),
        format!("{} has no message \"Reading\" (give the full name, package included)", proto().display())
    );
}

#[test]
fn imports_resolve_beside_the_file_and_nesting_is_bounded() {
    let nested = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/nested.proto");
    let batch = Schema::load(&nested, "tolk.test.nested.Batch").unwrap();
    let limits = Limits::default();
    let json = br#"{"site":"roof","readings":[{"sensor":"g1","value":21.5},{"sensor":"g2"}]}"#;
    let wire = convert(json, Format::Json, Format::Protobuf, Some(&batch), &limits).unwrap();
    assert_eq!(convert(&wire, Format::Protobuf, Format::Json, Some(&batch), &limits).unwrap(), json);

    // Node { children: [Node { children: [...] }] } 40 deep: valid Protobuf, and within prost's
    // own limit of 100, but deeper than max_depth once in the JSON model.
    let node = Schema::load(&nested, "tolk.test.nested.Node").unwrap();
    let mut wire: Vec<u8> = Vec::new();
    for _ in 0..40 {
        let mut outer = vec![0x12];
        outer.push(u8::try_from(wire.len()).unwrap_or(0x7f).min(0x7f));
        if wire.len() >= 0x80 {
            // A length over 127 takes two bytes of varint.
            outer.truncate(1);
            outer.extend([(wire.len() as u8 & 0x7f) | 0x80, (wire.len() >> 7) as u8]);
        }
        outer.extend(&wire);
        wire = outer;
    }
    assert!(matches!(
        convert(&wire, Format::Protobuf, Format::Json, Some(&node), &limits),
        Err(ConvertError::TooDeep(32))
    ));
    let generous = Limits { max_depth: 128, ..limits };
    assert!(convert(&wire, Format::Protobuf, Format::Json, Some(&node), &generous).is_ok());
}

#[test]
fn protobuf_and_senml_meet_through_a_flat_message() {
    let schema = Schema::load(&proto(), "tolk.test.Reading").unwrap();
    let limits = Limits::default();
    let wire =
        convert(br#"{"sensor":"g1","value":21.5}"#, Format::Json, Format::Protobuf, Some(&schema), &limits).unwrap();
    let senml = convert(&wire, Format::Protobuf, Format::SenmlJson, Some(&schema), &limits).unwrap();
    assert_eq!(senml, br#"[{"n":"sensor","vs":"g1"},{"n":"value","v":21.5}]"#);
    // The W3C XML of a message reads back into it.
    let xml = convert(&wire, Format::Protobuf, Format::Xml, Some(&schema), &limits).unwrap();
    assert_eq!(convert(&xml, Format::Xml, Format::Protobuf, Some(&schema), &limits).unwrap(), wire);
}

#[test]
fn the_same_format_out_is_the_payload_checked_and_untouched() {
    let limits = Limits::default();
    for (payload, format) in [
        (&b" { \"a\" : 1.50 } "[..], Format::Json),
        (&[0xa1, 0x61, b'a', 0xf9, 0x3e, 0x00][..], Format::Cbor),
        (&b"<a x='1'>t</a>"[..], Format::Xml),
    ] {
        assert_eq!(convert(payload, format, format, None, &limits).unwrap(), payload);
    }
    assert!(convert(b"{", Format::Json, Format::Json, None, &limits).is_err());
    assert!(matches!(convert(b"", Format::Protobuf, Format::Protobuf, None, &limits), Err(ConvertError::NoSchema)));
}

#[test]
fn oversized_payloads_are_refused_before_reading() {
    let limits = Limits { max_output_bytes: 8, ..Limits::default() };
    assert!(matches!(
        convert(b"[1,2,3,4,5]", Format::Json, Format::Cbor, None, &limits),
        Err(ConvertError::TooLarge(8))
    ));
    let grows = Limits { max_output_bytes: 16, ..Limits::default() };
    assert!(matches!(convert(b"[1]", Format::Json, Format::Xml, None, &grows), Err(ConvertError::TooLarge(16))));
}

/// JSON values nested a few levels: finite floats (which keep their value, if not their
/// spelling, through every format) and text with any character XML 1.0 can hold.
fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        any::<u64>().prop_map(|u| json!(u)),
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(|f| json!(f)),
        "[^\u{0}-\u{8}\u{b}\u{c}\u{e}-\u{1f}\u{fffe}\u{ffff}]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z@#\"<&'\r\n\t \u{e9}]{0,6}", inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn json_survives_cbor_and_xml(value in values()) {
        let limits = Limits::default();
        let json = serde_json::to_vec(&value).unwrap();
        for via in [Format::Cbor, Format::Xml] {
            let there = convert(&json, Format::Json, via, None, &limits).unwrap();
            let back = convert(&there, via, Format::Json, None, &limits).unwrap();
            prop_assert_eq!(serde_json::from_slice::<Value>(&back).unwrap(), value.clone());
        }
        // And through both, CBOR -> XML -> CBOR.
        let cbor = convert(&json, Format::Json, Format::Cbor, None, &limits).unwrap();
        let xml = convert(&cbor, Format::Cbor, Format::Xml, None, &limits).unwrap();
        let again = convert(&xml, Format::Xml, Format::Cbor, None, &limits).unwrap();
        let back = convert(&again, Format::Cbor, Format::Json, None, &limits).unwrap();
        prop_assert_eq!(serde_json::from_slice::<Value>(&back).unwrap(), value);
    }

    #[test]
    fn any_bytes_in_any_format_convert_or_fail_without_panicking(
        bytes in prop::collection::vec(any::<u8>(), 0..64),
        from in 0usize..6,
        to in 0usize..6,
    ) {
        let schema = Schema::load(&proto(), "tolk.test.Reading").unwrap();
        let _ = convert(&bytes, Format::ALL[from], Format::ALL[to], Some(&schema), &Limits::default());
    }

    #[test]
    fn any_generated_value_converts_to_every_format_or_fails_cleanly(value in values(), to in 0usize..6) {
        let schema = Schema::load(&proto(), "tolk.test.Reading").unwrap();
        let json = serde_json::to_vec(&value).unwrap();
        let _ = convert(&json, Format::Json, Format::ALL[to], Some(&schema), &Limits::default());
    }
}
