//! sonde-rewrite: rewrites one captured frame's addresses in place and fixes its checksums,
//! for `sonde anon` (anonymised traces other tools can read).
//!
//! Its place: `sonde anon` reads frames (sonde-capture), hands each to [`Rewriter::rewrite`],
//! cuts it to the snaplen and writes it (`sonde_capture::TraceWriter`): [`rewrite_trace`] does
//! all of that for a source and a writer the caller opened. This crate opens nothing.
//! It walks the frame with sonde-wire's walks (link layer, tunnels, IPv6 extension headers) and
//! maps every address through one [`sonde_anon::Anonymizer`]:
//! - IPv4 and IPv6 source and destination, and the addresses of IPv6 routing headers (types 0,
//!   2 and 4);
//! - ARP/RARP sender and target protocol addresses (IPv4);
//! - the IP header quoted by an ICMP or ICMPv6 error (and its quoted checksums);
//! - both headers of IP-in-IP, GRE, VXLAN and GTP-U tunnels.
//!
//! Checksums (IPv4 header, TCP, UDP, ICMP, ICMPv6, GRE): recomputed when everything they cover
//! is in the capture (which also fixes checksums that were wrong, e.g. transmit-offload
//! captures: counted apart), otherwise updated for the change only (RFC 1624), so a snaplen cut
//! or a fragment keeps a checksum exactly as right or wrong as it was. A UDP checksum of 0 ("none",
//! RFC 768) stays 0.
//!
//! Guarantees: the frame keeps its length; only address and checksum bytes change; never
//! panics, whatever the bytes (a property test cuts and scrambles frames). What it cannot read
//! whole it rewrites as far as it can and counts ([`RewriteStats`]): an address cut by the
//! snaplen becomes the first bytes of the mapped address of its captured bytes padded with
//! zeros (under Crypto-PAn, exactly the prefix of the full address's image).
//!
//! ```
//! use sonde_anon::Anonymizer;
//! use sonde_rewrite::{FrameKind, Rewriter};
//! use sonde_wire::LinkType;
//!
//! // Raw IPv4, ICMP echo request from 192.0.2.1 to 198.51.100.2.
//! let mut frame = [
//!     0x45, 0, 0, 28, 0, 1, 0, 0, 64, 1, 0xf6, 0x5f, 192, 0, 2, 1, 198, 51, 100, 2, //
//!     8, 0, 0xf7, 0xfe, 0, 1, 0, 0,
//! ];
//! let mut rewriter = Rewriter::new(Anonymizer::zero());
//! assert_eq!(rewriter.rewrite(LinkType::RAW, &mut frame, 28), FrameKind::Ip);
//! assert_eq!(&frame[12..20], &[0; 8]);
//! assert_eq!(rewriter.stats().ipv4_addresses, 2);
//! ```

#![forbid(unsafe_code)]

mod checksum;
mod frame;
mod ip;
mod trace;
mod transport;

use sonde_anon::Anonymizer;
pub use sonde_wire::LinkType;
pub use trace::{rewrite_trace, RewrittenTrace};

/// What a frame turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// An IP packet (its addresses were rewritten as far as captured).
    Ip,
    /// An ARP or RARP packet.
    Arp,
    /// Another protocol (LLDP, STP, …): left as it is.
    NonIp,
    /// A link type sonde does not decode: left as it is.
    UnsupportedLink,
    /// The link-layer header is cut or malformed: left as it is.
    UnreadableLink,
}

/// What the rewriting did, summed over frames. Plain counters: cheap to copy and add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RewriteStats {
    pub frames: u64,
    pub ipv4_addresses: u64,
    pub ipv6_addresses: u64,
    /// Addresses the capture held only the first bytes of (rewritten as a prefix, see the crate
    /// docs).
    pub partial_addresses: u64,
    /// ARP/RARP packets whose IPv4 addresses were rewritten.
    pub arp_packets: u64,
    /// ICMP/ICMPv6 errors whose quoted IP header was rewritten.
    pub icmp_quotes: u64,
    /// Inner packets of tunnels rewritten (IP-in-IP, GRE, VXLAN, GTP-U).
    pub tunnels: u64,
    /// IPv6 routing headers whose addresses were rewritten.
    pub routing_headers: u64,
    /// Checksums computed afresh over fully captured data.
    pub checksums_recomputed: u64,
    /// Of those, the ones that were wrong before (offload captures, damaged packets).
    pub checksums_fixed: u64,
    /// Checksums updated for the address change only (cut, fragmented or quoted data).
    pub checksums_adjusted: u64,
    /// Checksum fields the capture does not hold (nothing to update).
    pub checksums_not_captured: u64,
    /// Headers cut or malformed: rewritten as far as they could be read, the rest left.
    pub headers_unreadable: u64,
    /// Frames left unchanged: not IP or ARP, by the link walk.
    pub non_ip_frames: u64,
    /// Frames left unchanged: a link type sonde does not decode.
    pub unsupported_link_frames: u64,
    /// Frames left unchanged: the link-layer header is cut or malformed.
    pub unreadable_link_frames: u64,
}

