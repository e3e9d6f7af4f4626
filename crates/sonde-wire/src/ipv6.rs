//! IPv6 header view (RFC 8200) and the extension-header walk.

use crate::bytes::{array, be16, be32, tail, u8_at};
use crate::{Fragment, WireError};
use std::net::Ipv6Addr;

mod field {
    pub const VER_TC_FLOW: usize = 0;
    pub const PAYLOAD_LEN: usize = 4;
    pub const NEXT_HEADER: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: usize = 8;
    pub const DST: usize = 24;
    pub const HEADER_LEN: usize = 40;

    // Extension headers.
    pub const EXT_NEXT: usize = 0;
    pub const EXT_LEN: usize = 1;
    pub const FRAG_OFFSET_FLAGS: usize = 2;
    pub const FRAG_IDENT: usize = 4;
    pub const FRAG_LEN: usize = 8;
}

/// Extension header / protocol numbers the walk knows.
pub mod next_header {
    pub const HOP_BY_HOP: u8 = 0;
    pub const ROUTING: u8 = 43;
    pub const FRAGMENT: u8 = 44;
    pub const ESP: u8 = 50;
    pub const AH: u8 = 51;
    pub const NO_NEXT: u8 = 59;
    pub const DEST_OPTS: u8 = 60;
    pub const MOBILITY: u8 = 135;
    pub const HIP: u8 = 139;
    pub const SHIM6: u8 = 140;
}

/// At most this many extension headers are walked.
pub const MAX_EXT_HEADERS: usize = 16;

/// A borrowed IPv6 fixed header.
#[derive(Debug, Clone, Copy)]
pub struct Ipv6Header<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv6Header<'a> {
    pub const LEN: usize = field::HEADER_LEN;
    // Where fields are, for code that rewrites them in place (sonde-rewrite).
    pub const SRC_OFFSET: usize = field::SRC;
    pub const DST_OFFSET: usize = field::DST;

    pub fn new_unchecked(buf: &'a [u8]) -> Self {
        Ipv6Header { buf }
    }

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self::new_unchecked(buf))
    }

    pub fn version(&self) -> u8 {
        u8_at(self.buf, field::VER_TC_FLOW) >> 4
    }

    pub fn traffic_class(&self) -> u8 {
        (be16(self.buf, field::VER_TC_FLOW) >> 4) as u8
    }

    pub fn flow_label(&self) -> u32 {
        be32(self.buf, field::VER_TC_FLOW) & 0x000f_ffff
    }

    pub fn payload_len(&self) -> u16 {
        be16(self.buf, field::PAYLOAD_LEN)
    }

    pub fn next_header(&self) -> u8 {
        u8_at(self.buf, field::NEXT_HEADER)
    }

    pub fn hop_limit(&self) -> u8 {
        u8_at(self.buf, field::HOP_LIMIT)
    }

    pub fn src(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.buf, field::SRC))
    }

    pub fn dst(&self) -> Ipv6Addr {
        Ipv6Addr::from(array::<16>(self.buf, field::DST))
    }

    pub fn payload(&self) -> &'a [u8] {
        tail(self.buf, field::HEADER_LEN)
    }
}

/// A generic extension header (hop-by-hop, routing, destination options, mobility, AH, …).
#[derive(Debug, Clone, Copy)]
pub struct ExtHeader<'a> {
    buf: &'a [u8],
    kind: u8,
}

impl<'a> ExtHeader<'a> {
    /// Checks the two bytes (next header, length) every extension header starts with.
    pub fn new_checked(kind: u8, buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < 2 {
            return Err(WireError::Truncated);
        }
        Ok(ExtHeader { buf, kind })
    }

    pub fn next_header(&self) -> u8 {
        u8_at(self.buf, field::EXT_NEXT)
    }

    /// The whole header's length in bytes: AH counts 4-byte units minus 2, the fragment header
    /// is fixed at 8, the others count 8-byte units minus 1.
    pub fn header_len(&self) -> usize {
        let n = usize::from(u8_at(self.buf, field::EXT_LEN));
        match self.kind {
            next_header::AH => (n + 2) * 4,
            next_header::FRAGMENT => field::FRAG_LEN,
            _ => (n + 1) * 8,
        }
    }
}

/// The IPv6 fragment header.
#[derive(Debug, Clone, Copy)]
pub struct FragmentHeader<'a> {
    buf: &'a [u8],
}

