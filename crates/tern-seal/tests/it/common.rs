//! Fixtures shared by the test modules.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tern_seal::{Claims, Expect, Key, KeyRing, Sealer, SealerOptions};

/// Key A's secret: 32 random bytes
/// (`5300ad8820040f8145a01648d81d30664feccb9c5b386aac98b09337e98537ec`).
pub(crate) const SECRET_A: [u8; 32] = [
    0x53, 0x00, 0xad, 0x88, 0x20, 0x04, 0x0f, 0x81, 0x45, 0xa0, 0x16, 0x48, 0xd8, 0x1d, 0x30, 0x66,
    0x4f, 0xec, 0xcb, 0x9c, 0x5b, 0x38, 0x6a, 0xac, 0x98, 0xb0, 0x93, 0x37, 0xe9, 0x85, 0x37, 0xec,
];

/// Key B's secret: 32 other random bytes.
pub(crate) const SECRET_B: [u8; 32] = [
    0x43, 0xb9, 0x6d, 0x6a, 0x47, 0x87, 0xea, 0xb0, 0x2d, 0x7d, 0xe8, 0x7a, 0x39, 0x89, 0x6e, 0x66,
    0x5f, 0xe3, 0x3f, 0xb5, 0x97, 0xc6, 0xe0, 0xff, 0x6d, 0x83, 0x42, 0x39, 0x3e, 0xb2, 0x09, 0xa8,
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
