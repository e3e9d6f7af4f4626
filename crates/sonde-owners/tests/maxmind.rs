//! The MaxMind test databases of ../shared/geoip against the source data they were built from
//! (their expected answers): every network's first and last address, the answer of the most
//! specific network that holds it. Damaged databases and databases of the wrong kind refused.

use std::net::IpAddr;
use std::path::PathBuf;

use serde_json::Value;
use sonde_flow::Owners;
use sonde_owners::MaxMind;

fn shared(name: &str) -> Option<PathBuf> {
    let dir = std::env::var_os("SONDE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    let path = dir.join("geoip").join(name);
    path.exists().then_some(path)
}

/// An address as a number of 128 bits (IPv4 in the low 32), with its family.
fn bits(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(a) => (false, u128::from(u32::from(a))),
        IpAddr::V6(a) => (true, u128::from(a)),
    }
}

/// The networks of a source file: (family, first, last, value), and its first and last address.
fn networks(json: &str) -> Vec<(bool, u128, u128, Value)> {
    let list: Vec<serde_json::Map<String, Value>> = serde_json::from_str(json).unwrap();
    list.into_iter()
        .flat_map(|m| m.into_iter())
        .map(|(net, value)| {
            let (addr, len) = net.split_once('/').unwrap();
            let (v6, base) = bits(addr.parse().unwrap());
            let len: u32 = len.parse().unwrap();
            let width = if v6 { 128 } else { 32 };
            let host = if len == width { 0 } else { (1u128 << (width - len)) - 1 };
            (v6, base & !host, base | host, value)
        })
        .collect()
}

fn address(v6: bool, n: u128) -> IpAddr {
    if v6 {
        IpAddr::V6(n.into())
    } else {
        IpAddr::V4((n as u32).into())
    }
}

/// For every network's first and last address: the answer of the smallest network that holds it.
fn expected(nets: &[(bool, u128, u128, Value)]) -> Vec<(IpAddr, &Value)> {
    let mut out = Vec::new();
    for &(v6, first, last, _) in nets {
        for n in [first, last] {
            let best = nets
                .iter()
                .filter(|(f, a, b, _)| *f == v6 && *a <= n && n <= *b)
                .min_by_key(|(_, a, b, _)| b - a)
                .unwrap();
            out.push((address(v6, n), &best.3));
        }
    }
    out
}

#[test]
fn countries_agree_with_the_databases_source() {
    let (Some(db), Some(json)) = (shared("GeoIP2-City-Test.mmdb"), shared("GeoIP2-City-Test.json")) else {
        eprintln!("skipped: ../shared/geoip not here");
        return;
    };
    let owners = MaxMind::open(Some(&db), None).unwrap().unwrap();
    let nets = networks(&std::fs::read_to_string(json).unwrap());
    let cases = expected(&nets);
    assert!(cases.len() > 400, "{} addresses", cases.len());
    let mut with_country = 0;
    for (ip, value) in cases {
        let want = ["country", "registered_country"].iter().find_map(|k| value[k]["iso_code"].as_str());
        let got = owners.owner(ip);
        assert_eq!(got.country_code(), want, "{ip}");
        assert_eq!((got.asn, got.as_org), (None, None), "{ip}: no ASN database given");
        with_country += usize::from(want.is_some());
    }
    assert!(with_country > 400, "{with_country} addresses with a country");
    // An address of no network.
    assert_eq!(owners.owner("192.0.2.1".parse().unwrap()), Default::default());
}

#[test]
fn autonomous_systems_agree_with_the_databases_source() {
    let (Some(db), Some(json)) = (shared("GeoLite2-ASN-Test.mmdb"), shared("GeoLite2-ASN-Test.json")) else {
        eprintln!("skipped: ../shared/geoip not here");
        return;
    };
    let owners = MaxMind::open(None, Some(&db)).unwrap().unwrap();
    let nets = networks(&std::fs::read_to_string(json).unwrap());
    let cases = expected(&nets);
    assert!(cases.len() > 1000, "{} addresses", cases.len());
    for (ip, value) in cases {
        let got = owners.owner(ip);
        assert_eq!(got.asn.map(u64::from), value["autonomous_system_number"].as_u64(), "{ip}");
        assert_eq!(got.as_org.as_deref(), value["autonomous_system_organization"].as_str(), "{ip}");
        assert_eq!(got.country, None, "{ip}: no country database given");
    }
}

#[test]
fn a_country_database_alone_and_both_together() {
    let (Some(country), Some(asn)) = (shared("GeoIP2-Country-Test.mmdb"), shared("GeoLite2-ASN-Test.mmdb")) else {
        eprintln!("skipped: ../shared/geoip not here");
        return;
    };
    let owners = MaxMind::open(Some(&country), Some(&asn)).unwrap().unwrap();
    // 2001:218::/32 is Japan in the country data; 1.0.0.0/24 is AS15169 in the ASN data.
    assert_eq!(owners.owner("2001:218::1".parse().unwrap()).country_code(), Some("JP"));
    assert_eq!(owners.owner("1.0.0.1".parse().unwrap()).asn, Some(15169));
}

#[test]
fn damaged_databases_and_the_wrong_kind_are_refused_with_the_reason() {
    let Some(city) = shared("GeoIP2-City-Test.mmdb") else {
        eprintln!("skipped: ../shared/geoip not here");
        return;
    };
    for name in ["GeoIP2-City-Test-Broken-Double-Format.mmdb", "GeoIP2-City-Test-Invalid-Node-Count.mmdb"] {
        let path = shared(name).unwrap();
        let e = MaxMind::open(Some(&path), None).unwrap_err();
        assert!(e.to_string().contains(name) && e.to_string().contains("MaxMind DB"), "{e}");
    }
    let e = MaxMind::open(None, Some(&city)).unwrap_err().to_string();
    assert!(e.contains("GeoIP2-City database has no autonomous systems for --asn"), "{e}");
    let asn = shared("GeoLite2-ASN-Test.mmdb").unwrap();
    let e = MaxMind::open(Some(&asn), None).unwrap_err().to_string();
    assert!(e.contains("has no countries for --geoip"), "{e}");
    let missing = MaxMind::open(Some(std::path::Path::new("/nonexistent.mmdb")), None).unwrap_err();
    assert!(missing.to_string().starts_with("/nonexistent.mmdb: "), "{missing}");
    assert!(MaxMind::open(None, None).unwrap().is_none());
}
