//! [`Command`]: the first line of a STOMP frame (spec "Augmented BNF": `client-command` and
//! `server-command`). Owns the mapping between command names and the enum, nothing else.

use std::fmt;

/// Every command STOMP 1.2 defines. The decoder rejects any other command line with
/// [`crate::DecodeError::UnknownCommand`], so a session only ever matches on known commands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Command {
    /// Client opens a session (all versions).
    Connect,
    /// Client opens a session; the 1.2 alias of CONNECT that HTTP servers cannot mistake for
    /// anything else (spec "CONNECT or STOMP Frame").
    Stomp,
    /// Client publishes a message to a destination.
    Send,
    /// Client registers interest in a destination.
    Subscribe,
    /// Client removes a subscription.
    Unsubscribe,
    /// Client acknowledges consumption of a message.
    Ack,
    /// Client rejects a message (1.1+).
    Nack,
    /// Client starts a transaction.
    Begin,
    /// Client commits a transaction.
    Commit,
    /// Client rolls back a transaction.
    Abort,
    /// Client asks for a graceful close.
    Disconnect,
    /// Server accepts a CONNECT/STOMP.
    Connected,
    /// Server delivers a message to a subscription.
    Message,
    /// Server confirms that a frame carrying a `receipt` header was processed.
    Receipt,
    /// Server reports a failure and then closes the connection.
    Error,
}

impl Command {
    /// All commands, client frames first; useful for exhaustive tests.
    pub const ALL: [Command; 15] = [
        Command::Connect,
        Command::Stomp,
        Command::Send,
        Command::Subscribe,
        Command::Unsubscribe,
        Command::Ack,
        Command::Nack,
        Command::Begin,
        Command::Commit,
        Command::Abort,
        Command::Disconnect,
        Command::Connected,
        Command::Message,
        Command::Receipt,
        Command::Error,
    ];

    /// The command as written on the wire (commands are case-sensitive upper case).
    pub const fn as_str(self) -> &'static str {
        match self {
            Command::Connect => "CONNECT",
            Command::Stomp => "STOMP",
            Command::Send => "SEND",
            Command::Subscribe => "SUBSCRIBE",
            Command::Unsubscribe => "UNSUBSCRIBE",
            Command::Ack => "ACK",
            Command::Nack => "NACK",
            Command::Begin => "BEGIN",
            Command::Commit => "COMMIT",
            Command::Abort => "ABORT",
            Command::Disconnect => "DISCONNECT",
            Command::Connected => "CONNECTED",
            Command::Message => "MESSAGE",
            Command::Receipt => "RECEIPT",
            Command::Error => "ERROR",
        }
    }

    /// Parses a command line (without its EOL); `None` for anything the spec does not define.
    pub fn from_bytes(line: &[u8]) -> Option<Command> {
        Some(match line {
            b"CONNECT" => Command::Connect,
            b"STOMP" => Command::Stomp,
            b"SEND" => Command::Send,
            b"SUBSCRIBE" => Command::Subscribe,
            b"UNSUBSCRIBE" => Command::Unsubscribe,
            b"ACK" => Command::Ack,
            b"NACK" => Command::Nack,
            b"BEGIN" => Command::Begin,
            b"COMMIT" => Command::Commit,
            b"ABORT" => Command::Abort,
            b"DISCONNECT" => Command::Disconnect,
            b"CONNECTED" => Command::Connected,
            b"MESSAGE" => Command::Message,
            b"RECEIPT" => Command::Receipt,
            b"ERROR" => Command::Error,
            _ => return None,
        })
    }

    /// True for frames a client sends; a server session rejects the others from its peer.
    pub const fn is_client_frame(self) -> bool {
        !self.is_server_frame()
    }

    /// True for frames only a server sends (CONNECTED, MESSAGE, RECEIPT, ERROR).
    pub const fn is_server_frame(self) -> bool {
        matches!(self, Command::Connected | Command::Message | Command::Receipt | Command::Error)
    }

    /// Whether header escapes apply to this frame once 1.1+ is negotiated. Spec "Value
    /// Encoding": CONNECT and CONNECTED do not escape, to stay compatible with 1.0. STOMP is
    /// treated like CONNECT because it is the same handshake frame under another name, sent
    /// before the version is known.
    pub const fn uses_header_escapes(self) -> bool {
        !matches!(self, Command::Connect | Command::Stomp | Command::Connected)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for command in Command::ALL {
            assert_eq!(Command::from_bytes(command.as_str().as_bytes()), Some(command));
        }
    }

    #[test]
    fn commands_are_case_sensitive() {
        assert_eq!(Command::from_bytes(b"send"), None);
        assert_eq!(Command::from_bytes(b"SEND "), None);
    }
}
