//! The walk: link layer → IP → transport, into tunnels and back out, filling a
//! [`PacketSummary`]. Every step works on a [`Region`]: the captured bytes of a layer and how
//! long the enclosing headers say it is, so that a snaplen cut (captured < declared) is told
//! from a broken packet and byte counts come from declared lengths.

use crate::bytes::{clamp, tail};
use crate::icmp;
use crate::ipv4::{self, Ipv4Header};
use crate::ipv6::{self, walk_extensions, ExtEnd, Ipv6Header};
use crate::link::{self, LinkEnd};
use crate::tunnel::{self, walk_gre};
use crate::{ethernet, linux_sll, tcp, udp};
use crate::{
    DecodeProblem, Fragment, IpSummary, Layer, LayerOffsets, LinkType, PacketSummary, Transport, Tunnel,
    UnsupportedLink, WireError,
};
use std::cell::Cell;
use std::net::IpAddr;

/// Tunnels nested deeper than this are not entered (the packet at that depth is reported with
/// `Malformed(Tunnel)`).
pub const MAX_TUNNEL_DEPTH: u8 = 4;

/// The captured bytes of a layer, and how many bytes the enclosing headers (or, at the top, the
/// wire length) say it has.
#[derive(Debug, Clone, Copy)]
struct Region<'a> {
    bytes: &'a [u8],
    declared: usize,
}

impl<'a> Region<'a> {
    fn at(self, offset: usize) -> Region<'a> {
        Region { bytes: tail(self.bytes, offset), declared: self.declared.saturating_sub(offset) }
    }

    /// The part from `offset` to `offset + len` (declared), captured bytes clamped.
    fn sub(self, offset: usize, len: usize) -> Region<'a> {
        Region { bytes: clamp(self.bytes, offset, offset.saturating_add(len)), declared: len }
    }

    fn is_cut(self) -> bool {
        self.bytes.len() < self.declared
    }
}

#[derive(Debug, Clone, Copy)]
struct Walker<N: Notes> {
    /// The snaplen cut the frame (captured < wire length).
    frame_cut: bool,
    /// Where the layers' offsets go: nowhere on the hot path (`()`, compiled away).
    notes: N,
}

/// What the walk tells about where layers start.
trait Notes: Copy {
    /// The (innermost so far) network header is `bytes`; the transport's are reset.
    fn network(self, bytes: &[u8]);
    /// The transport header is `bytes`, its payload `header_len` bytes on.
    fn transport(self, bytes: &[u8], header_len: Option<usize>);
}

impl Notes for () {
    #[inline(always)]
    fn network(self, _: &[u8]) {}
    #[inline(always)]
    fn transport(self, _: &[u8], _: Option<usize>) {}
}

/// The frame the offsets count from, and where they are kept.
impl Notes for (&[u8], &Cell<LayerOffsets>) {
    fn network(self, bytes: &[u8]) {
        self.1.set(LayerOffsets { network: offset_of(self.0, bytes), transport: None, payload: None });
    }

    fn transport(self, bytes: &[u8], header_len: Option<usize>) {
        let transport = offset_of(self.0, bytes);
        let payload = header_len.and_then(|h| offset_of(self.0, bytes.get(h..)?));
        self.1.set(LayerOffsets { transport, payload, ..self.1.get() });
    }
}

/// Offset of `bytes` in `frame`, if the capture holds any of them.
fn offset_of(frame: &[u8], bytes: &[u8]) -> Option<u32> {
    if bytes.is_empty() {
        return None;
    }
    u32::try_from((bytes.as_ptr() as usize).wrapping_sub(frame.as_ptr() as usize)).ok()
}

fn note(out: &mut PacketSummary, problem: DecodeProblem) {
    if out.problem.is_none() {
        out.problem = Some(problem);
    }
}

impl<N: Notes> Walker<N> {
    fn note_network(self, r: Region<'_>) {
        self.notes.network(r.bytes);
    }

    fn note_transport(self, r: Region<'_>, header_len: Option<usize>) {
        self.notes.transport(r.bytes, header_len);
    }

    /// The captured bytes of `r` ended before a header of `layer` did.
    fn short(self, r: Region<'_>, layer: Layer) -> DecodeProblem {
        if self.frame_cut && r.is_cut() {
            DecodeProblem::Truncated(layer)
        } else {
            DecodeProblem::TooShort(layer)
        }
    }

