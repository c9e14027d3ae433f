//! SenML (RFC 8428): packs of sensor records, with text labels in JSON and the integer labels
//! of §6 in CBOR.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ciborium::Value as Cbor;
use serde_json::{Map, Value};

use crate::{ConvertError, Format, Limits, cbor};

/// What a label's value must be.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Number,
    Boolean,
    /// Bytes: base64url text in JSON, a byte string in CBOR.
    Data,
}

/// RFC 8428 §6, Table 4 (and `bver`): the JSON label, the CBOR label and the value's kind.
const LABELS: [(&str, i8, Kind); 15] = [
    ("bver", -1, Kind::Number),
    ("bn", -2, Kind::Text),
    ("bt", -3, Kind::Number),
    ("bu", -4, Kind::Text),
    ("bv", -5, Kind::Number),
    ("bs", -6, Kind::Number),
    ("n", 0, Kind::Text),
    ("u", 1, Kind::Text),
    ("v", 2, Kind::Number),
    ("vs", 3, Kind::Text),
    ("vb", 4, Kind::Boolean),
    ("s", 5, Kind::Number),
    ("t", 6, Kind::Number),
    ("ut", 7, Kind::Number),
    ("vd", 8, Kind::Data),
];

fn by_name(name: &str) -> Option<(i8, Kind)> {
    LABELS.iter().find(|(n, _, _)| *n == name).map(|&(_, label, kind)| (label, kind))
}

fn by_label(label: i128) -> Option<(&'static str, Kind)> {
    LABELS.iter().find(|(_, l, _)| i128::from(*l) == label).map(|&(name, _, kind)| (name, kind))
}

/// Checks that `records` is a pack: objects holding SenML labels only, each with a value of
/// its label's type. The reason names the record and the label.
fn check(records: &[Value]) -> Result<(), String> {
    for (index, record) in records.iter().enumerate() {
        let Value::Object(fields) = record else {
            return Err(format!("record {index} is not an object"));
        };
        for (name, value) in fields {
            let (_, kind) = by_name(name).ok_or_else(|| format!("record {index}: {name:?} is not a SenML label"))?;
            let fits = match (kind, value) {
                (Kind::Text, Value::String(_)) | (Kind::Number, Value::Number(_)) | (Kind::Boolean, Value::Bool(_)) => {
                    true
                }
                (Kind::Data, Value::String(text)) => data(text).is_ok(),
                _ => false,
            };
            if !fits {
                let wanted = match kind {
                    Kind::Text => "text",
                    Kind::Number => "a number",
                    Kind::Boolean => "a boolean",
                    Kind::Data => "base64url text",
                };
                return Err(format!("record {index}: {name:?} must be {wanted}"));
            }
        }
    }
    Ok(())
}

/// A data value (`vd`): base64url (RFC 8428 §4.3), padding tolerated.
fn data(text: &str) -> Result<Vec<u8>, base64::DecodeError> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('='))
}

/// A SenML JSON payload, checked: it must be a pack, not merely a value that could become one.
pub(crate) fn from_json(value: Value) -> Result<Value, ConvertError> {
    let bad = |reason: String| ConvertError::decode(Format::SenmlJson, reason);
    let Value::Array(records) = &value else { return Err(bad("a pack is an array".into())) };
    check(records).map_err(bad)?;
    Ok(value)
}

/// `value` as a SenML pack to write in `format`: a pack already (checked), or a flat object of
/// scalars made into one record per member, in order.
pub(crate) fn pack(value: Value, format: Format) -> Result<Value, ConvertError> {
    let not = |reason: String| ConvertError::encode(format, reason);
    match value {
        Value::Array(records) => {
            check(&records).map_err(not)?;
            Ok(Value::Array(records))
        }
        Value::Object(fields) => {
            let mut records = Vec::with_capacity(fields.len());
            for (name, value) in fields {
                let label = match &value {
                    Value::Number(_) => "v",
                    Value::String(_) => "vs",
                    Value::Bool(_) => "vb",
                    _ => return Err(not(format!("member {name:?} is not a number, text or boolean"))),
                };
                records.push(Value::Object(Map::from_iter([("n".into(), Value::String(name)), (label.into(), value)])));
            }
            Ok(Value::Array(records))
        }
        _ => Err(not("only a pack or a flat object of readings becomes SenML".into())),
    }
}

