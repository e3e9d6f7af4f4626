//! Prometheus text exposition (format 0.0.4) of a snapshot: counters `_total`, base units in
//! names (seconds, bytes, ratio), one HELP and TYPE per family, labels for protocol and direction.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::snapshot::{Phase, Snapshot};
use crate::state::ExportCounter;

pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One metric family: its help, type and sample lines.
struct Family {
    help: &'static str,
    kind: &'static str,
    samples: Vec<String>,
}

#[derive(Default)]
struct Exposition {
    families: BTreeMap<String, Family>,
}

impl Exposition {
    fn add(&mut self, name: &str, help: &'static str, kind: &'static str, labels: &[(&str, &str)], value: f64) {
        self.add_sample(name, name, help, kind, labels, value);
    }

    /// A sample named `sample` in family `family` (a summary's `_sum` and `_count` are
    /// samples of its family).
    fn add_sample(
        &mut self,
        family: &str,
        sample: &str,
        help: &'static str,
        kind: &'static str,
        labels: &[(&str, &str)],
        value: f64,
    ) {
        let family =
            self.families.entry(family.to_string()).or_insert_with(|| Family { help, kind, samples: Vec::new() });
        let mut line = sample.to_string();
        if !labels.is_empty() {
            line.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    line.push(',');
                }
                let _ = write!(line, "{k}=\"{}\"", escape(v));
            }
            line.push('}');
        }
        let _ = write!(line, " {}", number(value));
        family.samples.push(line);
    }

    fn render(self) -> String {
        let mut out = String::new();
        for (name, f) in self.families {
            let _ = writeln!(out, "# HELP {name} {}", f.help);
            let _ = writeln!(out, "# TYPE {name} {}", f.kind);
            for s in f.samples {
                out.push_str(&s);
                out.push('\n');
            }
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.into()
    } else {
        format!("{v}")
    }
}

/// A quantile file's unit as a Prometheus base unit: the name suffix and the factor to it.
fn base_unit(unit: &str) -> Option<(&'static str, f64)> {
    match unit {
        "ms" => Some(("seconds", 1e-3)),
        "bytes" => Some(("bytes", 1.0)),
        // Prometheus's base unit is the byte (promtool refuses bits).
        "bit/s" => Some(("bytes_per_second", 0.125)),
        "%" => Some(("ratio", 1e-2)),
        "hops" => Some(("hops", 1.0)),
        // tcp_anomaly's values are class codes: its count and the bins (/api/histograms) are
        // what it says; the quantiles are codes.
        "class" => Some(("class", 1.0)),
        _ => None,
    }
}

