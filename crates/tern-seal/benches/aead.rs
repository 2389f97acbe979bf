//! The AEADs and base64 codecs a token version could use, on the size of a
//! 1 KiB state's envelope (1,240 bytes): why `t2` is AES-256-GCM-SIV (see the
//! crate docs, "Tokens").

use std::hint::black_box;

// The crate's own codec, compiled here as it is in the crate.
#[allow(
    dead_code,
    unreachable_pub,
    unused_imports,
    reason = "its tests are compiled out here"
)]
#[path = "../src/b64.rs"]
mod b64;

use aes_gcm_siv::Aes256GcmSiv;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chacha20poly1305::aead::{AeadInOut, KeyInit};
use chacha20poly1305::{ChaCha20Poly1305, XChaCha20Poly1305};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};

const LEN: usize = 1240;
const AAD: &[u8] = b"tern/requestState/t2\x00k1";

fn round_trip<A: AeadInOut>(aead: &A, nonce: &aes_gcm_siv::aead::Nonce<A>, buf: &mut [u8]) {
    let tag = aead
        .encrypt_inout_detached(nonce, AAD, buf.into())
        .expect("fits");
    aead.decrypt_inout_detached(nonce, AAD, buf.into(), &tag)
        .expect("opens");
}

fn bench_aead(c: &mut Criterion) {
    let key = [0x42_u8; 32];
    let mut buf = vec![0x5a_u8; LEN];
    let mut group = c.benchmark_group("aead_seal_open_1240B");
    group.throughput(Throughput::Bytes(LEN as u64));
    let siv = Aes256GcmSiv::new((&key).into());
    group.bench_function("aes256gcmsiv", |b| {
        b.iter(|| round_trip(&siv, &[7; 12].into(), black_box(&mut buf)));
    });
    let chacha = ChaCha20Poly1305::new((&key).into());
    group.bench_function("chacha20poly1305", |b| {
        b.iter(|| round_trip(&chacha, &[7; 12].into(), black_box(&mut buf)));
    });
    let xchacha = XChaCha20Poly1305::new((&key).into());
    group.bench_function("xchacha20poly1305", |b| {
        b.iter(|| round_trip(&xchacha, &[7; 24].into(), black_box(&mut buf)));
    });
    group.finish();

    let raw = vec![0xa5_u8; LEN + 28];
    let text = URL_SAFE_NO_PAD.encode(&raw);
    let mut group = c.benchmark_group("base64url_1268B");
    group.throughput(Throughput::Bytes(raw.len() as u64));
    group.bench_function("base64_crate_encode_decode", |b| {
        b.iter(|| {
            let text = URL_SAFE_NO_PAD.encode(black_box(&raw));
            URL_SAFE_NO_PAD.decode(black_box(&text)).expect("decodes")
        });
    });
    group.bench_function("tern_seal_encode_decode", |b| {
        b.iter(|| {
            let mut text = Vec::with_capacity(b64::encoded_len(raw.len()).unwrap_or(0));
            b64::encode_into(black_box(&raw), &mut text);
            let mut out = vec![0; raw.len()];
            b64::decode_into(black_box(&text), &mut out).map(|()| out)
        });
    });
    group.bench_function("tern_seal_encode", |b| {
        b.iter(|| {
            let mut text = Vec::with_capacity(b64::encoded_len(raw.len()).unwrap_or(0));
            b64::encode_into(black_box(&raw), &mut text);
            text
        });
    });
    group.bench_function("base64_crate_encode", |b| {
        b.iter(|| URL_SAFE_NO_PAD.encode(black_box(&raw)));
    });
    group.bench_function("tern_seal_decode", |b| {
        b.iter(|| {
            let mut out = vec![0; raw.len()];
            b64::decode_into(black_box(text.as_bytes()), &mut out).map(|()| out)
        });
    });
    group.bench_function("base64_crate_decode", |b| {
        b.iter(|| URL_SAFE_NO_PAD.decode(black_box(&text)));
    });
    group.finish();
}

criterion_group!(benches, bench_aead);
criterion_main!(benches);
