//! Figures from the fixtures in tests/fixtures: the series checked against hand computation,
//! then drawn as PNG (decoded again, sized right, not blank) and SVG (parsed as XML, holding
//! the expected labels and series).
//!
//! Fixtures: `inout/` has 12 intervals of 60 s from 2026-11-22 00:30:00 UTC (interval i ∈ 0..12:
//! TCP in 750 000·(i+1) B, TCP out 75 000·(i+1) B, 2 and 1 new flows, 10+i and 5 active; UDP in
//! 75 000 B, 3 new, 3 active in even intervals; ICMP loc 150 B except interval 7) and the flow
//! logs of testdata/demo.pcap. `ext/` has 30 s intervals, all `ext` (no internal networks),
//! columns in another order, the last interval 12.5 s. `dist/` has five hand-made TCP flows,
//! one UDP flow and a histograms.tsv.

use std::path::{Path, PathBuf};

use sonde_plot::figures::{flow_figures, rtt_figure, time_figures, Layout, TimeFigure};
use sonde_plot::{figures_for, flows, histograms, intervals, plot_dir, Figure, ImageFormat, PlotRequest, Selection};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * b.abs().max(1.0)
}

fn assert_series(got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!(close(*g, *w), "{got:?} vs {want:?}");
    }
}

fn time_inout() -> Vec<TimeFigure> {
    let rows = intervals::read_intervals(&fixture("inout/intervals.tsv")).unwrap();
    time_figures(&rows, "inout").0
}

const T0: f64 = 1_795_307_400.0;

#[test]
fn native_series_match_the_rows() {
    let figs = time_inout();
    let native = &figs[0];
    assert_eq!(native.file_stem, "time-native-60s");
    assert_eq!(native.edges.len(), 13);
    assert_eq!((native.edges[0], native.edges[12]), (T0, T0 + 720.0));
    // TCP in: 750 000·(i+1) B × 8 / 60 s = 100 000·(i+1) bit/s; UDP in 10 000 bit/s when i is even.
    let tcp_in: Vec<f64> = native.panels[0].above.iter().map(|v| v[0]).collect();
    assert_series(&tcp_in, &(1..=12).map(|i| 100_000.0 * i as f64).collect::<Vec<_>>());
    let udp_in: Vec<f64> = native.panels[0].above.iter().map(|v| v[1]).collect();
    assert_series(&udp_in, &(0..12).map(|i| if i % 2 == 0 { 10_000.0 } else { 0.0 }).collect::<Vec<_>>());
    let tcp_out: Vec<f64> = native.panels[0].below.iter().map(|v| v[0]).collect();
    assert_series(&tcp_out, &(1..=12).map(|i| 10_000.0 * i as f64).collect::<Vec<_>>());
    // ICMP is only `loc`: in neither side.
    assert!(native.panels[0].above.iter().chain(&native.panels[0].below).all(|v| v[2] == 0.0));
    // New flows: 2 per 60 s in, 1 per 60 s out; active: 10 + i in.
    assert!(close(native.panels[1].above[0][0], 2.0 / 60.0) && close(native.panels[1].below[0][0], 1.0 / 60.0));
    assert_eq!(native.panels[2].above[11][0], 21.0);
}

#[test]
fn five_minute_bins_by_hand() {
    let figs = time_inout();
    let tags: Vec<&str> = figs.iter().map(|f| f.file_stem.as_str()).collect();
    assert_eq!(tags, ["time-native-60s", "time-5min"]);
    let f = &figs[1];
    // Bins [00:30, 00:35), [00:35, 00:40), [00:40, 00:45) — the last covers 120 s of trace.
    assert_eq!(f.edges, [T0, T0 + 300.0, T0 + 600.0, T0 + 720.0]);
    // TCP in: (1+…+5)·750 000·8/300 = 300 000; (6+…+10)·750 000·8/300 = 800 000;
    // (11+12)·750 000·8/120 = 1 150 000 bit/s.
    let tcp_in: Vec<f64> = f.panels[0].above.iter().map(|v| v[0]).collect();
    assert_series(&tcp_in, &[300_000.0, 800_000.0, 1_150_000.0]);
    // UDP in: intervals 0, 2, 4 → 3·75 000·8/300 = 6000; 6, 8 → 4000; 10 → 75 000·8/120 = 5000.
    let udp_in: Vec<f64> = f.panels[0].above.iter().map(|v| v[1]).collect();
    assert_series(&udp_in, &[6000.0, 4000.0, 5000.0]);
    // New UDP flows: 9 in 300 s, 6 in 300 s, 3 in 120 s.
    let udp_new: Vec<f64> = f.panels[1].above.iter().map(|v| v[1]).collect();
    assert_series(&udp_new, &[0.03, 0.02, 0.025]);
    // Active TCP in, time-weighted: mean of 10..=14, 15..=19, 20..=21.
    let active: Vec<f64> = f.panels[2].above.iter().map(|v| v[0]).collect();
    assert_series(&active, &[12.0, 17.0, 20.5]);
    // Hidden: ICMP loc, 11 × 150 B, of all bytes.
    let total: f64 = (1..=12).map(|i| 825_000.0 * i as f64).sum::<f64>() + 6.0 * 75_000.0 + 11.0 * 150.0;
    match f.layout {
        Layout::InOut { hidden_share } => assert!(close(hidden_share, 1650.0 / total), "{hidden_share}"),
        Layout::AllAbove => panic!("in/out traffic exists"),
    }
    assert!(f.directions.contains("< 0.1 % of bytes"), "{}", f.directions);
}

