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
use crate::figures::{Layout, Line, LineFigure, LinePanel, Panel, TimeFigure};
use crate::intervals::{duration_label, duration_tag, Net, PROTOS};
use crate::Figure;

/// The figures of the store at `path` (per resolution, the traffic figure then the RTT one),
/// and notes on what was left out.
pub fn read_store_figures(path: &Path, label: &str) -> Result<(Vec<Figure>, Vec<String>), PlotError> {
    let error = |reason: String| PlotError::Store { path: path.to_path_buf(), reason };
    let store = Store::open(path).map_err(|e| error(e.to_string()))?;
    let spec = store.spec();
    let columns = Columns::find(&spec.sources).map_err(error)?;
    let sources = spec.sources.len();
    let read = |i: usize| store.archive_rows(i).map_err(|e| error(e.to_string()));
    let mut figures = Vec::new();
    let mut notes = Vec::new();
    for (i, archive) in spec.archives.iter().enumerate() {
        if archive.cf != Cf::Average {
            continue;
        }
        let rows = read(i)?;
        let resolution_s = spec.resolution_s(i) as f64;
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
        let traffic = figure(&all[first..=last], resolution_s, spec.step_s as f64, &columns, label);
        // The MIN and MAX archives of the same rows give the bands, when rows hold several steps.
        let partner = |cf: Cf| {
            spec.archives.iter().position(|a| a.cf == cf && a.steps == archive.steps && a.rows == archive.rows)
        };
        let bands = match (archive.steps > 1, partner(Cf::Min), partner(Cf::Max)) {
            (true, Some(lo), Some(hi)) => Some((read(lo)?.values, read(hi)?.values)),
            _ => None,
        };
        let bands = bands.as_ref().map(|(lo, hi)| (&lo[first * sources..], &hi[first * sources..]));
        let rtt = rtt_figure(&all[first..=last], bands, sources, &traffic, &columns);
        let thru = thru_figure(&all[first..=last], &traffic, &columns);
        figures.push(Figure::Time(Box::new(traffic)));
        match rtt {
            Some(f) => figures.push(Figure::Lines(Box::new(f))),
            None => notes.push(format!("store RTT figure {}: no RTT in the rows", duration_label(resolution_s))),
        }
        match thru {
            Some(f) => figures.push(Figure::Lines(Box::new(f))),
            None => {
                notes.push(format!("store throughput figure {}: no tcp_thru in the rows", duration_label(resolution_s)))
            }
        }
    }
    Ok((figures, notes))
}

/// Where each series is among the store's sources: `[proto][net]`.
struct Columns {
    bytes: [[usize; 4]; 4],
    packets: [[usize; 4]; 4],
    /// Active flows; only TCP and UDP have them.
    flows: [[Option<usize>; 4]; 4],
    /// p50 and p95 of each of [`RTT_PANELS`]; a store from before they were kept has none.
    rtt: [Option<[usize; 2]>; 2],
    /// `tcp_thru_mean`, `_p95`, `_p99`.
    thru: Option<[usize; 3]>,
}

/// The RTT series of the store (all directions and nets merged, in ms), with the panel captions.
const RTT_PANELS: [(&str, &str); 2] =
    [("rtt_avg", "Per-flow average RTT (rtt_avg)"), ("hs_rtt", "Handshake RTT (hs_rtt)")];

