//! base64url without padding (RFC 4648 §5), the token's text, computed
//! rather than looked up: each character comes from a few comparisons and an
//! add, lane by lane over 16 bytes at a time, which the compiler turns into
//! vector instructions (SSE2 on every x86-64, NEON on aarch64) instead of one
//! table load per byte. No secret-dependent memory access either way.
//!
//! It accepts and produces exactly what the `base64` crate's
//! `URL_SAFE_NO_PAD` engine does (no padding, no whitespace, zero trailing
//! bits), which the tests hold it to; the last few bytes go through that
//! engine.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Raw bytes per word: 6 bytes are 8 characters, one 64-bit word of them.
const RAW_WORD: usize = 6;
/// Characters decoded per pass: a stack buffer's worth.
const TEXT_CHUNK: usize = 256;

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
///
/// Two passes over the text: the bytes spread into 6-bit values, eight per
/// 64-bit word; then every value turned into its character, a loop the
/// compiler vectorises.
pub(crate) fn encode_into(raw: &[u8], out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + encoded_len(raw.len()).unwrap_or(0), 0);
    // Whole words, but never the last six bytes: a word is read as eight.
    let words = raw.len().saturating_sub(2) / RAW_WORD;
    let (body, tail) = out[start..].split_at_mut(words * 8);
    for (i, text) in body.chunks_exact_mut(8).enumerate() {
        let at = i * RAW_WORD;
        text.copy_from_slice(&spread(word(&raw[at..at + 8]) >> 16).to_be_bytes());
    }
    for c in body.iter_mut() {
        *c = char_of(*c);
    }
    // The rest is under 8 bytes, and `tail` exactly its length.
    let written = URL_SAFE_NO_PAD
        .encode_slice(&raw[words * RAW_WORD..], tail)
        .unwrap_or(0);
    debug_assert_eq!(written, tail.len());
}

/// Decodes base64url `text` into `out`, which is exactly
/// [`decoded_len`]`(text.len())` bytes long. Fails on any character outside
/// the alphabet, padding, a length no text has, or non-zero trailing bits;
/// `out` is then partly written.
///
/// Two passes per chunk of 256 characters: each character to its 6-bit
/// value, checked, in a loop the compiler vectorises; then eight values to
/// six bytes per 64-bit word.
pub(crate) fn decode_into(text: &[u8], out: &mut [u8]) -> Result<(), ()> {
    if decoded_len(text.len()) != Some(out.len()) {
        return Err(());
    }
    let mut texts = text.chunks_exact(TEXT_CHUNK);
    let mut raws = out.chunks_exact_mut(TEXT_CHUNK / 8 * RAW_WORD);
    for (chunk, raw) in (&mut texts).zip(&mut raws) {
        let chunk: &[u8; TEXT_CHUNK] = chunk.try_into().map_err(|_| ())?;
        let mut sextets = [0_u8; TEXT_CHUNK];
        for i in 0..TEXT_CHUNK {
            sextets[i] = sextet_of(chunk[i]);
        }
        // A character outside the alphabet left its top bit set.
        if sextets.iter().fold(0, |any, &v| any | v) & 0xc0 != 0 {
            return Err(());
        }
        for (lanes, bytes) in sextets.chunks_exact(8).zip(raw.chunks_exact_mut(RAW_WORD)) {
            bytes.copy_from_slice(&pack(word(lanes))[..RAW_WORD]);
        }
    }
    let rest = raws.into_remainder();
    match URL_SAFE_NO_PAD.decode_slice(texts.remainder(), rest) {
        Ok(len) if len == rest.len() => Ok(()),
        _ => Err(()),
    }
}

/// Eight bytes, big-endian.
#[inline]
fn word(bytes: &[u8]) -> u64 {
    u64::from_be_bytes(bytes.try_into().unwrap_or([0; 8]))
}

/// 48 bits (the low ones of `x`, six bytes big-endian) spread into eight
/// 6-bit values, one per byte lane (the first value in the highest lane).
#[inline]
fn spread(x: u64) -> u64 {
    let x = ((x << 8) & 0x00ff_ffff_0000_0000) | (x & 0x0000_0000_00ff_ffff);
    let x = ((x << 4) & 0x0fff_0000_0fff_0000) | (x & 0x0000_0fff_0000_0fff);
    ((x << 2) & 0x3f00_3f00_3f00_3f00) | (x & 0x003f_003f_003f_003f)
}

/// The inverse of [`spread`]: eight 6-bit lanes into six bytes, returned as
/// the first six of eight.
#[inline]
fn pack(x: u64) -> [u8; 8] {
    let x = ((x & 0x3f00_3f00_3f00_3f00) >> 2) | (x & 0x003f_003f_003f_003f);
    let x = ((x & 0x0fff_0000_0fff_0000) >> 4) | (x & 0x0000_0fff_0000_0fff);
    let x = ((x & 0x00ff_ffff_0000_0000) >> 8) | (x & 0x0000_0000_00ff_ffff);
    (x << 16).to_be_bytes()
}

/// 0 → 0x00, 1 → 0xff.
#[inline]
fn mask(bit: bool) -> u8 {
    0_u8.wrapping_sub(u8::from(bit))
}

/// The character of a 6-bit value: `A-Z a-z 0-9 - _`, by adding an offset
/// chosen by comparisons.
#[inline]
fn char_of(value: u8) -> u8 {
    let mut offset = b'A';
    offset ^= mask(value >= 26) & (offset ^ b'a'.wrapping_sub(26));
    offset ^= mask(value >= 52) & (offset ^ b'0'.wrapping_sub(52));
    offset ^= mask(value >= 62) & (offset ^ b'-'.wrapping_sub(62));
    offset ^= mask(value >= 63) & (offset ^ b'_'.wrapping_sub(63));
    value.wrapping_add(offset)
}

/// The 6-bit value of a character, or `0x80` or more when the character is
/// not in the alphabet.
#[inline]
fn sextet_of(c: u8) -> u8 {
    let upper = mask(c.wrapping_sub(b'A') < 26);
    let lower = mask(c.wrapping_sub(b'a') < 26);
    let digit = mask(c.wrapping_sub(b'0') < 10);
    let dash = mask(c == b'-');
    let underscore = mask(c == b'_');
    let offset = (upper & 0_u8.wrapping_sub(b'A'))
        | (lower & 26_u8.wrapping_sub(b'a'))
        | (digit & 52_u8.wrapping_sub(b'0'))
        | (dash & 62_u8.wrapping_sub(b'-'))
        | (underscore & 63_u8.wrapping_sub(b'_'));
    let valid = upper | lower | digit | dash | underscore;
    c.wrapping_add(offset) | (!valid & 0x80)
}

#[cfg(test)]
mod tests {
    use super::*;
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
    fn every_value_maps_to_the_alphabet_and_back() {
        let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
        for (value, &c) in (0_u8..).zip(alphabet) {
            assert_eq!(char_of(value), c);
            assert_eq!(sextet_of(c), value);
        }
        for c in 0..=255_u8 {
            assert_eq!(sextet_of(c) < 64, alphabet.contains(&c), "{c}");
        }
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