#[test]
fn without_internal_networks_all_traffic_is_above() {
    let rows = intervals::read_intervals(&fixture("ext/intervals.tsv")).unwrap();
    let (figs, notes) = time_figures(&rows, "ext");
    assert_eq!(figs.len(), 1);
    let f = &figs[0];
    assert_eq!(f.layout, Layout::AllAbove);
    assert!(f.directions.contains("no internal networks"), "{}", f.directions);
    // 30 s bins; the last interval (12.5 s) ends the trace: 187 500 B × 8 / 12.5 s.
    assert_eq!(f.edges.last(), Some(&(T0 + 132.5)));
    let tcp: Vec<f64> = f.panels[0].above.iter().map(|v| v[0]).collect();
    assert_series(&tcp, &[10_000.0, 20_000.0, 30_000.0, 40_000.0, 120_000.0]);
    assert!(f.panels.iter().all(|p| p.below.iter().all(|v| v.iter().all(|&x| x == 0.0))));
    assert_eq!(notes.len(), 4);
    assert_eq!(notes[0], "time figure skipped: 5 min (daily view): the trace spans 2.21 min, less than 2 bins");
}

#[test]
fn distributions_by_hand() {
    let tcp = flows::read_flows(&fixture("dist/tcp_flows.tsv")).unwrap();
    let udp = flows::read_flows(&fixture("dist/udp_flows.tsv")).unwrap();
    let figs = flow_figures(&tcp, &udp, "dist");
    assert_eq!(figs[0].file_stem, "flow-duration");
    // Durations 1, 2, 2, 5, 0 s: P(X ≤ x) 0.2 at 0, 0.4 at 1, 0.8 at 2, 1 at 5.
    let d = &figs[0].series[0];
    assert_eq!(d.label, "TCP (n=5, 1 at 0 not shown)");
    assert_eq!(d.cdf, [(0.0, 0.2), (1.0, 0.4), (2.0, 0.8), (5.0, 1.0)]);
    assert_eq!(d.ccdf, [(0.0, 1.0), (1.0, 0.8), (2.0, 0.6), (5.0, 0.2)]);
    assert_eq!(figs[0].series[1].cdf, [(0.3, 1.0)]);
    // Bytes c2s 100, 1000, 0, 100, 10000; s2c 5000, 0, 50000, 500, 0.
    let size = &figs[1];
    let labels: Vec<&str> = size.series.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(
        labels,
        ["TCP c2s (n=5, 1 at 0 not shown)", "TCP s2c (n=5, 2 at 0 not shown)", "UDP c2s (n=1)", "UDP s2c (n=1)"]
    );
    assert_eq!(size.series[0].cdf, [(0.0, 0.2), (100.0, 0.6), (1000.0, 0.8), (10000.0, 1.0)]);
    assert_eq!(size.series[1].ccdf, [(0.0, 1.0), (500.0, 0.6), (5000.0, 0.4), (50000.0, 0.2)]);

    // RTT from the flows: c2s 20, 30, 200 ms (flows 3 and 5 have no sample); 10 bins a decade.
    let rtt = rtt_figure(&tcp, None, "dist").unwrap();
    assert_eq!(rtt.series[0].label, "c2s (c_rtt_avg) (n=3)");
    let nonzero: Vec<(f64, f64)> =
        rtt.series[0].bins.iter().filter(|b| b.fraction > 0.0).map(|b| (b.lo, b.fraction)).collect();
    // 20 ms in [10^1.3, 10^1.4), 30 in [10^1.4, 10^1.5), 200 in [10^2.3, 10^2.4).
    assert_eq!(nonzero.len(), 3);
    for ((lo, frac), k) in nonzero.iter().zip([13.0, 14.0, 23.0]) {
        assert!(close(*lo, 10f64.powf(k / 10.0)) && close(*frac, 1.0 / 3.0), "{nonzero:?}");
    }
    assert_eq!(rtt.series[1].label, "s2c (s_rtt_avg) (n=3)");

    // RTT from histograms.tsv wins when it has tcp_rtt_sample rows.
    let hists = histograms::read_histograms(&fixture("dist/histograms.tsv"), "tcp_rtt_sample").unwrap();
    let rtt = rtt_figure(&tcp, Some(&hists), "dist").unwrap();
    assert!(rtt.title.contains("histograms.tsv"), "{}", rtt.title);
    let c2s: Vec<(f64, f64, f64)> = rtt.series[0].bins.iter().map(|b| (b.lo, b.hi, b.fraction)).collect();
    assert_eq!(c2s, [(10.0, 20.0, 0.6), (20.0, 50.0, 0.3), (100.0, 200.0, 0.1)]);
    assert_eq!(rtt.series[1].label, "s2c (n=4)");
}