impl Columns {
    fn find(sources: &[String]) -> Result<Columns, String> {
        let at = |name: String| {
            sources
                .iter()
                .position(|s| *s == name)
                .ok_or(format!("no data source `{name}`: not a store of sonde analyze"))
        };
        let rtt =
            RTT_PANELS.map(|(metric, _)| Some([at(format!("{metric}_p50")).ok()?, at(format!("{metric}_p95")).ok()?]));
        let thru = ["mean", "p95", "p99"].map(|s| at(format!("tcp_thru_{s}")).ok());
        let thru = match thru {
            [Some(a), Some(b), Some(c)] => Some([a, b, c]),
            _ => None,
        };
        let mut c = Columns { bytes: [[0; 4]; 4], packets: [[0; 4]; 4], flows: [[None; 4]; 4], rtt, thru };
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

/// RTT p50 and p95 over the rows of the traffic figure `traffic` (same bins), each with the
/// band from the MIN to the MAX archive when given; `None` when no row has an RTT.
fn rtt_figure(
    rows: &[(f64, &[f64])],
    bands: Option<(&[f64], &[f64])>,
    sources: usize,
    traffic: &TimeFigure,
    c: &Columns,
) -> Option<LineFigure> {
    let mut panels = Vec::new();
    for ((_, caption), columns) in RTT_PANELS.iter().zip(&c.rtt) {
        let Some(columns) = columns else { continue };
        let lines: Vec<Line> = ["p50", "p95"]
            .iter()
            .zip(columns)
            .enumerate()
            .map(|(k, (pct, &col))| Line {
                label: format!("{pct} (mean of the row's steps)"),
                color: k,
                weight: k,
                values: rows.iter().map(|r| r.1[col]).collect(),
                band: bands
                    .map(|(lo, hi)| (0..rows.len()).map(|i| (lo[i * sources + col], hi[i * sources + col])).collect()),
                below: false,
            })
            .collect();
        if lines.iter().any(|l| l.values.iter().any(|v| v.is_finite())) {
            panels.push(LinePanel { caption: caption.to_string(), unit: "ms", lines, mirrored: false });
        }
    }
    let band = if bands.is_some() { "shaded: lowest to highest step in the row (MIN, MAX archives); " } else { "" };
    (!panels.is_empty()).then(|| LineFigure {
        title: traffic.title.replace("traffic per", "TCP RTT percentiles per"),
        file_stem: traffic.file_stem.replacen("store-", "store-rtt-", 1),
        edges: traffic.edges.clone(),
        panels,
        legend: format!("all directions and nets; {band}gaps: no RTT or not monitored"),
    })
}

/// Tstat's Fig. 1 from the store: the per-flow TCP throughput's mean, p95 and p99 per row,
/// over the rows of `traffic`. The store keeps one series per statistic over both directions
/// (c2s and s2c merged), so all is drawn above the axis; `None` when no row has a value.
fn thru_figure(rows: &[(f64, &[f64])], traffic: &TimeFigure, c: &Columns) -> Option<LineFigure> {
    let columns = c.thru?;
    let lines: Vec<Line> = ["mean", "p95", "p99"]
        .iter()
        .zip(columns)
        .enumerate()
        .map(|(k, (stat, col))| Line {
            label: format!("{stat} (mean of the row's steps)"),
            color: 0,
            weight: k,
            values: rows.iter().map(|r| r.1[col]).collect(),
            band: None,
            below: false,
        })
        .collect();
    lines.iter().any(|l| l.values.iter().any(|v| v.is_finite())).then(|| LineFigure {
        title: traffic.title.replace("traffic per", "per-flow TCP throughput per"),
        file_stem: traffic.file_stem.replacen("store-", "store-thru-", 1),
        edges: traffic.edges.clone(),
        panels: vec![LinePanel {
            caption: "Per-flow throughput (tcp_thru), c2s and s2c merged as the store keeps them".to_string(),
            unit: "bit/s",
            lines,
            mirrored: true,
        }],
        legend: "thick mean, medium p95, thin p99; gaps: no TCP flow closed or not monitored".to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use sonde_rrd::Spec;

    /// Step `k`'s rtt_avg p50 and p95 (ms); steps 5 to 7 had no RTT.
    fn rtt(k: u64) -> (f64, f64) {
        if (5..=7).contains(&k) {
            (f64::NAN, f64::NAN)
        } else {
            (10.0 + k as f64, 100.0 + k as f64)
        }
    }

    /// A store of sonde's sources with 60 s steps kept at 1 min and 10 min: 30 steps of known
    /// traffic, 10 unknown (a restart), 20 more. No handshake RTT at all.
    fn store(dir: &Path) -> std::path::PathBuf {
        let names = sonde_stats::Report::series_names();
        let spec = Spec::with_resolutions(60, names.clone(), &[(60, 3600), (600, 86_400)]).unwrap();
        let path = dir.join("s.rrd");
        let mut store = Store::create(&path, &spec, 6000).unwrap();
        let at = |name: &str| names.iter().position(|s| s == name).unwrap();
        for step in (1..=30).chain(41..=60) {
            let mut values = vec![f64::NAN; names.len()];
            values[..at("rtt_avg_mean")].fill(0.0);
            values[at("tcp_in_bytes")] = 6000.0 * step as f64;
            values[at("tcp_out_bytes")] = 600.0;
            values[at("udp_in_pkts")] = 120.0;
            values[at("tcp_in_flows")] = 3.0;
            (values[at("rtt_avg_p50")], values[at("rtt_avg_p95")]) = rtt(step);
            // Per-flow throughput: mean, p95 and p99 of step k are k, 10 k and 100 k kbit/s.
            for (stat, scale) in [("mean", 1e3), ("p95", 1e4), ("p99", 1e5)] {
                values[at(&format!("tcp_thru_{stat}"))] = scale * step as f64;
            }
            store.update(6000 + 60 * step, &values).unwrap();
        }
        store.sync().unwrap();
        path
    }

    fn split(figs: &[Figure]) -> (Vec<&TimeFigure>, Vec<&LineFigure>) {
        let time = figs.iter().filter_map(|f| if let Figure::Time(t) = f { Some(&**t) } else { None });
        let lines = figs.iter().filter_map(|f| if let Figure::Lines(l) = f { Some(&**l) } else { None });
        (time.collect(), lines.collect())
    }

    #[test]
    fn one_figure_per_average_archive_with_the_stored_values_and_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let (figs, notes) = read_store_figures(&store(dir.path()), "t").unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        let stems: Vec<&str> = figs.iter().map(|f| f.file_stem()).collect();
        assert_eq!(
            stems,
            ["store-60s", "store-rtt-60s", "store-thru-60s", "store-10min", "store-rtt-10min", "store-thru-10min"]
        );
        let (time, _) = split(&figs);
        let minute = time[0];
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
        let ten = time[1];
        let mean: f64 = (1..=10).map(|s| 6000.0 * s as f64).sum::<f64>() / 10.0;
        assert_eq!(ten.panels[0].above[0][0], mean * 8.0 / 60.0);
        assert!(matches!(ten.layout, Layout::InOut { .. }));
    }

    #[test]
    fn rtt_figures_show_the_stored_percentiles_with_min_max_bands_and_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let (figs, _) = read_store_figures(&store(dir.path()), "t").unwrap();
        let (time, lines) = split(&figs);
        let rtt_figs: Vec<&LineFigure> = lines.into_iter().filter(|f| f.file_stem.starts_with("store-rtt-")).collect();
        let minute = rtt_figs[0];
        assert_eq!(minute.edges, time[0].edges, "the bins of the traffic figure");
        // No handshake RTT stored: its panel is left out.
        assert_eq!(minute.panels.len(), 1);
        assert_eq!(minute.panels[0].caption, "Per-flow average RTT (rtt_avg)");
        let [p50, p95] = &minute.panels[0].lines[..] else { panic!("p50 and p95") };
        for k in 1..=60u64 {
            let i = k as usize - 1;
            let want = if (31..=40).contains(&k) { (f64::NAN, f64::NAN) } else { rtt(k) };
            assert_eq!(p50.values[i].to_bits(), want.0.to_bits(), "step {k}");
            assert_eq!(p95.values[i].to_bits(), want.1.to_bits(), "step {k}");
        }
        assert!(p50.band.is_none(), "one step per row: MIN = MAX = AVERAGE, no band");
        // Ten-minute rows: the mean of the known steps, the band their lowest and highest.
        let ten = &rtt_figs[1].panels[0];
        let known: Vec<f64> = (1..=10).filter(|k| !(5..=7).contains(k)).map(|k| rtt(k).0).collect();
        assert_eq!(ten.lines[0].values[0], known.iter().sum::<f64>() / known.len() as f64);
        assert_eq!(ten.lines[0].band.as_ref().unwrap()[0], (11.0, 20.0));
        assert_eq!(ten.lines[1].band.as_ref().unwrap()[0], (101.0, 110.0));
        // Steps 31..=40 were not monitored: the fourth row is a gap, line and band.
        assert!(ten.lines[1].values[3].is_nan() && ten.lines[1].band.as_ref().unwrap()[3].1.is_nan());
        assert_eq!(ten.lines[1].values[4], (41..=50).map(|k| rtt(k).1).sum::<f64>() / 10.0);
    }

    #[test]
    fn throughput_figures_show_the_stored_mean_p95_p99_above_the_axis_with_gaps() {
        let dir = tempfile::tempdir().unwrap();
        let (figs, _) = read_store_figures(&store(dir.path()), "t").unwrap();
        let (time, lines) = split(&figs);
        let thru: Vec<&LineFigure> = lines.into_iter().filter(|f| f.file_stem.starts_with("store-thru-")).collect();
        assert_eq!(thru.len(), 2);
        assert_eq!(thru[0].edges, time[0].edges);
        let panel = &thru[0].panels[0];
        assert!(panel.mirrored && panel.lines.iter().all(|l| !l.below), "merged directions: all above");
        let labels: Vec<&str> = panel.lines.iter().map(|l| l.label.split(' ').next().unwrap()).collect();
        assert_eq!(labels, ["mean", "p95", "p99"]);
        for k in [1usize, 30, 41, 60] {
            assert_eq!(panel.lines[2].values[k - 1], 1e5 * k as f64, "step {k}");
        }
        assert!(panel.lines[0].values[30..40].iter().all(|v| v.is_nan()), "not monitored: gaps");
        // Ten-minute rows: the mean of their steps' values.
        let ten = &thru[1].panels[0].lines[1].values;
        assert_eq!(ten[0], (1..=10).map(|k| 1e4 * k as f64).sum::<f64>() / 10.0);
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
        let e = read_store_figures(&dir.path().join("missing.rrd"), "t").unwrap_err().to_string();
        assert!(e.contains("missing.rrd"), "{e}");
        // A store cut short (a partial copy): an error naming it, not a panic.
        let cut = dir.path().join("cut.rrd");
        let whole = std::fs::read(store(dir.path())).unwrap();
        std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
        let e = read_store_figures(&cut, "t").unwrap_err().to_string();
        assert!(e.starts_with(&cut.display().to_string()), "{e}");
    }
}
