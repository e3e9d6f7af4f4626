//! `--anonymize tcpdpriv` (tcpdpriv's prefix-preserving table method): the outputs of
//! `sonde analyze` are the plain run's with every address mapped through a table fed the
//! analysed packets' addresses in input order; the images preserve every pair's shared prefix
//! on real addresses; the same key gives the same bytes and another key others, for any
//! `--threads`; the table's bound is enforced and said; `sonde anon --anonymize tcpdpriv`
//! rewrites a trace consistently and prefix preserving.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use common::*;
use sonde_anon::{Anonymizer, Key};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

/// The (source, destination) of every packet sonde analyses, in input order.
fn packet_addresses(trace: &Path) -> Vec<(IpAddr, IpAddr)> {
    let mut source = sonde_capture::open(trace).unwrap();
    let mut out = Vec::new();
    let mut summary = sonde_wire::PacketSummary::EMPTY;
    while let Some(f) = source.next_frame().unwrap() {
        if sonde_wire::decode_into(sonde_wire::LinkType(f.link_type), f.data, f.wire_len, &mut summary).is_ok() {
            if let Some(ip) = summary.ip {
                out.push((ip.src, ip.dst));
            }
        }
    }
    out
}

/// The library's table under `key`, fed as the reader feeds it.
fn table_in_packet_order(trace: &Path, key: &Path) -> Anonymizer {
    let mut anon = Anonymizer::tcpdpriv(&Key::load(key).unwrap().key, sonde_anon::tcpdpriv::DEFAULT_MAX_ADDRESSES);
    for (src, dst) in packet_addresses(trace) {
        anon.ip(src);
        anon.ip(dst);
    }
    anon
}

fn shared_prefix(a: IpAddr, b: IpAddr) -> Option<u32> {
    match (a, b) {
        (IpAddr::V4(a), IpAddr::V4(b)) => Some((a.to_bits() ^ b.to_bits()).leading_zeros()),
        (IpAddr::V6(a), IpAddr::V6(b)) => Some((a.to_bits() ^ b.to_bits()).leading_zeros()),
        _ => None,
    }
}

/// Asserts that `pairs` (original → image) is a one-to-one map that keeps every pair's shared
/// prefix length; returns how many pairs of addresses were compared.
fn assert_prefix_preserving(pairs: &BTreeMap<IpAddr, IpAddr>) -> usize {
    let mut images = HashMap::new();
    for (a, x) in pairs {
        assert_eq!(a.is_ipv4(), x.is_ipv4(), "{a} -> {x}: the family is kept");
        assert!(images.insert(*x, *a).is_none(), "two addresses map to {x}");
    }
    let list: Vec<_> = pairs.iter().collect();
    let mut compared = 0;
    for (i, (a, x)) in list.iter().enumerate() {
        for (b, y) in &list[i + 1..] {
            if let Some(k) = shared_prefix(**a, **b) {
                assert_eq!(Some(k), shared_prefix(**x, **y), "{a} {b} share {k} bits, {x} {y} do not");
                compared += 1;
            }
        }
    }
    compared
}

fn summary(out: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap()
}

const ADDRESS_FILES: [(&str, &[&str]); 4] = [
    ("tcp_flows.tsv", &["c_ip", "s_ip"]),
    ("udp_flows.tsv", &["c_ip", "s_ip"]),
    ("hosts.tsv", &["addr"]),
    ("matrix.tsv", &["src", "dst"]),
];

/// Every row's addresses, sorted, as lines (the logs are sorted by the addresses they show).
fn rows(path: &Path, columns: &[&str], anon: Option<&mut Anonymizer>) -> Vec<String> {
    let mut anon = anon;
    let mut out: Vec<String> = read_tsv(path)
        .into_iter()
        .map(|mut row| {
            for c in columns {
                if let (Ok(ip), Some(anon)) = (row[*c].parse::<IpAddr>(), anon.as_deref_mut()) {
                    row.insert(c.to_string(), anon.ip(ip).to_string());
                }
            }
            // (The Community ID and the UID are the shown endpoints': tests/anonymize.rs checks
            // them.)
            let mut fields: Vec<_> = row
                .into_iter()
                .filter(|(k, _)| !k.ends_with("iscrypto") && k != "community_id" && k != "uid")
                .collect();
            fields.sort();
            fields.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
        })
        .collect();
    out.sort();
    out
}

