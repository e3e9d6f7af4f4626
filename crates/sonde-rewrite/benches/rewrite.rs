//! Cost per packet of rewriting, by mode.
//!
//! `cargo bench -p sonde-rewrite` loads the first frames of a trace into memory
//! (`$SONDE_REWRITE_TRACE`, default `/tmp/sonde-bench/bench.pcap`, the merged real trace of
//! docs/performance.md; skipped when absent) and times, per frame: the copy of its bytes into
//! the buffer `sonde anon` rewrites in (the baseline), then the copy and the rewrite under
//! Crypto-PAn with its prefix cache, Crypto-PAn without it, the keyed hash and zeroing. Each
//! pass starts with a new rewriter (cold cache); each figure is the best of several passes (the
//! machine is shared and noisy).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use sonde_anon::{Anonymizer, Key, Mode};
use sonde_rewrite::{LinkType, RewriteStats, Rewriter};

const PASSES: usize = 5;
const MAX_FRAMES: usize = 300_000;

struct Frame {
    link: u32,
    wire_len: u32,
    data: Vec<u8>,
}

fn main() {
    let path = std::env::var_os("SONDE_REWRITE_TRACE")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/tmp/sonde-bench/bench.pcap".into());
    let Some(frames) = load(&path) else {
        println!("skipped: {} is not a readable trace (set SONDE_REWRITE_TRACE)", path.display());
        return;
    };
    let bytes: usize = frames.iter().map(|f| f.data.len()).sum();
    println!("{}: first {} frames, {} bytes captured", path.display(), frames.len(), bytes);
    println!("{:<32} {:>10} {:>12}", "mode", "ns/packet", "packets/s");
    let key = Key::from_bytes(std::array::from_fn(|i| (i as u8).wrapping_mul(73) ^ 0xa5));
    let baseline = time(&frames, None);
    println!("{:<32} {:>10.1} {:>12.0}", "copy only (baseline)", baseline, 1e9 / baseline);
    // A clone starts with an empty cache: each pass begins cold.
    let modes = [
        ("cryptopan, prefix cache", Anonymizer::new(Mode::CryptoPan, &key)),
        ("cryptopan, uncached", Anonymizer::uncached(&key)),
        ("keyed hash", Anonymizer::new(Mode::KeyedHash, &key)),
        ("zero", Anonymizer::zero()),
    ];
    for (name, anon) in &modes {
        let ns = time(&frames, Some(anon));
        println!("{name:<32} {ns:>10.1} {:>12.0}   (+{:.1} ns over the copy)", 1e9 / ns, ns - baseline);
    }
    let mut rw = Rewriter::new(Anonymizer::new(Mode::CryptoPan, &key));
    let mut buf = Vec::new();
    for f in &frames {
        buf.clear();
        buf.extend_from_slice(&f.data);
        rw.rewrite(LinkType(f.link), &mut buf, f.wire_len);
    }
    print_stats(&rw.stats());
}

/// Best ns per frame over the passes: copy each frame into a buffer and, with an anonymizer
/// (a fresh clone per pass), rewrite it.
fn time(frames: &[Frame], anon: Option<&Anonymizer>) -> f64 {
    let mut best = f64::MAX;
    let mut buf = Vec::with_capacity(65_536);
    for _ in 0..PASSES {
        let mut rw = anon.map(|a| Rewriter::new(a.clone()));
        let started = Instant::now();
        for f in frames {
            buf.clear();
            buf.extend_from_slice(&f.data);
            if let Some(rw) = rw.as_mut() {
                rw.rewrite(LinkType(f.link), &mut buf, f.wire_len);
            }
            black_box(&buf);
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e9 / frames.len() as f64);
    }
    best
}

fn load(path: &std::path::Path) -> Option<Vec<Frame>> {
    let mut source = sonde_capture::open(path).ok()?;
    let mut frames = Vec::new();
    while let Ok(Some(f)) = source.next_frame() {
        frames.push(Frame { link: f.link_type, wire_len: f.wire_len, data: f.data.to_vec() });
        if frames.len() == MAX_FRAMES {
            break;
        }
    }
    (!frames.is_empty()).then_some(frames)
}

fn print_stats(s: &RewriteStats) {
    println!(
        "one pass: {} IPv4 and {} IPv6 addresses, {} ARP, {} ICMP quotes, {} tunnelled; checksums {} recomputed ({} fixed), {} updated, {} not captured; {} non-IP frames",
        s.ipv4_addresses,
        s.ipv6_addresses,
        s.arp_packets,
        s.icmp_quotes,
        s.tunnels,
        s.checksums_recomputed,
        s.checksums_fixed,
        s.checksums_adjusted,
        s.checksums_not_captured,
        s.non_ip_frames
    );
}
