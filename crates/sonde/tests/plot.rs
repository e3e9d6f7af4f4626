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
    let want: Vec<String> = ["flow-duration.png", "flow-size.png", "rtt-pdf.png"]
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
    let want: Vec<String> = ["store-1s.svg", "store-rtt-1s.svg", "store-2s.svg", "store-rtt-2s.svg"]
        .iter()
        .map(|f| plots.join(f).display().to_string())
        .collect();
    assert_eq!(String::from_utf8(out.stdout).unwrap().lines().collect::<Vec<_>>(), want);
    for (f, text) in want.iter().zip(["Throughput", "Per-flow average RTT", "Throughput", "Handshake RTT"]) {
        let svg = std::fs::read_to_string(f).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains(text) && svg.len() > 10_000, "{f}");
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
    let mut checked = 0;
    for (resolution, stem) in [("1", "store-rtt-1s"), ("2", "store-rtt-2s")] {
        let Some(sonde_plot::Figure::Lines(fig)) = figs.iter().find(|f| f.file_stem() == stem) else {
            panic!("no {stem}")
        };
        for (metric, panel) in [("rtt_avg", 0), ("hs_rtt", 1)] {
            for (k, pct) in ["p50", "p95"].iter().enumerate() {
                let values = &fig.panels[panel].lines[k].values;
                for (i, end) in fig.edges[1..].iter().enumerate() {
                    let row = rows
                        .iter()
                        .find(|r| {
                            r[col("cf")] == "AVERAGE"
                                && r[col("resolution_s")] == resolution
                                && r[col("time_s")] == end.to_string()
                        })
                        .unwrap_or_else(|| panic!("no dumped row at {end}"));
                    let dumped = row[col(&format!("{metric}_{pct}"))];
                    let drawn = values[i];
                    if dumped.is_empty() {
                        assert!(drawn.is_nan(), "{stem} {metric} {pct} at {end}: drawn {drawn}, stored unknown");
                    } else {
                        assert_eq!(drawn, dumped.parse::<f64>().unwrap(), "{stem} {metric} {pct} at {end}");
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked >= 8, "{checked} values checked");
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
