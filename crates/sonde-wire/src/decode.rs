//! The walk: link layer → IP → transport, into tunnels and back out, filling a
//! [`PacketSummary`]. Every step works on a [`Region`]: the captured bytes of a layer and how
//! long the enclosing headers say it is, so that a snaplen cut (captured < declared) is told
//! from a broken packet and byte counts come from declared lengths.

use crate::bytes::{clamp, tail};
use crate::icmp;
use crate::ipv4::Ipv4Header;
use crate::ipv6::{self, walk_extensions, ExtEnd, Ipv6Header};
use crate::link::{self, Net};
use crate::tunnel::{self, walk_gre, walk_gtpu, walk_vxlan};
use crate::{ethernet, linux_sll, tcp, udp};
use crate::{
    DecodeProblem, Fragment, IpSummary, Layer, LinkType, PacketSummary, Transport, Tunnel,
    UnsupportedLink, WireError,
};
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
        Region {
            bytes: tail(self.bytes, offset),
            declared: self.declared.saturating_sub(offset),
        }
    }

    /// The part from `offset` to `offset + len` (declared), captured bytes clamped.
    fn sub(self, offset: usize, len: usize) -> Region<'a> {
        Region {
            bytes: clamp(self.bytes, offset, offset.saturating_add(len)),
            declared: len,
        }
    }

    fn is_cut(self) -> bool {
        self.bytes.len() < self.declared
    }
}

#[derive(Debug, Clone, Copy)]
struct Walker {
    /// The snaplen cut the frame (captured < wire length).
    frame_cut: bool,
}

fn note(out: &mut PacketSummary, problem: DecodeProblem) {
    if out.problem.is_none() {
        out.problem = Some(problem);
    }
}

fn problem_only(problem: DecodeProblem) -> PacketSummary {
    PacketSummary {
        problem: Some(problem),
        ..PacketSummary::EMPTY
    }
}

impl Walker {
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

    fn network(self, net: Net, r: Region<'_>, depth: u8) -> PacketSummary {
        match net {
            Net::Ipv4(o) => self.ipv4(r.at(o), depth),
            Net::Ipv6(o) => self.ipv6(r.at(o), depth),
            Net::Ip(o) => self.ip(r.at(o), depth),
            Net::Ethernet(o) => {
                let inner = r.at(o);
                match ethernet::walk(inner.bytes) {
                    // The Ethernet walk never returns Ethernet; this arm only keeps the
                    // recursion visibly finite.
                    Net::Ethernet(_) => problem_only(DecodeProblem::Malformed(Layer::Link)),
                    net => self.network(net, inner, depth),
                }
            }
            Net::NonIp(n) => PacketSummary {
                non_ip: Some(n),
                ..PacketSummary::EMPTY
            },
            Net::Cut => problem_only(self.short(r, Layer::Link)),
            Net::Malformed => problem_only(DecodeProblem::Malformed(Layer::Link)),
        }
    }

    /// IP of either version: the version nibble decides.
    fn ip(self, r: Region<'_>, depth: u8) -> PacketSummary {
        match r.bytes.first() {
            Some(b) if b >> 4 == 6 => self.ipv6(r, depth),
            Some(_) => self.ipv4(r, depth),
            None => problem_only(self.short(r, Layer::Ipv4)),
        }
    }

