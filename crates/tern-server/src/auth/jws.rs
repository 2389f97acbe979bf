//! Compact JWS (RFC 7515) verification for [`super::JwtVerifier`], on ring.
//!
//! The signature itself is ring's (the crypto provider rustls already
//! builds), so the resource server adds no cryptographic crate: this module
//! only frames the token (three base64url parts, the header's members), reads
//! a JWKS entry into a public key (RFC 7517, RFC 7518 §6), and checks that the
//! header's algorithm, the key's family and the key's own `alg` agree before
//! ring verifies. Claims are the caller's (`jwt.rs`).
//!
//! Refused here, whatever the key: `alg` outside [`Algorithm`] (`none` and
//! HS* included), a `crit` header (RFC 7515 §4.1.11: no extension is
//! understood), `b64: false`, an RSA modulus under 2048 bits (ring's floor),
//! a key whose `use` is not `sig`.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::signature;
use serde_json::Value;

/// An asymmetric JWS algorithm an access token may be signed with
/// (RFC 7518 §3.1, RFC 8037 §3.1). Symmetric ones (HS*) and `none` do not
/// exist here, so no configuration can accept them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    RS256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    RS384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    RS512,
    /// RSASSA-PSS with SHA-256 and MGF1 with SHA-256.
    PS256,
    /// RSASSA-PSS with SHA-384 and MGF1 with SHA-384.
    PS384,
    /// RSASSA-PSS with SHA-512 and MGF1 with SHA-512.
    PS512,
    /// ECDSA on P-256 with SHA-256.
    ES256,
    /// ECDSA on P-384 with SHA-384.
    ES384,
    /// Ed25519 (RFC 8037's `EdDSA` with `crv: Ed25519`).
    EdDSA,
}

impl Algorithm {
    /// Every algorithm, the default accepted set.
    pub const ALL: [Self; 9] = [
        Self::RS256,
        Self::RS384,
        Self::RS512,
        Self::PS256,
        Self::PS384,
        Self::PS512,
        Self::ES256,
        Self::ES384,
        Self::EdDSA,
    ];

    /// The `alg` header value.
    pub fn name(self) -> &'static str {
        match self {
            Self::RS256 => "RS256",
            Self::RS384 => "RS384",
            Self::RS512 => "RS512",
            Self::PS256 => "PS256",
            Self::PS384 => "PS384",
            Self::PS512 => "PS512",
            Self::ES256 => "ES256",
            Self::ES384 => "ES384",
            Self::EdDSA => "EdDSA",
        }
    }

    /// The algorithm an `alg` value names, if it is one of these.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|a| a.name() == name)
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Curve {
    P256,
    P384,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum PublicKey {
    /// Modulus and exponent, big-endian, leading zeros stripped.
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// The uncompressed point, `0x04 || x || y`.
    Ec {
        curve: Curve,
        point: Vec<u8>,
    },
    Ed25519(Vec<u8>),
}

/// One key of a JWKS that can check signatures.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Jwk {
    pub(crate) kid: Option<String>,
    /// The key's own `alg`, when it names one (RFC 7517 §4.4): then only
    /// that algorithm may use it.
    alg: Option<Algorithm>,
    key: PublicKey,
}

/// Why a JWKS member is not a [`Jwk`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unusable {
    /// A symmetric (`oct`) key or one meant for encryption: not an error of
    /// the set, just not a signature key.
    NotForSignatures,
    /// A key that cannot be read (unknown `kty` or curve, a malformed
    /// member).
    Malformed(String),
}

fn member<'a>(key: &'a Value, name: &str) -> Result<&'a str, Unusable> {
    key.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| Unusable::Malformed(format!("no string \"{name}\"")))
}

fn bytes(key: &Value, name: &str) -> Result<Vec<u8>, Unusable> {
    URL_SAFE_NO_PAD
        .decode(member(key, name)?)
        .map_err(|e| Unusable::Malformed(format!("\"{name}\" is not base64url: {e}")))
}

fn fixed(key: &Value, name: &str, len: usize) -> Result<Vec<u8>, Unusable> {
    let b = bytes(key, name)?;
    if b.len() == len {
        Ok(b)
    } else {
        Err(Unusable::Malformed(format!(
            "\"{name}\" is {} bytes, not {len}",
            b.len()
        )))
    }
}

