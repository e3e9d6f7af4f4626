//! Community ID v1 against Wireshark's: tshark's `communityid` field, frame by frame, on real
//! captures with TCP, UDP, ICMP and ICMPv6 (IPv4 and IPv6). Wireshark 4.0 has the protocol off by
//! default: `--enable-protocol communityid` turns it on.

mod common;

use common::{indexed, parallel, traces_dir, tshark, Decoded};
use sonde_l7::{community_id, community_id_icmp};
use sonde_wire::{Fragment, Transport as Wire};

const TRACES: &[&str] = &[
    "realistic/CESNET+ipfixprobe/tests/functional/inputs/mixed.pcap",
    "realistic/nfstream+nfstream/tests/pcaps/viber.pcap",
    "realistic/arkime+arkime/tests/pcap/v6.pcap",
    "realistic/cisco+joy/test/pcaps/sample.pcap",
    "realistic/arkime+arkime/tests/pcap/dns-udp.pcap",
];

/// Ours for one decoded frame: None when it is not a TCP, UDP or ICMP packet we would hash.
fn ours(d: &Decoded<'_>) -> Option<(&'static str, String)> {
    let ip = d.summary.ip?;
    if d.summary.tunnel.is_some() || ip.fragment == Fragment::Later {
        return None;
    }
    Some(match d.summary.transport? {
        Wire::Tcp(t) => ("tcp", community_id(6, (ip.src, t.src_port), (ip.dst, t.dst_port), 0).to_string()),
        Wire::Udp(u) => ("udp", community_id(17, (ip.src, u.src_port), (ip.dst, u.dst_port), 0).to_string()),
        Wire::Icmp { icmp_type, code } => {
            let v6 = ip.protocol == 58;
            (if v6 { "icmpv6" } else { "icmp" }, community_id_icmp(v6, ip.src, ip.dst, icmp_type, code, 0).to_string())
        }
        _ => return None,
    })
}

#[test]
fn community_id_agrees_with_tshark() {
    let dir = traces_dir();
    let listed = indexed(|p| TRACES.contains(&p));
    assert_eq!(listed.len(), TRACES.len(), "traces missing from INDEX.tsv");
    let runs =
        parallel(TRACES, 2, |rel| tshark(&dir.join(rel), &["communityid"], &["--enable-protocol", "communityid"]));
    let mut by_kind: std::collections::BTreeMap<&str, usize> = Default::default();
    let mut wrong = Vec::new();
    for (rel, rows) in TRACES.iter().zip(runs) {
        common::for_each_frame(&dir.join(rel), |d| {
            let Some((kind, id)) = ours(&d) else { return };
            let theirs = rows.get(&d.number).and_then(|r| r.first()).and_then(|v| v.first());
            match theirs {
                Some(t) if *t == id => *by_kind.entry(kind).or_default() += 1,
                _ => wrong.push(format!("{rel} frame {} ({kind}): ours {id}, tshark {theirs:?}", d.number)),
            }
        });
    }
    eprintln!("frames agreeing with tshark, by protocol: {by_kind:?}");
    assert!(wrong.is_empty(), "{} frames disagree:\n{}", wrong.len(), wrong.join("\n"));
    for kind in ["tcp", "udp", "icmp", "icmpv6"] {
        assert!(by_kind.get(kind).copied().unwrap_or(0) >= 5, "too few {kind} frames compared: {by_kind:?}");
    }
}
