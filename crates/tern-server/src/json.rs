//! Results serialised once, straight into the response.

use serde::Serialize;
use serde_json::value::RawValue;

/// A serialised result.
pub(crate) type Json = Box<RawValue>;

/// Serialises a result; a value that cannot be encoded (never, for tern's
/// own types) is logged and sent as `null`.
pub(crate) fn to_json<T: Serialize>(value: &T) -> Json {
    serde_json::value::to_raw_value(value).unwrap_or_else(|e| {
        tracing::error!(error = %e, "cannot encode a result");
        RawValue::NULL.to_owned()
    })
}

/// Lowercase hex of `bytes` (ids, digests, fingerprints), by table: no
/// formatter per byte on the hot path.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)]);
        out.push(DIGITS[usize::from(b & 0x0f)]);
    }
    // Only ASCII digits were pushed.
    String::from_utf8(out).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_lowercase_two_digits_a_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
        assert_eq!(super::hex(&[]), "");
    }
}
