//! sonde-define: flows defined on demand, as Kitatsuji et al.'s real-time flow meter defines
//! them — a named chain of bit patterns over the packet, all of which must match, whose last
//! pattern's value is the flow identifier (FID).
//!
//! ```
//! use sonde_define::{parse_definitions, Compiled, Layers};
//! let defs = parse_definitions("web = ip.proto == 6 and tcp.dport in 80..88\nsyn = tcp.flags & 0x12 == 0x02", sonde_define::MAX_NAME_BYTES).unwrap();
//! let set = Compiled::new(&defs);
//! // An IPv4 TCP SYN to port 80: the transport header at byte 20 of a raw IP frame.
//! let mut frame = vec![0u8; 40];
//! frame[20..24].copy_from_slice(&[0x04, 0xd2, 0x00, 0x50]);
//! frame[33] = 0x02;
//! let layers = Layers { frame: &frame, l3: Some(0), l4: Some(20), payload: Some(40), meta: [4, 6, 64, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0] };
//! let mut out = Vec::new();
//! set.matches(&layers, &mut out);
//! assert_eq!(out.iter().map(|m| (m.def, m.fid)).collect::<Vec<_>>(), [(0, 80), (1, 2)]);
//! ```
//!
//! The language, the fields and the costs: docs/definitions.md.

#![forbid(unsafe_code)]

mod assoc;
mod change;
mod change_file;
mod count;
mod definition;
mod fid;
pub mod fields;
mod gaps;
mod matcher;
mod parse;
pub mod pattern;
mod trie;
mod versions;
mod write;

pub use assoc::{AssociationTotal, WRITTEN_SAMPLES};
pub use change::{Change, ChangeError, ChangeOutcome, ScheduledChange};
pub use change_file::{parse_change_file, ChangeFileError, ChangeFileErrorKind};
pub use count::{Counter, DefinitionTotal, Traffic};
pub use definition::{
    Association, Bound, Definition, Measures, ParseError, DEFAULT_IDLE_NS, DEFAULT_MAX_ARMED, DEFAULT_WITHIN_NS,
    MAX_NAME_BYTES, MAX_PATTERNS,
};
pub use matcher::Matcher;
pub use parse::{parse_definition, parse_definition_among, parse_definitions};
pub use pattern::{Anchor, Pattern};
pub use trie::{Compiled, Match};
pub use versions::SetChange;

/// A packet as the patterns see it: the captured frame and where its layers start (`None`
/// when the packet has no such layer or the capture ended before it), plus facts the decoder
/// found that a fixed offset cannot express (see [`fields::meta`]): IP version, the protocol
/// after IPv6 extension headers, TTL / hop limit, TOS / traffic class, TCP's next sequence
/// number, the IP length.
#[derive(Debug, Clone, Copy)]
pub struct Layers<'a> {
    pub frame: &'a [u8],
    pub l3: Option<u32>,
    pub l4: Option<u32>,
    pub payload: Option<u32>,
    pub meta: [u8; fields::meta::LEN],
}

impl<'a> Layers<'a> {
    /// The layers of a decoded frame: the decoder's offsets, and its facts (TOS / traffic class
    /// read from the header at the network offset).
    pub fn of(
        link: sonde_wire::LinkType,
        frame: &'a [u8],
        summary: &sonde_wire::PacketSummary,
        offsets: &sonde_wire::LayerOffsets,
    ) -> Self {
        let mut meta = [0u8; fields::meta::LEN];
        meta[fields::meta::ETHERNET as usize] = u8::from(link.0 == 1);
        if let (Some(ip), Some(at)) = (summary.ip, offsets.network) {
            let at = at as usize;
            let (version, tos) = match ip.src {
                std::net::IpAddr::V4(_) => (4, frame.get(at + 1).copied().unwrap_or(0)),
                std::net::IpAddr::V6(_) => (6, frame.get(at..at + 2).map_or(0, |b| (b[0] << 4) | (b[1] >> 4))),
            };
            meta[..4].copy_from_slice(&[version, ip.protocol, ip.ttl, tos]);
            meta[8..12].copy_from_slice(&ip.total_len.to_be_bytes());
        }
        if let Some(sonde_wire::Transport::Tcp(t)) = summary.transport {
            let next =
                t.seq.wrapping_add(t.payload_len).wrapping_add(u32::from(t.flags.syn()) + u32::from(t.flags.fin()));
            meta[4..8].copy_from_slice(&next.to_be_bytes());
        }
        Layers { frame, l3: offsets.network, l4: offsets.transport, payload: offsets.payload, meta }
    }
}
