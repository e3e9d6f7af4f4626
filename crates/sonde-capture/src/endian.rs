//! Byte order of a capture file's fields, and reads of them.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fields_in_either_order_at_any_offset() {
        let b = [0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08];
        assert_eq!((Endian::Little.u16(&b, 1), Endian::Big.u16(&b, 1)), (0x0201, 0x0102));
        assert_eq!((Endian::Little.u32(&b, 1), Endian::Big.u32(&b, 1)), (0x0403_0201, 0x0102_0304));
        assert_eq!((Endian::Little.u64(&b, 1), Endian::Big.u64(&b, 1)), (0x0807_0605_0403_0201, 0x0102_0304_0506_0708));
    }
}
