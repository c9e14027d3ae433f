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
fn oversized_payloads_are_refused_before_reading() {
    let limits = Limits { max_output_bytes: 8, ..Limits::default() };
    assert!(matches!(
        convert(b"[1,2,3,4,5]", Format::Json, Format::Cbor, None, &limits),
        Err(ConvertError::TooLarge(8))
    ));
    let grows = Limits { max_output_bytes: 16, ..Limits::default() };
    assert!(matches!(convert(b"[1]", Format::Json, Format::Xml, None, &grows), Err(ConvertError::TooLarge(16))));
}

/// JSON values without floats (whose text may change on the way) nested a few levels.
fn values() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|i| json!(i)),
        "[ -~\u{e9}\u{4e2d}\n\t]{0,12}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z@#\"<&]{1,6}", inner), 0..6)
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
    }

    #[test]
    fn any_bytes_in_any_format_convert_or_fail_without_panicking(bytes in prop::collection::vec(any::<u8>(), 0..64), from in 0usize..5, to in 0usize..5) {
        let _ = convert(&bytes, Format::ALL[from], Format::ALL[to], None, &Limits::default());
    }
}
