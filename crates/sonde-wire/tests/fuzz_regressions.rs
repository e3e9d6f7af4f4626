//! Inputs the coverage-guided fuzzer found (fuzz/, docs/fuzzing.md), replayed with the
//! invariant they broke. Each file of fuzz/regressions/wire is an input of the `wire` target:
//! a link-type selector, two bytes of snaplen cut, the frame.

use std::path::Path;

use sonde_wire::{decode_with_offsets, LinkType, PacketSummary};

/// The `wire` target's link types, by selector (fuzz/fuzz_targets/wire.rs).
const LINKS: [u32; 14] = [0, 1, 101, 12, 14, 108, 113, 228, 229, 276, 9, 50, 104, 147];

/// The layers' offsets lie in the frame and in order: network, transport, then payload.
fn offsets_in_order(link: LinkType, frame: &[u8], wire_len: u32) {
    let mut s = PacketSummary::EMPTY;
    let Ok(off) = decode_with_offsets(link, frame, wire_len, &mut s) else { return };
    for at in [off.network, off.transport, off.payload].into_iter().flatten() {
        assert!(at as usize <= frame.len(), "{off:?}");
    }
    if let (Some(n), Some(t)) = (off.network, off.transport) {
        assert!(n < t, "{off:?}");
    }
    if let (Some(t), Some(p)) = (off.transport, off.payload) {
        assert!(t < p, "payload offset at or before the transport header: {off:?} {s:?}");
    }
}

#[test]
fn fuzz_found_inputs_keep_their_invariants() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/wire");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let data = std::fs::read(entry.unwrap().path()).unwrap();
        let [sel, a, b, frame @ ..] = &data[..] else { continue };
        let link = LinkType(LINKS[usize::from(*sel) % LINKS.len()]);
        let wire_len = frame.len() as u32 + u32::from(u16::from_be_bytes([*a, *b]));
        offsets_in_order(link, frame, wire_len);
        n += 1;
    }
    assert!(n > 0, "no inputs in {}", dir.display());
}

/// A TCP data offset below 5 words is malformed: the payload's start is unknown, not at (or
/// inside) the fixed header, where flow definitions' `payload[…]` would read header bytes.
#[test]
fn tcp_data_offset_below_five_has_no_payload_offset() {
    for words in 0..5u8 {
        let mut ip = vec![0x45, 0, 0, 60, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2];
        ip.extend_from_slice(&[0xc3, 0x50, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, words << 4, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        ip.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n\0\0");
        let mut s = PacketSummary::EMPTY;
        let off = decode_with_offsets(LinkType::RAW, &ip, ip.len() as u32, &mut s).unwrap();
        assert_eq!(off.transport, Some(20));
        assert_eq!(off.payload, None, "data offset {words}: {s:?}");
        offsets_in_order(LinkType::RAW, &ip, ip.len() as u32);
    }
}
