//! `--anonymize MODE --key FILE`: every output that holds addresses (flow logs, tables,
//! definitions' FIDs) equals the plain run's with each address mapped through the same key,
//! and no original address is left anywhere in the output.

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use common::*;
use sonde_anon::{Anonymizer, Key, Mode};

type Row = HashMap<String, String>;

/// A definition per FID kind: a whole address, an address prefix (a /24 of the destination) and
/// a port; each writes counts, gaps and flows.
const DEFS: &str = "src = ip.version == 4 key ip4.src measure count,gap,length\n\
                    net = ip.version == 4 key l3[16:3] measure count,gap\n\
                    src6 = ip.version == 6 key ip6.src\n\
                    port = ip.proto == 6 key tcp.dport\n";

fn traces() -> Vec<PathBuf> {
    anonymize_traces()
}

/// `row` with the address columns `columns` mapped through `anon`, and marked anonymised
/// (`*_iscrypto`) where the row says so.
fn mapped(row: &Row, columns: &[&str], anon: &mut Anonymizer) -> Row {
    let mut row = row.clone();
    for c in ["c_iscrypto", "s_iscrypto"] {
        if let Some(v) = row.get_mut(c) {
            *v = "1".to_string();
        }
    }
    for c in columns {
        if let Ok(ip) = row[*c].parse::<IpAddr>() {
            row.insert(c.to_string(), anon.ip(ip).to_string());
        }
    }
    // A flow log's other addresses: the resolver, the answers DN-Hunter read, names that are
    // address literals; its Community ID is the shown endpoints' (the plain one would let anyone
    // test a guess of the addresses).
    if let Some(ip) = row.get("dns_rslv").and_then(|v| v.parse::<IpAddr>().ok()) {
        row.insert("dns_rslv".into(), anon.ip(ip).to_string());
    }
    if let Some(answers) = row.get("dns_answers").filter(|v| v.as_str() != "-") {
        let shown: Vec<String> = answers
            .split(',')
            .map(|a| a.parse::<IpAddr>().map_or(a.to_string(), |ip| anon.ip(ip).to_string()))
            .collect();
        row.insert("dns_answers".into(), shown.join(","));
    }
    for c in ["fqdn", "dns_qry", "c_tls_SNI", "s_tls_SCN", "http_hostname", "quic_SNI"] {
        if let Some(name) = row.get(c).and_then(|v| anon.host(v)) {
            row.insert(c.into(), name);
        }
    }
    if row.contains_key("community_id") {
        let protocol = if row.contains_key("c_pkts_retx") { 6 } else { 17 };
        let end = |ip: &str, port: &str| (ip.parse::<IpAddr>().unwrap(), port.parse::<u16>().unwrap());
        let id =
            sonde_l7::community_id(protocol, end(&row["c_ip"], &row["c_port"]), end(&row["s_ip"], &row["s_port"]), 0);
        row.insert("community_id".into(), id.to_string());
        // The UID hashes the ID shown and the first packet's time (these traces' are whole
        // microseconds: `first` in ms with 3 decimals holds them exactly).
        if row.contains_key("uid") {
            let (ms, us) = row["first"].split_once('.').unwrap();
            let first_ns = ms.parse::<u64>().unwrap() * 1_000_000 + us.parse::<u64>().unwrap() * 1_000;
            row.insert("uid".into(), sonde_l7::uid(&id, first_ns).as_str().to_string());
        }
    }
    row
}

/// A definitions file's FID as the anonymised run must show it.
fn mapped_fid(row: &Row, anon: &mut Anonymizer) -> Row {
    let mut row = row.clone();
    let fid = row["fid"].clone();
    let shown = match row["definition"].as_str() {
        "src" | "src6" if fid != "overflow" => anon.ip(fid.parse().unwrap()).to_string(),
        "net" if fid != "overflow" => {
            let prefix: u32 = fid.parse().unwrap();
            (u32::from_be_bytes(anon.ipv4((prefix << 8).to_be_bytes())) >> 8).to_string()
        }
        _ => fid,
    };
    row.insert("fid".into(), shown);
    row
}

/// Rows as sorted lines of their values, for comparing files whose order may differ.
fn lines(rows: &[Row], header: &[String]) -> Vec<String> {
    let mut out: Vec<String> =
        rows.iter().map(|r| header.iter().map(|h| r[h].as_str()).collect::<Vec<_>>().join("\t")).collect();
    out.sort();
    out
}

fn header(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).unwrap().lines().next().unwrap().split('\t').map(str::to_string).collect()
}

