//! Time figures from a round-robin store (`sonde analyze --store`): one per resolution the
//! store keeps, as Tstat draws its daily, weekly, monthly and yearly RRD plots. A probe that runs
//! for months has its history there, not in one run's `intervals.tsv`.
//!
//! Each AVERAGE archive gives one figure over the rows it holds (from the first known row to
//! the last): throughput and packet rate per protocol, inbound above the axis and outbound
//! below, and the mean number of active TCP and UDP flows. Rows the store does not know (the
//! probe was not running) are NaN and drawn as gaps, never as zeros.

use std::path::Path;

use sonde_rrd::{Cf, Store};

use crate::error::PlotError;
use crate::figures::{Layout, Panel, TimeFigure};
use crate::intervals::{duration_label, duration_tag, Net, PROTOS};

/// The figures of the store at `path`, and notes on the archives left out.
pub fn read_store_figures(path: &Path, label: &str) -> Result<(Vec<TimeFigure>, Vec<String>), PlotError> {
    let error = |reason: String| PlotError::Store { path: path.to_path_buf(), reason };
    let store = Store::open(path).map_err(|e| error(e.to_string()))?;
    let columns = Columns::find(&store.spec().sources).map_err(error)?;
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    for (i, archive) in store.spec().archives.iter().enumerate() {
        if archive.cf != Cf::Average {
            continue;
        }
        let rows = store.archive_rows(i).map_err(|e| error(e.to_string()))?;
        let resolution_s = store.spec().resolution_s(i) as f64;
        let sources = store.spec().sources.len();
        let all: Vec<(f64, &[f64])> =
            rows.times_s.iter().zip(rows.values.chunks_exact(sources)).map(|(t, v)| (*t as f64, v)).collect();
        let known = |v: &[f64]| columns.bytes.iter().flatten().any(|&c| !v[c].is_nan());
        let (Some(first), Some(last)) = (all.iter().position(|r| known(r.1)), all.iter().rposition(|r| known(r.1)))
        else {
            notes.push(format!("store figure {}: the archive holds no known row", duration_label(resolution_s)));
            continue;
        };
        if last == first {
            notes.push(format!("store figure {}: the archive holds one known row", duration_label(resolution_s)));
            continue;
        }
        figures.push(figure(&all[first..=last], resolution_s, store.spec().step_s as f64, &columns, label));
    }
    Ok((figures, notes))
}

/// Where each series is among the store's sources: `[proto][net]`.
struct Columns {
    bytes: [[usize; 4]; 4],
    packets: [[usize; 4]; 4],
    /// Active flows; only TCP and UDP have them.
    flows: [[Option<usize>; 4]; 4],
}

impl Columns {
    fn find(sources: &[String]) -> Result<Columns, String> {
        let at = |name: String| {
            sources
                .iter()
                .position(|s| *s == name)
                .ok_or(format!("no data source `{name}`: not a store of sonde analyze"))
        };
        let mut c = Columns { bytes: [[0; 4]; 4], packets: [[0; 4]; 4], flows: [[None; 4]; 4] };
        for (p, proto) in PROTOS.iter().enumerate() {
            for net in Net::ALL {
                let n = net as usize;
                c.bytes[p][n] = at(format!("{}_{}_bytes", proto.name(), net.name()))?;
                c.packets[p][n] = at(format!("{}_{}_pkts", proto.name(), net.name()))?;
                c.flows[p][n] = at(format!("{}_{}_flows", proto.name(), net.name())).ok();
            }
        }
        Ok(c)
    }
}

/// A series value: per step in the store (an AVERAGE row is the mean of its steps).
fn value(row: &[f64], column: Option<usize>) -> f64 {
    column.map_or(0.0, |c| row[c])
}

