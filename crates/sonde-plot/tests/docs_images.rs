//! The example figures of docs/monitoring.md ("Plots"), drawn from a synthetic output directory this test
//! writes: three days of 5-minute intervals with a daily cycle, and 20 000 TCP and 8 000 UDP
//! flows drawn from heavy-tailed distributions (a fixed seed: the same files every run).
//!
//! Every run checks the figures are drawn and stay small; `UPDATE_DOCS_IMG=1 cargo test -p
//! sonde-plot --test docs_images` rewrites docs/img/plot-*.png.

use std::fmt::Write as _;
use std::path::Path;

use sonde_plot::{figures_titled, Figure, ImageFormat, Selection};

/// xorshift64*: deterministic and good enough for pictures.
struct Rng(u64);

impl Rng {
    fn uniform(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        ((self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    fn normal(&mut self) -> f64 {
        let (u, v) = (self.uniform(), self.uniform());
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }

    fn lognormal(&mut self, median: f64, sigma: f64) -> f64 {
        median * (sigma * self.normal()).exp()
    }

    fn pareto(&mut self, min: f64, alpha: f64) -> f64 {
        min / self.uniform().powf(1.0 / alpha)
    }
}

/// 2026-11-21 00:00:00 UTC.
const START_S: f64 = 1_795_219_200.0;

fn write_intervals(dir: &Path, rng: &mut Rng) {
    let mut text = String::from("start\tend\tproto\tnet\tpackets\tbytes\tflows_opened\tflows_closed\tflows_active\n");
    for k in 0..3 * 288 {
        let start = START_S + 300.0 * k as f64;
        let hour = (k % 288) as f64 / 12.0;
        // Quiet at night, a peak in the evening.
        let day = daily(hour);
        let load = 0.08 + 0.92 * day.powf(1.5) * (1.0 + 0.08 * rng.normal()).max(0.5);
        let rows = [
            ("tcp", "in", 45e6, 18.0, 2400.0),
            ("tcp", "out", 6e6, 9.0, 1300.0),
            ("udp", "in", 7e6, 6.0, 400.0),
            ("udp", "out", 3e6, 5.0, 350.0),
            ("icmp", "in", 2e4, 0.2, 5.0),
            ("tcp", "loc", 1e6, 1.0, 50.0),
        ];
        for (proto, net, bit_rate, opened_per_s, active) in rows {
            let bytes = (bit_rate * load * 300.0 / 8.0).round();
            let opened = (opened_per_s * load * 300.0).round();
            let _ = writeln!(
                text,
                "{start:.6}\t{:.6}\t{proto}\t{net}\t{}\t{bytes}\t{opened}\t{opened}\t{}",
                start + 300.0,
                (bytes / 900.0).round(),
                (active * load).round()
            );
        }
    }
    std::fs::write(dir.join("intervals.tsv"), text).unwrap();
}

/// The daily cycle of the synthetic days at `hour` (0–24): 0 at night, 1 at the evening peak.
fn daily(hour: f64) -> f64 {
    ((hour - 7.0) / 16.0 * std::f64::consts::PI).sin().max(0.0)
}

/// `quantiles.tsv`'s `tcp_thru` rows for the days of `write_intervals`: per-flow throughput
/// falling as the link fills, c2s (uploads) a tenth of s2c.
fn write_quantiles(dir: &Path, rng: &mut Rng) {
    let mut text = String::from("start\tend\tmetric\tdir\tnet\tunit\tcount\tmean\tmin\tp50\tp95\tp99\tmax\n");
    for k in 0..3 * 288 {
        let start = START_S + 300.0 * k as f64;
        let load = daily((k % 288) as f64 / 12.0);
        for (dir, scale) in [("c2s", 0.1), ("s2c", 1.0)] {
            let mean = scale * 2e6 * (1.0 - 0.6 * load) * (1.0 + 0.1 * rng.normal()).max(0.5);
            let (p95, p99) = (mean * (4.0 + rng.uniform()), mean * (12.0 + 4.0 * rng.uniform()));
            let _ = writeln!(
                text,
                "{start:.6}\t{:.6}\ttcp_thru\t{dir}\tin\tbit/s\t500\t{mean:.0}\t0\t{:.0}\t{p95:.0}\t{p99:.0}\t{:.0}",
                start + 300.0,
                mean * 0.4,
                p99 * 3.0
            );
        }
    }
    std::fs::write(dir.join("quantiles.tsv"), text).unwrap();
}

/// Kitatsuji's Fig. 11 in miniature: 1,128 RTTs of one flow, 8.3 ms at least, a few tenths of
/// a ms above it mostly, with a congestion episode that builds and drains.
fn write_association_samples(dir: &Path, rng: &mut Rng) {
    let mut text = String::from("association\tn\tanswered\tgap_ms\n");
    let mut queue = 0.0_f64;
    for n in 1..=1128 {
        let congested = (400..520).contains(&n) || (800..830).contains(&n);
        queue = if congested { (queue + rng.uniform() * 0.4).min(12.0) } else { (queue * 0.7 - 0.05).max(0.0) };
        let gap = 8.3 + 0.6 * rng.uniform() + queue;
        let _ = writeln!(text, "rtt\t{n}\t{:.9}\t{gap:.6}", START_S + 20.0 + n as f64 * 0.004);
    }
    std::fs::write(dir.join("definition_association_samples.tsv"), text).unwrap();
}

fn write_flows(dir: &Path, rng: &mut Rng) {
    let mut tcp = String::from("first\tdurat\tc_bytes_all\ts_bytes_all\tc_rtt_avg\tc_rtt_cnt\ts_rtt_avg\ts_rtt_cnt\n");
    for _ in 0..20_000 {
        // Flows start more often when the link is busy (the cycle of the intervals).
        let (first_s, load) = loop {
            let t = rng.uniform() * 3.0 * 86400.0;
            let load = daily((t % 86400.0) / 3600.0);
            if rng.uniform() < 0.08 + 0.92 * load {
                break (START_S + t, load);
            }
        };
        // Busy hours: more short flows (web), slower ones.
        let durat_ms = rng.lognormal(2000.0 * (1.0 - 0.5 * load), 1.6 - 0.3 * load);
        let c2s = if rng.uniform() < 0.05 { 0.0 } else { rng.lognormal(800.0, 1.2).round() };
        let s2c = if rng.uniform() < 0.03 { 0.0 } else { rng.pareto(500.0, 1.1 + 0.3 * load).min(2e9).round() };
        // The probe near the clients: the server side (c_rtt) far, 15 or 120 ms; the client side
        // (s_rtt) near, about 0.5 ms.
        let far = if rng.uniform() < 0.6 { rng.lognormal(15.0, 0.4) } else { rng.lognormal(120.0, 0.3) };
        let near = rng.lognormal(0.5, 0.8);
        let samples = u32::from(rng.uniform() < 0.9) * 5;
        let _ = writeln!(
            tcp,
            "{:.3}\t{durat_ms:.3}\t{c2s}\t{s2c}\t{far:.3}\t{samples}\t{near:.3}\t{samples}",
            first_s * 1e3
        );
    }
    std::fs::write(dir.join("tcp_flows.tsv"), tcp).unwrap();
    let mut udp = String::from("durat\tc_bytes_all\ts_bytes_all\n");
    for _ in 0..8_000 {
        let durat_ms = if rng.uniform() < 0.3 { 0.0 } else { rng.lognormal(50.0, 2.0) };
        let c2s = rng.lognormal(120.0, 1.0).round().max(1.0);
        let s2c = if rng.uniform() < 0.4 { 0.0 } else { rng.lognormal(400.0, 1.5).round() };
        let _ = writeln!(udp, "{durat_ms:.3}\t{c2s}\t{s2c}");
    }
    std::fs::write(dir.join("udp_flows.tsv"), udp).unwrap();
}

/// A store fed the same kind of days as `write_intervals`, with a four-hour outage on the second
/// day (the probe was stopped: rows unknown), as `sonde analyze --store` fills one. RTTs: most
/// flows 15 ms away, the tail (p95) growing with the load, a handshake a little shorter.
fn write_store(path: &Path, rng: &mut Rng) {
    let names = sonde_stats::Report::series_names();
    let spec = sonde_rrd::Spec::tstat_default(300, names.clone());
    let mut store = sonde_rrd::Store::create(path, &spec, START_S as u64).unwrap();
    let at = |name: &str| names.iter().position(|n| n == name).unwrap();
    for k in 1..=3 * 288u64 {
        if (288 + 10 * 12..288 + 14 * 12).contains(&k) {
            continue;
        }
        let hour = (k % 288) as f64 / 12.0;
        let day = daily(hour);
        let load = 0.08 + 0.92 * day.powf(1.5) * (1.0 + 0.08 * rng.normal()).max(0.5);
        let mut values = vec![f64::NAN; names.len()];
        values[..at("rtt_avg_mean")].fill(0.0);
        for (proto, net, bit_rate, active) in [
            ("tcp", "in", 45e6, 2400.0),
            ("tcp", "out", 6e6, 1300.0),
            ("udp", "in", 7e6, 400.0),
            ("udp", "out", 3e6, 350.0),
        ] {
            let bytes = (bit_rate * load * 300.0 / 8.0).round();
            values[at(&format!("{proto}_{net}_bytes"))] = bytes;
            values[at(&format!("{proto}_{net}_pkts"))] = (bytes / 900.0).round();
            values[at(&format!("{proto}_{net}_flows"))] = (active * load).round();
        }
        for (metric, base) in [("rtt_avg", 16.0), ("hs_rtt", 14.0)] {
            values[at(&format!("{metric}_p50"))] = rng.lognormal(base * (1.0 + 0.3 * load), 0.05);
            values[at(&format!("{metric}_p95"))] = rng.lognormal(base * (6.0 + 10.0 * load), 0.25);
        }
        // Per-flow throughput (both directions merged): lower when the link is busy.
        let mean = rng.lognormal(1e6 * (1.0 - 0.6 * day), 0.1);
        values[at("tcp_thru_mean")] = mean;
        values[at("tcp_thru_p95")] = mean * 4.5;
        values[at("tcp_thru_p99")] = mean * 14.0;
        store.update(START_S as u64 + 300 * k, &values).unwrap();
    }
    store.sync().unwrap();
}

#[test]
fn docs_store_figure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("link.rrd");
    write_store(&path, &mut Rng(0x0005_70de));
    let (figs, notes) = sonde_plot::store::read_store_figures(&path, "synthetic store").unwrap();
    let stems: Vec<&str> = figs.iter().map(|f| f.file_stem()).collect();
    // Three days: the 1-day archive has three rows, every archive draws.
    let want = ["5min", "30min", "2h", "1d"]
        .map(|r| [format!("store-{r}"), format!("store-rtt-{r}"), format!("store-thru-{r}")])
        .concat();
    assert_eq!(stems, want, "{notes:?}");
    let Figure::Time(week) = &figs[3] else { panic!("{:?}", figs[3].file_stem()) };
    assert!(week.panels[0].above.iter().any(|v| v[0].is_nan()), "the outage is a gap");
    let update = std::env::var_os("UPDATE_DOCS_IMG").is_some();
    for fig in &figs[3..6] {
        let png = fig.render(ImageFormat::Png).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert!((10_000..200_000).contains(&png.len()), "{}: {} bytes", fig.file_stem(), png.len());
        if update {
            let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img");
            std::fs::write(docs.join(format!("plot-{}.png", fig.file_stem())), &png).unwrap();
        }
    }
}

#[test]
fn docs_example_figures() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x005e_ed0f_50de);
    write_intervals(dir.path(), &mut rng);
    write_flows(dir.path(), &mut rng);
    write_quantiles(dir.path(), &mut rng);
    write_association_samples(dir.path(), &mut rng);
    let (figs, notes) = figures_titled(dir.path(), "synthetic example", Selection::All).unwrap();
    let stems: Vec<&str> = figs.iter().map(|f| f.file_stem()).collect();
    let want = ["time-native-5min", "time-30min", "time-2h", "time-1d", "time-thru-native-5min", "flow-duration"];
    let want = want.into_iter().chain(["flow-size", "rtt-pdf", "flow-lifetime", "busy-offpeak", "phase-rtt"]);
    assert_eq!(stems, want.collect::<Vec<_>>(), "{notes:?}");
    // 5-minute data: the 5-minute "daily view" is the native figure; no RTT row in quantiles.tsv.
    assert_eq!(
        notes,
        [
            "time figure skipped: 5 min (daily view): not coarser than the native 5 min interval",
            "no RTT time figure: quantiles.tsv has no tcp_hs_rtt or tcp_rtt_avg row"
        ]
    );
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/img");
    let update = std::env::var_os("UPDATE_DOCS_IMG").is_some();
    let drawn = ["time-30min", "flow-duration", "flow-size", "rtt-pdf", "time-thru-native-5min", "busy-offpeak"];
    for fig in figs.iter().filter(|f| drawn.contains(&f.file_stem()) || f.file_stem() == "phase-rtt") {
        let png = fig.render(ImageFormat::Png).unwrap();
        assert!(png.len() < 200_000, "{}: {} bytes", fig.file_stem(), png.len());
        if update {
            std::fs::write(docs.join(format!("plot-{}.png", fig.file_stem())), &png).unwrap();
        }
    }
}
