//! Seal and open of a 1 KiB payload, apart and together, for each token
//! version (`requestState_1KiB` is `t1`, `requestState_1KiB_t2` is `t2`).

use std::hint::black_box;
use std::time::{Duration, UNIX_EPOCH};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tern_seal::{Claims, Expect, KeyRing, Sealer, SealerOptions, TokenVersion};

fn bench_seal(c: &mut Criterion) {
    let arguments = json!({"name": "orders", "size": 3, "region": "eu-west-1"});
    let payload = vec![0x5a_u8; 1024];
    let claims = Claims {
        principal: Some("user-42"),
        method: "tools/call",
        target: "provision_database",
        arguments: Some(&arguments),
        state_id: [7; 16],
        round: 1,
        payload: &payload,
    };
    let expect = Expect {
        principal: Some("user-42"),
        method: "tools/call",
        target: "provision_database",
        arguments: Some(&arguments),
    };
    let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);

    for (group, version) in [
        ("requestState_1KiB", TokenVersion::T1),
        ("requestState_1KiB_t2", TokenVersion::T2),
    ] {
        let sealer = Sealer::new(
            KeyRing::generate().with_seal_version(version),
            SealerOptions {
                audience: "https://mcp.example.com".into(),
                ..SealerOptions::default()
            },
        );
        let token = sealer.seal(&claims, now, [9; 24]).expect("fits");
        let mut group = c.benchmark_group(group);
        group.throughput(Throughput::Bytes(1024));
        group.bench_function("seal", |b| {
            b.iter(|| sealer.seal(black_box(&claims), now, black_box([9; 24])));
        });
        group.bench_function("open", |b| {
            b.iter(|| sealer.open(black_box(&token), black_box(&expect), now));
        });
        group.bench_function("seal_open", |b| {
            b.iter(|| {
                let token = sealer.seal(black_box(&claims), now, black_box([9; 24]));
                token.map(|token| sealer.open(&token, black_box(&expect), now))
            });
        });
        group.finish();
    }
}

criterion_group!(benches, bench_seal);
criterion_main!(benches);
