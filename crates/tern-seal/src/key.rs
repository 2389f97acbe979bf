//! Master keys, the key ring, and the key ring's text format.
//!
//! Each [`Key`] is one 32-byte master secret named by a short id. Two subkeys
//! are derived from it with HKDF-SHA256 under distinct `info` labels, so the
//! AEAD key and the principal-MAC key are independent (rules
//! `state-integrity`, `state-bound-principal`); each token version has its
//! own AEAD subkey.

use core::fmt;

use aes_gcm_siv::Aes256GcmSiv;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::{KeyInit as _, XChaCha20Poly1305};
use hkdf::Hkdf;
use hmac::{Hmac, Mac as _};
use sha2::Sha256;
use zeroize::{ZeroizeOnDrop, Zeroizing};

use crate::TokenVersion;

/// Length in bytes of a master secret.
pub const SECRET_LEN: usize = 32;

/// Longest key id, in characters.
pub const MAX_KEY_ID_LEN: usize = 16;

/// Length of a master secret in base64url without padding.
const SECRET_TEXT_LEN: usize = 43;

/// HKDF `info` for the `t1` AEAD subkey. Distinct from [`INFO_PRINCIPAL`] so
/// the subkeys are independent even though they share a master secret.
const INFO_AEAD: &[u8] = b"tern/requestState/t1/aead-key";

/// HKDF `info` for the `t2` AEAD subkey: another key for another algorithm.
const INFO_AEAD_T2: &[u8] = b"tern/requestState/t2/aead-key";

/// HKDF `info` for the principal-MAC subkey.
const INFO_PRINCIPAL: &[u8] = b"tern/requestState/t1/principal-mac-key";

/// The SHA-256 block size: an HMAC key shorter than this is zero-padded to it
/// (RFC 2104 §2), which we do ourselves so keying HMAC cannot fail.
const HMAC_BLOCK_LEN: usize = 64;

/// One master secret with its key id.
///
/// The secret and both derived subkeys are zeroised when the key is dropped;
/// `Debug` prints the id only. A secret whose bytes are all equal (for example
/// all zero, the usual sign of a missing or unset secret) is refused.
pub struct Key {
    id: String,
    secret: Zeroizing<[u8; SECRET_LEN]>,
    /// The `t1` AEAD; `XChaCha20Poly1305` zeroises its key on drop (crate
    /// feature `zeroize`).
    t1: XChaCha20Poly1305,
    /// The `t2` AEAD; its AES key schedule is zeroised on drop (the `aes`
    /// crate's feature `zeroize`).
    t2: Aes256GcmSiv,
    /// HMAC keyed with the principal-MAC subkey (zero-padded to the HMAC
    /// block size), its key schedule done once: a MAC per
    /// leg then costs two compressions, not four.
    principal_mac_keyed: Hmac<Sha256>,
    /// The MAC of the anonymous principal, which most local calls are.
    anonymous_mac: [u8; 32],
}

// Every secret field zeroises itself on drop: `Zeroizing` buffers, the AEAD
// cipher and the keyed HMAC state (built with their `zeroize` features). The
// anonymous MAC is no secret: it is in every anonymous token.
impl ZeroizeOnDrop for Key {}

impl Key {
    /// Makes a key from its id and 32-byte master secret.
    ///
    /// The id is 1 to 16 characters of `A-Z a-z 0-9 _ -`. The secret is
    /// refused when it is obviously not random (fewer than 12 distinct bytes,
    /// or a counting sequence) or is the example in tern's documentation. The
    /// caller's copy of `secret` is the caller's to zeroise.
    pub fn new(id: &str, secret: [u8; SECRET_LEN]) -> Result<Key, KeyError> {
        let secret = Zeroizing::new(secret);
        Self::from_secret(id, secret).map_err(|kind| KeyError { entry: None, kind })
    }