impl<'a> FragmentHeader<'a> {
    pub const LEN: usize = field::FRAG_LEN;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::FRAG_LEN {
            return Err(WireError::Truncated);
        }
        Ok(FragmentHeader { buf })
    }

    pub fn next_header(&self) -> u8 {
        u8_at(self.buf, field::EXT_NEXT)
    }

    /// Fragment offset in bytes.
    pub fn offset(&self) -> u32 {
        u32::from(be16(self.buf, field::FRAG_OFFSET_FLAGS) >> 3) * 8
    }

    pub fn more_fragments(&self) -> bool {
        be16(self.buf, field::FRAG_OFFSET_FLAGS) & 1 != 0
    }

    pub fn ident(&self) -> u32 {
        be32(self.buf, field::FRAG_IDENT)
    }
}

/// Whether the walk treats `next` as an extension header (and steps over it).
#[inline]
pub fn is_extension(next: u8) -> bool {
    matches!(
        next,
        next_header::HOP_BY_HOP
            | next_header::ROUTING
            | next_header::DEST_OPTS
            | next_header::MOBILITY
            | next_header::HIP
            | next_header::SHIM6
            | next_header::AH
            | next_header::FRAGMENT
    )
}

/// How an extension-header walk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtEnd {
    /// `protocol` is the upper layer (or ESP / no-next / a later fragment: nothing to parse).
    Done,
    /// The captured bytes ended inside an extension header.
    Cut,
    /// An extension header is longer than the declared payload, or the chain is too long.
    Malformed,
}

/// The result of walking the extension headers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtWalk {
    /// The last next-header value met: the upper-layer protocol when `end` is `Done`.
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IPv6 payload.
    pub offset: usize,
    pub fragment: Fragment,
    /// The fragment header's identification, 0 without one.
    pub ident: u32,
    pub end: ExtEnd,
}

/// Walks the extension headers starting with `next` over `payload` (captured bytes of the IPv6
/// payload), of which `declared` bytes exist according to the payload length.
pub fn walk_extensions(next: u8, payload: &[u8], declared: usize) -> ExtWalk {
    let mut w = ExtWalk { protocol: next, offset: 0, fragment: Fragment::No, ident: 0, end: ExtEnd::Done };
    for _ in 0..MAX_EXT_HEADERS {
        if !is_extension(w.protocol) {
            return w;
        }
        let rest = tail(payload, w.offset);
        let Ok(ext) = ExtHeader::new_checked(w.protocol, rest) else {
            w.end = if w.offset + 2 > declared { ExtEnd::Malformed } else { ExtEnd::Cut };
            return w;
        };
        let len = ext.header_len();
        if w.offset + len > declared {
            w.end = ExtEnd::Malformed;
            return w;
        }
        if len > rest.len() {
            w.end = ExtEnd::Cut;
            return w;
        }
        if w.protocol == next_header::FRAGMENT {
            let Ok(frag) = FragmentHeader::new_checked(rest) else {
                w.end = ExtEnd::Cut;
                return w;
            };
            w.ident = frag.ident();
            if frag.offset() > 0 {
                w.fragment = Fragment::Later;
                w.protocol = frag.next_header();
                w.offset += len;
                return w;
            }
            if frag.more_fragments() {
                w.fragment = Fragment::First;
            }
        }
        w.protocol = ext.next_header();
        w.offset += len;
    }
    w.end = ExtEnd::Malformed;
    w
}

