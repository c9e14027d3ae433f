//! JSON text, and the depth bound every decoded value is held to.

use serde_json::Value;

use crate::{Bounded, ConvertError, Format, Limits};

/// Parses JSON text. serde_json stops at 128 levels by itself; [`check_depth`] holds the value
/// to the configured bound.
pub(crate) fn parse(payload: &[u8], limits: &Limits) -> Result<Value, ConvertError> {
    let value: Value = serde_json::from_slice(payload).map_err(|e| {
        if e.to_string().contains("recursion limit") {
            ConvertError::TooDeep(limits.max_depth)
        } else {
            ConvertError::decode(Format::Json, e)
        }
    })?;
    check_depth(&value, limits.max_depth)?;
    Ok(value)
}

/// Writes a value as compact JSON text, within the output bound.
pub(crate) fn write(value: &Value, limits: &Limits) -> Result<Vec<u8>, ConvertError> {
    let mut out = Bounded::new(limits);
    let written = serde_json::to_writer(&mut out, value);
    out.finish(written, Format::Json)
}

/// Refuses a value nested deeper than `max` arrays and objects, without recursing, so that
/// every writer may recurse on it afterwards.
pub(crate) fn check_depth(value: &Value, max: usize) -> Result<(), ConvertError> {
    let mut stack = vec![(value, 0usize)];
    while let Some((value, depth)) = stack.pop() {
        if !(value.is_array() || value.is_object()) {
            continue;
        }
        if depth >= max {
            return Err(ConvertError::TooDeep(max));
        }
        match value {
            Value::Array(items) => stack.extend(items.iter().map(|child| (child, depth + 1))),
            Value::Object(map) => stack.extend(map.values().map(|child| (child, depth + 1))),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_containers_and_stops_at_the_limit() {
        let limits = Limits { max_depth: 3, ..Limits::default() };
        assert!(parse(br#"{"a":[{"b":1}]}"#, &limits).is_ok());
        assert!(matches!(parse(br#"{"a":[{"b":[1]}]}"#, &limits), Err(ConvertError::TooDeep(3))));
        let deep = "[".repeat(100_000);
        assert!(matches!(parse(deep.as_bytes(), &Limits::default()), Err(ConvertError::TooDeep(32))));
        let closed = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(matches!(parse(closed.as_bytes(), &Limits::default()), Err(ConvertError::TooDeep(32))));
        // Past serde_json's own 128 but within the ceiling-held limit: still TooDeep, not Decode.
        let limits = Limits { max_depth: 500, ..Limits::default() };
        assert!(matches!(
            crate::convert(closed.as_bytes(), Format::Json, Format::Cbor, None, &limits),
            Err(ConvertError::TooDeep(_))
        ));
    }
}