    /// Makes a key with a fresh secret drawn from `rng`, which must fill the
    /// whole slice with cryptographically secure random bytes.
    ///
    /// Fails on an invalid id, or when `rng` produced a weak secret (a broken
    /// generator).
    pub fn generate(id: &str, rng: &mut impl FnMut(&mut [u8])) -> Result<Key, KeyError> {
        let mut secret = Zeroizing::new([0_u8; SECRET_LEN]);
        rng(&mut secret[..]);
        Self::from_secret(id, secret).map_err(|kind| KeyError { entry: None, kind })
    }

    fn from_secret(id: &str, secret: Zeroizing<[u8; SECRET_LEN]>) -> Result<Key, KeyErrorKind> {
        if !is_valid_key_id(id) {
            return Err(KeyErrorKind::InvalidId);
        }
        if is_weak(&secret) {
            return Err(KeyErrorKind::WeakSecret);
        }
        if is_published(&secret) {
            return Err(KeyErrorKind::PublishedSecret);
        }
        let (aead_key, principal_mac_subkey) = subkeys(&secret);
        let t2_key = aead_subkey(&secret, INFO_AEAD_T2);
        let principal_mac_keyed = Hmac::<Sha256>::new((&*principal_mac_subkey).into());
        let mut key = Key {
            id: id.to_owned(),
            secret,
            t1: XChaCha20Poly1305::new((&*aead_key).into()),
            t2: Aes256GcmSiv::new((&*t2_key).into()),
            principal_mac_keyed,
            anonymous_mac: [0; 32],
        };
        key.anonymous_mac = key.compute_principal_mac(None);
        Ok(key)
    }

    /// The key id, as it appears in tokens (`t1.<key id>.…`, `t2.<key id>.…`).
    pub fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn t1(&self) -> &XChaCha20Poly1305 {
        &self.t1
    }

    pub(crate) fn t2(&self) -> &Aes256GcmSiv {
        &self.t2
    }

    /// HMAC-SHA256 of the principal under this key's principal-MAC subkey (rule
    /// `state-bound-principal`): the envelope carries this, never the raw
    /// identity. A tag byte keeps "anonymous" apart from every identity string,
    /// including `""`.
    pub(crate) fn principal_mac(&self, principal: Option<&str>) -> [u8; 32] {
        match principal {
            None => self.anonymous_mac,
            Some(_) => self.compute_principal_mac(principal),
        }
    }

    fn compute_principal_mac(&self, principal: Option<&str>) -> [u8; 32] {
        let mut mac = self.principal_mac_keyed.clone();
        match principal {
            None => mac.update(b"\x00anonymous"),
            Some(identity) => {
                mac.update(b"\x01");
                mac.update(identity.as_bytes());
            }
        }
        mac.finalize().into_bytes().into()
    }
}

/// An AEAD subkey of a master secret, by HKDF-SHA256 under `info`.
fn aead_subkey(secret: &[u8; SECRET_LEN], info: &[u8]) -> Zeroizing<[u8; 32]> {
    let mut key = Zeroizing::new([0_u8; 32]);
    Hkdf::<Sha256>::new(None, &secret[..])
        .expand(info, &mut key[..])
        .expect("HKDF-SHA256 expands up to 8160 bytes; 32 are asked");
    key
}

