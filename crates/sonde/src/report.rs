//! The run summary: summary.json and the short human version on stderr.

use std::path::Path;

use serde::Serialize;
use sonde_engine::{Outcome, RunStats};

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Timing {
    pub elapsed_s: f64,
    /// User + system CPU time of the process.
    pub cpu_s: f64,
    pub peak_rss_bytes: u64,
}

#[derive(Debug, Serialize)]
pub struct InputError {
    pub message: String,
    /// Byte offset in the (decompressed) input where reading stopped.
    pub offset: u64,
}

#[derive(Debug, Serialize)]
pub struct Rates {
    pub packets_per_s: f64,
    pub flows_per_s: f64,
    /// Trace duration ÷ CPU time: how many times faster than real time the trace was analysed.
    pub speedup: f64,
}

/// The interval outputs' settings and totals.
#[derive(Debug, Serialize)]
pub struct Monitoring {
    pub interval_s: f64,
    pub intervals: u64,
    pub tables: bool,
    /// Table updates that found their table full and went to its overflow row.
    pub table_overflows: u64,
    /// The time-series store this run added to, if any.
    pub store: Option<crate::store::StoreReport>,
}

impl Monitoring {
    pub fn new(
        cfg: &sonde_stats::Config,
        report: &sonde_stats::Report,
        store: Option<crate::store::StoreReport>,
    ) -> Monitoring {
        let s = report.summary();
        Monitoring {
            interval_s: cfg.interval_ns as f64 / 1e9,
            intervals: s.intervals,
            tables: cfg.tables,
            table_overflows: s.table_overflows,
            store,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct RunReport {
    pub sonde_version: &'static str,
    pub input: String,
    pub format: String,
    pub compression: Option<String>,
    pub filter: Option<String>,
    /// Frames of link types the filter cannot be compiled for (they never match).
    pub filter_uncompilable_frames: u64,
    pub input_error: Option<InputError>,
    pub trace_duration_s: f64,
    #[serde(flatten)]
    pub stats: RunStats,
    pub timing: Timing,
    pub rates: Rates,
    pub outputs: Vec<String>,
    pub monitoring: Option<Monitoring>,
    /// What each flow definition (`--definitions`) counted.
    pub definitions: Option<Vec<sonde_types::DefinitionEntry>>,
    /// What became of each `--definition-changes` entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition_changes: Option<Vec<crate::definitions::ChangeSummary>>,
    /// How addresses were anonymised (`--anonymize`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anonymization: Option<crate::anon::AnonSummary>,
    /// The live capture's interfaces and the kernel's counters (`sonde monitor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<crate::monitor::CaptureSummary>,
    /// Where the chunks of a rotated run went (`sonde monitor --spool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spool: Option<sonde_spool::SpoolSummary>,
}

impl RunReport {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        input: &str,
        format: &str,
        compression: Option<&str>,
        filter: Option<String>,
        outcome: Outcome,
        filter_uncompilable_frames: u64,
        timing: Timing,
        outputs: Vec<String>,
        monitoring: Option<Monitoring>,
    ) -> RunReport {
        let stats = outcome.stats;
        let per_s = |n: u64| if timing.elapsed_s > 0.0 { n as f64 / timing.elapsed_s } else { 0.0 };
        let trace_duration_s = stats.trace_duration_s();
        let rates = Rates {
            packets_per_s: per_s(stats.packets.read),
            flows_per_s: per_s(stats.flows.tcp + stats.flows.udp),
            speedup: if timing.cpu_s > 0.0 { trace_duration_s / timing.cpu_s } else { 0.0 },
        };
        RunReport {
            sonde_version: env!("CARGO_PKG_VERSION"),
            input: input.to_string(),
            format: format.to_string(),
            compression: compression.map(str::to_string),
            filter,
            filter_uncompilable_frames,
            input_error: outcome.input_error.map(|e| InputError { message: e.to_string(), offset: e.offset }),
            trace_duration_s,
            stats,
            timing,
            rates,
            outputs,
            monitoring,
            definitions: None,
            definition_changes: None,
            anonymization: None,
            capture: None,
            spool: None,
        }
    }

    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }
}

fn join_counts(map: &std::collections::BTreeMap<String, u64>) -> String {
    if map.is_empty() {
        return "none".to_string();
    }
    map.iter().map(|(k, v)| format!("{k} {v}")).collect::<Vec<_>>().join(", ")
}

fn si(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.2} G", x / 1e9),
        x if x >= 1e6 => format!("{:.2} M", x / 1e6),
        x if x >= 1e3 => format!("{:.1} k", x / 1e3),
        x => format!("{x:.0} "),
    }
}

