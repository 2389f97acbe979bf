//! Fixtures shared by the test modules.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tern_seal::{Claims, Expect, Key, KeyRing, Sealer, SealerOptions};

/// Key A's secret: bytes 1 to 32.
pub(crate) const SECRET_A: [u8; 32] = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
    27, 28, 29, 30, 31, 32,
];

/// Key B's secret: bytes 0xe0 down to 0xc1.
pub(crate) const SECRET_B: [u8; 32] = [
    0xe0, 0xdf, 0xde, 0xdd, 0xdc, 0xdb, 0xda, 0xd9, 0xd8, 0xd7, 0xd6, 0xd5, 0xd4, 0xd3, 0xd2, 0xd1,
    0xd0, 0xcf, 0xce, 0xcd, 0xcc, 0xcb, 0xca, 0xc9, 0xc8, 0xc7, 0xc6, 0xc5, 0xc4, 0xc3, 0xc2, 0xc1,
];

pub(crate) const AUDIENCE: &str = "https://mcp.example.com";

/// The fixed "now" of the tests: 2027-01-15T08:00:00Z.
pub(crate) fn t0() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_800_000_000)
}

pub(crate) fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

pub(crate) fn b64(secret: &[u8; 32]) -> String {
    URL_SAFE_NO_PAD.encode(secret)
}

pub(crate) fn ring(keys: &[(&str, [u8; 32])]) -> KeyRing {
    KeyRing::new(
        keys.iter()
            .map(|(id, secret)| Key::new(id, *secret).expect("test keys are valid"))
            .collect(),
    )
    .expect("test rings are non-empty with unique ids")
}

pub(crate) fn sealer_with(keys: &[(&str, [u8; 32])], options: SealerOptions) -> Sealer {
    Sealer::new(ring(keys), options)
}

/// A sealer with key A ("k1") and the test audience.
pub(crate) fn sealer() -> Sealer {
    sealer_with(&[("k1", SECRET_A)], options())
}

pub(crate) fn options() -> SealerOptions {
    SealerOptions {
        audience: AUDIENCE.into(),
        ..SealerOptions::default()
    }
}

pub(crate) fn arguments() -> Value {
    json!({"size": 3, "name": "orders"})
}

pub(crate) fn claims<'a>(arguments: &'a Value, payload: &'a [u8]) -> Claims<'a> {
    Claims {
        principal: Some("user-42"),
        method: "tools/call",
        target: "provision_database",
        arguments: Some(arguments),
        state_id: std::array::from_fn(|i| 0xa0 + u8::try_from(i).expect("i < 16")),
        round: 2,
        payload,
    }
}

/// What a faithful retry of [`claims`] expects.
pub(crate) fn expect(arguments: &Value) -> Expect<'_> {
    Expect {
        principal: Some("user-42"),
        method: "tools/call",
        target: "provision_database",
        arguments: Some(arguments),
    }
}

pub(crate) fn nonce() -> [u8; 24] {
    std::array::from_fn(|i| u8::try_from(i).expect("i < 24"))
}

/// A valid token for [`claims`] with `payload`, sealed by [`sealer`] at [`t0`].
pub(crate) fn token(payload: &[u8]) -> String {
    let arguments = arguments();
    sealer()
        .seal(&claims(&arguments, payload), t0(), nonce())
        .expect("test payloads fit")
}
