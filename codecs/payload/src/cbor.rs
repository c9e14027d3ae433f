//! CBOR (RFC 8949) to and from the JSON data model.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ciborium::Value as Cbor;
use serde_json::{Map, Number, Value};

use crate::{ConvertError, Format, Limits};

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
    Ok(to_json(read_raw(payload, limits)?))
}

/// Writes a value as CBOR: integers as integers, floats in the shortest form that keeps them.
pub(crate) fn write(value: &Value, format: Format) -> Result<Vec<u8>, ConvertError> {
    let mut out = Vec::new();
    ciborium::ser::into_writer(value, &mut out).map_err(|e| ConvertError::encode(format, e))?;
    Ok(out)
}

/// One CBOR item in the JSON data model. Recursion is bounded by the reader's limit.
pub(crate) fn to_json(item: Cbor) -> Value {
    match item {
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
        Cbor::Tag(_, inner) => to_json(*inner),
        Cbor::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Cbor::Map(pairs) => {
            let mut map = Map::new();
            for (key, value) in pairs {
                let key = match to_json(key) {
                    Value::String(text) => text,
                    other => other.to_string(),
                };
                map.insert(key, to_json(value));
            }
            Value::Object(map)
        }
        _ => Value::Null,
    }
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
    fn bytes_tags_and_odd_keys_map_to_json_as_rfc_8949_says() {
        // {1: h'00ff', "d": 1(1700000000), "f": NaN}
        let cbor = [
            0xa3, 0x01, 0x42, 0x00, 0xff, 0x61, b'd', 0xc1, 0x1a, 0x65, 0x53, 0xf1, 0x00, 0x61, b'f', 0xf9, 0x7e, 0x00,
        ];
        let json = convert(&cbor, Format::Cbor, Format::Json, None, &Limits::default()).unwrap();
        assert_eq!(String::from_utf8(json).unwrap(), r#"{"1":"AP8","d":1700000000,"f":null}"#);
    }

    #[test]
    fn trailing_bytes_and_deep_nesting_are_refused() {
        let limits = Limits::default();
        assert!(convert(&[0x01, 0x02], Format::Cbor, Format::Json, None, &limits).is_err());
        let deep = vec![0x81; 100_000];
        assert!(matches!(convert(&deep, Format::Cbor, Format::Json, None, &limits), Err(ConvertError::TooDeep(_))));
    }
}
