//! Against the real rrdtool (Debian's package; `make deps` installs it). These tests fail, not
//! skip, when rrdtool is missing.
//!
//! - The XML export is accepted by `rrdtool restore`, and `rrdtool fetch` of the restored file
//!   returns the stored values, for every consolidation function at every resolution, unknown
//!   rows included.
//! - rrdtool fed the same updates consolidates to the same rows and the same consolidation
//!   state, and a restored export continues in rrdtool exactly as the store continues.

mod common;

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{scenario, small_spec};
use sonde_rrd::{Spec, Store};

const START_S: u64 = 1_700_000_100;

fn rrdtool(args: &[&str]) -> String {
    let out = Command::new("rrdtool")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run rrdtool ({e}): install it with `make deps` (Debian package rrdtool)"));
    assert!(out.status.success(), "rrdtool {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// Runs rrdtool commands, one per line, through `rrdtool -`.
fn rrdtool_script(dir: &Path, lines: &[String]) {
    let script = dir.join("script.txt");
    fs::write(&script, lines.join("\n") + "\n").unwrap();
    let out =
        Command::new("rrdtool").arg("-").stdin(Stdio::from(File::open(&script).unwrap())).output().unwrap_or_else(
            |e| panic!("cannot run rrdtool ({e}): install it with `make deps` (Debian package rrdtool)"),
        );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && !stdout.contains("ERROR"), "rrdtool - failed: {stdout}");
}

fn export(store: &Store, path: &Path) {
    let mut xml = Vec::new();
    store.export_rrdtool_xml(&mut xml).unwrap();
    fs::write(path, xml).unwrap();
}

fn store_with(dir: &Path, name: &str, spec: &Spec, updates: &[(u64, Vec<f64>)]) -> (Store, PathBuf) {
    let path = dir.join(name);
    let mut store = Store::create(&path, spec, START_S).unwrap();
    for (t, v) in updates {
        store.update(*t, v).unwrap();
    }
    (store, path)
}

/// `rrdtool fetch` output: (time, values), "nan"/"-nan" as NaN.
fn parse_fetch(out: &str) -> Vec<(u64, Vec<f64>)> {
    out.lines()
        .filter_map(|line| line.split_once(':'))
        .map(|(t, rest)| {
            let values = rest
                .split_whitespace()
                .map(|v| if v.ends_with("nan") { f64::NAN } else { v.parse().unwrap() })
                .collect();
            (t.trim().parse().unwrap(), values)
        })
        .collect()
}

/// Equal to the 11 significant digits rrdtool prints, NaN equal to NaN.
fn close(a: f64, b: f64, rel: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= rel * a.abs().max(b.abs())
}

#[test]
fn rrdtool_restore_of_the_export_then_fetch_returns_the_stored_values() {
    let dir = tempfile::tempdir().unwrap();
    let spec = small_spec();
    let updates = scenario(21, START_S, spec.step_s, 400, spec.sources.len());
    let (store, _) = store_with(dir.path(), "s.rrd", &spec, &updates);
    let xml = dir.path().join("s.xml");
    let rrd = dir.path().join("s-restored.rrd");
    export(&store, &xml);
    rrdtool(&["restore", xml.to_str().unwrap(), rrd.to_str().unwrap()]);

    let last = store.last_update_s();
    let mut checked_rows = 0;
    let mut unknown = 0;
    for (a, archive) in spec.archives.iter().enumerate() {
        let res = spec.resolution_s(a);
        let window = res * u64::from(archive.rows);
        // The whole window, an unaligned part of it, and a range reaching past the last update.
        let ranges =
            [(last - last % res - window, last), (last - window / 2 + 7, last - res - 1), (last - res, last + 2 * res)];
        for (start, end) in ranges {
            let mine = store.fetch(archive.cf, res, start, end).unwrap();
            let theirs = parse_fetch(&rrdtool(&[
                "fetch",
                rrd.to_str().unwrap(),
                archive.cf.name(),
                "-r",
                &res.to_string(),
                "-s",
                &start.to_string(),
                "-e",
                &end.to_string(),
            ]));
            assert_eq!(mine.rows.len(), theirs.len(), "archive {a} {start}..{end}: row count");
            for (row, (t, values)) in mine.rows.iter().zip(&theirs) {
                assert_eq!(row.time_s, *t, "archive {a}: rrdtool chose another archive or range");
                for (m, r) in row.values.iter().zip(values) {
                    assert!(close(*m, *r, 1e-10), "archive {a} ({archive:?}) at {t}: stored {m}, rrdtool {r}");
                    checked_rows += 1;
                    unknown += usize::from(m.is_nan());
                }
            }
        }
        // And the store's own rows are what the whole-window fetch returned.
        let rows = store.archive_rows(a).unwrap();
        let mine = store.fetch(archive.cf, res, last - last % res - window, last).unwrap();
        for (i, row) in mine.rows.iter().take(rows.times_s.len()).enumerate() {
            assert_eq!(row.time_s as i64, rows.times_s[i]);
        }
    }
    assert!(checked_rows > 500 && unknown > 50 && unknown < checked_rows / 2, "{checked_rows} {unknown}");
}

/// Every `<tag>text</tag>` of the given tags, in document order.
fn xml_fields(xml: &str, tags: &[&str]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(open) = rest.find('<') {
        rest = &rest[open + 1..];
        let Some(close) = rest.find('>') else { break };
        let tag = &rest[..close];
        if tags.contains(&tag) {
            let body = &rest[close + 1..];
            let end = body.find(&format!("</{tag}>")).unwrap();
            out.push((tag.to_string(), body[..end].trim().to_string()));
        }
        rest = &rest[close + 1..];
    }
    out
}

fn number(s: &str) -> f64 {
    match s {
        "NaN" | "nan" | "-nan" => f64::NAN,
        "inf" => f64::INFINITY,
        "-inf" => f64::NEG_INFINITY,
        _ => s.parse().unwrap_or_else(|_| panic!("not a number: {s:?}")),
    }
}

/// The archives and consolidation state of two dumps agree (to rrdtool's printed precision).
fn assert_same_dump(mine: &str, theirs: &str, what: &str) {
    let tags =
        ["lastupdate", "primary_value", "secondary_value", "value", "unknown_datapoints", "v", "cf", "pdp_per_row"];
    let (m, t) = (xml_fields(mine, &tags), xml_fields(theirs, &tags));
    assert_eq!(m.len(), t.len(), "{what}: field count");
    let mut rows = 0;
    for (i, ((mt, mv), (tt, tv))) in m.iter().zip(&t).enumerate() {
        assert_eq!(mt, tt, "{what}: field {i}");
        match mt.as_str() {
            "cf" | "pdp_per_row" | "lastupdate" | "unknown_datapoints" => {
                assert_eq!(mv, tv, "{what}: field {i} <{mt}>")
            }
            _ => assert!(close(number(mv), number(tv), 1e-9), "{what}: field {i} <{mt}>: mine {mv}, rrdtool {tv}"),
        }
        rows += usize::from(mt == "v");
    }
    assert!(rows > 100, "{what}: only {rows} values compared");
}

fn create_line(spec: &Spec, path: &Path) -> String {
    let mut line = format!("create {} --start {START_S} --step {}", path.display(), spec.step_s);
    for name in &spec.sources {
        // Heartbeat of one step: a skipped step is unknown, as in the store.
        line += &format!(" DS:{name}:GAUGE:{}:U:U", spec.step_s);
    }
    for a in &spec.archives {
        line += &format!(" RRA:{}:{}:{}:{}", a.cf.name(), spec.xff, a.steps, a.rows);
    }
    line
}

fn update_lines(
    path: &Path,
    updates: &[(u64, Vec<f64>)],
    step_s: u64,
    last_s: u64,
    explicit_gaps: bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    let mut prev = last_s;
    for (t, values) in updates {
        if explicit_gaps {
            for gap in (prev + step_s..*t).step_by(step_s as usize) {
                lines.push(format!("update {} {gap}:{}", path.display(), vec!["U"; values.len()].join(":")));
            }
        }
        let v: Vec<String> = values.iter().map(|v| if v.is_nan() { "U".into() } else { format!("{v}") }).collect();
        lines.push(format!("update {} {t}:{}", path.display(), v.join(":")));
        prev = *t;
    }
    lines
}

#[test]
fn rrdtool_fed_the_same_updates_consolidates_the_same() {
    let dir = tempfile::tempdir().unwrap();
    for (seed, xff) in [(31, 0.5), (32, 0.0), (33, 0.7)] {
        let spec = Spec { xff, ..small_spec() };
        let updates = scenario(seed, START_S, spec.step_s, 300, spec.sources.len());
        let (store, _) = store_with(dir.path(), &format!("s{seed}.rrd"), &spec, &updates);
        let mut mine = Vec::new();
        store.export_rrdtool_xml(&mut mine).unwrap();
        let mine = String::from_utf8(mine).unwrap();

        // Skipped steps given to rrdtool as explicit unknown updates: the same state throughout.
        let explicit = dir.path().join(format!("explicit{seed}.rrd"));
        let mut lines = vec![create_line(&spec, &explicit)];
        lines.extend(update_lines(&explicit, &updates, spec.step_s, START_S, true));
        rrdtool_script(dir.path(), &lines);
        assert_same_dump(&mine, &rrdtool(&["dump", explicit.to_str().unwrap()]), &format!("seed {seed}"));

        // Skipped steps left out: rrdtool applies an update's value to the whole interval since
        // the previous update, and an interval longer than the heartbeat (one step) is unknown.
        // So the point after a gap is lost too; otherwise the rows are the same.
        let bulk = dir.path().join(format!("bulk{seed}.rrd"));
        let mut lines = vec![create_line(&spec, &bulk)];
        lines.extend(update_lines(&bulk, &updates, spec.step_s, START_S, false));
        rrdtool_script(dir.path(), &lines);
        let mut prev = START_S;
        let mut lost = 0;
        let without_points_after_gaps: Vec<(u64, Vec<f64>)> = updates
            .iter()
            .map(|(t, v)| {
                let after_gap = *t - prev > spec.step_s;
                prev = *t;
                lost += usize::from(after_gap);
                (*t, if after_gap { vec![f64::NAN; v.len()] } else { v.clone() })
            })
            .collect();
        assert!(lost > 5);
        let (other, _) = store_with(dir.path(), &format!("lost{seed}.rrd"), &spec, &without_points_after_gaps);
        let mut expected = Vec::new();
        other.export_rrdtool_xml(&mut expected).unwrap();
        let values = |xml: &str| xml_fields(xml, &["v"]).into_iter().map(|(_, v)| number(&v)).collect::<Vec<_>>();
        let (m, t) =
            (values(&String::from_utf8(expected).unwrap()), values(&rrdtool(&["dump", bulk.to_str().unwrap()])));
        assert_eq!(m.len(), t.len());
        assert!(m.iter().zip(&t).all(|(a, b)| close(*a, *b, 1e-9)), "seed {seed}: rows differ with bulk updates");
    }
}

#[test]
fn a_restored_export_continues_in_rrdtool_as_the_store_continues() {
    let dir = tempfile::tempdir().unwrap();
    let spec = small_spec();
    let updates = scenario(41, START_S, spec.step_s, 400, spec.sources.len());
    // Stop in the middle of rows of every length.
    let (first, second) = updates.split_at(203);
    let (mut store, _) = store_with(dir.path(), "s.rrd", &spec, first);
    let xml = dir.path().join("half.xml");
    let rrd = dir.path().join("half.rrd");
    export(&store, &xml);
    rrdtool(&["restore", xml.to_str().unwrap(), rrd.to_str().unwrap()]);
    let last = store.last_update_s();
    for (t, v) in second {
        store.update(*t, v).unwrap();
    }
    let mut lines = Vec::new();
    lines.extend(update_lines(&rrd, second, spec.step_s, last, true));
    rrdtool_script(dir.path(), &lines);
    let mut mine = Vec::new();
    store.export_rrdtool_xml(&mut mine).unwrap();
    assert_same_dump(&String::from_utf8(mine).unwrap(), &rrdtool(&["dump", rrd.to_str().unwrap()]), "continued");
}