#[test]
fn outputs_are_the_plain_ones_mapped_in_packet_order_and_prefix_preserving() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let key_arg = key.to_str().unwrap();
    let args = ["--tables", "--app-packets", "0"];
    let mut compared = 0;
    for trace in anonymize_traces() {
        let (plain, output) = analyze(&trace, &args);
        assert!(output.status.success(), "{output:?}");
        let anon_args: Vec<&str> = args.iter().copied().chain(["--anonymize", "tcpdpriv", "--key", key_arg]).collect();
        let (anonymized, output) = analyze(&trace, &anon_args);
        assert!(output.status.success(), "{}: {output:?}", trace.display());
        let mut table = table_in_packet_order(&trace, &key);
        let mut pairs = BTreeMap::new();
        for (file, columns) in ADDRESS_FILES {
            let expected = rows(&plain.path().join(file), columns, Some(&mut table));
            let got = rows(&anonymized.path().join(file), columns, None);
            let differ = got.iter().zip(&expected).find(|(g, e)| g != e);
            assert!(got.len() == expected.len() && differ.is_none(), "{}: {file}: {differ:?}", trace.display());
            for row in read_tsv(&plain.path().join(file)) {
                for c in columns {
                    if let Ok(ip) = row[*c].parse::<IpAddr>() {
                        pairs.insert(ip, table.ip(ip));
                    }
                }
            }
        }
        compared += assert_prefix_preserving(&pairs);
        let s = summary(anonymized.path());
        let t = &s["anonymization"]["tcpdpriv"];
        assert_eq!(s["anonymization"]["mode"], "tcpdpriv");
        assert_eq!(t["addresses"], table.table_stats().unwrap().addresses, "{}", trace.display());
        assert_eq!(t["unmapped"], 0);
    }
    assert!(compared > 100, "only {compared} address pairs compared");
}

#[test]
fn the_same_key_gives_the_same_bytes_for_any_thread_count_and_another_key_others() {
    let trace = match shared_dir() {
        Some(shared) => shared.join("groundtruth/mixed.pcap"),
        None => demo(),
    };
    let dir = tempfile::tempdir().unwrap();
    let files = ["tcp_flows.tsv", "udp_flows.tsv", "hosts.tsv", "matrix.tsv", "top.tsv"];
    let run = |key: &str, extra: &[&str]| {
        let key = dir.path().join(key);
        let mut args = vec!["--tables", "--anonymize", "tcpdpriv", "--key", key.to_str().unwrap()];
        args.extend(extra);
        let (out, output) = analyze(&trace, &args);
        assert!(output.status.success(), "{output:?}");
        files.map(|f| std::fs::read(out.path().join(f)).unwrap())
    };
    let one = run("a", &["--threads", "1"]);
    assert!(run("a", &["--threads", "3"]) == one, "--threads 3 differs from --threads 1");
    // Without application facts the workers are really three.
    let no_app = run("a", &["--threads", "1", "--app-packets", "0"]);
    assert!(run("a", &["--threads", "3", "--app-packets", "0"]) == no_app, "3 workers differ from 1");
    assert!(run("b", &["--threads", "1"]) != one, "another key maps another way");
}

#[test]
fn a_full_table_keeps_its_images_and_says_how_many_it_could_not_give() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let (out, output) = analyze(
        &demo(),
        &[
            "--anonymize",
            "tcpdpriv",
            "--key",
            key.to_str().unwrap(),
            "--tcpdpriv-max-addresses",
            "2",
            "--app-packets",
            "0",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let t = &summary(out.path())["anonymization"]["tcpdpriv"];
    assert_eq!((t["addresses"].as_u64(), t["max_addresses"].as_u64()), (Some(2), Some(2)));
    assert!(t["unmapped"].as_u64().unwrap() > 0, "{t}");
    // The two addresses first seen keep their images; every other one shows as 0.0.0.0.
    let mut table = Anonymizer::tcpdpriv(&Key::load(&key).unwrap().key, 2);
    let first = packet_addresses(&demo())[0];
    let images = [table.ip(first.0), table.ip(first.1)];
    for row in read_tsv(&out.path().join("tcp_flows.tsv")) {
        for c in ["c_ip", "s_ip"] {
            let ip: IpAddr = row[c].parse().unwrap();
            assert!(images.contains(&ip) || ip.is_unspecified(), "{c} = {ip}");
        }
    }
    let refused =
        analyze(&demo(), &["--anonymize", "tcpdpriv", "--key", key.to_str().unwrap(), "--tcpdpriv-max-addresses", "0"]);
    assert!(!refused.1.status.success());
}

#[test]
fn anon_rewrites_a_trace_consistently_and_prefix_preserving() {
    let trace = match shared_dir() {
        Some(shared) => shared.join("groundtruth/mixed.pcap"),
        None => demo(),
    };
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let rewrite = |name: &str, key: &Path| {
        let out = dir.path().join(name);
        let output = sonde()
            .args(["anon", "-q", "--anonymize", "tcpdpriv", "--key"])
            .arg(key)
            .arg("-r")
            .arg(&trace)
            .arg("-w")
            .arg(&out)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        out
    };
    let first = rewrite("a.pcap", &key);
    assert_eq!(std::fs::read(rewrite("b.pcap", &key)).unwrap(), std::fs::read(&first).unwrap());
    let other = rewrite("c.pcap", &dir.path().join("other"));
    assert_ne!(std::fs::read(&other).unwrap(), std::fs::read(&first).unwrap());
    // Frame by frame, the analysed addresses: one image each, prefix preserving.
    let (before, after) = (packet_addresses(&trace), packet_addresses(&first));
    assert_eq!(before.len(), after.len());
    let mut pairs = BTreeMap::new();
    for ((a, b), (x, y)) in before.into_iter().zip(after) {
        for (orig, image) in [(a, x), (b, y)] {
            assert_eq!(*pairs.entry(orig).or_insert(image), image, "{orig} has two images");
        }
    }
    assert!(assert_prefix_preserving(&pairs) > 10);
}
