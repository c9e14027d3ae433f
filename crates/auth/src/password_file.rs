//! Password files in the format of Mosquitto's `mosquitto_passwd`, so that a file users already
//! have works unchanged: one `user:hash` line per user, where the hash is
//!
//! - `$7$ITERATIONS$SALT$HASH`: PBKDF2-HMAC-SHA512 (mosquitto_passwd's default since 2.0,
//!   101 iterations), or
//! - `$6$SALT$HASH`: SHA-512 of the password followed by the salt (older files, `-H sha512`),
//!   salt and hash in standard base64 for both, or
//! - `$argon2id$v=19$m=…,t=…,p=…$SALT$HASH`: argon2id in the PHC string format, as Mosquitto 2.1's
//!   `mosquitto_passwd -H argon2id` and `tolk passwd --argon2id` write it.
//!
//! Empty lines and lines starting with `#` are skipped.

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
    /// `$argon2id$`: the PHC string, checked to be argon2id within [`ARGON2_MAX_MEMORY_KIB`].
    Argon2id(String),
}

/// Most memory an argon2id hash in a password file may ask for per check, in KiB (64 MiB): a
/// login costs that much while it is checked, and a 1 GB Pi must not run out because of a file.
pub const ARGON2_MAX_MEMORY_KIB: u32 = 64 * 1024;

/// `tolk passwd --argon2id` parameters: OWASP's lowest-memory argon2id choice (7 MiB, 5 passes,
/// one lane), so that a login costs a Pi little memory while guessing stays expensive.
pub const ARGON2_PARAMS: (u32, u32, u32) = (7 * 1024, 5, 1);

fn argon2_parse(text: &str) -> Result<argon2::PasswordHash<'_>, String> {
    let hash = argon2::PasswordHash::new(text).map_err(|e| format!("argon2id hash: {e}"))?;
    if hash.algorithm != argon2::Algorithm::Argon2id.ident() {
        return Err(format!("hash type ${}$ is not supported (argon2id only)", hash.algorithm));
    }
    let params = argon2::Params::try_from(&hash).map_err(|e| format!("argon2id parameters: {e}"))?;
    if params.m_cost() > ARGON2_MAX_MEMORY_KIB {
        return Err(format!("argon2id m={} KiB is over the {ARGON2_MAX_MEMORY_KIB} KiB allowed", params.m_cost()));
    }
    Ok(hash)
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
            ["", "argon2id", ..] => {
                argon2_parse(text)?;
                Ok(PasswordHash::Argon2id(text.to_owned()))
            }
            ["", kind, ..] => {
                Err(format!("hash type ${kind}$ is not supported (mosquitto_passwd writes $7$, $6$ or $argon2id$)"))
            }
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
            PasswordHash::Argon2id(text) => {
                use argon2::PasswordVerifier;
                // Parsed and checked at load; the library compares in constant time.
                argon2_parse(text).is_ok_and(|hash| argon2::Argon2::default().verify_password(password, &hash).is_ok())
            }
        }
    }
}

/// mosquitto_passwd's PBKDF2 rounds (Mosquitto 2.0): the default of `tolk passwd`, so that both
/// brokers check a login at the same cost.
pub const DEFAULT_ITERATIONS: u32 = 101;

impl PasswordHash {
    /// A new `$7$` hash of `password` with a random 12-byte salt, as mosquitto_passwd makes.
    pub fn new_pbkdf2(password: &[u8], iterations: NonZeroU32) -> Result<Self, String> {
        use ring::rand::{SecureRandom, SystemRandom};
        let mut salt = vec![0u8; 12];
        SystemRandom::new().fill(&mut salt).map_err(|_| "no system randomness for a salt".to_owned())?;
        let mut hash = vec![0u8; digest::SHA512_OUTPUT_LEN];
        pbkdf2::derive(pbkdf2::PBKDF2_HMAC_SHA512, iterations, &salt, password, &mut hash);
        Ok(PasswordHash::Pbkdf2Sha512 { iterations, salt, hash })
    }

    /// A new argon2id hash of `password` with [`ARGON2_PARAMS`] and a random 16-byte salt.
    pub fn new_argon2id(password: &[u8]) -> Result<Self, String> {
        use argon2::password_hash::{PasswordHasher, SaltString};
        use ring::rand::{SecureRandom, SystemRandom};
        let mut salt = [0u8; 16];
        SystemRandom::new().fill(&mut salt).map_err(|_| "no system randomness for a salt".to_owned())?;
        let salt = SaltString::encode_b64(&salt).map_err(|e| e.to_string())?;
        let (m, t, p) = ARGON2_PARAMS;
        let params = argon2::Params::new(m, t, p, None).map_err(|e| e.to_string())?;
        let hasher = argon2::Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params);
        let hash = hasher.hash_password(password, &salt).map_err(|e| e.to_string())?;
        Ok(PasswordHash::Argon2id(hash.to_string()))
    }
}

