//! IPv4 and IPv6 headers: addresses (with IPv6 routing headers), the IPv4 header checksum, and
//! the hand-over to the transport layer with what its pseudo-header checksum needs.

use sonde_wire::ipv4::Ipv4Header;
use sonde_wire::ipv6::{self, is_extension, next_header, walk_extensions, ExtEnd, ExtHeader, Ipv6Header};
use sonde_wire::Fragment;

use crate::checksum::{self, field, set_field, sum};
use crate::frame::sub;
use crate::transport::Segment;
use crate::{FrameKind, Rewriter};

/// IPv4 fields, from sonde-wire's view.
mod v4 {
    use sonde_wire::ipv4::Ipv4Header;
    pub const CHECKSUM: usize = Ipv4Header::CHECKSUM_OFFSET;
    pub const SRC: usize = Ipv4Header::SRC_OFFSET;
    pub const DST: usize = Ipv4Header::DST_OFFSET;
    /// Source and destination, contiguous.
    pub const ADDRS: core::ops::Range<usize> = SRC..DST + 4;
}

mod v6 {
    use sonde_wire::ipv6::Ipv6Header;
    pub const SRC: usize = Ipv6Header::SRC_OFFSET;
    pub const DST: usize = Ipv6Header::DST_OFFSET;
    pub const HEADER_LEN: usize = Ipv6Header::LEN;
    // Routing header (RFC 8200 §4.4): type and segments left, then type-specific data.
    pub const RH_TYPE: usize = 2;
    pub const RH_SEGMENTS_LEFT: usize = 3;
    /// Segment routing header (RFC 8754 §2): index of the last segment-list entry.
    pub const SRH_LAST_ENTRY: usize = 4;
    pub const RH_ADDRESSES: usize = 8;
}

/// What a transport checksum's pseudo-header needs: the family and the sums of its address
/// words (source and final destination) before and after the rewrite.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pseudo {
    pub(crate) v6: bool,
    pub(crate) old: u16,
    pub(crate) new: u16,
}

impl Rewriter {
    /// An IP packet of either version: the version nibble decides.
    pub(crate) fn ip_any(&mut self, buf: &mut [u8], declared: usize, depth: u8, quoted: bool) -> FrameKind {
        match buf.first() {
            Some(b) if b >> 4 == 6 => self.ipv6(buf, declared, depth, quoted),
            Some(b) if b >> 4 == 4 => self.ipv4(buf, declared, depth, quoted),
            _ => {
                self.stats.headers_unreadable += 1;
                FrameKind::UnreadableLink
            }
        }
    }

    /// An IPv4 packet; `quoted`: inside an ICMP error (only incremental checksum updates, no
    /// tunnels or further quotes).
    pub(crate) fn ipv4(&mut self, buf: &mut [u8], declared: usize, depth: u8, quoted: bool) -> FrameKind {
        let Ok(h) = Ipv4Header::new_checked(buf) else {
            return self.cut_fixed_header(buf, false);
        };
        let header_len = h.header_len();
        if h.version() != 4 || header_len < Ipv4Header::MIN_LEN {
            self.stats.headers_unreadable += 1;
            return FrameKind::UnreadableLink;
        }
        let total = match usize::from(h.total_len()) {
            // Segmentation offload: the capture saw the packet before the NIC filled it in.
            0 => declared,
            n => n,
        };
        let (protocol, later_fragment) = (h.protocol(), h.frag_offset() > 0);
        let fragment = later_fragment || h.more_fragments();
        let old_header_sum = buf.get(..header_len).map(sum);
        let old_addrs = sum(&buf[v4::ADDRS]);
        let old_ck = field(buf, v4::CHECKSUM).unwrap_or(0);
        self.map_v4(buf, v4::SRC);
        self.map_v4(buf, v4::DST);
        let new_addrs = sum(&buf[v4::ADDRS]);
        match (old_header_sum, quoted) {
            (Some(old_sum), false) => {
                set_field(buf, v4::CHECKSUM, 0);
                let new_ck = !sum(&buf[..header_len]);
                set_field(buf, v4::CHECKSUM, new_ck);
                self.count_recomputed(old_sum == 0xffff);
            }
            // Options cut, or a quoted header (kept exactly as right or wrong as it was).
            _ => {
                set_field(buf, v4::CHECKSUM, checksum::update(old_ck, old_addrs, new_addrs));
                self.stats.checksums_adjusted += 1;
            }
        }
        if old_header_sum.is_none() || total < header_len {
            self.stats.headers_unreadable += 1;
            return FrameKind::Ip;
        }
        if later_fragment {
            return FrameKind::Ip;
        }
        let payload_declared = total - header_len;
        let payload_end = total.min(buf.len());
        let segment = Segment {
            protocol,
            declared: payload_declared,
            pseudo: Pseudo { v6: false, old: old_addrs, new: new_addrs },
            whole: !fragment && !quoted && payload_end == total,
            quoted,
            depth,
        };
        self.transport(&mut buf[header_len..payload_end], segment);
        FrameKind::Ip
    }

