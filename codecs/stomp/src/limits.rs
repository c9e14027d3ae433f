//! [`Limits`]: the bounds the decoder enforces so that no peer can make a connection's memory
//! grow without limit (spec "Size Limits": servers MAY limit header count, header line length
//! and body size, and SHOULD answer ERROR and close when a limit is exceeded).

/// Decoder bounds. Every bound is checked on partial input too: a peer that never ends a line,
/// never sends the NUL, or announces a huge `content-length` is rejected as soon as the
/// buffered bytes (or the announcement) cross the bound, not when the frame completes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest frame in bytes, counted from the first byte of the command line up to and
    /// including the terminating NUL (so: command, headers and body). Checked against both a
    /// declared `content-length` and the bytes actually buffered.
    /// Default: [`Limits::DEFAULT_MAX_FRAME_SIZE`] (1 MiB).
    pub max_frame_size: usize,
    /// Most header entries in one frame, repeated names included.
    /// Default: [`Limits::DEFAULT_MAX_HEADERS`] (64).
    pub max_headers: usize,
    /// Longest header line in bytes, excluding its EOL.
    /// Default: [`Limits::DEFAULT_MAX_HEADER_LINE`] (8 KiB).
    pub max_header_line: usize,
    /// Longest command line in bytes, excluding its EOL. The longest real command is 11 bytes,
    /// so this mainly bounds how much garbage is read before an unknown command is reported.
    /// Default: [`Limits::DEFAULT_MAX_COMMAND_LINE`] (32).
    pub max_command_line: usize,
}

impl Limits {
    /// 1 MiB: generous for IoT payloads, small enough for a 1 GB gateway with many clients.
    pub const DEFAULT_MAX_FRAME_SIZE: usize = 1024 * 1024;
    /// 64 headers: real clients send fewer than 15.
    pub const DEFAULT_MAX_HEADERS: usize = 64;
    /// 8 KiB per header line, the common HTTP server default for the same problem.
    pub const DEFAULT_MAX_HEADER_LINE: usize = 8 * 1024;
    /// 32 bytes: room for every STOMP command with margin.
    pub const DEFAULT_MAX_COMMAND_LINE: usize = 32;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_frame_size: Self::DEFAULT_MAX_FRAME_SIZE,
            max_headers: Self::DEFAULT_MAX_HEADERS,
            max_header_line: Self::DEFAULT_MAX_HEADER_LINE,
            max_command_line: Self::DEFAULT_MAX_COMMAND_LINE,
        }
    }
}