    fn wire_error(self, err: WireError, r: Region<'_>, layer: Layer) -> DecodeProblem {
        match err {
            WireError::Truncated => self.short(r, layer),
            WireError::Malformed => DecodeProblem::Malformed(layer),
        }
    }

    /// Decodes the network layer `net` found in `r` into `out`, which starts out empty. The
    /// summary is filled in place all along the walk: it is too big to be returned cheaply
    /// from every step.
    fn network(self, net: LinkEnd, r: Region<'_>, depth: u8, out: &mut PacketSummary) {
        match net {
            LinkEnd::Ipv4(o) => self.ipv4(r.at(o), depth, out),
            LinkEnd::Ipv6(o) => self.ipv6(r.at(o), depth, out),
            LinkEnd::Ip(o) => self.ip(r.at(o), depth, out),
            LinkEnd::Ethernet(o) => {
                let inner = r.at(o);
                match ethernet::walk(inner.bytes) {
                    // The Ethernet walk never returns Ethernet; this arm only keeps the
                    // recursion visibly finite.
                    LinkEnd::Ethernet(_) => note(out, DecodeProblem::Malformed(Layer::Link)),
                    net => self.network(net, inner, depth, out),
                }
            }
            LinkEnd::NonIp(n) => out.non_ip = Some(n),
            LinkEnd::Cut => note(out, self.short(r, Layer::Link)),
            LinkEnd::Malformed => note(out, DecodeProblem::Malformed(Layer::Link)),
        }
    }

    /// IP of either version: the version nibble decides.
    fn ip(self, r: Region<'_>, depth: u8, out: &mut PacketSummary) {
        match r.bytes.first() {
            Some(b) if b >> 4 == 6 => self.ipv6(r, depth, out),
            Some(_) => self.ipv4(r, depth, out),
            None => note(out, self.short(r, Layer::Ipv4)),
        }
    }

    fn ipv4(self, r: Region<'_>, depth: u8, out: &mut PacketSummary) {
        let Ok(h) = Ipv4Header::new_checked(r.bytes) else {
            return note(out, self.short(r, Layer::Ipv4));
        };
        let header_len = h.header_len();
        if h.version() != 4 || header_len < Ipv4Header::MIN_LEN {
            return note(out, DecodeProblem::Malformed(Layer::Ipv4));
        }
        let total = match usize::from(h.total_len()) {
            // Segmentation offload: the capture saw the packet before the NIC filled it in.
            0 => r.declared,
            n => n,
        };
        if total < header_len {
            return note(out, DecodeProblem::Malformed(Layer::Ipv4));
        }
        let fragment = if h.frag_offset() > 0 {
            Fragment::Later
        } else if h.more_fragments() {
            Fragment::First
        } else {
            Fragment::No
        };
        let protocol = h.protocol();
        self.note_network(r);
        out.ip = Some(IpSummary {
            src: IpAddr::V4(h.src()),
            dst: IpAddr::V4(h.dst()),
            total_len: u32::try_from(total).unwrap_or(u32::MAX),
            ttl: h.ttl(),
            ident: u32::from(h.ident()),
            protocol,
            fragment,
        });
        if total > r.declared {
            note(out, DecodeProblem::TooShort(Layer::Ipv4));
        }
        if header_len > r.bytes.len() {
            return note(out, self.short(r, Layer::Ipv4));
        }
        if fragment == Fragment::Later {
            out.transport = Some(Transport::Other { protocol });
            return;
        }
        let payload = r.sub(header_len, total - header_len);
        self.transport(protocol, payload, false, depth, out)
    }

