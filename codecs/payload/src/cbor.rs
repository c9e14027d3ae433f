//! CBOR (RFC 8949) to and from the JSON data model.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ciborium::Value as Cbor;
use serde_json::{Map, Number, Value};

use crate::{Bounded, ConvertError, Format, Limits};

/// Reads one CBOR data item, nested at most `max_depth` deep, with nothing after it.
pub(crate) fn read_raw(payload: &[u8], limits: &Limits) -> Result<Cbor, ConvertError> {
    let mut rest = payload;
    let item: Cbor =
        ciborium::de::from_reader_with_recursion_limit(&mut rest, limits.max_depth).map_err(|e| match e {
            ciborium::de::Error::RecursionLimitExceeded => ConvertError::TooDeep(limits.max_depth),
            other => ConvertError::decode(Format::Cbor, other),
        })?;
    if !rest.is_empty() {
        return Err(ConvertError::decode(Format::Cbor, format!("{} bytes after the data item", rest.len())));
    }
    Ok(item)
}

/// Reads CBOR into the JSON data model (RFC 8949 §6.1).
pub(crate) fn read(payload: &[u8], limits: &Limits) -> Result<Value, ConvertError> {
    to_json(read_raw(payload, limits)?, limits.max_output_bytes)
}

pub(crate) fn write(value: &impl serde::Serialize, format: Format, limits: &Limits) -> Result<Vec<u8>, ConvertError> {
    let mut out = Bounded::new(limits);
    let written = ciborium::ser::into_writer(value, &mut out);
    out.finish(written, format)
}

