//! [`Utf8Bytes`]: UTF-8 text backed by a shared [`Bytes`] buffer.
//!
//! STOMP header names and values must be UTF-8 (spec "Value Encoding"), and the server reads
//! many of them (destination, id, receipt…) on the hot path. Storing them as slices of the
//! received frame avoids one allocation per header while still handing out `&str`. This module
//! owns the only `unsafe` in the crate, and its soundness rests on this file alone: every
//! constructor either starts from a `str` or validates the bytes.
#![allow(unsafe_code)]

use std::borrow::Borrow;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::ops::Deref;
use std::str::Utf8Error;

use bytes::Bytes;

/// Immutable UTF-8 text that shares its storage, so cloning it or slicing it out of a received
/// frame costs a reference-count increment instead of a copy.
///
/// Dereferences to `str`; compare it with `==` against `&str`.
#[derive(Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Utf8Bytes(Bytes);

impl Utf8Bytes {
    /// Wraps a string literal without copying it: the cheap way to write fixed header names.
    pub const fn from_static(text: &'static str) -> Self {
        Self(Bytes::from_static(text.as_bytes()))
    }

    /// Validates `bytes` as UTF-8 and keeps them without copying.
    pub fn from_utf8(bytes: Bytes) -> Result<Self, Utf8Error> {
        std::str::from_utf8(&bytes)?;
        Ok(Self(bytes))
    }

    /// The text as a string slice.
    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor of `Utf8Bytes` either takes a `str`/`String` or runs
        // `std::str::from_utf8` on the bytes, and the bytes are never mutated afterwards
        // (`Bytes` is immutable).
        unsafe { std::str::from_utf8_unchecked(&self.0) }
    }

    /// The underlying bytes, e.g. to move a header value into a message property unchanged.
    pub fn as_bytes(&self) -> &Bytes {
        &self.0
    }

    /// Gives up the UTF-8 guarantee and returns the shared buffer.
    pub fn into_bytes(self) -> Bytes {
        self.0
    }
}

impl Deref for Utf8Bytes {
    type Target = str;

    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Utf8Bytes {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for Utf8Bytes {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Borrow<str> for Utf8Bytes {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

// Hash must agree with `str`'s hash because of the `Borrow<str>` impl (`Bytes` hashes as a
// slice, which adds a length prefix that `str` does not).
impl Hash for Utf8Bytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_str().hash(state);
    }
}

impl From<String> for Utf8Bytes {
    fn from(text: String) -> Self {
        Self(Bytes::from(text))
    }
}

/// Copies the text; use [`Utf8Bytes::from_static`] for literals to avoid the copy.
impl From<&str> for Utf8Bytes {
    fn from(text: &str) -> Self {
        Self(Bytes::copy_from_slice(text.as_bytes()))
    }
}

impl From<&String> for Utf8Bytes {
    fn from(text: &String) -> Self {
        Self::from(text.as_str())
    }
}

impl TryFrom<Bytes> for Utf8Bytes {
    type Error = Utf8Error;

    fn try_from(bytes: Bytes) -> Result<Self, Utf8Error> {
        Self::from_utf8(bytes)
    }
}

impl From<Utf8Bytes> for Bytes {
    fn from(text: Utf8Bytes) -> Bytes {
        text.0
    }
}

impl PartialEq<str> for Utf8Bytes {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Utf8Bytes {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<Utf8Bytes> for str {
    fn eq(&self, other: &Utf8Bytes) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Utf8Bytes> for &str {
    fn eq(&self, other: &Utf8Bytes) -> bool {
        *self == other.as_str()
    }
}

impl fmt::Debug for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Utf8Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn rejects_invalid_utf8() {
        assert!(Utf8Bytes::from_utf8(Bytes::from_static(b"\xff")).is_err());
        assert_eq!(Utf8Bytes::from_utf8(Bytes::from_static("é".as_bytes())).unwrap(), "é");
    }

    #[test]
    fn hashes_like_str_so_set_lookups_by_str_work() {
        let mut set = HashSet::new();
        set.insert(Utf8Bytes::from_static("destination"));
        assert!(set.contains("destination"));
    }
}
