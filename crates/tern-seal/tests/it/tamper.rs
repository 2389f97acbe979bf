//! Rules `state-untrusted` and `state-integrity`: a token is
//! attacker-controlled. Any single-bit flip, truncation or
//! extension is refused, without a panic, and always with the same message.

use proptest::prelude::*;
use tern_seal::{Expect, OpenError, OpenFailure, Sealer};

use crate::common::{arguments, claims, expect, sealer, t0, token};

/// Opens `candidate`, which must be refused.
fn assert_refused(sealer: &Sealer, candidate: &str, expect: &Expect<'_>) -> OpenFailure {
    let error = sealer
        .open(candidate, expect, t0())
        .expect_err("a modified token must not open");
    assert_eq!(error.to_string(), OpenError::MESSAGE);
    error.reason()
}

/// `token` with bit `bit` of the character at `index` flipped, if the result
/// is still a character.
fn flip(token: &str, index: usize, bit: u32) -> Option<String> {
    let mut chars: Vec<char> = token.chars().collect();
    chars[index] = char::from_u32(u32::from(chars[index]) ^ (1 << bit))?;
    Some(chars.into_iter().collect())
}

/// The reasons a change at character `index` of a `t1.k1.` token may give.
fn plausible(index: usize, reason: OpenFailure) -> bool {
    match index {
        // "t1": another version or garbage.
        0 | 1 => matches!(reason, OpenFailure::UnknownVersion | OpenFailure::Malformed),
        // Separators and the key id.
        2..=5 => matches!(reason, OpenFailure::Malformed | OpenFailure::UnknownKey),
        // The body: bad base64, or bytes the AEAD refuses.
        _ => matches!(reason, OpenFailure::Malformed | OpenFailure::Decrypt),
    }
}

#[test]
fn every_bit_flip_of_every_character_is_refused() {
    let arguments = arguments();
    let expect = expect(&arguments);
    let sealer = sealer();
    let token = token(b"some state worth tampering with");
    assert!(sealer.open(&token, &expect, t0()).is_ok());
    let len = token.chars().count();
    for index in 0..len {
        // Bits 0..=7 cover every ASCII neighbour and some non-ASCII ones;
        // higher bits reach far-away code points.
        for bit in [0, 1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 20] {
            let Some(candidate) = flip(&token, index, bit) else {
                continue;
            };
            let reason = assert_refused(&sealer, &candidate, &expect);
            assert!(
                plausible(index, reason),
                "index {index} bit {bit}: {reason:?}"
            );
        }
    }
}

#[test]
fn every_truncation_is_refused() {
    let arguments = arguments();
    let expect = expect(&arguments);
    let sealer = sealer();
    let token = token(b"truncate me");
    for len in 0..token.len() {
        assert_refused(&sealer, &token[..len], &expect);
    }
}

#[test]
fn every_extension_is_refused() {
    let arguments = arguments();
    let expect = expect(&arguments);
    let sealer = sealer();
    // Each remainder mod 4 of the body length, so every base64 tail is hit.
    for payload_len in 0..4 {
        let token = token(&vec![5; payload_len]);
        for extra in (' '..='~').chain(['\0', '\n', 'é', '€', '😀', '\u{10ffff}']) {
            let candidate = format!("{token}{extra}");
            let reason = assert_refused(&sealer, &candidate, &expect);
            assert!(
                matches!(reason, OpenFailure::Malformed | OpenFailure::Decrypt),
                "{extra:?}: {reason:?}"
            );
            let prefixed = format!("{extra}{token}");
            assert_refused(&sealer, &prefixed, &expect);
        }
    }
}

#[test]
fn garbage_is_refused() {
    let arguments = arguments();
    let expect = expect(&arguments);
    let sealer = sealer();
    for junk in [
        "",
        ".",
        "..",
        "t1",
        "t1.",
        "t1..",
        "t1.k1",
        "t1.k1.",
        "t1.k1..",
        "t2.k1.AAAA",
        "t3.k1.AAAA",
        "t1.k9.AAAA",
        "t1.k1.AAAA",
        "T1.k1.AAAA",
        "t1.k1.====",
        "t1.k1.AA==",
        "t1.0123456789abcdefg.AAAA",
        "t1.k 1.AAAA",
    ] {
        assert_refused(&sealer, junk, &expect);
    }
    assert_eq!(
        assert_refused(&sealer, "t3.k1.AAAA", &expect),
        OpenFailure::UnknownVersion
    );
    // `t2` is known: three bytes are too short for its nonce and tag.
    assert_eq!(
        assert_refused(&sealer, "t2.k1.AAAA", &expect),
        OpenFailure::Malformed
    );
    assert_eq!(
        assert_refused(&sealer, "t1.k9.AAAA", &expect),
        OpenFailure::UnknownKey
    );
    // A body long enough for nonce and tag but forged.
    let forged = format!("t1.k1.{}", "A".repeat(300));
    assert_eq!(
        assert_refused(&sealer, &forged, &expect),
        OpenFailure::Decrypt
    );
}

