//! Accuracy against captures of real Linux TCP stacks with a truth file
//! (../shared/groundtruth/*.truth.json): flows, packets and bytes per direction exactly;
//! retransmitted and out-of-sequence segments per direction exactly as the truth classes;
//! handshake RTT against the kernel's min_rtt.

mod common;

use std::collections::HashMap;

use common::*;
use serde_json::Value;

#[derive(Default, Debug)]
struct Score {
    tcp_flows: usize,
    hs_flows: usize,
    hs_within_1ms: usize,
    path_min_within_1ms: usize,
    /// s2c network duplicates on IPv4 flows (IPv6 has no IP ident to recognise them by):
    /// (truth, sonde).
    net_dup_v4: (u64, u64),
    /// s2c reordered segments: (truth, sonde).
    reordered: (u64, u64),
    mismatches: Vec<String>,
}

fn check_capture(truth_path: &std::path::Path, score: &mut Score) {
    let truth: Value = serde_json::from_str(&std::fs::read_to_string(truth_path).unwrap()).unwrap();
    let pcap = truth_path.with_file_name(truth["pcap"].as_str().unwrap());
    let (out, output) = analyze(&pcap, &[]);
    assert!(output.status.success(), "{}: {}", pcap.display(), String::from_utf8_lossy(&output.stderr));
    let by_tuple = |file: &str| -> HashMap<_, _> {
        read_tsv(&out.path().join(file)).into_iter().map(|r| (tuple(&r), r)).collect()
    };
    let tcp = by_tuple("tcp_flows.tsv");
    let udp = by_tuple("udp_flows.tsv");
    let name = truth_path.file_name().unwrap().to_string_lossy().to_string();
    let mut miss = |what: String| score.mismatches.push(format!("{name}: {what}"));
    let (mut n_tcp, mut n_udp) = (0, 0);
    for f in truth["flows"].as_array().unwrap() {
        let key = (
            f["client"]["ip"].as_str().unwrap().to_string(),
            f["client"]["port"].as_u64().unwrap(),
            f["server"]["ip"].as_str().unwrap().to_string(),
            f["server"]["port"].as_u64().unwrap(),
        );
        if key.1 == 0 {
            continue; // a connection that never got a port: nothing on the wire
        }
        let cap = (&f["packets_at_capture"]["c2s"], &f["packets_at_capture"]["s2c"]);
        let cap = (cap.0.as_u64().unwrap(), cap.1.as_u64().unwrap());
        let payload = (f["payload_bytes"]["c2s"].as_u64().unwrap(), f["payload_bytes"]["s2c"].as_u64().unwrap());
        if f["proto"] == "udp" {
            n_udp += 1;
            let Some(r) = udp.get(&key) else {
                miss(format!("UDP flow {key:?} missing"));
                continue;
            };
            let got = ((int(r, "c_pkts_all"), int(r, "s_pkts_all")), (int(r, "c_bytes_all"), int(r, "s_bytes_all")));
            if got != (cap, payload) {
                miss(format!("UDP {key:?}: got {got:?}, truth {:?}", (cap, payload)));
            }
            continue;
        }
        n_tcp += 1;
        score.tcp_flows += 1;
        let Some(r) = tcp.get(&key) else {
            miss(format!("TCP flow {key:?} missing"));
            continue;
        };
        let pkts = (int(r, "c_pkts_all"), int(r, "s_pkts_all"));
        if pkts != cap {
            miss(format!("TCP {key:?} packets: got {pkts:?}, truth {cap:?}"));
        }
        let bytes = (int(r, "c_bytes_uniq"), int(r, "s_bytes_uniq"));
        if bytes != payload {
            miss(format!("TCP {key:?} unique bytes: got {bytes:?}, truth {payload:?}"));
        }
        // The truth classes (CROSSCHECK.md): c2s segments are seen before the link, so every
        // link retransmission (data, SYN, FIN) is a retransmission at the probe; s2c segments
        // arrive after the link: rtx_seen and net_dup repeat bytes already seen, rtx_hole and
        // reordered fill holes (out of sequence).
        let s2c = &f["data_segments_at_capture"]["s2c"];
        let class = |c: &str| s2c[c].as_u64().unwrap_or(0);
        let expected = (
            f["retransmissions"]["link_c2s_retrans_segments"].as_u64().unwrap_or(0),
            class("rtx_seen") + class("net_dup"),
            0,
            class("rtx_hole") + class("reordered"),
        );
        let got = (int(r, "c_pkts_retx"), int(r, "s_pkts_retx"), int(r, "c_pkts_ooo"), int(r, "s_pkts_ooo"));
        if got != expected {
            miss(format!("TCP {key:?} (c_retx, s_retx, c_ooo, s_ooo): got {got:?}, truth {expected:?}"));
        }
        if f["family"].as_u64() == Some(4) {
            score.net_dup_v4.0 += class("net_dup");
            score.net_dup_v4.1 += int(r, "s_pkts_dup");
        }
        score.reordered.0 += class("reordered");
        score.reordered.1 += int(r, "s_pkts_reor");
        let kernel_min = f["rtt_ms"]["kernel_client_min_rtt"].as_f64();
        if let (Some(kmin), "completed") = (kernel_min, f["outcome"].as_str().unwrap()) {
            score.hs_flows += 1;
            let hs = r["c_hs_rtt"].parse::<f64>().ok();
            if hs.is_some_and(|hs| (hs - kmin).abs() <= 1.0) {
                score.hs_within_1ms += 1;
            }
            // The kernel's min_rtt is the least of all its samples; ours is the least of the
            // handshake and data→ACK samples.
            let data_min = (int(r, "c_rtt_cnt") > 0).then(|| num(r, "c_rtt_min"));
            let path_min = hs.into_iter().chain(data_min).fold(f64::INFINITY, f64::min);
            if (path_min - kmin).abs() <= 1.0 {
                score.path_min_within_1ms += 1;
            }
        }
    }
    if tcp.len() != n_tcp {
        miss(format!("{} TCP flows reported, truth has {n_tcp}", tcp.len()));
    }
    if udp.len() != n_udp {
        miss(format!("{} UDP flows reported, truth has {n_udp}", udp.len()));
    }
}

