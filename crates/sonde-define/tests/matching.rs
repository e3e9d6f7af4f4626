//! The compiled tree against evaluating each definition on its own, and the named fields
//! (read at the decoder's layer offsets) against the decoder's own fields, on real packets.

mod common;

use sonde_define::{parse_definitions, Compiled, Counter, Layers};
use sonde_wire::{decode, LinkType, Transport};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[(self.next() % items.len() as u64) as usize]
    }
}

/// A random definition from conditions that real packets often match, so that chains share
/// prefixes, values group, and keys vary.
fn random_definition(rng: &mut Rng, i: usize) -> String {
    // The benchmark's conditions, and raw patterns and the other family too.
    let extra = ["ip.version == 4", "udp.sport == 53", "l4[13:1] & 0x3f == 0x18", "link[12:2] == 0x0800"];
    let conditions: Vec<&str> = common::CONDITIONS.iter().copied().chain(extra).collect();
    let keys = ["", "", " key tcp.dport", " key ip.proto", " key l4[0:2]", " key ip.ttl"];
    let n = 1 + (rng.next() % 4) as usize;
    let chain: Vec<&str> = (0..n).map(|_| rng.pick(&conditions)).collect();
    format!("d{i} = {}{}", chain.join(" and "), rng.pick(&keys))
}

#[test]
fn the_tree_finds_what_each_definition_finds_alone() {
    let packets = common::real_packets(3000);
    assert!(packets.len() > 100);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut tree, mut flat) = (Vec::new(), Vec::new());
    let (mut matched, mut walked) = (0, 0);
    for round in 0..20 {
        let text: Vec<String> = (0..1 + round * 12).map(|i| random_definition(&mut rng, i)).collect();
        let defs = parse_definitions(&text.join("\n"), sonde_define::MAX_NAME_BYTES).unwrap();
        let set = Compiled::new(&defs);
        walked += usize::from(set.shares_tests());
        for p in &packets {
            let layers = p.layers();
            set.matches(&layers, &mut tree);
            set.matches_flat(&layers, &mut flat);
            assert_eq!(tree, flat, "round {round}");
            matched += tree.len();
        }
    }
    assert!(matched > 10_000, "only {matched} matches: the definitions test little");
    assert!(walked >= 19, "only {walked} of 20 sets walked the tree");
}

/// Workers are sent only the frame prefix the patterns can read: it must match as the whole
/// frame does.
#[test]
fn the_prefix_a_worker_gets_matches_as_the_whole_frame() {
    let packets = common::real_packets(3000);
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let deep = ["payload[0:1] >= 0", "payload[6:2] > 5", "link[40:4] > 0", "l4[30:1] == 0", "ip.src in 10.0.0.0/8"];
    let (mut whole, mut cut) = (Vec::new(), Vec::new());
    let mut shorter = 0;
    for round in 0..10 {
        let mut text: Vec<String> = (0..1 + round * 5).map(|i| random_definition(&mut rng, i)).collect();
        text.push(format!("deep = {}", rng.pick(&deep)));
        let matcher =
            Counter::new(parse_definitions(&text.join("\n"), sonde_define::MAX_NAME_BYTES).unwrap(), None, 10)
                .matcher();
        for p in &packets {
            let layers = p.layers();
            let prefix = matcher.prefix_len(&layers);
            shorter += usize::from(prefix < layers.frame.len());
            matcher.matches(&layers, &mut whole);
            matcher.matches(&Layers { frame: &layers.frame[..prefix], ..layers }, &mut cut);
            assert_eq!(whole, cut, "round {round}: {} of {} bytes", prefix, layers.frame.len());
        }
    }
    assert!(shorter > packets.len(), "the prefixes are rarely shorter than the frames ({shorter})");
}

#[test]
fn shared_prefixes_are_one_node() {
    let defs = parse_definitions(
        "a = tcp.dport == 80\nb = tcp.dport == 443\nc = tcp.flags & 0x12 == 2\nd = udp.dport == 53",
        sonde_define::MAX_NAME_BYTES,
    )
    .unwrap();
    let set = Compiled::new(&defs);
    // tcp (shared by a, b, c) and udp at the top; a, b, c and d below.
    assert_eq!((set.root_width(), set.node_count), (2, 6));
    assert!(set.shares_tests());
    // Nothing in common: one definition, or chains that start apart.
    for text in ["a = tcp.dport == 80", "a = tcp.dport == 80\nb = ip.version == 6"] {
        assert!(
            !Compiled::new(&parse_definitions(text, sonde_define::MAX_NAME_BYTES).unwrap()).shares_tests(),
            "{text}"
        );
    }
    // Exact values of one field form a group even with no common node.
    assert!(Compiled::new(
        &parse_definitions("a = ip.proto == 6\nb = ip.proto == 17", sonde_define::MAX_NAME_BYTES).unwrap()
    )
    .shares_tests());
}

