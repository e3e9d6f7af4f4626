//! `--layout tstat`'s header lines against Tstat's: every name at its position, as the layout
//! document gives them (../shared/docs/tstat-columns.md, parsed from its code blocks) and as
//! Tstat 3.3 itself wrote them (../shared/tstat/groundtruth/mixed.pcap).

use std::path::PathBuf;

use sonde_output::tstat::{log_header, TstatLog};

const LOGS: [(TstatLog, &str, usize); 3] = [
    (TstatLog::TcpComplete, "log_tcp_complete", 134),
    (TstatLog::TcpNocomplete, "log_tcp_nocomplete", 44),
    (TstatLog::UdpComplete, "log_udp_complete", 25),
];

/// The shared corpus (`$SONDE_SHARED`, else `<repo>/../shared`): required.
fn shared() -> PathBuf {
    let dir = std::env::var_os("SONDE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared"));
    assert!(dir.is_dir(), "no shared corpus at {} (set SONDE_SHARED)", dir.display());
    dir
}

/// The code block under `## <name> (` in the document, its lines joined by spaces.
fn documented(doc: &str, name: &str) -> String {
    let section = doc
        .split("\n## ")
        .find(|s| s.starts_with(&format!("{name} (")))
        .unwrap_or_else(|| panic!("no section {name} in tstat-columns.md"));
    let block = section.split("```").nth(1).unwrap_or_else(|| panic!("no code block under {name}"));
    block.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn headers_match_the_layout_document() {
    let doc = std::fs::read_to_string(shared().join("docs/tstat-columns.md")).expect("tstat-columns.md");
    for (log, name, columns) in LOGS {
        let ours = log_header(log);
        assert!(ours.ends_with('\n') && !ours[..ours.len() - 1].contains('\n'), "{name}: one line");
        let theirs = documented(&doc, name);
        let (ours_fields, theirs_fields): (Vec<&str>, Vec<&str>) =
            (ours.split_whitespace().collect(), theirs.split(' ').collect());
        assert_eq!(ours_fields.len(), columns, "{name}: column count");
        for (i, (a, b)) in ours_fields.iter().zip(&theirs_fields).enumerate() {
            assert_eq!(a, b, "{name}: column {}", i + 1);
        }
        assert_eq!(ours_fields.len(), theirs_fields.len(), "{name}: columns in the document");
        // Each name's suffix is its position.
        for (i, field) in ours_fields.iter().enumerate() {
            let position = field.rsplit(':').next().unwrap_or("");
            assert_eq!(position, (i + 1).to_string(), "{name}: {field}");
        }
    }
}

#[test]
fn headers_match_tstats_own_logs() {
    let run = shared().join("tstat/groundtruth/mixed.pcap/run");
    let dir = std::fs::read_dir(&run)
        .unwrap_or_else(|e| panic!("{}: {e}", run.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .unwrap_or_else(|| panic!("no Tstat run in {}", run.display()));
    for (log, name, _) in LOGS {
        let text = std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let first = text.split_inclusive('\n').next().expect("a header line");
        assert_eq!(log_header(log), first, "{name}: byte for byte");
    }
}
