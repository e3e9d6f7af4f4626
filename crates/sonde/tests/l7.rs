//! Application facts through the whole run (reader → workers → flow logs), flow by flow against
//! tshark and FoxIO's expected JA4 outputs: the parsers' own tests (crates/sonde-l7/tests) check
//! them on their own; these check that the first packets of each flow reach them, in order,
//! and that their facts land in the right flow's row.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use common::{analyze, read_tsv, shared_dir, tshark};

type Tuple = (String, u64, String, u64);

fn trace(shared: &Path, rel: &str) -> PathBuf {
    let path = shared.join("traces").join(rel);
    assert!(path.exists(), "missing shared capture {}", path.display());
    path
}

/// Each flow's row of `file` (tcp_flows.tsv or udp_flows.tsv), by tuple; the first flow of a
/// tuple used again.
fn rows_by_tuple(dir: &Path, file: &str) -> BTreeMap<Tuple, HashMap<String, String>> {
    let mut rows = BTreeMap::new();
    for row in read_tsv(&dir.join(file)) {
        rows.entry(common::tuple(&row)).or_insert(row);
    }
    rows
}

/// tshark's first value of `fields` per flow (client → server as the frame goes), from the
/// frames matching `filter`; IPv4 or IPv6.
fn tshark_first(path: &Path, filter: &str, proto: &str, fields: &[&str]) -> BTreeMap<Tuple, Vec<String>> {
    let (sport, dport) = (format!("{proto}.srcport"), format!("{proto}.dstport"));
    let mut all = vec!["ip.src", "ipv6.src", sport.as_str(), "ip.dst", "ipv6.dst", dport.as_str()];
    all.extend_from_slice(fields);
    let mut first = BTreeMap::new();
    for line in tshark(path, filter, &all) {
        let f: Vec<&str> = line.split('\t').collect();
        let pick =
            |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.split(',').next().unwrap_or(a).to_string() };
        let (Ok(sp), Ok(dp)) =
            (f[2].split(',').next().unwrap_or("").parse(), f[5].split(',').next().unwrap_or("").parse())
        else {
            continue;
        };
        let tuple = (pick(f[0], f[1]), sp, pick(f[3], f[4]), dp);
        first.entry(tuple).or_insert_with(|| f[6..].iter().map(|s| s.to_string()).collect());
    }
    first
}

/// sonde's `-` is tshark's empty field.
fn ours(row: &HashMap<String, String>, col: &str) -> String {
    let v = &row[col];
    if v == "-" {
        String::new()
    } else {
        v.clone()
    }
}

const TLS_TRACES: &[&str] = &[
    "realistic/FoxIO-LLC+ja4/pcap/tls-sni.pcapng",
    "realistic/FoxIO-LLC+ja4/pcap/tls12.pcap",
    "realistic/FoxIO-LLC+ja4/pcap/tls3.pcapng",
    "realistic/FoxIO-LLC+ja4/pcap/browsers-x509.pcapng",
    "realistic/FoxIO-LLC+ja4/pcap/latest.pcapng",
    "realistic/FoxIO-LLC+ja4/pcap/tls-handshake.pcapng",
];

#[test]
fn tls_server_names_and_ja3_equal_tsharks_flow_by_flow() {
    let Some(shared) = shared_dir() else { return };
    let mut compared = 0;
    for rel in TLS_TRACES {
        let path = trace(&shared, rel);
        let (dir, out) = analyze(&path, &[]);
        assert!(out.status.success(), "{rel}: {}", String::from_utf8_lossy(&out.stderr));
        let rows = rows_by_tuple(dir.path(), "tcp_flows.tsv");
        let hellos = tshark_first(
            &path,
            "tls.handshake.type == 1 && tcp",
            "tcp",
            &["tls.handshake.extensions_server_name", "tls.handshake.ja3", "tls.handshake.extensions_alpn_str"],
        );
        assert!(!hellos.is_empty(), "{rel}: tshark found no ClientHello");
        for (tuple, want) in &hellos {
            let row = rows.get(tuple).unwrap_or_else(|| panic!("{rel}: no flow {tuple:?}"));
            assert_eq!(ours(row, "c_tls_SNI"), want[0], "{rel} {tuple:?}: SNI");
            assert_eq!(ours(row, "tls_ja3"), want[1], "{rel} {tuple:?}: JA3");
            assert_eq!(ours(row, "c_npnalpn"), want[2], "{rel} {tuple:?}: ALPN offered");
            assert_eq!(row["app"], "tls", "{rel} {tuple:?}: label");
            compared += 1;
        }
    }
    eprintln!("{compared} TLS flows equal to tshark's");
    assert!(compared >= 20, "only {compared} flows compared");
}

#[test]
fn ja4_equals_foxios_expected_outputs() {
    let Some(shared) = shared_dir() else { return };
    let mut compared = 0;
    for rel in TLS_TRACES {
        let path = trace(&shared, rel);
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let expected = path.parent().unwrap().parent().unwrap().join("expected").join(format!("{name}.json"));
        let text = std::fs::read_to_string(&expected).unwrap_or_else(|e| panic!("{}: {e}", expected.display()));
        let entries: Vec<serde_json::Value> = serde_json::from_str(&text).expect("FoxIO's JSON");
        let (dir, _) = analyze(&path, &[]);
        let rows = rows_by_tuple(dir.path(), "tcp_flows.tsv");
        for e in entries {
            let Some(ja4) = e.get("JA4.1").and_then(|v| v.as_str()) else { continue };
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            let tuple = (s("src"), s("srcport").parse().unwrap(), s("dst"), s("dstport").parse().unwrap());
            let Some(row) = rows.get(&tuple) else { continue }; // QUIC and other non-TCP entries
            assert_eq!(ours(row, "tls_ja4"), ja4, "{rel} {tuple:?}");
            compared += 1;
        }
    }
    eprintln!("{compared} JA4 equal to FoxIO's");
    assert!(compared >= 10, "only {compared} compared");
}