fn unsigned(mut b: Vec<u8>) -> Vec<u8> {
    let zeros = b.iter().take_while(|&&x| x == 0).count();
    b.drain(..zeros);
    b
}

impl Jwk {
    /// Reads one member of a JWKS `keys` array.
    pub(crate) fn read(key: &Value) -> Result<Self, Unusable> {
        if !key.is_object() {
            return Err(Unusable::Malformed("not an object".into()));
        }
        match key.get("use") {
            None => {}
            Some(Value::String(u)) if u == "sig" => {}
            Some(_) => return Err(Unusable::NotForSignatures),
        }
        let alg = match key.get("alg") {
            None => None,
            Some(Value::String(a)) => match Algorithm::from_name(a) {
                Some(a) => Some(a),
                // An HS* or encryption key, or one of an algorithm not
                // accepted here: it serves nothing this verifier checks.
                None => return Err(Unusable::NotForSignatures),
            },
            Some(_) => return Err(Unusable::Malformed("\"alg\" is not a string".into())),
        };
        let kid = match key.get("kid") {
            None => None,
            Some(Value::String(k)) => Some(k.clone()),
            Some(_) => return Err(Unusable::Malformed("\"kid\" is not a string".into())),
        };
        let key = match member(key, "kty")? {
            "RSA" => {
                let n = unsigned(bytes(key, "n")?);
                let e = unsigned(bytes(key, "e")?);
                if n.len() < 256 {
                    return Err(Unusable::Malformed(format!(
                        "an RSA modulus of {} bits (2048 at least)",
                        n.len() * 8
                    )));
                }
                PublicKey::Rsa { n, e }
            }
            "EC" => {
                let (curve, len) = match member(key, "crv")? {
                    "P-256" => (Curve::P256, 32),
                    "P-384" => (Curve::P384, 48),
                    other => return Err(Unusable::Malformed(format!("curve {other:?}"))),
                };
                let mut point = vec![4];
                point.extend(fixed(key, "x", len)?);
                point.extend(fixed(key, "y", len)?);
                PublicKey::Ec { curve, point }
            }
            "OKP" => match member(key, "crv")? {
                "Ed25519" => PublicKey::Ed25519(fixed(key, "x", 32)?),
                other => return Err(Unusable::Malformed(format!("curve {other:?}"))),
            },
            "oct" => return Err(Unusable::NotForSignatures),
            other => return Err(Unusable::Malformed(format!("kty {other:?}"))),
        };
        Ok(Self { kid, alg, key })
    }

    /// Checks `signature` over `input` with `alg`, refusing an algorithm
    /// this key is not of (an RSA key never checks ES256, an EC key of P-256
    /// never ES384) or not meant for.
    fn verify(&self, alg: Algorithm, input: &[u8], sig: &[u8]) -> Result<(), String> {
        if self.alg.is_some_and(|own| own != alg) {
            return Err(format!(
                "the key is for {}, not {alg}",
                self.alg.unwrap_or(alg)
            ));
        }
        let refused = |_| "the signature does not verify".to_owned();
        let mismatch = || Err(format!("the key is not of the {alg} family"));
        match (&self.key, alg) {
            (PublicKey::Rsa { n, e }, _) => {
                let params: &signature::RsaParameters = match alg {
                    Algorithm::RS256 => &signature::RSA_PKCS1_2048_8192_SHA256,
                    Algorithm::RS384 => &signature::RSA_PKCS1_2048_8192_SHA384,
                    Algorithm::RS512 => &signature::RSA_PKCS1_2048_8192_SHA512,
                    Algorithm::PS256 => &signature::RSA_PSS_2048_8192_SHA256,
                    Algorithm::PS384 => &signature::RSA_PSS_2048_8192_SHA384,
                    Algorithm::PS512 => &signature::RSA_PSS_2048_8192_SHA512,
                    _ => return mismatch(),
                };
                signature::RsaPublicKeyComponents { n, e }
                    .verify(params, input, sig)
                    .map_err(refused)
            }
            (PublicKey::Ec { curve, point }, _) => {
                let params = match (curve, alg) {
                    (Curve::P256, Algorithm::ES256) => &signature::ECDSA_P256_SHA256_FIXED,
                    (Curve::P384, Algorithm::ES384) => &signature::ECDSA_P384_SHA384_FIXED,
                    _ => return mismatch(),
                };
                signature::UnparsedPublicKey::new(params, point)
                    .verify(input, sig)
                    .map_err(refused)
            }
            (PublicKey::Ed25519(x), Algorithm::EdDSA) => {
                signature::UnparsedPublicKey::new(&signature::ED25519, x)
                    .verify(input, sig)
                    .map_err(refused)
            }
            (PublicKey::Ed25519(_), _) => mismatch(),
        }
    }
}