    fn ipv4(self, r: Region<'_>, depth: u8) -> PacketSummary {
        let Ok(h) = Ipv4Header::new_checked(r.bytes) else {
            return problem_only(self.short(r, Layer::Ipv4));
        };
        let header_len = h.header_len();
        if h.version() != 4 || header_len < Ipv4Header::MIN_LEN {
            return problem_only(DecodeProblem::Malformed(Layer::Ipv4));
        }
        let total = match usize::from(h.total_len()) {
            // Segmentation offload: the capture saw the packet before the NIC filled it in.
            0 => r.declared,
            n => n,
        };
        if total < header_len {
            return problem_only(DecodeProblem::Malformed(Layer::Ipv4));
        }
        let fragment = if h.frag_offset() > 0 {
            Fragment::Later
        } else if h.more_fragments() {
            Fragment::First
        } else {
            Fragment::No
        };
        let protocol = h.protocol();
        let mut out = PacketSummary::EMPTY;
        out.ip = Some(IpSummary {
            src: IpAddr::V4(h.src()),
            dst: IpAddr::V4(h.dst()),
            total_len: total as u32,
            ttl: h.ttl(),
            ident: u32::from(h.ident()),
            protocol,
            fragment,
        });
        if total > r.declared {
            note(&mut out, DecodeProblem::TooShort(Layer::Ipv4));
        }
        if header_len > r.bytes.len() {
            note(&mut out, self.short(r, Layer::Ipv4));
            return out;
        }
        if fragment == Fragment::Later {
            out.transport = Some(Transport::Other { protocol });
            return out;
        }
        self.transport(
            out,
            protocol,
            r.sub(header_len, total - header_len),
            false,
            depth,
        )
    }

