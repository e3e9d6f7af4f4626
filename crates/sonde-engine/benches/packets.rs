//! Criterion micro-benchmarks on real packets: decoding frames, and updating flow tables with
//! decoded packets. The packets come from `$SONDE_BENCH_TRACE` (e.g. the merged benchmark trace
//! of `bench/make-traces.sh`; the first 200,000 frames are used), else from the demo trace.
//!
//! `cargo bench -p sonde-engine --bench packets`

use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use sonde_flow::{FlowConfig, FlowRecord, FlowTracker};
use sonde_wire::{decode, LinkType, PacketSummary};

const MAX_FRAMES: usize = 200_000;

struct Frames {
    frames: Vec<(u64, u32, u32, Vec<u8>)>,
}

fn load() -> Frames {
    let path = std::env::var_os("SONDE_BENCH_TRACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap"));
    let mut source = sonde_capture::open(&path).expect("open benchmark trace");
    let mut frames = Vec::new();
    while let Ok(Some(f)) = source.next_frame() {
        frames.push((f.ts_ns, f.wire_len, f.link_type, f.data.to_vec()));
        if frames.len() == MAX_FRAMES {
            break;
        }
    }
    Frames { frames }
}

fn decoded(frames: &Frames) -> Vec<(u64, PacketSummary)> {
    frames
        .frames
        .iter()
        .filter_map(|(ts, wire_len, lt, data)| decode(LinkType(*lt), data, *wire_len).ok().map(|p| (*ts, p)))
        .collect()
}

fn benches(c: &mut Criterion) {
    let frames = load();
    let packets = decoded(&frames);

    let mut group = c.benchmark_group("real packets");
    group.throughput(Throughput::Elements(frames.frames.len() as u64));
    group.bench_function("decode", |b| {
        b.iter(|| {
            let mut tcp = 0u64;
            for (_, wire_len, lt, data) in &frames.frames {
                if let Ok(p) = decode(LinkType(*lt), data, *wire_len) {
                    tcp += u64::from(matches!(p.transport, Some(sonde_wire::Transport::Tcp(_))));
                }
            }
            tcp
        })
    });
    group.throughput(Throughput::Elements(packets.len() as u64));
    group.bench_function("flow table update", |b| {
        b.iter_batched(
            || (FlowTracker::new(FlowConfig::default()), Vec::<FlowRecord>::with_capacity(1 << 16)),
            |(mut tracker, mut records)| {
                for (ts, p) in &packets {
                    tracker.on_packet(*ts, p, &mut records);
                }
                tracker.finish(&mut records);
                records.len()
            },
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

criterion_group! {
    name = packets;
    config = Criterion::default().sample_size(10);
    targets = benches
}
criterion_main!(packets);