    fn ipv6(self, r: Region<'_>, depth: u8, out: &mut PacketSummary) {
        let Ok(h) = Ipv6Header::new_checked(r.bytes) else {
            return note(out, self.short(r, Layer::Ipv6));
        };
        if h.version() != 6 {
            return note(out, DecodeProblem::Malformed(Layer::Ipv6));
        }
        let payload_len = match usize::from(h.payload_len()) {
            // A jumbogram (RFC 2675) or segmentation offload: use what is there.
            0 if h.next_header() != ipv6::next_header::NO_NEXT => r.declared.saturating_sub(Ipv6Header::LEN),
            n => n,
        };
        let total = payload_len + Ipv6Header::LEN;
        let payload = r.sub(Ipv6Header::LEN, payload_len);
        let w = walk_extensions(h.next_header(), payload.bytes, payload_len);
        self.note_network(r);
        out.ip = Some(IpSummary {
            src: IpAddr::V6(h.src()),
            dst: IpAddr::V6(h.dst()),
            total_len: u32::try_from(total).unwrap_or(u32::MAX),
            ttl: h.hop_limit(),
            ident: w.ident,
            protocol: w.protocol,
            fragment: w.fragment,
        });
        if total > r.declared {
            note(out, DecodeProblem::TooShort(Layer::Ipv6));
        }
        match w.end {
            ExtEnd::Done => {}
            ExtEnd::Cut => return note(out, self.short(payload, Layer::Ipv6)),
            ExtEnd::Malformed => return note(out, DecodeProblem::Malformed(Layer::Ipv6)),
        }
        if w.fragment == Fragment::Later {
            out.transport = Some(Transport::Other { protocol: w.protocol });
            return;
        }
        self.transport(w.protocol, payload.at(w.offset), true, depth, out)
    }

    /// Decodes the transport header of `out`'s IP packet and follows tunnels.
    fn transport(self, protocol: u8, r: Region<'_>, v6: bool, depth: u8, out: &mut PacketSummary) {
        let whole = out.ip.is_some_and(|ip| ip.fragment == Fragment::No);
        match protocol {
            tcp::PROTOCOL => {
                if let Some(e) = tcp::summarize_into(r.bytes, r.declared, &mut out.transport) {
                    note(out, self.wire_error(e, r, Layer::Tcp));
                }
                // A header cut short still has its first bytes for patterns; its payload is unknown.
                // A data offset below 5 words (RFC 9293 §3.1) is malformed: where its payload
                // starts is not known, and the header's own bytes are not payload (fuzzing found
                // offsets with the payload at or inside the fixed header).
                let header_len = match out.transport {
                    Some(Transport::Tcp(t)) if usize::from(t.header_len) >= tcp::TcpHeader::MIN_LEN => {
                        Some(usize::from(t.header_len))
                    }
                    _ => None,
                };
                self.note_transport(r, header_len);
            }
            udp::PROTOCOL => {
                let u = udp::summarize(r.bytes, r.declared);
                out.transport = Some(u.transport);
                self.note_transport(r, matches!(u.transport, Transport::Udp(_)).then_some(udp::UdpHeader::LEN));
                if let Some(e) = u.error {
                    note(out, self.wire_error(e, r, Layer::Udp));
                }
                let Transport::Udp(s) = u.transport else {
                    return;
                };
                if !whole {
                    return;
                }
                let inner = r.sub(udp::UdpHeader::LEN, u.payload_declared);
                if let Some(t) = tunnel::udp_tunnel(s.src_port, s.dst_port) {
                    self.tunnel(t, tunnel::walk_udp_tunnel(t, inner.bytes), inner, depth, out);
                }
            }
            icmp::PROTOCOL_V4 if !v6 => {
                self.note_transport(r, None);
                self.icmp(protocol, r, out)
            }
            icmp::PROTOCOL_V6 if v6 => {
                self.note_transport(r, None);
                self.icmp(protocol, r, out)
            }
            tunnel::IPIP_PROTOCOL | tunnel::IPV6_IN_IP_PROTOCOL => {
                out.transport = Some(Transport::Other { protocol });
                if whole {
                    let net = if protocol == tunnel::IPIP_PROTOCOL { LinkEnd::Ipv4(0) } else { LinkEnd::Ipv6(0) };
                    self.tunnel(Tunnel::IpInIp, net, r, depth, out);
                }
            }
            tunnel::GRE_PROTOCOL => {
                out.transport = Some(Transport::Other { protocol });
                if whole {
                    self.tunnel(Tunnel::Gre, walk_gre(r.bytes), r, depth, out);
                }
            }
            _ => {
                self.note_transport(r, None);
                out.transport = Some(Transport::Other { protocol })
            }
        }
    }

    fn icmp(self, protocol: u8, r: Region<'_>, out: &mut PacketSummary) {
        let (t, err) = icmp::summarize(r.bytes, r.declared, protocol);
        out.transport = Some(t);
        if let Some(e) = err {
            note(out, self.wire_error(e, r, Layer::Icmp));
        }
    }

