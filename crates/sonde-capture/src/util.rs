//! Small helpers shared by the parsers: byte-order reads, error constructors, time conversion.

use crate::{CaptureError, CaptureErrorKind};

/// Byte order of the fields of a file (pcap header magic, pcapng section magic).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Endian {
    Little,
    Big,
}

impl Endian {
    /// `b` must hold at least `off + 2` bytes (callers check record lengths first).
    #[inline(always)]
    pub(crate) fn u16(self, b: &[u8], off: usize) -> u16 {
        let a = bytes_at(b, off);
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }

    /// `b` must hold at least `off + 4` bytes.
    #[inline(always)]
    pub(crate) fn u32(self, b: &[u8], off: usize) -> u32 {
        let a = bytes_at(b, off);
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }

    /// `b` must hold at least `off + 8` bytes.
    #[inline(always)]
    pub(crate) fn u64(self, b: &[u8], off: usize) -> u64 {
        let a = bytes_at(b, off);
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
}

/// `b[off..off + N]` as an array: one bounds check and one load, where indexing byte by byte
/// costs a check per byte (the pcap record loop showed it).
#[inline(always)]
fn bytes_at<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[off..off + N]);
    a
}

#[cold]
pub(crate) fn truncated(offset: u64) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Truncated, offset }
}

#[cold]
pub(crate) fn corrupt(offset: u64, what: &'static str) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Corrupt(what), offset }
}

#[cold]
pub(crate) fn unsupported(offset: u64, what: &'static str) -> CaptureError {
    CaptureError { kind: CaptureErrorKind::Unsupported(what), offset }
}

/// Seconds plus a sub-second part already in nanoseconds, saturating instead of overflowing.
#[inline(always)]
pub(crate) fn secs_ns(secs: u64, ns: u64) -> u64 {
    secs.saturating_mul(1_000_000_000).saturating_add(ns)
}

/// Applies a signed offset in seconds (pcapng if_tsoffset), clamping to [0, u64::MAX].
#[inline]
pub(crate) fn add_offset_secs(ts_ns: u64, offset_s: i64) -> u64 {
    if offset_s >= 0 {
        ts_ns.saturating_add((offset_s as u64).saturating_mul(1_000_000_000))
    } else {
        ts_ns.saturating_sub(offset_s.unsigned_abs().saturating_mul(1_000_000_000))
    }
}
