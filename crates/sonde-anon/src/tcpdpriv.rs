//! tcpdpriv's prefix-preserving table method (Greg Minshall's tcpdpriv, option `-A50`), for IPv4
//! and, by the same rule over 128 bits, IPv6.
//!
//! A table holds every address seen so far and its image. A new address `a` is compared with the
//! table: let `b` be the address already there that shares the longest prefix with `a`, `k` bits
//! long. The image of `a` takes the first `k` bits of `b`'s image, then the complement of bit `k`
//! of `b`'s image, then pseudo-random bits. So two addresses that first differ at bit `k` have
//! images that first differ at bit `k` (prefix preserving), and distinct addresses have distinct
//! images. The first address of a family gets a wholly pseudo-random image.
//!
//! Unlike Crypto-PAn, the mapping depends on the order addresses are first seen: the random bits
//! are drawn, in that order, from a stream seeded by the key (AES-128 in counter mode under a
//! subkey of the key, one block per new address, a counter per family). The same key and the
//! same order of first appearances give the same images; another order gives other images.
//!
//! The longest shared prefix is found without a bit trie: in an ordered map, the address sharing
//! the longest prefix with `a` is one of its two neighbours (the one below `a` or the one above).
//! Memory is one map entry per distinct address, bounded by `max_addresses`: past the limit a
//! new address is not given an image (it becomes `0.0.0.0` or `::`) and is counted, so images
//! already given never change.

use std::collections::BTreeMap;

use aes::cipher::generic_array::GenericArray;
use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128Enc, Block};

use crate::key::Key;

/// Domain separation for the subkey of the random stream (16 bytes).
const SUBKEY_LABEL: &[u8; 16] = b"sonde-anon:tcpdp";

/// The default bound on distinct addresses in the table (both families together). An entry is
/// two 16-byte values in a B-tree, about 52 bytes with the tree's nodes (1,000,000 random
/// inserts): about 52 MB at the default, reached only by that many distinct addresses.
pub const DEFAULT_MAX_ADDRESSES: usize = 1_000_000;

/// What the table has done so far. Cumulative; `Copy` so it can be snapshotted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableStats {
    /// Distinct addresses with an image (the table's size).
    pub addresses: u64,
    /// Its bound.
    pub max_addresses: u64,
    /// Lookups of addresses without an image refused because the table was full (each mapped
    /// to the all-zero address of its family). Non-zero means some addresses lost their identity.
    pub unmapped: u64,
}

/// One family's map: address → image, both in the low `width` bits of a `u128`.
#[derive(Debug, Default)]
struct Family {
    images: BTreeMap<u128, u128>,
    /// Random blocks drawn for this family so far (the counter of its stream).
    drawn: u64,
}

/// The table of one run: every output of the run must share it (see `Anonymizer`).
pub struct Tcpdpriv {
    cipher: Aes128Enc,
    v4: Family,
    v6: Family,
    max_addresses: usize,
    unmapped: u64,
}

impl std::fmt::Debug for Tcpdpriv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tcpdpriv").field("stats", &self.stats()).finish_non_exhaustive()
    }
}

impl Tcpdpriv {
    /// An empty table whose random stream is seeded by `key`, holding at most `max_addresses`.
    pub fn new(key: &Key, max_addresses: usize) -> Self {
        let bytes = key.as_bytes();
        let outer = Aes128Enc::new(GenericArray::from_slice(&bytes[..16]));
        let mut subkey = Block::default();
        for (s, (k, l)) in subkey.iter_mut().zip(bytes[16..].iter().zip(SUBKEY_LABEL)) {
            *s = k ^ l;
        }
        outer.encrypt_block(&mut subkey);
        Tcpdpriv {
            cipher: Aes128Enc::new(&subkey),
            v4: Family::default(),
            v6: Family::default(),
            max_addresses,
            unmapped: 0,
        }
    }

    pub fn stats(&self) -> TableStats {
        TableStats {
            addresses: (self.v4.images.len() + self.v6.images.len()) as u64,
            max_addresses: self.max_addresses as u64,
            unmapped: self.unmapped,
        }
    }

    pub fn ipv4(&mut self, addr: [u8; 4]) -> [u8; 4] {
        let image = self.map(false, u128::from(u32::from_be_bytes(addr)));
        (image as u32).to_be_bytes()
    }

    pub fn ipv6(&mut self, addr: [u8; 16]) -> [u8; 16] {
        self.map(true, u128::from_be_bytes(addr)).to_be_bytes()
    }

