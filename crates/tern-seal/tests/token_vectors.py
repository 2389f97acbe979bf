#!/usr/bin/env python3
"""Independent reproduction of tern-seal's t1 and t2 tokens (tests/it/vectors.rs): HKDF-SHA256,
HMAC-SHA256, SHA-256; t1 XChaCha20-Poly1305 = HChaCha20 (written out) + IETF ChaCha20-Poly1305,
t2 AES-256-GCM-SIV (RFC 8452), both AEADs from the `cryptography` package (OpenSSL).
Usage: python3 tests/token_vectors.py SECRET_HEX  (prints t1 vector 1, t1 vector 2, t2 vector 1,
t2 vector 2)."""
import base64, hashlib, hmac, struct, sys
from cryptography.hazmat.primitives.ciphers.aead import AESGCMSIV, ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives import hashes

def rotl(v, c): return ((v << c) & 0xffffffff) | (v >> (32 - c))
def qr(s, a, b, c, d):
    s[a]=(s[a]+s[b])&0xffffffff; s[d]=rotl(s[d]^s[a],16)
    s[c]=(s[c]+s[d])&0xffffffff; s[b]=rotl(s[b]^s[c],12)
    s[a]=(s[a]+s[b])&0xffffffff; s[d]=rotl(s[d]^s[a],8)
    s[c]=(s[c]+s[d])&0xffffffff; s[b]=rotl(s[b]^s[c],7)
def hchacha20(key, nonce16):
    s = list(struct.unpack('<4I', b'expand 32-byte k')) + list(struct.unpack('<8I', key)) + list(struct.unpack('<4I', nonce16))
    for _ in range(10):
        qr(s,0,4,8,12); qr(s,1,5,9,13); qr(s,2,6,10,14); qr(s,3,7,11,15)
        qr(s,0,5,10,15); qr(s,1,6,11,12); qr(s,2,7,8,13); qr(s,3,4,9,14)
    return struct.pack('<8I', *(s[0:4] + s[12:16]))
def xchacha_seal(key, nonce24, plaintext, aad):
    sub = hchacha20(key, nonce24[:16])
    return ChaCha20Poly1305(sub).encrypt(b'\0\0\0\0' + nonce24[16:], plaintext, aad)
def hkdf(secret, info):
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(secret)
def token(key_id, secret, audience, principal, method, target, args_canonical, state_id, rnd, now, ttl, payload, nonce, version="t1"):
    aead_key = hkdf(secret, b"tern/requestState/" + version.encode() + b"/aead-key")
    mac_key = hkdf(secret, b"tern/requestState/t1/principal-mac-key")
    mac = hmac.new(mac_key, (b"\x00anonymous" if principal is None else b"\x01" + principal.encode()), hashlib.sha256).digest()
    env = bytes([1]) + state_id + struct.pack('>I', rnd) + struct.pack('>Q', now) + struct.pack('>Q', now + ttl)
    env += hashlib.sha256(audience.encode()).digest() + mac
    env += bytes([len(method)]) + method.encode() + hashlib.sha256(target.encode()).digest()
    env += hashlib.sha256(args_canonical.encode()).digest() + struct.pack('>I', len(payload)) + payload
    aad = b"tern/requestState/" + version.encode() + b"\x00" + key_id.encode()
    if version == "t1":
        raw = nonce + xchacha_seal(aead_key, nonce, env, aad)
    else:  # t2: the first 12 of the 24 nonce bytes
        raw = nonce[:12] + AESGCMSIV(aead_key).encrypt(nonce[:12], env, aad)
    return version + "." + key_id + "." + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

secret = bytes.fromhex(sys.argv[1])
for version in ("t1", "t2"):
    v1 = token("k1", secret, "https://mcp.example.com", "user-42", "tools/call", "provision_database",
               '{"name":"orders","size":3}', bytes(range(0xa0, 0xb0)), 2, 1_800_000_000, 600,
               b"answers: region=eu-west-1", bytes(range(24)), version)
    v2 = token("k1", secret, "https://mcp.example.com", None, "prompts/get", "greet", '{}', bytes(16), 0,
               1_800_000_000, 600, b"", b"\xff" * 24, version)
    print(v1); print(v2)
