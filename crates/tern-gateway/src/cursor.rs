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

/// The version byte of a wrapped task id.
const TASK_ID_VERSION: u8 = 1;

impl Cursors {
    fn task_mac(&self, principal: Option<&str>, upstream: u16, id: &str) -> [u8; MAC_LEN] {
        let mut mac = <Hmac<Sha256>>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("any key length"));
        mac.update(b"tern-gateway task id v1");
        // Anonymous and a principal named "" differ.
        match principal {
            Some(p) => {
                mac.update(&[1]);
                mac.update(&(p.len() as u64).to_be_bytes());
                mac.update(p.as_bytes());
            }
            None => mac.update(&[0]),
        }
        mac.update(&upstream.to_be_bytes());
        mac.update(id.as_bytes());
        let full = mac.finalize().into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&full[..MAC_LEN]);
        out
    }

    /// The gateway's id of an upstream's task (Tasks extension): base64url
    /// of a version, the upstream, a MAC over the principal, the upstream
    /// and the id, then the id. The same on every poll and replica with
    /// the key, unforgeable, and header-safe for `Mcp-Name`.
    pub fn wrap_task_id(&self, principal: Option<&str>, upstream: u16, id: &str) -> String {
        let mut bytes = Vec::with_capacity(3 + MAC_LEN + id.len());
        bytes.push(TASK_ID_VERSION);
        bytes.extend_from_slice(&upstream.to_be_bytes());
        bytes.extend_from_slice(&self.task_mac(principal, upstream, id));
        bytes.extend_from_slice(id.as_bytes());
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The upstream and its task id of a wrapped id `principal` was given;
    /// `-32602` for any other (another principal's, changed, not one).
    pub fn unwrap_task_id(
        &self,
        principal: Option<&str>,
        wrapped: &str,
    ) -> Result<(u16, String), ErrorObject> {
        let invalid = || ErrorObject::invalid_params("Unknown task");
        let bytes = URL_SAFE_NO_PAD.decode(wrapped).map_err(|_| invalid())?;
        if bytes.len() < 3 + MAC_LEN || bytes[0] != TASK_ID_VERSION {
            return Err(invalid());
        }
        let upstream = u16::from_be_bytes([bytes[1], bytes[2]]);
        let id = std::str::from_utf8(&bytes[3 + MAC_LEN..]).map_err(|_| invalid())?;
        let expected = self.task_mac(principal, upstream, id);
        let diff = expected
            .iter()
            .zip(&bytes[3..3 + MAC_LEN])
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        if diff != 0 {
            return Err(invalid());
        }
        Ok((upstream, id.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn task_ids_are_bound_to_the_principal_and_upstream() {
        let c = Cursors::new([3; 32]);
        let wrapped = c.wrap_task_id(Some("ann"), 2, "up-task-7");
        assert_eq!(
            wrapped,
            c.wrap_task_id(Some("ann"), 2, "up-task-7"),
            "deterministic"
        );
        assert!(
            wrapped
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(
            c.unwrap_task_id(Some("ann"), &wrapped).unwrap(),
            (2, "up-task-7".to_owned())
        );
        assert!(c.unwrap_task_id(Some("bob"), &wrapped).is_err());
        assert!(c.unwrap_task_id(None, &wrapped).is_err());
        assert!(
            Cursors::new([4; 32])
                .unwrap_task_id(Some("ann"), &wrapped)
                .is_err()
        );
        let mut bytes = URL_SAFE_NO_PAD.decode(&wrapped).unwrap();
        bytes[2] ^= 1; // another upstream
        assert!(
            c.unwrap_task_id(Some("ann"), &URL_SAFE_NO_PAD.encode(&bytes))
                .is_err()
        );
        for bad in ["", "up-task-7", "AAAA"] {
            assert!(c.unwrap_task_id(Some("ann"), bad).is_err(), "{bad}");
        }
    }

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
