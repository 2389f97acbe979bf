//! Token version `t2` (AES-256-GCM-SIV) and the version step: the key file's
//! `seal=` entry switches sealing, every version opens during and after it.

use tern_seal::{KeyErrorKind, KeyRing, OpenError, OpenFailure, Sealer, TokenVersion};

use crate::common::{
    SECRET_A, SECRET_B, arguments, b64, claims, expect, nonce, options, ring, secs, t0,
};
use crate::vectors::{EXPECT_2, PAYLOAD_1, VECTOR_1, claims_2};

/// [`VECTOR_1`]'s claims, key, time and nonce (its first 12 bytes), sealed
/// as `t2`; reproduced by `tests/token_vectors.py`.
const T2_VECTOR_1: &str = "t2.k1.AAECAwQFBgcICQoLRniXf18e3BstzYRjPK_iviAGLtDk_QLxOOLJ2YTQhC8wt2KN8Iit_hSXhMwEzRGBl4so0M08TyvIexWG2VcOdduVDO_RYva9MaGH2zmXMa1kvJEizEkXFgXJzsm1dFcXal9eD5dJ9FwfZ8j9ti774WcsJE4jYQbdKAI3_CBi_HeFUXKvIUngfL2fgF3K2YCzc0mv0V0KzOfwcMHMiqdUM7oDYqQiBG18Q7jyw1MNnFVRCOhvl8NDBxj9wWw3hOu1Fc8-X33SqoZ8FgMqaB_quZctaUklLtfNG1rFHD0";

/// The second vector's claims as `t2`: anonymous, no arguments, empty
/// payload, nonce 12 × 0xff.
const T2_VECTOR_2: &str = "t2.k1.________________j3AgKXuXnZa1hRDhcTjRu4RS326UCSfB_9Fbmn5yDck1j8oPWZP7ydoxfKiOix3E4aCjUFR8xGGhHeXVLJQR_6mxvu2eQfjfMXil5gh0Aj6qGiirGYXfW7_wlsrx1zFKlQUupSptRDPh8CMA5ZxPhh6PSdOomcopY2TD2OKNGmP67e0Z_JQtqDfJmn7WGsOT6XGUd_dc-NRCf2i3hE4BvvvG8X_Ru8GK6SL_XOssH9qcoDJqRxSrtOxRgaTgmEMuoCbzBws";

fn sealer_as(version: TokenVersion) -> Sealer {
    Sealer::new(
        ring(&[("k1", SECRET_A)]).with_seal_version(version),
        options(),
    )
}

#[test]
fn t2_vectors_seal_exactly_and_open() {
    let sealer = sealer_as(TokenVersion::T2);
    let arguments = arguments();
    let token = sealer
        .seal(&claims(&arguments, PAYLOAD_1), t0(), nonce())
        .unwrap();
    assert_eq!(token, T2_VECTOR_1);
    let opened = sealer
        .open(T2_VECTOR_1, &expect(&arguments), t0() + secs(1))
        .unwrap();
    assert_eq!(*opened.payload, PAYLOAD_1);
    assert_eq!(opened.round, 2);
    assert_eq!(opened.expires_at, t0() + secs(600));

    let token = sealer.seal(&claims_2(), t0(), [0xff; 24]).unwrap();
    assert_eq!(token, T2_VECTOR_2);
    let opened = sealer.open(T2_VECTOR_2, &EXPECT_2, t0()).unwrap();
    assert!(opened.payload.is_empty());
    // The last 12 nonce bytes are not used by `t2`.
    let mut other = [0xff; 24];
    other[12..].fill(0);
    assert_eq!(sealer.seal(&claims_2(), t0(), other).unwrap(), T2_VECTOR_2);
}

/// The version step: a ring sealing `t1` (the default) opens `t2`, a ring
/// sealing `t2` opens `t1`, so replicas of one release interoperate before,
/// during and after the switch.
#[test]
fn both_versions_open_whichever_the_ring_seals() {
    let arguments = arguments();
    for version in TokenVersion::ALL {
        let sealer = sealer_as(version);
        for vector in [VECTOR_1, T2_VECTOR_1] {
            let opened = sealer
                .open(vector, &expect(&arguments), t0() + secs(1))
                .unwrap();
            assert_eq!(*opened.payload, PAYLOAD_1, "{version} opening {vector:.2}");
        }
        let token = sealer
            .seal(&claims(&arguments, b"fresh"), t0(), nonce())
            .unwrap();
        assert!(token.starts_with(&format!("{version}.k1.")), "{token:.8}");
    }
    // Key rotation and the version switch at once: old key, old version
    // still open under a ring whose new first key seals t2.
    let rotated = Sealer::new(
        ring(&[("k2", SECRET_B), ("k1", SECRET_A)]).with_seal_version(TokenVersion::T2),
        options(),
    );
    assert!(
        rotated
            .open(VECTOR_1, &expect(&arguments), t0() + secs(1))
            .is_ok()
    );
    let token = rotated
        .seal(&claims(&arguments, b"new"), t0(), nonce())
        .unwrap();
    assert!(token.starts_with("t2.k2."));
    assert_eq!(
        sealer_as(TokenVersion::T1)
            .open(&token, &expect(&arguments), t0())
            .unwrap_err()
            .reason(),
        OpenFailure::UnknownKey
    );
}

