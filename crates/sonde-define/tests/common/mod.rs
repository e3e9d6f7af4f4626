//! Real packets for the tests and the benchmark: frames of a capture from the shared corpus, with
//! their layers found by a small walk (Ethernet with VLAN tags, Linux cooked, raw IP; IPv4,
//! IPv6 with its common extension headers; TCP, UDP). The engine takes the offsets from
//! sonde-wire's decoder; this walk only serves to test the patterns on real bytes.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sonde_define::Layers;

pub struct Packet {
    pub link_type: u32,
    pub frame: Vec<u8>,
}

impl Packet {
    pub fn layers(&self) -> Layers<'_> {
        layers(self.link_type, &self.frame)
    }
}

/// The shared corpus, if this machine has it.
pub fn shared() -> Option<PathBuf> {
    let dir = std::env::var_os("SONDE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    dir.is_dir().then_some(dir)
}

/// Up to `max` frames of `path`.
pub fn read(path: &Path, max: usize) -> Vec<Packet> {
    let mut source = sonde_capture::open(path).unwrap();
    let mut out = Vec::new();
    while let Ok(Some(f)) = source.next_frame() {
        out.push(Packet { link_type: f.link_type, frame: f.data.to_vec() });
        if out.len() == max {
            break;
        }
    }
    out
}

/// The demo trace the repository ships, and real traces from the corpus when present.
pub fn real_packets(max_per_trace: usize) -> Vec<Packet> {
    let mut packets = read(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap"), max_per_trace);
    if let Some(shared) = shared() {
        for rel in [
            "groundtruth/mixed.pcap",
            "groundtruth/ipv6.pcap",
            "traces/realistic/arkime+arkime/tests/pcap/arkime_synthetic.pcap",
            "traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/alexa-app.pcapng",
        ] {
            packets.extend(read(&shared.join(rel), max_per_trace));
        }
    }
    packets
}

pub fn layers(link_type: u32, frame: &[u8]) -> Layers<'_> {
    let mut l = Layers { frame, l3: None, l4: None, payload: None, meta: [0; 4] };
    let be16 = |at: usize| frame.get(at..at + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let mut at = match link_type {
        1 => {
            let mut at = 12;
            while let Some(0x8100 | 0x88a8) = be16(at) {
                at += 4;
            }
            match be16(at) {
                Some(0x0800 | 0x86dd) => at + 2,
                // MPLS: labels until the bottom of the stack, then IP.
                Some(0x8847 | 0x8848) => {
                    at += 2;
                    while frame.get(at + 2).is_some_and(|b| b & 1 == 0) {
                        at += 4;
                    }
                    at + 4
                }
                _ => return l,
            }
        }
        113 => 16,
        101 | 228 | 229 => 0,
        _ => return l,
    };
    let Some(&first) = frame.get(at) else { return l };
    l.l3 = Some(at as u32);
    let proto = match first >> 4 {
        4 => {
            let Some(h) = frame.get(at..at + 20) else { return l };
            l.meta = [4, h[9], h[8], h[1]];
            if u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0 {
                return l; // a later fragment: no transport header
            }
            at += usize::from(h[0] & 0xf) * 4;
            h[9]
        }
        6 => {
            let Some(h) = frame.get(at..at + 40) else { return l };
            l.meta = [6, h[6], h[7], (h[0] << 4) | (h[1] >> 4)];
            let mut next = h[6];
            at += 40;
            // Hop-by-hop, routing, destination options; a fragment header.
            while matches!(next, 0 | 43 | 60 | 44) {
                let Some(e) = frame.get(at..at + 8) else { return l };
                let len = if next == 44 { 8 } else { (usize::from(e[1]) + 1) * 8 };
                next = e[0];
                at += len;
            }
            l.meta[1] = next;
            next
        }
        _ => return l,
    };
    if at > frame.len() {
        return l;
    }
    l.l4 = Some(at as u32);
    let header = match proto {
        6 => frame.get(at + 12).map(|b| usize::from(b >> 4) * 4),
        17 => Some(8),
        _ => None,
    };
    if let Some(h) = header {
        if at + h <= frame.len() {
            l.payload = Some((at + h) as u32);
        }
    }
    l
}