/// The `t1` AEAD key and the principal-MAC subkey (zero-padded to the HMAC
/// block size) of a master secret, by HKDF-SHA256.
fn subkeys(secret: &[u8; SECRET_LEN]) -> (Zeroizing<[u8; 32]>, Zeroizing<[u8; HMAC_BLOCK_LEN]>) {
    let hkdf = Hkdf::<Sha256>::new(None, &secret[..]);
    let mut aead_key = Zeroizing::new([0_u8; 32]);
    hkdf.expand(INFO_AEAD, &mut aead_key[..])
        .expect("HKDF-SHA256 expands up to 8160 bytes; 32 are asked");
    let mut principal_mac_subkey = Zeroizing::new([0_u8; HMAC_BLOCK_LEN]);
    hkdf.expand(INFO_PRINCIPAL, &mut principal_mac_subkey[..32])
        .expect("HKDF-SHA256 expands up to 8160 bytes; 32 are asked");
    (aead_key, principal_mac_subkey)
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Key")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The keys a server seals and opens `requestState` with.
///
/// Never empty; ids are unique. The first key seals, every key opens, so a
/// rotation is: add the new key second everywhere, then move it first, then
/// drop the old key once the longest TTL has passed. `Debug` shows ids only.
///
/// The ring also names the token version new tokens are sealed with
/// ([`KeyRing::seal_version`]; the key file's `seal=` entry); tokens of every
/// version this build knows open whatever it says.
pub struct KeyRing {
    keys: Vec<Key>,
    seal_version: TokenVersion,
}

impl KeyRing {
    /// Makes a ring from keys, the first of which seals.
    ///
    /// Fails when `keys` is empty or two keys share an id.
    pub fn new(keys: Vec<Key>) -> Result<KeyRing, KeyError> {
        if keys.is_empty() {
            return Err(KeyError {
                entry: None,
                kind: KeyErrorKind::Empty,
            });
        }
        for (index, key) in keys.iter().enumerate() {
            if keys[..index].iter().any(|earlier| earlier.id == key.id) {
                return Err(KeyError {
                    entry: Some(index + 1),
                    kind: KeyErrorKind::DuplicateId,
                });
            }
        }
        Ok(KeyRing {
            keys,
            seal_version: TokenVersion::default(),
        })
    }

    /// The same ring, sealing new tokens as `version`.
    ///
    /// Switch to [`TokenVersion::T2`] only once every replica runs a release
    /// that opens it: a replica that does not know `t2` refuses such tokens.
    #[must_use]
    pub fn with_seal_version(mut self, version: TokenVersion) -> KeyRing {
        self.seal_version = version;
        self
    }

    /// The version new tokens are sealed with: for a parsed key file
    /// [`TokenVersion::T1`] unless it says `seal=t2`, for a generated ring
    /// [`TokenVersion::T2`]; [`KeyRing::with_seal_version`] sets it.
    pub fn seal_version(&self) -> TokenVersion {
        self.seal_version
    }

    /// A ring of one fresh key from the operating system's random source, for
    /// tests and single-instance servers only: other replicas cannot open its
    /// tokens, and they die with the process.
    ///
    /// It seals [`TokenVersion::T2`]: its tokens are only ever opened by the
    /// process that made them, so no replica of an older release can meet
    /// one, and the rollout step a shared key file needs does not apply.
    /// [`KeyRing::to_text`] writes that choice down (`seal=t2`); a ring meant
    /// for a fleet of mixed releases is set back with
    /// [`KeyRing::with_seal_version`].
    ///
    /// # Panics
    ///
    /// If the operating system's random source fails; see
    /// [`KeyRing::try_generate`] for the fallible form.
    pub fn generate() -> KeyRing {
        match Self::try_generate() {
            Ok(ring) => ring,
            Err(error) => panic!("cannot generate a requestState key: {error}"),
        }
    }

    /// Like [`KeyRing::generate`], but reports a failing random source.
    ///
    /// The key id is `local-` and six random characters, so a token from an
    /// earlier process is reported as an unknown key rather than a decryption
    /// failure.
    pub fn try_generate() -> Result<KeyRing, KeyError> {
        let rng_error = || KeyError {
            entry: None,
            kind: KeyErrorKind::Random,
        };
        let mut id_bytes = [0_u8; 6];
        getrandom::fill(&mut id_bytes).map_err(|_| rng_error())?;
        let mut secret = Zeroizing::new([0_u8; SECRET_LEN]);
        getrandom::fill(&mut secret[..]).map_err(|_| rng_error())?;
        let id = format!("local-{}", URL_SAFE_NO_PAD.encode(id_bytes));
        let key = Key::from_secret(&id, secret).map_err(|kind| KeyError { entry: None, kind })?;
        Ok(KeyRing {
            keys: vec![key],
            seal_version: TokenVersion::T2,
        })
    }

    /// Parses the key ring text format (see the crate docs).
    ///
    /// Entries are separated by newlines or commas; blank entries and lines
    /// starting with `#` are ignored; each entry is `<key id>:<secret>` with the
    /// secret as 43 characters of base64url without padding, or the one
    /// setting `seal=t1` / `seal=t2` (the version new tokens are sealed with;
    /// `t1` when absent). Errors name the 1-based entry number and never echo
    /// the text.
    pub fn parse(text: &str) -> Result<KeyRing, KeyError> {
        let mut keys = Vec::new();
        let mut seal_version = None;
        let entries = text
            .lines()
            .map(str::trim)
            .filter(|line| !line.starts_with('#'))
            .flat_map(|line| line.split(','))
            .map(str::trim)
            .filter(|entry| !entry.is_empty());
        for (index, entry) in entries.enumerate() {
            let number = index + 1;
            let error = |kind| KeyError {
                entry: Some(number),
                kind,
            };
            if let Some((name, value)) = entry.split_once('=')
                && !entry.contains(':')
            {
                let version = match (name.trim(), TokenVersion::from_prefix(value.trim())) {
                    ("seal", Some(version)) if seal_version.is_none() => version,
                    _ => return Err(error(KeyErrorKind::Setting)),
                };
                seal_version = Some(version);
                continue;
            }
            let (id, secret_text) = entry
                .split_once(':')
                .ok_or_else(|| error(KeyErrorKind::MissingSeparator))?;
            let (id, secret_text) = (id.trim(), secret_text.trim());
            if !is_valid_key_id(id) {
                return Err(error(KeyErrorKind::InvalidId));
            }
            if secret_text.len() != SECRET_TEXT_LEN {
                return Err(error(KeyErrorKind::SecretLength));
            }
            let mut secret = Zeroizing::new([0_u8; SECRET_LEN]);
            // 43 characters decode to exactly 32 bytes; anything else (bad
            // alphabet, padding, non-zero trailing bits) is refused, so the
            // accepted text is canonical and `to_text` reproduces it.
            match URL_SAFE_NO_PAD.decode_slice(secret_text, &mut secret[..]) {
                Ok(SECRET_LEN) => {}
                Ok(_) => return Err(error(KeyErrorKind::SecretLength)),
                Err(_) => return Err(error(KeyErrorKind::InvalidBase64)),
            }
            if keys.iter().any(|key: &Key| key.id == id) {
                return Err(error(KeyErrorKind::DuplicateId));
            }
            keys.push(Key::from_secret(id, secret).map_err(error)?);
        }
        Ok(KeyRing::new(keys)?.with_seal_version(seal_version.unwrap_or_default()))
    }

    /// Renders the ring in the text format [`KeyRing::parse`] reads: a
    /// `seal=<version>` line unless the version is the default `t1`, then one
    /// `<key id>:<secret>` line per key, sealing key first.
    pub fn to_text(&self) -> Zeroizing<String> {
        let setting = match self.seal_version {
            TokenVersion::T1 => String::new(),
            version => format!("seal={version}\n"),
        };
        let line_len = |key: &Key| key.id.len() + 1 + SECRET_TEXT_LEN + 1;
        // Exact capacity up front: a reallocation would leave a copy of the
        // secrets behind in freed memory.
        let mut text = Zeroizing::new(String::with_capacity(
            setting.len() + self.keys.iter().map(line_len).sum::<usize>(),
        ));
        text.push_str(&setting);
        for key in &self.keys {
            text.push_str(&key.id);
            text.push(':');
            URL_SAFE_NO_PAD.encode_string(&key.secret[..], &mut text);
            text.push('\n');
        }
        text
    }

    /// The key ids, sealing key first.
    pub fn key_ids(&self) -> impl Iterator<Item = &str> {
        self.keys.iter().map(Key::id)
    }

    /// The key that seals new tokens.
    pub(crate) fn sealing_key(&self) -> &Key {
        // Invariant: the constructors refuse an empty ring.
        &self.keys[0]
    }

    /// The key with this id, if the ring holds it.
    pub(crate) fn find(&self, id: &str) -> Option<&Key> {
        self.keys.iter().find(|key| key.id == id)
    }
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing")
            .field(
                "key_ids",
                &self.keys.iter().map(Key::id).collect::<Vec<_>>(),
            )
            .field("seal_version", &self.seal_version)
            .finish()
    }
}

