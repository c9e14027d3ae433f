//! Payload re-encoding for a translating gateway: a sensor's compact CBOR or Protobuf becomes
//! the JSON a web service reads or the XML a WS-Notification consumer expects, and back.
//!
//! This crate owns the formats and nothing else: it knows no broker, topic, message or metric,
//! does no I/O (except reading `.proto` files in [`Schema::load`]) and spawns nothing, so the
//! core can call [`convert`] on any thread and a fuzzer can drive it alone.
//!
//! # Mapping rules
//!
//! Every conversion reads the payload into the JSON data model (a `serde_json::Value`, objects
//! keeping their key order) and writes that value in the target format.
//!
//! - **JSON ↔ CBOR** (RFC 8949). From CBOR: byte strings become base64url text without
//!   padding (RFC 8949 §6.1); map keys that are not text are written as their JSON text
//!   (`1` becomes `"1"`); tags are dropped and their content kept (a bignum that fits 64 bits
//!   becomes a number, a larger one the base64url of its bytes); NaN, infinities and
//!   `undefined` become `null`, unassigned simple values are refused; an integer outside 64
//!   bits becomes the nearest float. To CBOR: integers stay integers, floats
//!   take the shortest of half, single and double precision that keeps their value, strings
//!   are text strings. Trailing bytes after the data item are an error.
//! - **JSON ↔ XML** through the W3C XPath 3.1 `json-to-xml` representation (XPath Functions
//!   3.1 §17.5): `{"a":[1,"x",true,null]}` is written
//!   `<map xmlns="http://www.w3.org/2005/xpath-functions"><array key="a"><number>1</number>`
//!   `<string>x</string><boolean>true</boolean><null/></array></map>`. Reading XML back, a
//!   document whose root is one of `map`, `array`, `string`, `number`, `boolean` or `null` in
//!   that namespace (under any prefix) is read as its exact inverse: a number's text is read as
//!   a JSON number when it is one and as an `xs:double` otherwise (`1E3`), keeping its value
//!   though not its spelling (`21.50` becomes `21.5`; `INF` and `NaN` are refused); a boolean
//!   is `true`, `false`, `1` or `0`. The `escaped` and `escaped-key` attributes are not
//!   interpreted, and text XML cannot hold (control characters) is refused on writing.
//!   Any other XML maps one way, by a simple convention: `<reading unit="C"><t>21.5</t>
//!   </reading>` becomes `{"reading":{"@unit":"C","t":"21.5"}}`. An element becomes a member
//!   named by its local name (prefixes and namespace declarations are dropped); an element
//!   with text only and no attributes becomes its text; attributes become `@name` members;
//!   text beside child elements or attributes becomes `#text`; repeated sibling names become
//!   an array; text is trimmed, and whitespace-only text ignored. XML must be UTF-8. A DOCTYPE
//!   is refused, so no entity is ever expanded: only the five predefined entities and
//!   character references are known.
//! - **SenML** (RFC 8428): a pack is an array of records. SenML JSON uses the text labels
//!   (`bn`, `bt`, `bu`, `bv`, `bs`, `bver`, `n`, `u`, `v`, `vs`, `vb`, `vd`, `s`, `t`, `ut`),
//!   SenML CBOR the integer labels of RFC 8428 §6 and `vd` as a byte string (base64url text in
//!   JSON). Labels and their types are checked (`v` a number, `vs` text, `vb` a boolean...).
//!   Converting to SenML from another format, the value must already be a pack (an array of
//!   objects with SenML labels only) or a flat object of scalars, which becomes one record per
//!   member: `{"temp":21.5,"door":"open","on":true}` becomes
//!   `[{"n":"temp","v":21.5},{"n":"door","vs":"open"},{"n":"on","vb":true}]`. Anything else
//!   is an error. From SenML to another format, the pack is written with text labels.
//! - **Protobuf** through a message type compiled at run time from the user's `.proto` file
//!   ([`Schema`]), in the canonical proto3 JSON mapping (lowerCamelCase names, 64-bit integers
//!   as strings, default values left out). Fields the message type does not have are refused.
//!
//! From a format to itself, the payload is checked and returned unchanged.
//!
//! # Bounds
//!
//! Nothing here recurses deeper than [`Limits::max_depth`] (the XML reader keeps an explicit
//! stack, the CBOR reader has ciborium's recursion limit, and every decoded value is measured
//! without recursion before anything recurses on it), and nothing grows far past
//! [`Limits::max_output_bytes`]: a hostile payload fails to convert, it never takes the broker
//! down. [`convert`] never panics.