#[cfg(test)]
pub(crate) mod build {
    /// Writes a 40-byte IPv6 header into `out`.
    pub(crate) fn header(out: &mut [u8], payload_len: u16, next: u8, src_last: u8, dst_last: u8) {
        out[..40].fill(0);
        out[0] = 0x60;
        out[4..6].copy_from_slice(&payload_len.to_be_bytes());
        out[6] = next;
        out[7] = 64;
        out[8..10].copy_from_slice(&[0x20, 0x01]);
        out[23] = src_last;
        out[24..26].copy_from_slice(&[0x20, 0x01]);
        out[39] = dst_last;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_header_fields() {
        let mut b = [0u8; 40];
        b[..8].copy_from_slice(&[0x6b, 0x8a, 0xbc, 0xde, 0x05, 0xdc, 0x11, 0x39]);
        b[8] = 0xfe;
        b[9] = 0x80;
        b[23] = 1;
        b[24] = 0xff;
        b[25] = 0x02;
        b[39] = 0xfb;
        let h = Ipv6Header::new_checked(&b).unwrap();
        assert_eq!(h.version(), 6);
        assert_eq!(h.traffic_class(), 0xb8);
        assert_eq!(h.flow_label(), 0xabcde);
        assert_eq!(h.payload_len(), 1500);
        assert_eq!(h.next_header(), 17);
        assert_eq!(h.hop_limit(), 57);
        assert_eq!(h.src(), "fe80::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(h.dst(), "ff02::fb".parse::<Ipv6Addr>().unwrap());
        assert!(h.payload().is_empty());
        for cut in 0..40 {
            assert_eq!(Ipv6Header::new_checked(&b[..cut]).unwrap_err(), WireError::Truncated);
        }
    }

    #[test]
    fn build_then_parse() {
        let mut b = [0u8; 40];
        build::header(&mut b, 20, 6, 1, 2);
        let h = Ipv6Header::new_checked(&b).unwrap();
        assert_eq!((h.version(), h.payload_len(), h.next_header(), h.hop_limit()), (6, 20, 6, 64));
        assert_eq!(h.src(), "2001::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(h.dst(), "2001::2".parse::<Ipv6Addr>().unwrap());
    }

    // Hop-by-hop (8 bytes, PadN) → routing (24 bytes) → fragment (first) → dest opts → TCP.
    const CHAIN: [u8; 48] = [
        43, 0, 1, 4, 0, 0, 0, 0, // hop-by-hop: next routing, len 0
        44, 2, 0, 1, 0, 0, 0, 0, // routing: next fragment, len 2 (24 bytes)
        0, 0, 0, 0, 0, 0, 0, 0, //
        0, 0, 0, 0, 0, 0, 0, 0, //
        60, 0, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef, // fragment: offset 0, M, ident
        6, 0, 1, 4, 0, 0, 0, 0, // dest opts: next TCP
    ];

    #[test]
    fn walk_chain() {
        let w = walk_extensions(0, &CHAIN, 100);
        assert_eq!(w.end, ExtEnd::Done);
        assert_eq!(w.protocol, 6);
        assert_eq!(w.offset, 48);
        assert_eq!(w.fragment, Fragment::First);
        assert_eq!(w.ident, 0xdeadbeef);
        let f = FragmentHeader::new_checked(&CHAIN[32..]).unwrap();
        assert_eq!((f.next_header(), f.offset(), f.more_fragments()), (60, 0, true));
    }

    #[test]
    fn walk_cut_and_malformed() {
        for cut in 0..48 {
            let w = walk_extensions(0, &CHAIN[..cut], 100);
            assert_eq!(w.end, ExtEnd::Cut, "cut at {cut}");
        }
        // The declared payload ends inside the routing header.
        let w = walk_extensions(0, &CHAIN, 20);
        assert_eq!(w.end, ExtEnd::Malformed);
        assert_eq!(w.protocol, 43);
        assert_eq!(w.offset, 8);
    }

    #[test]
    fn later_fragment_and_stops() {
        let frag = [17, 0, 0x05, 0x40, 0, 0, 0, 9];
        let w = walk_extensions(44, &frag, 8);
        assert_eq!(w.end, ExtEnd::Done);
        assert_eq!((w.protocol, w.fragment, w.ident, w.offset), (17, Fragment::Later, 9, 8));
        let fh = FragmentHeader::new_checked(&frag).unwrap();
        assert_eq!(fh.offset(), 0x0540 / 8 * 8);
        // An atomic fragment (offset 0, no M) is not a fragment.
        let frag = [6, 0, 0, 0, 0, 0, 0, 9];
        let w = walk_extensions(44, &frag, 8);
        assert_eq!((w.protocol, w.fragment, w.ident), (6, Fragment::No, 9));
        // ESP and no-next stop the walk right away.
        assert_eq!(walk_extensions(50, &[], 0).protocol, 50);
        assert_eq!(walk_extensions(59, &[], 0).end, ExtEnd::Done);
    }

    #[test]
    fn ah_length_unit() {
        // AH with payload len 4 → (4 + 2) * 4 = 24 bytes, then UDP.
        let mut ah = [0u8; 24];
        ah[0] = 17;
        ah[1] = 4;
        let w = walk_extensions(51, &ah, 24);
        assert_eq!((w.end, w.protocol, w.offset), (ExtEnd::Done, 17, 24));
        assert_eq!(ExtHeader::new_checked(51, &ah).unwrap().header_len(), 24);
    }

    #[test]
    fn endless_chain_is_malformed() {
        let chain = [60u8, 0, 0, 0, 0, 0, 0, 0].repeat(20);
        let w = walk_extensions(60, &chain, chain.len());
        assert_eq!(w.end, ExtEnd::Malformed);
    }
}
