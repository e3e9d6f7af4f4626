//! pcapng: sections (each with its own byte order), interfaces with their own link type and
//! time resolution, and the three packet blocks (EPB, SPB, obsolete OPB). Every other block
//! type is skipped by its length.
//!
//! Reference: draft-ietf-opsawg-pcapng (§3.1 block layout, §4.1 SHB, §4.2 IDB, §4.3 EPB,
//! §4.4 SPB, appendix A OPB).
//!
//! A packet block naming an interface that no IDB of the current section described is reported
//! as Corrupt (Wireshark refuses such files too); the frames before it are yielded.

use crate::endian::Endian;
use crate::error::{corrupt, truncated};
use crate::stream::{Input, MAX_RECORD};
use crate::timestamp::add_offset_secs;
use crate::{CaptureError, Frame, PacketSource};

const SHB: u32 = 0x0A0D_0D0A;
const IDB: u32 = 1;
const OPB: u32 = 2;
const SPB: u32 = 3;
const EPB: u32 = 6;
const BYTE_ORDER_MAGIC: u32 = 0x1A2B_3C4D;

/// pcapng §4.2: if_tsresol and if_tsoffset option codes.
const OPT_ENDOFOPT: u16 = 0;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_IF_TSOFFSET: u16 = 14;

/// Converts an interface's timestamp units to nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TsScale {
    /// Units of 10^-k s with k ≤ 9: multiply.
    Mul(u64),
    /// Units of 10^-k s with k > 9: divide.
    Div(u128),
    /// Units of 2^-k s.
    Pow2(u32),
}

impl TsScale {
    /// pcapng §4.2 if_tsresol: MSB clear → 10^-v, set → 2^-(v & 0x7f). Default 10^-6.
    fn from_tsresol(v: u8) -> TsScale {
        let k = u32::from(v & 0x7f);
        if v & 0x80 != 0 {
            TsScale::Pow2(k)
        } else if k <= 9 {
            TsScale::Mul(10u64.pow(9 - k))
        } else {
            // 10^38 is the largest power of ten a u128 holds; beyond that every stamp is 0 s.
            TsScale::Div(10u128.checked_pow(k - 9).unwrap_or(u128::MAX))
        }
    }

