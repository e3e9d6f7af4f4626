//! The run summary: `summary.json` as a typed struct, its JSON Schema, and the short version
//! for a person.
//!
//! [`Summary`] is what a run says about itself: what it read, what it counted
//! ([`sonde_engine::RunStats`], flattened in), how long it took, which files it wrote and what
//! each optional part did (intervals, definitions, anonymization, a live capture, a spool). Its
//! JSON is published as `docs/schema/summary.schema.json` ([`Summary::schema`]); every object
//! there refuses unknown fields, so a field added here without regenerating the schema fails
//! the tests.

use std::collections::BTreeMap;
use std::path::Path;

use schemars::JsonSchema;
use serde::Serialize;
use sonde_define::{Change, Counter};
use sonde_engine::{Outcome, RunStats};

/// How long the run took and how much it used.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Timing {
    /// Wall-clock time of the run, in seconds.
    pub elapsed_s: f64,
    /// User + system CPU time of the process.
    pub cpu_s: f64,
    /// Peak resident memory of the process, in bytes (`VmHWM`): mapped file pages included (a
    /// memory-mapped trace, a live capture's ring, the program's code).
    pub peak_rss_bytes: u64,
    /// Peak anonymous memory (heap, stacks: what the analysis holds), in bytes; sampled every
    /// 20 ms and at the end. The peak memory the human summary shows.
    pub peak_anon_bytes: u64,
    /// Peak of the mapped file and shared pages (a memory-mapped trace, the AF_PACKET ring,
    /// the program's code), in bytes; sampled with `peak_anon_bytes`.
    pub peak_file_bytes: u64,
    /// Mean anonymous memory over the same samples, in bytes (NetSniff's mean process size).
    pub mean_anon_bytes: u64,
    /// Threads that read the input: one, or with `--threads N` on a trace file N, each reading
    /// it whole and analysing its share of the flows (`monitor --readers`: the sockets' readers).
    pub readers: u64,
    /// Flow workers in all.
    pub workers: u64,
}

impl From<sonde_engine::Timing> for Timing {
    fn from(t: sonde_engine::Timing) -> Timing {
        let sonde_engine::Timing {
            elapsed_s,
            cpu_s,
            peak_rss_bytes,
            peak_anon_bytes,
            peak_file_bytes,
            mean_anon_bytes,
            readers,
            workers,
        } = t;
        let (readers, workers) = (readers as u64, workers as u64);
        Timing { elapsed_s, cpu_s, peak_rss_bytes, peak_anon_bytes, peak_file_bytes, mean_anon_bytes, readers, workers }
    }
}

/// Why the input stopped early (exit status 3): the results cover what was read before.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct InputError {
    /// What was wrong, for a person.
    pub message: String,
    /// Byte offset in the (decompressed) input where reading stopped.
    pub offset: u64,
}

/// Throughput of the analysis.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Rates {
    /// Packets read per second of elapsed time.
    pub packets_per_s: f64,
    /// Flows (TCP and UDP) per second of elapsed time.
    pub flows_per_s: f64,
    /// Trace duration ÷ CPU time: how many times faster than real time the trace was analysed.
    pub speedup: f64,
    /// Bits on the wire read per second of elapsed time, in Mb/s (NetSniff's processing rate).
    pub megabits_per_s: f64,
    /// CPU time ÷ elapsed time, in % (100: one core busy the whole run).
    pub cpu_percent: f64,
}

/// The interval outputs' settings and totals.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Monitoring {
    /// Interval length (`--interval`), in seconds.
    pub interval_s: f64,
    /// Intervals written.
    pub intervals: u64,
    /// Whether the host, host-pair, protocol and top tables were kept (`--tables`).
    pub tables: bool,
    /// Table updates that found their table full and went to its overflow row.
    pub table_overflows: u64,
    /// The time-series store this run added to, if any.
    pub store: Option<StoreReport>,
}

