//! Cost per address of each anonymisation mode.
//!
//! `cargo bench -p sonde-anon` prints ns/address and addresses/s for:
//! - Crypto-PAn without cache, on random IPv4 and IPv6 addresses (every bit computed);
//! - Crypto-PAn with its prefix cache and without, keyed hash, zeroing and tcpdpriv (random
//!   addresses, all new to its table), and all of them on the source and
//!   destination addresses of real traces, in packet order: every classic-pcap Ethernet trace
//!   listed in `$SONDE_TRACES/INDEX.tsv` (default `/work/shared/traces`). Each repetition starts
//!   with a new anonymizer, so cold misses are counted. Skipped when the traces are absent.
//!
//! Each figure is the best of several repetitions (the machine is shared and noisy).

use std::hint::black_box;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use sonde_anon::{Anonymizer, Key, Mode};

const REPETITIONS: usize = 7;

fn main() {
    let key = Key::from_bytes(std::array::from_fn(|i| (i as u8).wrapping_mul(73) ^ 0xa5));
    println!("{:<46} {:>10} {:>14}", "mode / input", "ns/address", "addresses/s");

    let v4: Vec<IpAddr> = random(200_000).map(|r| IpAddr::from((r as u32).to_be_bytes())).collect();
    let v6: Vec<IpAddr> =
        random(50_000).map(|r| IpAddr::from((u128::from(r) << 64 | u128::from(!r)).to_be_bytes())).collect();
    report("cryptopan uncached, random IPv4", &v4, || Anonymizer::uncached(&key));
    report("cryptopan uncached, random IPv6", &v6, || Anonymizer::uncached(&key));
    report("cryptopan cached, random IPv4 (all misses)", &v4, || Anonymizer::new(Mode::CryptoPan, &key));
    // One new anonymizer per pass: the first host of each prefix misses, the others hit the prefix.
    let per_24: Vec<IpAddr> = (0..64u32)
        .flat_map(|n| (0..=255u32).map(move |h| IpAddr::from((0x0a00_0000 | n << 8 | h).to_be_bytes())))
        .collect();
    let per_64: Vec<IpAddr> = (0..64u128)
        .flat_map(|n| {
            (0..256u128).map(move |h| IpAddr::from((0x2001_0db8u128 << 96 | n << 64 | (h * 0x1_0001)).to_be_bytes()))
        })
        .collect();
    report("cryptopan cached, 256 hosts per /24", &per_24, || Anonymizer::new(Mode::CryptoPan, &key));
    report("cryptopan cached, 256 hosts per /64", &per_64, || Anonymizer::new(Mode::CryptoPan, &key));
    report("keyed hash, random IPv4", &v4, || Anonymizer::new(Mode::KeyedHash, &key));
    report("keyed hash, random IPv6", &v6, || Anonymizer::new(Mode::KeyedHash, &key));
    report("zero, random IPv4", &v4, Anonymizer::zero);
    report("tcpdpriv, random IPv4 (all new)", &v4, || Anonymizer::new(Mode::Tcpdpriv, &key));
    report("tcpdpriv, random IPv6 (all new)", &v6, || Anonymizer::new(Mode::Tcpdpriv, &key));

    let dir = std::env::var_os("SONDE_TRACES").map(PathBuf::from).unwrap_or_else(|| "/work/shared/traces".into());
    let (trace_addrs, files) = match trace_addresses(&dir) {
        Some(found) if !found.0.is_empty() => found,
        _ => {
            println!("trace mix: skipped ({} has no readable INDEX.tsv or traces)", dir.display());
            return;
        }
    };
    let distinct: std::collections::HashSet<_> = trace_addrs.iter().collect();
    let v6_count = trace_addrs.iter().filter(|a| a.is_ipv6()).count();
    println!(
        "trace mix: {} addresses ({} IPv6, {} distinct) from {} classic-pcap Ethernet traces under {}",
        trace_addrs.len(),
        v6_count,
        distinct.len(),
        files,
        dir.display()
    );
    report("cryptopan uncached, trace mix", &trace_addrs, || Anonymizer::uncached(&key));
    let stats = report("cryptopan cached, trace mix", &trace_addrs, || Anonymizer::new(Mode::CryptoPan, &key));
    println!(
        "  cache per pass: {} address hits, {} prefix hits, {} misses",
        stats.address_hits, stats.prefix_hits, stats.misses
    );
    report("keyed hash, trace mix", &trace_addrs, || Anonymizer::new(Mode::KeyedHash, &key));
    report("zero, trace mix", &trace_addrs, Anonymizer::zero);
    report("tcpdpriv, trace mix", &trace_addrs, || Anonymizer::new(Mode::Tcpdpriv, &key));
}

