//! `tern-seal`: the `requestState` codec of tern's server.
//!
//! A server that answers `input_required` (MRTR, spec §2) hands the client an
//! opaque `requestState` and must treat whatever comes back as attacker-controlled
//! (rules S8–S11). This crate will hold the sealing that makes that safe: a
//! versioned token format (`t1.<key id>.<base64url>`), AEAD from `RustCrypto` with a
//! domain-separation label, a rotating key ring, and an envelope that binds expiry,
//! audience, principal, method, target and the digest of the canonical arguments.
//! Time and randomness are passed in; there is no I/O and no async runtime.
//!
//! Status: reserved. The sealing lands with the server issue.
