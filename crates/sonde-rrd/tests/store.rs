//! The store end to end: consolidation against a model written from the definition, fixed
//! size, reopening, refused updates, damaged files, fetch.

mod common;

use std::fs;
use std::path::Path;

use common::{expected_rows, same_values, scenario, small_spec, stored_rows, Lcg};
use sonde_rrd::{ArchiveSpec, Cf, Error, Spec, Store};

fn check_against_model(store: &Store, start_s: u64, updates: &[(u64, Vec<f64>)]) {
    for a in 0..store.spec().archives.len() {
        let want = expected_rows(store.spec(), start_s, updates, a);
        let got = stored_rows(store, a);
        assert_eq!(got.len(), want.len());
        for ((gt, gv), (wt, wv)) in got.iter().zip(&want) {
            assert_eq!(gt, wt, "archive {a}: row times");
            assert!(
                same_values(gv, wv),
                "archive {a} ({:?}) row {gt}: stored {gv:?}, expected {wv:?}",
                store.spec().archives[a]
            );
        }
    }
}

#[test]
fn consolidation_matches_the_definition() {
    let dir = tempfile::tempdir().unwrap();
    for (i, (seed, start_s, xff)) in
        [(1, 0, 0.5), (2, 300 * 7, 0.5), (3, 1_000_000_200, 0.0), (4, 3_600 * 5 + 900, 0.75), (5, 600, 0.34)]
            .into_iter()
            .enumerate()
    {
        let spec = Spec { xff, ..small_spec() };
        let path = dir.path().join(format!("s{i}.rrd"));
        let mut store = Store::create(&path, &spec, start_s).unwrap();
        let updates = scenario(seed, start_s, spec.step_s, 600, spec.sources.len());
        for (n, (t, v)) in updates.iter().enumerate() {
            store.update(*t, v).unwrap();
            // Checking after every update finds a wrong row before it is overwritten.
            if n < 80 || n % 37 == 0 {
                check_against_model(&store, start_s, &updates[..=n]);
            }
        }
        check_against_model(&store, start_s, &updates);
    }
}

#[test]
fn size_is_the_same_after_a_simulated_year_of_five_minute_intervals() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("year.rrd");
    let names = ["bytes", "pkts", "flows", "rtt_avg", "rtt_p50", "rtt_p95"];
    let spec = Spec::tstat_default(300, names.iter().map(|s| s.to_string()).collect());
    let start_s = 1_704_067_200; // 2024-01-01 00:00:00 UTC
    let mut store = Store::create(&path, &spec, start_s).unwrap();
    let size_before = fs::metadata(&path).unwrap().len();
    assert_eq!(size_before, store.file_len_bytes());
    let mut values = vec![0.0; names.len()];
    let intervals = 365 * 288;
    assert_eq!(intervals, 105_120);
    for i in 1..=intervals as u64 {
        // Day d has the value d in every interval, so each daily row is exactly d.
        let day = ((i - 1) / 288) as f64;
        values.iter_mut().enumerate().for_each(|(s, v)| *v = day + s as f64);
        store.update(start_s + i * 300, &values).unwrap();
    }
    store.sync().unwrap();
    drop(store);
    assert_eq!(fs::metadata(&path).unwrap().len(), size_before);

    let store = Store::open(&path).unwrap();
    assert_eq!(store.last_update_s(), start_s + 105_120 * 300);
    let year = store.fetch(Cf::Average, 86_400, start_s, start_s + 364 * 86_400).unwrap();
    assert_eq!(year.resolution_s, 86_400);
    // fetch prints the rows ending after the start through one past the end.
    assert_eq!(year.rows.len(), 365);
    for (d, row) in year.rows.iter().enumerate() {
        assert_eq!(row.time_s, start_s + (d as u64 + 1) * 86_400);
        assert_eq!(row.values[0], d as f64, "day {d}");
        assert_eq!(row.values[5], d as f64 + 5.0);
    }
    // The finest archive holds the last day only.
    let day = store.fetch(Cf::Max, 300, start_s + 364 * 86_400, start_s + 365 * 86_400 - 300).unwrap();
    assert_eq!((day.resolution_s, day.rows.len()), (300, 288));
    assert!(day.rows.iter().all(|r| r.values[0] == 364.0));
}

