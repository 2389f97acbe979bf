//! Sealing and opening `requestState` tokens.

use core::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use chacha20poly1305::AeadInOut as _;
use serde_json::Value;
use subtle::ConstantTimeEq as _;
use zeroize::{Zeroize as _, Zeroizing};

use crate::b64;
use crate::digest::{arguments_digest, sha256};
use crate::envelope::Envelope;
use crate::key::{Key, KeyRing, MAX_KEY_ID_LEN, is_valid_key_id};
use crate::version::{AAD_LABEL_LEN, TAG_LEN};
use crate::{OpenError, OpenFailure, SealError, TokenVersion};

/// How long a token stays valid after it is sealed: 10 minutes. Each round
/// re-seals, so this bounds one round, not the whole call (rule
/// `state-expiry`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(10 * 60);

/// The largest token accepted or produced: 64 KiB.
pub const DEFAULT_MAX_TOKEN_LEN: usize = 64 * 1024;

/// How far in the future a token's issue time may lie, to allow for clock
/// skew between replicas: 60 seconds. Anything later is refused.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);

/// Bytes of the random nonce [`Sealer::seal`] takes: XChaCha20-Poly1305's
/// extended nonce for `t1` (random nonces of this size are safe at any
/// fleet's rate); `t2` (AES-256-GCM-SIV) uses the first 12.
pub const NONCE_LEN: usize = 24;

/// Settings of a [`Sealer`]. Build with `..SealerOptions::default()`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealerOptions {
    /// Lifetime of each token from sealing; default [`DEFAULT_TTL`] (10 min).
    /// Counted in whole seconds: sub-second parts are dropped.
    pub ttl: Duration,
    /// Longest token, in bytes, that [`Sealer::seal`] makes and
    /// [`Sealer::open`] decodes; default [`DEFAULT_MAX_TOKEN_LEN`] (64 KiB).
    pub max_token_len: usize,
    /// Who the token is for: a token sealed for one audience does not open
    /// for another. Use one value per logical server (for example its
    /// canonical URL or name), the same on every replica. Default: empty.
    pub audience: String,
}

impl Default for SealerOptions {
    fn default() -> Self {
        SealerOptions {
            ttl: DEFAULT_TTL,
            max_token_len: DEFAULT_MAX_TOKEN_LEN,
            audience: String::new(),
        }
    }
}

/// What a token binds, at sealing.
#[derive(Clone, Copy)]
pub struct Claims<'a> {
    /// The authenticated principal, or `None` for an anonymous caller. Only a
    /// keyed MAC of it is stored (rule `state-bound-principal`).
    pub principal: Option<&'a str>,
    /// The JSON-RPC method of the request (`tools/call`, …).
    pub method: &'a str,
    /// The tool name, prompt name or resource URI.
    pub target: &'a str,
    /// The request's arguments; see [`arguments_digest`] for how they are
    /// compared.
    pub arguments: Option<&'a Value>,
    /// A unique id of this state (tern's server mints a fresh one for every
    /// round's token); it keys single-use enforcement, which this crate does
    /// not do (rule `state-single-use`).
    pub state_id: [u8; 16],
    /// The round number.
    pub round: u32,
    /// The application state, encrypted with the rest.
    pub payload: &'a [u8],
}

impl fmt::Debug for Claims<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Neither the principal nor the arguments: they are the caller's.
        f.debug_struct("Claims")
            .field("principal", &self.principal.map(|_| "<redacted>"))
            .field("method", &self.method)
            .field("target", &self.target)
            .field("arguments", &self.arguments.map(|_| "<redacted>"))
            .field("state_id", &self.state_id)
            .field("round", &self.round)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

/// What the retry must match, at opening: the same fields as [`Claims`],
/// taken from the retried request rather than from the token.
#[derive(Clone, Copy)]
pub struct Expect<'a> {
    /// The principal authenticated on the retry, or `None`.
    pub principal: Option<&'a str>,
    /// The retry's JSON-RPC method.
    pub method: &'a str,
    /// The retry's tool name, prompt name or resource URI.
    pub target: &'a str,
    /// The retry's arguments.
    pub arguments: Option<&'a Value>,
}

impl fmt::Debug for Expect<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Expect")
            .field("principal", &self.principal.map(|_| "<redacted>"))
            .field("method", &self.method)
            .field("target", &self.target)
            .field("arguments", &self.arguments.map(|_| "<redacted>"))
            .finish()
    }
}

