//! The flow definition language and its matcher (sonde-define).
//!
//! Input: definition text, a 0 byte, then frames as `[length][link][bytes…]` (link: bit 0
//! picks Ethernet or raw IP). Parses the text; when it is a valid set, compiles it and, per
//! frame decoded by sonde-wire, asserts that the shared-prefix tree (`Compiled::matches`) gives
//! exactly what evaluating every definition on its own gives (`matches_flat`, the oracle), and
//! that the counter's matcher gives the same on a copy of only the frame's first
//! `prefix_len` bytes (its promise to the worker threads). The packets are then counted
//! (`count`, `gap`, `length`, associations) and every output written; each definition's
//! packets equal the packets that matched it.

use sonde_define::{parse_definitions, Compiled, Counter, Layers, Match, MAX_NAME_BYTES};
use sonde_wire::{decode_with_offsets, LinkType, PacketSummary};

fn sorted(v: &[Match]) -> Vec<(u32, u128)> {
    let mut v: Vec<_> = v.iter().map(|m| (m.def, m.fid)).collect();
    v.sort_unstable();
    v
}

fn main() {
    afl::fuzz!(|data: &[u8]| {
        let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
        let (text, mut frames) = data.split_at(split);
        let Ok(text) = std::str::from_utf8(text) else { return };
        let Ok(defs) = parse_definitions(text, MAX_NAME_BYTES) else { return };
        frames = frames.get(1..).unwrap_or(&[]);
        let set = Compiled::new(&defs);
        let cap = 1 + usize::from(frames.first().copied().unwrap_or(0) & 3);
        let mut counter = Counter::new(defs.clone(), Some(1_000_000_000), cap);
        let matcher = counter.matcher();
        let (mut tree, mut flat, mut prefixed) = (Vec::new(), Vec::new(), Vec::new());
        let mut matched = vec![0u64; defs.len()];
        let mut ts_ns = 1_700_000_000_000_000_000u64;
        while let [len, link, rest @ ..] = frames {
            let n = usize::from(*len).min(rest.len());
            let (frame, tail) = rest.split_at(n);
            frames = tail;
            let link = if link & 1 == 0 { LinkType::ETHERNET } else { LinkType::RAW };
            let wire_len = frame.len() as u32 + u32::from(link_extra(*len));
            let mut s = PacketSummary::EMPTY;
            let off = decode_with_offsets(link, frame, wire_len, &mut s).unwrap();
            let layers = Layers::of(link, frame, &s, &off);
            set.matches(&layers, &mut tree);
            set.matches_flat(&layers, &mut flat);
            assert_eq!(sorted(&tree), sorted(&flat), "the compiled tree and the oracle disagree");
            matcher.matches(&layers, &mut tree);
            let keep = matcher.prefix_len(&layers);
            assert!(keep <= frame.len());
            let prefix = frame[..keep].to_vec();
            let cut = Layers { frame: &prefix, ..layers };
            matcher.matches(&cut, &mut prefixed);
            assert_eq!(sorted(&tree), sorted(&prefixed), "matching the first {keep} bytes differs");
            for m in &tree {
                matched[m.def as usize] += 1;
            }
            ts_ns += u64::from(*len) * 3_000_000;
            counter.packet(ts_ns, &layers, wire_len);
        }
        for t in counter.totals() {
            if let Some(i) = defs.iter().position(|d| d.name == t.name) {
                assert_eq!(t.traffic.packets, matched[i], "{}: packets counted != packets matched", t.name);
            }
        }
        let mut out = String::new();
        counter.write_tsv(&mut out);
        counter.gaps_table().write_tsv(&mut out);
        counter.gap_histogram_table().write_tsv(&mut out);
        counter.flows_table().write_tsv(&mut out);
        counter.associations_table().write_tsv(&mut out);
        counter.association_samples_table().write_tsv(&mut out);
        let _ = (counter.association_totals(), counter.recent_samples());
    });
}

/// Some frames were longer on the wire than captured (snaplen).
fn link_extra(len: u8) -> u8 {
    if len & 0x80 != 0 {
        len & 0x3f
    } else {
        0
    }
}