/// Updates the same scenario into two stores, the second closed and reopened at random points
/// (mid-row too): the files must be byte-identical. This is what makes "analyse a trace in two
/// halves with a restart between" give the same time series as one run.
#[test]
fn reopening_between_updates_gives_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let spec = small_spec();
    let start_s = 300 * 5;
    let updates = scenario(9, start_s, spec.step_s, 500, spec.sources.len());
    let one = dir.path().join("one.rrd");
    let mut store = Store::create(&one, &spec, start_s).unwrap();
    for (t, v) in &updates {
        store.update(*t, v).unwrap();
    }
    drop(store);

    let two = dir.path().join("two.rrd");
    let mut rng = Lcg(77);
    let mut store = Store::create(&two, &spec, start_s).unwrap();
    let mut reopened = 0;
    for (t, v) in &updates {
        if rng.below(5) == 0 {
            drop(store);
            store = Store::open(&two).unwrap();
            reopened += 1;
        }
        store.update(*t, v).unwrap();
    }
    drop(store);
    assert!(reopened > 50);
    assert!(fs::read(&one).unwrap() == fs::read(&two).unwrap(), "files differ");

    // The same through open_or_create, as a monitor restarting would do it.
    let three = dir.path().join("three.rrd");
    for half in updates.chunks(updates.len() / 2 + 1) {
        let mut store = Store::open_or_create(&three, &spec, start_s).unwrap();
        for (t, v) in half {
            store.update(*t, v).unwrap();
        }
    }
    assert!(fs::read(&one).unwrap() == fs::read(&three).unwrap(), "files differ");
}

#[test]
fn refused_updates_change_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.rrd");
    let mut store = Store::create(&path, &small_spec(), 3_000).unwrap();
    store.update(3_300, &[1.0, 2.0, 3.0]).unwrap();
    let before = fs::read(&path).unwrap();
    assert!(matches!(
        store.update(3_300, &[1.0; 3]),
        Err(Error::NotAfterLastUpdate { t_s: 3_300, last_update_s: 3_300 })
    ));
    assert!(matches!(store.update(3_000, &[1.0; 3]), Err(Error::NotAfterLastUpdate { .. })));
    assert!(matches!(store.update(3_601, &[1.0; 3]), Err(Error::OffGrid { t_s: 3_601, step_s: 300 })));
    assert!(matches!(store.update(3_600, &[1.0; 2]), Err(Error::ValueCount { expected: 3, got: 2 })));
    assert!(matches!(store.update(u64::MAX - u64::MAX % 300, &[1.0; 3]), Err(Error::TimeOutOfRange { .. })));
    assert_eq!(fs::read(&path).unwrap(), before);
    // And the store goes on as if they had not happened.
    store.update(3_600, &[4.0, 5.0, 6.0]).unwrap();
    assert_eq!(store.last_update_s(), 3_600);
    for e in [Error::OffGrid { t_s: 1, step_s: 300 }, Error::NotAfterLastUpdate { t_s: 1, last_update_s: 2 }] {
        assert!(e.to_string().contains("not"), "{e}");
    }
}

#[test]
fn create_rounds_the_start_down_and_refuses_bad_specs_and_existing_files() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.rrd");
    let store = Store::create(&path, &small_spec(), 1_000).unwrap();
    assert_eq!((store.start_s(), store.last_update_s()), (900, 900));
    assert!(store.last_values().iter().all(|v| v.is_nan()));
    drop(store);
    match Store::create(&path, &small_spec(), 1_000) {
        Err(Error::Io(e)) => assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists),
        other => panic!("{other:?}"),
    }
    let mut bad = small_spec();
    bad.sources[1] = "rtt-p95".into();
    let err = Store::create(dir.path().join("bad.rrd"), &bad, 0).unwrap_err();
    assert_eq!(err.to_string(), "invalid store spec: data source 1: bad name: '-' is not one of A-Z a-z 0-9 _");
    assert!(!dir.path().join("bad.rrd").exists());
    let mut other = small_spec();
    other.xff = 0.25;
    assert!(matches!(Store::open_or_create(&path, &other, 0), Err(Error::SpecMismatch)));
}