/// An opened, fully verified token.
#[derive(Clone, PartialEq, Eq)]
pub struct Opened {
    /// The logical call's id, as sealed.
    pub state_id: [u8; 16],
    /// The round, as sealed.
    pub round: u32,
    /// When the token was sealed (whole seconds).
    pub issued_at: SystemTime,
    /// When the token stops opening (whole seconds).
    pub expires_at: SystemTime,
    /// The application state, as sealed; zeroised when dropped.
    pub payload: Zeroizing<Vec<u8>>,
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened")
            .field("state_id", &self.state_id)
            .field("round", &self.round)
            .field("issued_at", &self.issued_at)
            .field("expires_at", &self.expires_at)
            .field("payload_len", &self.payload.len())
            .finish()
    }
}

/// Seals and opens `requestState` tokens with a [`KeyRing`].
///
/// `Debug` shows key ids and options, never key material.
pub struct Sealer {
    ring: KeyRing,
    options: SealerOptions,
    audience_digest: [u8; 32],
}

impl Sealer {
    /// Makes a sealer.
    pub fn new(ring: KeyRing, options: SealerOptions) -> Sealer {
        let audience_digest = sha256(options.audience.as_bytes());
        Sealer {
            ring,
            options,
            audience_digest,
        }
    }

    /// The key ring.
    pub fn key_ring(&self) -> &KeyRing {
        &self.ring
    }

    /// The options.
    pub fn options(&self) -> &SealerOptions {
        &self.options
    }

