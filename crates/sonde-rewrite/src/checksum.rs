//! The Internet checksum (RFC 1071) as 16-bit one's-complement sums, and its incremental
//! update (RFC 1624). Sums are kept folded to 16 bits; a checksum field holds the complement of
//! the sum of everything it covers (with the field itself taken as zero).

/// One's-complement addition of two folded sums.
#[inline]
pub(crate) fn add(a: u16, b: u16) -> u16 {
    let s = u32::from(a) + u32::from(b);
    ((s & 0xffff) + (s >> 16)) as u16
}

/// The one's-complement sum of `bytes` as big-endian 16-bit words (an odd last byte is padded
/// with zero, RFC 1071 §4.1).
///
/// Summed 64 bits at a time in the machine's byte order with end-around carry, then folded and
/// put in network order: RFC 1071 §2 (B), the sum does not depend on byte order but for a final
/// swap. (Payload bytes dominate the cost of rewriting a frame.)
pub(crate) fn sum(bytes: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        let (s, carry) = acc.overflowing_add(w);
        acc = s + u64::from(carry);
    }
    let mut words = chunks.remainder().chunks_exact(2);
    // At most three more words: no overflow of the folded accumulator below.
    let mut tail: u64 = 0;
    for w in &mut words {
        tail += u64::from(u16::from_ne_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        tail += u64::from(u16::from_ne_bytes([*last, 0]));
    }
    let mut folded = (acc & 0xffff_ffff) + (acc >> 32) + tail;
    while folded >> 16 != 0 {
        folded = (folded & 0xffff) + (folded >> 16);
    }
    u16::from_be(folded as u16)
}

/// The sum of a pseudo-header's words other than the addresses: the protocol and the
/// upper-layer length, 16 bits for IPv4 (RFC 793 §3.1, RFC 768), 32 for IPv6 (RFC 8200 §8.1).
pub(crate) fn pseudo_tail(v6: bool, protocol: u8, len: usize) -> u16 {
    let len = u32::try_from(len).unwrap_or(u32::MAX);
    let len_sum = if v6 { add((len >> 16) as u16, len as u16) } else { len as u16 };
    add(u16::from(protocol), len_sum)
}

/// RFC 1624 eqn. 3: the checksum `old` after the covered data's sum changed from `from` to `to`:
/// HC' = ~(~HC + ~m + m').
#[inline]
pub(crate) fn update(old: u16, from: u16, to: u16) -> u16 {
    !add(add(!old, !from), to)
}

/// Reads the big-endian 16-bit field at `at`, if captured.
#[inline]
pub(crate) fn field(buf: &[u8], at: usize) -> Option<u16> {
    match buf.get(at..at.checked_add(2)?) {
        Some(&[a, b]) => Some(u16::from_be_bytes([a, b])),
        _ => None,
    }
}

/// Writes `value` big-endian at `at` (the caller checked with [`field`] that it is captured).
#[inline]
pub(crate) fn set_field(buf: &mut [u8], at: usize, value: u16) {
    if let Some(dst) = buf.get_mut(at..at + 2) {
        dst.copy_from_slice(&value.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: the words 0001 f203 f4f5 f6f7 sum to ddf2.
        assert_eq!(sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
        assert_eq!(
            sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7, 0x00, 0x01, 0xf2]),
            add(add(0xddf2, 0x0001), 0xf200)
        );
        assert_eq!(sum(&[0xab]), 0xab00);
        assert_eq!(sum(&[]), 0);
    }

    #[test]
    fn wide_and_narrow_sums_agree() {
        let bytes: Vec<u8> = (0..1001u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        for len in 0..bytes.len() {
            let narrow = bytes[..len]
                .chunks(2)
                .fold(0u16, |acc, w| add(acc, u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])));
            assert_eq!(sum(&bytes[..len]), narrow, "length {len}");
        }
    }

    #[test]
    fn incremental_update_equals_recomputation() {
        // An IPv4 header whose source changes: RFC 1624's update gives the recomputed checksum.
        let mut h = [0x45, 0, 0, 0x54, 0x12, 0x34, 0x40, 0, 64, 1, 0, 0, 192, 0, 2, 1, 198, 51, 100, 7];
        let ck = !sum(&h);
        set_field(&mut h, 10, ck);
        assert_eq!(sum(&h), 0xffff);
        let from = sum(&h[12..16]);
        h[12..16].copy_from_slice(&[10, 9, 8, 7]);
        let updated = update(ck, from, sum(&h[12..16]));
        set_field(&mut h, 10, 0);
        assert_eq!(updated, !sum(&h));
    }
}
