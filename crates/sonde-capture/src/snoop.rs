//! Sun snoop files (RFC 1761): big-endian, 16-byte file header, 24-byte record headers, records
//! padded to 4 bytes. Only the common datalinks are mapped to LINKTYPE_ values.

use crate::endian::Endian;
use crate::error::{corrupt, truncated, unsupported};
use crate::stream::{Input, MAX_RECORD};
use crate::timestamp::secs_ns;
use crate::{CaptureError, Frame, PacketSource, LINKTYPE_ETHERNET};

pub(crate) const MAGIC: &[u8; 8] = b"snoop\0\0\0";
const FILE_HDR: usize = 16;
const REC_HDR: usize = 24;

pub(crate) struct SnoopReader<I> {
    input: I,
    link_type: u32,
    pending: usize,
    done: bool,
}

impl<I: Input> SnoopReader<I> {
    pub(crate) fn new(mut input: I) -> Result<Self, CaptureError> {
        let at = input.position();
        let h = input.fill(FILE_HDR)?;
        if h.len() < FILE_HDR {
            return Err(truncated(at));
        }
        let version = Endian::Big.u32(h, 8);
        // RFC 1761 §3: version 2 is the one in use.
        if version != 2 {
            return Err(unsupported(at + 8, "snoop version other than 2"));
        }
        // RFC 1761 datalink codes: 4 Ethernet, 8 FDDI; Solaris 0x12 ATM (SunATM framing).
        let link_type = match Endian::Big.u32(h, 12) {
            4 => LINKTYPE_ETHERNET,
            8 => 10,
            0x12 => 123,
            _ => return Err(unsupported(at + 12, "snoop datalink")),
        };
        input.consume(FILE_HDR);
        Ok(SnoopReader { input, link_type, pending: 0, done: false })
    }
}

impl<I: Input> PacketSource for SnoopReader<I> {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        self.input.consume(self.pending);
        self.pending = 0;
        let at = self.input.position();
        let h = match self.input.fill_header(REC_HDR, at) {
            Ok(Some(h)) => h,
            end => {
                self.done = true;
                return end.map(|_| None);
            }
        };
        let be = Endian::Big;
        let wire_len = be.u32(h, 0);
        let caplen = be.u32(h, 4) as usize;
        let rec_len = be.u32(h, 8) as usize;
        let ts_ns = secs_ns(u64::from(be.u32(h, 16)), u64::from(be.u32(h, 20)).saturating_mul(1000));
        // RFC 1761 §4: the record length covers header, data and padding.
        if !(REC_HDR..=MAX_RECORD).contains(&rec_len) || caplen > rec_len.saturating_sub(REC_HDR) {
            self.done = true;
            return Err(corrupt(at, "snoop record lengths inconsistent"));
        }
        let b = self.input.fill_exact(rec_len, at).inspect_err(|_| self.done = true)?;
        self.pending = rec_len;
        Ok(Some(Frame { ts_ns, wire_len, link_type: self.link_type, data: &b[REC_HDR..REC_HDR + caplen] }))
    }

    fn position(&self) -> u64 {
        // The frame handed out last counts as consumed.
        self.input.position() + self.pending as u64
    }

    fn size_hint(&self) -> Option<u64> {
        self.input.size_hint()
    }

    fn format(&self) -> &str {
        "snoop"
    }

    fn compression(&self) -> Option<&str> {
        self.input.compression()
    }
}
