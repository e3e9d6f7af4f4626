//! Decode throughput on a few typical frames, without a benchmark framework (so that the
//! workspace needs no extra dependency): `cargo bench -p sonde-wire`.

use sonde_wire::{decode, LinkType};
use std::hint::black_box;
use std::time::Instant;

fn eth_ipv4_tcp() -> Vec<u8> {
    let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0x05, 0xdc, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f.extend_from_slice(&[0xc3, 0x50, 0x01, 0xbb, 0, 0, 0, 1, 0, 0, 0, 1, 0x80, 0x10, 0x01, 0xf5, 0, 0, 0, 0]);
    f.extend_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
    f.resize(14 + 1500, 0);
    f
}

fn eth_vlan_ipv6_udp() -> Vec<u8> {
    let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x81, 0x00, 0, 10, 0x86, 0xdd];
    f.extend_from_slice(&[0x60, 0, 0, 0, 0, 108, 17, 64]);
    f.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x20, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&[0x9c, 0x40, 0x01, 0xbb, 0, 108, 0, 0]);
    f.resize(18 + 40 + 108, 0);
    f
}

fn vxlan_tcp() -> Vec<u8> {
    let inner = eth_ipv4_tcp();
    let udp_len = (8 + 8 + inner.len()) as u16;
    let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00];
    f.extend_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 1, 1, 10, 0, 1, 2]);
    f[16..18].copy_from_slice(&(udp_len + 20).to_be_bytes());
    f.extend_from_slice(&[0xd0, 0x00, 0x12, 0xb5]);
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x08, 0, 0, 0, 0, 0, 1, 0]);
    f.extend_from_slice(&inner);
    f
}

fn run(name: &str, frame: &[u8], snaplen: usize) {
    let captured = &frame[..snaplen.min(frame.len())];
    let wire = frame.len() as u32;
    let n = 5_000_000u32;
    // Warm up.
    for _ in 0..100_000 {
        black_box(decode(LinkType::ETHERNET, black_box(captured), wire).ok());
    }
    let start = Instant::now();
    for _ in 0..n {
        black_box(decode(LinkType::ETHERNET, black_box(captured), wire).ok());
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(n);
    println!("{name:<24} {ns:>7.1} ns/frame  {:>7.1} Mpps", 1_000.0 / ns);
}

fn main() {
    run("eth+ipv4+tcp (ts)", &eth_ipv4_tcp(), 96);
    run("eth+vlan+ipv6+udp", &eth_vlan_ipv6_udp(), 65535);
    run("vxlan+eth+ipv4+tcp", &vxlan_tcp(), 128);
}