/// The exposition of `snap` and the exporters' counters.
pub fn render(snap: &Snapshot, exports: &[ExportCounter]) -> String {
    let mut e = Exposition::default();
    let s = &snap.status;
    e.add("sonde_packets_total", "Packets read.", "counter", &[], s.packets as f64);
    e.add("sonde_bytes_total", "Bytes read (on the wire).", "counter", &[], s.bytes as f64);
    e.add(
        "sonde_run_finished",
        "1 once the run has read all its input.",
        "gauge",
        &[],
        f64::from(s.state == Phase::Finished),
    );
    e.add("sonde_run_elapsed_seconds", "Wall-clock seconds the run has taken.", "gauge", &[], s.elapsed_s);
    e.add("sonde_intervals", "Monitoring intervals kept.", "gauge", &[], snap.intervals.items.len() as f64);
    e.add(
        "sonde_build_info",
        "sonde's version, as a label (the value is always 1).",
        "gauge",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );

    // Counters summed over every interval (a live run keeps the whole run's sums aside: its
    // intervals are only the recent ones), by protocol and direction.
    let mut sums: BTreeMap<(&str, &str), [u64; 4]> = BTreeMap::new();
    let rows: Box<dyn Iterator<Item = &crate::snapshot::TrafficRow>> = if snap.totals.is_empty() {
        Box::new(snap.intervals.items.iter().flat_map(|i| &i.traffic))
    } else {
        Box::new(snap.totals.iter())
    };
    for row in rows {
        let sum = sums.entry((row.proto.as_ref(), row.net.as_ref())).or_default();
        for (acc, v) in sum.iter_mut().zip([row.packets, row.bytes, row.flows_opened, row.flows_closed]) {
            *acc += v;
        }
    }
    // Label names are the interval files' column names.
    for ((proto, net), [packets, bytes, opened, closed]) in sums {
        let labels = [("proto", proto), ("net", net)];
        e.add("sonde_traffic_packets_total", "Packets by protocol and direction.", "counter", &labels, packets as f64);
        e.add("sonde_traffic_bytes_total", "IP bytes by protocol and direction.", "counter", &labels, bytes as f64);
        if proto == "tcp" || proto == "udp" {
            e.add("sonde_flows_opened_total", "Flows opened.", "counter", &labels, opened as f64);
            e.add("sonde_flows_closed_total", "Flows closed.", "counter", &labels, closed as f64);
        }
    }
    if let Some(last) = snap.intervals.items.last() {
        for row in last.traffic.iter().filter(|r| r.proto == "tcp" || r.proto == "udp") {
            let labels = [("proto", row.proto.as_ref()), ("net", row.net.as_ref())];
            e.add(
                "sonde_flows_active",
                "Flows active in the latest interval.",
                "gauge",
                &labels,
                row.flows_active as f64,
            );
        }
        for q in &last.quantiles {
            let Some((suffix, factor)) = base_unit(&q.unit) else { continue };
            // A merged view's metric names come from the merge job's files (sonde-merged): one
            // with a character a Prometheus name has not (a space, a newline) would break the
            // exposition or add lines of its own; left out. Found by fuzzing
            // (fuzz/regressions/merged).
            if q.metric.is_empty() || !q.metric.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b':') {
                continue;
            }
            // tcp_bytes in bytes is sonde_tcp_bytes, not sonde_tcp_bytes_bytes.
            let name = match q.metric.ends_with(suffix) {
                true => format!("sonde_{}", q.metric),
                false => format!("sonde_{}_{suffix}", q.metric),
            };
            // A summary of the latest interval's distribution: its quantiles, and the count
            // and sum of the values it was made of.
            const HELP: &str = "The latest interval's distribution: quantiles, count and sum.";
            let (net, dir) = (q.net.as_str(), q.dir.as_str());
            for (quantile, v) in [("0.5", q.p50), ("0.95", q.p95), ("0.99", q.p99)] {
                let labels = [("net", net), ("dir", dir), ("quantile", quantile)];
                e.add(&name, HELP, "summary", &labels, v * factor);
            }
            let labels = [("net", net), ("dir", dir)];
            e.add_sample(&name, &format!("{name}_sum"), HELP, "summary", &labels, q.mean * q.count as f64 * factor);
            e.add_sample(&name, &format!("{name}_count"), HELP, "summary", &labels, q.count as f64);
        }
    }
    for d in &snap.definitions.items {
        let labels = [("definition", d.name.as_str())];
        e.add(
            "sonde_definition_packets_total",
            "Packets counted per flow definition.",
            "counter",
            &labels,
            d.packets as f64,
        );
        e.add("sonde_definition_bytes_total", "Bytes counted per flow definition.", "counter", &labels, d.bytes as f64);
    }
    if let Some(m) = &s.merged {
        merged(&mut e, m, &snap.probes);
    }
    for c in exports {
        e.add(c.name, c.help, "counter", &c.labels, c.value as f64);
    }
    e.render()
}

/// A merged view's reading and its probes' clocks.
fn merged(e: &mut Exposition, m: &crate::snapshot::MergedStatus, probes: &[crate::snapshot::ProbeRow]) {
    e.add(
        "sonde_merged_files_read_total",
        "Parquet files of the merged view read whole.",
        "counter",
        &[],
        m.files_read as f64,
    );
    e.add(
        "sonde_merged_read_failures_total",
        "Failed reads of the merged view's files (each is tried again at the next reload).",
        "counter",
        &[],
        m.read_failures as f64,
    );
    e.add(
        "sonde_merged_files_unreadable",
        "Files that could not be read at the latest reload.",
        "gauge",
        &[],
        m.files_unreadable as f64,
    );
    e.add(
        "sonde_merged_rows_dropped_total",
        "Rows left out: older than the kept intervals, beyond the probes limit, or with a null key.",
        "counter",
        &[],
        m.rows_dropped as f64,
    );
    e.add("sonde_merged_reloads_total", "Reloads of the merged view's directory.", "counter", &[], m.reloads as f64);
    for p in probes {
        let labels = [("probe", p.probe.as_str())];
        e.add(
            "sonde_probe_lag_seconds",
            "Wall-clock seconds from the end of a probe's newest interval to the merge job reading it.",
            "gauge",
            &labels,
            p.lag_s,
        );
        e.add(
            "sonde_probe_offset_seconds",
            "A probe's lag less the median lag of the probes (its clock's offset from the others').",
            "gauge",
            &labels,
            p.offset_s,
        );
        e.add(
            "sonde_probe_clock_off",
            "1 when a probe's clock is off from the others' by more than an interval.",
            "gauge",
            &labels,
            f64::from(p.clock_off),
        );
        e.add(
            "sonde_probe_last_end_seconds",
            "Packet time (Unix seconds) of the end of a probe's newest interval.",
            "gauge",
            &labels,
            p.last_end_s,
        );
    }
}