#![warn(missing_docs)]

mod cbor;
mod format;
mod json;
mod protobuf;
mod senml;
mod xml;

use serde_json::Value;

pub use format::Format;
pub use protobuf::{Schema, SchemaError};

/// The deepest nesting honoured whatever [`Limits::max_depth`] says: serde_json stops at 128
/// levels by itself, and the writers recurse once per level on the caller's stack.
const DEPTH_CEILING: usize = 128;

/// Bounds on one conversion, so that a payload cannot make the converter use unbounded stack
/// or memory.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Deepest nesting of arrays, maps, tags or elements accepted (the outermost counts as
    /// one); deeper input is refused with [`ConvertError::TooDeep`]. Values above 128 act as
    /// 128, since the writers recurse once per level.
    pub max_depth: usize,
    /// Largest input and largest output, in bytes: a larger payload is refused before it is
    /// read, and an output that grows past it is abandoned ([`ConvertError::TooLarge`]).
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

/// Converts `payload` from one format to another, so that each subscriber can receive the
/// encoding it asked for. From a format to itself, the payload is checked and returned
/// unchanged (a subscriber asking for JSON gets JSON, or nothing converted). `schema` is the
/// message type when either side is Protobuf. Never panics on any input.
pub fn convert(
    payload: &[u8],
    from: Format,
    to: Format,
    schema: Option<&Schema>,
    limits: &Limits,
) -> Result<Vec<u8>, ConvertError> {
    let limits = &Limits { max_depth: limits.max_depth.min(DEPTH_CEILING), ..*limits };
    if payload.len() > limits.max_output_bytes {
        return Err(ConvertError::TooLarge(limits.max_output_bytes));
    }
    let value = decode(payload, from, schema, limits)?;
    // Every reader bounds its own depth; this also covers what they cannot see (a Protobuf
    // message nested within prost's own limit of 100, a CBOR tag counted as a level).
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
        Format::SenmlJson => senml::from_json(json::parse(payload, limits)?),
        Format::SenmlCbor => senml::from_cbor(cbor::read_raw(payload, limits)?, limits),
        Format::Protobuf => schema.ok_or(ConvertError::NoSchema)?.decode(payload),
    }
}

/// Writes a value of the JSON data model in `to`.
fn encode(value: &Value, to: Format, schema: Option<&Schema>, limits: &Limits) -> Result<Vec<u8>, ConvertError> {
    match to {
        Format::Json => json::write(value, limits),
        Format::Cbor => cbor::write(value, to, limits),
        Format::Xml => xml::write(value, limits),
        Format::SenmlJson => json::write(&senml::pack(value.clone(), to)?, limits),
        Format::SenmlCbor => senml::to_cbor(&senml::pack(value.clone(), to)?, limits),
        Format::Protobuf => schema.ok_or(ConvertError::NoSchema)?.encode(value, limits),
    }
}

/// An output buffer that refuses to grow past [`Limits::max_output_bytes`], so that a payload
/// which expands (small CBOR integers become longer JSON text) stops at the bound rather than
/// after it.
pub(crate) struct Bounded {
    out: Vec<u8>,
    max: usize,
    overflowed: bool,
}

impl Bounded {
    pub(crate) fn new(limits: &Limits) -> Self {
        Bounded { out: Vec::new(), max: limits.max_output_bytes, overflowed: false }
    }

    /// The bytes written, or why not: [`ConvertError::TooLarge`] if the bound stopped the
    /// writer, else the writer's own error.
    pub(crate) fn finish<E: ToString>(self, written: Result<(), E>, to: Format) -> Result<Vec<u8>, ConvertError> {
        match written {
            _ if self.overflowed => Err(ConvertError::TooLarge(self.max)),
            Ok(()) => Ok(self.out),
            Err(e) => Err(ConvertError::encode(to, e)),
        }
    }
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len().saturating_add(buf.len()) > self.max {
            self.overflowed = true;
            return Err(std::io::Error::other("output limit reached"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
