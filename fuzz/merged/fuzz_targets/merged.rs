//! The merged view's reader (sonde-merged): a Parquet file of one of the Spark merge job's six
//! changelogs, read (`read_file`), applied to the view as `Source::reload` applies it, and made
//! into the HTTP server's snapshot (docs/merged.md). The files are written by a job sonde does
//! not control, so no bytes may make it panic.
//!
//! Input: byte 0 is a selector, the rest the file. Selector bits 0-2 pick the changelog
//! (`Changelog::ALL`, 6 and 7 wrap to the first two), bit 3 also reads the file through a
//! `Source` over its directory, bits 4-7 give a second view small limits (1-4 intervals, 1-2
//! probes, 1-2 rows per flow table and interval, top 1-2) so that the bounds are reached.
//! The file is written to the same path of a directory of this process's each time.
//!
//! Asserts:
//! - `read_file` returns Ok or Err, never a panic (it turns the Parquet reader's into errors:
//!   hence `fuzz_nohook!`); when Ok, the rows are of the changelog asked, no row group declared a
//!   negative count, and every row the footer declares is accounted for: rows kept + rows left
//!   out for a null = declared rows.
//! - Reading a file twice changes nothing (docs/merged.md): applying its rows again returns
//!   false and leaves the view's data (intervals, histograms, totals, probes, tables) as it was,
//!   also after the oldest intervals were let go; for the flow tables (hosts, pairs), whose
//!   bound keeps the largest rows in the order they come, when the bound let nothing go and no
//!   row was dropped.
//! - The limits hold after `evict`: intervals held ≤ `max_intervals` (counters and flow tables),
//!   probes ≤ `max_probes`, rows per flow interval ≤ `max_table_rows`, ranks ≤ 2 × `top` per
//!   interval; intervals are oldest first.
//! - The totals never go down: letting intervals go leaves the snapshot's totals, packets and
//!   bytes as they were, and the packets and bytes are the sums of the rows' (saturating).
//! - The snapshot serializes (serde_json, as the API answers) and renders as valid `/metrics`
//!   text (names of the allowed characters, one sample a line); through a `Source`, a reload
//!   gives the view the rows gave, counts the file read (or unreadable, naming it), and a
//!   second reload reads nothing again.

use std::fs::File;
use std::path::{Path, PathBuf};

use parquet::file::metadata::ParquetMetaDataReader;
use serde_json::{json, Value};
use sonde_http::Snapshot;
use sonde_merged::read::FileRows;
use sonde_merged::{read_file, Changelog, Limits, MergedView, Rows, Source};

/// Files declaring more rows are not read: the reader's memory grows with the rows a footer
/// declares (a few bytes of run-length encoding can declare billions), which is not what this
/// target looks for. (A negative count is read: read_file must refuse it before reading.)
const MAX_ROWS: i128 = 1 << 16;

fn kind(rows: &Rows) -> Changelog {
    match rows {
        Rows::Intervals(_) => Changelog::Intervals,
        Rows::Quantiles(_) => Changelog::Quantiles,
        Rows::Histograms(_) => Changelog::Histograms,
        Rows::Probes(_) => Changelog::Probes,
        Rows::Hosts(_) => Changelog::Hosts,
        Rows::Pairs(_) => Changelog::Pairs,
    }
}

/// The rows the footer declares, and whether a row group declares a negative count, when it
/// reads.
fn declared_rows(path: &Path) -> Option<(i128, bool)> {
    let meta = ParquetMetaDataReader::new().parse_and_finish(&File::open(path).ok()?).ok()?;
    let counts = meta.row_groups().iter().map(|g| i128::from(g.num_rows()));
    Some((counts.clone().sum(), counts.clone().any(|n| n < 0)))
}

/// What the view holds, as the API serves it (`/api/intervals`, `/api/histograms`, the totals
/// of `/metrics`, `/api/probes`, `/api/tables`): its data, not what reading met.
fn data(s: &Snapshot) -> Value {
    json!({
        "intervals": s.intervals,
        "histograms": s.intervals.histograms,
        "totals": s.totals,
        "probes": s.probes,
        "tables": s.tables,
    })
}

fn merged(s: &Snapshot) -> &sonde_http::MergedStatus {
    s.status.merged.as_ref().expect("a merged view's status")
}

fn small_limits(sel: u8) -> Limits {
    let bits = usize::from(sel >> 4);
    Limits {
        max_intervals: 1 + (bits & 3),
        max_probes: 1 + (bits >> 2 & 1),
        max_table_rows: 1 + (bits >> 3),
        top: 1 + (bits >> 2 & 1),
    }
}