/// The short summary for a person, on stderr. Write errors (a closed pipe) are ignored.
pub fn print_human(r: &RunReport, out_dir: &Path) {
    use std::io::Write;
    let s = &r.stats;
    let p = &s.packets;
    let pr = &s.protocols;
    let f = &s.flows;
    let mut text = String::new();
    let mut line = |l: String| {
        text.push_str(&l);
        text.push('\n');
    };
    line(format!(
        "sonde {} — {} ({}{})",
        r.sonde_version,
        r.input,
        r.format,
        r.compression.as_deref().map(|c| format!(", {c}")).unwrap_or_default()
    ));
    line(format!(
        "  packets   {} read ({}B on the wire), {} analysed, {} filtered out",
        p.read,
        si(p.wire_bytes as f64),
        p.analysed,
        p.filtered_out
    ));
    let links: std::collections::BTreeMap<String, u64> =
        s.link_types.iter().map(|(k, t)| (k.clone(), t.packets)).collect();
    line(format!("  links     {}", join_counts(&links)));
    if !s.unsupported_link_types.is_empty() {
        line(format!("  skipped   unsupported link types: {}", join_counts(&s.unsupported_link_types)));
    }
    line(format!(
        "  protocols IPv4 {}, IPv6 {}, non-IP {}; TCP {}, UDP {}, ICMP {}, ICMPv6 {}, other {}; fragments {}+{}",
        pr.ipv4.packets,
        pr.ipv6.packets,
        pr.non_ip.packets,
        pr.tcp.packets,
        pr.udp.packets,
        pr.icmp.packets,
        pr.icmpv6.packets,
        pr.other_ip.packets,
        pr.fragments_first,
        pr.fragments_later
    ));
    line(format!("  problems  {} (snaplen cuts: {})", join_counts(&s.decode_problems), join_counts(&s.snaplen_cuts)));
    line(format!(
        "  flows     TCP {} ({} complete, {} incomplete), UDP {}, evicted {}",
        f.tcp, f.tcp_complete, f.tcp_incomplete, f.udp, f.evicted
    ));
    line(format!(
        "  time      trace {:.3} s, elapsed {:.3} s, CPU {:.3} s, speed-up ×{:.1}",
        r.trace_duration_s, r.timing.elapsed_s, r.timing.cpu_s, r.rates.speedup
    ));
    line(format!(
        "  rate      {}packets/s, {}flows/s; peak memory {}B; table peak {} flows, mean probe {:.2}",
        si(r.rates.packets_per_s),
        si(r.rates.flows_per_s),
        si(r.timing.peak_rss_bytes as f64),
        s.table.peak_live_flows,
        s.table.mean_probe_len
    ));
    if let Some(t) = &s.thinning {
        line(format!("  thinning  {}", t.human()));
    }
    if let Some(c) = &r.capture {
        line(format!("  capture   {}", c.human()));
    }
    if let Some(s) = &r.spool {
        line(format!(
            "  spool     {} chunks, {} bytes in {}{}",
            s.chunks,
            s.bytes,
            s.locations.iter().map(|l| l.path.as_str()).collect::<Vec<_>>().join(", "),
            if s.over_quota_chunks > 0 {
                format!(" ({} past every quota)", s.over_quota_chunks)
            } else {
                String::new()
            }
        ));
    }
    if let Some(e) = &r.input_error {
        line(format!("  STOPPED   {}", e.message));
    }
    line(format!("  outputs   {}/{{{}}}", out_dir.display(), r.outputs.join(",")));
    let _ = std::io::stderr().write_all(text.as_bytes());
}
