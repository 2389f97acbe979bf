//! The token format versions, and what each one fixes: the AEAD, its nonce
//! and the domain-separation label of its associated data.
//!
//! - `t1`: XChaCha20-Poly1305, a 24-byte nonce.
//! - `t2`: AES-256-GCM-SIV (RFC 8452), a 12-byte nonce. Its AES rounds and
//!   POLYVAL multiplications run on the CPU's AES and carry-less multiply
//!   instructions (AES-NI and PCLMULQDQ on x86-64, the `ARMv8` cryptography
//!   extension on aarch64), chosen at run time, with a constant-time software
//!   fallback: on a 1 KiB state it seals and opens about three times faster
//!   than `t1` (BENCHMARKS.md). GCM-SIV derives a key per nonce and is
//!   misuse-resistant: a repeated random nonce reveals only that two
//!   plaintexts were equal, never the key or the plaintext.
//!
//! Both carry the same envelope (`envelope.rs`) and the same principal MAC;
//! each version has its own AEAD subkey (HKDF `info`
//! `tern/requestState/<version>/aead-key`), so no key is ever used with two
//! algorithms.

use core::fmt;

/// A sealed-token format version: the prefix of a token (`t1.…`, `t2.…`).
///
/// A [`Sealer`](crate::Sealer) opens every version this build knows and
/// seals the one its [`KeyRing`](crate::KeyRing) names
/// ([`KeyRing::seal_version`](crate::KeyRing::seal_version), the key file's
/// `seal=` entry). A key file seals [`TokenVersion::T1`] until it says
/// `seal=t2`, which an operator writes once every replica runs a release
/// that opens `t2`; a ring made by [`KeyRing::generate`](crate::KeyRing::generate)
/// (one process's own) seals `t2`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TokenVersion {
    /// `t1`: XChaCha20-Poly1305. The default of a key file.
    #[default]
    T1,
    /// `t2`: AES-256-GCM-SIV, with the CPU's AES instructions.
    T2,
}

impl TokenVersion {
    /// Every version this build opens.
    pub const ALL: [TokenVersion; 2] = [TokenVersion::T1, TokenVersion::T2];

    /// The token prefix: `t1` or `t2`.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenVersion::T1 => "t1",
            TokenVersion::T2 => "t2",
        }
    }

    /// The version a prefix names, if this build knows it.
    pub fn from_prefix(prefix: &str) -> Option<TokenVersion> {
        TokenVersion::ALL
            .into_iter()
            .find(|version| version.as_str() == prefix)
    }

    /// Bytes of the AEAD nonce at the start of the raw token.
    pub(crate) fn nonce_len(self) -> usize {
        match self {
            TokenVersion::T1 => 24,
            TokenVersion::T2 => 12,
        }
    }

    /// The associated data's label, before the zero byte and the key id.
    pub(crate) fn aad_label(self) -> &'static [u8; AAD_LABEL_LEN] {
        match self {
            TokenVersion::T1 => b"tern/requestState/t1",
            TokenVersion::T2 => b"tern/requestState/t2",
        }
    }
}

impl fmt::Display for TokenVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Length of every version's associated-data label, with its zero byte
/// excluded.
pub(crate) const AAD_LABEL_LEN: usize = 20;

/// Bytes of the AEAD tag at the end of the raw token, in every version.
pub(crate) const TAG_LEN: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_round_trip() {
        for version in TokenVersion::ALL {
            assert_eq!(TokenVersion::from_prefix(version.as_str()), Some(version));
            assert_eq!(version.to_string(), version.as_str());
        }
        assert_eq!(TokenVersion::from_prefix("t3"), None);
        assert_eq!(TokenVersion::from_prefix("T1"), None);
        assert_eq!(TokenVersion::default(), TokenVersion::T1);
    }
}