#[test]
fn flows_packets_bytes_retransmissions_match_the_truth() {
    let Some(shared) = shared_dir() else { return };
    let dir = shared.join("groundtruth");
    let mut truths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(".truth.json"))
        .collect();
    truths.sort();
    assert!(!truths.is_empty(), "no truth files in {}", dir.display());
    let mut score = Score::default();
    for t in &truths {
        check_capture(t, &mut score);
    }
    eprintln!(
        "{} captures, {} TCP flows; handshake RTT within 1 ms of kernel min_rtt: {}/{}; \
         min(handshake, data RTT) within 1 ms: {}/{}",
        truths.len(),
        score.tcp_flows,
        score.hs_within_1ms,
        score.hs_flows,
        score.path_min_within_1ms,
        score.hs_flows
    );
    eprintln!(
        "s2c network duplicates (IPv4): truth {}, sonde {}; s2c reordered: truth {}, sonde {}",
        score.net_dup_v4.0, score.net_dup_v4.1, score.reordered.0, score.reordered.1
    );
    assert!(score.mismatches.is_empty(), "{} mismatches:\n{}", score.mismatches.len(), score.mismatches.join("\n"));
    // The handshake is one sample; with the mixed capture's ±2 ms jitter it can land more than
    // 1 ms from the kernel's minimum over all samples (docs/metrics.md, "Handshake RTT").
    let hs = score.hs_within_1ms as f64 / score.hs_flows as f64;
    assert!(hs >= 0.90, "handshake RTT within 1 ms for only {:.1} % of flows", hs * 100.0);
    let path = score.path_min_within_1ms as f64 / score.hs_flows as f64;
    assert!(path >= 0.95, "min RTT within 1 ms for only {:.1} % of flows", path * 100.0);
    // The cause classification is a heuristic (Tstat's); it must still find the link's
    // duplicates exactly, and its reordering within a fifth of the truth.
    assert_eq!(score.net_dup_v4.0, score.net_dup_v4.1, "network duplicates");
    let (truth, ours) = (score.reordered.0 as f64, score.reordered.1 as f64);
    assert!((ours - truth).abs() <= 0.2 * truth, "reordered: truth {truth}, sonde {ours}");
}
