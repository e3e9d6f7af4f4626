//! Classic libpcap files: both byte orders, µs and ns resolution, and the modified
//! (Kuznetsov) variant whose record headers carry 8 more bytes.
//!
//! Reference: draft-ietf-opsawg-pcap §4 (file header), §5 (packet record); libpcap sf-pcap.c
//! and Wireshark libpcap.c for the version quirks.

use crate::endian::Endian;
use crate::error::{corrupt, truncated};
use crate::stream::{Input, MAX_RECORD};
use crate::timestamp::secs_ns;
use crate::{CaptureError, Frame, PacketSource};

const FILE_HDR: usize = 24;
const REC_HDR: usize = 16;
/// Kuznetsov's patched libpcap: ifindex (4), protocol (2), pkt_type (1), pad (1) after the header.
const REC_HDR_MODIFIED: usize = 24;

/// LT_LINKTYPE in libpcap's pcap-common.h: the upper 6 bits carry the FCS length and its flag.
const LINKTYPE_MASK: u32 = 0x03FF_FFFF;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Variant {
    Usec,
    Nsec,
    Modified,
}

/// Recognises the four-byte magic of a pcap file: its byte order and variant.
pub(crate) fn magic(b: &[u8]) -> Option<(Endian, Variant)> {
    let m: [u8; 4] = b.get(..4)?.try_into().ok()?;
    let (e, v) = match u32::from_le_bytes(m) {
        0xa1b2_c3d4 => (Endian::Little, Variant::Usec),
        0xd4c3_b2a1 => (Endian::Big, Variant::Usec),
        0xa1b2_3c4d => (Endian::Little, Variant::Nsec),
        0x4d3c_b2a1 => (Endian::Big, Variant::Nsec),
        0xa1b2_cd34 => (Endian::Little, Variant::Modified),
        0x34cd_b2a1 => (Endian::Big, Variant::Modified),
        _ => return None,
    };
    Some((e, v))
}

pub(crate) struct PcapReader<I> {
    input: I,
    endian: Endian,
    nsec: bool,
    rec_hdr: usize,
    link_type: u32,
    /// Versions before 2.3 may store incl_len and orig_len the other way round.
    maybe_swapped: bool,
    /// Bytes of the frame handed out last, consumed on the next call (the frame borrows them).
    pending: usize,
    done: bool,
    format: &'static str,
}

impl<I: Input> PcapReader<I> {
    pub(crate) fn new(mut input: I) -> Result<Self, CaptureError> {
        let at = input.position();
        let h = input.fill(FILE_HDR)?;
        let (endian, variant) = match magic(h) {
            Some(m) => m,
            None => return Err(corrupt(at, "bad pcap magic")),
        };
        if h.len() < FILE_HDR {
            return Err(truncated(at));
        }
        let major = endian.u16(h, 4);
        let minor = endian.u16(h, 6);
        let link_type = endian.u32(h, 20) & LINKTYPE_MASK;
        // pcap draft §4: any major other than 2 is not this format, but libpcap's own test
        // files (1.4, 2.5) keep the 2.4 record layout, and reading them does no harm.
        let maybe_swapped = major < 2 || (major == 2 && minor <= 3);
        input.consume(FILE_HDR);
        let format = match (endian, variant) {
            (Endian::Little, Variant::Usec) => "pcap-le-usec",
            (Endian::Big, Variant::Usec) => "pcap-be-usec",
            (Endian::Little, Variant::Nsec) => "pcap-le-nsec",
            (Endian::Big, Variant::Nsec) => "pcap-be-nsec",
            (Endian::Little, Variant::Modified) => "pcap-le-modified",
            (Endian::Big, Variant::Modified) => "pcap-be-modified",
        };
        Ok(PcapReader {
            input,
            endian,
            nsec: variant == Variant::Nsec,
            rec_hdr: if variant == Variant::Modified { REC_HDR_MODIFIED } else { REC_HDR },
            link_type,
            maybe_swapped,
            pending: 0,
            done: false,
            format,
        })
    }
}

impl<I: Input> PacketSource for PcapReader<I> {
    #[inline]
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        self.input.consume(self.pending);
        self.pending = 0;
        let at = self.input.position();
        let rh = self.rec_hdr;
        let h = match self.input.fill_header(rh, at) {
            Ok(Some(h)) => h,
            end => {
                self.done = true;
                return end.map(|_| None);
            }
        };
        // The fields both layouts share: a fixed length, so that the reads need no further check.
        let h = &h[..REC_HDR];
        let e = self.endian;
        let secs = u64::from(e.u32(h, 0));
        let frac = u64::from(e.u32(h, 4));
        let mut caplen = e.u32(h, 8);
        let mut wire_len = e.u32(h, 12);
        // Wireshark libpcap.c: before 2.3 the two lengths may be swapped; caplen > len gives it away.
        if self.maybe_swapped && caplen > wire_len {
            std::mem::swap(&mut caplen, &mut wire_len);
        }
        let ts_ns = secs_ns(secs, if self.nsec { frac } else { frac.saturating_mul(1000) });
        let caplen = caplen as usize;
        if caplen > MAX_RECORD {
            self.done = true;
            return Err(corrupt(at, "pcap record length absurdly large"));
        }
        let total = rh + caplen;
        let b = self.input.fill_exact(total, at).inspect_err(|_| self.done = true)?;
        self.pending = total;
        Ok(Some(Frame { ts_ns, wire_len, link_type: self.link_type, data: &b[rh..total] }))
    }

    fn position(&self) -> u64 {
        // The frame handed out last counts as consumed.
        self.input.position() + self.pending as u64
    }

    fn size_hint(&self) -> Option<u64> {
        self.input.size_hint()
    }

    fn format(&self) -> &str {
        self.format
    }

    fn compression(&self) -> Option<&str> {
        self.input.compression()
    }
}
