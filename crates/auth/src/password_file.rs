//! Password files in the format of Mosquitto's `mosquitto_passwd`, so that a file users already
//! have works unchanged: one `user:hash` line per user, where the hash is
//!
//! - `$7$ITERATIONS$SALT$HASH`: PBKDF2-HMAC-SHA512 (mosquitto_passwd's default since 2.0,
//!   101 iterations), or
//! - `$6$SALT$HASH`: SHA-512 of the password followed by the salt (older files, `-H sha512`),
//!
//! salt and hash in standard base64. Empty lines and lines starting with `#` are skipped.

use std::collections::HashMap;
use std::num::NonZeroU32;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use ring::{digest, pbkdf2};

/// One user's stored hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordHash {
    /// `$7$`: PBKDF2-HMAC-SHA512.
    Pbkdf2Sha512 {
        /// Rounds.
        iterations: NonZeroU32,
        /// Salt.
        salt: Vec<u8>,
        /// Derived key (64 bytes from mosquitto_passwd).
        hash: Vec<u8>,
    },
    /// `$6$`: SHA-512(password ‖ salt).
    Sha512 {
        /// Salt.
        salt: Vec<u8>,
        /// Digest.
        hash: Vec<u8>,
    },
}

impl PasswordHash {
    /// Parses the part after `user:`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let decode = |part: &str, what: &str| STANDARD.decode(part).map_err(|e| format!("{what} is not base64: {e}"));
        let parts: Vec<&str> = text.split('$').collect();
        match parts.as_slice() {
            ["", "7", iterations, salt, hash] => {
                let iterations = iterations
                    .parse::<u32>()
                    .ok()
                    .and_then(NonZeroU32::new)
                    .ok_or_else(|| format!("iterations {iterations:?} is not a positive number"))?;
                let (salt, hash) = (decode(salt, "salt")?, decode(hash, "hash")?);
                if hash.is_empty() {
                    return Err("empty hash".into());
                }
                Ok(PasswordHash::Pbkdf2Sha512 { iterations, salt, hash })
            }
            ["", "6", salt, hash] => {
                let (salt, hash) = (decode(salt, "salt")?, decode(hash, "hash")?);
                if hash.len() != digest::SHA512_OUTPUT_LEN {
                    return Err(format!("a $6$ hash has {} bytes, not {}", hash.len(), digest::SHA512_OUTPUT_LEN));
                }
                Ok(PasswordHash::Sha512 { salt, hash })
            }
            ["", kind, ..] => Err(format!("hash type ${kind}$ is not supported (mosquitto_passwd writes $7$ or $6$)")),
            _ => Err("not a mosquitto_passwd hash ($7$… or $6$…)".into()),
        }
    }

    /// Whether `password` matches, in time that does not depend on where they differ.
    pub fn verify(&self, password: &[u8]) -> bool {
        match self {
            PasswordHash::Pbkdf2Sha512 { iterations, salt, hash } => {
                pbkdf2::verify(pbkdf2::PBKDF2_HMAC_SHA512, *iterations, salt, password, hash).is_ok()
            }
            PasswordHash::Sha512 { salt, hash } => {
                let mut context = digest::Context::new(&digest::SHA512);
                context.update(password);
                context.update(salt);
                constant_time_eq(context.finish().as_ref(), hash)
            }
        }
    }
}

/// Compares two byte strings without an early exit.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Reads a password file: user name → hash. Errors name the line.
pub fn read(path: &Path) -> Result<HashMap<String, PasswordHash>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    parse(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Parses a password file's text.
pub fn parse(text: &str) -> Result<HashMap<String, PasswordHash>, String> {
    let mut users = HashMap::new();
    for (number, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let (user, hash) =
            line.split_once(':').ok_or_else(|| format!("line {}: no ':' after the user name", number + 1))?;
        if user.is_empty() {
            return Err(format!("line {}: empty user name", number + 1));
        }
        let hash = PasswordHash::parse(hash).map_err(|e| format!("line {} (user {user:?}): {e}", number + 1))?;
        users.insert(user.to_owned(), hash);
    }
    Ok(users)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_lines_are_named() {
        assert!(parse("alice").unwrap_err().contains("line 1"));
        assert!(parse("# comment\n\nbob:$5$x$y").unwrap_err().contains("line 3"));
        assert!(parse("bob:$7$0$AAAA$AAAA").unwrap_err().contains("iterations"));
        assert!(parse("bob:$6$AAAA$AAAA").unwrap_err().contains("64"));
        assert!(parse(":$6$AAAA$AAAA").unwrap_err().contains("empty user name"));
    }
}
