//! The demo trace shipped in testdata/ (made with ../shared/tools/groundtruth/gen.py: IPv4 and
//! IPv6, HTTP and a bulk transfer over a lossy 40 ms link, UDP, a refused and an unanswered
//! connection) matches its truth file. Needs nothing outside the repository.

mod common;
mod truth;

use std::path::Path;

fn demo_truth() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.truth.json")
}

#[test]
fn demo_flows_packets_bytes_retransmissions_match_the_truth() {
    let mut score = truth::Score::default();
    truth::check_capture(&demo_truth(), &mut score);
    eprintln!("{}", score.summary());
    // The demo link has no jitter: every handshake RTT is the kernel's minimum within 1 ms.
    score.assert_ok(1.0, 1.0);
}

#[test]
fn demo_exercises_what_it_is_meant_to() {
    let (out, output) = common::analyze(&truth::pcap_of(&demo_truth()), &[]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let tcp = common::read_tsv(&out.path().join("tcp_flows.tsv"));
    let udp = common::read_tsv(&out.path().join("udp_flows.tsv"));
    let v6 = |rows: &[std::collections::HashMap<String, String>]| rows.iter().any(|r| r["c_ip"].contains(':'));
    let v4 = |rows: &[std::collections::HashMap<String, String>]| rows.iter().any(|r| !r["c_ip"].contains(':'));
    assert!(v4(&tcp) && v6(&tcp) && v4(&udp) && v6(&udp), "both address families, TCP and UDP");
    let retx: u64 = tcp.iter().map(|r| common::int(r, "c_pkts_retx") + common::int(r, "s_pkts_retx")).sum();
    assert!(retx > 0, "the demo must show retransmissions");
}