impl Monitoring {
    pub fn new(cfg: &sonde_stats::Config, report: &sonde_stats::Report, store: Option<StoreReport>) -> Monitoring {
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

/// What a run did to its time-series store (`--store`).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct StoreReport {
    /// The store's file.
    pub path: String,
    /// The store did not exist: this run created it.
    pub created: bool,
    /// Intervals written.
    pub updates: u64,
    /// Intervals the store already had (an earlier run ended in or after them): not written.
    pub already_stored: u64,
}

/// One definition's entry in summary.json (`--definitions`): the API's summary, then how its
/// FID tables fared.
pub use sonde_types::DefinitionEntry as DefinitionSummary;

/// What each definition (not the associations) of `counter` counted so far.
pub fn definition_summaries(counter: &Counter) -> Vec<DefinitionSummary> {
    counter
        .totals()
        .into_iter()
        .filter(|t| !t.association)
        .map(|t| DefinitionSummary {
            summary: sonde_types::DefinitionSummary {
                name: t.name,
                definition: t.text,
                version: t.version,
                retired: t.retired,
                packets: t.traffic.packets,
                bytes: t.traffic.bytes,
            },
            fid_rows: t.fid_rows,
            overflow_packets: t.overflow_packets,
            untracked_packets: t.untracked_packets,
        })
        .collect()
}

/// What became of a scheduled change (`--definition-changes`).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ChangeSummary {
    /// When the change was due, in seconds since the epoch (packet time).
    pub at_s: f64,
    /// The change: `add LINE`, `replace LINE` or `remove NAME`.
    pub change: String,
    /// `applied` (with the new version) or why not.
    pub result: String,
    /// The set's version after the change; null when it was not applied.
    pub version: Option<u64>,
}

impl ChangeSummary {
    /// What became of each change scheduled on `counter`, in the order they came due.
    pub fn log(counter: &Counter) -> Vec<ChangeSummary> {
        counter
            .change_log()
            .iter()
            .map(|o| ChangeSummary {
                at_s: o.at_ns as f64 / 1e9,
                change: match &o.change {
                    Change::Add(l) => format!("add {l}"),
                    Change::Replace(l) => format!("replace {l}"),
                    Change::Remove(n) => format!("remove {n}"),
                },
                result: match &o.result {
                    Ok(_) => "applied".to_string(),
                    Err(e) => e.to_string(),
                },
                version: o.result.as_ref().ok().copied(),
            })
            .collect()
    }
}

/// How the run's outputs were anonymised (never the key itself).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AnonSummary {
    /// The `--anonymize` mode.
    pub mode: &'static str,
    /// The key file (`--key`); null for a mode without a key.
    pub key_file: Option<String>,
    /// The key file did not exist: a new random key was made (outputs of earlier runs under
    /// another key do not join with these).
    pub key_created: bool,
    /// tcpdpriv's table (`--anonymize tcpdpriv` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcpdpriv: Option<TcpdprivSummary>,
}

/// tcpdpriv's table at the end of the run (docs/anonymization.md).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TcpdprivSummary {
    /// Distinct addresses given an image (both families).
    pub addresses: u64,
    /// The bound (`--tcpdpriv-max-addresses`).
    pub max_addresses: u64,
    /// Lookups of new addresses made when the table was full: each gave `0.0.0.0` or `::`, so
    /// those addresses are not told apart. 0 unless the bound was reached.
    pub unmapped: u64,
}

/// One interface's counters.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct InterfaceCounters {
    /// The interface's name.
    pub interface: String,
    /// Packets its sockets were offered.
    pub received_pkts: u64,
    /// Lost because the ring or buffer was full.
    pub dropped_pkts: u64,
    /// Lost by the interface or its driver.
    pub if_dropped_pkts: u64,
    /// Kept by the kernel but still unread when the capture's drain after the stop ran out.
    pub unread_pkts: u64,
}

/// The capture's settings and the kernel's (or libpcap's) counters, totals and per interface.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CaptureSummary {
    /// The capture mechanism: `afpacket` or `pcap`.
    pub backend: &'static str,
    /// Per interface: the ring's (afpacket) or libpcap's buffer size, in bytes.
    pub buffer_bytes: u64,
    /// Whether the interfaces were put in promiscuous mode.
    pub promisc: bool,
    /// The user the capture became once open (`--user`), if any.
    pub user: Option<String>,
    /// Packets the sockets were offered (AF_PACKET tp_packets, libpcap ps_recv).
    pub received_pkts: u64,
    /// Lost because the ring or buffer was full (tp_drops, ps_drop).
    pub dropped_pkts: u64,
    /// Lost by the interface or its driver (ps_ifdrop; 0 with AF_PACKET, which does not say).
    pub if_dropped_pkts: u64,
    /// Kept in the ring but still unread when the drain after the stop ran out (2 s): with
    /// `dropped_pkts`, `packets.read` adds up to `received_pkts` (AF_PACKET; 0 with libpcap).
    pub unread_pkts: u64,
    /// The counters of each interface.
    pub interfaces: Vec<InterfaceCounters>,
    /// With --readers: packets each reader's sockets were offered (the fanout's split).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub readers_received_pkts: Vec<u64>,
}