/// Whether `id` is a valid key id: 1 to 16 of `A-Z a-z 0-9 _ -`. The alphabet
/// has no `.`, so a token splits unambiguously.
pub(crate) fn is_valid_key_id(id: &str) -> bool {
    (1..=MAX_KEY_ID_LEN).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A secret that is obviously not random: fewer than 12 distinct byte values
/// (zero-filled, `0xff`-filled, a short pattern repeated), or a counting
/// sequence (`00 01 02 …`, `e0 df de …`, any constant step). 32 random bytes
/// have about 30 distinct values; fewer than 12 happens by chance about once
/// in 10<sup>22</sup> keys, and a counting sequence once in 10<sup>74</sup>.
fn is_weak(secret: &[u8; SECRET_LEN]) -> bool {
    let mut seen = [false; 256];
    for &b in secret {
        seen[usize::from(b)] = true;
    }
    let distinct = seen.iter().filter(|&&s| s).count();
    let step = secret[1].wrapping_sub(secret[0]);
    distinct < 12 || secret.windows(2).all(|w| w[1].wrapping_sub(w[0]) == step)
}

/// Secrets printed in tern's own documentation (the key ring format's
/// example): anyone can read them, so no server may seal with them.
const PUBLISHED: [[u8; SECRET_LEN]; 1] = [[
    116, 175, 68, 56, 3, 132, 88, 130, 132, 147, 9, 19, 116, 18, 1, 27, 232, 61, 90, 79, 166, 174,
    108, 115, 81, 70, 17, 50, 186, 177, 153, 25,
]];

fn is_published(secret: &[u8; SECRET_LEN]) -> bool {
    use subtle::ConstantTimeEq as _;
    PUBLISHED
        .iter()
        .any(|known| bool::from(known[..].ct_eq(&secret[..])))
}

/// Why a key or key ring was refused.
///
/// The message names the entry of the text format when there is one, and
/// never contains secret material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    entry: Option<usize>,
    kind: KeyErrorKind,
}

