//! Decode and encode errors. Each variant carries the evidence a server needs for its ERROR
//! frame and log line: what was wrong, on which line of the frame, at which byte offset.
//!
//! Offsets count from the first byte of the offending frame; line numbers are 1-based with the
//! command on line 1, so the first header is on line 2.

use thiserror::Error;

use crate::command::Command;

/// Why the bytes from a peer are not a STOMP frame. Every decode error is fatal for the
/// connection: STOMP has no way to resynchronise inside a stream, so the session answers ERROR
/// (spec "ERROR": the server MUST close the connection after sending it) and closes.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// The command line is longer than [`crate::Limits::max_command_line`] (possibly not yet
    /// terminated).
    #[error("command line longer than {limit} bytes")]
    CommandLineTooLong {
        /// The configured limit.
        limit: usize,
    },
    /// The command line is not one of the spec's commands.
    #[error("unknown command {command:?}")]
    UnknownCommand {
        /// The command text as received (invalid UTF-8 replaced), bounded by the command limit.
        command: String,
    },
    /// A header line is longer than [`crate::Limits::max_header_line`] (possibly not yet
    /// terminated).
    #[error("header line {line} longer than {limit} bytes")]
    HeaderLineTooLong {
        /// Line number within the frame.
        line: usize,
        /// The configured limit.
        limit: usize,
    },
    /// The frame has more header entries than [`crate::Limits::max_headers`].
    #[error("more than {limit} headers")]
    TooManyHeaders {
        /// The configured limit.
        limit: usize,
    },
    /// A header line has no `:` between name and value (spec "Augmented BNF": `header`).
    #[error("header line {line} at offset {offset} has no ':' separator: {snippet:?}")]
    MissingColon {
        /// Line number within the frame.
        line: usize,
        /// Offset of the line's first byte.
        offset: usize,
        /// The start of the line (invalid UTF-8 replaced), at most 64 bytes.
        snippet: String,
    },
    /// A header line starts with `:` (spec "Augmented BNF": names have at least one octet).
    #[error("header line {line} at offset {offset} has an empty name")]
    EmptyHeaderName {
        /// Line number within the frame.
        line: usize,
        /// Offset of the line's first byte.
        offset: usize,
    },
    /// A NUL octet inside a header line. Rejected because many peers end a frame at the first
    /// NUL, so accepting it would let a frame mean different things to different parsers.
    #[error("header line {line} contains a NUL octet at offset {offset}")]
    NulInHeader {
        /// Line number within the frame.
        line: usize,
        /// Offset of the NUL.
        offset: usize,
    },
    /// A backslash not followed by `r`, `n`, `c` or `\` in an escaped frame (spec "Value
    /// Encoding": undefined escapes are a fatal protocol error).
    #[error("header line {line}: undefined escape sequence at offset {offset} (byte after '\\': {found:?})")]
    InvalidEscape {
        /// Line number within the frame.
        line: usize,
        /// Offset of the backslash.
        offset: usize,
        /// The byte after the backslash; `None` when the line ends with it.
        found: Option<u8>,
    },
    /// Header text that is not UTF-8 (spec "Value Encoding": headers are UTF-8).
    #[error("header line {line} is not valid UTF-8 at offset {offset}")]
    InvalidUtf8 {
        /// Line number within the frame.
        line: usize,
        /// Offset of the first invalid byte.
        offset: usize,
    },
    /// The first `content-length` header is not a decimal octet count.
    #[error("header line {line}: invalid content-length {value:?}")]
    InvalidContentLength {
        /// Line number within the frame.
        line: usize,
        /// The value as received (invalid UTF-8 replaced), at most 64 bytes.
        value: String,
    },
    /// The frame is, or would become, larger than [`crate::Limits::max_frame_size`]: either
    /// its `content-length` announces too much or the bytes buffered so far already exceed it.
    #[error("frame of at least {at_least} bytes exceeds the {limit}-byte limit")]
    FrameTooLarge {
        /// Lower bound of the frame's size known when the limit was hit.
        at_least: u64,
        /// The configured limit.
        limit: usize,
    },
    /// The octet after a `content-length`-counted body is not NUL (spec "Header
    /// content-length": the body is exactly that many octets, then the NUL).
    #[error("expected NUL after the {content_length}-byte body at offset {offset}, found {found:#04x}")]
    MissingNul {
        /// The declared body length.
        content_length: usize,
        /// Offset where the NUL was expected.
        offset: usize,
        /// The octet found there.
        found: u8,
    },
    /// A NUL ended the header block of a frame whose `content-length` announces a body, so the
    /// blank line separating headers from the body never came.
    #[error("frame ended at offset {offset} before the blank line, but content-length is {content_length}")]
    UnterminatedHeaders {
        /// Offset of the NUL.
        offset: usize,
        /// The declared body length.
        content_length: usize,
    },
}

/// Why a [`crate::Frame`] cannot be written without producing a frame the peer would read
/// differently. Nothing is written to the buffer when this is returned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EncodeError {
    /// A header contains a character the frame's header encoding cannot carry: NUL anywhere,
    /// CR/LF in CONNECT/CONNECTED or STOMP 1.0 frames (no escaping there), CR under 1.1 (it has
    /// no `\r` escape), or `:` in a name of an unescaped frame.
    #[error("header {name:?} of a {command} frame contains {found:?}, which its header encoding cannot carry")]
    UnrepresentableHeader {
        /// The frame's command.
        command: Command,
        /// The header's name.
        name: String,
        /// The offending character.
        found: char,
    },
    /// A header with an empty name (spec "Augmented BNF": names have at least one octet).
    #[error("{command} frame has a header with an empty name")]
    EmptyHeaderName {
        /// The frame's command.
        command: Command,
    },
    /// The caller set a `content-length` that is not the body's length, which would desync
    /// the peer's parser.
    #[error("content-length {declared:?} does not match the {actual}-byte body")]
    ContentLengthMismatch {
        /// The header value the caller set.
        declared: String,
        /// The body's real length.
        actual: usize,
    },
}