impl std::fmt::Display for PasswordHash {
    /// The hash as a password file line holds it after `user:`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PasswordHash::Pbkdf2Sha512 { iterations, salt, hash } => {
                write!(f, "$7${iterations}${}${}", STANDARD.encode(salt), STANDARD.encode(hash))
            }
            PasswordHash::Sha512 { salt, hash } => write!(f, "$6${}${}", STANDARD.encode(salt), STANDARD.encode(hash)),
            PasswordHash::Argon2id(text) => f.write_str(text),
        }
    }
}

/// Sets `user`'s hash in the password file at `path` (`None`: removes the user), keeping every
/// other line as it was; creates the file if missing. Written to a temporary file and renamed,
/// so that a broker reloading meanwhile reads the old file or the new one, never half of one.
pub fn update(path: &Path, user: &str, hash: Option<&PasswordHash>) -> Result<(), String> {
    if user.is_empty() || user.contains(':') || user.contains('\n') {
        return Err(format!("user name {user:?}: must be non-empty, without ':' or line breaks"));
    }
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("cannot read {}: {e}", path.display())),
    };
    let prefix = format!("{user}:");
    let mut lines: Vec<String> = old.lines().filter(|l| !l.starts_with(&prefix)).map(str::to_owned).collect();
    if let Some(hash) = hash {
        lines.push(format!("{user}:{hash}"));
    }
    let mut text = lines.join("\n");
    text.push('\n');
    let temporary = path.with_extension("tolk-new");
    std::fs::write(&temporary, text).map_err(|e| format!("cannot write {}: {e}", temporary.display()))?;
    // The old file's permissions carry over (a password file is often readable by its
    // service only).
    if let Ok(metadata) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&temporary, metadata.permissions());
    }
    std::fs::rename(&temporary, path).map_err(|e| format!("cannot replace {}: {e}", path.display()))
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
    fn a_new_hash_verifies_and_reads_back_as_written() {
        let hash = PasswordHash::new_pbkdf2(b"s3cret", NonZeroU32::new(DEFAULT_ITERATIONS).unwrap()).unwrap();
        assert!(hash.verify(b"s3cret") && !hash.verify(b"secret"));
        let line = hash.to_string();
        assert!(line.starts_with("$7$101$"), "{line}");
        assert_eq!(PasswordHash::parse(&line).unwrap(), hash);
    }

    #[test]
    fn argon2id_hashes_verify_from_the_reference_implementation_and_our_own() {
        // Made by the reference implementation (Debian's `argon2` 20190702):
        // echo -n "dora's pw" | argon2 somesaltsalt16b -id -t 5 -k 7168 -p 1 -e
        let reference =
            "$argon2id$v=19$m=7168,t=5,p=1$c29tZXNhbHRzYWx0MTZi$jXWrJdb71Drd+lbAC9x+IrQWDBf/QWln1dcbdvjRlXo";
        let hash = PasswordHash::parse(reference).unwrap();
        assert!(hash.verify(b"dora's pw") && !hash.verify(b"dora"));
        assert_eq!(hash.to_string(), reference);
        let ours = PasswordHash::new_argon2id(b"s3cret").unwrap();
        let line = ours.to_string();
        assert!(line.starts_with("$argon2id$v=19$m=7168,t=5,p=1$"), "{line}");
        assert!(PasswordHash::parse(&line).unwrap().verify(b"s3cret"));
        // Too much memory per check, or argon2i rather than argon2id: refused at load.
        let greedy =
            "$argon2id$v=19$m=1048576,t=1,p=1$c29tZXNhbHRzYWx0MTZi$jXWrJdb71Drd+lbAC9x+IrQWDBf/QWln1dcbdvjRlXo";
        assert!(PasswordHash::parse(greedy).unwrap_err().contains("KiB"));
        assert!(PasswordHash::parse("$argon2i$v=19$m=7168,t=5,p=1$c29tZXNhbHRzYWx0MTZi$jXWrJdb71Drd").is_err());
    }

    #[test]
    fn malformed_lines_are_named() {
        assert!(parse("alice").unwrap_err().contains("line 1"));
        assert!(parse("# comment\n\nbob:$5$x$y").unwrap_err().contains("line 3"));
        assert!(parse("bob:$7$0$AAAA$AAAA").unwrap_err().contains("iterations"));
        assert!(parse("bob:$6$AAAA$AAAA").unwrap_err().contains("64"));
        assert!(parse(":$6$AAAA$AAAA").unwrap_err().contains("empty user name"));
    }
}
