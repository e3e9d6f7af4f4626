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

/// A pattern compiled for the packet path. A field of up to 64 bits (most header fields) is
/// read with one bounded load of its bytes, a shift and a mask, in u64; wider ones go through
/// [`read_bits`]. Measured in `sonde analyze`, the general reader was ~40 % of matching.
#[derive(Debug, Clone, Copy)]
pub struct Probe {
    pub pattern: Pattern,
    narrow: bool,
    /// The field's first byte past its anchor, how many bytes hold it, and the shift that
    /// drops the bits after it.
    byte: u32,
    len: u32,
    shift: u32,
    /// The field's width and the pattern's mask together.
    mask: u64,
    lo: u64,
    hi: u64,
}

impl Probe {
    pub fn new(pattern: Pattern) -> Probe {
        let p = pattern;
        let first_bit = p.offset_bits % 8;
        let len = (first_bit + p.bits).div_ceil(8);
        let mask = p.mask & Pattern::full_mask(p.bits);
        let narrow = len <= 8 && p.bits <= 64 && p.hi <= u128::from(u64::MAX) && p.lo <= p.hi;
        Probe {
            pattern,
            narrow,
            byte: p.offset_bits / 8,
            len,
            shift: len * 8 - first_bit - p.bits,
            mask: mask as u64,
            lo: p.lo as u64,
            hi: p.hi as u64,
        }
    }

    /// The masked field, if the packet has it (as [`Pattern::value`]).
    #[inline]
    pub fn value(&self, layers: &Layers<'_>) -> Option<u128> {
        if !self.narrow {
            return self.pattern.value(layers);
        }
        self.narrow_value(layers).map(u128::from)
    }

    /// The masked field if it matches (as [`Pattern::test`]).
    #[inline]
    pub fn test(&self, layers: &Layers<'_>) -> Option<u128> {
        if !self.narrow {
            return self.pattern.test(layers);
        }
        let v = self.narrow_value(layers)?;
        (self.lo <= v && v <= self.hi).then_some(u128::from(v))
    }

    #[inline(always)]
    fn narrow_value(&self, layers: &Layers<'_>) -> Option<u64> {
        let (bytes, start) = match self.pattern.anchor {
            Anchor::Link => (layers.frame, 0),
            Anchor::Net => (layers.frame, layers.l3?),
            Anchor::Transport => (layers.frame, layers.l4?),
            Anchor::Payload => (layers.frame, layers.payload?),
            Anchor::Meta => (&layers.meta[..], 0),
        };
        let at = start as usize + self.byte as usize;
        let raw = match *bytes.get(at..at + self.len as usize)? {
            [a] => u64::from(a),
            [a, b] => u64::from(u16::from_be_bytes([a, b])),
            [a, b, c, d] => u64::from(u32::from_be_bytes([a, b, c, d])),
            ref span => span.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)),
        };
        Some((raw >> self.shift) & self.mask)
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

    /// The compiled probe reads and tests exactly as the pattern does, at every offset and width,
    /// on frames long enough or cut short.
    #[test]
    fn probes_read_as_their_patterns() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let frame: Vec<u8> = (0..64).map(|_| next() as u8).collect();
        let anchors = [Anchor::Link, Anchor::Net, Anchor::Transport, Anchor::Payload, Anchor::Meta];
        let (mut narrow, mut matched) = (0, 0);
        for _ in 0..20_000 {
            let bits = 1 + (next() % 128) as u32;
            let field = Pattern::full_mask(bits);
            let mask = if next() % 2 == 0 { field } else { (u128::from(next()) << 64 | u128::from(next())) & field };
            let (a, b) = ((u128::from(next()) << 64 | u128::from(next())) & field, u128::from(next()) & field);
            let p = Pattern {
                anchor: anchors[(next() % 5) as usize],
                offset_bits: (next() % 300) as u32,
                bits,
                mask,
                lo: a.min(b),
                hi: if next() % 4 == 0 { mask } else { a.max(b) },
            };
            let cut = (next() % 65) as usize;
            let l3 = (next() % 20) as u32;
            let layers = Layers {
                frame: &frame[..cut],
                l3: Some(l3),
                l4: (next() % 3 > 0).then_some(l3 + 20),
                payload: Some(40),
                meta: [7, 6, 64, 0, 1, 2, 3, 4, 0, 0, 5, 220, 1],
            };
            let probe = Probe::new(p);
            narrow += usize::from(probe.narrow);
            assert_eq!(probe.value(&layers), p.value(&layers), "{p:?} on {cut} bytes");
            assert_eq!(probe.test(&layers), p.test(&layers), "{p:?} on {cut} bytes");
            matched += usize::from(p.test(&layers).is_some());
        }
        assert!(narrow > 5_000 && matched > 1_000, "{narrow} narrow, {matched} matched");
    }

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