/// One CBOR item in the JSON data model. Recursion is bounded by the reader's limit. A map key
/// that is not text becomes the text of its JSON form, which is refused beyond `max_key` bytes:
/// keys that are maps of maps escape their keys' quotes again at every level, so that a short
/// hostile payload would otherwise double its size per level.
pub(crate) fn to_json(item: Cbor, max_key: usize) -> Result<Value, ConvertError> {
    Ok(match item {
        Cbor::Integer(i) => {
            let i = i128::from(i);
            u64::try_from(i)
                .map(Number::from)
                .or_else(|_| i64::try_from(i).map(Number::from))
                .map(Value::Number)
                .unwrap_or_else(|_| Number::from_f64(i as f64).map_or(Value::Null, Value::Number))
        }
        Cbor::Float(f) => Number::from_f64(f).map_or(Value::Null, Value::Number),
        Cbor::Bytes(bytes) => Value::String(URL_SAFE_NO_PAD.encode(bytes)),
        Cbor::Text(text) => Value::String(text),
        Cbor::Bool(b) => Value::Bool(b),
        Cbor::Tag(_, inner) => to_json(*inner, max_key)?,
        Cbor::Array(items) => {
            Value::Array(items.into_iter().map(|item| to_json(item, max_key)).collect::<Result<_, _>>()?)
        }
        Cbor::Map(pairs) => {
            let mut map = Map::new();
            for (key, value) in pairs {
                let key = match to_json(key, max_key)? {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                if key.len() > max_key {
                    return Err(ConvertError::TooLarge(max_key));
                }
                map.insert(key, to_json(value, max_key)?);
            }
            Value::Object(map)
        }
        _ => Value::Null,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn json_becomes_the_smallest_cbor() {
        let limits = Limits::default();
        let cbor =
            convert(br#"{"t":1,"v":21.5,"ok":true,"n":null,"s":"x"}"#, Format::Json, Format::Cbor, None, &limits);
        // a5: map(5); 61 74 01: "t" 1; 61 76 f9 4d60: "v" half-float 21.5; 62 6f6b f5: "ok" true;
        // 61 6e f6: "n" null; 61 73 61 78: "s" "x".
        assert_eq!(hex(&cbor.unwrap()), "a56174016176f94d60626f6bf5616ef661736178");
    }

    #[test]
    fn map_keys_that_are_maps_of_maps_cannot_double_the_output_per_level() {
        // {{{...{1: 1}...: 1}: 1}: 1}, 30 levels: each level escapes its key's quotes and
        // backslashes again, 2^30 bytes of key unbounded (a fuzzing find: 40 s of CPU).
        let mut cbor = vec![0xa1; 30];
        cbor.extend([0x01; 31]);
        let refused = convert(&cbor, Format::Cbor, Format::Json, None, &Limits::default());
        assert!(matches!(refused, Err(ConvertError::TooLarge(_))), "{refused:?}");
        // The fuzzer's input (payload_convert, CBOR to JSON), which took 40 s: now at once.
        let found = [
            0xbf, 0xfa, 0x45, 0x01, 0xff, 0xf9, 0x66, 0x66, 0x17, 0x14, 0x45, 0x45, 0x45, 0x45, 0x45, 0xbf, 0x1f, 0x5b,
            0x45, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1,
            0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0xff, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1,
            0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0xa1, 0x45, 0x45, 0x45, 0x75, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45,
            0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0x45, 0xff, 0xf9, 0x66, 0x66, 0x17, 0x14, 0x45, 0x45,
            0x45, 0x45, 0x45, 0x45, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34,
            0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x34, 0x45, 0x75, 0x34, 0x1b, 0x34, 0x34,
            0xff,
        ];
        assert!(convert(&found, Format::Cbor, Format::Json, None, &Limits::default()).is_err());
        let shallow = convert(&[0xa1, 0xa1, 0x01, 0x01, 0x01], Format::Cbor, Format::Json, None, &Limits::default());
        assert_eq!(String::from_utf8(shallow.unwrap()).unwrap(), r#"{"{\"1\":1}":1}"#);
    }

    #[test]
    fn bytes_tags_and_odd_keys_map_to_json_as_rfc_8949_says() {
        // {1: h'00ff', "d": 1(1700000000), "f": NaN}
        let cbor = [
            0xa3, 0x01, 0x42, 0x00, 0xff, 0x61, b'd', 0xc1, 0x1a, 0x65, 0x53, 0xf1, 0x00, 0x61, b'f', 0xf9, 0x7e, 0x00,
        ];
        let json = convert(&cbor, Format::Cbor, Format::Json, None, &Limits::default()).unwrap();
        assert_eq!(String::from_utf8(json).unwrap(), r#"{"1":"AP8","d":1700000000,"f":null}"#);
    }

    #[test]
    fn undefined_infinities_bignums_and_odd_keys() {
        let json = |cbor: &[u8]| {
            convert(cbor, Format::Cbor, Format::Json, None, &Limits::default()).map(|j| String::from_utf8(j).unwrap())
        };
        // [undefined, +Infinity (half), -Infinity (half), 2(h'0100'), 32("abc")]
        let cbor = [
            0x85, 0xf7, 0xf9, 0x7c, 0x00, 0xf9, 0xfc, 0x00, 0xc2, 0x42, 0x01, 0x00, 0xd8, 0x20, 0x63, b'a', b'b', b'c',
        ];
        assert_eq!(json(&cbor).unwrap(), r#"[null,null,null,256,"abc"]"#);
        // {[1, 2]: -2^64}: a key that is an array, an integer beyond 64 bits.
        let cbor = [0xa1, 0x82, 0x01, 0x02, 0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(json(&cbor).unwrap(), r#"{"[1,2]":-1.8446744073709552e+19}"#);
        // simple(16) has no meaning.
        assert!(json(&[0xf0]).is_err());
    }

    #[test]
    fn an_expanding_conversion_stops_at_the_output_bound() {
        // array(100) of zeros: 102 bytes of CBOR, 201 of JSON.
        let cbor: Vec<u8> = [0x98, 100].into_iter().chain([0; 100]).collect();
        let limits = Limits { max_output_bytes: 150, ..Limits::default() };
        assert!(matches!(convert(&cbor, Format::Cbor, Format::Json, None, &limits), Err(ConvertError::TooLarge(150))));
    }

    #[test]
    fn trailing_bytes_and_deep_nesting_are_refused() {
        let limits = Limits::default();
        assert!(convert(&[0x01, 0x02], Format::Cbor, Format::Json, None, &limits).is_err());
        let deep = vec![0x81; 100_000];
        assert!(matches!(convert(&deep, Format::Cbor, Format::Json, None, &limits), Err(ConvertError::TooDeep(32))));
        let tags = vec![0xc1; 100_000];
        assert!(matches!(convert(&tags, Format::Cbor, Format::Json, None, &limits), Err(ConvertError::TooDeep(32))));
        // A generous limit is held to the ceiling, not taken at its word.
        let generous = Limits { max_depth: 1_000_000, ..limits };
        assert!(matches!(convert(&deep, Format::Cbor, Format::Json, None, &generous), Err(ConvertError::TooDeep(128))));
        // Exactly at the limit is fine, one more is not.
        let at = [vec![0x81; 31], vec![0x80]].concat();
        assert!(convert(&at, Format::Cbor, Format::Json, None, &limits).is_ok());
        let over = [vec![0x81; 32], vec![0x80]].concat();
        assert!(matches!(convert(&over, Format::Cbor, Format::Json, None, &limits), Err(ConvertError::TooDeep(32))));
    }
}
