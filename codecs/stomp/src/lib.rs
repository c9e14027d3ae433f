//! Sans-IO STOMP 1.0/1.1/1.2 frame codec for the server side of a connection.
//!
//! This crate owns the wire format only: turning bytes into [`Frame`]s and back, plus the two
//! pure negotiation rules of the CONNECT handshake ([`Version::negotiate`] and
//! [`HeartBeat::negotiate`]). It knows nothing about sockets, clocks, sessions, destinations or
//! brokers; the STOMP front end drives it.
//!
//! * [`Decoder`] is a resumable state machine: feed it a growing `BytesMut`, it returns
//!   `Ok(None)` until a whole frame (or a heart-beat EOL) is buffered, never re-reads bytes it has
//!   already looked at, and enforces every [`Limits`] bound on partial input.
//! * [`Encoder`] writes LF-terminated frames, escapes header text where the negotiated version
//!   requires it and always adds `content-length` to frames with a body.
//!
//! Header names and values are [`Utf8Bytes`]: validated UTF-8 that usually shares the received
//! frame's buffer instead of copying it.
//!
//! Specification: <https://stomp.github.io/stomp-specification-1.2.html>.
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod command;
mod decode;
mod encode;
mod error;
mod escape;
mod frame;
mod headers;
mod heartbeat;
mod limits;
mod text;
mod version;

pub use command::Command;
pub use decode::{Decoded, Decoder};
pub use encode::{Encoder, encode_heartbeat};
pub use error::{DecodeError, EncodeError};
pub use frame::Frame;
pub use headers::Headers;
pub use heartbeat::{HeartBeat, HeartBeatError, HeartBeatSchedule};
pub use limits::Limits;
pub use text::Utf8Bytes;
pub use version::{NegotiationError, UnknownVersion, Version};