/// A compact JWS split and its header read; nothing verified yet.
#[derive(Debug)]
pub(crate) struct Token<'a> {
    /// `BASE64URL(header) || '.' || BASE64URL(payload)`, what was signed.
    input: &'a str,
    payload: &'a str,
    signature: Vec<u8>,
    pub(crate) alg: Algorithm,
    pub(crate) typ: Option<String>,
    pub(crate) kid: Option<String>,
}

impl<'a> Token<'a> {
    /// Splits `token` and reads its header.
    pub(crate) fn parse(token: &'a str) -> Result<Self, String> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("not a JWT: not three dot-separated parts".into());
        };
        let decode = |what: &str, part: &str| {
            URL_SAFE_NO_PAD
                .decode(part)
                .map_err(|e| format!("not a JWT: the {what} is not base64url ({e})"))
        };
        let header: serde_json::Map<String, Value> =
            serde_json::from_slice(&decode("header", header)?)
                .map_err(|e| format!("not a JWT: the header is not a JSON object ({e})"))?;
        let text = |name: &str| match header.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(format!(
                "not a JWT: the header's \"{name}\" is not a string"
            )),
        };
        let alg_name = text("alg")?.ok_or("not a JWT: the header has no \"alg\"")?;
        let alg = Algorithm::from_name(&alg_name)
            .ok_or_else(|| format!("algorithm {alg_name:?} is not accepted"))?;
        if header.contains_key("crit") {
            return Err(
                "the header names critical extensions (\"crit\"); none is understood".into(),
            );
        }
        if header.contains_key("b64") {
            return Err("the header's \"b64\" (RFC 7797) is not supported".into());
        }
        Ok(Self {
            input: &token[..header_and_payload_len(token)],
            payload,
            signature: decode("signature", signature)?,
            alg,
            typ: text("typ")?,
            kid: text("kid")?,
        })
    }

    /// The claims, once `key` verified the signature with the header's
    /// algorithm.
    pub(crate) fn verify(&self, key: &Jwk) -> Result<serde_json::Map<String, Value>, String> {
        key.verify(self.alg, self.input.as_bytes(), &self.signature)?;
        let payload = URL_SAFE_NO_PAD
            .decode(self.payload)
            .map_err(|e| format!("the payload is not base64url ({e})"))?;
        serde_json::from_slice(&payload)
            .map_err(|e| format!("the claims are not a JSON object ({e})"))
    }
}