/// Applies `file` as `Source::reload` does to a view of `limits`, checking the invariants;
/// the snapshot after the first apply and after `evict`.
fn view_of(file: &FileRows, log: Changelog, limits: Limits) -> (Snapshot, Snapshot) {
    let flows = matches!(log, Changelog::Hosts | Changelog::Pairs);
    let mut view = MergedView::new(limits);
    view.counters.files_read += 1;
    view.counters.rows_dropped += file.nulls;
    view.apply(file.rows.clone());
    let first = view.snapshot("fuzz", 0.0, 1.0);
    let m = merged(&first);
    // For a flow table: nothing let go by the bound, no row dropped (not a finite time).
    let settled = m.table_rows_let_go == 0 && m.rows_dropped == file.nulls;

    // Read twice: nothing changes.
    let again = view.apply(file.rows.clone());
    if !flows || settled {
        assert!(!again, "{log:?}: applying the same rows again changed the view");
        assert_eq!(data(&first), data(&view.snapshot("fuzz", 0.0, 1.0)), "{log:?}: the same rows again");
    }

    view.evict();
    let kept = view.snapshot("fuzz", 0.0, 1.0);
    check_limits(&view, &kept, limits);
    // What left the view stays in the totals.
    assert_eq!((first.status.packets, first.status.bytes), (kept.status.packets, kept.status.bytes), "{log:?}");
    assert_eq!(json!(first.totals), json!(kept.totals), "{log:?}: the totals went down");

    // Read again after the oldest intervals left: rows of theirs are dropped, nothing comes back.
    view.apply(file.rows.clone());
    if !flows || settled {
        assert_eq!(data(&kept), data(&view.snapshot("fuzz", 0.0, 1.0)), "{log:?}: the same rows after evict");
    }
    check_limits(&view, &view.snapshot("fuzz", 0.0, 1.0), limits);
    (first, kept)
}

fn check_limits(view: &MergedView, s: &Snapshot, l: Limits) {
    let m = merged(s);
    assert!(
        view.held_intervals() <= l.max_intervals,
        "{} intervals held, limit {}",
        view.held_intervals(),
        l.max_intervals
    );
    assert!(s.intervals.items.len() <= l.max_intervals && m.flow_intervals <= l.max_intervals);
    assert_eq!(s.intervals.items.len(), s.intervals.histograms.len());
    assert!(
        s.probes.len() <= l.max_probes && m.probes == s.probes.len(),
        "{} probes, limit {}",
        s.probes.len(),
        l.max_probes
    );
    let per = m.flow_intervals;
    assert!(s.tables.hosts.len() <= per * l.max_table_rows, "{} hosts in {per} intervals", s.tables.hosts.len());
    assert!(s.tables.matrix.len() <= per * l.max_table_rows, "{} pairs in {per} intervals", s.tables.matrix.len());
    assert!(s.tables.top.len() <= per * 2 * l.top, "{} ranks in {per} intervals", s.tables.top.len());
    // Oldest first, one histograms entry per interval.
    for (w, h) in s.intervals.items.windows(2).zip(&s.intervals.histograms) {
        assert!(w[0].start_s < w[1].start_s, "intervals out of order: {} then {}", w[0].start_s, w[1].start_s);
        assert_eq!(w[0].start_s.to_bits(), h.start_s.to_bits());
    }
    // The packets and bytes are the totals' sums (saturating: each is a u64).
    let sum = |f: fn(&sonde_http::TrafficRow) -> u64| {
        s.totals.iter().map(|t| u128::from(f(t))).sum::<u128>().min(u128::from(u64::MAX)) as u64
    };
    assert_eq!((s.status.packets, s.status.bytes), (sum(|t| t.packets), sum(|t| t.bytes)));
    // Served: the API's JSON and the Prometheus text.
    serde_json::to_vec(s).expect("the snapshot as JSON");
    serde_json::to_vec(&s.intervals.histograms).expect("the histograms as JSON");
    let metrics = sonde_http::render_metrics(s, &[]);
    assert!(metrics.contains("sonde_merged_files_read_total"));
    exposition_is_valid(&metrics);
}

