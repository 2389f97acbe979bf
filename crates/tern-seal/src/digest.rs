//! Digests bound into the envelope: the canonical arguments and plain SHA-256.

use std::io;

use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// SHA-256 of `bytes`.
pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    Sha256::digest(bytes).into()
}

/// The digest of a request's arguments that a token is bound to (rule
/// `state-bound-request`): SHA-256 of their RFC 8785 (JCS) canonical JSON.
///
/// Canonical JSON sorts object members (by UTF-16 code units) and writes
/// numbers in one form, so `{"a":1,"b":2}` and `{"b":2,"a":1.0}` have the same
/// digest while any change of a value does not.
///
/// Absent arguments (`None`) and an empty object (`{}`) have the same digest:
/// `tools/call` and `prompts/get` treat both as "no arguments", and a client
/// that omits `arguments` on one leg and sends `{}` on the next is retrying the
/// same request. `null`, `[]` and other values are distinct.
///
/// One deliberate departure from RFC 8785, which writes every number as an
/// IEEE-754 double: integers are written exactly. For I-JSON input (integers
/// within ±2<sup>53</sup>, all RFC 8785 promises to handle) the two agree; beyond
/// it, JCS would give `4611686018427387904` and `4611686018427387905` one
/// digest, and a state sealed for one id would open for its neighbour.
///
/// It fails closed ([`InexactNumber`]) on a number it cannot represent
/// exactly, so two argument texts a handler reads differently never share a
/// digest: a non-integer number whose text is not the shortest form of its
/// double (only possible with `serde_json`'s `arbitrary_precision`, where a
/// handler could read the extra digits), and an integral double of
/// magnitude 2<sup>53</sup> or more (an integer literal too large for 64 bits,
/// or a literal like `1e20`, whose neighbouring integers share that double).
pub fn arguments_digest(arguments: Option<&Value>) -> Result<[u8; 32], InexactNumber> {
    let Some(value) = arguments else {
        return Ok(sha256(b"{}"));
    };
    let mut hasher = HashWriter(Sha256::new());
    canonical(value, &mut hasher)?;
    Ok(hasher.0.finalize().into())
}

/// The arguments hold a number [`arguments_digest`] cannot bind exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InexactNumber;

impl std::fmt::Display for InexactNumber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the arguments hold a number that cannot be represented exactly")
    }
}

impl std::error::Error for InexactNumber {}

/// 2^53: from here on, not every integer is a double.
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0;

/// Writes `value` in canonical form (see [`arguments_digest`]).
fn canonical(value: &Value, out: &mut HashWriter) -> Result<(), InexactNumber> {
    match value {
        Value::Null | Value::Bool(_) | Value::String(_) => {
            // serde_json escapes strings exactly as JCS does: `\"`, `\\`, the
            // short forms `\b \f \n \r \t`, other controls as lowercase
            // `\u00xx`, and nothing else.
            let _ = serde_json::to_writer(&mut *out, value);
        }
        Value::Number(n) => {
            let mut digits = itoa::Buffer::new();
            if let Some(i) = n.as_i64() {
                out.0.update(digits.format(i).as_bytes());
            } else if let Some(u) = n.as_u64() {
                out.0.update(digits.format(u).as_bytes());
            } else {
                let f = n.as_f64().filter(|f| f.is_finite()).ok_or(InexactNumber)?;
                if f.fract() == 0.0 && f.abs() >= EXACT_INTEGER_LIMIT {
                    return Err(InexactNumber);
                }
                // The number's own text must be the double's: with
                // `arbitrary_precision` a longer text keeps digits the double
                // lost.
                if serde_json::Number::from_f64(f)
                    .is_none_or(|exact| exact.to_string() != n.to_string())
                {
                    return Err(InexactNumber);
                }
                write_double(f, out);
            }
        }
        Value::Array(items) => {
            out.0.update(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.0.update(b",");
                }
                canonical(item, out)?;
            }
            out.0.update(b"]");
        }
        Value::Object(members) => {
            // Members sorted with their values, so no value is looked up
            // again by its key; keys are unique, so no order is unstable.
            let mut members: Vec<(&String, &Value)> = members.iter().collect();
            members.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
            out.0.update(b"{");
            for (i, (key, value)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.0.update(b",");
                }
                let _ = serde_json::to_writer(&mut *out, key);
                out.0.update(b":");
                canonical(value, out)?;
            }
            out.0.update(b"}");
        }
    }
    Ok(())
}

/// Orders two strings by their UTF-16 code units, as RFC 8785 §3.2.3 sorts
/// object members, without transcoding them. UTF-8's byte order is code
/// point order, and the two orders disagree only between a code point of
/// U+E000–U+FFFF (lead byte `0xEE` or `0xEF`) and one above U+FFFF (lead
/// byte `0xF0`–`0xF4`), which UTF-16 writes as a surrogate pair and so sorts
/// first. The first byte where the strings differ is at the same place in
/// both characters (everything before it is equal), so it decides.
fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let Some((&x, &y)) = a.iter().zip(b).find(|(x, y)| x != y) else {
        return a.len().cmp(&b.len());
    };
    let late_bmp = |c: u8| c == 0xee || c == 0xef;
    let supplementary = |c: u8| c >= 0xf0;
    if (late_bmp(x) && supplementary(y)) || (supplementary(x) && late_bmp(y)) {
        y.cmp(&x)
    } else {
        x.cmp(&y)
    }
}