#[test]
fn named_fields_read_what_the_decoder_reads() {
    let packets = common::real_packets(5000);
    let defs = parse_definitions(
        "sport = ip.proto == 6 key tcp.sport\n\
         dport = ip.proto == 6 key tcp.dport\n\
         usport = ip.proto == 17 key udp.sport\n\
         udport = ip.proto == 17 key udp.dport\n\
         src4 = ip.version == 4 key ip.src\n\
         dst6 = ip.version == 6 key ip.dst\n\
         ttl = ip.ttl >= 0\n\
         len = ip.len >= 0\n\
         proto = ip.proto >= 0",
        sonde_define::MAX_NAME_BYTES,
    )
    .unwrap();
    let set = Compiled::new(&defs);
    let mut out = Vec::new();
    let (mut checked, mut non_ip) = (0, 0);
    for p in &packets {
        let Ok(summary) = decode(LinkType(p.link_type), &p.frame, p.frame.len() as u32) else { continue };
        let layers: Layers = p.layers();
        set.matches(&layers, &mut out);
        let fid = |name: &str| out.iter().find(|m| defs[m.def as usize].name == name).map(|m| m.fid);
        let Some(ip) = summary.ip else {
            // The facts are zeros off IP: conditions that admit 0 still need IP.
            assert_eq!((fid("ttl"), fid("len"), fid("proto")), (None, None, None));
            non_ip += 1;
            continue;
        };
        assert_eq!((fid("len"), fid("proto")), (Some(ip.total_len.into()), Some(ip.protocol.into())));
        match summary.transport {
            Some(Transport::Tcp(t)) => {
                assert_eq!((fid("sport"), fid("dport")), (Some(t.src_port.into()), Some(t.dst_port.into())));
            }
            Some(Transport::Udp(u)) => {
                assert_eq!((fid("usport"), fid("udport")), (Some(u.src_port.into()), Some(u.dst_port.into())));
            }
            _ => {}
        }
        match (ip.src, ip.dst) {
            (std::net::IpAddr::V4(s), _) => assert_eq!(fid("src4"), Some(u32::from(s).into())),
            (_, std::net::IpAddr::V6(d)) => assert_eq!(fid("dst6"), Some(u128::from(d))),
            _ => {}
        }
        assert_eq!(fid("ttl"), Some(ip.ttl.into()));
        checked += 1;
    }
    // The demo's 441 IP packets, thousands more with the shared corpus.
    assert!(checked > if common::shared().is_some() { 1000 } else { 400 }, "only {checked} packets checked");
    assert!(non_ip > 0, "no packet without IP");
}

#[test]
fn vlan_fields_read_the_first_tag() {
    // Ethernet, 802.1Q (priority 5, VLAN 100), IPv4, UDP 1234 -> 53.
    let mut frame = vec![0u8; 12];
    frame.extend([0x81, 0x00, 0xa0, 0x64, 0x08, 0x00]);
    frame.extend([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    frame.extend([0x04, 0xd2, 0, 53, 0, 8, 0, 0]);
    let defs = parse_definitions(
        "id = vlan.id >= 0\npcp = vlan.pcp == 5 key vlan.type\ndns = udp.dport == 53 and vlan.id == 100 key ip.len",
        sonde_define::MAX_NAME_BYTES,
    )
    .unwrap();
    let set = Compiled::new(&defs);
    let mut out = Vec::new();
    set.matches(&common::layers(1, &frame), &mut out);
    let got: Vec<(u32, u128)> = out.iter().map(|m| (m.def, m.fid)).collect();
    assert_eq!(got, [(0, 100), (1, 0x0800), (2, 28)]);
    // Untagged: no VLAN fields.
    let mut untagged = frame[..12].to_vec();
    untagged.extend_from_slice(&frame[16..]);
    set.matches(&common::layers(1, &untagged), &mut out);
    assert_eq!(out, []);
}

#[test]
fn random_frames_never_panic_and_match_only_what_they_hold() {
    let defs = parse_definitions(
        "a = tcp.dport in 0..65535\nb = payload[0:16] > 0 key l4.bits[3:128]\nc = link[0:16] >= 0 key ip6.src\n\
         d = tcp.dport == 80 key l4.bits[5:128]\ne = tcp.dport == 443 and ip.ttl < 3",
        sonde_define::MAX_NAME_BYTES,
    )
    .unwrap();
    let set = Compiled::new(&defs);
    assert!(set.shares_tests(), "the tree's walk is what is tested");
    let mut rng = Rng(7);
    let mut out = Vec::new();
    for _ in 0..50_000 {
        let len = (rng.next() % 80) as usize;
        let frame: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let at = |r: u64| (r % 100 < 80).then_some((r % 100) as u32);
        let layers = Layers {
            frame: &frame,
            l3: at(rng.next()),
            l4: at(rng.next()),
            payload: at(rng.next()),
            meta: [(rng.next() % 8) as u8, 6, 64, 0, 1, 2, 3, 4, 0, 0, 5, 220, (rng.next() % 2) as u8],
        };
        set.matches(&layers, &mut out);
        let mut flat = Vec::new();
        set.matches_flat(&layers, &mut flat);
        assert_eq!(out, flat);
    }
}