impl CaptureSummary {
    pub fn human(&self) -> String {
        format!(
            "{} on {}: {} packets offered, {} dropped (buffer full), {} dropped (interface), {} unread at the stop",
            self.backend,
            self.interfaces.iter().map(|i| i.interface.as_str()).collect::<Vec<_>>().join(", "),
            self.received_pkts,
            self.dropped_pkts,
            self.if_dropped_pkts,
            self.unread_pkts
        )
    }
}

/// Where the chunks of a rotated run went (`sonde monitor --spool`).
#[derive(Debug, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SpoolSummary {
    /// Chunks written.
    pub chunks: u64,
    /// Bytes of the chunks written.
    pub bytes: u64,
    /// Chunks no location had room for (written past a quota).
    pub over_quota_chunks: u64,
    /// Chunk writes that failed everywhere: their data went into the next chunk.
    pub failed_chunks: u64,
    /// Each storage location, in the order given.
    pub locations: Vec<LocationSummary>,
    /// What an interrupted earlier run left (removed `.part` files, unlisted whole files kept).
    pub leftovers: Vec<String>,
    /// No location could take the last chunk (the run's end): its files stayed in the output
    /// directory, listed in `outputs` (it is also counted in `failed_chunks`).
    pub last_chunk_in_output_dir: bool,
}

/// One storage location of a spool.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LocationSummary {
    /// The location's directory.
    pub path: String,
    /// Bytes its manifest lists.
    pub used_bytes: u64,
    /// Its quota, in bytes; null without one.
    pub quota_bytes: Option<u64>,
    /// Chunks this run wrote there.
    pub chunks_written: u64,
}

/// Flow log lines beyond `--sort-buffer`: sorted runs on disk, merged when the logs were written.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SortSummary {
    /// Runs written (merges of runs included).
    pub runs: u64,
    /// Their bytes (keys and lines).
    pub bytes: u64,
    /// Why a run could not be written, if one could not (its lines stayed in memory).
    pub failure: Option<String>,
}

impl SortSummary {
    /// What `spilled` says, when anything went to disk or failed to.
    pub fn of(spilled: &crate::Spilled) -> Option<SortSummary> {
        (spilled.runs > 0 || spilled.failure.is_some()).then(|| SortSummary {
            runs: spilled.runs,
            bytes: spilled.bytes,
            failure: spilled.failure.clone(),
        })
    }
}

/// What the IPFIX export did (`--ipfix`, docs/ipfix.md).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct IpfixSummary {
    /// Where the messages went: `udp://…`, `tcp://…` or a file path.
    pub target: String,
    /// The observation domain id.
    pub domain: u32,
    /// Messages sent or written (template messages included).
    pub messages: u64,
    /// The bytes of those messages.
    pub bytes: u64,
    /// Data records in the messages sent: one per TCP or UDP flow record (interim ones
    /// included) and per ICMP entry (a line of icmp_flows).
    pub records: u64,
    /// Records dropped because the exporter's queue stayed full.
    pub dropped_records: u64,
    /// Messages that could not be sent (collector absent or refusing, a write error).
    pub failed_messages: u64,
    /// The data records those messages held.
    pub failed_records: u64,
    /// The last send error, if any.
    pub last_error: Option<String>,
}

/// What the Kafka export did (`--kafka`, docs/kafka.md).
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct KafkaSummary {
    /// The bootstrap brokers, as given.
    pub brokers: String,
    /// The flows' topic.
    pub topic: String,
    /// The intervals' topic (none: intervals not published).
    pub interval_topic: Option<String>,
    /// The intervals' histograms' topic (none: not published).
    pub histogram_topic: Option<String>,
    /// Messages accepted into the producer's local queue (flows, intervals and histograms).
    pub sent: u64,
    /// Of which flows.
    pub flows: u64,
    /// Of the flows: interim records of flows still open (`--active-timeout`).
    pub interim: u64,
    /// Of which intervals: contributions to a row of intervals.tsv (docs/kafka.md).
    pub intervals: u64,
    /// Of which histograms: contributions to an interval's distribution.
    pub histograms: u64,
    /// Messages the brokers acknowledged (acks=all).
    pub delivered: u64,
    /// Messages dropped because the local queue (`--kafka-queue`) was full: never sent.
    pub dropped_queue_full: u64,
    /// Messages that failed: delivery errors after librdkafka's retries, refused at enqueue, or
    /// still queued when the final flush timed out.
    pub failed: u64,
    /// Of the failed: still queued when the final flush timed out.
    pub undelivered_at_exit: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
}