fn open_err(path: &Path) -> String {
    match Store::open(path) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn damaged_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.rrd");
    let mut store = Store::create(&path, &small_spec(), 0).unwrap();
    for (t, v) in scenario(3, 0, 300, 40, 3) {
        store.update(t, &v).unwrap();
    }
    drop(store);
    let good = fs::read(&path).unwrap();
    let bad = dir.path().join("bad.rrd");

    // Every truncation: an error naming the sizes, never a panic.
    for len in (0..good.len()).step_by(7).chain([good.len() - 1]) {
        fs::write(&bad, &good[..len]).unwrap();
        let msg = open_err(&bad);
        assert!(msg.contains("truncated") || msg.contains("damaged"), "{len}: {msg}");
    }
    fs::write(&bad, &good[..good.len() - 1]).unwrap();
    assert_eq!(open_err(&bad), format!("truncated store: {} bytes, its header needs {}", good.len() - 1, good.len()));
    let mut longer = good.clone();
    longer.push(0);
    fs::write(&bad, &longer).unwrap();
    assert!(open_err(&bad).contains("damaged store"));

    // Not a store.
    fs::write(&bad, vec![b'x'; 4096]).unwrap();
    assert_eq!(
        open_err(&bad),
        "not a sonde store or damaged: it does not start with the sonde store magic \"SONDERRD\""
    );
    let mut v2 = good.clone();
    v2[8] = 2;
    fs::write(&bad, &v2).unwrap();
    assert_eq!(open_err(&bad), "store format version 2; this sonde reads version 1");

    // Damage anywhere in the header: caught by the checksum or the state checks, or (in the
    // values) harmless; never a panic.
    // small_spec: 3 sources, 16 archives (docs of the format in src/format.rs).
    let spec_end = (56 + 3 * 20 + 16 * 16usize).next_multiple_of(8);
    let states = spec_end + 8 + 3 * 8;
    let live_end = states + 16 * 3 * 32;
    assert_eq!(good.len(), live_end + 3 * 8 * (4 * (7 + 5 + 6 + 4)));
    let mut rng = Lcg(5);
    for i in 0..live_end {
        let mut b = good.clone();
        b[i] ^= 1 << rng.below(8);
        fs::write(&bad, &b).unwrap();
        if i < spec_end {
            assert!(Store::open(&bad).is_err(), "damaged spec byte {i} accepted");
        } else if let Ok(mut s) = Store::open(&bad) {
            let _ = s.update(s.last_update_s() + 300, &[1.0, 2.0, 3.0]);
            let _ = s.fetch(Cf::Average, 300, 0, 40 * 300);
            let _ = s.export_rrdtool_xml(&mut std::io::sink());
        }
    }
    // An unknown-point count larger than the row could hold.
    let mut b = good.clone();
    // Archive 1 (3 points per row), source 0: its unknown-point count.
    b[states + 32 * 3 + 8..][..8].copy_from_slice(&3u64.to_le_bytes());
    fs::write(&bad, &b).unwrap();
    assert!(open_err(&bad).contains("more unknown points"));
    // A missing file is an I/O error the caller can recognise.
    assert!(
        matches!(Store::open(dir.path().join("none")), Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound)
    );
}

#[test]
fn fetch_chooses_the_archive_as_rrdtool_does() {
    let dir = tempfile::tempdir().unwrap();
    let spec = Spec {
        step_s: 60,
        sources: vec!["v".into()],
        archives: vec![
            ArchiveSpec { cf: Cf::Average, steps: 1, rows: 10 }, // 10 min at 1 min
            ArchiveSpec { cf: Cf::Average, steps: 5, rows: 12 }, // 1 h at 5 min
            ArchiveSpec { cf: Cf::Average, steps: 60, rows: 24 }, // 1 day at 1 h
            ArchiveSpec { cf: Cf::Max, steps: 5, rows: 12 },
        ],
        xff: 0.5,
    };
    let mut store = Store::create(dir.path().join("f.rrd"), &spec, 0).unwrap();
    for k in 1..=180u64 {
        store.update(k * 60, &[k as f64]).unwrap();
    }
    let last = 180 * 60;
    let pick = |cf, res, start| store.fetch(cf, res, start, last).unwrap().archive;
    // Covered by all three: the resolution closest to the one asked for.
    assert_eq!(pick(Cf::Average, 60, last - 300), 0);
    assert_eq!(pick(Cf::Average, 240, last - 300), 1);
    assert_eq!(pick(Cf::Average, 3600, last - 300), 2);
    // Only the coarser ones reach back: the closest of those.
    assert_eq!(pick(Cf::Average, 60, last - 3000), 1);
    assert_eq!(pick(Cf::Average, 60, last - 7200), 2);
    assert_eq!(pick(Cf::Max, 60, 0), 3);
    // None reaches back to the start: the one covering most.
    assert_eq!(pick(Cf::Average, 60, 0), 2);

    let f = store.fetch(Cf::Average, 300, last - 900, last - 1).unwrap();
    assert_eq!(f.resolution_s, 300);
    let times: Vec<u64> = f.rows.iter().map(|r| r.time_s).collect();
    assert_eq!(times, [last - 600, last - 300, last]);
    assert_eq!(f.rows[2].values, [178.0]); // mean of 176..=180
                                           // Past the last update: unknown.
    let f = store.fetch(Cf::Average, 60, last, last).unwrap();
    assert_eq!(f.rows.len(), 1);
    assert!(f.rows[0].values[0].is_nan());

    assert!(matches!(store.fetch(Cf::Last, 60, 0, 60), Err(Error::NoArchive(Cf::Last))));
    assert!(matches!(store.fetch(Cf::Max, 60, 61, 60), Err(Error::BadRange { .. })));
    assert!(matches!(store.fetch(Cf::Average, 1, 0, 1 << 40), Err(Error::TooManyRows { .. })));
}

