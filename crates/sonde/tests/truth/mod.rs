//! Comparison of sonde's flow logs with a ground-truth file (schema `groundtruth-v1`, made by
//! ../shared/tools/groundtruth/gen.py): flows, packets and bytes per direction exactly;
//! retransmitted and out-of-sequence segments per direction exactly as the truth classes;
//! handshake RTT against the kernel's min_rtt; network duplicates and reordering against the
//! link's. Used by tests/groundtruth.rs and tests/demo.rs; a directory module so that it is not
//! a test target of its own.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common::*;

#[derive(Default, Debug)]
pub struct Score {
    pub captures: usize,
    pub tcp_flows: usize,
    pub udp_flows: usize,
    pub hs_flows: usize,
    pub hs_within_1ms: usize,
    pub path_min_within_1ms: usize,
    /// s2c network duplicates on IPv4 flows (IPv6 has no IP ident to recognise them by):
    /// (truth, sonde).
    pub net_dup_v4: (u64, u64),
    /// s2c reordered segments: (truth, sonde).
    pub reordered: (u64, u64),
    pub mismatches: Vec<String>,
}

impl Score {
    pub fn summary(&self) -> String {
        format!(
            "{} captures, {} TCP and {} UDP flows; handshake RTT within 1 ms of kernel min_rtt: {}/{}; \
             min(handshake, data RTT) within 1 ms: {}/{}",
            self.captures,
            self.tcp_flows,
            self.udp_flows,
            self.hs_within_1ms,
            self.hs_flows,
            self.path_min_within_1ms,
            self.hs_flows
        ) + &format!(
            "; s2c network duplicates (IPv4): truth {}, sonde {}; s2c reordered: truth {}, sonde {}",
            self.net_dup_v4.0, self.net_dup_v4.1, self.reordered.0, self.reordered.1
        )
    }

    /// Fails with every mismatch listed, or if the RTT agreement is below the given shares.
    pub fn assert_ok(&self, min_hs_share: f64, min_path_share: f64) {
        assert!(self.mismatches.is_empty(), "{} mismatches:\n{}", self.mismatches.len(), self.mismatches.join("\n"));
        if self.hs_flows == 0 {
            return;
        }
        let hs = self.hs_within_1ms as f64 / self.hs_flows as f64;
        assert!(hs >= min_hs_share, "handshake RTT within 1 ms for only {:.1} % of flows", hs * 100.0);
        let path = self.path_min_within_1ms as f64 / self.hs_flows as f64;
        assert!(path >= min_path_share, "min RTT within 1 ms for only {:.1} % of flows", path * 100.0);
    }
}

/// The pcap a truth file describes (its `pcap` field, beside it).
pub fn pcap_of(truth_path: &Path) -> PathBuf {
    let truth = load(truth_path);
    truth_path.with_file_name(truth["pcap"].as_str().expect("truth has a pcap name"))
}

fn load(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs sonde on the truth file's capture and adds what disagrees to `score`.
pub fn check_capture(truth_path: &Path, score: &mut Score) {
    let truth = load(truth_path);
    let pcap = pcap_of(truth_path);
    let (out, output) = analyze(&pcap, &[]);
    assert!(output.status.success(), "{}: {}", pcap.display(), String::from_utf8_lossy(&output.stderr));
    let by_tuple = |file: &str| -> HashMap<_, _> {
        read_tsv(&out.path().join(file)).into_iter().map(|r| (tuple(&r), r)).collect()
    };
    let tcp = by_tuple("tcp_flows.tsv");
    let udp = by_tuple("udp_flows.tsv");
    score.captures += 1;
    let name = truth_path.file_name().unwrap().to_string_lossy().to_string();
    let mut miss = |what: String| score.mismatches.push(format!("{name}: {what}"));
    let (mut n_tcp, mut n_udp) = (0, 0);
    for f in truth["flows"].as_array().expect("truth has flows") {
        let key = (
            f["client"]["ip"].as_str().unwrap().to_string(),
            f["client"]["port"].as_u64().unwrap(),
            f["server"]["ip"].as_str().unwrap().to_string(),
            f["server"]["port"].as_u64().unwrap(),
        );
        if key.1 == 0 {
            continue; // a connection that never got a port: nothing on the wire
        }
        let cap = &f["packets_at_capture"];
        let cap = (cap["c2s"].as_u64().unwrap(), cap["s2c"].as_u64().unwrap());
        let payload = (f["payload_bytes"]["c2s"].as_u64().unwrap(), f["payload_bytes"]["s2c"].as_u64().unwrap());
        if f["proto"] == "udp" {
            n_udp += 1;
            score.udp_flows += 1;
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
        // link retransmission is a retransmission at the probe; s2c segments arrive after the
        // link: rtx_seen and net_dup repeat bytes already seen, rtx_hole and reordered fill
        // holes (out of sequence).
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