/// The control topic a monitor followed (`--kafka-control`, docs/kafka.md "Control topic").
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ControlSummary {
    /// The control topic.
    pub topic: String,
    /// The status topic the probe reported to.
    pub status_topic: String,
    /// The probe id of the reports.
    pub probe: String,
    /// The control version applied at the end (0: none).
    pub version: u64,
    /// Packet time (epoch s) from which that version counted; none before the first packet.
    pub since: Option<f64>,
    /// Versions applied while running (the one the run started with not included).
    pub changes_applied: u64,
    /// Versions refused (a file that does not parse, or a change the set refuses): the probe
    /// kept the version before.
    pub changes_failed: u64,
    /// Why the last refused version was refused, if any.
    pub last_error: Option<String>,
}

/// `summary.json`: what a run read, counted, took and wrote.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Summary {
    /// The version of sonde that wrote the summary.
    pub sonde_version: &'static str,
    /// The probe's id (`--probe-id`, default the host name), as its Kafka records carry it;
    /// null when a library caller names none.
    pub probe: Option<String>,
    /// The input: a trace's path, or the interfaces captured on (comma-separated).
    pub input: String,
    /// The input's format, as its reader names it.
    pub format: String,
    /// The decompressor the input was read through (`gzip`, `zstd`, `xz`), if any.
    pub compression: Option<String>,
    /// The BPF filter expression, if any.
    pub filter: Option<String>,
    /// Frames of link types the filter cannot be compiled for (they never match).
    pub filter_uncompilable_frames: u64,
    /// Why the input stopped early, if it did (the exit status is then 3).
    pub input_error: Option<InputError>,
    /// Last packet time minus first, in seconds.
    pub trace_duration_s: f64,
    /// What the run counted (its fields are at the top level).
    #[serde(flatten)]
    pub stats: RunStats,
    /// How long the run took and how much it used.
    pub timing: Timing,
    /// Throughput of the analysis.
    pub rates: Rates,
    /// The files written into the output directory, by name.
    pub outputs: Vec<String>,
    /// Their bytes on disk, summary.json aside (NetSniff's output size).
    pub output_bytes: u64,
    /// The interval outputs (`--interval`); null without.
    pub monitoring: Option<Monitoring>,
    /// What each flow definition (`--definitions`) counted.
    pub definitions: Option<Vec<DefinitionSummary>>,
    /// What became of each `--definition-changes` entry.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub definition_changes: Option<Vec<ChangeSummary>>,
    /// How addresses were anonymised (`--anonymize`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub anonymization: Option<AnonSummary>,
    /// The live capture's interfaces and the kernel's counters (`sonde monitor`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureSummary>,
    /// Where the chunks of a rotated run went (`sonde monitor --spool`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spool: Option<SpoolSummary>,
    /// The flow log lines that waited on disk (`--sort-buffer`); absent when none did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sorted_runs: Option<SortSummary>,
    /// The IPFIX export (`--ipfix`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipfix: Option<IpfixSummary>,
    /// The Kafka export (`--kafka`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kafka: Option<KafkaSummary>,
    /// The control topic followed (`monitor --kafka-control`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub control: Option<ControlSummary>,
    /// The signal that ended the run (`SIGINT`, `SIGTERM`, or for `analyze` `SIGHUP`) before
    /// its input ended: every output was written and covers what was read until then. Absent
    /// when the input ended by itself. A monitor always ends this way.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub interrupted_by: Option<String>,
    /// Outputs that could not be written (a full disk, an I/O error), each naming its file
    /// and why; the run's exit status is then 1. The files in `outputs` were written whole;
    /// these are not there (nor their `.part`). Absent when every output was written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub output_errors: Vec<String>,
}