    pub(crate) fn ipv6(&mut self, buf: &mut [u8], declared: usize, depth: u8, quoted: bool) -> FrameKind {
        let Ok(h) = Ipv6Header::new_checked(buf) else {
            return self.cut_fixed_header(buf, true);
        };
        if h.version() != 6 {
            self.stats.headers_unreadable += 1;
            return FrameKind::UnreadableLink;
        }
        let payload_declared = match usize::from(h.payload_len()) {
            // A jumbogram (RFC 2675) or segmentation offload: use what is there.
            0 if h.next_header() != next_header::NO_NEXT => declared.saturating_sub(v6::HEADER_LEN),
            n => n,
        };
        let first_next = h.next_header();
        let total = v6::HEADER_LEN + payload_declared;
        let payload_end = total.min(buf.len());
        let (header, payload) = buf[..payload_end].split_at_mut(v6::HEADER_LEN);
        let walk = walk_extensions(first_next, payload, payload_declared);
        // The pseudo-header holds the final destination: the last address of a routing header
        // with segments left (RFC 8200 §8.1), else the destination field.
        let old_src = sum(&header[v6::SRC..v6::DST]);
        let old_dst = sum(&header[v6::DST..]);
        self.map_v6(header, v6::SRC);
        self.map_v6(header, v6::DST);
        let new_dst = sum(&header[v6::DST..]);
        let (old_final, new_final) = self.routing_headers(first_next, payload).unwrap_or((old_dst, new_dst));
        let new_src = sum(&header[v6::SRC..v6::DST]);
        let pseudo =
            Pseudo { v6: true, old: checksum::add(old_src, old_final), new: checksum::add(new_src, new_final) };
        if walk.end != ExtEnd::Done {
            self.stats.headers_unreadable += 1;
            return FrameKind::Ip;
        }
        if walk.fragment == Fragment::Later {
            return FrameKind::Ip;
        }
        let upper_declared = payload_declared.saturating_sub(walk.offset);
        let segment = Segment {
            protocol: walk.protocol,
            declared: upper_declared,
            pseudo,
            whole: walk.fragment == Fragment::No && !quoted && payload_end == total,
            quoted,
            depth,
        };
        self.transport(sub(payload, walk.offset), segment);
        FrameKind::Ip
    }

    /// An IP header cut inside its fixed part: what is there of the addresses is still mapped.
    fn cut_fixed_header(&mut self, buf: &mut [u8], is_v6: bool) -> FrameKind {
        match buf.first().map(|b| b >> 4) {
            Some(6) if is_v6 => {
                self.map_v6(buf, v6::SRC);
                self.map_v6(buf, v6::DST);
            }
            Some(4) if !is_v6 => {
                self.map_v4(buf, v4::SRC);
                self.map_v4(buf, v4::DST);
            }
            _ => {}
        }
        self.stats.headers_unreadable += 1;
        FrameKind::Ip
    }

    /// Maps the addresses of the routing headers in the extension chain. With a routing header
    /// that has segments left, returns the sums of the final destination before and after.
    fn routing_headers(&mut self, first_next: u8, payload: &mut [u8]) -> Option<(u16, u16)> {
        let (mut next, mut at) = (first_next, 0usize);
        let mut final_dst = None;
        for _ in 0..ipv6::MAX_EXT_HEADERS {
            if !is_extension(next) {
                break;
            }
            let rest = sub(payload, at);
            let Ok(ext) = ExtHeader::new_checked(next, rest) else { break };
            let len = ext.header_len();
            let following = ext.next_header();
            if next == next_header::ROUTING {
                let end = len.min(rest.len());
                let found = self.routing_header(&mut rest[..end]);
                final_dst = final_dst.or(found);
            }
            if next == next_header::FRAGMENT {
                // Later headers belong to the reassembled packet (or to a later fragment).
                break;
            }
            next = following;
            at += len;
        }
        final_dst
    }

    /// One routing header: types 0 (RFC 2460, deprecated), 2 (Mobile IPv6 home address) and 4
    /// (segment routing). Returns the final destination's sums when segments are left.
    fn routing_header(&mut self, rh: &mut [u8]) -> Option<(u16, u16)> {
        let (Some(&kind), Some(&left)) = (rh.get(v6::RH_TYPE), rh.get(v6::RH_SEGMENTS_LEFT)) else {
            return None;
        };
        let room = rh.len().saturating_sub(v6::RH_ADDRESSES) / 16;
        let (count, final_index) = match kind {
            0 => (room, room.checked_sub(1)),
            2 => (room.min(1), Some(0)),
            4 => {
                let entries = usize::from(*rh.get(v6::SRH_LAST_ENTRY)?) + 1;
                (entries.min(room), Some(0))
            }
            _ => return None,
        };
        self.stats.routing_headers += 1;
        let final_at = final_index.filter(|&i| left > 0 && i < count).map(|i| v6::RH_ADDRESSES + 16 * i);
        let old = final_at.map(|at| sum(&rh[at..at + 16]));
        for i in 0..count {
            self.map_v6(rh, v6::RH_ADDRESSES + 16 * i);
        }
        Some((old?, sum(&rh[final_at?..final_at? + 16])))
    }
}
