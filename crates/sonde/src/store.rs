//! `analyze --store`: adding a run's intervals to a round-robin time-series store.

use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::Serialize;
use sonde_rrd::{Spec, Store};
use sonde_stats::Report;

const SECOND_NS: u64 = 1_000_000_000;

/// What a run did to its store.
#[derive(Debug, Serialize)]
pub struct StoreReport {
    pub path: String,
    pub created: bool,
    /// Intervals written.
    pub updates: u64,
    /// Intervals the store already had (an earlier run ended in or after them): not written.
    pub already_stored: u64,
}

/// The store's step is the interval: it must be a whole number of seconds.
pub fn check_interval(interval_ns: Option<u64>) -> Result<()> {
    match interval_ns {
        None => bail!("--store needs the interval outputs (an --interval other than 0)"),
        Some(ns) if ns % SECOND_NS != 0 => {
            bail!("--store needs a whole number of seconds as --interval (its step), not {} s", ns as f64 / 1e9)
        }
        Some(_) => Ok(()),
    }
}

/// Adds every interval of `report` after the store's last update (created with the Tstat
/// resolutions if missing); the intervals it already holds are counted, not written.
pub fn add_intervals(path: &Path, cfg: &sonde_stats::Config, report: &Report) -> Result<StoreReport> {
    let step_s = cfg.interval_ns / SECOND_NS;
    let what = || path.display().to_string();
    let created = !path.exists();
    let mut result = StoreReport { path: what(), created, updates: 0, already_stored: 0 };
    let Some(&first) = report.intervals.keys().next() else { return Ok(result) };
    let spec = Spec::tstat_default(step_s, Report::series_names());
    let mut store = Store::open_or_create(path, &spec, first * step_s).with_context(what)?;
    if store.spec().step_s != step_s {
        bail!("{}: the store's step is {} s, but --interval is {step_s} s", what(), store.spec().step_s);
    }
    // A row is the step *ending* at its time.
    let from = store.last_update_s() / step_s;
    let rows = report.series(from);
    result.already_stored = report.intervals.range(..from).count() as u64;
    for row in rows {
        store.update((row.index + 1) * step_s, &row.values).with_context(what)?;
        result.updates += 1;
    }
    store.sync().with_context(what)?;
    Ok(result)
}