/// Runs every address through a new anonymizer per repetition; prints the best repetition and
/// returns the cache statistics of the last one.
fn report(label: &str, addrs: &[IpAddr], make: impl Fn() -> Anonymizer) -> sonde_anon::CacheStats {
    let mut best_ns = f64::MAX;
    let mut stats = Default::default();
    for _ in 0..REPETITIONS {
        let mut anon = make();
        let start = Instant::now();
        for &addr in addrs {
            black_box(anon.ip(black_box(addr)));
        }
        let ns = start.elapsed().as_nanos() as f64 / addrs.len() as f64;
        best_ns = best_ns.min(ns);
        stats = anon.cache_stats();
    }
    println!("{label:<46} {best_ns:>10.1} {:>14.0}", 1e9 / best_ns);
    stats
}

/// A fixed xorshift64* sequence, so runs compare.
fn random(n: usize) -> impl Iterator<Item = u64> {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    (0..n).map(move |_| {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}

/// The addresses of every classic-pcap Ethernet trace that INDEX.tsv lists, and how many files.
fn trace_addresses(dir: &Path) -> Option<(Vec<IpAddr>, usize)> {
    let index = std::fs::read_to_string(dir.join("INDEX.tsv")).ok()?;
    let mut addrs = Vec::new();
    let mut files = 0;
    for line in index.lines().skip(1) {
        let cols: Vec<&str> = line.split('\t').collect();
        if cols.len() > 4 && cols[3] == "EN10MB(1)" && cols[4] == "pcap" {
            if let Ok(bytes) = std::fs::read(dir.join(cols[0])) {
                files += usize::from(pcap_addresses(&bytes, &mut addrs));
            }
        }
    }
    Some((addrs, files))
}

/// A minimal classic-pcap reader (both byte orders, Ethernet, VLAN tags): appends each IPv4 or
/// IPv6 packet's source and destination. Returns whether the file was a pcap it could read.
fn pcap_addresses(bytes: &[u8], out: &mut Vec<IpAddr>) -> bool {
    let Some(magic) = bytes.get(..4) else { return false };
    let big_endian = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] | [0x4d, 0x3c, 0xb2, 0xa1] => false,
        [0xa1, 0xb2, 0xc3, 0xd4] | [0xa1, 0xb2, 0x3c, 0x4d] => true,
        _ => return false,
    };
    let u32_at = |b: &[u8]| {
        let b = [b[0], b[1], b[2], b[3]];
        if big_endian {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        }
    };
    let mut at = 24;
    while let Some(header) = bytes.get(at..at + 16) {
        let caplen = u32_at(&header[8..12]) as usize;
        let Some(frame) = bytes.get(at + 16..at + 16 + caplen) else { break };
        at += 16 + caplen;
        let mut offset = 12;
        let mut ethertype = frame.get(12..14).map(|t| u16::from_be_bytes([t[0], t[1]]));
        while matches!(ethertype, Some(0x8100 | 0x88a8)) {
            offset += 4;
            ethertype = frame.get(offset..offset + 2).map(|t| u16::from_be_bytes([t[0], t[1]]));
        }
        let ip = &frame[(offset + 2).min(frame.len())..];
        match ethertype {
            Some(0x0800) if ip.len() >= 20 => {
                out.push(IpAddr::from(<[u8; 4]>::try_from(&ip[12..16]).unwrap_or_default()));
                out.push(IpAddr::from(<[u8; 4]>::try_from(&ip[16..20]).unwrap_or_default()));
            }
            Some(0x86dd) if ip.len() >= 40 => {
                out.push(IpAddr::from(<[u8; 16]>::try_from(&ip[8..24]).unwrap_or_default()));
                out.push(IpAddr::from(<[u8; 16]>::try_from(&ip[24..40]).unwrap_or_default()));
            }
            _ => {}
        }
    }
    true
}