#[test]
fn every_address_output_is_the_plain_one_mapped_through_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (defs, key) = (dir.path().join("defs"), dir.path().join("key"));
    std::fs::write(&defs, DEFS).unwrap();
    let args = ["--tables", "--interval", "1", "--definitions", defs.to_str().unwrap()];
    let mut compared = 0;
    for trace in traces() {
        let (plain, _) = analyze(&trace, &args);
        let anon_args: Vec<&str> =
            args.iter().copied().chain(["--anonymize", "cryptopan", "--key", key.to_str().unwrap()]).collect();
        let (anonymized, output) = analyze(&trace, &anon_args);
        assert!(output.status.success(), "{}: {output:?}", trace.display());
        let mut anon = Anonymizer::new(Mode::CryptoPan, &Key::load(&key).unwrap().key);
        let files: [(&str, &[&str]); 7] = [
            ("tcp_flows.tsv", &["c_ip", "s_ip"]),
            ("udp_flows.tsv", &["c_ip", "s_ip"]),
            ("hosts.tsv", &["addr"]),
            ("matrix.tsv", &["src", "dst"]),
            ("al_hosts.tsv", &["addr"]),
            ("al_matrix.tsv", &["src", "dst"]),
            ("definitions.tsv", &[]),
        ];
        for (file, columns) in
            files.into_iter().chain([("definition_gaps.tsv", &[][..]), ("definition_flows.tsv", &[])])
        {
            let h = header(&plain.path().join(file));
            let expected: Vec<Row> = read_tsv(&plain.path().join(file))
                .iter()
                .map(|r| {
                    if file.starts_with("definition") {
                        mapped_fid(r, &mut anon)
                    } else {
                        mapped(r, columns, &mut anon)
                    }
                })
                .collect();
            let got = read_tsv(&anonymized.path().join(file));
            assert_eq!(lines(&got, &h), lines(&expected, &h), "{}: {file}", trace.display());
            compared += got.len();
        }
        // Top talkers: the same hosts and values. Ranks among equal values follow the shown
        // addresses, so they are left out, and so are the hosts tied at the cut of a full table.
        let top = |rows: Vec<Row>| -> Vec<String> {
            let mut groups: HashMap<(String, String, String), Vec<Row>> = HashMap::new();
            for r in rows {
                groups.entry((r["start"].clone(), r["end"].clone(), r["by"].clone())).or_default().push(r);
            }
            let h: Vec<String> = ["start", "end", "by", "addr", "value"].map(String::from).to_vec();
            let mut kept = Vec::new();
            for rows in groups.into_values() {
                let least = rows.iter().map(|r| int(r, "value")).min().unwrap_or(0);
                let full = rows.len() >= 10;
                kept.extend(rows.into_iter().filter(|r| !full || int(r, "value") > least));
            }
            lines(&kept, &h)
        };
        let plain_top: Vec<Row> =
            read_tsv(&plain.path().join("top.tsv")).iter().map(|r| mapped(r, &["addr"], &mut anon)).collect();
        let (want, got) = (top(plain_top), top(read_tsv(&anonymized.path().join("top.tsv"))));
        assert!(want == got, "{}: top.tsv differs ({} rows vs {})", trace.display(), want.len(), got.len());
        // No original address is left in any file.
        let mut originals: Vec<String> = Vec::new();
        for (file, columns) in [("tcp_flows.tsv", ["c_ip", "s_ip"]), ("udp_flows.tsv", ["c_ip", "s_ip"])] {
            for r in read_tsv(&plain.path().join(file)) {
                originals.extend(columns.iter().map(|c| r[*c].clone()));
            }
        }
        originals.sort();
        originals.dedup();
        assert!(!originals.is_empty());
        // An original that is also the image of an address of the trace is shown legitimately:
        // Crypto-PAn's pad bits repeat whenever an address bit equals the pad's, so such
        // collisions are far likelier than 2^-32 (about one run in a hundred per trace here). The
        // comparisons above already prove those columns are mapped.
        let images: std::collections::HashSet<String> =
            originals.iter().map(|o| anon.ip(o.parse().unwrap()).to_string()).collect();
        originals.retain(|o| !images.contains(o));
        assert!(!originals.is_empty());
        for entry in std::fs::read_dir(anonymized.path()).unwrap() {
            let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
            let words: std::collections::HashSet<&str> = text.split(['\t', '\n', '"', ',', ':', ' ']).collect();
            // IPv6 text splits at ':' too: look for whole IPv6 addresses in the text instead.
            for o in &originals {
                let found =
                    if o.contains(':') { text.contains(&format!("\t{o}\t")) } else { words.contains(o.as_str()) };
                assert!(!found, "{}: {o} is in the anonymised output", trace.display());
            }
        }
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(anonymized.path().join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["anonymization"]["mode"], "cryptopan");
    }
    // The demo alone has some 130 rows; with the shared corpus, thousands.
    let least = if shared_dir().is_some() { 1000 } else { 100 };
    assert!(compared > least, "only {compared} rows compared");
}