    /// Seals `claims` into a token with the ring's first key, in the ring's
    /// [`seal_version`](KeyRing::seal_version).
    ///
    /// `nonce` must be fresh random bytes for every call (24 bytes make random
    /// collisions negligible; `t2` uses the first 12, and its AEAD tolerates
    /// a repeat); `now` is the current time. The token expires at
    /// `now + ttl`. Fails when the token would exceed `max_token_len`.
    pub fn seal(
        &self,
        claims: &Claims<'_>,
        now: SystemTime,
        nonce: [u8; NONCE_LEN],
    ) -> Result<String, SealError> {
        let key = self.ring.sealing_key();
        let version = self.ring.seal_version();
        let nonce = &nonce[..version.nonce_len()];
        if claims.method.len() > usize::from(u8::MAX) {
            return Err(SealError::MethodTooLong);
        }
        // Size first, before any work: the state must fit the cap the opener
        // enforces (rule `state-untrusted`: the opener bounds its work).
        let too_large = |len| SealError::TooLarge {
            len,
            max: self.options.max_token_len,
        };
        let envelope_len = Envelope::encoded_len(claims.method.len(), claims.payload.len())
            .ok_or(too_large(usize::MAX))?;
        let raw_len = envelope_len
            .checked_add(nonce.len() + TAG_LEN)
            .ok_or(too_large(usize::MAX))?;
        let token_len = token_len(version, key.id().len(), raw_len).unwrap_or(usize::MAX);
        if token_len > self.options.max_token_len {
            return Err(too_large(token_len));
        }

        let issued_at = now
            .duration_since(UNIX_EPOCH)
            .map_err(|_| SealError::Clock)?
            .as_secs();
        let expires_at = issued_at
            .checked_add(self.options.ttl.as_secs())
            .filter(|&secs| UNIX_EPOCH.checked_add(Duration::from_secs(secs)).is_some())
            .ok_or(SealError::Clock)?;

        let envelope = Envelope {
            state_id: claims.state_id,
            round: claims.round,
            issued_at,
            expires_at,
            audience: self.audience_digest,
            principal: key.principal_mac(claims.principal),
            method: claims.method.as_bytes(),
            target: sha256(claims.target.as_bytes()),
            arguments: arguments_digest(claims.arguments)
                .map_err(|_| SealError::InexactArguments)?,
            payload: claims.payload,
        };
        // Exact capacity, so the plaintext is never copied by a reallocation.
        // It is encrypted in place: once sealed, the buffer holds the nonce,
        // ciphertext and tag only, none of them secret, so it needs no
        // zeroising pass; on the one failure path it gets one.
        let mut raw = Vec::with_capacity(raw_len);
        raw.extend_from_slice(nonce);
        envelope.write_to(&mut raw);
        let (nonce, plaintext) = raw.split_at_mut(nonce.len());
        let aad = Aad::new(version, key);
        let tag = match version {
            TokenVersion::T1 => key.t1().encrypt_inout_detached(
                (&*nonce).try_into().map_err(|_| too_large(token_len))?,
                aad.bytes(),
                plaintext.into(),
            ),
            TokenVersion::T2 => key.t2().encrypt_inout_detached(
                (&*nonce).try_into().map_err(|_| too_large(token_len))?,
                aad.bytes(),
                plaintext.into(),
            ),
        };
        // Both AEADs refuse only messages of many GiB.
        let Ok(tag) = tag else {
            raw.zeroize();
            return Err(too_large(token_len));
        };
        raw.extend_from_slice(&tag);
        debug_assert_eq!(raw.len(), raw_len);

        let mut token = Vec::with_capacity(token_len);
        token.extend_from_slice(version.as_str().as_bytes());
        token.push(b'.');
        token.extend_from_slice(key.id().as_bytes());
        token.push(b'.');
        b64::encode_into(&raw, &mut token);
        debug_assert_eq!(token.len(), token_len);
        // Key ids and base64url are ASCII, so this is never lossy.
        Ok(String::from_utf8(token)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()))
    }

    /// Opens a token and checks every binding against `expect` and `now`.
    ///
    /// Checks run in this order, each failing with its own
    /// [`reason`](OpenError::reason): length (before any decoding), format
    /// version, key id, base64, authenticated decryption, envelope, expiry
    /// and issue time, audience, principal, method, target, arguments. Every
    /// failure displays the same "invalid or expired requestState" (rules
    /// `state-untrusted`, `state-integrity`).
    pub fn open(
        &self,
        token: &str,
        expect: &Expect<'_>,
        now: SystemTime,
    ) -> Result<Opened, OpenError> {
        self.open_inner(token, expect, now).map_err(OpenError::new)
    }

    fn open_inner(
        &self,
        token: &str,
        expect: &Expect<'_>,
        now: SystemTime,
    ) -> Result<Opened, OpenFailure> {
        // Rule `state-untrusted`: attacker-controlled input. Bound the work
        // before decoding it.
        if token.len() > self.options.max_token_len {
            return Err(OpenFailure::TooLarge);
        }
        let (prefix, rest) = token.split_once('.').ok_or(OpenFailure::Malformed)?;
        let Some(version) = TokenVersion::from_prefix(prefix) else {
            return Err(if is_version_tag(prefix) {
                OpenFailure::UnknownVersion
            } else {
                OpenFailure::Malformed
            });
        };
        let (key_id, body) = rest.split_once('.').ok_or(OpenFailure::Malformed)?;
        if !is_valid_key_id(key_id) {
            return Err(OpenFailure::Malformed);
        }
        let key = self.ring.find(key_id).ok_or(OpenFailure::UnknownKey)?;
        // The decoder refuses padding and non-zero trailing bits, so each
        // byte string has exactly one accepted text. This one buffer is
        // decrypted in place and, trimmed to the payload, handed out: it is
        // zeroised once, when the caller drops it.
        let raw_len = b64::decoded_len(body.len()).ok_or(OpenFailure::Malformed)?;
        let mut raw = Zeroizing::new(vec![0; raw_len]);
        b64::decode_into(body.as_bytes(), &mut raw).map_err(|()| OpenFailure::Malformed)?;
        let nonce_len = version.nonce_len();
        if raw_len < nonce_len + TAG_LEN {
            return Err(OpenFailure::Malformed);
        }
        let (nonce, rest) = raw.split_at_mut(nonce_len);
        let (ciphertext, tag) = rest.split_at_mut(rest.len() - TAG_LEN);
        let tag = (&*tag).try_into().map_err(|_| OpenFailure::Malformed)?;
        // Rule `state-integrity`: integrity first; nothing inside is looked
        // at unless it is ours.
        let aad = Aad::new(version, key);
        let opened = match version {
            TokenVersion::T1 => key.t1().decrypt_inout_detached(
                (&*nonce).try_into().map_err(|_| OpenFailure::Malformed)?,
                aad.bytes(),
                ciphertext.into(),
                tag,
            ),
            TokenVersion::T2 => key.t2().decrypt_inout_detached(
                (&*nonce).try_into().map_err(|_| OpenFailure::Malformed)?,
                aad.bytes(),
                ciphertext.into(),
                tag,
            ),
        };
        opened.map_err(|_| OpenFailure::Decrypt)?;
        let envelope = Envelope::parse(ciphertext)?;

        // Rule `state-expiry`: a short expiry. Sealed in whole seconds; `now`
        // is exact.
        let issued_at = unix_time(envelope.issued_at)?;
        let expires_at = unix_time(envelope.expires_at)?;
        if expires_at < issued_at {
            return Err(OpenFailure::Malformed);
        }
        if now >= expires_at {
            return Err(OpenFailure::Expired);
        }
        if now
            .checked_add(MAX_CLOCK_SKEW)
            .is_some_and(|latest| issued_at > latest)
        {
            return Err(OpenFailure::NotYetValid);
        }

        // Bindings, each compared in constant time.
        if !ct_eq(&envelope.audience, &self.audience_digest) {
            return Err(OpenFailure::Audience);
        }
        // Rule `state-bound-principal`: a state sealed for one principal does
        // not open for another.
        if !ct_eq(&envelope.principal, &key.principal_mac(expect.principal)) {
            return Err(OpenFailure::Principal);
        }
        // Rule `state-bound-request`: the identity of the originating request.
        if !ct_eq(envelope.method, expect.method.as_bytes()) {
            return Err(OpenFailure::Method);
        }
        if !ct_eq(&envelope.target, &sha256(expect.target.as_bytes())) {
            return Err(OpenFailure::Target);
        }
        let Ok(arguments) = arguments_digest(expect.arguments) else {
            return Err(OpenFailure::Arguments);
        };
        if !ct_eq(&envelope.arguments, &arguments) {
            return Err(OpenFailure::Arguments);
        }

        // The payload is the envelope's last field, so it ends where the
        // ciphertext does, just before the tag.
        let (state_id, round, payload_len) =
            (envelope.state_id, envelope.round, envelope.payload.len());
        let payload_end = raw_len - TAG_LEN;
        raw.copy_within(payload_end - payload_len..payload_end, 0);
        raw.truncate(payload_len);
        Ok(Opened {
            state_id,
            round,
            issued_at,
            expires_at,
            payload: raw,
        })
    }
}

