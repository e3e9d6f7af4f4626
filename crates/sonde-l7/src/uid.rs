//! A Zeek-style connection UID (conn.log's `uid`): `C` and 17 base-62 characters, one per flow.
//! Zeek draws its UIDs at random; sonde's are a hash of the flow's Community ID and its first
//! packet's time, so the same trace gives the same UIDs in every run and on every probe that
//! saw the flow, and two flows of one 5-tuple (one after the other) get two. The hash is two
//! chains of SplitMix64's finalizer (about 100 instructions; a SHA-1 cost 2,300 a flow): not
//! cryptographic, which a UID need not be (the Community ID is public anyway).

use crate::CommunityId;

/// Base-62 digits, Zeek's order (its `uitoa_n`).
const DIGITS: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// A UID's text, kept inline.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Uid([u8; Uid::LEN]);

impl Uid {
    /// `C` and 17 digits: 62^17 > 2^96, the bits Zeek's UIDs carry.
    pub const LEN: usize = 18;

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.0).expect("base 62 is ASCII")
    }

    pub fn as_bytes(&self) -> &[u8; Uid::LEN] {
        &self.0
    }
}

impl std::fmt::Debug for Uid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

/// SplitMix64's finalizer: a bijection of 64 bits, each output bit depending on every input bit.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// `n`'s lowest `out.len()` base-62 digits into `out`, most significant first.
fn base62(mut n: u64, out: &mut [u8]) {
    for slot in out.iter_mut().rev() {
        *slot = DIGITS[(n % 62) as usize];
        n /= 62;
    }
}

/// The UID of the flow with Community ID `id` whose first packet came at `first_ns`: two
/// 64-bit chains over the ID's text (8 bytes at a time) and the time, seeded apart; the first
/// gives 11 digits (64 bits), the second 6 (35 bits).
pub fn uid(id: &CommunityId, first_ns: u64) -> Uid {
    const SEEDS: [u64; 2] = [0x9e37_79b9_7f4a_7c15, 0xd1b5_4a32_d192_ed03];
    let mut h = SEEDS.map(|seed| mix(seed ^ first_ns));
    for chunk in id.as_bytes().chunks(8) {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        h = [mix(h[0] ^ w), mix(h[1] ^ w.rotate_left(32))];
    }
    let mut text = [b'0'; Uid::LEN];
    text[0] = b'C';
    base62(h[0], &mut text[1..12]);
    base62(h[1], &mut text[12..]);
    Uid(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uids_are_zeek_shaped_and_differ_by_time() {
        let id = crate::community_id(6, ("10.0.0.1".parse().unwrap(), 1234), ("10.0.0.2".parse().unwrap(), 80), 0);
        let (a, b) = (uid(&id, 1), uid(&id, 2));
        for u in [a, b] {
            assert!(u.as_str().starts_with('C') && u.as_str()[1..].bytes().all(|b| b.is_ascii_alphanumeric()));
            assert_eq!(u.as_str().len(), 18);
        }
        assert_ne!(a, b);
        assert_eq!(a, uid(&id, 1));
        // Pinned: a UID must not change between versions (logs are joined on it).
        assert_eq!(a.as_str(), "C4xXT3STcWYUQMvxC1");
    }
}
