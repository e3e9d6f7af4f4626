//! A Zeek-style connection UID (conn.log's `uid`): `C` and 17 base-62 characters, one per flow.
//! Zeek draws its UIDs at random; sonde's are a hash of the flow's Community ID and its first
//! packet's time, so the same trace gives the same UIDs in every run and on every probe that
//! saw the flow, and two flows of one 5-tuple (one after the other) get two.

use sha1::{Digest, Sha1};

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

/// The UID of the flow with Community ID `id` whose first packet came at `first_ns`: the first
/// 96 bits of the SHA-1 of the ID's text and the time (8 bytes, big-endian), in base 62.
pub fn uid(id: &CommunityId, first_ns: u64) -> Uid {
    let mut input = [0u8; CommunityId::LEN + 8];
    input[..CommunityId::LEN].copy_from_slice(id.as_bytes());
    input[CommunityId::LEN..].copy_from_slice(&first_ns.to_be_bytes());
    let digest = Sha1::digest(input);
    let mut n = u128::from_be_bytes(digest[..16].try_into().expect("a SHA-1 has 20 bytes")) >> 32;
    let mut text = [b'0'; Uid::LEN];
    text[0] = b'C';
    for slot in text[1..].iter_mut().rev() {
        *slot = DIGITS[(n % 62) as usize];
        n /= 62;
    }
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
    }
}
