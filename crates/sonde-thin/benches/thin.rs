//! Criterion benchmark of the thinning decision on real packets: the cost per packet of
//! `Thinner::keep`, decoding excluded. The packets come from `$SONDE_BENCH_TRACE` (e.g. the
//! merged benchmark trace; the first 200,000 frames are used), else from the demo trace.
//!
//! `cargo bench -p sonde-thin --bench thin`

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sonde_thin::{Config, Thinner};
use sonde_wire::{decode, LinkType, PacketSummary};

const MAX_FRAMES: usize = 200_000;

fn load() -> Vec<(u64, u32, PacketSummary)> {
    let path = std::env::var_os("SONDE_BENCH_TRACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap"));
    let mut source = sonde_capture::open(&path).expect("open benchmark trace");
    let mut packets = Vec::new();
    while let Ok(Some(f)) = source.next_frame() {
        if let Ok(p) = decode(LinkType(f.link_type), f.data, f.wire_len) {
            packets.push((f.ts_ns, f.wire_len, p));
        }
        if packets.len() == MAX_FRAMES {
            break;
        }
    }
    packets
}

fn thinning(c: &mut Criterion) {
    let packets = load();
    let mut group = c.benchmark_group("thinning");
    group.throughput(Throughput::Elements(packets.len() as u64));
    group.bench_function("keep", |b| {
        b.iter(|| {
            let mut thinner = Thinner::new(&Config::default()).expect("default config");
            packets.iter().filter(|(ts_ns, wire_len, p)| thinner.keep(*ts_ns, p, *wire_len)).count()
        })
    });
    group.finish();
}

criterion_group!(benches, thinning);
criterion_main!(benches);