    /// Decodes the inner packet found at `net` in `r`. An inner IP packet replaces the outer
    /// one in `out` (the outermost tunnel kind is kept); otherwise the outer packet stays, with
    /// the inner problem if there was one.
    fn tunnel(self, kind: Tunnel, net: LinkEnd, r: Region<'_>, depth: u8, out: &mut PacketSummary) {
        if depth >= MAX_TUNNEL_DEPTH {
            return note(out, DecodeProblem::Malformed(Layer::Tunnel));
        }
        let outer = *out;
        clear(out);
        self.network(net, r, depth + 1, out);
        if out.ip.is_some() {
            out.tunnel = Some(kind);
            out.problem = outer.problem.or(out.problem);
        } else {
            let inner_problem = out.problem;
            *out = outer;
            if let Some(p) = inner_problem {
                note(out, relabel_link(p));
            }
        }
    }
}

/// An inner packet's link-layer problem is the tunnel's.
fn relabel_link(p: DecodeProblem) -> DecodeProblem {
    match p {
        DecodeProblem::Malformed(Layer::Link) => DecodeProblem::Malformed(Layer::Tunnel),
        DecodeProblem::Truncated(Layer::Link) => DecodeProblem::Truncated(Layer::Tunnel),
        DecodeProblem::TooShort(Layer::Link) => DecodeProblem::TooShort(Layer::Tunnel),
        p => p,
    }
}

/// Makes `out` equal to `PacketSummary::EMPTY`, field by field: assigning the constant whole
/// copies all of its bytes (a `memcpy` call per packet), where each `None` is a tag to write.
#[inline(always)]
fn clear(out: &mut PacketSummary) {
    // Destructured, so that a new field cannot be forgotten here.
    let PacketSummary { ip, transport, tunnel, non_ip, problem } = out;
    *ip = None;
    *transport = None;
    *tunnel = None;
    *non_ip = None;
    *problem = None;
}

/// Walks the link layer of `frame` to its network layer, or says the link type is unknown.
/// Inlined into each walk (the hot one lost 40 M instructions on the benchmark trace when a
/// second caller made the compiler keep it apart).
#[inline(always)]
pub(crate) fn link_walk(link: LinkType, frame: &[u8]) -> Result<LinkEnd, UnsupportedLink> {
    Ok(match link {
        LinkType::ETHERNET => ethernet::walk(frame),
        LinkType::LINUX_SLL => linux_sll::walk_sll(frame),
        LinkType::LINUX_SLL2 => linux_sll::walk_sll2(frame),
        LinkType::RAW | LinkType::RAW_OPENBSD | LinkType::RAW_14 | LinkType::IPV4 | LinkType::IPV6 => {
            link::walk_raw(frame)
        }
        LinkType::NULL => link::walk_null(frame),
        LinkType::LOOP => link::walk_loop(frame),
        LinkType::PPP | LinkType::PPP_HDLC => link::walk_ppp(frame),
        LinkType::C_HDLC => link::walk_chdlc(frame),
        _ => return Err(UnsupportedLink(link)),
    })
}

pub(crate) fn decode(link: LinkType, frame: &[u8], wire_len: u32) -> Result<PacketSummary, UnsupportedLink> {
    let mut out = PacketSummary::EMPTY;
    decode_into(link, frame, wire_len, &mut out)?;
    Ok(out)
}

pub(crate) fn decode_into(
    link: LinkType,
    frame: &[u8],
    wire_len: u32,
    out: &mut PacketSummary,
) -> Result<(), UnsupportedLink> {
    walk(link, frame, wire_len, out, ())
}

pub(crate) fn decode_with_offsets(
    link: LinkType,
    frame: &[u8],
    wire_len: u32,
    out: &mut PacketSummary,
) -> Result<LayerOffsets, UnsupportedLink> {
    let cell = Cell::new(LayerOffsets::default());
    walk(link, frame, wire_len, out, (frame, &cell))?;
    Ok(cell.get())
}