impl KeyError {
    /// What was wrong.
    pub fn kind(&self) -> KeyErrorKind {
        self.kind
    }

    /// The 1-based entry (of [`KeyRing::parse`]'s text or of
    /// [`KeyRing::new`]'s list) the error is about, if any.
    pub fn entry(&self) -> Option<usize> {
        self.entry
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(entry) = self.entry {
            write!(f, "requestState key entry {entry}: ")?;
        } else {
            f.write_str("requestState key: ")?;
        }
        f.write_str(match self.kind {
            KeyErrorKind::Empty => "the key ring has no keys",
            KeyErrorKind::MissingSeparator => "expected `<key id>:<secret>`",
            KeyErrorKind::Setting => "expected `seal=t1` or `seal=t2`, at most once",
            KeyErrorKind::InvalidId => "key id must be 1 to 16 characters of A-Z a-z 0-9 _ -",
            KeyErrorKind::DuplicateId => "key id already used by an earlier entry",
            KeyErrorKind::InvalidBase64 => "secret is not valid base64url (no padding)",
            KeyErrorKind::SecretLength => {
                "secret must be 32 bytes: 43 base64url characters without padding"
            }
            KeyErrorKind::WeakSecret => {
                "secret is not random (too few distinct bytes, or a counting sequence); \
                 generate one with `tern keys generate`"
            }
            KeyErrorKind::PublishedSecret => {
                "secret is the example printed in tern's documentation; \
                 generate your own with `tern keys generate`"
            }
            KeyErrorKind::Random => "the operating system's random source failed",
        })
    }
}

