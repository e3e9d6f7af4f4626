//! Properties on random addresses: Crypto-PAn keeps the shared prefix length of any two
//! addresses exactly (so it neither loses nor invents shared prefix bits), the cache changes no
//! result, and the keyed hash is stable per key.

use proptest::prelude::*;
use sonde_anon::{Anonymizer, CryptoPan, Key, Mode};

fn common_prefix_v4(a: [u8; 4], b: [u8; 4]) -> u32 {
    (u32::from_be_bytes(a) ^ u32::from_be_bytes(b)).leading_zeros()
}

fn common_prefix_v6(a: [u8; 16], b: [u8; 16]) -> u32 {
    (u128::from_be_bytes(a) ^ u128::from_be_bytes(b)).leading_zeros()
}

/// Two addresses sharing exactly `k` leading bits (k = width means equal): random pairs alone
/// would almost always share fewer than 4 bits.
fn v4_pair() -> impl Strategy<Value = ([u8; 4], [u8; 4])> {
    (any::<u32>(), any::<u32>(), 0u32..=32).prop_map(|(a, r, k)| {
        let b = if k == 32 {
            a
        } else {
            let keep = u32::MAX.checked_shl(32 - k).unwrap_or(0);
            let flip = 1u32 << (31 - k);
            ((a & keep) | (r & !keep)) & !flip | (!a & flip)
        };
        (a.to_be_bytes(), b.to_be_bytes())
    })
}

fn v6_pair() -> impl Strategy<Value = ([u8; 16], [u8; 16])> {
    (any::<u128>(), any::<u128>(), 0u32..=128).prop_map(|(a, r, k)| {
        let b = if k == 128 {
            a
        } else {
            let keep = u128::MAX.checked_shl(128 - k).unwrap_or(0);
            let flip = 1u128 << (127 - k);
            ((a & keep) | (r & !keep)) & !flip | (!a & flip)
        };
        (a.to_be_bytes(), b.to_be_bytes())
    })
}

fn key() -> impl Strategy<Value = Key> {
    any::<[u8; 32]>().prop_map(Key::from_bytes)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn v4_prefix_length_preserved(key in key(), (a, b) in v4_pair(), (c, d) in any::<([u8; 4], [u8; 4])>()) {
        let pan = CryptoPan::new(&key);
        prop_assert_eq!(common_prefix_v4(pan.ipv4(a), pan.ipv4(b)), common_prefix_v4(a, b));
        prop_assert_eq!(common_prefix_v4(pan.ipv4(c), pan.ipv4(d)), common_prefix_v4(c, d));
    }

    #[test]
    fn v6_prefix_length_preserved(key in key(), (a, b) in v6_pair(), (c, d) in any::<([u8; 16], [u8; 16])>()) {
        let pan = CryptoPan::new(&key);
        prop_assert_eq!(common_prefix_v6(pan.ipv6(a), pan.ipv6(b)), common_prefix_v6(a, b));
        prop_assert_eq!(common_prefix_v6(pan.ipv6(c), pan.ipv6(d)), common_prefix_v6(c, d));
    }

    #[test]
    fn keyed_hash_is_stable_and_keyed(key in key(), other in key(), a in any::<[u8; 4]>(), b in any::<[u8; 16]>()) {
        let (mut first, mut second) = (Anonymizer::new(Mode::KeyedHash, &key), Anonymizer::new(Mode::KeyedHash, &key));
        prop_assert_eq!(first.ipv4(a), second.ipv4(a));
        prop_assert_eq!(first.ipv6(b), second.ipv6(b));
        // A different key maps differently (2^-32 chance of a false failure for IPv4).
        prop_assume!(key != other);
        let mut third = Anonymizer::new(Mode::KeyedHash, &other);
        prop_assert_ne!(first.ipv6(b), third.ipv6(b));
    }
}

/// Cached and uncached agree on many addresses, clustered so every cache level is exercised
/// (and evictions happen: more /24s and addresses than the tables have slots).
#[test]
fn cached_agrees_with_uncached() {
    let key = Key::from_bytes(std::array::from_fn(|i| (i * 37 + 11) as u8));
    let pan = CryptoPan::new(&key);
    let mut cached = Anonymizer::new(Mode::CryptoPan, &key);
    let mut state = 0x243F_6A88_85A3_08D3u64;
    let mut next = || {
        // xorshift64*: a fixed sequence, so a failure reproduces.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_F491_4F6C_DD1D)
    };
    for _ in 0..200_000 {
        let r = next();
        // A few hundred thousand /24s under 16 /8s, hosts 0..64: repeats at every level.
        let v4 = [(r >> 60) as u8 + 10, (r >> 8) as u8, (r >> 16) as u8 & 0x3f, (r >> 24) as u8 & 0x3f];
        assert_eq!(cached.ipv4(v4), pan.ipv4(v4), "{v4:?}");
        let v6 = (u128::from(0x2001_0db8_0000u64 | (r >> 56)) << 80) | u128::from(r & 0xff_00ff);
        assert_eq!(cached.ipv6(v6.to_be_bytes()), pan.ipv6(v6.to_be_bytes()), "{v6:x}");
    }
    let stats = cached.cache_stats();
    assert!(stats.address_hits > 0 && stats.prefix_hits > 0 && stats.misses > 0, "{stats:?}");
}

#[test]
fn keyed_hash_changes_addresses() {
    let key = Key::from_bytes([0x5a; 32]);
    let mut hash = Anonymizer::new(Mode::KeyedHash, &key);
    let mut pan = Anonymizer::new(Mode::CryptoPan, &key);
    let mut unchanged = 0;
    let mut pan_equal = 0;
    for i in 0..10_000u32 {
        let a = (i.wrapping_mul(2_654_435_761)).to_be_bytes();
        unchanged += usize::from(hash.ipv4(a) == a);
        pan_equal += usize::from(hash.ipv4(a) == pan.ipv4(a));
    }
    // A PRF keeps an address with chance 2^-32 per address: none of 10 000 should be kept, and
    // the hash is not Crypto-PAn under another name.
    assert_eq!((unchanged, pan_equal), (0, 0));
    // Not prefix preserving: neighbours in one /24 land in different /8s almost always.
    let spread: std::collections::HashSet<u8> = (0..=255u8).map(|h| hash.ipv4([192, 0, 2, h])[0]).collect();
    assert!(spread.len() > 100, "{}", spread.len());
}
