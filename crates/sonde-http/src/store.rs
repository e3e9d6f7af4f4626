//! The long-term store (sonde-rrd) in the API, as Tstat's web interface browses its round-robin
//! archives: `/api/store` lists the series and the archives (resolution and consolidation), and
//! `/api/store/series` returns one series of one archive over a time range. The store is read
//! from its file at each request (read-only, off the async workers), so a monitor that updates
//! it, or a run that replaces it, is seen at the next request.
//!
//! The values are the stored doubles, exactly those `sonde ts dump` prints for the same rows:
//! rows are the archive's own (end time `time_s`, as in the dump), not re-consolidated.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};
use sonde_rrd::{Cf, Store};

use crate::state::ExportCounter;

/// What `/api/store` answers.
#[derive(Debug, Clone, Serialize)]
pub struct StoreListing {
    /// The store's file name (not its directory).
    pub name: String,
    /// Seconds per primary point (the run's interval).
    pub step_s: u64,
    /// The last update's time (Unix seconds, packet time).
    pub last_update_s: u64,
    /// The data sources, in the store's order.
    pub series: Vec<String>,
    pub archives: Vec<ArchiveListing>,
    /// The resolutions kept, finest first (seconds per row).
    pub resolutions_s: Vec<u64>,
    /// Most points one `/api/store/series` answer holds (`--http-max-store-points`).
    pub max_points: usize,
}

#[derive(Debug, Clone, Serialize)]
pub struct ArchiveListing {
    /// The archive's index in the store (`archive` in `sonde ts dump`).
    pub archive: usize,
    /// `AVERAGE`, `MIN`, `MAX` or `LAST`.
    pub cf: &'static str,
    pub resolution_s: u64,
    pub rows: u32,
    /// Seconds the archive spans (rows × resolution).
    pub span_s: u64,
    /// End times of its oldest and newest rows (Unix seconds).
    pub first_s: i64,
    pub last_s: i64,
}

/// A `/api/store/series` query.
#[derive(Debug, Clone, Deserialize)]
pub struct SeriesQuery {
    /// The data source.
    pub name: String,
    /// Seconds per row: one of the store's resolutions (default: the finest).
    pub resolution_s: Option<u64>,
    /// `AVERAGE` (default), `MIN`, `MAX` or `LAST` (case-insensitive).
    pub cf: Option<String>,
    /// Rows ending at or after this time (Unix seconds; default: the archive's oldest row).
    pub start_s: Option<i64>,
    /// Rows ending at or before this time (default: the archive's newest row).
    pub end_s: Option<i64>,
}

/// What `/api/store/series` answers: `points` are `[time_s, value]`, oldest first, the value
/// null where unknown.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesAnswer {
    pub name: String,
    pub cf: &'static str,
    pub archive: usize,
    pub resolution_s: u64,
    pub points: Vec<(i64, Option<f64>)>,
}

