//! Protobuf through a message type compiled at run time from the user's `.proto` file
//! (protox parses it in Rust, so no `protoc` binary is needed on the gateway).

use std::path::Path;

use prost_reflect::{DynamicMessage, MessageDescriptor, SerializeOptions};
use serde_json::Value;

use crate::{ConvertError, Format, Limits};

/// A Protobuf message type: what a Protobuf payload is read and written by. Protobuf carries no
/// field names, so without one a payload cannot be converted at all. Cheap to clone (the
/// descriptors are shared).
#[derive(Clone, Debug)]
pub struct Schema {
    message: MessageDescriptor,
}

/// A `.proto` file that cannot serve as a schema.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The file does not compile (it is missing, or its syntax or an import is wrong).
    #[error("{file}: {reason}")]
    Compile {
        /// The file named in the configuration.
        file: String,
        /// The compiler's message.
        reason: String,
    },
    /// The file compiles but holds no message by that name.
    #[error("{file} has no message {message:?} (give the full name, package included)")]
    NoMessage {
        /// The file named in the configuration.
        file: String,
        /// The name asked for.
        message: String,
    },
}

impl Schema {
    /// Compiles `file`, looking for its imports beside it, and picks the message type named
    /// `message` in full (`tolk.test.Reading`). Done once, when the broker starts, so that a
    /// mistake in the file stops the start with a message naming the file, rather than every
    /// payload failing later.
    pub fn load(file: &Path, message: &str) -> Result<Schema, SchemaError> {
        let shown = file.display().to_string();
        let compile = |reason: String| SchemaError::Compile { file: shown.clone(), reason };
        let dir = file.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = file.file_name().ok_or_else(|| compile("not a file".into()))?;
        let mut compiler = protox::Compiler::new([dir]).map_err(|e| compile(e.to_string()))?;
        compiler.include_imports(true);
        compiler.open_file(name).map_err(|e| compile(e.to_string()))?;
        let message = compiler
            .descriptor_pool()
            .get_message_by_name(message)
            .ok_or_else(|| SchemaError::NoMessage { file: shown.clone(), message: message.to_owned() })?;
        Ok(Schema { message })
    }

    /// The message type's full name, for logs and the broker's configuration report.
    pub fn message_name(&self) -> &str {
        self.message.full_name()
    }

    /// A Protobuf payload in the canonical proto3 JSON mapping.
    pub(crate) fn decode(&self, payload: &[u8]) -> Result<Value, ConvertError> {
        let message = DynamicMessage::decode(self.message.clone(), payload)
            .map_err(|e| ConvertError::decode(Format::Protobuf, e))?;
        message
            .serialize_with_options(serde_json::value::Serializer, &SerializeOptions::new())
            .map_err(|e| ConvertError::decode(Format::Protobuf, e))
    }

    /// A value in the proto3 JSON mapping as a Protobuf payload; unknown fields are refused.
    pub(crate) fn encode(&self, value: &Value, limits: &Limits) -> Result<Vec<u8>, ConvertError> {
        use prost_reflect::prost::Message;
        let message = DynamicMessage::deserialize(self.message.clone(), value)
            .map_err(|e| ConvertError::encode(Format::Protobuf, e))?;
        // The size is known before a byte is written.
        if message.encoded_len() > limits.max_output_bytes {
            return Err(ConvertError::TooLarge(limits.max_output_bytes));
        }
        Ok(message.encode_to_vec())
    }
}
