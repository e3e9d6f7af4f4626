//! Endace ERF: a bare sequence of records, no file header. Detected by the plausibility of
//! the first records (Wireshark erf.c / libtrace heuristics).
//!
//! Record (ERF types guide §2): ts (8, little-endian 32.32 fixed point), type (1), flags (1),
//! rlen (2, BE), lctr/color (2, BE), wlen (2, BE), then 8-byte extension headers while the
//! "more" bit is set, then the type-specific payload (Ethernet types: a 2-byte offset/pad).

use crate::error::{corrupt, truncated};
use crate::stream::Input;
use crate::timestamp::secs_ns;
use crate::{CaptureError, Frame, PacketSource, LINKTYPE_ERF, LINKTYPE_ETHERNET, LINKTYPE_IPV4, LINKTYPE_IPV6};

const HDR: usize = 16;
const EXT_MORE: u8 = 0x80;
const TYPE_IPV4: u8 = 22;
const TYPE_IPV6: u8 = 23;
/// Last assigned type in Wireshark's erf.h (OPA 9B) and the padding record.
const TYPE_LAST_KNOWN: u8 = 29;
const TYPE_PAD: u8 = 48;
/// How many records the detector looks at, at most.
const RECORDS_TO_CHECK: usize = 20;
/// How many bytes the detector looks at, at most.
pub(crate) const DETECT_BYTES: usize = 64 << 10;

/// ETH, COLOR_ETH, DSM_COLOR_ETH, COLOR_HASH_ETH: Ethernet frames after a 2-byte offset/pad.
#[inline(always)]
fn is_eth(t: u8) -> bool {
    matches!(t, 2 | 11 | 16 | 20)
}

/// Layout of one record, from its header and extension headers.
#[derive(Debug, Clone, Copy)]
struct Rec {
    ts: u64,
    rtype: u8,
    rlen: usize,
    wlen: u16,
    /// Offset of the payload (after extension headers and the Ethernet pad).
    payload: usize,
}

/// Parses the record layout at the start of `b`. `Err` on an inconsistent header; `Ok(None)`
/// when `b` holds too little to see the whole header chain.
fn parse(b: &[u8]) -> Result<Option<Rec>, &'static str> {
    if b.len() < HDR {
        return Ok(None);
    }
    let ts = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
    let rtype = b[8] & 0x7f;
    let rlen = usize::from(u16::from_be_bytes([b[10], b[11]]));
    let wlen = u16::from_be_bytes([b[14], b[15]]);
    if rlen < HDR {
        return Err("erf: record length below header size");
    }
    let mut payload = HDR;
    let mut more = b[8] & EXT_MORE != 0;
    while more {
        if payload + 8 > rlen {
            return Err("erf: extension headers overrun the record");
        }
        let Some(&x) = b.get(payload) else {
            return Ok(None);
        };
        more = x & EXT_MORE != 0;
        payload += 8;
    }
    if is_eth(rtype) {
        payload += 2;
    }
    if payload > rlen {
        return Err("erf: payload header overruns the record");
    }
    Ok(Some(Rec { ts, rtype, rlen, wlen, payload }))
}

