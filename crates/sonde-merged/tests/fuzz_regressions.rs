//! Inputs the coverage-guided fuzzer found (fuzz/, docs/fuzzing.md), replayed with the
//! invariants they broke. Each file of fuzz/regressions/merged is an input of the `merged`
//! target (fuzz/merged/fuzz_targets/merged.rs): a selector byte, whose bits 0-2 pick the
//! changelog (`Changelog::ALL`, 6 and 7 wrap to the first two), then a Parquet file: files on
//! which the Parquet reader panicked or read fewer rows than declared, rows whose sum overflowed,
//! a metric name that broke `/metrics`. Each is read with `read_file`, then as `sonde serve
//! --merged` reads it: a `Source` over a directory holding that file.

use std::path::Path;

use parquet::file::metadata::ParquetMetaDataReader;
use sonde_merged::{read_file, Changelog, Limits, Source};

/// A Prometheus name: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
fn is_name(n: &str) -> bool {
    let mut c = n.chars();
    c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
        && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
}

#[test]
fn fuzz_found_inputs_keep_their_invariants() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/merged");
    let tmp = tempfile::tempdir().unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let entry = entry.unwrap();
        let data = std::fs::read(entry.path()).unwrap();
        let [sel, file @ ..] = &data[..] else { continue };
        let log = Changelog::ALL[usize::from(sel & 7) % Changelog::ALL.len()];
        let root = tmp.path().join(entry.file_name());
        std::fs::create_dir_all(root.join(log.dir())).unwrap();
        let path = root.join(log.dir()).join("part-00000.parquet");
        std::fs::write(&path, file).unwrap();
        // Ok or Err, never a panic (the Parquet reader's are the file's read error); when Ok,
        // every row the footer declares was read.
        if let Ok(read) = read_file(&path, log) {
            let meta = ParquetMetaDataReader::new().parse_and_finish(&std::fs::File::open(&path).unwrap()).unwrap();
            let declared: i64 = meta.row_groups().iter().map(|g| g.num_rows()).sum();
            assert_eq!(read.rows.len() as i64 + read.nulls as i64, declared, "{}", entry.path().display());
        }
        let mut source = Source::open(&root, Limits::default()).unwrap();
        source.reload();
        let snap = source.view().snapshot("fuzz", 0.0, 1.0);
        // The packets and bytes are the totals' sums, saturating like each total.
        let sum = |f: fn(&sonde_http::TrafficRow) -> u64| {
            snap.totals.iter().map(|t| u128::from(f(t))).sum::<u128>().min(u128::from(u64::MAX)) as u64
        };
        assert_eq!((snap.status.packets, snap.status.bytes), (sum(|t| t.packets), sum(|t| t.bytes)));
        // /metrics stays valid whatever names the file holds.
        for line in sonde_http::render_metrics(&snap, &[]).lines() {
            let name = match line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")) {
                Some(rest) => rest.split(' ').next().unwrap_or_default(),
                None => line.split(['{', ' ']).next().unwrap_or_default(),
            };
            assert!(is_name(name), "{}: a bad name in /metrics: {line:?}", entry.path().display());
        }
        n += 1;
    }
    assert!(n > 0, "no inputs in {}", dir.display());
}
