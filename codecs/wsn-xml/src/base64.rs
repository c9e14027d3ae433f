//! RFC 4648 §4 base64 (standard alphabet, padded), for binary payloads inside the tolk
//! payload wrapper: the `base64` crate, plus the whitespace XML Schema's `base64Binary` allows.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

/// Encodes with `=` padding and no line breaks.
pub(crate) fn encode(input: &[u8]) -> String {
    STANDARD.encode(input)
}

/// Decodes, skipping XML whitespace (schema `base64Binary` allows it). `None` on any other
/// character outside the alphabet, on misplaced padding, on a truncated final group, or on
/// non-zero bits after the last byte (a non-canonical encoding).
pub(crate) fn decode(input: &str) -> Option<Vec<u8>> {
    if input.bytes().any(|b| b.is_ascii_whitespace()) {
        let compact: Vec<u8> = input.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        STANDARD.decode(compact).ok()
    } else {
        STANDARD.decode(input).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc4648_vectors() {
        // RFC 4648 §10.
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(encode(plain.as_bytes()), coded);
            assert_eq!(decode(coded).unwrap(), plain.as_bytes());
        }
        assert_eq!(decode("Zm9v\n YmFy").unwrap(), b"foobar");
        for bad in ["Zg=", "Z", "Zg==Zg==", "Zm9v!", "Zh=="] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn round_trip(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            prop_assert_eq!(decode(&encode(&data)).unwrap(), data);
        }
    }
}
