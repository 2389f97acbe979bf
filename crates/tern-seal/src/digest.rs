//! Digests bound into the envelope: the canonical arguments and plain SHA-256.

use std::io;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// SHA-256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The digest of a request's arguments that a token is bound to (S10c): SHA-256
/// of their RFC 8785 (JCS) canonical JSON.
///
/// Canonical JSON sorts object members and writes numbers in one form, so
/// `{"a":1,"b":2}` and `{"b":2,"a":1.0}` have the same digest while any change
/// of a value does not.
///
/// Absent arguments (`None`) and an empty object (`{}`) have the same digest:
/// `tools/call` and `prompts/get` treat both as "no arguments", and a client
/// that omits `arguments` on one leg and sends `{}` on the next is retrying the
/// same request. `null`, `[]` and other values are distinct.
///
/// Numbers are compared as JCS does, as IEEE-754 doubles: integers beyond
/// ±2<sup>53</sup> that round to the same double have the same digest.
pub fn arguments_digest(arguments: Option<&Value>) -> [u8; 32] {
    let Some(value) = arguments else {
        return sha256(b"{}");
    };
    let mut hasher = HashWriter(Sha256::new());
    if serde_json_canonicalizer::to_writer(value, &mut hasher).is_ok() {
        return hasher.0.finalize().into();
    }
    // Unreachable for a `serde_json::Value` without `arbitrary_precision`: its
    // keys are strings, unique, and its numbers finite. Should JCS refuse it
    // anyway, fall back to serde_json's own faithful (if not canonical)
    // encoding under a distinct label, so distinct values still never share a
    // digest with each other or with canonical JSON.
    let mut hasher = HashWriter(Sha256::new());
    hasher.0.update(b"\x00tern/arguments/non-canonical\x00");
    // An error here leaves a deterministic digest of whatever was written;
    // serde_json cannot fail to write a `Value` into a writer that never fails.
    let _ = serde_json::to_writer(&mut hasher, value);
    hasher.0.finalize().into()
}

/// Streams serialised JSON into a hash without buffering it.
struct HashWriter(Sha256);

impl io::Write for HashWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.update(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Digests computed independently (`printf '%s' '<json>' | sha256sum`).
    #[test]
    fn known_digests() {
        assert_eq!(
            hex(&arguments_digest(None)),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            hex(&arguments_digest(Some(
                &json!({"b": [true, null, "x"], "a": 1.5})
            ))),
            "c7d663295c9d20eeecb7ff2d717d0e31285e9bb52d28dc454dc13c887da66e2b"
        );
    }

    #[test]
    fn empty_object_equals_absent() {
        assert_eq!(arguments_digest(Some(&json!({}))), arguments_digest(None));
        assert_ne!(arguments_digest(Some(&json!(null))), arguments_digest(None));
        assert_ne!(arguments_digest(Some(&json!([]))), arguments_digest(None));
    }

    fn hex(bytes: &[u8]) -> String {
        use std::fmt::Write as _;
        bytes.iter().fold(String::new(), |mut out, b| {
            let _ = write!(out, "{b:02x}");
            out
        })
    }
}
