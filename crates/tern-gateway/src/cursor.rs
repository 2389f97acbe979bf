//! The merged lists' cursors: opaque and tamper-proof, the same on every
//! replica with the same key. A cursor is base64url of the list's tag (one
//! byte), the offset (8 bytes, big-endian) and the first 16 bytes of
//! HMAC-SHA256 over both under the cursor key. A cursor of another list,
//! another key or changed in any byte is `-32602`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit as _, Mac as _};
use sha2::Sha256;
use tern_protocol::error::ErrorObject;

const MAC_LEN: usize = 16;

/// Makes and reads cursors under one key.
#[derive(Clone)]
pub struct Cursors {
    key: [u8; 32],
}

impl std::fmt::Debug for Cursors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Cursors(..)")
    }
}

impl Cursors {
    /// Cursors under `key` (share it between replicas).
    pub fn new(key: [u8; 32]) -> Self {
        Self { key }
    }

    /// Cursors under a key derived from `secret` (a replica set's shared
    /// key file, say): HMAC-SHA256 of it under a label of their own, so the
    /// secret itself never signs a cursor.
    pub fn from_secret(secret: &[u8]) -> Self {
        let mut mac = <Hmac<Sha256>>::new_from_slice(b"tern-gateway cursor key")
            .unwrap_or_else(|_| unreachable!("any key length"));
        mac.update(secret);
        let mut key = [0u8; 32];
        key.copy_from_slice(&mac.finalize().into_bytes());
        Self { key }
    }

    /// Cursors under a random key: this process only.
    ///
    /// # Panics
    ///
    /// When the system has no randomness to give (as key generation
    /// everywhere in tern does).
    pub fn random() -> Self {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).unwrap_or_else(|e| panic!("no system randomness: {e}"));
        Self { key }
    }

    fn mac(&self, tag: u8, offset: u64) -> [u8; MAC_LEN] {
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("any key length"));
        mac.update(b"tern-gateway cursor v1");
        mac.update(&[tag]);
        mac.update(&offset.to_be_bytes());
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full[..MAC_LEN]);
        out
    }

    /// The cursor of `offset` in list `tag`.
    pub fn encode(&self, tag: u8, offset: usize) -> String {
        let offset = offset as u64;
        let mut bytes = Vec::with_capacity(1 + 8 + MAC_LEN);
        bytes.push(tag);
        bytes.extend_from_slice(&offset.to_be_bytes());
        bytes.extend_from_slice(&self.mac(tag, offset));
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The offset `cursor` holds for list `tag`; `-32602` otherwise.
    pub fn decode(&self, tag: u8, cursor: &str) -> Result<usize, ErrorObject> {
        let invalid = || ErrorObject::invalid_params("Invalid cursor");
        let bytes = URL_SAFE_NO_PAD.decode(cursor).map_err(|_| invalid())?;
        if bytes.len() != 1 + 8 + MAC_LEN || bytes[0] != tag {
            return Err(invalid());
        }
        let mut offset = [0u8; 8];
        offset.copy_from_slice(&bytes[1..9]);
        let offset = u64::from_be_bytes(offset);
        let expected = self.mac(tag, offset);
        // Constant time: the MAC is a secret's output.
        let diff = expected
            .iter()
            .zip(&bytes[9..])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(invalid());
        }
        usize::try_from(offset).map_err(|_| invalid())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_refuse_any_change() {
        let c = Cursors::new([7; 32]);
        let cursor = c.encode(1, 300);
        assert_eq!(c.decode(1, &cursor).unwrap(), 300);
        // Another list, another key, a changed byte, garbage.
        assert!(c.decode(2, &cursor).is_err());
        assert!(Cursors::new([8; 32]).decode(1, &cursor).is_err());
        let mut bytes = URL_SAFE_NO_PAD.decode(&cursor).unwrap();
        bytes[5] ^= 1;
        assert!(c.decode(1, &URL_SAFE_NO_PAD.encode(&bytes)).is_err());
        for bad in ["", "!!", "AAAA"] {
            assert!(c.decode(1, bad).is_err(), "{bad}");
        }
        // The same on another replica with the key.
        assert_eq!(Cursors::new([7; 32]).decode(1, &cursor).unwrap(), 300);
    }
}
