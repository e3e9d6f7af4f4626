//! `--geoip` and `--asn` (docs/owners.md): each flow's ends with their country and autonomous
//! system from MaxMind's test databases (../shared/geoip), whose source data gives the expected
//! answers; in every format; refused when damaged; not looked up when no output shows them.

mod common;

use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use common::{analyze, read_tsv, shared_dir};

/// A UDP datagram from `src` to `dst` over Ethernet, at second `t`.
fn datagram(out: &mut Vec<u8>, t: u32, (src, src_port): (IpAddr, u16), (dst, dst_port): (IpAddr, u16)) {
    let payload = b"owners";
    let mut udp = Vec::new();
    udp.extend_from_slice(&src_port.to_be_bytes());
    udp.extend_from_slice(&dst_port.to_be_bytes());
    udp.extend_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
    udp.extend_from_slice(&[0, 0]);
    udp.extend_from_slice(payload);
    let mut frame = vec![0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            frame.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
            frame.extend_from_slice(&((20 + udp.len()) as u16).to_be_bytes());
            frame.extend_from_slice(&[0, 1, 0, 0, 64, 17, 0, 0]);
            frame.extend_from_slice(&s.octets());
            frame.extend_from_slice(&d.octets());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            frame.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
            frame.extend_from_slice(&(udp.len() as u16).to_be_bytes());
            frame.extend_from_slice(&[17, 64]);
            frame.extend_from_slice(&s.octets());
            frame.extend_from_slice(&d.octets());
        }
        _ => unreachable!("one family per flow"),
    }
    frame.extend_from_slice(&udp);
    for n in [1_700_000_000 + t, 0, frame.len() as u32, frame.len() as u32] {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(&frame);
}