/// The Prometheus text format (0.0.4): `# HELP name …`, `# TYPE name kind`, and samples
/// `name{label="value",…} number`, every name of `[a-zA-Z_:][a-zA-Z0-9_:]*`. The file's strings
/// (metric names, probe names) must not make lines of their own or break a name.
fn exposition_is_valid(text: &str) {
    let name_ok = |n: &str| {
        let mut c = n.chars();
        c.next().is_some_and(|f| f.is_ascii_alphabetic() || f == '_' || f == ':')
            && c.all(|x| x.is_ascii_alphanumeric() || x == '_' || x == ':')
    };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ").or_else(|| line.strip_prefix("# TYPE ")) {
            let name = rest.split(' ').next().unwrap_or_default();
            assert!(name_ok(name), "a bad family name in /metrics: {line:?}");
            continue;
        }
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        assert!(name_ok(name), "a bad sample name in /metrics: {line:?}");
        let value = line.rsplit(' ').next().unwrap_or_default();
        assert!(
            matches!(value, "NaN" | "+Inf" | "-Inf") || value.parse::<f64>().is_ok(),
            "a bad value in /metrics: {line:?}"
        );
    }
}

fn check(root: &Path, path: &Path, log: Changelog, sel: u8) {
    // Left out: a footer declaring too many rows.
    let declared = declared_rows(path);
    if declared.is_some_and(|(n, _)| n > MAX_ROWS) {
        return;
    }
    let views = match read_file(path, log) {
        Ok(file) => {
            assert_eq!(kind(&file.rows), log, "rows of another changelog");
            if let Some((n, negative)) = declared {
                assert!(!negative, "{log:?}: a file declaring a negative row count was read");
                let (rows, nulls) = (file.rows.len(), file.nulls);
                let accounted = rows as i128 + i128::from(nulls);
                assert_eq!(accounted, n, "{log:?}: {rows} rows + {nulls} nulls, the footer declares {n}");
            }
            view_of(&file, log, small_limits(sel));
            Ok(view_of(&file, log, Limits::default()))
        }
        Err(e) => Err(e),
    };
    if sel & 8 != 0 {
        through_source(root, path, log, views);
    }
}

/// The same file through a `Source` over its directory, as `sonde serve --merged` reads it:
/// the view the rows gave (`views`: after the first apply, after `evict`), or the file counted
/// unreadable.
fn through_source(
    root: &Path,
    path: &Path,
    log: Changelog,
    views: Result<(Snapshot, Snapshot), sonde_merged::ReadError>,
) {
    let mut source = Source::open(root, Limits::default()).expect("the directory");
    assert!(source.reload(), "a first reload of a directory with a file changed nothing");
    let snap = source.view().snapshot("fuzz", 0.0, 1.0);
    let m = merged(&snap);
    match views {
        Ok((first, kept)) => {
            assert_eq!((m.files_read, m.files_unreadable, m.read_failures), (1, 0, 0));
            assert_eq!(m.rows_dropped, merged(&first).rows_dropped);
            assert_eq!(data(&snap), data(&kept), "{log:?}: a reload gave another view than the rows");
            // Read once: the next reload finds nothing new.
            assert!(!source.reload(), "{log:?}: a second reload changed the view");
        }
        Err(e) => {
            assert_eq!((m.files_read, m.files_unreadable, m.read_failures), (0, 1, 1));
            let failure = m.last_failure.as_deref().unwrap_or_default();
            assert!(failure.contains(&*path.to_string_lossy()) && failure.contains(&e.0), "{failure}");
            assert_eq!(data(&snap), data(&MergedView::new(Limits::default()).snapshot("fuzz", 0.0, 1.0)));
        }
    }
}

fn main() {
    // One directory per changelog, each holding only that changelog's subdirectory, so that a
    // Source over it sees the one file; made once, the file overwritten at each input.
    let base = std::env::temp_dir().join(format!("sonde-fuzz-merged-{}", std::process::id()));
    let files: Vec<(PathBuf, PathBuf)> = Changelog::ALL
        .iter()
        .enumerate()
        .map(|(i, log)| {
            let root = base.join(i.to_string());
            std::fs::create_dir_all(root.join(log.dir())).expect("a temporary directory");
            let path = root.join(log.dir()).join("part-00000.parquet");
            (root, path)
        })
        .collect();
    // Without afl's panic hook (which aborts at any panic, caught or not): read_file catches the
    // Parquet reader's panics, a damaged file's read error. A panic nothing catches still aborts
    // (afl runs each input under catch_unwind and aborts when it unwound), so it is a crash.
    afl::fuzz_nohook!(|data: &[u8]| {
        let [sel, bytes @ ..] = data else { return };
        let i = usize::from(sel & 7) % Changelog::ALL.len();
        let (root, path) = &files[i];
        std::fs::write(path, bytes).expect("writing the input");
        check(root, path, Changelog::ALL[i], *sel);
    });
    let _ = std::fs::remove_dir_all(&base);
}