    fn ipv6(self, r: Region<'_>, depth: u8) -> PacketSummary {
        let Ok(h) = Ipv6Header::new_checked(r.bytes) else {
            return problem_only(self.short(r, Layer::Ipv6));
        };
        if h.version() != 6 {
            return problem_only(DecodeProblem::Malformed(Layer::Ipv6));
        }
        let payload_len = match usize::from(h.payload_len()) {
            // A jumbogram (RFC 2675) or segmentation offload: use what is there.
            0 if h.next_header() != ipv6::next_header::NO_NEXT => {
                r.declared.saturating_sub(Ipv6Header::LEN)
            }
            n => n,
        };
        let total = payload_len + Ipv6Header::LEN;
        let payload = r.sub(Ipv6Header::LEN, payload_len);
        let w = walk_extensions(h.next_header(), payload.bytes, payload_len);
        let mut out = PacketSummary::EMPTY;
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
            note(&mut out, DecodeProblem::TooShort(Layer::Ipv6));
        }
        match w.end {
            ExtEnd::Done => {}
            ExtEnd::Cut => {
                note(&mut out, self.short(payload, Layer::Ipv6));
                return out;
            }
            ExtEnd::Malformed => {
                note(&mut out, DecodeProblem::Malformed(Layer::Ipv6));
                return out;
            }
        }
        if w.fragment == Fragment::Later {
            out.transport = Some(Transport::Other {
                protocol: w.protocol,
            });
            return out;
        }
        self.transport(out, w.protocol, payload.at(w.offset), true, depth)
    }

    /// Decodes the transport header of `out`'s IP packet and follows tunnels.
    fn transport(
        self,
        mut out: PacketSummary,
        protocol: u8,
        r: Region<'_>,
        v6: bool,
        depth: u8,
    ) -> PacketSummary {
        let whole = out.ip.is_some_and(|ip| ip.fragment == Fragment::No);
        match protocol {
            tcp::PROTOCOL => {
                let (t, err) = tcp::summarize(r.bytes, r.declared);
                out.transport = Some(t);
                if let Some(e) = err {
                    note(&mut out, self.wire_error(e, r, Layer::Tcp));
                }
                out
            }
            udp::PROTOCOL => {
                let u = udp::summarize(r.bytes, r.declared);
                out.transport = Some(u.transport);
                if let Some(e) = u.error {
                    note(&mut out, self.wire_error(e, r, Layer::Udp));
                }
                let Transport::Udp(s) = u.transport else {
                    return out;
                };
                if !whole {
                    return out;
                }
                let inner = r.sub(udp::UdpHeader::LEN, u.payload_declared);
                if s.dst_port == tunnel::VXLAN_PORT {
                    self.tunnel(out, Tunnel::Vxlan, walk_vxlan(inner.bytes), inner, depth)
                } else if s.dst_port == tunnel::GTPU_PORT || s.src_port == tunnel::GTPU_PORT {
                    self.tunnel(out, Tunnel::GtpU, walk_gtpu(inner.bytes), inner, depth)
                } else {
                    out
                }
            }
            icmp::PROTOCOL_V4 if !v6 => self.icmp(out, protocol, r),
            icmp::PROTOCOL_V6 if v6 => self.icmp(out, protocol, r),
            tunnel::IPIP_PROTOCOL | tunnel::IPV6_IN_IP_PROTOCOL => {
                out.transport = Some(Transport::Other { protocol });
                if !whole {
                    return out;
                }
                let net = if protocol == tunnel::IPIP_PROTOCOL {
                    Net::Ipv4(0)
                } else {
                    Net::Ipv6(0)
                };
                self.tunnel(out, Tunnel::IpInIp, net, r, depth)
            }
            tunnel::GRE_PROTOCOL => {
                out.transport = Some(Transport::Other { protocol });
                if !whole {
                    return out;
                }
                self.tunnel(out, Tunnel::Gre, walk_gre(r.bytes), r, depth)
            }
            _ => {
                out.transport = Some(Transport::Other { protocol });
                out
            }
        }
    }

    fn icmp(self, mut out: PacketSummary, protocol: u8, r: Region<'_>) -> PacketSummary {
        let (t, err) = icmp::summarize(r.bytes, r.declared, protocol);
        out.transport = Some(t);
        if let Some(e) = err {
            note(&mut out, self.wire_error(e, r, Layer::Icmp));
        }
        out
    }

    /// Decodes the inner packet found at `net` in `r`. An inner IP packet replaces the outer
    /// one (the outermost tunnel kind is kept); otherwise the outer packet is reported, with the
    /// inner problem if there was one.
    fn tunnel(
        self,
        outer: PacketSummary,
        kind: Tunnel,
        net: Net,
        r: Region<'_>,
        depth: u8,
    ) -> PacketSummary {
        let mut outer = outer;
        if depth >= MAX_TUNNEL_DEPTH {
            note(&mut outer, DecodeProblem::Malformed(Layer::Tunnel));
            return outer;
        }
        let inner = self.network(net, r, depth + 1);
        if inner.ip.is_some() {
            return PacketSummary {
                tunnel: Some(kind),
                problem: outer.problem.or(inner.problem),
                ..inner
            };
        }
        if let Some(p) = inner.problem {
            note(&mut outer, relabel_link(p));
        }
        outer
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

/// Walks the link layer of `frame` to its network layer, or says the link type is unknown.
fn link_walk(link: LinkType, frame: &[u8]) -> Result<Net, UnsupportedLink> {
    Ok(match link {
        LinkType::ETHERNET => ethernet::walk(frame),
        LinkType::LINUX_SLL => linux_sll::walk_sll(frame),
        LinkType::LINUX_SLL2 => linux_sll::walk_sll2(frame),
        LinkType::RAW
        | LinkType::RAW_OPENBSD
        | LinkType::RAW_14
        | LinkType::IPV4
        | LinkType::IPV6 => link::walk_raw(frame),
        LinkType::NULL => link::walk_null(frame),
        LinkType::LOOP => link::walk_loop(frame),
        LinkType::PPP | LinkType::PPP_HDLC => link::walk_ppp(frame),
        LinkType::C_HDLC => link::walk_chdlc(frame),
        _ => return Err(UnsupportedLink(link)),
    })
}

pub(crate) fn decode(
    link: LinkType,
    frame: &[u8],
    wire_len: u32,
) -> Result<PacketSummary, UnsupportedLink> {
    let net = link_walk(link, frame)?;
    let wire = usize::try_from(wire_len).unwrap_or(usize::MAX);
    let walker = Walker {
        frame_cut: frame.len() < wire,
    };
    let region = Region {
        bytes: frame,
        declared: frame.len().max(wire),
    };
    Ok(walker.network(net, region, 0))
}

#[cfg(test)]
#[path = "decode_tests.rs"]
mod tests;