    /// The image of `a` (in the low 32 bits for IPv4), given now if it has none.
    fn map(&mut self, v6: bool, a: u128) -> u128 {
        let full = self.v4.images.len() + self.v6.images.len() >= self.max_addresses;
        let (family, width) = if v6 { (&mut self.v6, 128) } else { (&mut self.v4, 32) };
        if let Some(&image) = family.images.get(&a) {
            return image;
        }
        if full {
            self.unmapped += 1;
            return 0;
        }
        // Bits of a `width`-bit value within a u128: the top `128 - width` are always 0.
        let shared = |b: u128| (a ^ b).leading_zeros() - (128 - width);
        let below = family.images.range(..a).next_back();
        let above = family.images.range(a..).next();
        let neighbour = match (below, above) {
            (Some(l), Some(h)) => Some(if shared(*l.0) >= shared(*h.0) { l } else { h }),
            (l, h) => l.or(h),
        };
        let random = Self::draw(&self.cipher, v6, &mut family.drawn);
        let mask = if width == 128 { u128::MAX } else { (1u128 << width) - 1 };
        let image = match neighbour {
            None => random & mask,
            Some((&b, &image_b)) => {
                // `a` differs from `b` first at bit `k` (0 = most significant): keep `b`'s image
                // above it, flip it there, draw the rest.
                let k = shared(b);
                let bit = 1u128 << (width - 1 - k);
                let above_k = image_b & !(bit | (bit - 1)) & mask;
                above_k | (!image_b & bit) | (random & (bit - 1))
            }
        };
        family.images.insert(a, image);
        image
    }

    /// The next random block of a family's stream: AES(subkey, family ‖ counter).
    fn draw(cipher: &Aes128Enc, v6: bool, drawn: &mut u64) -> u128 {
        let mut block = Block::default();
        block[0] = if v6 { 6 } else { 4 };
        block[8..].copy_from_slice(&drawn.to_be_bytes());
        *drawn += 1;
        cipher.encrypt_block(&mut block);
        u128::from_be_bytes(block.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared4(a: u32, b: u32) -> u32 {
        (a ^ b).leading_zeros()
    }

    #[test]
    fn prefix_preserving_and_one_to_one_in_any_order() {
        // Addresses with every shared prefix length, in two orders.
        let mut addrs: Vec<u32> = (0..32).map(|k| 0xc000_0201 ^ (1u32 << k)).collect();
        addrs.extend([0xc000_0201, 0x0a00_0001, 0x0a00_0002, 0xffff_ffff, 0]);
        for order in [addrs.clone(), addrs.iter().rev().copied().collect()] {
            let mut t = Tcpdpriv::new(&Key::from_bytes([5; 32]), 1000);
            let images: Vec<u32> = order.iter().map(|a| u32::from_be_bytes(t.ipv4(a.to_be_bytes()))).collect();
            for (i, (&a, &x)) in order.iter().zip(&images).enumerate() {
                for (&b, &y) in order.iter().zip(&images).skip(i + 1) {
                    assert_eq!(shared4(a, b), shared4(x, y), "{a:08x} {b:08x} -> {x:08x} {y:08x}");
                }
            }
        }
    }

    #[test]
    fn images_depend_on_key_and_order_and_are_stable() {
        let key = Key::from_bytes([1; 32]);
        let (a, b) = ([192, 0, 2, 1], [198, 51, 100, 7]);
        let mut t = Tcpdpriv::new(&key, 10);
        let (x, y) = (t.ipv4(a), t.ipv4(b));
        assert_eq!((t.ipv4(a), t.ipv4(b)), (x, y), "an image once given stays");
        let mut same = Tcpdpriv::new(&key, 10);
        assert_eq!((same.ipv4(a), same.ipv4(b)), (x, y));
        let mut other_key = Tcpdpriv::new(&Key::from_bytes([2; 32]), 10);
        assert_ne!((other_key.ipv4(a), other_key.ipv4(b)), (x, y));
        let mut reversed = Tcpdpriv::new(&key, 10);
        let y2 = reversed.ipv4(b);
        assert_ne!((reversed.ipv4(a), y2), (x, y), "the first-seen order decides");
    }

    #[test]
    fn ipv6_over_128_bits() {
        let mut t = Tcpdpriv::new(&Key::from_bytes([3; 32]), 1000);
        let base = 0x2001_0db8_0000_0000_0000_0000_0000_0001u128;
        let addrs: Vec<u128> = (0..128).map(|k| base ^ (1u128 << k)).chain([base]).collect();
        let images: Vec<u128> = addrs.iter().map(|a| u128::from_be_bytes(t.ipv6(a.to_be_bytes()))).collect();
        for (i, (&a, &x)) in addrs.iter().zip(&images).enumerate() {
            for (&b, &y) in addrs.iter().zip(&images).skip(i + 1) {
                assert_eq!((a ^ b).leading_zeros(), (x ^ y).leading_zeros());
            }
        }
        // The families have their own tables: an IPv4 address does not count as a neighbour.
        assert_eq!(t.stats().addresses, 129);
    }

    #[test]
    fn full_table_keeps_its_images_and_counts_the_rest() {
        let mut t = Tcpdpriv::new(&Key::from_bytes([4; 32]), 2);
        let x = t.ipv4([10, 0, 0, 1]);
        let y = t.ipv6([0x20; 16]);
        assert_eq!(t.ipv4([10, 0, 0, 2]), [0; 4]);
        assert_eq!(t.ipv6([0x21; 16]), [0; 16]);
        assert_eq!((t.ipv4([10, 0, 0, 1]), t.ipv6([0x20; 16])), (x, y));
        assert_eq!(t.stats(), TableStats { addresses: 2, max_addresses: 2, unmapped: 2 });
    }
}
