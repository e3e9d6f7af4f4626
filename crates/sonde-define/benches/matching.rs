//! Cost per packet of matching N definitions (1 to 256), compiled into one tree (shared
//! prefixes tested once, exact-value siblings grouped) against evaluating each definition on its
//! own — the comparison of Kitatsuji et al.'s Fig. 5. Packets: the first 20,000 frames of
//! `$SONDE_BENCH_TRACE`, else of the shared ground-truth trace `mixed.pcap`, else the demo trace.
//!
//! `cargo bench -p sonde-define --bench matching`
//!
//! Two sets of definitions:
//! - `ports`: one per service, `tcp.dport == P` or `udp.dport == P` for N distinct ports
//!   (an operator's per-service counters): the tree tests the protocol once and finds the
//!   port by binary search;
//! - `mixed`: N definitions of 1 to 3 conditions drawn from protocols, ports, flags, prefixes,
//!   TTL and payload bytes (fixed seed), keyed variously.

#[path = "../tests/common/mod.rs"]
mod common;

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use sonde_define::{parse_definitions, Compiled};

fn packets() -> Vec<common::Packet> {
    let path = std::env::var_os("SONDE_BENCH_TRACE").map(PathBuf::from).or_else(|| {
        let p = common::shared()?.join("groundtruth/mixed.pcap");
        p.exists().then_some(p)
    });
    let path = path.unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap"));
    common::read(&path, 20_000)
}

fn ports(n: usize) -> String {
    (0..n)
        .map(|i| {
            let proto = if i % 4 == 3 { "udp" } else { "tcp" };
            format!("p{i} = {proto}.dport == {}", [80, 443, 22, 53, 8080, 25][i % 6] + 1000 * (i / 6))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn mixed(n: usize) -> String {
    let conditions = common::CONDITIONS;
    let keys = ["", " key tcp.dport", " key ip.proto", " key l4[0:2]"];
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as usize
    };
    (0..n)
        .map(|i| {
            let chain: Vec<&str> = (0..1 + next() % 3).map(|_| conditions[next() % conditions.len()]).collect();
            format!("m{i} = {}{}", chain.join(" and "), keys[next() % keys.len()])
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn bench(c: &mut Criterion) {
    let packets = packets();
    let layers: Vec<_> = packets.iter().map(|p| p.layers()).collect();
    for (family, make) in [("ports", ports as fn(usize) -> String), ("mixed", mixed)] {
        let mut group = c.benchmark_group(format!("definitions/{family}"));
        group.throughput(Throughput::Elements(layers.len() as u64));
        group.sample_size(10);
        group.measurement_time(std::time::Duration::from_secs(2));
        for n in [1, 2, 4, 8, 16, 32, 64, 128, 256] {
            let set = Compiled::new(&parse_definitions(&make(n), sonde_define::MAX_NAME_BYTES).unwrap());
            let mut out = Vec::new();
            group.bench_with_input(BenchmarkId::new("tree", n), &set, |b, set| {
                b.iter(|| layers.iter().map(|l| set.matches(l, &mut out)).count())
            });
            group.bench_with_input(BenchmarkId::new("flat", n), &set, |b, set| {
                b.iter(|| layers.iter().map(|l| set.matches_flat(l, &mut out)).count())
            });
        }
        group.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
