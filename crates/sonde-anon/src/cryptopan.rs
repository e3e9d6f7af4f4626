//! Crypto-PAn (Xu, Fan, Ammar, Moon: "Prefix-preserving IP address anonymization", 2002),
//! computed exactly as the reference implementation (Jinliang Fan's `panonymizer`) does.
//!
//! Key: the first 16 bytes are an AES-128 key; the last 16 bytes, encrypted once with it, are
//! the pad. For each bit position `i` of an address (0 = most significant), the AES input is the
//! address's first `i` bits followed by the pad's bits from `i` on; the most significant bit of
//! the ciphertext is XORed into bit `i` of the address. IPv6 uses the same construction over
//! 128 bits (the Go, Python and C# implementations agree on it; see docs/anonymization.md).
//!
//! Output bit `i` depends only on input bits `0..=i`, which is what makes the mapping prefix
//! preserving, and what lets [`crate::cache`] reuse the pad bits of a prefix already seen.
//! The AES inputs of one address do not depend on each other, so they are encrypted as a batch:
//! the AES-NI backend pipelines eight blocks at once.

use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::Aes128Enc;

use crate::key::Key;

type Block = aes::Block;

/// How many AES inputs are built and encrypted in one batch (bounds the stack buffer).
const BATCH: usize = 32;

/// The Crypto-PAn function of one key, without a cache. `Clone` copies the AES round keys
/// (176 bytes); nothing is shared.
#[derive(Clone)]
pub struct CryptoPan {
    cipher: Aes128Enc,
    /// AES(key[16..32]) as a big-endian integer: bit 127 is the pad's first bit.
    pad: u128,
}

impl CryptoPan {
    pub fn new(key: &Key) -> Self {
        let bytes = key.as_bytes();
        let cipher = Aes128Enc::new(GenericArray::from_slice(&bytes[..16]));
        let mut pad = *Block::from_slice(&bytes[16..]);
        cipher.encrypt_block(&mut pad);
        CryptoPan { cipher, pad: u128::from_be_bytes(pad.into()) }
    }

    /// Anonymises an IPv4 address (network byte order), computing all 32 bits.
    pub fn ipv4(&self, addr: [u8; 4]) -> [u8; 4] {
        let a = u32::from_be_bytes(addr);
        let otp = self.otp_bits(u128::from(a) << 96, 0, 32) >> 96;
        (a ^ otp as u32).to_be_bytes()
    }

    /// Anonymises an IPv6 address (network byte order), computing all 128 bits.
    pub fn ipv6(&self, addr: [u8; 16]) -> [u8; 16] {
        let a = u128::from_be_bytes(addr);
        (a ^ self.otp_bits(a, 0, 128)).to_be_bytes()
    }

    /// The one-time-pad bits `from..to` for an address aligned at the top of a `u128` (an IPv4
    /// address is shifted left by 96). Bit `i` sits at position `127 - i` of the result; the
    /// other bits are zero. Only the address's bits `0..to-1` are read.
    pub(crate) fn otp_bits(&self, addr: u128, from: u32, to: u32) -> u128 {
        debug_assert!(from <= to && to <= 128);
        if from == to {
            return 0;
        }
        // The input for position i: address bits 0..i, then pad bits. `checked_shl` because a
        // shift by 128 (i = 0) overflows instead of giving zero.
        let keep = u128::MAX.checked_shl(128 - from).unwrap_or(0);
        let mut input = (addr & keep) | (self.pad & !keep);
        // From one position to the next, one bit changes from the pad's to the address's.
        let diff = addr ^ self.pad;
        let mut bit = 1u128 << (127 - from);
        let mut otp = 0u128;
        let mut blocks = [Block::default(); BATCH];
        let mut left = (to - from) as usize;
        while left > 0 {
            let batch = &mut blocks[..left.min(BATCH)];
            for block in batch.iter_mut() {
                *block = input.to_be_bytes().into();
                input ^= diff & bit;
                bit >>= 1;
            }
            self.cipher.encrypt_blocks(batch);
            for block in batch.iter() {
                otp = otp << 1 | u128::from(block[0] >> 7);
            }
            left -= batch.len();
        }
        // `otp` holds bits from..to in its low bits; move bit `to - 1` to position 127 - (to - 1).
        otp << (128 - to)
    }
}

impl std::fmt::Debug for CryptoPan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The round keys and the pad are secret.
        f.write_str("CryptoPan { .. }")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The key of the reference implementation's sample (sample.cpp), published with it.
    pub(crate) const REFERENCE_KEY: [u8; 32] = [
        21, 34, 23, 141, 51, 164, 207, 128, 19, 10, 91, 22, 73, 144, 125, 16, 216, 152, 143, 131, 121, 121, 101, 39,
        98, 87, 76, 45, 42, 132, 34, 2,
    ];

    #[test]
    fn reference_sample_first_pairs() {
        // sample_trace_raw.dat -> sample_trace_sanitized.dat (the full list is in tests/data).
        let pan = CryptoPan::new(&Key::from_bytes(REFERENCE_KEY));
        assert_eq!(pan.ipv4([128, 11, 68, 132]), [135, 242, 180, 132]);
        assert_eq!(pan.ipv4([64, 39, 15, 238]), [0, 219, 7, 41]);
    }

    #[test]
    fn otp_ranges_compose() {
        let pan = CryptoPan::new(&Key::from_bytes(REFERENCE_KEY));
        let a = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
        let whole = pan.otp_bits(a, 0, 128);
        assert_eq!(pan.otp_bits(a, 0, 64) | pan.otp_bits(a, 64, 128), whole);
        assert_eq!(pan.otp_bits(a, 0, 33) | pan.otp_bits(a, 33, 128), whole);
        assert_eq!(pan.otp_bits(a, 5, 5), 0);
    }

    #[test]
    fn debug_does_not_print_the_key() {
        let pan = CryptoPan::new(&Key::from_bytes(REFERENCE_KEY));
        assert_eq!(format!("{pan:?}"), "CryptoPan { .. }");
    }
}
