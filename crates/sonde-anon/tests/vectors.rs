//! Published Crypto-PAn vectors (tests/data/cryptopan_vectors.txt, sources cited there).

use std::net::IpAddr;

use sonde_anon::{Anonymizer, CryptoPan, Key, Mode};

struct Section {
    key: Key,
    pairs: Vec<(IpAddr, IpAddr, usize)>,
}

fn sections() -> Vec<Section> {
    let text = include_str!("data/cryptopan_vectors.txt");
    let mut sections: Vec<Section> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let line_no = i + 1;
        if let Some(hex) = line.strip_prefix("key ") {
            let key = Key::parse(hex.as_bytes()).unwrap_or_else(|e| panic!("line {line_no}: {e}"));
            sections.push(Section { key, pairs: Vec::new() });
            continue;
        }
        let mut fields = line.split_whitespace();
        let parse = |f: Option<&str>| -> IpAddr {
            f.and_then(|s| s.parse().ok()).unwrap_or_else(|| panic!("line {line_no}: bad address in {line:?}"))
        };
        let (original, anonymised) = (parse(fields.next()), parse(fields.next()));
        sections.last_mut().expect("a key line first").pairs.push((original, anonymised, line_no));
    }
    sections
}

fn uncached(pan: &CryptoPan, addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V4(a) => IpAddr::from(pan.ipv4(a.octets())),
        IpAddr::V6(a) => IpAddr::from(pan.ipv6(a.octets())),
    }
}

#[test]
fn published_vectors_pass_uncached_and_cached() {
    let sections = sections();
    assert_eq!(sections.len(), 8);
    let (mut v4, mut v6) = (0, 0);
    for section in &sections {
        let pan = CryptoPan::new(&section.key);
        let mut cached = Anonymizer::new(Mode::CryptoPan, &section.key);
        // Twice through the cached path: the second pass is served from the memo.
        for pass in 0..2 {
            for &(original, expected, line) in &section.pairs {
                assert_eq!(uncached(&pan, original), expected, "line {line}: {original}");
                assert_eq!(cached.ip(original), expected, "line {line} (cached, pass {pass}): {original}");
                if pass == 0 {
                    if original.is_ipv4() {
                        v4 += 1
                    } else {
                        v6 += 1
                    }
                }
            }
        }
        assert!(cached.cache_stats().address_hits >= section.pairs.len() as u64);
    }
    // 77 IPv4 with the reference key (its sample's 70 and 7 more), 31 with other keys; 36 IPv6.
    assert_eq!((v4, v6), (108, 36));
}

#[test]
fn reference_sample_is_complete() {
    let sections = sections();
    let reference = &sections[0];
    assert_eq!(reference.pairs.iter().filter(|(a, _, _)| a.is_ipv4()).count(), 77);
    assert_eq!(reference.pairs.iter().filter(|(a, _, _)| a.is_ipv6()).count(), 5);
}
