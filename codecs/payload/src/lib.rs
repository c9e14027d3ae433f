//! Payload re-encoding for a translating gateway: a sensor's compact CBOR or Protobuf becomes
//! the JSON a web service reads or the XML a WS-Notification consumer expects, and back.
//!
//! Every conversion goes through the JSON data model (a `serde_json::Value`):
//!
//! - **JSON ↔ CBOR** (RFC 8949): CBOR byte strings become base64url text without padding
//!   (RFC 8949 §6.1), map keys that are not text are written as their JSON text, tags are
//!   dropped (their content kept), and NaN and infinities become `null`.
//! - **JSON ↔ XML** through the W3C XPath 3.1 `json-to-xml` representation: a `map`, `array`,
//!   `string`, `number`, `boolean` or `null` element in `http://www.w3.org/2005/xpath-functions`,
//!   with `key` attributes inside a map. Reading XML back, such a document is its exact inverse;
//!   any other XML maps one way by a simple convention: an element becomes an object keyed by its
//!   local name, its attributes `@name`, an element with text only becomes the text, text beside
//!   children or attributes `#text`, and repeated names an array. Prefixes and namespace
//!   declarations are dropped. A DOCTYPE is refused, so no entity is ever expanded.
//! - **SenML** (RFC 8428): a pack is an array of records; in JSON with text labels, in CBOR with
//!   the integer labels of RFC 8428 §6 and `vd` as a byte string. Other formats become SenML
//!   when they hold a pack or a flat object of scalars (`{"temp":21.5}` becomes
//!   `[{"n":"temp","v":21.5}]`).
//! - **Protobuf** through a message type compiled at run time from the user's `.proto` file
//!   ([`Schema`]), in the canonical proto3 JSON mapping.
//!
//! Nothing here recurses deeper than [`Limits::max_depth`], and nothing grows past
//! [`Limits::max_output_bytes`]: a hostile payload fails to convert, it never takes the broker
//! down.

mod cbor;
mod format;
mod json;
mod protobuf;
mod senml;
mod xml;

use serde_json::Value;

pub use format::Format;
pub use protobuf::{Schema, SchemaError};

/// Bounds on one conversion, so that a payload cannot make the converter use unbounded stack
/// or memory.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deepest nesting of arrays, maps or elements accepted; deeper input is refused.
    pub max_depth: usize,
    /// Largest input and output, in bytes.
    pub max_output_bytes: usize,
}

impl Default for Limits {
    /// 32 levels hold any sensor reading; 1 MiB holds the payloads a gateway should convert.
    fn default() -> Self {
        Limits { max_depth: 32, max_output_bytes: 1024 * 1024 }
    }
}

/// Why a payload was not converted. The broker then delivers it as published.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// The payload is not what its format says.
    #[error("not valid {format}: {reason}")]
    Decode {
        /// The format it claimed to be.
        format: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// The value cannot be written in the target format.
    #[error("cannot be written as {format}: {reason}")]
    Encode {
        /// The target format.
        format: &'static str,
        /// What is in the way.
        reason: String,
    },
    /// Nested deeper than [`Limits::max_depth`].
    #[error("nested deeper than {0} levels")]
    TooDeep(usize),
    /// Input or output larger than [`Limits::max_output_bytes`].
    #[error("larger than {0} bytes")]
    TooLarge(usize),
    /// Protobuf on either side without a message type to read or write it by.
    #[error("Protobuf needs a message type (a .proto file and a message name)")]
    NoSchema,
}

impl ConvertError {
    fn decode(format: Format, reason: impl ToString) -> Self {
        ConvertError::Decode { format: format.label(), reason: reason.to_string() }
    }

    fn encode(format: Format, reason: impl ToString) -> Self {
        ConvertError::Encode { format: format.label(), reason: reason.to_string() }
    }
}

/// Converts `payload` from one format to another. From a format to itself, the payload is
/// checked and returned unchanged. Never panics on any input.
pub fn convert(
    payload: &[u8],
    from: Format,
    to: Format,
    schema: Option<&Schema>,
    limits: &Limits,
) -> Result<Vec<u8>, ConvertError> {
    if payload.len() > limits.max_output_bytes {
        return Err(ConvertError::TooLarge(limits.max_output_bytes));
    }
    let value = decode(payload, from, schema, limits)?;
    json::check_depth(&value, limits.max_depth)?;
    if from == to {
        return Ok(payload.to_vec());
    }
    let out = encode(&value, to, schema, limits)?;
    if out.len() > limits.max_output_bytes {
        return Err(ConvertError::TooLarge(limits.max_output_bytes));
    }
    Ok(out)
}

/// Reads a payload into the JSON data model (SenML as its pack with text labels).
fn decode(payload: &[u8], from: Format, schema: Option<&Schema>, limits: &Limits) -> Result<Value, ConvertError> {
    match from {
        Format::Json => json::parse(payload, limits),
        Format::Cbor => cbor::read(payload, limits),
        Format::Xml => xml::read(payload, limits),
        Format::SenmlJson => senml::pack(json::parse(payload, limits)?, from),
        Format::SenmlCbor => senml::from_cbor(cbor::read_raw(payload, limits)?, limits),
        Format::Protobuf => schema.ok_or(ConvertError::NoSchema)?.decode(payload),
    }
}

/// Writes a value of the JSON data model in `to`.
fn encode(value: &Value, to: Format, schema: Option<&Schema>, limits: &Limits) -> Result<Vec<u8>, ConvertError> {
    match to {
        Format::Json => serde_json::to_vec(value).map_err(|e| ConvertError::encode(to, e)),
        Format::Cbor => cbor::write(value, to),
        Format::Xml => xml::write(value, limits),
        Format::SenmlJson => {
            let pack = senml::pack(value.clone(), to)?;
            serde_json::to_vec(&pack).map_err(|e| ConvertError::encode(to, e))
        }
        Format::SenmlCbor => senml::to_cbor(&senml::pack(value.clone(), to)?),
        Format::Protobuf => schema.ok_or(ConvertError::NoSchema)?.encode(value),
    }
}