/// Why a store query is refused: (HTTP status, error code, message).
#[derive(Debug)]
pub struct Refused(pub u16, pub &'static str, pub String);

/// The store's answers and refusals so far, for `/metrics`.
#[derive(Debug, Default)]
pub struct StoreCounters {
    pub answered: AtomicU64,
    /// Refused for asking more points than `max_points`.
    pub too_many_points: AtomicU64,
    /// Refused for another reason (no store, unknown series, resolution, bad range, unreadable).
    pub refused: AtomicU64,
}

impl StoreCounters {
    pub(crate) fn count(&self, result: &Result<impl Sized, Refused>) {
        let c = match result {
            Ok(_) => &self.answered,
            Err(Refused(_, "too_many_points", _)) => &self.too_many_points,
            Err(_) => &self.refused,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn counters(&self) -> Vec<ExportCounter> {
        let c = |outcome: &'static str, v: &AtomicU64| ExportCounter {
            name: "sonde_http_store_queries_total",
            help: "Queries of the long-term store (/api/store, /api/store/series), by outcome (answered; \
                   too_many_points, beyond --http-max-store-points; refused, for another reason)",
            labels: vec![("outcome", outcome)],
            value: v.load(Ordering::Relaxed),
        };
        vec![c("answered", &self.answered), c("too_many_points", &self.too_many_points), c("refused", &self.refused)]
    }
}

fn open(path: &Path) -> Result<Store, Refused> {
    Store::open_read_only(path).map_err(|e| match e {
        // A monitor's first store is written when it ends: until then there is none.
        sonde_rrd::Error::Io(e) if e.kind() == std::io::ErrorKind::NotFound => Refused(
            404,
            "no_store",
            "the store is not written yet (a run adds its intervals to it when it ends)".into(),
        ),
        e => Refused(503, "store_unreadable", format!("the store cannot be read: {e}")),
    })
}

/// The store's listing.
pub fn listing(path: &Path, max_points: usize) -> Result<StoreListing, Refused> {
    let store = open(path)?;
    let spec = store.spec();
    let last = store.last_update_s() as i64;
    let archives: Vec<ArchiveListing> = spec
        .archives
        .iter()
        .enumerate()
        .map(|(archive, a)| {
            let resolution_s = spec.resolution_s(archive);
            let r = resolution_s as i64;
            let last_s = last - last % r;
            ArchiveListing {
                archive,
                cf: a.cf.name(),
                resolution_s,
                rows: a.rows,
                span_s: resolution_s * u64::from(a.rows),
                first_s: last_s - (i64::from(a.rows) - 1) * r,
                last_s,
            }
        })
        .collect();
    let mut resolutions_s: Vec<u64> = archives.iter().map(|a| a.resolution_s).collect();
    resolutions_s.sort_unstable();
    resolutions_s.dedup();
    Ok(StoreListing {
        name: path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default(),
        step_s: spec.step_s,
        last_update_s: store.last_update_s(),
        series: spec.sources.clone(),
        archives,
        resolutions_s,
        max_points,
    })
}

/// One series of one archive over a range; refused when the range holds more than
/// `max_points` rows (nothing is read then beyond the header).
pub fn series(path: &Path, q: &SeriesQuery, max_points: usize) -> Result<SeriesAnswer, Refused> {
    let store = open(path)?;
    let spec = store.spec();
    let Some(source) = spec.sources.iter().position(|s| *s == q.name) else {
        return Err(Refused(
            404,
            "no_series",
            format!("the store has no series {:?} (GET /api/store lists them)", q.name),
        ));
    };
    let cf = match q.cf.as_deref() {
        None => Cf::Average,
        Some(name) => Cf::from_name(name)
            .ok_or_else(|| Refused(400, "bad_query", format!("cf is AVERAGE, MIN, MAX or LAST, not {name:?}")))?,
    };
    let of_cf = || spec.archives.iter().enumerate().filter(|(_, a)| a.cf == cf).map(|(i, _)| i);
    let resolution_s = match q.resolution_s {
        Some(r) => r,
        None => of_cf().map(|i| spec.resolution_s(i)).min().unwrap_or(0),
    };
    let Some(archive) = of_cf().find(|&i| spec.resolution_s(i) == resolution_s) else {
        let mut kept: Vec<u64> = of_cf().map(|i| spec.resolution_s(i)).collect();
        kept.sort_unstable();
        kept.dedup();
        return Err(Refused(
            404,
            "no_archive",
            format!("the store keeps no {} archive at {resolution_s} s (it keeps {kept:?} s)", cf.name()),
        ));
    };
    let r = resolution_s as i64;
    let rows = i64::from(spec.archives[archive].rows);
    let last = store.last_update_s() as i64;
    let (oldest, newest) = (last - last % r - (rows - 1) * r, last - last % r);
    let start = q.start_s.unwrap_or(oldest).max(oldest);
    let end = q.end_s.unwrap_or(newest).min(newest);
    if let (Some(s), Some(e)) = (q.start_s, q.end_s) {
        if s > e {
            return Err(Refused(400, "bad_query", format!("start_s {s} is after end_s {e}")));
        }
    }
    // Rows ending in [start, end]: the first on or after start, on the archive's grid.
    let first = start + (oldest - start).rem_euclid(r);
    let count = if first > end { 0 } else { ((end - first) / r + 1) as usize };
    if count > max_points {
        return Err(Refused(
            413,
            "too_many_points",
            format!(
                "{count} rows of {resolution_s} s in the range, more than --http-max-store-points {max_points}: \
                 narrow start_s..end_s or pick a coarser resolution"
            ),
        ));
    }
    let all = store.archive_rows(archive).map_err(|e| Refused(503, "store_unreadable", e.to_string()))?;
    let sources = spec.sources.len();
    let points = all
        .times_s
        .iter()
        .enumerate()
        .filter(|&(_, &t)| t >= start && t <= end)
        .map(|(i, &t)| {
            let v = all.values[i * sources + source];
            (t, v.is_finite().then_some(v))
        })
        .collect();
    Ok(SeriesAnswer { name: q.name.clone(), cf: cf.name(), archive, resolution_s, points })
}