/// (client, server, and what each should be: country, ASN, organisation), from the databases'
/// source data (GeoIP2-City-Test.json, GeoLite2-ASN-Test.json).
type Expected = (&'static str, Option<&'static str>, Option<u64>, Option<&'static str>);
const FLOWS: [(Expected, Expected); 4] = [
    (("81.2.69.160", Some("GB"), None, None), ("89.160.20.112", Some("SE"), Some(29518), Some("Bredband2 AB"))),
    (("216.160.83.56", Some("US"), Some(209), None), ("1.0.0.1", None, Some(15169), Some("Google Inc."))),
    (("2001:218::1", Some("JP"), None, None), ("2a02:cf40::1", Some("NO"), None, None)),
    (("192.0.2.1", None, None, None), ("198.51.100.1", None, None, None)),
];

/// A trace of the flows: two datagrams each, the client's then the server's answer.
fn trace(dir: &Path) -> PathBuf {
    let mut bytes = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    bytes.extend_from_slice(&65535u32.to_le_bytes());
    bytes.extend_from_slice(&1u32.to_le_bytes());
    for (i, (c, s)) in FLOWS.iter().enumerate() {
        let (client, server): (IpAddr, IpAddr) = (c.0.parse().unwrap(), s.0.parse().unwrap());
        let (client, server) = ((client, 40000 + i as u16), (server, 9999));
        datagram(&mut bytes, 2 * i as u32, client, server);
        datagram(&mut bytes, 2 * i as u32 + 1, server, client);
    }
    let path = dir.join("owners.pcap");
    std::fs::File::create(&path).unwrap().write_all(&bytes).unwrap();
    path
}

fn databases() -> Option<(PathBuf, PathBuf)> {
    let geoip = shared_dir()?.join("geoip");
    Some((geoip.join("GeoIP2-City-Test.mmdb"), geoip.join("GeoLite2-ASN-Test.mmdb")))
}

#[test]
fn each_end_gets_its_country_and_autonomous_system() {
    let Some((city, asn)) = databases() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());
    let (out, output) = analyze(&trace, &["--geoip", city.to_str().unwrap(), "--asn", asn.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    let rows = read_tsv(&out.path().join("udp_flows.tsv"));
    assert_eq!(rows.len(), FLOWS.len());
    let text = |v: Option<&str>| v.unwrap_or("-").to_string();
    for (c, s) in FLOWS {
        let row = rows.iter().find(|r| r["c_ip"] == c.0).unwrap_or_else(|| panic!("{} logged", c.0));
        assert_eq!(row["s_ip"], s.0);
        for (p, e) in [("c", c), ("s", s)] {
            assert_eq!(row[&format!("{p}_country")], text(e.1), "{p}: {}", e.0);
            assert_eq!(row[&format!("{p}_asn")], e.2.map_or("-".into(), |n| n.to_string()), "{p}: {}", e.0);
            assert_eq!(row[&format!("{p}_as_org")], text(e.3), "{p}: {}", e.0);
        }
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    let lookups = &summary["flows"]["owners"];
    assert_eq!(lookups["lookups"], 2 * FLOWS.len() as u64, "{lookups}");

    // JSON lines: numbers and nulls.
    let (out, output) =
        analyze(&trace, &["--geoip", city.to_str().unwrap(), "--asn", asn.to_str().unwrap(), "--format", "jsonl"]);
    assert!(output.status.success(), "{output:?}");
    let lines = std::fs::read_to_string(out.path().join("udp_flows.jsonl")).unwrap();
    let google = lines
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["s_ip"] == "1.0.0.1")
        .unwrap();
    assert_eq!(google["s_asn"], 15169);
    assert_eq!(google["s_as_org"], "Google Inc.");
    assert_eq!(google["s_country"], serde_json::Value::Null);
    assert_eq!(google["c_country"], "US");

    // IPFIX: the AS numbers as bgpSourceAsNumber (16) and bgpDestinationAsNumber (17), 0 unknown.
    let file = dir.path().join("owners.ipfix");
    let (_, output) = analyze(&trace, &["--asn", asn.to_str().unwrap(), "--ipfix", file.to_str().unwrap()]);
    assert!(output.status.success(), "{output:?}");
    let mut decoder = sonde_ipfix::decode::Decoder::new();
    let bytes = std::fs::read(&file).unwrap();
    let records: Vec<_> = sonde_ipfix::decode::split_stream(&bytes)
        .unwrap()
        .iter()
        .flat_map(|m| decoder.message(m).unwrap().records)
        .collect();
    assert_eq!(records.len(), FLOWS.len());
    for (c, s) in FLOWS {
        let client: IpAddr = c.0.parse().unwrap();
        let r = records.iter().find(|r| r.addr(8).or(r.addr(27)) == Some(client)).unwrap();
        assert_eq!((r.uint(0, 16), r.uint(0, 17)), (Some(c.2.unwrap_or(0)), Some(s.2.unwrap_or(0))), "{}", c.0);
    }

    // Without databases the columns are there, empty, and nothing is looked up.
    let (out, output) = analyze(&trace, &[]);
    assert!(output.status.success(), "{output:?}");
    for row in read_tsv(&out.path().join("udp_flows.tsv")) {
        assert!(["c_country", "s_country", "c_asn", "s_asn", "c_as_org", "s_as_org"].iter().all(|c| row[*c] == "-"));
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["flows"]["owners"], serde_json::Value::Null);
}

#[test]
fn owners_are_not_looked_up_when_no_output_shows_them() {
    let Some((city, asn)) = databases() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());
    for extra in [["--layout", "tstat"], ["--outputs", "intervals"]] {
        let mut args = vec!["--geoip", city.to_str().unwrap(), "--asn", asn.to_str().unwrap()];
        args.extend(extra);
        // Not quiet (`analyze` passes -q, which keeps notes back).
        let out = tempfile::tempdir().unwrap();
        let output = common::sonde()
            .args(["analyze", "--force", "-r", trace.to_str().unwrap(), "-o", out.path().to_str().unwrap()])
            .args(&args)
            .output()
            .unwrap();
        assert!(output.status.success(), "{extra:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("no output shows the flows' owners"), "{extra:?}: {stderr}");
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap()).unwrap();
        assert_eq!(summary["flows"]["owners"], serde_json::Value::Null, "{extra:?}");
    }
}

#[test]
fn a_damaged_database_is_refused_before_the_run() {
    let Some(shared) = shared_dir() else { return };
    let dir = tempfile::tempdir().unwrap();
    let trace = trace(dir.path());
    for name in ["GeoIP2-City-Test-Broken-Double-Format.mmdb", "GeoIP2-City-Test-Invalid-Node-Count.mmdb"] {
        let db = shared.join("geoip").join(name);
        let (out, output) = analyze(&trace, &["--geoip", db.to_str().unwrap()]);
        assert_eq!(output.status.code(), Some(1), "{name}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(name) && stderr.contains("MaxMind DB"), "{name}: {stderr}");
        assert!(!out.path().join("udp_flows.tsv").exists(), "{name}: nothing written");
    }
    // A country database where the ASNs are asked for.
    let city = shared.join("geoip/GeoIP2-City-Test.mmdb");
    let (_, output) = analyze(&trace, &["--asn", city.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("no autonomous systems for --asn"), "{output:?}");
}
