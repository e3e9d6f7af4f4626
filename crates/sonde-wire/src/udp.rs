//! UDP header view (RFC 768).

use crate::bytes::be16;
use crate::{Transport, UdpSummary, WireError};

/// IP protocol number.
pub const PROTOCOL: u8 = 17;

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
    pub const HEADER_LEN: usize = 8;
}

/// A borrowed UDP header.
#[derive(Debug, Clone, Copy)]
pub struct UdpHeader<'a> {
    buf: &'a [u8],
}

impl<'a> UdpHeader<'a> {
    pub const LEN: usize = field::HEADER_LEN;
    // Where fields are, for code that rewrites them in place (sonde-rewrite).
    pub const SRC_PORT_OFFSET: usize = field::SRC_PORT;
    pub const DST_PORT_OFFSET: usize = field::DST_PORT;
    pub const LENGTH_OFFSET: usize = field::LENGTH;
    pub const CHECKSUM_OFFSET: usize = field::CHECKSUM;

    pub fn new_unchecked(buf: &'a [u8]) -> Self {
        UdpHeader { buf }
    }

    pub fn new_checked(buf: &'a [u8]) -> Result<Self, WireError> {
        if buf.len() < field::HEADER_LEN {
            return Err(WireError::Truncated);
        }
        Ok(Self::new_unchecked(buf))
    }

    pub fn src_port(&self) -> u16 {
        be16(self.buf, field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        be16(self.buf, field::DST_PORT)
    }

    /// Header plus payload length; 0 for IPv6 jumbograms (RFC 2675) and GSO captures.
    pub fn length(&self) -> u16 {
        be16(self.buf, field::LENGTH)
    }

    pub fn checksum(&self) -> u16 {
        be16(self.buf, field::CHECKSUM)
    }
}

/// What [`summarize`] found: the transport summary, the payload's declared length and why the
/// header was not read cleanly, if it was not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct UdpResult {
    pub(crate) transport: Transport,
    /// Declared payload length (0 when the header was not read).
    pub(crate) payload_declared: usize,
    pub(crate) error: Option<WireError>,
}

/// Summarises a UDP datagram from its captured bytes and its declared length (IP payload
/// length). A UDP length of 0 means "as long as the IP payload"; a UDP length below 8 or above
/// the IP payload is malformed (the payload is then bounded by the IP payload).
pub(crate) fn summarize(bytes: &[u8], declared: usize) -> UdpResult {
    let Ok(h) = UdpHeader::new_checked(bytes) else {
        let err = if declared < field::HEADER_LEN { WireError::Malformed } else { WireError::Truncated };
        return UdpResult {
            transport: Transport::Truncated { protocol: PROTOCOL },
            payload_declared: 0,
            error: Some(err),
        };
    };
    let ip_payload = declared.saturating_sub(field::HEADER_LEN);
    let (payload, error) = match usize::from(h.length()) {
        0 => (ip_payload, None),
        n if n < field::HEADER_LEN => (0, Some(WireError::Malformed)),
        n if n > declared => (ip_payload, Some(WireError::Malformed)),
        n => (n - field::HEADER_LEN, None),
    };
    let error = if declared < field::HEADER_LEN { Some(WireError::Malformed) } else { error };
    UdpResult {
        transport: Transport::Udp(UdpSummary {
            src_port: h.src_port(),
            dst_port: h.dst_port(),
            payload_len: u32::try_from(payload).unwrap_or(u32::MAX),
        }),
        payload_declared: payload,
        error,
    }
}

#[cfg(test)]
pub(crate) mod build {
    pub(crate) fn header(out: &mut [u8], sport: u16, dport: u16, payload_len: u16) {
        out[0..2].copy_from_slice(&sport.to_be_bytes());
        out[2..4].copy_from_slice(&dport.to_be_bytes());
        out[4..6].copy_from_slice(&(payload_len + 8).to_be_bytes());
        out[6..8].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DNS: [u8; 12] = [0xd4, 0x31, 0x00, 0x35, 0x00, 0x0c, 0xbe, 0xef, 1, 2, 3, 4];

    fn udp(t: Transport) -> UdpSummary {
        match t {
            Transport::Udp(u) => u,
            t => panic!("{t:?}"),
        }
    }

    #[test]
    fn fields() {
        let h = UdpHeader::new_checked(&DNS).unwrap();
        assert_eq!((h.src_port(), h.dst_port(), h.length(), h.checksum()), (54321, 53, 12, 0xbeef));
        let r = summarize(&DNS, 12);
        assert_eq!(r.error, None);
        assert_eq!(udp(r.transport), UdpSummary { src_port: 54321, dst_port: 53, payload_len: 4 });
        assert_eq!(r.payload_declared, 4);
    }

    #[test]
    fn cuts() {
        for cut in 0..8 {
            assert_eq!(UdpHeader::new_checked(&DNS[..cut]).unwrap_err(), WireError::Truncated);
            let r = summarize(&DNS[..cut], 12);
            assert_eq!(r.transport, Transport::Truncated { protocol: 17 });
            assert_eq!(r.error, Some(WireError::Truncated));
        }
        // Payload cut: not an error, declared length kept.
        let r = summarize(&DNS[..8], 12);
        assert_eq!((udp(r.transport).payload_len, r.error), (4, None));
    }

    #[test]
    fn lengths() {
        // IP payload longer than UDP length (padding): UDP length wins.
        assert_eq!(udp(summarize(&DNS, 20).transport).payload_len, 4);
        // UDP length above the IP payload: bounded, malformed.
        let r = summarize(&DNS, 10);
        assert_eq!((udp(r.transport).payload_len, r.error), (2, Some(WireError::Malformed)));
        // Zero length: jumbogram / GSO, use the IP payload.
        let mut b = DNS;
        b[4..6].fill(0);
        assert_eq!(summarize(&b, 9000).payload_declared, 8992);
        // Length below the header size.
        b[5] = 5;
        let r = summarize(&b, 12);
        assert_eq!((udp(r.transport).payload_len, r.error), (0, Some(WireError::Malformed)));
        // Declared IP payload below the header size.
        assert_eq!(summarize(&DNS[..6], 6).error, Some(WireError::Malformed));
    }

    #[test]
    fn build_then_parse() {
        let mut b = [0u8; 8];
        build::header(&mut b, 4789, 4789, 50);
        let h = UdpHeader::new_checked(&b).unwrap();
        assert_eq!((h.src_port(), h.dst_port(), h.length()), (4789, 4789, 58));
    }
}
