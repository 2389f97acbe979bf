//! Expiry with an injected clock, and the size cap on both sides.

use std::time::Duration;

use tern_seal::{DEFAULT_MAX_TOKEN_LEN, DEFAULT_TTL, OpenFailure, SealError, SealerOptions};

use crate::common::{
    SECRET_A, arguments, claims, expect, nonce, options, sealer, sealer_with, secs, t0, token,
};

#[test]
fn defaults_are_as_documented() {
    let defaults = SealerOptions::default();
    assert_eq!(defaults.ttl, Duration::from_secs(600));
    assert_eq!(defaults.ttl, DEFAULT_TTL);
    assert_eq!(defaults.max_token_len, 65_536);
    assert_eq!(defaults.max_token_len, DEFAULT_MAX_TOKEN_LEN);
}

#[test]
fn expiry_boundary_is_exact() {
    let arguments = arguments();
    let sealer = sealer();
    let token = token(b"");
    let open = |at| sealer.open(&token, &expect(&arguments), at);
    assert!(open(t0() + secs(599)).is_ok());
    assert!(open(t0() + secs(600) - Duration::from_nanos(1)).is_ok());
    assert_eq!(
        open(t0() + secs(600)).unwrap_err().reason(),
        OpenFailure::Expired
    );
    assert_eq!(
        open(t0() + secs(86_400)).unwrap_err().reason(),
        OpenFailure::Expired
    );
}

#[test]
fn expiry_follows_the_configured_ttl() {
    let arguments = arguments();
    let sealer = sealer_with(
        &[("k1", SECRET_A)],
        SealerOptions {
            ttl: secs(30),
            ..options()
        },
    );
    // Sealed mid-second: times are whole seconds, so it lives 29.3 s here.
    let sealed_at = t0() + Duration::from_millis(700);
    let token = sealer
        .seal(&claims(&arguments, b""), sealed_at, nonce())
        .unwrap();
    let opened = sealer.open(&token, &expect(&arguments), sealed_at).unwrap();
    assert_eq!(opened.issued_at, t0());
    assert_eq!(opened.expires_at, t0() + secs(30));
    let open = |at| sealer.open(&token, &expect(&arguments), at);
    assert!(open(t0() + secs(29)).is_ok());
    assert_eq!(
        open(t0() + secs(30)).unwrap_err().reason(),
        OpenFailure::Expired
    );
}

#[test]
fn tokens_from_the_future_are_refused() {
    let arguments = arguments();
    let sealer = sealer();
    let token = token(b"");
    let open = |at| sealer.open(&token, &expect(&arguments), at);
    // Up to 60 s of skew between replicas is tolerated.
    assert!(open(t0() - secs(60)).is_ok());
    assert_eq!(
        open(t0() - secs(61)).unwrap_err().reason(),
        OpenFailure::NotYetValid
    );
}

#[test]
fn sealing_refuses_a_clock_before_1970() {
    let arguments = arguments();
    let before = std::time::UNIX_EPOCH - secs(1);
    let error = sealer()
        .seal(&claims(&arguments, b""), before, nonce())
        .unwrap_err();
    assert_eq!(error, SealError::Clock);
}

#[test]
fn oversized_payload_is_refused_at_sealing() {
    let arguments = arguments();
    let payload = vec![0_u8; DEFAULT_MAX_TOKEN_LEN];
    let error = sealer()
        .seal(&claims(&arguments, &payload), t0(), nonce())
        .unwrap_err();
    let SealError::TooLarge { len, max } = error else {
        panic!("expected TooLarge, got {error:?}");
    };
    assert_eq!(max, DEFAULT_MAX_TOKEN_LEN);
    assert!(len > max);
}

#[test]
fn size_cap_boundary_is_exact() {
    let arguments = arguments();
    let exact_len = token(&[7; 100]).len();
    let capped = sealer_with(
        &[("k1", SECRET_A)],
        SealerOptions {
            max_token_len: exact_len,
            ..options()
        },
    );
    let fits = capped
        .seal(&claims(&arguments, &[7; 100]), t0(), nonce())
        .unwrap();
    assert_eq!(fits.len(), exact_len);
    assert!(capped.open(&fits, &expect(&arguments), t0()).is_ok());
    let error = capped
        .seal(&claims(&arguments, &[7; 101]), t0(), nonce())
        .unwrap_err();
    assert!(matches!(error, SealError::TooLarge { len, max } if len > max && max == exact_len));
}

#[test]
fn oversized_token_is_refused_before_decoding() {
    let arguments = arguments();
    let sealer = sealer();
    // Not even a token: were it decoded, it would be Malformed.
    let junk = "!".repeat(DEFAULT_MAX_TOKEN_LEN + 1);
    let error = sealer.open(&junk, &expect(&arguments), t0()).unwrap_err();
    assert_eq!(error.reason(), OpenFailure::TooLarge);
    assert_eq!(
        sealer
            .open(&junk[1..], &expect(&arguments), t0())
            .unwrap_err()
            .reason(),
        OpenFailure::Malformed
    );
    // A valid token is refused by a sealer with a smaller cap.
    let token = token(&[1; 1000]);
    let strict = sealer_with(
        &[("k1", SECRET_A)],
        SealerOptions {
            max_token_len: token.len() - 1,
            ..options()
        },
    );
    assert_eq!(
        strict
            .open(&token, &expect(&arguments), t0())
            .unwrap_err()
            .reason(),
        OpenFailure::TooLarge
    );
}

#[test]
fn method_longer_than_255_bytes_is_refused() {
    let arguments = arguments();
    let method = "m".repeat(256);
    let claims = tern_seal::Claims {
        method: &method,
        ..claims(&arguments, b"")
    };
    assert_eq!(
        sealer().seal(&claims, t0(), nonce()).unwrap_err(),
        SealError::MethodTooLong
    );
}