fn header_and_payload_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(token.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_asymmetric_algorithms_have_names() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::from_name(a.name()), Some(a));
        }
        for bad in ["none", "HS256", "HS512", "es256", "RS1", ""] {
            assert_eq!(Algorithm::from_name(bad), None, "{bad}");
        }
    }

    fn b64(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(v.to_string())
    }

    #[test]
    fn a_token_is_three_parts_with_a_readable_header() {
        let header = b64(&json!({"alg": "ES256", "typ": "at+jwt", "kid": "k"}));
        let ok = format!("{header}.{}.AAAA", b64(&json!({})));
        let t = Token::parse(&ok).unwrap();
        assert_eq!(t.alg, Algorithm::ES256);
        assert_eq!(t.kid.as_deref(), Some("k"));
        assert_eq!(t.input, &ok[..ok.rfind('.').unwrap()]);
        for (what, bad) in [
            ("two parts", format!("{header}.AAAA")),
            ("four parts", format!("{header}.e30.AAAA.AAAA")),
            ("padding", format!("{header}=.e30.AAAA")),
            ("header not JSON", "bm90IGpzb24.e30.AAAA".to_owned()),
            ("alg none", format!("{}.e30.", b64(&json!({"alg": "none"})))),
            (
                "HS256",
                format!("{}.e30.AAAA", b64(&json!({"alg": "HS256"}))),
            ),
            (
                "alg a number",
                format!("{}.e30.AAAA", b64(&json!({"alg": 7}))),
            ),
            (
                "no alg",
                format!("{}.e30.AAAA", b64(&json!({"typ": "at+jwt"}))),
            ),
            (
                "crit",
                format!(
                    "{}.e30.AAAA",
                    b64(&json!({"alg": "ES256", "crit": ["exp"]}))
                ),
            ),
            (
                "b64 false",
                format!("{}.e30.AAAA", b64(&json!({"alg": "ES256", "b64": false}))),
            ),
        ] {
            assert!(Token::parse(&bad).is_err(), "{what}");
        }
    }

    #[test]
    fn keys_are_read_by_family_and_the_others_are_not_signature_keys() {
        let ec = json!({"kty": "EC", "crv": "P-256", "kid": "e",
            "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
            "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"});
        let key = Jwk::read(&ec).unwrap();
        assert_eq!(key.kid.as_deref(), Some("e"));
        assert!(
            matches!(key.key, PublicKey::Ec { curve: Curve::P256, ref point } if point.len() == 65)
        );
        let with = |k: &str, v: Value| {
            let mut j = ec.clone();
            j[k] = v;
            j
        };
        assert_eq!(
            Jwk::read(&json!({"kty": "oct", "k": "c2VjcmV0"})),
            Err(Unusable::NotForSignatures)
        );
        assert_eq!(
            Jwk::read(&with("use", json!("enc"))),
            Err(Unusable::NotForSignatures)
        );
        assert_eq!(
            Jwk::read(&with("alg", json!("HS256"))),
            Err(Unusable::NotForSignatures)
        );
        for (what, bad) in [
            ("short x", with("x", json!("AAAA"))),
            ("x a number", with("x", json!(7))),
            ("curve", with("crv", json!("P-521"))),
            ("kty", json!({"kty": "PQC"})),
            ("kid a number", with("kid", json!(1))),
            (
                "small RSA",
                json!({"kty": "RSA", "n": URL_SAFE_NO_PAD.encode([0xC5; 128]), "e": "AQAB"}),
            ),
            ("not an object", json!("key")),
        ] {
            assert!(
                matches!(Jwk::read(&bad), Err(Unusable::Malformed(_))),
                "{what}"
            );
        }
        // A modulus's leading zero byte is not a bit of it.
        let mut n = vec![0];
        n.extend([0xC5; 256]);
        let rsa = Jwk::read(&json!({"kty": "RSA", "n": URL_SAFE_NO_PAD.encode(&n), "e": "AQAB"}))
            .unwrap();
        assert!(matches!(rsa.key, PublicKey::Rsa { ref n, .. } if n.len() == 256));
    }

    /// Tokens signed by an independent implementation (jsonwebtoken on
    /// `RustCrypto`), their JWKs written by it too, verified here.
    mod against_rustcrypto {
        use super::*;
        use jsonwebtoken::{EncodingKey, Header};

        /// A 2048-bit RSA key made for these tests only (PKCS#1 DER).
        const RSA_DER: &[u8] = include_bytes!("../../tests/fixtures/rsa-2048-test-key.pkcs1.der");

        /// Each algorithm with a signing key and its JWK (jsonwebtoken
        /// writes the RSA and EC ones; it has no Ed25519 JWK writer, so that
        /// one is rcgen's raw public key).
        fn keys() -> Vec<(jsonwebtoken::Algorithm, Algorithm, EncodingKey, Value)> {
            use jsonwebtoken::Algorithm as J;
            let jwk_of = |key: &EncodingKey, alg| {
                serde_json::to_value(jsonwebtoken::jwk::Jwk::from_encoding_key(key, alg).unwrap())
                    .unwrap()
            };
            let mut all = Vec::new();
            for (j, ours) in [
                (J::RS256, Algorithm::RS256),
                (J::RS384, Algorithm::RS384),
                (J::RS512, Algorithm::RS512),
                (J::PS256, Algorithm::PS256),
                (J::PS384, Algorithm::PS384),
                (J::PS512, Algorithm::PS512),
            ] {
                let key = EncodingKey::from_rsa_der(RSA_DER);
                let jwk = jwk_of(&key, j);
                all.push((j, ours, key, jwk));
            }
            for (j, ours, curve) in [
                (J::ES256, Algorithm::ES256, &rcgen::PKCS_ECDSA_P256_SHA256),
                (J::ES384, Algorithm::ES384, &rcgen::PKCS_ECDSA_P384_SHA384),
            ] {
                let pair = rcgen::KeyPair::generate_for(curve).unwrap();
                let key = EncodingKey::from_ec_der(&pair.serialize_der());
                let jwk = jwk_of(&key, j);
                all.push((j, ours, key, jwk));
            }
            let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap();
            let jwk = json!({"kty": "OKP", "crv": "Ed25519", "alg": "EdDSA",
                "x": URL_SAFE_NO_PAD.encode(pair.public_key_raw())});
            all.push((
                J::EdDSA,
                Algorithm::EdDSA,
                EncodingKey::from_ed_der(&pair.serialize_der()),
                jwk,
            ));
            all
        }

        fn sign(alg: jsonwebtoken::Algorithm, key: &EncodingKey, claims: &Value) -> String {
            jsonwebtoken::encode(&Header::new(alg), claims, key).unwrap()
        }

        #[test]
        fn every_algorithm_verifies_and_a_changed_byte_does_not() {
            let claims = json!({"sub": "grace", "n": 1});
            for (j, ours, key, jwk) in keys() {
                let jwk = Jwk::read(&jwk).unwrap();
                let token = sign(j, &key, &claims);
                let parsed = Token::parse(&token).unwrap();
                assert_eq!(parsed.alg, ours);
                assert_eq!(parsed.verify(&jwk).unwrap()["sub"], "grace", "{ours}");
                // The claims changed after signing.
                let (input, sig) = token.rsplit_once('.').unwrap();
                let (header, _) = input.split_once('.').unwrap();
                let forged = format!("{header}.{}.{sig}", b64(&json!({"sub": "mallory", "n": 1})));
                assert!(
                    Token::parse(&forged).unwrap().verify(&jwk).is_err(),
                    "{ours} forged"
                );
                // The signature's last byte changed.
                let mut bytes = URL_SAFE_NO_PAD.decode(sig).unwrap();
                *bytes.last_mut().unwrap() ^= 1;
                let flipped = format!("{input}.{}", URL_SAFE_NO_PAD.encode(&bytes));
                assert!(
                    Token::parse(&flipped).unwrap().verify(&jwk).is_err(),
                    "{ours} flipped"
                );
            }
        }

        #[test]
        fn a_key_checks_only_its_own_family_and_its_own_alg() {
            let all = keys();
            let claims = json!({"sub": "grace"});
            // Each token against every other family's key: refused.
            for (j, ours, key, _) in &all {
                let token = sign(*j, key, &claims);
                for (_, other, _, other_jwk) in &all {
                    let rsa = |a: &Algorithm| a.name().starts_with(['R', 'P']);
                    let same_key = (rsa(ours) && rsa(other)) || ours == other;
                    if same_key {
                        continue;
                    }
                    let mut jwk = other_jwk.clone();
                    jwk.as_object_mut().unwrap().remove("alg");
                    let jwk = Jwk::read(&jwk).unwrap();
                    assert!(
                        Token::parse(&token).unwrap().verify(&jwk).is_err(),
                        "{ours} token, {other} key"
                    );
                }
            }
            // An RSA key whose JWK says RS256 does not check a PS256 token,
            // although the key could.
            let (_, _, rsa, rsa_jwk) = &all[0];
            let mut jwk = rsa_jwk.clone();
            assert_eq!(jwk["alg"], "RS256");
            let pinned = Jwk::read(&jwk).unwrap();
            let ps = sign(jsonwebtoken::Algorithm::PS256, rsa, &claims);
            let e = Token::parse(&ps).unwrap().verify(&pinned).unwrap_err();
            assert!(e.contains("the key is for RS256"), "{e}");
            jwk.as_object_mut().unwrap().remove("alg");
            assert!(
                Token::parse(&ps)
                    .unwrap()
                    .verify(&Jwk::read(&jwk).unwrap())
                    .is_ok()
            );
        }

        #[test]
        fn the_public_key_as_an_hmac_secret_is_refused_before_any_key_is_used() {
            let (_, _, _, jwk) = &keys()[0];
            let n = URL_SAFE_NO_PAD.decode(jwk["n"].as_str().unwrap()).unwrap();
            let token = jsonwebtoken::encode(
                &Header::new(jsonwebtoken::Algorithm::HS256),
                &json!({"sub": "mallory"}),
                &EncodingKey::from_secret(&n),
            )
            .unwrap();
            let e = Token::parse(&token).unwrap_err();
            assert!(e.contains("\"HS256\" is not accepted"), "{e}");
        }
    }
}