    #[inline(always)]
    fn to_ns(self, ts: u64) -> u64 {
        match self {
            TsScale::Mul(m) => ts.saturating_mul(m),
            TsScale::Div(d) => u64::try_from(u128::from(ts) / d).unwrap_or(u64::MAX),
            TsScale::Pow2(k) => {
                let ns = (u128::from(ts) * 1_000_000_000) >> k.min(127);
                u64::try_from(ns).unwrap_or(u64::MAX)
            }
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Iface {
    link_type: u32,
    snaplen: u32,
    scale: TsScale,
    /// if_tsoffset, seconds to add to every timestamp.
    offset_s: i64,
}

impl Iface {
    #[inline(always)]
    fn ts_ns(&self, ts: u64) -> u64 {
        let ns = self.scale.to_ns(ts);
        if self.offset_s == 0 {
            ns
        } else {
            add_offset_secs(ns, self.offset_s)
        }
    }
}

/// Byte order of a section from the byte-order magic that follows the SHB's length.
fn section_endian(b: &[u8]) -> Option<Endian> {
    let m: [u8; 4] = b.get(8..12)?.try_into().ok()?;
    if u32::from_le_bytes(m) == BYTE_ORDER_MAGIC {
        Some(Endian::Little)
    } else if u32::from_be_bytes(m) == BYTE_ORDER_MAGIC {
        Some(Endian::Big)
    } else {
        None
    }
}

/// Parses an IDB body (after the 8-byte block header, before the trailing length).
fn parse_idb(e: Endian, body: &[u8]) -> Option<Iface> {
    if body.len() < 8 {
        return None;
    }
    let mut iface =
        Iface { link_type: u32::from(e.u16(body, 0)), snaplen: e.u32(body, 4), scale: TsScale::Mul(1000), offset_s: 0 };
    // Options (§3.5): code, length, value padded to 32 bits. A malformed option list ends the
    // parse; the interface itself is still usable (Wireshark is as lenient for SHB options).
    let mut off = 8;
    while off + 4 <= body.len() {
        let code = e.u16(body, off);
        let len = usize::from(e.u16(body, off + 2));
        let val = off + 4;
        if code == OPT_ENDOFOPT || val + len > body.len() {
            break;
        }
        match (code, len) {
            (OPT_IF_TSRESOL, 1) => iface.scale = TsScale::from_tsresol(body[val]),
            (OPT_IF_TSOFFSET, 8) => iface.offset_s = e.u64(body, val) as i64,
            _ => {}
        }
        off = val + ((len + 3) & !3);
    }
    Some(iface)
}

pub(crate) struct PcapngReader<I> {
    input: I,
    endian: Endian,
    ifaces: Vec<Iface>,
    pending: usize,
    done: bool,
    format: &'static str,
}

impl<I: Input> PcapngReader<I> {
    pub(crate) fn new(mut input: I) -> Result<Self, CaptureError> {
        let at = input.position();
        let h = input.fill(12)?;
        if h.len() < 12 {
            return Err(truncated(at));
        }
        let endian = match section_endian(h) {
            Some(e) => e,
            None => return Err(corrupt(at + 8, "pcapng: bad byte-order magic")),
        };
        let format = match endian {
            Endian::Little => "pcapng-le",
            Endian::Big => "pcapng-be",
        };
        Ok(PcapngReader { input, endian, ifaces: Vec::with_capacity(4), pending: 0, done: false, format })
    }
}

/// Ends the input (`done`) at damage found at byte `at`. Cold: damage ends an input once.
#[cold]
fn fail<T>(done: &mut bool, at: u64, why: &'static str) -> Result<T, CaptureError> {
    *done = true;
    Err(corrupt(at, why))
}

impl<I: Input> PacketSource for PcapngReader<I> {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        // Skip non-packet blocks until a packet block (or the end) comes. The loop only works
        // out where the frame lies; the slice is taken after it (a borrow returned from inside
        // a loop that also consumes would not pass the borrow checker).
        let (ts_ns, wire_len, link_type, data_off, caplen) = loop {
            self.input.consume(self.pending);
            self.pending = 0;
            let at = self.input.position();
            let h = match self.input.fill_header(12, at) {
                Ok(Some(h)) => h,
                end => {
                    self.done = true;
                    return end.map(|_| None);
                }
            };
            // The SHB type reads the same in both byte orders; its magic sets the section's.
            let is_shb = h[..4] == [0x0A, 0x0D, 0x0D, 0x0A];
            if is_shb {
                match section_endian(h) {
                    Some(e) => self.endian = e,
                    None => return fail(&mut self.done, at + 8, "pcapng: bad byte-order magic"),
                }
            }
            let e = self.endian;
            let btype = e.u32(h, 0);
            let len = e.u32(h, 4) as usize;
            // §3.1: a block is at least 12 bytes and a multiple of 4 long.
            if len < 12 || !len.is_multiple_of(4) || len > MAX_RECORD {
                return fail(&mut self.done, at, "pcapng: bad block total length");
            }
            let b = self.input.fill_exact(len, at).inspect_err(|_| self.done = true)?;
            if e.u32(b, len - 4) as usize != len {
                return fail(&mut self.done, at, "pcapng: trailing block length mismatch");
            }
            let body = &b[8..len - 4];
            self.pending = len;
            match btype {
                SHB => {
                    // §4.1: interfaces are numbered per section.
                    if body.len() < 16 {
                        return fail(&mut self.done, at, "pcapng: SHB too short");
                    }
                    self.ifaces.clear();
                }
                IDB => match parse_idb(e, body) {
                    Some(i) => self.ifaces.push(i),
                    None => return fail(&mut self.done, at, "pcapng: IDB too short"),
                },
                EPB | OPB => {
                    // §4.3 EPB: if_id(4) ts_hi(4) ts_lo(4) caplen(4) origlen(4) data.
                    // Appendix A OPB: if_id(2) drops(2) ts_hi ts_lo caplen origlen data.
                    if body.len() < 20 {
                        return fail(&mut self.done, at, "pcapng: packet block too short");
                    }
                    let if_id = if btype == EPB { e.u32(body, 0) as usize } else { usize::from(e.u16(body, 0)) };
                    let Some(iface) = self.ifaces.get(if_id) else {
                        return fail(&mut self.done, at, "pcapng: packet for an undeclared interface");
                    };
                    let ts = (u64::from(e.u32(body, 4)) << 32) | u64::from(e.u32(body, 8));
                    let caplen = e.u32(body, 12) as usize;
                    let wire_len = e.u32(body, 16);
                    if caplen > body.len() - 20 {
                        return fail(&mut self.done, at, "pcapng: captured length exceeds block");
                    }
                    break (iface.ts_ns(ts), wire_len, iface.link_type, 8 + 20, caplen);
                }
                SPB => {
                    // §4.4: interface 0, no timestamp; caplen = min(origlen, snaplen, space).
                    if body.len() < 4 {
                        return fail(&mut self.done, at, "pcapng: SPB too short");
                    }
                    let Some(iface) = self.ifaces.first() else {
                        return fail(&mut self.done, at, "pcapng: packet for an undeclared interface");
                    };
                    let wire_len = e.u32(body, 0);
                    let mut caplen = (wire_len as usize).min(body.len() - 4);
                    if iface.snaplen != 0 {
                        caplen = caplen.min(iface.snaplen as usize);
                    }
                    break (0, wire_len, iface.link_type, 8 + 4, caplen);
                }
                // NRB, ISB, DSB, custom and unknown blocks: nothing for us.
                _ => {}
            }
        };
        // The block is already buffered: this fill returns at once.
        let at = self.input.position();
        let b = self.input.fill(self.pending).inspect_err(|_| self.done = true)?;
        match b.get(data_off..data_off + caplen) {
            Some(data) => Ok(Some(Frame { ts_ns, wire_len, link_type, data })),
            None => {
                self.done = true;
                Err(truncated(at))
            }
        }
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

#[cfg(test)]
mod tests {
    use super::TsScale;

    #[test]
    fn tsresol_scales() {
        assert_eq!(TsScale::from_tsresol(6).to_ns(1_500_000), 1_500_000_000);
        assert_eq!(TsScale::from_tsresol(9).to_ns(7), 7);
        assert_eq!(TsScale::from_tsresol(12).to_ns(5_000), 5);
        assert_eq!(TsScale::from_tsresol(0x80 | 10).to_ns(1024), 1_000_000_000);
        assert_eq!(TsScale::from_tsresol(0x80 | 20).to_ns(1 << 19), 500_000_000);
        assert_eq!(TsScale::from_tsresol(0).to_ns(u64::MAX), u64::MAX);
        assert_eq!(TsScale::from_tsresol(127).to_ns(u64::MAX), 0);
    }
}
