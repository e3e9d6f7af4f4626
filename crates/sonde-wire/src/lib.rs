//! sonde-wire: packet decoding, the first stage after the capture source.
//!
//! Takes the bytes of one captured frame and its link type, walks the link layer (Ethernet with
//! 802.1Q/QinQ, MPLS and PPPoE, Linux SLL/SLL2, raw IP, BSD NULL/LOOP, PPP and Cisco HDLC),
//! IPv4/IPv6 (extension headers, fragments), common tunnels (GRE incl. ERSPAN, VXLAN, IP-in-IP,
//! GTP-U: the inner packet is the one reported) and TCP/UDP/ICMP, and returns a
//! [`PacketSummary`]: a small `Copy` value the flow layer consumes. Decoding never allocates and
//! never panics; a frame cut by the snaplen keeps every layer that was read ("lax" decoding) and
//! records where it stopped.
//!
//! Byte counts (`total_len`, `payload_len`) always come from the headers' declared lengths, so a
//! snaplen cut does not change them. A snaplen cut that falls in a payload is not a problem; one
//! that falls inside a header the decoder needed is [`DecodeProblem::Truncated`].
//!
//! The header views the walk is built from (`ipv4::Ipv4Header`, `tcp::TcpHeader`, …) are public
//! too: borrowed views over `&[u8]` whose `new_checked` validates the fixed length once and
//! whose accessors cannot panic.
//!
//! ```
//! use sonde_wire::{decode, DecodeProblem, Layer, LinkType};
//! let frame = [0u8; 10];
//! let summary = decode(LinkType::ETHERNET, &frame, 10).unwrap();
//! assert!(summary.ip.is_none());
//! // Ten bytes cannot hold an Ethernet header, and the capture says the frame was that short.
//! assert_eq!(summary.problem, Some(DecodeProblem::TooShort(Layer::Link)));
//! ```

#![forbid(unsafe_code)]

mod decode;
pub mod ethernet;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod link;
pub mod linux_sll;
mod summary;
pub mod tcp;
pub mod tunnel;
pub mod udp;

pub use summary::*;

/// A link type the decoder has no parser for. The caller counts these per type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UnsupportedLink(pub LinkType);

/// Why a header view could not be built over a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireError {
    /// The buffer is shorter than the header's fixed part.
    Truncated,
    /// A field holds an impossible value.
    Malformed,
}

/// Decodes one frame. `wire_len` is the original length on the wire (≥ `frame.len()` when the
/// snaplen cut the frame); it tells a snaplen cut from a broken packet.
pub fn decode(link: LinkType, frame: &[u8], wire_len: u32) -> Result<PacketSummary, UnsupportedLink> {
    decode::decode(link, frame, wire_len)
}

/// Like [`decode`], into a summary the caller keeps (a hot loop reuses one and copies nothing).
/// On an unsupported link type `out` is left empty.
pub fn decode_into(
    link: LinkType,
    frame: &[u8],
    wire_len: u32,
    out: &mut PacketSummary,
) -> Result<(), UnsupportedLink> {
    decode::decode_into(link, frame, wire_len, out)
}

pub use decode::{FlowTuple, MAX_TUNNEL_DEPTH};

/// The protocol, addresses and ports of a TCP or UDP packet that is plain IPv4 or IPv6 under
/// any supported link layer (no IPv4 fragment, no IPv6 extension header, no tunnel), read
/// without decoding the rest; `None` for any other packet. Where it gives a tuple, [`decode`]
/// gives a whole TCP or UDP packet with the same one: readers that split the flows use it to
/// pass over another reader's packets.
pub fn flow_tuple(link: LinkType, frame: &[u8], wire_len: u32) -> Option<FlowTuple> {
    decode::flow_tuple(link, frame, wire_len)
}

/// Walks the link layer of `frame` to where its network layer starts (the first step of
/// [`decode`]), for callers that work on the bytes themselves (rewriting a trace).
pub fn link_network(link: LinkType, frame: &[u8]) -> Result<link::LinkEnd, UnsupportedLink> {
    decode::link_walk(link, frame)
}

/// Where the analysed packet's layers start in the frame, in bytes: the network header, the
/// transport header and its payload (for a tunnelled packet, the inner ones). `None` when the
/// packet has no such layer or the capture ended before it. For TCP and UDP the payload is
/// after the header; for other protocols it is not known (`None`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerOffsets {
    pub network: Option<u32>,
    pub transport: Option<u32>,
    pub payload: Option<u32>,
}

/// Like [`decode_into`], also finding where the layers start (for patterns over the frame's
/// bytes, as flow definitions use). A separate entry so the hot path pays nothing for it.
pub fn decode_with_offsets(
    link: LinkType,
    frame: &[u8],
    wire_len: u32,
    out: &mut PacketSummary,
) -> Result<LayerOffsets, UnsupportedLink> {
    decode::decode_with_offsets(link, frame, wire_len, out)
}

/// Big-endian readers that return 0 instead of panicking when out of range. The views check
/// their length once in `new_checked`, after which these never miss.
pub(crate) mod bytes {
    #[inline(always)]
    pub(crate) fn u8_at(b: &[u8], at: usize) -> u8 {
        b.get(at).copied().unwrap_or(0)
    }

    #[inline(always)]
    pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
        match b.get(at..at.saturating_add(2)) {
            Some(&[x, y]) => u16::from_be_bytes([x, y]),
            _ => 0,
        }
    }

    #[inline(always)]
    pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
        match b.get(at..at.saturating_add(4)) {
            Some(&[w, x, y, z]) => u32::from_be_bytes([w, x, y, z]),
            _ => 0,
        }
    }

    #[inline(always)]
    pub(crate) fn array<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
        let mut out = [0u8; N];
        if let Some(src) = b.get(at..at.saturating_add(N)) {
            out.copy_from_slice(src);
        }
        out
    }

    /// `b[from..]`, or an empty slice.
    #[inline(always)]
    pub(crate) fn tail(b: &[u8], from: usize) -> &[u8] {
        b.get(from..).unwrap_or(&[])
    }

    /// `b[from..to]` clamped to the buffer, or an empty slice.
    #[inline(always)]
    pub(crate) fn clamp(b: &[u8], from: usize, to: usize) -> &[u8] {
        let to = to.min(b.len());
        b.get(from..to).unwrap_or(&[])
    }
}

#[cfg(test)]
pub(crate) mod testutil;