impl std::ops::AddAssign for RewriteStats {
    fn add_assign(&mut self, o: RewriteStats) {
        // Destructured, so that a new counter cannot be forgotten here.
        let RewriteStats {
            frames,
            ipv4_addresses,
            ipv6_addresses,
            partial_addresses,
            arp_packets,
            icmp_quotes,
            tunnels,
            routing_headers,
            checksums_recomputed,
            checksums_fixed,
            checksums_adjusted,
            checksums_not_captured,
            headers_unreadable,
            non_ip_frames,
            unsupported_link_frames,
            unreadable_link_frames,
        } = o;
        self.frames += frames;
        self.ipv4_addresses += ipv4_addresses;
        self.ipv6_addresses += ipv6_addresses;
        self.partial_addresses += partial_addresses;
        self.arp_packets += arp_packets;
        self.icmp_quotes += icmp_quotes;
        self.tunnels += tunnels;
        self.routing_headers += routing_headers;
        self.checksums_recomputed += checksums_recomputed;
        self.checksums_fixed += checksums_fixed;
        self.checksums_adjusted += checksums_adjusted;
        self.checksums_not_captured += checksums_not_captured;
        self.headers_unreadable += headers_unreadable;
        self.non_ip_frames += non_ip_frames;
        self.unsupported_link_frames += unsupported_link_frames;
        self.unreadable_link_frames += unreadable_link_frames;
    }
}

/// Rewrites frames through one anonymizer (which keeps its prefix cache across frames).
#[derive(Debug, Clone)]
pub struct Rewriter {
    anon: Anonymizer,
    stats: RewriteStats,
}

impl Rewriter {
    pub fn new(anon: Anonymizer) -> Self {
        Rewriter { anon, stats: RewriteStats::default() }
    }

    /// Rewrites `frame` (the captured bytes of a frame of type `link`, `wire_len` bytes long on
    /// the wire) in place. Its length never changes.
    pub fn rewrite(&mut self, link: LinkType, frame: &mut [u8], wire_len: u32) -> FrameKind {
        self.stats.frames += 1;
        let declared = usize::try_from(wire_len).unwrap_or(usize::MAX).max(frame.len());
        let kind = frame::rewrite(self, link, frame, declared);
        match kind {
            FrameKind::Ip | FrameKind::Arp => {}
            FrameKind::NonIp => self.stats.non_ip_frames += 1,
            FrameKind::UnsupportedLink => self.stats.unsupported_link_frames += 1,
            FrameKind::UnreadableLink => self.stats.unreadable_link_frames += 1,
        }
        kind
    }

    /// The counters so far.
    pub fn stats(&self) -> RewriteStats {
        self.stats
    }

    pub fn anonymizer(&self) -> &Anonymizer {
        &self.anon
    }

    /// Maps the IPv4 address at `at` in `buf`, or its captured first bytes.
    fn map_v4(&mut self, buf: &mut [u8], at: usize) {
        if let Some(a) = buf.get_mut(at..at + 4) {
            let mapped = self.anon.ipv4([a[0], a[1], a[2], a[3]]);
            a.copy_from_slice(&mapped);
            self.stats.ipv4_addresses += 1;
        } else if let Some(part) = buf.get_mut(at..).filter(|p| !p.is_empty()) {
            let mut full = [0u8; 4];
            full[..part.len()].copy_from_slice(part);
            let mapped = self.anon.ipv4(full);
            let n = part.len();
            part.copy_from_slice(&mapped[..n]);
            self.stats.partial_addresses += 1;
        }
    }

    /// Maps the IPv6 address at `at` in `buf`, or its captured first bytes.
    fn map_v6(&mut self, buf: &mut [u8], at: usize) {
        let mut full = [0u8; 16];
        let Some(part) = buf.get_mut(at..at.saturating_add(16).min(buf.len())).filter(|p| !p.is_empty()) else {
            return;
        };
        let n = part.len();
        full[..n].copy_from_slice(part);
        let mapped = self.anon.ipv6(full);
        part.copy_from_slice(&mapped[..n]);
        if n == 16 {
            self.stats.ipv6_addresses += 1;
        } else {
            self.stats.partial_addresses += 1;
        }
    }
}

#[cfg(test)]
mod tests;
