//! A pattern: a bit field at an offset from a layer's start, masked and compared with a range.

use crate::Layers;

/// Where a pattern's offset counts from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Anchor {
    /// The first byte of the captured frame (the link header).
    Link,
    /// The network header (the inner one of a tunnelled packet, as sonde analyses it).
    Net,
    /// The transport header (after IPv6 extension headers).
    Transport,
    /// The transport payload.
    Payload,
    /// Facts the decoder found, as bytes: see [`Layers::meta`].
    Meta,
}

impl Anchor {
    pub fn name(self) -> &'static str {
        match self {
            Anchor::Link => "link",
            Anchor::Net => "l3",
            Anchor::Transport => "l4",
            Anchor::Payload => "payload",
            Anchor::Meta => "meta",
        }
    }
}

/// Longest bit field a pattern reads.
pub const MAX_BITS: u32 = 128;

/// Matches when the `bits`-bit big-endian field at `offset_bits` from `anchor`, ANDed with
/// `mask`, lies in `lo..=hi`. A field the packet does not have (layer absent, bytes not
/// captured) never matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Pattern {
    pub anchor: Anchor,
    pub offset_bits: u32,
    /// 1..=128.
    pub bits: u32,
    pub mask: u128,
    pub lo: u128,
    pub hi: u128,
}

impl Pattern {
    /// All ones over `bits` bits.
    pub fn full_mask(bits: u32) -> u128 {
        if bits >= 128 {
            u128::MAX
        } else {
            (1u128 << bits) - 1
        }
    }

    /// The masked field, if the packet has it.
    #[inline]
    pub fn value(&self, layers: &Layers<'_>) -> Option<u128> {
        let (bytes, start) = match self.anchor {
            Anchor::Link => (layers.frame, 0),
            Anchor::Net => (layers.frame, layers.l3?),
            Anchor::Transport => (layers.frame, layers.l4?),
            Anchor::Payload => (layers.frame, layers.payload?),
            Anchor::Meta => (&layers.meta[..], 0),
        };
        read_bits(bytes, u64::from(start) * 8 + u64::from(self.offset_bits), self.bits).map(|v| v & self.mask)
    }

    /// The masked field if it matches.
    #[inline]
    pub fn test(&self, layers: &Layers<'_>) -> Option<u128> {
        self.value(layers).filter(|v| (self.lo..=self.hi).contains(v))
    }

    /// Whether any value passes (a pattern that only extracts a key).
    pub fn is_extraction(&self) -> bool {
        self.lo == 0 && self.hi >= self.mask
    }
}

/// The `bits`-bit big-endian field starting `at` bits into `bytes`, or `None` past the end.
#[inline]
pub fn read_bits(bytes: &[u8], at: u64, bits: u32) -> Option<u128> {
    if bits == 0 || bits > MAX_BITS {
        return None;
    }
    let end = at.checked_add(u64::from(bits))?;
    let (first, last) = (usize::try_from(at / 8).ok()?, usize::try_from(end.div_ceil(8)).ok()?);
    let span = bytes.get(first..last)?;
    // Whole bytes, as most header fields are: one load.
    if at.is_multiple_of(8) {
        match *span {
            [a] if bits == 8 => return Some(u128::from(a)),
            [a, b] if bits == 16 => return Some(u128::from(u16::from_be_bytes([a, b]))),
            [a, b, c, d] if bits == 32 => return Some(u128::from(u32::from_be_bytes([a, b, c, d]))),
            _ => {}
        }
    }
    if span.len() <= 8 {
        // Most fields: up to 8 bytes, read into a u64.
        let mut acc = 0u64;
        for &b in span {
            acc = (acc << 8) | u64::from(b);
        }
        let tail = span.len() as u32 * 8 - (at % 8) as u32 - bits;
        return Some(u128::from(acc >> tail) & Pattern::full_mask(bits));
    }
    // At most 17 bytes: 128 bits at a bit offset of up to 7.
    let mut acc: u128 = 0;
    let mut spill: u8 = 0;
    for (i, &b) in span.iter().enumerate() {
        if i < 16 {
            acc = (acc << 8) | u128::from(b);
        } else {
            spill = b;
        }
    }
    let total_bits = span.len() as u32 * 8;
    let tail = total_bits - (at % 8) as u32 - bits;
    let value = if span.len() > 16 {
        // The field ends in the 17th byte: shift the first 16 in by the bits it needs.
        let need = 8 - tail;
        (acc << need) | u128::from(spill >> tail)
    } else {
        acc >> tail
    };
    Some(value & Pattern::full_mask(bits))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_read_big_endian_at_any_offset() {
        let b = [0b1010_1100, 0xff, 0x00, 0x12, 0x34];
        assert_eq!(read_bits(&b, 0, 4), Some(0b1010));
        assert_eq!(read_bits(&b, 4, 4), Some(0b1100));
        assert_eq!(read_bits(&b, 2, 8), Some(0b1011_0011));
        assert_eq!(read_bits(&b, 24, 16), Some(0x1234));
        assert_eq!(read_bits(&b, 25, 16), None);
        assert_eq!(read_bits(&b, 0, 0), None);
        let bytes: Vec<u8> = (1..=17).collect();
        let all = u128::from_be_bytes(bytes[..16].try_into().unwrap());
        assert_eq!(read_bits(&bytes, 0, 128), Some(all));
        // 128 bits at bit 4: the low nibble of byte 0 through the high nibble of byte 16.
        assert_eq!(read_bits(&bytes, 4, 128), Some((all << 4) | 1));
        assert_eq!(read_bits(&bytes, 8, 128), Some(u128::from_be_bytes(bytes[1..17].try_into().unwrap())));
        assert_eq!(read_bits(&bytes, 9, 128), None);
        assert_eq!(read_bits(&[], u64::MAX, 8), None);
    }
}