fn decode_png(bytes: &[u8]) -> (u32, u32, Vec<u8>) {
    let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = decoder.read_info().expect("a PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("PNG data");
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

/// Pixels of about this colour.
fn count_near(rgb: &[u8], color: [u8; 3]) -> usize {
    rgb.chunks_exact(3).filter(|p| p.iter().zip(color).all(|(a, b)| a.abs_diff(b) <= 6)).count()
}

#[test]
fn png_figures_decode_at_their_size() {
    let out = tempfile::tempdir().unwrap();
    let req = PlotRequest {
        input: Some(fixture("inout")),
        store: None,
        output: out.path().join("plots"),
        format: ImageFormat::Png,
        selection: Selection::All,
    };
    let report = plot_dir(&req).unwrap();
    let names: Vec<String> =
        report.written.iter().map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    let want = ["time-native-60s.png", "time-5min.png", "flow-duration.png", "flow-size.png", "rtt-pdf.png"];
    assert_eq!(names, want.into_iter().chain(["flow-lifetime.png"]).collect::<Vec<_>>());
    assert_eq!(report.notes.len(), 4, "{:?}", report.notes);
    // The demo's 20 s lie in one clock hour: no busy and off-peak hours.
    assert!(report.notes[3].starts_with("no busy-offpeak figure: the trace has traffic in 1 clock hour"));
    let sizes = [(1200, 900), (1200, 900), (1200, 520), (1200, 520), (900, 520), (1200, 560)];
    for (path, size) in report.written.iter().zip(sizes) {
        let (w, h, rgb) = decode_png(&std::fs::read(path).unwrap());
        assert_eq!((w, h), size, "{}", path.display());
        // A white page with something drawn on it (the flow-duration figure of this small
        // fixture, titled with the directory's name, is 95 % white).
        let (pixels, white) = (rgb.len() / 3, count_near(&rgb, [255, 255, 255]));
        assert!(white > pixels / 5 && white < pixels * 98 / 100, "{}: {white} of {pixels} white", path.display());
    }
    // The time figure's TCP layer: #1F77B4 lightened a quarter towards white, (87, 153, 198).
    let (_, _, rgb) = decode_png(&std::fs::read(&report.written[0]).unwrap());
    let tcp_pixels = count_near(&rgb, [87, 153, 198]);
    assert!(tcp_pixels > 100_000, "{tcp_pixels} TCP pixels");
    // Text is drawn (black glyph pixels exist in the title band).
    let title_band = &rgb[..1200 * 25 * 3];
    assert!(count_near(title_band, [0, 0, 0]) > 200);
}

fn svg_texts(bytes: &[u8]) -> (Vec<String>, roxmltree::Document<'_>) {
    let text = std::str::from_utf8(bytes).expect("UTF-8");
    let doc = roxmltree::Document::parse(text).expect("well-formed SVG");
    let texts = doc
        .descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or("").trim().to_string())
        .collect();
    (texts, doc)
}

#[test]
fn svg_figures_are_well_formed_and_labelled() {
    let (figs, _) = figures_for(&fixture("inout"), Selection::All).unwrap();
    let svg = figs[1].render(ImageFormat::Svg).unwrap();
    let (texts, doc) = svg_texts(&svg);
    let root = doc.root_element();
    assert_eq!(
        (root.tag_name().name(), root.attribute("width"), root.attribute("height")),
        ("svg", Some("1200"), Some("900"))
    );
    for want in
        ["Throughput, bit/s   ↑ in   ↓ out", "New flows, flows/s   ↑ in   ↓ out", "bit/s", "TCP", "UDP", "1M", "00:40"]
    {
        assert!(texts.iter().any(|t| t == want), "no text {want:?} in {texts:?}");
    }
    assert!(texts.iter().any(|t| t.ends_with("traffic per 5 min (daily view) bin")), "{texts:?}");
    assert!(texts.iter().any(|t| t == "time (UTC), from 2026-11-22 00:30:00"), "{texts:?}");
    // Two stacked layers (TCP, UDP) above and below in each of three panels.
    let fills =
        |c: &str| doc.descendants().filter(|n| n.has_tag_name("polygon") && n.attribute("fill") == Some(c)).count();
    assert_eq!((fills("#5799C6"), fills("#FF9F4A")), (6, 6));

    let dist = figs.iter().find(|f| f.file_stem() == "flow-size").unwrap();
    let (texts, _) = svg_texts(&dist.render(ImageFormat::Svg).unwrap());
    for want in ["CDF  P(X ≤ x)", "CCDF  P(X ≥ x), log-log", "1k", "10k", "TCP c2s (n=13, 2 at 0 not shown)"] {
        assert!(texts.iter().any(|t| t == want), "no text {want:?} in {texts:?}");
    }
    let rtt = figs.iter().find(|f| f.file_stem() == "rtt-pdf").unwrap();
    let Figure::Pdf(_) = rtt else { panic!("the RTT figure is a pdf") };
    let (texts, _) = svg_texts(&rtt.render(ImageFormat::Svg).unwrap());
    assert!(texts.iter().any(|t| t == "RTT (ms)"), "{texts:?}");
    // Tstat's Fig. 2 over every TCP flow of the demo (13).
    let lifetime = figs.iter().find(|f| f.file_stem() == "flow-lifetime").unwrap();
    let (texts, _) = svg_texts(&lifetime.render(ImageFormat::Svg).unwrap());
    for want in ["Flow lifetime: survival  P(X > x), log-log", "Per-flow throughput: pdf", "all TCP flows (n=13)"] {
        assert!(texts.iter().any(|t| t.starts_with(want)), "no text {want:?} in {texts:?}");
    }
}

#[test]
fn malformed_inputs_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("intervals.tsv");
    std::fs::write(&path, "start\tend\tproto\tnet\tbytes\tflows_opened\tflows_active\n0\t60\ttcp\tin\t12x\t0\t0\n")
        .unwrap();
    let e = figures_for(dir.path(), Selection::Time).unwrap_err().to_string();
    assert_eq!(e, format!("{}:2: column `bytes`: `12x` is not a non-negative number", path.display()));
    std::fs::write(&path, "start\tend\tproto\tnet\tbytes\tflows_opened\n").unwrap();
    let e = figures_for(dir.path(), Selection::Time).unwrap_err().to_string();
    assert_eq!(e, format!("{}: the header has no column `flows_active`", path.display()));
    let flows = dir.path().join("tcp_flows.tsv");
    std::fs::write(&flows, "durat\tc_bytes_all\ts_bytes_all\n1\t2\t3\n4\t5\n").unwrap();
    let e = figures_for(dir.path(), Selection::Distributions).unwrap_err().to_string();
    assert_eq!(e, format!("{}:3: 2 fields, but the header has 3 columns", flows.display()));
    let empty = tempfile::tempdir().unwrap();
    let e = figures_for(empty.path(), Selection::All).unwrap_err().to_string();
    assert!(e.ends_with("no intervals.tsv, quantiles.tsv, flow log or histograms.tsv to plot"), "{e}");
}

#[test]
fn a_header_only_interval_file_gives_a_note_not_a_figure() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("intervals.tsv"), "start\tend\tproto\tnet\tbytes\tflows_opened\tflows_active\n")
        .unwrap();
    let (figs, notes) = figures_for(dir.path(), Selection::Time).unwrap();
    assert!(figs.is_empty());
    assert_eq!(notes, ["intervals.tsv has no rows: no time figure"]);
}