/// What a run read: the input's name, the format found, its compression and the filter.
#[derive(Debug, Clone, Default)]
pub struct Input {
    pub name: String,
    pub format: String,
    pub compression: Option<String>,
    pub filter: Option<String>,
}

impl Summary {
    /// The summary of a run that read `input` and ended with `outcome`; the outputs, the
    /// monitoring totals and the optional sections are set by the caller.
    pub fn new(input: Input, outcome: Outcome, timing: Timing) -> Summary {
        let stats = outcome.stats;
        let per_s = |n: u64| if timing.elapsed_s > 0.0 { n as f64 / timing.elapsed_s } else { 0.0 };
        let trace_duration_s = stats.trace_duration_s();
        let rates = Rates {
            packets_per_s: per_s(stats.packets.read),
            flows_per_s: per_s(stats.flows.tcp + stats.flows.udp),
            speedup: if timing.cpu_s > 0.0 { trace_duration_s / timing.cpu_s } else { 0.0 },
            megabits_per_s: per_s(stats.packets.wire_bytes) * 8.0 / 1e6,
            cpu_percent: if timing.elapsed_s > 0.0 { 100.0 * timing.cpu_s / timing.elapsed_s } else { 0.0 },
        };
        Summary {
            sonde_version: env!("CARGO_PKG_VERSION"),
            probe: None,
            input: input.name,
            format: input.format,
            compression: input.compression,
            filter: input.filter,
            filter_uncompilable_frames: 0,
            input_error: outcome.input_error.map(|e| InputError { message: e.to_string(), offset: e.offset }),
            trace_duration_s,
            stats,
            timing,
            rates,
            outputs: Vec::new(),
            output_bytes: 0,
            monitoring: None,
            definitions: None,
            definition_changes: None,
            anonymization: None,
            capture: None,
            spool: None,
            sorted_runs: None,
            ipfix: None,
            kafka: None,
            control: None,
            interrupted_by: None,
            output_errors: Vec::new(),
        }
    }