#[test]
fn the_same_key_joins_runs_and_another_key_does_not() {
    let trace = traces().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let run = |key: &str, mode: &str| {
        let key = dir.path().join(key);
        let (out, output) = analyze(&trace, &["--anonymize", mode, "--key", key.to_str().unwrap()]);
        assert!(output.status.success(), "{output:?}");
        (std::fs::read_to_string(out.path().join("tcp_flows.tsv")).unwrap(), key)
    };
    let (first, key) = run("a", "cryptopan");
    assert!(std::fs::read_to_string(&key).unwrap().len() == 65);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key).unwrap().permissions().mode() & 0o777, 0o600);
    }
    assert_eq!(run("a", "cryptopan").0, first, "the same key maps the same way");
    assert_ne!(run("b", "cryptopan").0, first, "a new key maps another way");
    // The keyed hash, under the same key file: the library's mapping.
    let (hashed, _) = run("a", "hash");
    let mut anon = Anonymizer::new(Mode::KeyedHash, &Key::load(&key).unwrap().key);
    let (plain, _) = analyze(&trace, &[]);
    let expected: Vec<Row> =
        read_tsv(&plain.path().join("tcp_flows.tsv")).iter().map(|r| mapped(r, &["c_ip", "s_ip"], &mut anon)).collect();
    let h = header(&plain.path().join("tcp_flows.tsv"));
    let got_path = dir.path().join("hashed.tsv");
    std::fs::write(&got_path, hashed).unwrap();
    assert_eq!(lines(&read_tsv(&got_path), &h), lines(&expected, &h));
}

#[test]
fn zeroing_needs_no_key_and_leaves_only_zero_addresses() {
    let trace = traces().remove(0);
    let (out, output) = analyze(&trace, &["--anonymize", "zero", "--tables"]);
    assert!(output.status.success(), "{output:?}");
    for (file, columns) in [("tcp_flows.tsv", &["c_ip", "s_ip"][..]), ("hosts.tsv", &["addr"])] {
        let rows = read_tsv(&out.path().join(file));
        assert!(!rows.is_empty());
        for r in rows {
            for c in columns {
                assert!(r[*c] == "0.0.0.0" || r[*c] == "::" || r[*c] == "overflow", "{file}: {}", r[*c]);
            }
        }
    }
}

#[test]
fn what_cannot_be_anonymised_is_refused_before_anything_is_written() {
    let trace = traces().remove(0);
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let key = key.to_str().unwrap();
    let refused = |args: &[&str], message: &str| {
        let (out, output) = analyze(&trace, args);
        assert!(!output.status.success());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(message), "{stderr}");
        assert!(!out.path().join("tcp_flows.tsv").exists());
    };
    refused(&["--anonymize", "cryptopan"], "needs --key <FILE>");
    assert_eq!(analyze(&trace, &["--anonymize", "hash"]).1.status.code(), Some(2), "a usage error");
    refused(&["--key", key], "--key needs --anonymize");
    refused(&["--anonymize", "rot13", "--key", key], "unknown anonymisation mode");
    // An address's last byte as a key: no anonymised value could stand for it.
    let defs = dir.path().join("defs");
    std::fs::write(&defs, "last = ip.version == 4 key l3[15:1]\n").unwrap();
    let args = ["--anonymize", "cryptopan", "--key", key, "--definitions", defs.to_str().unwrap()];
    refused(&args, "keys on part of an address");
}

#[test]
fn anonymised_outputs_are_the_same_for_any_thread_count() {
    let Some(shared) = shared_dir() else { return };
    let trace = shared.join("groundtruth/mixed.pcap");
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("key");
    let files = ["tcp_flows.tsv", "udp_flows.tsv", "hosts.tsv", "matrix.tsv", "top.tsv", "al_hosts.tsv", "al_top.tsv"];
    let run = |threads: &str| {
        let args = ["--threads", threads, "--tables", "--anonymize", "cryptopan", "--key", key.to_str().unwrap()];
        let (out, output) = analyze(&trace, &args);
        assert!(output.status.success(), "{output:?}");
        files.map(|f| std::fs::read(out.path().join(f)).unwrap())
    };
    let one = run("1");
    assert!(run("3") == one, "--threads 3 differs from --threads 1");
}