impl fmt::Debug for Sealer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealer")
            .field("ring", &self.ring)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The AEAD associated data: the version's domain-separation label, a zero
/// byte, then the key id, so a token's id or version cannot be swapped for
/// another's (rule `state-integrity`).
struct Aad {
    bytes: [u8; AAD_LEN],
    len: usize,
}

const AAD_LEN: usize = AAD_LABEL_LEN + 1 + MAX_KEY_ID_LEN;

impl Aad {
    fn new(version: TokenVersion, key: &Key) -> Aad {
        let id = key.id().as_bytes();
        let mut bytes = [0; AAD_LEN];
        bytes[..AAD_LABEL_LEN].copy_from_slice(version.aad_label());
        // Key ids are at most MAX_KEY_ID_LEN bytes (checked at construction).
        let id = &id[..id.len().min(MAX_KEY_ID_LEN)];
        bytes[AAD_LABEL_LEN + 1..AAD_LABEL_LEN + 1 + id.len()].copy_from_slice(id);
        Aad {
            bytes,
            len: AAD_LABEL_LEN + 1 + id.len(),
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The length of `<version>.<key id>.<base64url of raw_len bytes>`.
fn token_len(version: TokenVersion, id_len: usize, raw_len: usize) -> Option<usize> {
    (version.as_str().len() + 2)
        .checked_add(id_len)?
        .checked_add(b64::encoded_len(raw_len)?)
}

/// `t` followed by digits: another format version, as opposed to garbage.
fn is_version_tag(text: &str) -> bool {
    text.strip_prefix('t')
        .is_some_and(|digits| !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
}

fn unix_time(secs: u64) -> Result<SystemTime, OpenFailure> {
    UNIX_EPOCH
        .checked_add(Duration::from_secs(secs))
        .ok_or(OpenFailure::Malformed)
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.ct_eq(b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_len_matches_base64() {
        use base64::Engine as _;
        use base64::engine::general_purpose::URL_SAFE_NO_PAD;
        for raw_len in 0..100 {
            let encoded = URL_SAFE_NO_PAD.encode(vec![0_u8; raw_len]);
            for version in TokenVersion::ALL {
                assert_eq!(token_len(version, 1, raw_len), Some(5 + encoded.len()));
            }
        }
        assert_eq!(token_len(TokenVersion::T1, 1, usize::MAX), None);
    }

    #[test]
    fn version_tags() {
        assert!(is_version_tag("t2"));
        assert!(is_version_tag("t10"));
        assert!(!is_version_tag("t"));
        assert!(!is_version_tag("x1"));
        assert!(!is_version_tag("t1a"));
    }

    #[test]
    fn aad_is_label_then_id() {
        let secret: [u8; 32] = std::array::from_fn(|i| u8::try_from(i * i % 251).unwrap_or(0));
        let key = Key::new("abc", secret).unwrap();
        assert_eq!(
            Aad::new(TokenVersion::T1, &key).bytes(),
            b"tern/requestState/t1\x00abc"
        );
        assert_eq!(
            Aad::new(TokenVersion::T2, &key).bytes(),
            b"tern/requestState/t2\x00abc"
        );
    }
}
