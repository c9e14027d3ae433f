//! Base64 (RFC 4648 §4, standard alphabet, with padding) for the binary payloads WS-N carries
//! in `tolk:Payload encoding="base64"`. Ten lines each way do not justify a dependency, and
//! none is in the lock file.

use anyhow::{Result, bail};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Encodes `bytes`, padded to a multiple of four characters.
pub fn encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i) & 0x3F) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Decodes base64 text; XML whitespace inside it (line breaks some writers add) is skipped.
pub fn decode(text: &str) -> Result<Vec<u8>> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(4) {
        bail!("base64 text of {} characters is not a multiple of 4", digits.len());
    }
    let mut out = Vec::with_capacity(digits.len() / 4 * 3);
    for (index, quad) in digits.chunks(4).enumerate() {
        let last = index == digits.len() / 4 - 1;
        let padding = quad.iter().rev().take_while(|&&b| b == b'=').count();
        if padding > 2 || (padding > 0 && !last) {
            bail!("misplaced '=' in base64 text");
        }
        let mut n = 0u32;
        for (i, &c) in quad[..4 - padding].iter().enumerate() {
            let Some(value) = ALPHABET.iter().position(|&a| a == c) else {
                bail!("{:?} is not a base64 character", char::from(c));
            };
            n |= (value as u32) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..4 - padding]);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_4648_test_vectors() {
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
    }

    #[test]
    fn every_byte_value_round_trips_and_whitespace_is_skipped() {
        let bytes: Vec<u8> = (0..=255).collect();
        let text = encode(&bytes);
        assert!(text.contains('+') && text.contains('/'));
        let wrapped: String =
            text.as_bytes().chunks(76).map(|l| format!("{}\r\n", std::str::from_utf8(l).unwrap())).collect();
        assert_eq!(decode(&wrapped).unwrap(), bytes);
    }

    #[test]
    fn malformed_text_is_refused() {
        for bad in ["Zg=", "Zg==Zg==", "Z===", "Zm9*", "====", "Zm9v="] {
            assert!(decode(bad).is_err(), "{bad}");
        }
    }
}
