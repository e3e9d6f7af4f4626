//! `analyze --store`: adding a run's intervals to a round-robin time-series store.

use std::path::Path;

use anyhow::{bail, Context, Result};
use sonde_rrd::Spec;
use sonde_stats::Report;

use crate::AnalysisConfig;

const SECOND_NS: u64 = 1_000_000_000;

/// What a run did to its store, for summary.json.
use sonde_output::summary::StoreReport;

/// The layout of a store for this run: its step is the interval (a whole number of seconds),
/// its archives Tstat's or those of `--store-archives`.
pub fn spec(interval_ns: Option<u64>, archives: Option<&str>) -> Result<Spec> {
    let step_s = match interval_ns {
        None => bail!("--store needs the interval outputs (an --interval other than 0)"),
        Some(ns) if ns % SECOND_NS != 0 => {
            bail!("--store needs a whole number of seconds as --interval (its step), not {} s", ns as f64 / 1e9)
        }
        Some(ns) => ns / SECOND_NS,
    };
    let Some(text) = archives else { return Ok(Spec::tstat_default(step_s, Report::series_names())) };
    let resolutions = parse_archives(text)?;
    let Some(spec) = Spec::with_resolutions(step_s, Report::series_names(), &resolutions) else {
        bail!("--store-archives {text}: every resolution must be a whole multiple of the step (--interval {step_s} s)")
    };
    spec.validate().with_context(|| format!("--store-archives {text}"))?;
    Ok(spec)
}

/// `RESOLUTION:SPAN,…`, durations as `300`, `300s`, `5m`, `2h`, `1d`, `1w` or `1y` (365 days).
fn parse_archives(text: &str) -> Result<Vec<(u64, u64)>> {
    let duration = |d: &str| -> Result<u64> {
        let (number, unit) = d.split_at(d.find(|c: char| !c.is_ascii_digit()).unwrap_or(d.len()));
        let scale = match unit {
            "" | "s" => 1,
            "m" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            "y" => 365 * 86_400,
            _ => bail!("--store-archives: {d:?} is not a duration (a number and s, m, h, d, w or y)"),
        };
        match number.parse::<u64>().ok().and_then(|n| n.checked_mul(scale)) {
            Some(s) if s > 0 => Ok(s),
            _ => bail!("--store-archives: {d:?} is not a duration of at least 1 s"),
        }
    };
    text.split(',')
        .map(|archive| match archive.trim().split_once(':') {
            Some((resolution, span)) => Ok((duration(resolution.trim())?, duration(span.trim())?)),
            None => bail!("--store-archives: {archive:?} is not RESOLUTION:SPAN (e.g. 5m:1d)"),
        })
        .collect()
}

/// Adds every interval of `report` after the store's last update (created with `spec` if
/// missing); the intervals it already holds are counted, not written. An existing store keeps
/// its archives unless `archives_given` asks for others.
pub fn add_intervals(path: &Path, spec: &Spec, archives_given: bool, report: &Report) -> Result<StoreReport> {
    let mut result = StoreReport { path: path.display().to_string(), created: false, updates: 0, already_stored: 0 };
    let Some(&first) = report.intervals.keys().next() else { return Ok(result) };
    let rows = |from| report.series(from).into_iter().map(|row| (row.index, row.values));
    // Copy on write: the store is updated as `NAME.part` and renamed over it when whole, so a
    // run killed or failing mid-update leaves the store as it was (and at most a `.part`).
    let name = path.file_name().with_context(|| format!("{}: not a file name", path.display()))?;
    let part = path.with_file_name(sonde_output::pending::part_name(name));
    let _ = std::fs::remove_file(&part);
    let appended = (|| -> Result<sonde_rrd::Appended> {
        if path.exists() {
            std::fs::copy(path, &part).context("copying the store to update it")?;
        }
        let appended = sonde_rrd::append_steps(&part, spec, archives_given, first, rows)?;
        std::fs::File::open(&part)?.sync_all()?;
        std::fs::rename(&part, path)?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        sonde_output::pending::sync_dir(dir)?;
        Ok(appended)
    })()
    .inspect_err(|_| {
        let _ = std::fs::remove_file(&part);
    })
    .with_context(|| path.display().to_string())?;
    result.created = appended.created;
    result.updates = appended.updates;
    result.already_stored = report.intervals.range(..appended.from_index).count() as u64;
    Ok(result)
}

/// Refuses, before the analysis, a run whose intervals an existing store cannot take.
fn check_existing(path: &Path, spec: &Spec, archives_given: bool) -> Result<()> {
    sonde_rrd::check_appendable(path, spec, archives_given).with_context(|| path.display().to_string())
}

/// The store `--store` names, checked before the analysis: its spec, and a note of the size a
/// new one takes.
pub fn checked_spec(path: &Path, interval_ns: Option<u64>, config: &AnalysisConfig) -> Result<(Spec, Option<String>)> {
    let spec = spec(interval_ns, config.store_archives.as_deref())?;
    check_existing(path, &spec, config.store_archives.is_some())?;
    let note = check_new_size(path, &spec, config.store_max_mb)?;
    Ok((spec, note))
}

/// A store to be created (none at `path` yet) must fit in `max_mb`; its size is said (as a
/// note), as it is fixed from the start and not small at a short step.
fn check_new_size(path: &Path, spec: &Spec, max_mb: u64) -> Result<Option<String>> {
    if path.exists() {
        return Ok(None);
    }
    let bytes = spec.file_len_bytes();
    let mb = bytes as f64 / 1e6;
    let archives = spec.archives.len() / 3;
    if bytes > max_mb.saturating_mul(1_000_000) {
        bail!(
            "--store {}: a store at a {} s step with these {archives} resolutions would take {mb:.1} MB on disk (--store-max-mb {max_mb}); \
             give a longer --interval, fewer rows with --store-archives, or --store-max-mb {} to create it",
            path.display(),
            spec.step_s,
            mb.ceil() as u64
        );
    }
    Ok(Some(format!(
        "new store {}: {mb:.1} MB on disk, fixed (a {} s step, {archives} resolutions)",
        path.display(),
        spec.step_s
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn archives_parse_as_resolution_and_span() {
        assert_eq!(
            parse_archives("5m:1d, 30m:1w,2h:31d,1d:1y").unwrap(),
            [(300, 86_400), (1800, 604_800), (7200, 31 * 86_400), (86_400, 365 * 86_400)]
        );
        assert_eq!(parse_archives("60:3600s").unwrap(), [(60, 3600)]);
        for bad in ["5m", "5x:1d", "0:1d", "m:1d", "5m:", "", "99999999999999999999y:1d"] {
            assert!(parse_archives(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_spec_needs_whole_seconds_and_multiples_of_the_step() {
        assert!(spec(None, None).is_err());
        assert!(spec(Some(1_500_000_000), None).is_err());
        assert_eq!(spec(Some(300 * SECOND_NS), None).unwrap().archives.len(), 12);
        let custom = spec(Some(60 * SECOND_NS), Some("1m:1h,1h:1d")).unwrap();
        let shape: Vec<(u32, u32)> = custom.archives.iter().step_by(3).map(|a| (a.steps, a.rows)).collect();
        assert_eq!(shape, [(1, 60), (60, 24)]);
        assert!(spec(Some(60 * SECOND_NS), Some("90s:1h")).is_err());
    }
}