/// A `t2` body under a `t1` prefix, or the reverse, is refused: the version
/// is in the associated data and picks the AEAD.
#[test]
fn the_version_prefix_cannot_be_swapped() {
    let arguments = arguments();
    let sealer = sealer_as(TokenVersion::T2);
    for (token, other) in [(VECTOR_1, "t2"), (T2_VECTOR_1, "t1")] {
        let swapped = format!("{other}{}", &token[2..]);
        let error = sealer
            .open(&swapped, &expect(&arguments), t0())
            .unwrap_err();
        assert_eq!(error.reason(), OpenFailure::Decrypt, "{other}");
    }
    // A `t2` body with its nonce and tag but nothing between them.
    let short = format!("t2.k1.{}", "A".repeat(38));
    let error = sealer.open(&short, &expect(&arguments), t0()).unwrap_err();
    assert_eq!(error.reason(), OpenFailure::Decrypt);
}

#[test]
fn every_character_change_of_a_t2_token_is_refused() {
    let arguments = arguments();
    let expect = expect(&arguments);
    let sealer = sealer_as(TokenVersion::T2);
    let token = sealer
        .seal(
            &claims(&arguments, b"state worth tampering with"),
            t0(),
            nonce(),
        )
        .unwrap();
    for index in 0..token.len() {
        for bit in 0..8 {
            let mut bytes = token.clone().into_bytes();
            bytes[index] ^= 1 << bit;
            let Ok(candidate) = String::from_utf8(bytes) else {
                continue;
            };
            let error = sealer.open(&candidate, &expect, t0()).unwrap_err();
            assert_eq!(error.to_string(), OpenError::MESSAGE);
            if index >= 6 {
                assert!(
                    matches!(
                        error.reason(),
                        OpenFailure::Malformed | OpenFailure::Decrypt
                    ),
                    "{index} {bit}: {:?}",
                    error.reason()
                );
            }
        }
    }
    for len in 0..token.len() {
        assert!(sealer.open(&token[..len], &expect, t0()).is_err(), "{len}");
    }
}

#[test]
fn the_key_file_switches_sealing() {
    let keys = format!("k2:{}\nk1:{}\n", b64(&SECRET_B), b64(&SECRET_A));
    let ring = KeyRing::parse(&keys).unwrap();
    assert_eq!(ring.seal_version(), TokenVersion::T1);
    assert_eq!(*ring.to_text(), keys);

    for text in [
        format!("seal=t2\n{keys}"),
        format!("{keys}# switched on once every replica opens t2\n seal = t2 \n"),
        format!("seal=t2,{}", keys.replace('\n', ",")),
    ] {
        let ring = KeyRing::parse(&text).unwrap();
        assert_eq!(ring.seal_version(), TokenVersion::T2, "{text}");
        assert_eq!(ring.key_ids().collect::<Vec<_>>(), ["k2", "k1"]);
        assert_eq!(*ring.to_text(), format!("seal=t2\n{keys}"));
        let again = KeyRing::parse(&ring.to_text()).unwrap();
        assert_eq!(again.seal_version(), TokenVersion::T2);
        assert!(format!("{ring:?}").contains("T2"));
    }
    let explicit = KeyRing::parse(&format!("seal=t1\n{keys}")).unwrap();
    assert_eq!(explicit.seal_version(), TokenVersion::T1);
    assert_eq!(*explicit.to_text(), keys);
}

#[test]
fn bad_settings_are_refused_by_entry() {
    let key = format!("k1:{}", b64(&SECRET_A));
    for (text, entry) in [
        (format!("seal=t3\n{key}"), 1),
        (format!("{key}\nseal=T2"), 2),
        (format!("{key}\nseal="), 2),
        (format!("{key}\nseal=t2\nseal=t2"), 3),
        (format!("{key}\nseal=t1,seal=t2"), 3),
        (format!("{key}\nseals=t2"), 2),
        (format!("{key}\n=t2"), 2),
    ] {
        let error = KeyRing::parse(&text).unwrap_err();
        assert_eq!(
            (error.kind(), error.entry()),
            (KeyErrorKind::Setting, Some(entry)),
            "{text}"
        );
        assert!(error.to_string().contains("seal=t2"), "{error}");
    }
    // A setting alone is no ring.
    assert_eq!(
        KeyRing::parse("seal=t2").unwrap_err().kind(),
        KeyErrorKind::Empty
    );
}
