//! ICMP (RFC 792) and ICMPv6 (RFC 4443) common header view.

use crate::bytes::{be16, u8_at};
use crate::{Transport, WireError};

/// IP protocol number of ICMP.
pub const PROTOCOL_V4: u8 = 1;
/// IPv6 next-header number of ICMPv6.
pub const PROTOCOL_V6: u8 = 58;

mod field {
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: usize = 2;
    pub const HEADER_LEN: usize = 4;
}

/// The type/code/checksum part shared by every ICMP and ICMPv6 message.
#[derive(Debug, Clone, Copy)]
pub struct IcmpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> IcmpHeader<'a> {
    pub const LEN: usize = field::HEADER_LEN;
    // Where fields are, for code that rewrites them in place (sonde-rewrite).
    pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(IcmpHeader { buf })
    }

    pub fn icmp_type(&self) -> u8 {
        u8_at(self.buf, field::TYPE)
    }

    pub fn code(&self) -> u8 {
        u8_at(self.buf, field::CODE)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
}

pub(crate) fn summarize(bytes: &[u8], declared: usize, protocol: u8) -> (Transport, Option<WireError>) {
    match IcmpHeader::new_checked(bytes) {
        Ok(h) => {
            let err = (declared < field::HEADER_LEN).then_some(WireError::Malformed);
            (Transport::Icmp { icmp_type: h.icmp_type(), code: h.code() }, err)
        }
        Err(_) => {
            let err = if declared < field::HEADER_LEN { WireError::Malformed } else { WireError::Truncated };
            (Transport::Truncated { protocol }, Some(err))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_request() {
        let b = [8, 0, 0xf7, 0xff, 0, 1, 0, 1];
        let h = IcmpHeader::new_checked(&b).unwrap();
        assert_eq!((h.icmp_type(), h.code(), h.checksum()), (8, 0, 0xf7ff));
        assert_eq!(summarize(&b, 8, 1), (Transport::Icmp { icmp_type: 8, code: 0 }, None));
    }

    #[test]
    fn cuts() {
        let b = [3, 3, 0, 0];
        for cut in 0..4 {
            assert_eq!(summarize(&b[..cut], 36, 1), (Transport::Truncated { protocol: 1 }, Some(WireError::Truncated)));
        }
        assert_eq!(summarize(&b[..2], 2, 58), (Transport::Truncated { protocol: 58 }, Some(WireError::Malformed)));
    }
}
