//! `tern-seal`: the `requestState` codec of tern's stateless server.
//!
//! A server that answers `input_required` (MCP Multi Round-Trip Requests,
//! <https://modelcontextprotocol.io/specification/2026-07-28/basic/patterns/mrtr>)
//! hands the client an opaque `requestState`, and must treat whatever comes
//! back as attacker-controlled input (rule `state-untrusted`; the rule ids are
//! defined in the repository's `docs/rules.md`). This crate turns the server's
//! state into such a token and back: authenticated encryption protects its
//! integrity and confidentiality (rule `state-integrity`), and the sealed
//! envelope binds a short expiry, the audience, the principal, the method, the
//! target and the digest of the canonical arguments, all checked on the retry
//! (rules `state-expiry`, `state-bound-principal`, `state-bound-request`).
//! Single use is the server's job, keyed by the state id (rule
//! `state-single-use`).
//!
//! There is no I/O and no async runtime: keys, time and randomness are passed
//! in.
//!
//! # Example
//!
//! ```
//! use std::time::{Duration, SystemTime};
//! use tern_seal::{Claims, Expect, KeyRing, OpenFailure, Sealer, SealerOptions};
//!
//! // In production: `KeyRing::parse` of a file or secret every replica shares.
//! let ring = KeyRing::generate();
//! let sealer = Sealer::new(ring, SealerOptions {
//!     audience: "https://mcp.example.com".into(),
//!     ..SealerOptions::default()
//! });
//! let arguments = serde_json::json!({"name": "orders"});
//! let now = SystemTime::now();
//!
//! let token = sealer.seal(
//!     &Claims {
//!         principal: Some("user-42"),
//!         method: "tools/call",
//!         target: "provision_database",
//!         arguments: Some(&arguments),
//!         state_id: [7; 16],     // random per logical call, in practice
//!         round: 1,
//!         payload: b"answers so far",
//!     },
//!     now,
//!     [9; 24],                   // fresh random bytes for every seal, in practice
//! )?;
//! // A generated ring seals `t2`; a key file seals what its `seal=` says.
//! assert!(token.starts_with("t2.local-"));
//!
//! let mut expect = Expect {
//!     principal: Some("user-42"),
//!     method: "tools/call",
//!     target: "provision_database",
//!     arguments: Some(&arguments),
//! };
//! let opened = sealer.open(&token, &expect, now + Duration::from_secs(5))?;
//! assert_eq!(*opened.payload, b"answers so far");
//! assert_eq!(opened.round, 1);
//!
//! // Another caller cannot use it, and learns nothing about why.
//! expect.principal = Some("mallory");
//! let error = sealer.open(&token, &expect, now).unwrap_err();
//! assert_eq!(error.to_string(), "invalid or expired requestState");
//! assert_eq!(error.reason(), OpenFailure::Principal); // for the log only
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Keys
//!
//! A [`Key`] is a 32-byte master secret with an id; two subkeys are derived
//! from it with HKDF-SHA256 (one for the AEAD, one for the principal MAC).
//! A [`KeyRing`] holds one or more keys: the first seals, every key opens.
//! To rotate, add the new key after the old one on every replica, then put it
//! first, then drop the old key once the longest TTL has passed. All replicas
//! of one server share the same ring; [`KeyRing::generate`] makes a
//! process-local ring fit only for a single instance.
//!
//! The key ring text format, read by [`KeyRing::parse`] and written by
//! [`KeyRing::to_text`]:
//!
//! ```text
//! # requestState keys: the first entry seals.
//! # Seal t2 tokens (once every replica runs a release that opens them).
//! seal=t2
//! k2026b:dK9EOAOEWIKEkwkTdBIBG-g9Wk-mrmxzUUYRMrqxmRk
//! k2026a:<43 characters of your own>
//! ```
//!
//! (The secret above is printed here, so [`KeyRing::parse`] refuses it: make
//! yours with `tern keys generate`.)
//!
//! - Entries are separated by newlines or commas (`k2:…,k1:…` fits in one
//!   environment variable).
//! - Blank entries, and lines starting with `#`, are ignored.
//! - Each entry is `<key id>:<secret>`, or the one setting `seal=t1` /
//!   `seal=t2`: the token version new tokens are sealed with (`t1` when
//!   absent; see "Tokens").
//! - A key entry is `<key id>:<secret>`. The key id is 1 to 16 characters of
//!   `A-Z a-z 0-9 _ -`. The secret is exactly 32 bytes in base64url without
//!   padding: 43 characters. Whitespace around either is ignored.
//! - The first entry is the sealing key. Ids must be unique. A secret that is
//!   obviously not random (fewer than 12 distinct bytes, or a counting
//!   sequence) is refused as weak, and so is the example above.
//! - Errors name the entry number (counting entries, not lines) and never echo
//!   the text.
//!
//! # Tokens
//!
//! `<version>.<key id>.<base64url-no-pad(nonce ‖ ciphertext ‖ tag)>`, in one
//! of two versions ([`TokenVersion`]):
//!
//! - `t1`: `XChaCha20-Poly1305` under a 24-byte caller-supplied random nonce.
//! - `t2`: `AES-256-GCM-SIV` (RFC 8452) under the first 12 of those bytes,
//!   on the CPU's AES and carry-less multiply instructions (AES-NI and
//!   PCLMULQDQ on x86-64, the `ARMv8` cryptography extension on aarch64, found
//!   at run time, with a constant-time software fallback). About three times
//!   faster than `t1`'s AEAD on a 1 KiB state, and misuse-resistant: a
//!   repeated nonce reveals only that two plaintexts were equal.
//!
//! Every version opens; the ring's [`KeyRing::seal_version`] picks the one
//! that seals: `t2` for a ring [`KeyRing::generate`] made (no other process
//! opens its tokens), `t1` unless the key file says `seal=t2`. Roll `t2` out in two
//! steps: deploy a release that opens it to every replica (it still seals
//! `t1`), then add `seal=t2` to the key file and reload. A replica of an
//! older release refuses a key file with `seal=t2` rather than run unable to
//! open the tokens its peers seal. To go back, remove the line: `t2` tokens
//! already handed out keep opening.
//!
//! Each version has its own AEAD subkey (HKDF `info`
//! `tern/requestState/<version>/aead-key`); the associated data is the label
//! `tern/requestState/<version>`, a zero byte and the key id. The plaintext is a versioned binary envelope with fixed-size or
//! length-prefixed fields and no trailing bytes. It holds the state id, round,
//! issue and expiry times, the SHA-256 of the audience, an HMAC of the
//! principal (never the identity itself), the method, the SHA-256 of the
//! target, the [`arguments_digest`] and the payload.
//!
//! [`Sealer::open`] fails with one opaque [`OpenError`] whose message is always
//! "invalid or expired requestState"; its [`OpenError::reason`] is for logs.
//!
//! # Defaults
//!
//! - Default TTL 10 min ([`DEFAULT_TTL`]), refreshed each round since each
//!   round re-seals.
//! - Default max token 64 KiB ([`DEFAULT_MAX_TOKEN_LEN`]), enforced when
//!   sealing and checked before anything is decoded when opening.
//! - Tokens issued more than 60 s in the future are refused
//!   ([`MAX_CLOCK_SKEW`]).
//!
//! # Features
//!
//! None.
//!
//! # Stability
//!
//! The `t1` and `t2` token formats are frozen: the known-answer tests pin
//! them byte for byte, and any change ships as a new version prefix, with the
//! older versions still opened for at least one TTL. The Rust API follows semver like the
//! rest of tern (0.x: minor versions may break it); the error enums are
//! `#[non_exhaustive]`.

mod b64;
mod digest;
mod envelope;
mod error;
mod key;
mod sealer;
mod version;

pub use crate::digest::{InexactNumber, arguments_digest};
pub use crate::error::{OpenError, OpenFailure, SealError};
pub use crate::key::{Key, KeyError, KeyErrorKind, KeyRing, MAX_KEY_ID_LEN, SECRET_LEN};
pub use crate::sealer::{
    Claims, DEFAULT_MAX_TOKEN_LEN, DEFAULT_TTL, Expect, MAX_CLOCK_SKEW, NONCE_LEN, Opened, Sealer,
    SealerOptions,
};
pub use crate::version::TokenVersion;