/// A SenML CBOR pack in the JSON data model, with text labels.
pub(crate) fn from_cbor(item: Cbor, limits: &Limits) -> Result<Value, ConvertError> {
    let bad = |reason: String| ConvertError::decode(Format::SenmlCbor, reason);
    let Cbor::Array(records) = item else { return Err(bad("a pack is an array".into())) };
    let mut read = Vec::with_capacity(records.len());
    for (index, record) in records.into_iter().enumerate() {
        let Cbor::Map(pairs) = record else { return Err(bad(format!("record {index} is not a map"))) };
        let mut fields = Map::new();
        for (label, value) in pairs {
            let known = match &label {
                Cbor::Integer(label) => by_label(i128::from(*label)),
                _ => None,
            };
            let (name, kind) = known.ok_or_else(|| bad(format!("record {index}: {label:?} is not a SenML label")))?;
            let value = match (kind, value) {
                (Kind::Data, Cbor::Bytes(bytes)) => Value::String(URL_SAFE_NO_PAD.encode(bytes)),
                (Kind::Data, _) => return Err(bad(format!("record {index}: vd must be a byte string"))),
                (_, other) => cbor::to_json(other, limits.max_output_bytes)?,
            };
            fields.insert(name.into(), value);
        }
        read.push(Value::Object(fields));
    }
    check(&read).map_err(bad)?;
    Ok(Value::Array(read))
}

/// A checked pack as SenML CBOR: integer labels, `vd` as a byte string.
pub(crate) fn to_cbor(pack: &Value, limits: &Limits) -> Result<Vec<u8>, ConvertError> {
    let bad = |reason: String| ConvertError::encode(Format::SenmlCbor, reason);
    let records = pack.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut items = Vec::with_capacity(records.len());
    for record in records {
        let mut pairs = Vec::new();
        for (name, value) in record.as_object().into_iter().flatten() {
            let (label, kind) = by_name(name).ok_or_else(|| bad(format!("{name:?} is not a SenML label")))?;
            let value = match (kind, value) {
                (Kind::Data, Value::String(text)) => Cbor::Bytes(data(text).map_err(|e| bad(format!("vd: {e}")))?),
                (_, Value::String(text)) => Cbor::Text(text.clone()),
                (_, Value::Bool(b)) => Cbor::Bool(*b),
                (_, Value::Number(n)) => match (n.as_i64(), n.as_u64()) {
                    (Some(i), _) => Cbor::Integer(i.into()),
                    (_, Some(u)) => Cbor::Integer(u.into()),
                    _ => Cbor::Float(n.as_f64().unwrap_or_default()),
                },
                _ => return Err(bad(format!("the value of {name:?} has the wrong type"))),
            };
            pairs.push((Cbor::Integer(label.into()), value));
        }
        items.push(Cbor::Map(pairs));
    }
    cbor::write(&Cbor::Array(items), Format::SenmlCbor, limits)
}

#[cfg(test)]
mod tests {
    use crate::{ConvertError, Format, Limits, convert};

