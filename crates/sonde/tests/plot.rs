//! `sonde plot` end to end: the figures of an analysed trace and of the plot crate's fixtures,
//! and the exit status and message on bad input.

mod common;

use std::path::{Path, PathBuf};

use common::sonde;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../sonde-plot/tests/fixtures").join(name)
}

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/demo.pcap")
}

#[test]
fn distributions_of_the_demo_trace() {
    let (dir, out) = common::analyze(&demo(), &[]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sonde().arg("plot").arg(dir.path()).args(["--what", "dist"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let plots = dir.path().join("plots");
    let want: Vec<String> = ["flow-duration.png", "flow-size.png", "rtt-pdf.png", "flow-lifetime.png"]
        .iter()
        .map(|f| plots.join(f).display().to_string())
        .collect();
    assert_eq!(stdout.lines().collect::<Vec<_>>(), want);
    for f in &want {
        let bytes = std::fs::read(f).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{f}");
    }
}

/// Issue 23: the titles name the trace the outputs come from, not the directory's path.
#[test]
fn titles_name_the_trace_not_the_output_path() {
    let (out, o) = common::analyze(&demo(), &["--interval", "1"]);
    assert!(o.status.success(), "{o:?}");
    let plots = sonde().arg("plot").arg(out.path()).args(["--format", "svg", "-q"]).output().unwrap();
    assert!(plots.status.success(), "{plots:?}");
    let mut titled = 0;
    for entry in std::fs::read_dir(out.path().join("plots")).unwrap() {
        let svg = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        assert!(!svg.contains(&out.path().display().to_string()), "a path in a title");
        titled += usize::from(svg.contains("demo.pcap: "));
    }
    assert!(titled >= 4, "{titled} figures titled with the trace");
}

#[test]
fn time_figures_as_svg_into_the_given_directory() {
    let out_dir = tempfile::tempdir().unwrap();
    let out = sonde()
        .arg("plot")
        .arg(fixture("inout"))
        .arg("-o")
        .arg(out_dir.path())
        .args(["--format", "svg", "--what", "time"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut names: Vec<String> = std::fs::read_dir(out_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["time-5min.svg", "time-native-60s.svg"]);
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("sonde plot: time figure skipped: 30 min (weekly view): the trace spans 12 min"),
        "{stderr}"
    );
}

#[test]
fn bad_input_exits_1_naming_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("intervals.tsv");
    std::fs::write(&path, "start\tend\tproto\tnet\tbytes\tflows_opened\tflows_active\n0\t60\ttcp\tsideways\t1\t0\t0\n")
        .unwrap();
    let out = sonde().arg("plot").arg(dir.path()).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(
        stderr.trim(),
        format!("sonde: {}:2: column `net`: `sideways` is not in, out, loc or ext", path.display())
    );

    let only_flows = tempfile::tempdir().unwrap();
    std::fs::copy(fixture("dist/tcp_flows.tsv"), only_flows.path().join("tcp_flows.tsv")).unwrap();
    let out = sonde().arg("plot").arg(only_flows.path()).args(["--what", "time"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no intervals.tsv or quantiles.tsv to plot"));
}

/// A store of the demo trace at 1 s and 2 s, in a directory of its own.
fn demo_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("link.rrd");
    let store_arg = store.to_str().unwrap();
    let (_, out) =
        common::analyze(&demo(), &["--interval", "1", "--store", store_arg, "--store-archives", "1s:1m,2s:1m"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    (dir, store)
}

#[test]
fn a_store_gives_one_time_figure_per_resolution() {
    let (store_dir, store) = demo_store();
    let store_arg = store.to_str().unwrap();
    let out = sonde().args(["plot", "--store", store_arg, "--format", "svg"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let plots = store_dir.path().join("plots");
    let want: Vec<String> = ["store-1s.svg", "store-rtt-1s.svg", "store-thru-1s.svg", "store-2s.svg"]
        .into_iter()
        .chain(["store-rtt-2s.svg", "store-thru-2s.svg"])
        .map(|f| plots.join(f).display().to_string())
        .collect();
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().collect::<Vec<_>>(), want);
    let texts = ["Throughput", "Per-flow average RTT", "Per-flow throughput (tcp_thru)", "Throughput", "Handshake RTT"];
    for (f, text) in want.iter().zip(texts.into_iter().chain(["c2s and s2c merged"])) {
        let svg = std::fs::read_to_string(f).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains(text) && svg.len() > 5_000, "{f}");
        // Issue 23: titles name the store, not the path it happens to be at.
        assert!(svg.contains("link.rrd") && !svg.contains(&store_dir.path().display().to_string()), "{f}");
    }
    // Neither a directory nor a store: refused by the argument parser.
    let out = sonde().arg("plot").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    // Not a store: exit 1, naming the file.
    let junk = store_dir.path().join("junk.rrd");
    std::fs::write(&junk, b"junk").unwrap();
    let out = sonde().args(["plot", "--store"]).arg(&junk).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&junk.display().to_string()));
}

/// Issue 23: a store with nothing to draw (a 20 s trace in an hourly archive) is an error that
/// says why, and leaves no empty folder behind (it exited 0 with an empty `plots/`).
#[test]
fn a_store_with_nothing_to_draw_exits_1_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("hourly.rrd");
    let store_arg = store.to_str().unwrap();
    let (_out, o) = common::analyze(&demo(), &["--interval", "1", "--store", store_arg, "--store-archives", "1h:1d"]);
    assert!(o.status.success(), "{o:?}");
    let out = sonde().args(["plot", "--store", store_arg]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("nothing to draw") && stderr.contains("60 min: the archive holds no known row"),
        "{stderr}"
    );
    assert!(!dir.path().join("plots").exists());
}

/// The RTT lines drawn from a store hold the values `sonde ts dump` prints for the same rows
/// (empty, unknown, where the line has a gap), at each resolution.
#[test]
fn store_rtt_lines_are_the_dumped_values() {
    let (_dir, store) = demo_store();
    let store_arg = store.to_str().unwrap();
    let dump = sonde().args(["ts", "dump", store_arg]).output().unwrap();
    assert!(dump.status.success());
    let text = String::from_utf8(dump.stdout).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let (figs, _) = sonde_plot::store::read_store_figures(&store, "t").unwrap();
    // The dumped AVERAGE of `column` in the row ending at `end`, at `resolution` ("" = unknown).
    let dumped = |resolution: &str, end: f64, column: &str| {
        let row = rows
            .iter()
            .find(|r| {
                r[col("cf")] == "AVERAGE" && r[col("resolution_s")] == resolution && r[col("time_s")] == end.to_string()
            })
            .unwrap_or_else(|| panic!("no dumped row at {end}"));
        row[col(column)]
    };
    // A drawn value against the dumped one: a gap where it is unknown; 1 when a known value matched.
    let same = |drawn: f64, dumped: &str, what: &str| {
        if dumped.is_empty() {
            assert!(drawn.is_nan(), "{what}: drawn {drawn}, stored unknown");
            0
        } else {
            assert_eq!(drawn, dumped.parse::<f64>().unwrap(), "{what}");
            1
        }
    };
    let mut checked = 0;
    for (resolution, stem) in [("1", "store-rtt-1s"), ("2", "store-rtt-2s")] {
        let Some(sonde_plot::Figure::Lines(fig)) = figs.iter().find(|f| f.file_stem() == stem) else {
            panic!("no {stem}")
        };
        for (metric, panel) in [("rtt_avg", 0), ("hs_rtt", 1)] {
            for (k, pct) in ["p50", "p95"].iter().enumerate() {
                let values = &fig.panels[panel].lines[k].values;
                for (i, &end) in fig.edges[1..].iter().enumerate() {
                    let stored = dumped(resolution, end, &format!("{metric}_{pct}"));
                    checked += same(values[i], stored, &format!("{stem} {metric} {pct} at {end}"));
                }
            }
        }
    }
    assert!(checked >= 8, "{checked} values checked");
    // Tstat's Fig. 1 from the store: tcp_thru's mean, p95 and p99, as dumped.
    let mut thru_checked = 0;
    for (resolution, stem) in [("1", "store-thru-1s"), ("2", "store-thru-2s")] {
        let Some(sonde_plot::Figure::Lines(fig)) = figs.iter().find(|f| f.file_stem() == stem) else {
            panic!("no {stem}")
        };
        assert_eq!(fig.panels.len(), 1);
        for (k, stat) in ["mean", "p95", "p99"].iter().enumerate() {
            let line = &fig.panels[0].lines[k];
            assert!(!line.below && line.label.starts_with(stat), "{stem}: {}", line.label);
            for (i, &end) in fig.edges[1..].iter().enumerate() {
                let stored = dumped(resolution, end, &format!("tcp_thru_{stat}"));
                thru_checked += same(line.values[i], stored, &format!("{stem} {stat} at {end}"));
            }
        }
    }
    assert!(thru_checked >= 6, "{thru_checked} throughput values checked");
}

#[test]
fn rtt_percentiles_over_time_from_quantiles() {
    let (dir, out) = common::analyze(&demo(), &["--interval", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sonde().arg("plot").arg(dir.path()).args(["--what", "time", "--format", "svg"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let rtt = dir.path().join("plots/time-rtt-native-1s.svg");
    assert!(stdout.lines().any(|l| l == rtt.display().to_string()), "{stdout}");
    let svg = std::fs::read_to_string(&rtt).unwrap();
    for want in ["Handshake RTT (tcp_hs_rtt), c2s", "Per-flow average RTT (tcp_rtt_avg), s2c", "ext p95"] {
        assert!(svg.contains(want), "no {want:?} in {}", rtt.display());
    }
}

fn shared(rel: &str) -> Option<PathBuf> {
    common::shared_dir().map(|d| d.join(rel))
}

fn line_figure<'a>(figs: &'a [sonde_plot::Figure], stem: &str) -> &'a sonde_plot::figures::LineFigure {
    match figs.iter().find(|f| f.file_stem() == stem) {
        Some(sonde_plot::Figure::Lines(f)) => f,
        _ => panic!("no line figure {stem} in {:?}", figs.iter().map(|f| f.file_stem()).collect::<Vec<_>>()),
    }
}

fn period_figure<'a>(figs: &'a [sonde_plot::Figure], stem: &str) -> &'a sonde_plot::periods::PeriodFigure {
    match figs.iter().find(|f| f.file_stem() == stem) {
        Some(sonde_plot::Figure::Periods(f)) => f,
        _ => panic!("no figure {stem} in {:?}", figs.iter().map(|f| f.file_stem()).collect::<Vec<_>>()),
    }
}

/// Issue 23, Tstat's Fig. 1: the per-flow TCP throughput's mean, p95 and p99 per interval,
/// c2s above the axis and s2c below, hold quantiles.tsv's `tcp_thru` rows value for value, on
/// a ground-truth capture cut in 1 s intervals.
#[test]
fn tstat_throughput_over_time_holds_the_tcp_thru_quantiles() {
    let Some(trace) = shared("groundtruth/mixed.pcap") else { return };
    let (dir, out) = common::analyze(&trace, &["--interval", "1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (figs, notes) = sonde_plot::figures_for(dir.path(), sonde_plot::Selection::Time).unwrap();
    let fig = line_figure(&figs, "time-thru-native-1s");
    let rows: Vec<_> =
        common::read_tsv(&dir.path().join("quantiles.tsv")).into_iter().filter(|r| r["metric"] == "tcp_thru").collect();
    assert!(rows.len() >= 10, "{} tcp_thru rows; {notes:?}", rows.len());
    // The axis spans the rows: from the first start to the last end, one bin per second.
    let start = rows.iter().map(|r| common::num(r, "start")).fold(f64::INFINITY, f64::min);
    let end = rows.iter().map(|r| common::num(r, "end")).fold(0.0, f64::max);
    assert_eq!((fig.edges[0], *fig.edges.last().unwrap()), (start, end));
    assert_eq!(fig.edges.len() - 1, (end - start).round() as usize);
    // One line per net, direction and statistic present.
    let keys: std::collections::BTreeSet<(String, String)> =
        rows.iter().map(|r| (r["net"].clone(), r["dir"].clone())).collect();
    assert!(keys.iter().any(|k| k.1 == "c2s") && keys.iter().any(|k| k.1 == "s2c"), "{keys:?}");
    let panel = &fig.panels[0];
    assert!(panel.mirrored);
    assert_eq!(panel.lines.len(), 3 * keys.len());
    let mut checked = 0;
    for r in &rows {
        let bin = (common::num(r, "start") - start).round() as usize;
        for (stat, column) in [("mean", "mean"), ("p95", "p95"), ("p99", "p99")] {
            let label = format!("{} {stat}", r["net"]);
            let below = r["dir"] == "s2c";
            let line = panel.lines.iter().find(|l| l.label == label && l.below == below).unwrap();
            assert_eq!(line.values[bin], common::num(r, column), "{label} {} at {}", r["dir"], r["start"]);
            checked += 1;
        }
    }
    // Every value drawn is one of those rows: as many known values as rows × 3.
    let drawn: usize = panel.lines.iter().map(|l| l.values.iter().filter(|v| v.is_finite()).count()).sum();
    assert_eq!(drawn, checked);
    // And the file: the panel's caption and the sides.
    let out = sonde().arg("plot").arg(dir.path()).args(["--what", "time", "--format", "svg"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(dir.path().join("plots/time-thru-native-1s.svg")).unwrap();
    assert!(svg.contains("Per-flow throughput (tcp_thru)   ↑ c2s   ↓ s2c"), "caption");
}

/// Issue 23, Tstat's Fig. 2 on a real trace of a day (whatsapp.pcap: 86 TCP flows over 24 h):
/// the survival function of every TCP flow's lifetime is P(durat > x) of the flow log; the
/// throughput pdf counts the directions histograms.tsv's tcp_thru counts; busy and off-peak hours
/// are the top and bottom quarter of the clock hours by intervals.tsv's bytes, and each holds
/// the flows that started in them.
#[test]
fn tstat_lifetime_and_busy_hours_against_off_peak() {
    let Some(trace) = shared("traces/realistic/ntop+nDPI/tests/cfgs/default/pcap/whatsapp.pcap") else { return };
    let (dir, out) = common::analyze(&trace, &[]);
    assert!(out.status.code().is_some_and(|c| c == 0 || c == 3), "{}", String::from_utf8_lossy(&out.stderr));
    let (figs, notes) = sonde_plot::figures_for(dir.path(), sonde_plot::Selection::Distributions).unwrap();
    let flows = common::read_tsv(&dir.path().join("tcp_flows.tsv"));
    let durations: Vec<f64> = flows.iter().map(|f| common::num(f, "durat") / 1e3).collect();

    let all = period_figure(&figs, "flow-lifetime");
    assert_eq!(all.survival.len(), 1);
    assert!(all.survival[0].label.starts_with(&format!("all TCP flows (n={}", flows.len())));
    let n = durations.len() as f64;
    for &(x, p) in &all.survival[0].points {
        let longer = durations.iter().filter(|d| **d > x).count() as f64;
        assert_eq!(p, longer / n, "P(durat > {x})");
    }
    assert_eq!(all.survival[0].points.last().unwrap().1, 0.0);
    // The throughput directions: those histograms.tsv counts as tcp_thru (c2s and s2c).
    let thru_count: f64 = common::read_tsv(&dir.path().join("histograms.tsv"))
        .iter()
        .filter(|r| r["metric"] == "tcp_thru")
        .map(|r| common::num(r, "count"))
        .sum();
    let label = &all.thru[0].label;
    assert!(label.starts_with(&format!("all TCP flows (n={thru_count}")), "{label} vs {thru_count} in histograms.tsv");
    let shares: f64 = all.thru[0].bins.iter().map(|b| b.fraction).sum();
    assert!(shares > 0.0 && shares <= 1.0 + 1e-12, "{shares}");

    // Busy and off-peak hours, by hand from intervals.tsv.
    let mut hours: std::collections::BTreeMap<i64, f64> = std::collections::BTreeMap::new();
    for r in common::read_tsv(&dir.path().join("intervals.tsv")) {
        *hours.entry((common::num(&r, "start") / 3600.0).floor() as i64).or_default() += common::num(&r, "bytes");
    }
    let mut ranked: Vec<(i64, f64)> = hours.into_iter().filter(|h| h.1 > 0.0).collect();
    assert!(ranked.len() >= 8, "{} hours with traffic", ranked.len());
    ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let k = ranked.len().div_ceil(4);
    let busy: Vec<i64> = ranked[..k].iter().map(|h| h.0).collect();
    let quiet: Vec<i64> = ranked[ranked.len() - k..].iter().map(|h| h.0).collect();
    let started_in = |set: &[i64]| {
        flows.iter().filter(|f| set.contains(&((common::num(f, "first") / 1e3 / 3600.0).floor() as i64))).count()
    };
    let fig = period_figure(&figs, "busy-offpeak");
    let labels: Vec<&str> = fig.survival.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels.len(), 2, "{labels:?}; {notes:?}");
    assert!(labels[0].starts_with(&format!("busy, {k} h (n={}", started_in(&busy))), "{labels:?}");
    assert!(labels[1].starts_with(&format!("off-peak, {k} h (n={}", started_in(&quiet))), "{labels:?}");
    assert!(fig.note.contains(&format!("of the {} clock hours with traffic", ranked.len())), "{}", fig.note);

    // Drawn: PNG files of both.
    let out = sonde().arg("plot").arg(dir.path()).args(["--what", "dist", "-q"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    for f in ["flow-lifetime.png", "busy-offpeak.png"] {
        let bytes = std::fs::read(dir.path().join("plots").join(f)).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n") && bytes.len() > 20_000, "{f}");
    }
}

/// Issue 23 item 4: `sonde analyze` writes each association's samples one by one (up to
/// `--association-samples`, the rest counted), and `sonde plot` draws sample n against n + 1 of
/// them. On a ground-truth capture with the ready-made data→ACK associations.
#[test]
fn association_phase_plot_from_the_written_samples() {
    let Some(trace) = shared("groundtruth/mixed.pcap") else { return };
    let defs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../definitions/tcp-rtt.defs");
    let defs = defs.to_str().unwrap();
    let (all_dir, out) = common::analyze(&trace, &["--definitions", defs]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let totals = common::read_tsv(&all_dir.path().join("definition_associations.tsv"));
    let samples = common::read_tsv(&all_dir.path().join("definition_association_samples.tsv"));
    let gaps = |rows: &[std::collections::HashMap<String, String>], name: &str| -> Vec<f64> {
        rows.iter().filter(|r| r["association"] == name).map(|r| common::num(r, "gap_ms")).collect()
    };
    let rtt = totals.iter().find(|t| t["association"] == "rtt").unwrap();
    let rtt_gaps = gaps(&samples, "rtt");
    assert!(rtt_gaps.len() > 1000, "{}", rtt_gaps.len());
    // Every sample written, agreeing with the association's own figures.
    for t in &totals {
        let g = gaps(&samples, &t["association"]);
        assert_eq!(g.len() as u64, common::int(t, "samples"), "{}", t["association"]);
        assert_eq!(common::int(t, "samples_unwritten"), 0);
        if g.is_empty() {
            continue;
        }
        let min = g.iter().copied().fold(f64::INFINITY, f64::min);
        let max = g.iter().copied().fold(0.0, f64::max);
        let mean = g.iter().sum::<f64>() / g.len() as f64;
        assert_eq!((min, max), (common::num(t, "min_ms"), common::num(t, "max_ms")), "{}", t["association"]);
        assert!((mean - common::num(t, "mean_ms")).abs() < 1e-6 * mean.max(1.0), "{}", t["association"]);
    }
    let (figs, _) = sonde_plot::figures_for(all_dir.path(), sonde_plot::Selection::Distributions).unwrap();
    let Some(sonde_plot::Figure::Phase(fig)) = figs.iter().find(|f| f.file_stem() == "phase-rtt") else {
        panic!("no phase-rtt")
    };
    assert_eq!(fig.points.len(), rtt_gaps.len() - 1);
    for (i, p) in fig.points.iter().enumerate() {
        assert_eq!(*p, (rtt_gaps[i], rtt_gaps[i + 1]), "point {i}");
    }
    assert_eq!(fig.min_ms, common::num(rtt, "min_ms"));
    assert!(fig.note.starts_with(&format!("all {} samples", rtt_gaps.len())), "{}", fig.note);

    // A limit of 100: the first 100 of each association, the rest counted.
    let (dir, out) = common::analyze(&trace, &["--definitions", defs, "--association-samples", "100"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let few = common::read_tsv(&dir.path().join("definition_association_samples.tsv"));
    for t in common::read_tsv(&dir.path().join("definition_associations.tsv")) {
        let name = &t["association"];
        let (taken, kept) = (common::int(&t, "samples"), gaps(&few, name));
        assert_eq!(kept.len() as u64, taken.min(100), "{name}");
        assert_eq!(common::int(&t, "samples_unwritten"), taken - kept.len() as u64, "{name}");
        assert_eq!(kept[..], gaps(&samples, name)[..kept.len()], "{name}: the first ones");
    }
    let out = sonde().arg("plot").arg(dir.path()).args(["--what", "dist", "--format", "svg"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let svg = std::fs::read_to_string(dir.path().join("plots/phase-rtt.svg")).unwrap();
    assert!(svg.contains(&format!("the first 100 of {} samples", rtt_gaps.len())), "the note says what was left out");
    assert!(svg.contains("gap n+1 (ms)") && svg.matches("<circle").count() >= 99, "99 points drawn");
}
