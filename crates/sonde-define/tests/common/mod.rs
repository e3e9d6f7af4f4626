//! Real packets for the tests and the benchmark: frames of the demo trace and of captures from
//! the shared corpus, with their layers as sonde-wire's decoder finds them.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use sonde_define::Layers;
use sonde_wire::{decode_with_offsets, LinkType, PacketSummary};

pub struct Packet {
    pub link_type: u32,
    pub frame: Vec<u8>,
}

impl Packet {
    pub fn layers(&self) -> Layers<'_> {
        layers(self.link_type, &self.frame)
    }
}

/// Conditions that real packets often match, for random definitions that share prefixes,
/// group values and vary keys (the benchmark's `mixed` set draws from these).
pub const CONDITIONS: &[&str] = &[
    "ip.proto == 6",
    "ip.proto == 17",
    "ip.version == 6",
    "tcp.dport == 80",
    "tcp.dport == 443",
    "tcp.sport == 443",
    "tcp.dport < 1024",
    "tcp.flags & 0x12 == 0x02",
    "tcp.flags & 0x10 == 0x10",
    "udp.dport == 53",
    "ip.src in 10.0.0.0/8",
    "ip.dst in 192.168.0.0/16",
    "ip.ttl > 60",
    "payload[0:1] in 0x14..0x17",
];

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

/// The layers of a frame as sonde-wire's decoder finds them, and the decoder's facts.
pub fn layers(link_type: u32, frame: &[u8]) -> Layers<'_> {
    let mut summary = PacketSummary::EMPTY;
    let offsets = decode_with_offsets(LinkType(link_type), frame, frame.len() as u32, &mut summary).unwrap_or_default();
    Layers::of(LinkType(link_type), frame, &summary, &offsets)
}
