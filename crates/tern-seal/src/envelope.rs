//! The plaintext inside a `t1` or `t2` token: a versioned, length-checked binary
//! envelope. Every field has a fixed size or a length prefix, and trailing
//! bytes are refused, so one byte string parses in exactly one way (rule
//! `state-untrusted`).
//!
//! Layout (integers big-endian):
//!
//! | bytes | field                                             |
//! |-------|---------------------------------------------------|
//! | 1     | envelope version, [`VERSION`]                     |
//! | 16    | state id                                          |
//! | 4     | round                                             |
//! | 8     | issued at, unix seconds                           |
//! | 8     | expires at, unix seconds                          |
//! | 32    | SHA-256 of the audience                           |
//! | 32    | HMAC-SHA256 of the principal (principal-MAC key)  |
//! | 1 + n | method, UTF-8, length-prefixed (n ≤ 255)          |
//! | 32    | SHA-256 of the target                             |
//! | 32    | arguments digest (SHA-256 of JCS)                 |
//! | 4 + m | payload, length-prefixed                          |

use crate::OpenFailure;

/// The envelope format version.
pub(crate) const VERSION: u8 = 1;

/// Bytes of an envelope besides the method and payload.
pub(crate) const FIXED_LEN: usize = 1 + 16 + 4 + 8 + 8 + 32 + 32 + 1 + 32 + 32 + 4;

/// The fields of an envelope, borrowing its variable-length parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Envelope<'a> {
    pub(crate) state_id: [u8; 16],
    pub(crate) round: u32,
    pub(crate) issued_at: u64,
    pub(crate) expires_at: u64,
    pub(crate) audience: [u8; 32],
    pub(crate) principal: [u8; 32],
    pub(crate) method: &'a [u8],
    pub(crate) target: [u8; 32],
    pub(crate) arguments: [u8; 32],
    pub(crate) payload: &'a [u8],
}

impl<'a> Envelope<'a> {
    /// The encoded length of an envelope with this method and payload length,
    /// or `None` when a field is too long for its length prefix.
    pub(crate) fn encoded_len(method_len: usize, payload_len: usize) -> Option<usize> {
        u8::try_from(method_len).ok()?;
        u32::try_from(payload_len).ok()?;
        FIXED_LEN.checked_add(method_len)?.checked_add(payload_len)
    }

    /// Appends the encoding to `out`. The caller has checked the lengths with
    /// [`Envelope::encoded_len`]; a field that is too long is cut to its prefix's
    /// maximum rather than written with a wrong prefix.
    pub(crate) fn write_to(&self, out: &mut Vec<u8>) {
        out.push(VERSION);
        out.extend_from_slice(&self.state_id);
        out.extend_from_slice(&self.round.to_be_bytes());
        out.extend_from_slice(&self.issued_at.to_be_bytes());
        out.extend_from_slice(&self.expires_at.to_be_bytes());
        out.extend_from_slice(&self.audience);
        out.extend_from_slice(&self.principal);
        let method_len = u8::try_from(self.method.len()).unwrap_or(u8::MAX);
        out.push(method_len);
        out.extend_from_slice(&self.method[..usize::from(method_len)]);
        out.extend_from_slice(&self.target);
        out.extend_from_slice(&self.arguments);
        let payload_len = u32::try_from(self.payload.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&payload_len.to_be_bytes());
        // u32 always fits usize on the 32- and 64-bit targets Rust's std runs on.
        let payload_len = usize::try_from(payload_len).unwrap_or(usize::MAX);
        out.extend_from_slice(&self.payload[..payload_len.min(self.payload.len())]);
    }

    /// Parses an envelope, refusing an unknown version, short fields and
    /// trailing bytes.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Envelope<'a>, OpenFailure> {
        let mut reader = Reader(bytes);
        let [version] = reader.array::<1>()?;
        if version != VERSION {
            return Err(OpenFailure::UnknownVersion);
        }
        let state_id = reader.array::<16>()?;
        let round = u32::from_be_bytes(reader.array()?);
        let issued_at = u64::from_be_bytes(reader.array()?);
        let expires_at = u64::from_be_bytes(reader.array()?);
        let audience = reader.array()?;
        let principal = reader.array()?;
        let [method_len] = reader.array::<1>()?;
        let method = reader.take(usize::from(method_len))?;
        let target = reader.array()?;
        let arguments = reader.array()?;
        let payload_len = u32::from_be_bytes(reader.array()?);
        let payload_len = usize::try_from(payload_len).map_err(|_| OpenFailure::Malformed)?;
        let payload = reader.take(payload_len)?;
        if !reader.0.is_empty() {
            return Err(OpenFailure::Malformed);
        }
        Ok(Envelope {
            state_id,
            round,
            issued_at,
            expires_at,
            audience,
            principal,
            method,
            target,
            arguments,
            payload,
        })
    }
}

/// A cursor that never reads past its slice.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], OpenFailure> {
        let (head, rest) = self.0.split_at_checked(len).ok_or(OpenFailure::Malformed)?;
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], OpenFailure> {
        let (head, rest) = self
            .0
            .split_first_chunk::<N>()
            .ok_or(OpenFailure::Malformed)?;
        self.0 = rest;
        Ok(*head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Envelope<'static> {
        Envelope {
            state_id: [0x11; 16],
            round: 0x0102_0304,
            issued_at: 0x0a0b,
            expires_at: 0x0c0d,
            audience: [0xaa; 32],
            principal: [0xbb; 32],
            method: b"tools/call",
            target: [0xcc; 32],
            arguments: [0xdd; 32],
            payload: b"xyz",
        }
    }

    fn encode(envelope: &Envelope<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        envelope.write_to(&mut out);
        out
    }

    /// The exact layout, byte for byte: a change here is a format change and
    /// needs a new version.
    #[test]
    fn layout_is_fixed() {
        let bytes = encode(&sample());
        let mut expected = vec![1];
        expected.extend([0x11; 16]);
        expected.extend([1, 2, 3, 4]);
        expected.extend([0, 0, 0, 0, 0, 0, 0x0a, 0x0b]);
        expected.extend([0, 0, 0, 0, 0, 0, 0x0c, 0x0d]);
        expected.extend([0xaa; 32]);
        expected.extend([0xbb; 32]);
        expected.push(10);
        expected.extend(b"tools/call");
        expected.extend([0xcc; 32]);
        expected.extend([0xdd; 32]);
        expected.extend([0, 0, 0, 3]);
        expected.extend(b"xyz");
        assert_eq!(bytes, expected);
        assert_eq!(Some(bytes.len()), Envelope::encoded_len(10, 3));
        assert_eq!(Envelope::parse(&bytes), Ok(sample()));
    }

    #[test]
    fn every_truncation_and_extension_is_refused() {
        let bytes = encode(&sample());
        for len in 0..bytes.len() {
            assert_eq!(Envelope::parse(&bytes[..len]), Err(OpenFailure::Malformed));
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(Envelope::parse(&longer), Err(OpenFailure::Malformed));
    }

    #[test]
    fn unknown_version_is_refused() {
        let mut bytes = encode(&sample());
        bytes[0] = 2;
        assert_eq!(Envelope::parse(&bytes), Err(OpenFailure::UnknownVersion));
    }

    #[test]
    fn over_long_fields_have_no_length() {
        assert_eq!(Envelope::encoded_len(256, 0), None);
        assert_eq!(Envelope::encoded_len(255, 0), Some(FIXED_LEN + 255));
    }
}
