//! IPv4 header view (RFC 791).

use crate::bytes::{array, be16, clamp, u8_at};
use crate::WireError;
use std::net::Ipv4Addr;

mod field {
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const TOTAL_LEN: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLAGS_FRAG: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: usize = 12;
    pub const DST: usize = 16;
    pub const HEADER_LEN: usize = 20;
}

const FLAG_DF: u16 = 0x4000;
pub(crate) const FLAG_MF: u16 = 0x2000;
pub(crate) const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// A borrowed IPv4 header. `new_checked` guarantees the fixed 20 bytes; options may be cut.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Header<'a> {
    buf: &'a [u8],
}

impl<'a> Ipv4Header<'a> {
    /// Length of the fixed part.
    pub const MIN_LEN: usize = field::HEADER_LEN;
    // Where fields are, for code that rewrites them in place (sonde-rewrite).
    pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;
    pub const SRC_OFFSET: usize = field::SRC;
    /// The fixed part's length: the least IHL × 4.
    pub const LEN_MIN: usize = field::HEADER_LEN;
    pub const DST_OFFSET: usize = field::DST;

    pub fn new_unchecked(buf: &'a [u8]) -> Self {
        Ipv4Header { buf }
    }

    /// Checks that the fixed part is present. Field values are not judged here.
    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self::new_unchecked(buf))
    }

    pub fn version(&self) -> u8 {
        u8_at(self.buf, field::VER_IHL) >> 4
    }

    /// Header length in bytes (IHL × 4).
    pub fn header_len(&self) -> usize {
        usize::from(u8_at(self.buf, field::VER_IHL) & 0x0f) * 4
    }

    pub fn dscp(&self) -> u8 {
        u8_at(self.buf, field::DSCP_ECN) >> 2
    }

    pub fn ecn(&self) -> u8 {
        u8_at(self.buf, field::DSCP_ECN) & 0x3
    }

    pub fn total_len(&self) -> u16 {
        be16(self.buf, field::TOTAL_LEN)
    }

    pub fn ident(&self) -> u16 {
        be16(self.buf, field::IDENT)
    }

    pub fn dont_fragment(&self) -> bool {
        be16(self.buf, field::FLAGS_FRAG) & FLAG_DF != 0
    }

    pub fn more_fragments(&self) -> bool {
        be16(self.buf, field::FLAGS_FRAG) & FLAG_MF != 0
    }

    /// Fragment offset in bytes.
    pub fn frag_offset(&self) -> u32 {
        u32::from(be16(self.buf, field::FLAGS_FRAG) & FRAG_OFFSET_MASK) * 8
    }

    pub fn ttl(&self) -> u8 {
        u8_at(self.buf, field::TTL)
    }

    pub fn protocol(&self) -> u8 {
        u8_at(self.buf, field::PROTOCOL)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }

    pub fn src(&self) -> Ipv4Addr {
        Ipv4Addr::from(array::<4>(self.buf, field::SRC))
    }

    pub fn dst(&self) -> Ipv4Addr {
        Ipv4Addr::from(array::<4>(self.buf, field::DST))
    }

    /// The options as captured (possibly cut short).
    pub fn options(&self) -> &'a [u8] {
        clamp(self.buf, field::HEADER_LEN, self.header_len())
    }
}

#[cfg(test)]
pub(crate) mod build {
    /// Writes a 20-byte IPv4 header (no options) into `out`, checksum left 0.
    pub(crate) fn header(out: &mut [u8], total_len: u16, proto: u8, src: [u8; 4], dst: [u8; 4]) {
        out[0] = 0x45;
        out[1] = 0;
        out[2..4].copy_from_slice(&total_len.to_be_bytes());
        out[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        out[6..8].copy_from_slice(&0x4000u16.to_be_bytes());
        out[8] = 64;
        out[9] = proto;
        out[10..12].copy_from_slice(&[0, 0]);
        out[12..16].copy_from_slice(&src);
        out[16..20].copy_from_slice(&dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HDR: [u8; 24] = [
        0x46, 0xb8, 0x00, 0x30, // v4 IHL 6, DSCP 46 ECN 0, total 48
        0xab, 0xcd, 0x20, 0x03, // ident, MF + offset 3 (24 bytes)
        0x3f, 0x06, 0x12, 0x34, // TTL 63, TCP, checksum
        0x0a, 0x00, 0x00, 0x01, // 10.0.0.1
        0xc0, 0xa8, 0x01, 0x02, // 192.168.1.2
        0x94, 0x04, 0x00, 0x00, // router alert option
    ];

    #[test]
    fn fields() {
        let h = Ipv4Header::new_checked(&HDR).unwrap();
        assert_eq!(h.version(), 4);
        assert_eq!(h.header_len(), 24);
        assert_eq!(h.dscp(), 46);
        assert_eq!(h.ecn(), 0);
        assert_eq!(h.total_len(), 48);
        assert_eq!(h.ident(), 0xabcd);
        assert!(!h.dont_fragment());
        assert!(h.more_fragments());
        assert_eq!(h.frag_offset(), 24);
        assert_eq!(h.ttl(), 63);
        assert_eq!(h.protocol(), 6);
        assert_eq!(h.checksum(), 0x1234);
        assert_eq!(h.src(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(h.dst(), Ipv4Addr::new(192, 168, 1, 2));
        assert_eq!(h.options(), &[0x94, 0x04, 0x00, 0x00]);
    }

    #[test]
    fn truncation() {
        for cut in 0..20 {
            assert_eq!(Ipv4Header::new_checked(&HDR[..cut]).unwrap_err(), WireError::Truncated);
        }
        // Options cut: the fixed part still reads, options are what was captured.
        let h = Ipv4Header::new_checked(&HDR[..22]).unwrap();
        assert_eq!(h.options(), &[0x94, 0x04]);
        assert_eq!(h.dst(), Ipv4Addr::new(192, 168, 1, 2));
    }

    #[test]
    fn build_then_parse() {
        let mut b = [0u8; 20];
        build::header(&mut b, 40, 17, [1, 2, 3, 4], [5, 6, 7, 8]);
        let h = Ipv4Header::new_checked(&b).unwrap();
        assert_eq!((h.version(), h.header_len(), h.total_len()), (4, 20, 40));
        assert_eq!((h.protocol(), h.ttl(), h.ident()), (17, 64, 0x1234));
        assert!(h.dont_fragment());
        assert!(!h.more_fragments());
        assert_eq!(h.frag_offset(), 0);
        assert_eq!(h.src(), Ipv4Addr::new(1, 2, 3, 4));
        assert_eq!(h.options(), &[] as &[u8]);
    }

    #[test]
    fn silly_ihl_never_panics() {
        let mut b = HDR;
        b[0] = 0x4f; // 60-byte header over 24 bytes
        let h = Ipv4Header::new_checked(&b).unwrap();
        assert_eq!(h.header_len(), 60);
        assert_eq!(h.options().len(), 4);
        b[0] = 0x41; // IHL 1
        let h = Ipv4Header::new_checked(&b).unwrap();
        assert_eq!(h.options(), &[] as &[u8]);
    }
}
