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

/// `value` as a SenML pack: a pack already (checked), or a flat object of scalars made into
/// one record per field.
pub(crate) fn pack(value: Value, format: Format) -> Result<Value, ConvertError> {
    let not = |reason: String| ConvertError::Encode { format: format.label(), reason };
    match value {
        Value::Array(records) => {
            for record in &records {
                let Value::Object(fields) = record else {
                    return Err(not("a pack holds only records (objects)".into()));
                };
                for (name, value) in fields {
                    let (_, kind) = by_name(name).ok_or_else(|| not(format!("{name:?} is not a SenML label")))?;
                    let fits = match kind {
                        Kind::Text | Kind::Data => value.is_string(),
                        Kind::Number => value.is_number(),
                        Kind::Boolean => value.is_boolean(),
                    };
                    if !fits {
                        return Err(not(format!("the value of {name:?} has the wrong type")));
                    }
                }
            }
            Ok(Value::Array(records))
        }
        Value::Object(fields) => {
            let mut records = Vec::with_capacity(fields.len());
            for (name, value) in fields {
                let label = match &value {
                    Value::Number(_) => "v",
                    Value::String(_) => "vs",
                    Value::Bool(_) => "vb",
                    _ => return Err(not(format!("field {name:?} is not a number, text or boolean"))),
                };
                records.push(Value::Object(Map::from_iter([("n".into(), Value::String(name)), (label.into(), value)])));
            }
            Ok(Value::Array(records))
        }
        _ => Err(not("only a pack or a flat object of readings becomes SenML".into())),
    }
}

/// A SenML CBOR pack in the JSON data model, with text labels.
pub(crate) fn from_cbor(item: Cbor, _limits: &Limits) -> Result<Value, ConvertError> {
    let bad = |reason: &str| ConvertError::decode(Format::SenmlCbor, reason);
    let Cbor::Array(records) = item else { return Err(bad("a pack is an array")) };
    let mut checked = Vec::with_capacity(records.len());
    for record in records {
        let Cbor::Map(pairs) = record else { return Err(bad("a record is a map")) };
        let mut fields = Map::new();
        for (label, value) in pairs {
            let Cbor::Integer(label) = label else { return Err(bad("a label is an integer")) };
            let (name, kind) = by_label(i128::from(label)).ok_or_else(|| bad("an unknown label"))?;
            let value = match (kind, value) {
                (Kind::Data, Cbor::Bytes(bytes)) => Value::String(URL_SAFE_NO_PAD.encode(bytes)),
                (Kind::Data, _) => return Err(bad("vd is a byte string")),
                (_, other) => cbor::to_json(other),
            };
            fields.insert(name.into(), value);
        }
        checked.push(Value::Object(fields));
    }
    pack(Value::Array(checked), Format::SenmlCbor).map_err(|e| ConvertError::decode(Format::SenmlCbor, e))
}

/// A checked pack as SenML CBOR.
pub(crate) fn to_cbor(pack: &Value) -> Result<Vec<u8>, ConvertError> {
    let bad = |reason: String| ConvertError::encode(Format::SenmlCbor, reason);
    let records = pack.as_array().map(Vec::as_slice).unwrap_or_default();
    let mut items = Vec::with_capacity(records.len());
    for record in records {
        let mut pairs = Vec::new();
        for (name, value) in record.as_object().into_iter().flatten() {
            let (label, kind) = by_name(name).ok_or_else(|| bad(format!("{name:?} is not a SenML label")))?;
            let value = match (kind, value) {
                (Kind::Data, Value::String(text)) => Cbor::Bytes(
                    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).map_err(|e| bad(format!("vd: {e}")))?,
                ),
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
    let mut out = Vec::new();
    ciborium::ser::into_writer(&Cbor::Array(items), &mut out).map_err(|e| bad(e.to_string()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::{Format, Limits, convert};

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
        assert_eq!(hex(&cbor), "81a3006174020108420 0ff".replace(' ', ""));
        let back = convert(&cbor, Format::SenmlCbor, Format::SenmlJson, None, &limits).unwrap();
        assert_eq!(String::from_utf8(back).unwrap(), one);
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
    }
}