fn figure(rows: &[(f64, &[f64])], resolution_s: f64, step_s: f64, c: &Columns, label: &str) -> TimeFigure {
    let total = |nets: &[Net]| -> f64 {
        let sum = |r: &[f64]| nets.iter().flat_map(|n| c.bytes.iter().map(|b| b[*n as usize])).map(|i| r[i]).sum();
        rows.iter().map(|r| sum(r.1)).filter(|v: &f64| v.is_finite()).sum()
    };
    let in_out = total(&[Net::In, Net::Out]);
    let layout =
        if in_out > 0.0 { Layout::InOut { hidden_share: 1.0 - in_out / total(&Net::ALL) } } else { Layout::AllAbove };
    let (up, down): (&[Net], &[Net]) = match layout {
        Layout::InOut { .. } => (&[Net::In], &[Net::Out]),
        Layout::AllAbove => (&Net::ALL, &[]),
    };
    let side = |row: &[f64], nets: &[Net], pick: &dyn Fn(usize, usize) -> Option<usize>, scale: f64| {
        std::array::from_fn(|p| nets.iter().map(|n| value(row, pick(p, *n as usize))).sum::<f64>() * scale)
    };
    let panel = |caption, unit, pick: &dyn Fn(usize, usize) -> Option<usize>, scale: f64| Panel {
        caption,
        unit,
        above: rows.iter().map(|r| side(r.1, up, pick, scale)).collect(),
        below: rows.iter().map(|r| side(r.1, down, pick, scale)).collect(),
    };
    let mut edges = vec![rows[0].0 - resolution_s];
    edges.extend(rows.iter().map(|r| r.0));
    let directions = match layout {
        Layout::InOut { .. } => "above the axis: in (towards internal hosts); below: out; gaps: not monitored",
        Layout::AllAbove => "all traffic above the axis (no internal networks given); gaps: not monitored",
    };
    TimeFigure {
        title: format!("{label}: traffic per {} (store archive)", duration_label(resolution_s)),
        directions: directions.to_string(),
        file_stem: format!("store-{}", duration_tag(resolution_s)),
        layout,
        edges,
        panels: [
            panel("Throughput", "bit/s", &|p, n| Some(c.bytes[p][n]), 8.0 / step_s),
            panel("Packets", "packets/s", &|p, n| Some(c.packets[p][n]), 1.0 / step_s),
            panel("Active flows", "flows (mean)", &|p, n| c.flows[p][n], 1.0),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonde_rrd::Spec;

    fn sources() -> Vec<String> {
        let mut names = Vec::new();
        for proto in PROTOS {
            for net in Net::ALL {
                names.push(format!("{}_{}_pkts", proto.name(), net.name()));
                names.push(format!("{}_{}_bytes", proto.name(), net.name()));
            }
        }
        for proto in &PROTOS[..2] {
            for net in Net::ALL {
                names.push(format!("{}_{}_flows", proto.name(), net.name()));
            }
        }
        names
    }

    /// A store with 60 s steps kept at 1 min and 10 min: 30 steps of known traffic, 10 unknown
    /// (a restart), 20 more.
    fn store(dir: &Path) -> std::path::PathBuf {
        let names = sources();
        let spec = Spec::with_resolutions(60, names.clone(), &[(60, 3600), (600, 86_400)]).unwrap();
        let path = dir.join("s.rrd");
        let mut store = Store::create(&path, &spec, 6000).unwrap();
        let at = |name: &str| names.iter().position(|s| s == name).unwrap();
        for step in (1..=30).chain(41..=60) {
            let mut values = vec![0.0; names.len()];
            values[at("tcp_in_bytes")] = 6000.0 * step as f64;
            values[at("tcp_out_bytes")] = 600.0;
            values[at("udp_in_pkts")] = 120.0;
            values[at("tcp_in_flows")] = 3.0;
            store.update(6000 + 60 * step, &values).unwrap();
        }
        store.sync().unwrap();
        path
    }

    #[test]
    fn one_figure_per_average_archive_with_the_stored_values_and_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let (figs, notes) = read_store_figures(&store(dir.path()), "t").unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let stems: Vec<&str> = figs.iter().map(|f| f.file_stem.as_str()).collect();
        assert_eq!(stems, ["store-60s", "store-10min"]);
        let minute = &figs[0];
        // Rows 1..=60 minutes after the start: 60 bins, edges from the first row's start.
        assert_eq!(minute.edges.len(), 61);
        assert_eq!((minute.edges[0], minute.edges[60]), (6000.0, 6000.0 + 3600.0));
        let thru = &minute.panels[0];
        assert_eq!(thru.above[0][0], 6000.0 * 8.0 / 60.0);
        assert_eq!(thru.above[29][0], 30.0 * 6000.0 * 8.0 / 60.0);
        assert_eq!(thru.below[0][0], 600.0 * 8.0 / 60.0);
        assert!(thru.above[30..40].iter().all(|v| v[0].is_nan()), "unknown rows are gaps");
        assert_eq!(minute.panels[1].above[0][1], 2.0);
        assert_eq!(minute.panels[2].above[0][0], 3.0);
        // ICMP and other have no flow series: zero, not unknown.
        assert_eq!(minute.panels[2].above[0][2], 0.0);
        // Ten-minute rows consolidate ten steps: the first holds steps 1..=10.
        let ten = &figs[1];
        let mean: f64 = (1..=10).map(|s| 6000.0 * s as f64).sum::<f64>() / 10.0;
        assert_eq!(ten.panels[0].above[0][0], mean * 8.0 / 60.0);
        assert!(matches!(ten.layout, Layout::InOut { .. }));
    }

    #[test]
    fn a_file_that_is_not_a_store_or_not_sondes_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.rrd");
        std::fs::write(&junk, b"not a store").unwrap();
        let e = read_store_figures(&junk, "t").unwrap_err().to_string();
        assert!(e.starts_with(&junk.display().to_string()), "{e}");
        let other = dir.path().join("other.rrd");
        let spec = Spec::with_resolutions(60, vec!["bytes".to_string()], &[(60, 600)]).unwrap();
        Store::create(&other, &spec, 0).unwrap();
        let e = read_store_figures(&other, "t").unwrap_err().to_string();
        assert!(e.contains("not a store of sonde analyze"), "{e}");
        assert!(read_store_figures(&dir.path().join("missing.rrd"), "t").is_err());
    }
}