    const PACK: &str = r#"[{"bn":"urn:dev:ow:10e2073a01080063:","n":"temp","u":"Cel","v":23.1,"t":1.276020076e9}]"#;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn senml_json_and_cbor_carry_the_same_pack() {
        let limits = Limits::default();
        let one = r#"[{"n":"t","v":1,"vd":"AP8"}]"#;
        let cbor = convert(one.as_bytes(), Format::SenmlJson, Format::SenmlCbor, None, &limits).unwrap();
        // 81: array(1); a3: map(3); 00 61 74: n "t"; 02 01: v 1; 08 42 00ff: vd h'00ff'.
        assert_eq!(hex(&cbor), "81a30061740201084200ff");
        let back = convert(&cbor, Format::SenmlCbor, Format::SenmlJson, None, &limits).unwrap();
        assert_eq!(String::from_utf8(back).unwrap(), one);
        // 81: array(1); a3: map(3); 21 62 642f: bn (-2) "d/"; 00 61 74: n "t"; 02 f9 4d60: v
        // 21.5 as a half-precision float.
        let named = convert(br#"[{"bn":"d/","n":"t","v":21.5}]"#, Format::SenmlJson, Format::SenmlCbor, None, &limits);
        assert_eq!(hex(&named.unwrap()), "81a32162642f00617402f94d60");
        let big = convert(PACK.as_bytes(), Format::SenmlJson, Format::SenmlCbor, None, &limits).unwrap();
        let back = convert(&big, Format::SenmlCbor, Format::Json, None, &limits).unwrap();
        assert_eq!(String::from_utf8(back).unwrap(), PACK.replace("1.276020076e9", "1276020076.0"));
    }

    #[test]
    fn a_flat_object_of_readings_becomes_a_pack_and_anything_else_does_not() {
        let limits = Limits::default();
        let senml =
            convert(br#"{"temp":21.5,"door":"open","on":true}"#, Format::Json, Format::SenmlJson, None, &limits);
        assert_eq!(
            String::from_utf8(senml.unwrap()).unwrap(),
            r#"[{"n":"temp","v":21.5},{"n":"door","vs":"open"},{"n":"on","vb":true}]"#
        );
        assert!(convert(br#"{"a":{"b":1}}"#, Format::Json, Format::SenmlJson, None, &limits).is_err());
        assert!(convert(br#"[{"x":1}]"#, Format::Json, Format::SenmlCbor, None, &limits).is_err());
        assert!(convert(br#"[{"v":"text"}]"#, Format::SenmlJson, Format::Json, None, &limits).is_err());
        assert!(convert(br#"[1]"#, Format::Json, Format::SenmlJson, None, &limits).is_err());
        assert!(convert(br#""x""#, Format::Json, Format::SenmlJson, None, &limits).is_err());
    }

    #[test]
    fn senml_payloads_are_checked_on_reading() {
        let limits = Limits::default();
        let read = |payload: &[u8], from| convert(payload, from, Format::Json, None, &limits);
        // A flat object could become a pack, but a SenML payload must be one.
        assert!(matches!(read(br#"{"temp":1}"#, Format::SenmlJson), Err(ConvertError::Decode { .. })));
        assert!(read(br#"[{"n":1}]"#, Format::SenmlJson).is_err());
        assert!(read(br#"[{"vb":"true"}]"#, Format::SenmlJson).is_err());
        assert!(read(br#"[{"vd":"!!"}]"#, Format::SenmlJson).is_err());
        assert!(read(br#"[{"n":"a","x":1}]"#, Format::SenmlJson).is_err());
        // [{"n": "t"}] with a text label, which SenML CBOR does not use.
        assert!(read(&[0x81, 0xa1, 0x61, b'n', 0x61, b't'], Format::SenmlCbor).is_err());
        // [{99: 1}]: no such label.
        assert!(read(&[0x81, 0xa1, 0x18, 99, 0x01], Format::SenmlCbor).is_err());
        // [{8: "AP8"}]: vd as text.
        assert!(read(&[0x81, 0xa1, 0x08, 0x63, b'A', b'P', b'8'], Format::SenmlCbor).is_err());
        assert!(read(&[0xa0], Format::SenmlCbor).is_err());
        // The same format out as in: checked, then returned byte for byte.
        let spaced = br#"[ {"n":"t", "v":1} ]"#;
        assert_eq!(convert(spaced, Format::SenmlJson, Format::SenmlJson, None, &limits).unwrap(), spaced);
    }
}