/// Whether `b` (the start of an input) looks like ERF records. The first two records (when
/// there are two) must be plausible; after that a bad record ends the check but not the
/// verdict, so a file damaged further on still opens and reports Corrupt where it breaks.
pub(crate) fn looks_like_erf(b: &[u8]) -> bool {
    let mut off = 0;
    let mut prev_ts: Option<u64> = None;
    for n in 0..RECORDS_TO_CHECK {
        let rest = &b[off..];
        let rec = match parse(rest) {
            Ok(Some(r)) => r,
            // Ran out of bytes: fine once one whole record was seen.
            Ok(None) => return n > 0,
            Err(_) => return n >= 2,
        };
        if rec.rtype == 0 || (rec.rtype > TYPE_LAST_KNOWN && rec.rtype != TYPE_PAD) {
            return n >= 2;
        }
        if rest.len() < rec.rlen {
            return n > 0;
        }
        // Wireshark erf.c: PAD timestamps may be unset; otherwise time goes forward (1 s fudge
        // for interleaved interfaces) and does not leap by more than a week.
        if rec.rtype != TYPE_PAD {
            if let Some(p) = prev_ts {
                let back = rec.ts < p && (p - rec.ts) >> 32 > 1;
                let leap = rec.ts > p && (rec.ts - p) >> 32 > 3600 * 24 * 7;
                if back || leap {
                    return n >= 2;
                }
            }
            prev_ts = Some(rec.ts);
        }
        off += rec.rlen;
        if off == b.len() {
            return true;
        }
    }
    true
}

/// ERF timestamp (32.32 fixed point seconds) to nanoseconds, rounding the fraction.
#[inline(always)]
fn ts_ns(ts: u64) -> u64 {
    let frac = ((ts & 0xffff_ffff) * 1_000_000_000 + (1 << 31)) >> 32;
    secs_ns(ts >> 32, frac)
}

pub(crate) struct ErfReader<I> {
    input: I,
    pending: usize,
    done: bool,
}

impl<I: Input> ErfReader<I> {
    pub(crate) fn new(input: I) -> Self {
        ErfReader { input, pending: 0, done: false }
    }
}

impl<I: Input> PacketSource for ErfReader<I> {
    fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        if self.done {
            return Ok(None);
        }
        let (rec, at) = loop {
            self.input.consume(self.pending);
            self.pending = 0;
            let at = self.input.position();
            let h = self.input.fill(HDR).inspect_err(|_| self.done = true)?;
            if h.is_empty() {
                self.done = true;
                return Ok(None);
            }
            let rlen = if h.len() >= HDR { usize::from(u16::from_be_bytes([h[10], h[11]])) } else { HDR };
            // rlen is 16 bits: one fill always sees the whole record when it is there.
            let b = self.input.fill(rlen.max(HDR)).inspect_err(|_| self.done = true)?;
            let rec = match parse(b) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    self.done = true;
                    return Err(truncated(at));
                }
                Err(what) => {
                    self.done = true;
                    return Err(corrupt(at, what));
                }
            };
            if b.len() < rec.rlen {
                self.done = true;
                return Err(truncated(at));
            }
            self.pending = rec.rlen;
            if rec.rtype != TYPE_PAD {
                break (rec, at);
            }
        };
        let b = self.input.fill_exact(rec.rlen, at).inspect_err(|_| self.done = true)?;
        let wlen = u32::from(rec.wlen);
        let (link_type, data, wire_len) = match rec.rtype {
            t if is_eth(t) => {
                // Records are padded; wlen bounds the frame (it includes the FCS).
                let d = &b[rec.payload..];
                (LINKTYPE_ETHERNET, &d[..d.len().min(rec.wlen as usize)], wlen)
            }
            TYPE_IPV4 | TYPE_IPV6 => {
                let d = &b[rec.payload..];
                let lt = if rec.rtype == TYPE_IPV4 { LINKTYPE_IPV4 } else { LINKTYPE_IPV6 };
                (lt, &d[..d.len().min(rec.wlen as usize)], wlen)
            }
            // LINKTYPE_ERF carries the whole record, header included.
            _ => (LINKTYPE_ERF, b, rec.rlen as u32),
        };
        Ok(Some(Frame { ts_ns: ts_ns(rec.ts), wire_len, link_type, data }))
    }

    fn position(&self) -> u64 {
        // The frame handed out last counts as consumed.
        self.input.position() + self.pending as u64
    }

    fn size_hint(&self) -> Option<u64> {
        self.input.size_hint()
    }

    fn format(&self) -> &str {
        "erf"
    }

    fn compression(&self) -> Option<&str> {
        self.input.compression()
    }
}