#[test]
fn http_hosts_and_methods_equal_tsharks_flow_by_flow() {
    let Some(shared) = shared_dir() else { return };
    let mut compared = 0;
    for rel in ["realistic/FoxIO-LLC+ja4/pcap/http1.pcapng", "realistic/FoxIO-LLC+ja4/pcap/http1-with-cookies.pcapng"] {
        let path = trace(&shared, rel);
        let (dir, out) = analyze(&path, &[]);
        assert!(out.status.success());
        let rows = rows_by_tuple(dir.path(), "tcp_flows.tsv");
        let requests = tshark_first(&path, "http.request", "tcp", &["http.host", "http.request.method"]);
        for (tuple, want) in &requests {
            let row = rows.get(tuple).unwrap_or_else(|| panic!("{rel}: no flow {tuple:?}"));
            assert_eq!(ours(row, "http_hostname"), want[0], "{rel} {tuple:?}: host");
            assert_eq!(ours(row, "http_method"), want[1], "{rel} {tuple:?}: method");
            assert_eq!(row["app"], "http", "{rel} {tuple:?}: label");
            compared += 1;
        }
    }
    eprintln!("{compared} HTTP flows equal to tshark's");
    assert!(compared >= 20, "only {compared} flows compared");
}

#[test]
fn dns_queries_equal_tsharks_flow_by_flow() {
    let Some(shared) = shared_dir() else { return };
    let mut compared = 0;
    for rel in [
        "realistic/arkime+arkime/tests/pcap/dns-wiresharkrepo.pcap",
        "realistic/CESNET+ipfixprobe/tests/functional/inputs/dns.pcap",
        "realistic/arkime+arkime/tests/pcap/dns-udp.pcap",
    ] {
        let path = trace(&shared, rel);
        let (dir, out) = analyze(&path, &[]);
        assert!(out.status.success());
        let rows = rows_by_tuple(dir.path(), "udp_flows.tsv");
        let queries = tshark_first(&path, "dns.flags.response == 0 && udp", "udp", &["dns.qry.name", "dns.qry.type"]);
        for (tuple, want) in &queries {
            let Some(row) = rows.get(tuple) else { continue }; // a query seen after its response
                                                               // tshark names the root `<root>`; sonde's name of it is empty.
            let name = if want[0].eq_ignore_ascii_case("<root>") { String::new() } else { want[0].to_lowercase() };
            assert_eq!(ours(row, "dns_qry"), name, "{rel} {tuple:?}: query name");
            assert_eq!(ours(row, "dns_qtype"), want[1], "{rel} {tuple:?}: query type");
            compared += 1;
        }
    }
    eprintln!("{compared} DNS flows equal to tshark's");
    assert!(compared >= 10, "only {compared} flows compared");
}

/// DN-Hunter: each TCP flow's `fqdn` is the name of the last DNS answer before the flow began
/// that gave its client the server's address, as computed here from tshark's view of the
/// answers; `dns_rslv` the server that answered.
#[test]
fn dn_hunter_labels_flows_with_the_name_their_client_resolved() {
    let Some(shared) = shared_dir() else { return };
    let mut labelled = 0;
    for rel in [
        "realistic/ntop+nDPI/tests/cfgs/default/pcap/alexa-app.pcapng",
        "realistic/ntop+nDPI/tests/cfgs/default/pcap/weibo.pcap",
    ] {
        let path = trace(&shared, rel);
        let (dir, out) = analyze(&path, &[]);
        assert!(out.status.success());
        // (time, resolver, client, name, addresses) per answer, in trace order.
        let answers: Vec<(f64, String, String, String, Vec<String>)> = tshark(
            &path,
            "dns.flags.response == 1 && udp.srcport == 53",
            &["frame.time_epoch", "ip.src", "ipv6.src", "ip.dst", "ipv6.dst", "dns.qry.name", "dns.a", "dns.aaaa"],
        )
        .iter()
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            let either = |a: &str, b: &str| if a.is_empty() { b.to_string() } else { a.to_string() };
            let addrs = f[6].split(',').chain(f[7].split(',')).filter(|a| !a.is_empty()).map(str::to_string).collect();
            (f[0].parse().unwrap(), either(f[1], f[2]), either(f[3], f[4]), f[5].to_lowercase(), addrs)
        })
        .collect();
        for row in read_tsv(&dir.path().join("tcp_flows.tsv")) {
            let first_s = common::num(&row, "first") / 1000.0;
            let want = answers.iter().rfind(|(t, _, client, _, addrs)| {
                *t <= first_s && *client == row["c_ip"] && addrs.contains(&row["s_ip"])
            });
            match want {
                Some((_, resolver, _, name, _)) => {
                    assert_eq!(&row["fqdn"], name, "{rel} {:?}", common::tuple(&row));
                    assert_eq!(&row["dns_rslv"], resolver, "{rel} {:?}", common::tuple(&row));
                    labelled += 1;
                }
                None => assert_eq!(row["fqdn"], "-", "{rel} {:?}: no answer gave this address", common::tuple(&row)),
            }
        }
    }
    eprintln!("{labelled} flows labelled as tshark's answers say");
    assert!(labelled >= 100, "only {labelled} flows labelled");
}