#[inline(always)]
fn walk<N: Notes>(
    link: LinkType,
    frame: &[u8],
    wire_len: u32,
    out: &mut PacketSummary,
    notes: N,
) -> Result<(), UnsupportedLink> {
    clear(out);
    let net = link_walk(link, frame)?;
    let wire = usize::try_from(wire_len).unwrap_or(usize::MAX);
    let walker = Walker { frame_cut: frame.len() < wire, notes };
    let region = Region { bytes: frame, declared: frame.len().max(wire) };
    match net {
        // The common case, without the dispatch in `network` (which the compiler does not
        // inline here: it is recursive).
        LinkEnd::Ipv4(o) => walker.ipv4(region.at(o), 0, out),
        net => walker.network(net, region, 0, out),
    }
    Ok(())
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;

/// The addresses and ports of a plain TCP or UDP packet, read without the walk: see
/// [`crate::flow_tuple`]. Addresses are integers (an IPv4 address in the low 32 bits), as a
/// flow key holds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowTuple {
    pub protocol: u8,
    pub v6: bool,
    pub src: u128,
    pub dst: u128,
    pub src_port: u16,
    pub dst_port: u16,
}

impl FlowTuple {
    pub fn ip(self, addr: u128) -> IpAddr {
        if self.v6 {
            IpAddr::V6(addr.into())
        } else {
            IpAddr::V4((addr as u32).into())
        }
    }
}

#[inline]
pub(crate) fn flow_tuple(link: LinkType, frame: &[u8], wire_len: u32) -> Option<FlowTuple> {
    let (o, v6) = match link_walk(link, frame).ok()? {
        LinkEnd::Ipv4(o) => (o, false),
        LinkEnd::Ipv6(o) => (o, true),
        LinkEnd::Ip(o) => (o, frame.get(o)? >> 4 == 6),
        _ => return None,
    };
    let declared = frame.len().max(usize::try_from(wire_len).unwrap_or(usize::MAX)).saturating_sub(o);
    let bytes = tail(frame, o);
    // Where the walk would find the transport header: the same tests, in the same order, and
    // `None` wherever it would go another way (options, fragments, extension headers, tunnels).
    let (protocol, src, dst, transport) = if v6 {
        let h: &[u8; Ipv6Header::LEN] = bytes.get(..Ipv6Header::LEN)?.try_into().ok()?;
        let protocol = h[6];
        if h[0] >> 4 != 6 || !matches!(protocol, tcp::PROTOCOL | udp::PROTOCOL) {
            return None;
        }
        let payload_len = match usize::from(u16::from_be_bytes([h[4], h[5]])) {
            0 => declared.saturating_sub(Ipv6Header::LEN),
            n => n,
        };
        let address = |at: usize| u128::from_be_bytes(h[at..at + 16].try_into().expect("16 bytes"));
        (protocol, address(8), address(24), clamp(bytes, Ipv6Header::LEN, Ipv6Header::LEN + payload_len))
    } else {
        let h: &[u8; Ipv4Header::MIN_LEN] = bytes.get(..Ipv4Header::MIN_LEN)?.try_into().ok()?;
        let header_len = usize::from(h[0] & 0x0f) * 4;
        let total = match usize::from(u16::from_be_bytes([h[2], h[3]])) {
            0 => declared,
            n => n,
        };
        let protocol = h[9];
        // Version 4, a header of at least 20 bytes that the capture holds, the total length
        // not below it; neither a later fragment nor a first one (more fragments).
        if h[0] >> 4 != 4
            || header_len < Ipv4Header::MIN_LEN
            || total < header_len
            || header_len > bytes.len()
            || u16::from_be_bytes([h[6], h[7]]) & (ipv4::FLAG_MF | ipv4::FRAG_OFFSET_MASK) != 0
            || !matches!(protocol, tcp::PROTOCOL | udp::PROTOCOL)
        {
            return None;
        }
        let address = |at: usize| u128::from(u32::from_be_bytes(h[at..at + 4].try_into().expect("4 bytes")));
        (protocol, address(12), address(16), clamp(bytes, header_len, total))
    };
    // The walk reads a TCP header of 20 bytes or a UDP header of 8.
    let least = if protocol == tcp::PROTOCOL { tcp::TcpHeader::MIN_LEN } else { udp::UdpHeader::LEN };
    let ports: &[u8; 4] = transport.get(..4).filter(|_| transport.len() >= least)?.try_into().ok()?;
    let (src_port, dst_port) = (u16::from_be_bytes([ports[0], ports[1]]), u16::from_be_bytes([ports[2], ports[3]]));
    if protocol == udp::PROTOCOL && tunnel::udp_tunnel(src_port, dst_port).is_some() {
        return None;
    }
    Some(FlowTuple { protocol, v6, src, dst, src_port, dst_port })
}
