//! base64url without padding (RFC 4648 §5), the token's text, at the
//! speed of the machine's vector unit: `base64-simd` picks AVX2, SSE4.1 or
//! NEON at run time (a scalar loop elsewhere), with no per-byte table walk
//! and no secret-dependent memory access.
//!
//! It accepts and produces exactly what the `base64` crate's
//! `URL_SAFE_NO_PAD` engine does (no padding, no whitespace, zero trailing
//! bits), which the tests hold it to, so each byte string has exactly one
//! accepted text.

use base64_simd::{Out, URL_SAFE_NO_PAD};

/// The length of `raw_len` bytes in base64url without padding, or `None` on
/// overflow.
pub(crate) fn encoded_len(raw_len: usize) -> Option<usize> {
    (raw_len / 3)
        .checked_mul(4)?
        .checked_add([0, 2, 3][raw_len % 3])
}

/// The length `text_len` characters decode to, or `None` when no base64url
/// text without padding has that length.
pub(crate) fn decoded_len(text_len: usize) -> Option<usize> {
    let tail = [Some(0), None, Some(1), Some(2)][text_len % 4]?;
    Some(text_len / 4 * 3 + tail)
}

/// Appends the base64url text of `raw` to `out`.
pub(crate) fn encode_into(raw: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    let Some(len) = encoded_len(raw.len()) else {
        return;
    };
    out.resize(start + len, 0);
    let written = URL_SAFE_NO_PAD.encode(raw, Out::from_slice(&mut out[start..]));
    debug_assert_eq!(written.len(), len);
}

/// Decodes base64url `text` into `out`, which is exactly
/// [`decoded_len`]`(text.len())` bytes long. Fails on any character outside
/// the alphabet, padding, a length no text has, or non-zero trailing bits;
/// `out` is then partly written.
pub(crate) fn decode_into(text: &[u8], out: &mut [u8]) -> Result<(), ()> {
    if decoded_len(text.len()) != Some(out.len()) {
        return Err(());
    }
    let len = out.len();
    match URL_SAFE_NO_PAD.decode(text, Out::from_slice(out)) {
        Ok(written) if written.len() == len => Ok(()),
        _ => Err(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use proptest::prelude::*;

    fn encode(raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_into(raw, &mut out);
        out
    }

    fn decode(text: &[u8]) -> Result<Vec<u8>, ()> {
        let mut out = vec![0; decoded_len(text.len()).ok_or(())?];
        decode_into(text, &mut out).map(|()| out)
    }

    #[test]
    fn lengths_agree_with_the_engine() {
        for len in 0..200 {
            let raw: Vec<u8> = (0..len)
                .map(|i| u8::try_from(i * 37 % 256).unwrap())
                .collect();
            let text = URL_SAFE_NO_PAD.encode(&raw);
            assert_eq!(encoded_len(len), Some(text.len()));
            assert_eq!(encode(&raw), text.as_bytes());
            assert_eq!(decoded_len(text.len()), Some(len));
            assert_eq!(decode(text.as_bytes()), Ok(raw));
        }
        assert_eq!(decoded_len(5), None);
        assert_eq!(encoded_len(usize::MAX), None);
    }

    /// Every byte at every position of a 283-character text (a whole chunk
    /// and a tail) is accepted exactly when the engine accepts it.
    #[test]
    fn every_substitution_is_judged_like_the_engine() {
        let raw: Vec<u8> = (0..212_u8).map(|i| i.wrapping_mul(91)).collect();
        let text = URL_SAFE_NO_PAD.encode(&raw).into_bytes();
        for position in 0..text.len() {
            for c in 0..=255_u8 {
                let mut changed = text.clone();
                changed[position] = c;
                let engine = URL_SAFE_NO_PAD.decode(&changed).map_err(|_| ());
                assert_eq!(decode(&changed), engine, "{position} {c}");
            }
        }
    }

    #[test]
    fn padding_and_trailing_bits_are_refused() {
        let text = URL_SAFE_NO_PAD.encode([1_u8; 13]);
        assert!(decode(format!("{text}==").as_bytes()).is_err());
        // 13 bytes end in 2 characters: the last one's low 4 bits must be 0.
        let mut bits = text.into_bytes();
        let last = bits.len() - 1;
        bits[last] = b'B';
        assert!(decode(&bits).is_err());
        assert!(decode_into(b"AAAA", &mut [0; 2]).is_err());
    }

    proptest! {
        #[test]
        fn matches_the_engine(raw in proptest::collection::vec(any::<u8>(), 0..1200)) {
            let text = URL_SAFE_NO_PAD.encode(&raw);
            prop_assert_eq!(encode(&raw), text.as_bytes());
            prop_assert_eq!(decode(text.as_bytes()), Ok(raw));
        }

        #[test]
        fn decodes_garbage_like_the_engine(text in proptest::collection::vec(any::<u8>(), 0..600)) {
            let engine = URL_SAFE_NO_PAD.decode(&text).map_err(|_| ());
            prop_assert_eq!(decode(&text), engine);
        }
    }
}