/// A double as ECMAScript's `Number.prototype.toString` writes it (RFC 8785
/// §3.2.2.3); `-0` is `0`. JSON has no NaN or infinity to write.
fn write_double(f: f64, out: &mut HashWriter) {
    if f == 0.0 {
        out.0.update(b"0");
        return;
    }
    let mut buf = ryu_js::Buffer::new();
    out.0.update(buf.format_finite(f).as_bytes());
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
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    /// Characters from every range whose UTF-8 and UTF-16 orders matter:
    /// ASCII, two- and three-byte forms, U+E000–U+FFFF, and above U+FFFF.
    fn tricky_char() -> impl Strategy<Value = char> {
        prop_oneof![
            proptest::char::range('a', 'd'),
            proptest::char::range('\u{7f}', '\u{81}'),
            proptest::char::range('\u{d7fe}', '\u{d7ff}'),
            proptest::char::range('\u{e000}', '\u{e001}'),
            proptest::char::range('\u{fffe}', '\u{ffff}'),
            proptest::char::range('\u{10000}', '\u{10001}'),
            proptest::char::range('\u{10fffe}', '\u{10ffff}'),
        ]
    }

    proptest! {
        #[test]
        fn members_sort_by_utf16_code_units(
            a in proptest::collection::vec(tricky_char(), 0..5),
            b in proptest::collection::vec(tricky_char(), 0..5),
        ) {
            let (a, b): (String, String) = (a.into_iter().collect(), b.into_iter().collect());
            prop_assert_eq!(utf16_order(&a, &b), a.encode_utf16().cmp(b.encode_utf16()));
        }
    }

    #[test]
    fn a_supplementary_key_sorts_before_a_late_bmp_one() {
        // U+1F600 is the surrogate pair D83D DE00 in UTF-16, below U+E000.
        assert_eq!(
            utf16_order("\u{1f600}", "\u{e000}"),
            std::cmp::Ordering::Less
        );
        assert_eq!(
            utf16_order("a\u{ffff}", "a\u{10000}"),
            std::cmp::Ordering::Greater
        );
        assert_eq!(utf16_order("ab", "a"), std::cmp::Ordering::Greater);
        let mixed = arguments_digest(Some(&json!({"\u{e000}": 1, "\u{1f600}": 2}))).unwrap();
        assert_eq!(mixed, sha256("{\"\u{1f600}\":2,\"\u{e000}\":1}".as_bytes()));
    }

    /// Digests computed independently (`printf '%s' '<json>' | sha256sum`).
    #[test]
    fn integers_are_bound_exactly_beyond_two_to_the_53() {
        let a = arguments_digest(Some(&json!({"id": 4_611_686_018_427_387_904_u64}))).unwrap();
        let b = arguments_digest(Some(&json!({"id": 4_611_686_018_427_387_905_u64}))).unwrap();
        assert_ne!(a, b);
        let neg = arguments_digest(Some(&json!({"id": -9_007_199_254_740_993_i64}))).unwrap();
        assert_ne!(
            neg,
            arguments_digest(Some(&json!({"id": -9_007_199_254_740_992_i64}))).unwrap()
        );
    }

    #[test]
    fn doubles_follow_ecmascript() {
        // RFC 8785 appendix B samples.
        for (n, text) in [
            (1e21, "1e+21"),
            (1e-7, "1e-7"),
            (0.000_001, "0.000001"),
            (333_333_333.333_333_3, "333333333.3333333"),
            (-0.0, "0"),
        ] {
            let mut h = HashWriter(Sha256::new());
            write_double(n, &mut h);
            assert_eq!(
                h.0.finalize().as_slice(),
                sha256(text.as_bytes()).as_slice(),
                "{n}"
            );
        }
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+1F600 (surrogates D83D DE00) sorts before U+FB01 in UTF-16, after it
        // in UTF-8 / code points.
        let value = json!({"\u{fb01}": 1, "\u{1f600}": 2});
        let mut h = HashWriter(Sha256::new());
        canonical(&value, &mut h).unwrap();
        let want = sha256("{\"\u{1f600}\":2,\"\u{fb01}\":1}".as_bytes());
        assert_eq!(h.0.finalize().as_slice(), want.as_slice());
    }

    #[test]
    fn known_digests() {
        assert_eq!(
            hex(&arguments_digest(None).unwrap()),
            "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(
            hex(&arguments_digest(Some(&json!({"b": [true, null, "x"], "a": 1.5}))).unwrap()),
            "c7d663295c9d20eeecb7ff2d717d0e31285e9bb52d28dc454dc13c887da66e2b"
        );
    }

    /// Two texts a handler would read differently never share a digest: a
    /// number the digest cannot hold exactly is refused, not rounded.
    #[test]
    fn inexact_numbers_fail_closed() {
        for text in [
            r#"{"id": 18446744073709551616}"#,
            r#"{"id": 18446744073709551617}"#,
            r#"{"id": -9223372036854775809}"#,
            r#"{"n": 1e20}"#,
            r#"{"deep": [{"n": 9007199254740992.0}]}"#,
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(arguments_digest(Some(&value)), Err(InexactNumber), "{text}");
        }
        for text in [
            r#"{"id": 18446744073709551615}"#,
            r#"{"id": -9223372036854775808}"#,
            r#"{"n": 9007199254740991.0}"#,
            r#"{"n": 0.1}"#,
            r#"{"n": 1e-300}"#,
            r#"{"n": 123456.5e3}"#,
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            assert!(arguments_digest(Some(&value)).is_ok(), "{text}");
        }
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