#[test]
fn swapping_bodies_between_tokens_is_refused() {
    // Two genuine tokens: one's nonce with the other's ciphertext fails.
    let arguments = arguments();
    let expect = expect(&arguments);
    let sealer = sealer();
    let one = token(b"one");
    let two = sealer
        .seal(&claims(&arguments, b"two"), t0(), [0x42; 24])
        .unwrap();
    let nonce_chars = 32; // 24 bytes of nonce are 32 base64 characters
    let spliced = format!("{}{}", &one[..6 + nonce_chars], &two[6 + nonce_chars..]);
    assert_eq!(
        assert_refused(&sealer, &spliced, &expect),
        OpenFailure::Decrypt
    );
}

/// One way of damaging a token.
#[derive(Debug, Clone)]
enum Mutation {
    Flip { index: usize, bit: u32 },
    Truncate { len: usize },
    Extend { extra: char },
    Replace { index: usize, with: char },
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0_u32..21).prop_map(|(index, bit)| Mutation::Flip { index, bit }),
        any::<usize>().prop_map(|len| Mutation::Truncate { len }),
        any::<char>().prop_map(|extra| Mutation::Extend { extra }),
        (any::<usize>(), any::<char>()).prop_map(|(index, with)| Mutation::Replace { index, with }),
    ]
}

fn apply(token: &str, mutation: &Mutation) -> Option<String> {
    let chars: Vec<char> = token.chars().collect();
    match *mutation {
        Mutation::Flip { index, bit } => flip(token, index % chars.len(), bit),
        Mutation::Truncate { len } => Some(chars[..len % chars.len()].iter().collect()),
        Mutation::Extend { extra } => Some(format!("{token}{extra}")),
        Mutation::Replace { index, with } => {
            let mut chars = chars;
            let index = index % chars.len();
            if chars[index] == with {
                return None;
            }
            chars[index] = with;
            Some(chars.into_iter().collect())
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn any_damage_to_any_token_is_refused(
        payload in proptest::collection::vec(any::<u8>(), 0..1024),
        seal_nonce in any::<[u8; 24]>(),
        mutation in mutation(),
    ) {
        let arguments = arguments();
        let expect = expect(&arguments);
        let sealer = sealer();
        let token = sealer.seal(&claims(&arguments, &payload), t0(), seal_nonce).unwrap();
        prop_assert_eq!(&*sealer.open(&token, &expect, t0()).unwrap().payload, &payload);
        if let Some(candidate) = apply(&token, &mutation) {
            prop_assert_ne!(&candidate, &token);
            let error = sealer.open(&candidate, &expect, t0()).unwrap_err();
            prop_assert_eq!(error.to_string(), OpenError::MESSAGE);
        }
    }

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}", body in "[A-Za-z0-9_-]{0,400}") {
        let arguments = arguments();
        let expect = expect(&arguments);
        let sealer = sealer();
        prop_assert!(sealer.open(&text, &expect, t0()).is_err());
        let candidate = format!("t1.k1.{body}");
        prop_assert!(sealer.open(&candidate, &expect, t0()).is_err());
    }

    /// Target `seal-open-spliced`: two genuine tokens cut and joined at
    /// random points (the key id of one, the body of the other, halves of
    /// two bodies): never opens unless it is one of the two.
    #[test]
    fn spliced_genuine_tokens_are_refused(
        a in proptest::collection::vec(any::<u8>(), 0..256),
        b in proptest::collection::vec(any::<u8>(), 0..256),
        nonces in any::<([u8; 24], [u8; 24])>(),
        cut_a in any::<prop::sample::Index>(),
        cut_b in any::<prop::sample::Index>(),
    ) {
        let arguments = arguments();
        let expect = expect(&arguments);
        let sealer = sealer();
        let ta = sealer.seal(&claims(&arguments, &a), t0(), nonces.0).unwrap();
        let tb = sealer.seal(&claims(&arguments, &b), t0(), nonces.1).unwrap();
        let (i, j) = (cut_a.index(ta.len() + 1), cut_b.index(tb.len() + 1));
        let candidate = format!("{}{}", &ta[..i], &tb[j..]);
        if candidate != ta && candidate != tb {
            let error = sealer.open(&candidate, &expect, t0()).unwrap_err();
            prop_assert_eq!(error.to_string(), OpenError::MESSAGE);
        }
    }
}
