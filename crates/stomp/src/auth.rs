//! The authentication hook: CONNECT's `login`, `passcode` and `host` go through an
//! [`Authenticator`]. The broker has no user database yet, so the default accepts everyone;
//! the hook exists so that adding one changes no session code.

use std::net::SocketAddr;

/// What a client presented in its CONNECT frame.
#[derive(Debug, Clone, Copy)]
pub struct Credentials<'a> {
    /// The `login` header.
    pub login: Option<&'a str>,
    /// The `passcode` header.
    pub passcode: Option<&'a str>,
    /// The `host` header (the virtual host the client wants; tolk has a single one).
    pub host: Option<&'a str>,
    /// The client's address.
    pub peer: SocketAddr,
}

/// Decides whether a CONNECT may open a session. A refusal is sent to the client as the ERROR
/// frame's `message` and the connection closes with `CloseReason::AuthFailed`.
pub trait Authenticator: Send + Sync + 'static {
    /// `Ok` to accept; `Err(reason)` to refuse.
    fn authenticate(&self, credentials: &Credentials<'_>) -> Result<(), String>;
}

/// Accepts every client: the broker's behaviour until a user database exists.
#[derive(Debug, Clone, Copy, Default)]
pub struct AllowAll;

impl Authenticator for AllowAll {
    fn authenticate(&self, _: &Credentials<'_>) -> Result<(), String> {
        Ok(())
    }
}