impl std::error::Error for KeyError {}

/// The kinds of [`KeyError`].
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyErrorKind {
    /// The key ring (or its text) has no keys.
    Empty,
    /// An entry has no `:` between key id and secret.
    MissingSeparator,
    /// A setting entry (`name=value`) is not `seal=t1` or `seal=t2`, or the
    /// setting is given twice.
    Setting,
    /// A key id is empty, longer than 16, or uses a character outside
    /// `A-Z a-z 0-9 _ -`.
    InvalidId,
    /// Two keys share an id.
    DuplicateId,
    /// A secret is not base64url without padding.
    InvalidBase64,
    /// A secret does not decode to exactly 32 bytes.
    SecretLength,
    /// A secret is obviously not random: fewer than 12 distinct bytes, or a
    /// counting sequence.
    WeakSecret,
    /// A secret is one printed in tern's documentation.
    PublishedSecret,
    /// The operating system's random source failed.
    Random,
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: [u8; 32] = [
        0x53, 0x00, 0xad, 0x88, 0x20, 0x04, 0x0f, 0x81, 0x45, 0xa0, 0x16, 0x48, 0xd8, 0x1d, 0x30,
        0x66, 0x4f, 0xec, 0xcb, 0x9c, 0x5b, 0x38, 0x6a, 0xac, 0x98, 0xb0, 0x93, 0x37, 0xe9, 0x85,
        0x37, 0xec,
    ];

    #[test]
    fn key_ids_are_checked() {
        for good in ["a", "A-_9", "0123456789abcdef"] {
            assert!(Key::new(good, SECRET).is_ok(), "{good}");
        }
        for bad in ["", "0123456789abcdefg", "a.b", "a b", "é", "a:b", "a,b"] {
            let error = Key::new(bad, SECRET).unwrap_err();
            assert_eq!(error.kind(), KeyErrorKind::InvalidId, "{bad}");
        }
    }

    #[test]
    fn low_entropy_and_published_secrets_are_refused() {
        let counting: [u8; 32] = std::array::from_fn(|i| u8::try_from(i).unwrap());
        let from_one: [u8; 32] = std::array::from_fn(|i| u8::try_from(i + 1).unwrap());
        let down: [u8; 32] = std::array::from_fn(|i| 0xe0 - u8::try_from(i).unwrap());
        let step_7: [u8; 32] = std::array::from_fn(|i| u8::try_from(i * 7 % 256).unwrap());
        let pattern: [u8; 32] = std::array::from_fn(|i| b"password"[i % 8]);
        let eleven: [u8; 32] = std::array::from_fn(|i| u8::try_from(i % 11 * 23).unwrap());
        for weak in [counting, from_one, down, step_7, pattern, eleven] {
            assert_eq!(
                Key::new("k", weak).unwrap_err().kind(),
                KeyErrorKind::WeakSecret,
                "{weak:?}"
            );
        }
        let twelve: [u8; 32] = std::array::from_fn(|i| u8::try_from(i % 12 * 19).unwrap());
        assert!(
            Key::new("k", twelve).is_ok(),
            "12 distinct values, no counting"
        );
        let error = KeyRing::parse("k:dK9EOAOEWIKEkwkTdBIBG-g9Wk-mrmxzUUYRMrqxmRk").unwrap_err();
        assert_eq!(error.kind(), KeyErrorKind::PublishedSecret);
        assert!(error.to_string().contains("tern keys generate"), "{error}");
        // Thousands of generated keys are never refused.
        for _ in 0..2000 {
            KeyRing::try_generate().unwrap();
        }
    }

    #[test]
    fn weak_secrets_are_refused() {
        for byte in [0_u8, 1, 0xff] {
            let error = Key::new("k", [byte; 32]).unwrap_err();
            assert_eq!(error.kind(), KeyErrorKind::WeakSecret);
        }
        let error = Key::generate("k", &mut |buf: &mut [u8]| buf.fill(0)).unwrap_err();
        assert_eq!(error.kind(), KeyErrorKind::WeakSecret);
    }

    #[test]
    fn generate_uses_the_rng() {
        let key = Key::generate("k", &mut |buf: &mut [u8]| buf.copy_from_slice(&SECRET)).unwrap();
        assert_eq!(*key.secret, SECRET);
    }

    #[test]
    fn the_precomputed_macs_are_hmac_under_the_subkey() {
        use hmac::Mac as _;
        let key = Key::new("k", SECRET).unwrap();
        let (_, subkey) = subkeys(&SECRET);
        let fresh = |tagged: &[u8]| -> [u8; 32] {
            let mut mac = Hmac::<Sha256>::new((&*subkey).into());
            mac.update(tagged);
            mac.finalize().into_bytes().into()
        };
        assert_eq!(key.principal_mac(None), fresh(b"\x00anonymous"));
        assert_eq!(key.principal_mac(Some("ada")), fresh(b"\x01ada"));
        // The keyed state is cloned, never consumed: the same twice.
        assert_eq!(
            key.principal_mac(Some("ada")),
            key.principal_mac(Some("ada"))
        );
    }

    #[test]
    fn subkeys_differ_from_each_other_and_the_secret() {
        let key = Key::new("k", SECRET).unwrap();
        let (aead_key, subkey) = subkeys(&SECRET);
        assert_ne!(subkey[..32], key.secret[..]);
        assert_ne!(subkey[..32], aead_key[..]);
        assert!(subkey[32..].iter().all(|&b| b == 0));
        // The MAC keeps anonymous apart from every identity, even "".
        let anonymous = key.principal_mac(None);
        assert_ne!(anonymous, key.principal_mac(Some("")));
        assert_ne!(anonymous, key.principal_mac(Some("anonymous")));
        assert_ne!(key.principal_mac(Some("a")), key.principal_mac(Some("b")));
        // Another master secret gives another MAC.
        let mut other = SECRET;
        other[0] = 99;
        let other = Key::new("k", other).unwrap();
        assert_ne!(other.principal_mac(Some("a")), key.principal_mac(Some("a")));
    }

    #[test]
    fn generated_ring_has_one_local_key() {
        let ring = KeyRing::generate();
        let ids: Vec<_> = ring.key_ids().collect();
        assert_eq!(ids.len(), 1);
        assert!(ids[0].starts_with("local-"));
        assert!(is_valid_key_id(ids[0]));
        let again = KeyRing::parse(&ring.to_text()).unwrap();
        assert_eq!(*again.sealing_key().secret, *ring.sealing_key().secret);
        // Process-local, so it seals the fast version, and says so in text.
        assert_eq!(ring.seal_version(), TokenVersion::T2);
        assert_eq!(again.seal_version(), TokenVersion::T2);
        assert!(ring.to_text().starts_with("seal=t2\n"));
    }

    #[test]
    fn new_refuses_empty_and_duplicates() {
        assert_eq!(
            KeyRing::new(vec![]).unwrap_err().kind(),
            KeyErrorKind::Empty
        );
        let a = Key::new("a", SECRET).unwrap();
        let b = Key::new("b", SECRET).unwrap();
        let a2 = Key::new("a", SECRET).unwrap();
        let error = KeyRing::new(vec![a, b, a2]).unwrap_err();
        assert_eq!(error.kind(), KeyErrorKind::DuplicateId);
        assert_eq!(error.entry(), Some(3));
    }

    #[test]
    fn parse_skips_comments_and_blank_entries() {
        let secret = URL_SAFE_NO_PAD.encode(SECRET);
        let text = format!("# comment, with a comma\n\n  a:{secret} , ,b:{secret}\n#c:x\n");
        let ring = KeyRing::parse(&text).unwrap();
        assert_eq!(ring.key_ids().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(ring.sealing_key().id(), "a");
        assert_eq!(*ring.to_text(), format!("a:{secret}\nb:{secret}\n"));
    }
}
