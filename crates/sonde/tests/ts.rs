//! `sonde ts export|dump|info` on a store made here with sonde-rrd.

mod common;

use std::path::Path;

use common::sonde;
use sonde_rrd::{Spec, Store};

fn make_store(dir: &Path) -> (std::path::PathBuf, Store) {
    let path = dir.join("traffic.rrd");
    let spec = Spec::tstat_default(300, vec!["bytes".into(), "rtt_p95".into()]);
    let start = 1_704_067_200;
    let mut store = Store::create(&path, &spec, start).unwrap();
    for i in 1..=40u64 {
        let rtt = if i % 5 == 0 { f64::NAN } else { 0.001 * i as f64 };
        store.update(start + i * 300, &[1000.0 * i as f64, rtt]).unwrap();
    }
    (path, store)
}

#[test]
fn export_writes_the_stores_xml_to_a_file_or_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = make_store(dir.path());
    let mut want = Vec::new();
    store.export_rrdtool_xml(&mut want).unwrap();

    let out = sonde().args(["ts", "export", "--rrdtool-xml"]).arg(&path).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == want);

    let xml = dir.path().join("traffic.xml");
    let out = sonde().args(["ts", "export", "--rrdtool-xml"]).arg(&path).arg("-o").arg(&xml).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(std::fs::read(&xml).unwrap() == want);

    // The format flag is required (it names the one format there is, leaving room for others).
    let out = sonde().args(["ts", "export"]).arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn dump_writes_csv() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = make_store(dir.path());
    let mut want = Vec::new();
    store.dump_csv(&mut want).unwrap();
    let csv = dir.path().join("traffic.csv");
    let out = sonde().args(["ts", "dump"]).arg(&path).arg("-o").arg(&csv).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.as_bytes() == want);
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("archive,cf,resolution_s,time_s,bytes,rtt_p95"));
    // The 5-minute AVERAGE archive ends with the last update; an unknown RTT is an empty field.
    assert!(text.contains("\n0,AVERAGE,300,1704079200,40000,\n"), "{}", &text[..400]);
    assert!(text.contains("\n0,AVERAGE,300,1704078900,39000,0.039\n"));
    assert_eq!(lines.count(), 3 * (288 + 336 + 372 + 365));
}

#[test]
fn info_shows_the_spec() {
    let dir = tempfile::tempdir().unwrap();
    let (path, store) = make_store(dir.path());
    let out = sonde().args(["ts", "info"]).arg(&path).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains(&format!("size         {} bytes", store.file_len_bytes())), "{text}");
    assert!(text.contains("sources      bytes, rtt_p95"), "{text}");
    assert!(text.contains("last update  1704079200 (2024-01-01 03:20:00 UTC)"), "{text}");
    assert!(text.contains("    0  AVERAGE        1     288       5 min       1 day\n"), "{text}");
    assert!(text.contains("   11  MAX          288     365       1 day    365 days\n"), "{text}");
}

#[test]
fn a_damaged_store_is_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = make_store(dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 8]).unwrap();
    for cmd in [&["ts", "info"][..], &["ts", "dump"], &["ts", "export", "--rrdtool-xml"]] {
        let out = sonde().args(cmd).arg(&path).output().unwrap();
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("traffic.rrd") && err.contains("truncated store"), "{err}");
    }
    let out = sonde().args(["ts", "info"]).arg(dir.path().join("missing.rrd")).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
}