    /// The text of summary.json: pretty-printed, with a final newline.
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"));
        s.push('\n');
        s
    }

    /// The JSON Schema (draft 2020-12) of summary.json, every object closed to unknown fields.
    pub fn schema() -> serde_json::Value {
        let generator = schemars::generate::SchemaSettings::draft2020_12().for_serialize().into_generator();
        generator.into_root_schema_for::<Summary>().to_value()
    }

    /// The text of `docs/schema/summary.schema.json`: [`Summary::schema`] pretty-printed, with a
    /// final newline.
    pub fn schema_json() -> String {
        let mut s = serde_json::to_string_pretty(&Summary::schema()).unwrap_or_default();
        s.push('\n');
        s
    }

    /// The short summary for a person (the binary prints it on stderr); `out_dir` is where the
    /// outputs went: a line each for the input, the traffic, the time taken, the exports, the
    /// outputs.
    pub fn human(&self, out_dir: &Path) -> String {
        let mut text = String::new();
        let mut line = |l: String| {
            text.push_str(&l);
            text.push('\n');
        };
        line(format!(
            "sonde {} — {} ({}{})",
            self.sonde_version,
            self.input,
            self.format,
            self.compression.as_deref().map(|c| format!(", {c}")).unwrap_or_default()
        ));
        if let Some(signal) = &self.interrupted_by {
            line(format!("  stopped   by {signal}: the outputs cover the input read until then"));
        }
        self.traffic_lines(&mut line);
        self.time_lines(&mut line);
        self.export_lines(&mut line);
        if let Some(e) = &self.input_error {
            line(format!("  STOPPED   {}", e.message));
        }
        line(format!("  outputs   {}/{{{}}}", out_dir.display(), self.outputs.join(",")));
        text
    }

    /// Packets, link types, protocols, decoding problems, flows.
    fn traffic_lines(&self, line: &mut impl FnMut(String)) {
        let s = &self.stats;
        let (p, pr, f) = (&s.packets, &s.protocols, &s.flows);
        line(format!(
            "  packets   {} read ({}B on the wire), {} analysed, {} filtered out{}",
            p.read,
            si(p.wire_bytes as f64),
            p.analysed,
            p.filtered_out,
            match p.time_out_of_range {
                0 => String::new(),
                n => format!(", {n} timed after 2260 (analysed at its end)"),
            }
        ));
        let links: BTreeMap<String, u64> = s.link_types.iter().map(|(k, t)| (k.clone(), t.packets)).collect();
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
        line(format!(
            "  problems  {} (snaplen cuts: {})",
            join_counts(&s.decode_problems),
            join_counts(&s.snaplen_cuts)
        ));
        line(format!(
            "  flows     TCP {} ({} complete, {} incomplete), UDP {}, evicted {}",
            f.tcp, f.tcp_complete, f.tcp_incomplete, f.udp, f.evicted
        ));
    }

    /// The time the run took, and its rates and memory.
    fn time_lines(&self, line: &mut impl FnMut(String)) {
        let s = &self.stats;
        // A live capture runs at the link's pace: how fast it would have read a trace says
        // nothing there, the share of a core it took does.
        line(match self.capture {
            Some(_) => format!(
                "  time      packets over {:.3} s, elapsed {:.3} s, CPU {:.3} s ({:.0} % of one core)",
                self.trace_duration_s, self.timing.elapsed_s, self.timing.cpu_s, self.rates.cpu_percent
            ),
            None => format!(
                "  time      trace {:.3} s, elapsed {:.3} s, CPU {:.3} s ({:.0} %), speed-up ×{:.1}",
                self.trace_duration_s,
                self.timing.elapsed_s,
                self.timing.cpu_s,
                self.rates.cpu_percent,
                self.rates.speedup
            ),
        });
        line(format!(
            "  rate      {}packets/s, {}b/s, {}flows/s; memory mean {}B, peak {}B (+{}B mapped); table peak {} flows, mean probe {:.2}",
            si(self.rates.packets_per_s),
            si(self.rates.megabits_per_s * 1e6),
            si(self.rates.flows_per_s),
            si(self.timing.mean_anon_bytes as f64),
            si(self.timing.peak_anon_bytes as f64),
            si(self.timing.peak_file_bytes as f64),
            s.table.peak_live_flows,
            s.table.mean_probe_len
        ));
    }

    /// What the thinner, the capture and the exporters did, and the sorting's and spool's disk.
    fn export_lines(&self, line: &mut impl FnMut(String)) {
        let s = &self.stats;
        if let Some(t) = &s.thinning {
            line(format!("  thinning  {}", t.human()));
        }
        if let Some(c) = &self.capture {
            line(format!("  capture   {}", c.human()));
        }
        if let Some(x) = &self.ipfix {
            line(format!(
                "  ipfix     {} records in {} messages ({}B) to {}; {} dropped, {} failed{}",
                x.records,
                x.messages,
                si(x.bytes as f64),
                x.target,
                x.dropped_records,
                x.failed_records,
                x.last_error.as_deref().map(|e| format!(" (last error: {e})")).unwrap_or_default()
            ));
        }
        if let Some(r) = &self.sorted_runs {
            line(format!(
                "  sorting   {} runs, {}B on disk beyond --sort-buffer{}",
                r.runs,
                si(r.bytes as f64),
                r.failure.as_deref().map(|f| format!("; held in memory after: {f}")).unwrap_or_default()
            ));
        }
        if let Some(s) = &self.spool {
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
    }
}

fn join_counts<K: std::fmt::Display>(map: &BTreeMap<K, u64>) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 23: a live run's summary gives the share of a core it took, not a "speed-up"
    /// (the trace's duration over the CPU time, meaningless at the link's pace).
    #[test]
    fn a_live_run_says_its_share_of_a_core_a_trace_its_speed_up() {
        let timing = Timing::from(sonde_engine::Timing { elapsed_s: 10.0, cpu_s: 2.5, ..Default::default() });
        let outcome = || Outcome { stats: RunStats::default(), input_error: None };
        let mut summary = Summary::new(Input::default(), outcome(), timing);
        let trace = summary.human(Path::new("out"));
        assert!(trace.contains(", speed-up ×"), "{trace}");
        summary.capture = Some(CaptureSummary {
            backend: "afpacket",
            buffer_bytes: 0,
            promisc: false,
            user: None,
            received_pkts: 0,
            dropped_pkts: 0,
            if_dropped_pkts: 0,
            unread_pkts: 0,
            interfaces: Vec::new(),
            readers_received_pkts: Vec::new(),
        });
        let live = summary.human(Path::new("out"));
        assert!(!live.contains("speed-up") && live.contains("CPU 2.500 s (25 % of one core)"), "{live}");
    }
}