#[test]
fn a_gap_longer_than_every_archive_leaves_only_the_new_point() {
    let dir = tempfile::tempdir().unwrap();
    let spec = small_spec();
    let path = dir.path().join("gap.rrd");
    let mut store = Store::create(&path, &spec, 0).unwrap();
    let mut updates = scenario(11, 0, 300, 100, 3);
    let (t, _) = *updates.last().unwrap();
    // Ten years later, then a few more points.
    let later = t + 10 * 365 * 86_400;
    for i in 0..30 {
        updates.push((later + i * 300, vec![i as f64, 1.0, f64::NAN]));
    }
    let started = std::time::Instant::now();
    for (t, v) in &updates {
        store.update(*t, v).unwrap();
    }
    assert!(started.elapsed().as_secs() < 5, "a long gap must not be walked step by step");
    check_against_model(&store, 0, &updates);
    let rows = stored_rows(&store, 0);
    assert_eq!(rows.last().unwrap().0, (later + 29 * 300) as i64);
}

#[test]
fn csv_dump_holds_every_row_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let spec = small_spec();
    let mut store = Store::create(dir.path().join("c.rrd"), &spec, 0).unwrap();
    for (t, v) in scenario(13, 0, 300, 200, 3) {
        store.update(t, &v).unwrap();
    }
    let mut csv = Vec::new();
    store.dump_csv(&mut csv).unwrap();
    let text = String::from_utf8(csv).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("archive,cf,resolution_s,time_s,bytes,rtt_p95,flows"));
    let mut expected = Vec::new();
    for (a, archive) in spec.archives.iter().enumerate() {
        for (t, values) in stored_rows(&store, a) {
            expected.push((a, archive.cf.name(), spec.resolution_s(a), t, values));
        }
    }
    let mut unknown = 0;
    for (line, (a, cf, res, t, values)) in lines.by_ref().zip(&expected) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[..4], [a.to_string(), cf.to_string(), res.to_string(), t.to_string()], "{line}");
        let parsed: Vec<f64> =
            f[4..].iter().map(|v| if v.is_empty() { f64::NAN } else { v.parse().unwrap() }).collect();
        assert!(same_values(&parsed, values), "{line}");
        unknown += f[4..].iter().filter(|v| v.is_empty()).count();
    }
    assert_eq!(lines.count(), 0);
    assert_eq!(text.lines().count(), 1 + expected.len());
    assert!(unknown > 0);
}

#[test]
fn a_store_opened_read_only_reads_the_same_rows_and_refuses_updates() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.rrd");
    let spec = small_spec();
    let mut store = Store::create(&path, &spec, 0).unwrap();
    for (t, v) in scenario(7, 0, 300, 50, 3) {
        store.update(t, &v).unwrap();
    }
    let before = fs::read(&path).unwrap();
    let reader = Store::open_read_only(&path).unwrap();
    assert_eq!(reader.last_update_s(), store.last_update_s());
    for a in 0..spec.archives.len() {
        let (mine, theirs) = (stored_rows(&reader, a), stored_rows(&store, a));
        assert_eq!(mine.len(), theirs.len());
        for ((t1, v1), (t2, v2)) in mine.iter().zip(&theirs) {
            assert_eq!(t1, t2);
            assert!(same_values(v1, v2), "archive {a} at {t1}");
        }
    }
    let mut reader = reader;
    let next = reader.last_update_s() + 300;
    assert!(matches!(reader.update(next, &[1.0, 2.0, 3.0]), Err(Error::Io(_))));
    assert_eq!(fs::read(&path).unwrap(), before, "a refused update writes nothing");
}
