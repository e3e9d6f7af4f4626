//! Command-line arguments: parsed close to argv here, then turned into validated settings.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Parser, Subcommand, ValueEnum};
use ipnet::IpNet;
use sonde_engine::settings;

#[derive(Debug, Parser)]
#[command(name = "sonde", version, about = "A passive network traffic probe", long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Analyse a trace file: one record per TCP and UDP flow, plus a run summary.
    ///
    /// Reads pcap, pcapng or ERF (optionally gzip/zstd/xz compressed; detected by content),
    /// follows every TCP and UDP flow, and writes tcp_flows, udp_flows and summary.json into
    /// the output directory. Trailing arguments are a BPF filter in tcpdump syntax.
    ///
    /// Example: sonde analyze -r trace.pcap.gz -o out/ tcp port 443
    ///
    /// Exit status: 0 success; 1 error (nothing analysed, or outputs could not be written);
    /// 2 bad usage; 3 the input ended early (truncated or corrupt): everything before the damage
    /// was analysed and written.
    Analyze(Box<AnalyzeArgs>),
    /// Read a time-series store (monitoring's round-robin archives): export, dump, info.
    #[command(subcommand)]
    Ts(crate::ts::TsCommand),
    /// Draw figures (PNG or SVG) from an output directory of `sonde analyze` or a store.
    ///
    /// Time plots from intervals.tsv (throughput and flows, inbound above the axis and outbound
    /// below, at the native interval and at 5 min / 30 min / 2 h / 1 day where the trace is long
    /// enough), and distributions from the flow logs (CDF and CCDF of flow duration and size,
    /// RTT pdf). With --store, one time plot per resolution the store keeps (Tstat's daily,
    /// weekly, monthly and yearly views; unknown rows are gaps). Figures go to DIR/plots (or
    /// plots/ next to the store) unless -o is given.
    ///
    /// Examples: sonde plot out/ --format svg; sonde plot --store link.rrd
    ///
    /// Exit status: 0 success; 1 error (an input is malformed, or nothing to plot).
    Plot(crate::plot::PlotArgs),
    /// Compare two runs' flow logs: per field, the share of flows whose value changed; the RTT
    /// distributions of each.
    ///
    /// A and B are output directories of `sonde analyze` (their tcp_flows and udp_flows, TSV or
    /// JSONL) or two flow log files. Flows are paired by their endpoints (and among those by
    /// their first packet's time); fields are compared as numbers where they are numbers. Made
    /// to measure what ACK thinning changes: `sonde compare full/ thinned/`.
    ///
    /// Exit status: 0 compared; 1 error (a log is missing or malformed).
    Compare(crate::compare::CompareArgs),
    /// Write a copy of a trace with every address anonymised and the checksums fixed.
    ///
    /// Rewrites the addresses of IPv4/IPv6 headers, ARP, ICMP-quoted headers and tunnels' inner
    /// headers (the same mapping as `analyze --anonymize` under the same key), recomputes or
    /// updates the IP/TCP/UDP/ICMP checksums and leaves every other byte as it was. The output
    /// has the input's format (pcap stays pcap, others become pcapng); see docs/anonymization.md.
    ///
    /// Example: sonde anon -r trace.pcap -w anon.pcap --key site.key
    ///
    /// Exit status: 0 success; 1 error (nothing written); 2 bad usage; 3 the input ended early:
    /// the frames before the damage were rewritten and written.
    Anon(crate::anon_trace::AnonTraceArgs),
    /// Write a trace thinned by NATRA: pure TCP ACKs dropped except each handshake's first
    /// (docs/thinning.md). The report goes to stderr.
    ///
    /// Example: sonde thin -r trace.pcap -w thinned.pcap
    ///
    /// Exit status: 0 success; 1 error; 2 bad usage; 3 the input ended early: the output holds
    /// the thinned input before the damage.
    Thin(crate::thin::ThinArgs),
    /// Capture from network interfaces until SIGINT or SIGTERM, then write what `analyze`
    /// writes (every open flow and interval flushed), with the kernel's drop counters.
    ///
    /// AF_PACKET (TPACKET_V3 ring) or libpcap; several -i are merged by timestamp. Needs root or
    /// CAP_NET_RAW (docs/live.md). Trailing arguments are a BPF filter in tcpdump syntax.
    ///
    /// Example: sonde monitor -i eth0 -o out/ --interval 60 --user nobody
    ///
    /// Exit status: 0 success; 1 error (the capture could not start, or outputs could not be
    /// written); 2 bad usage; 3 the capture failed while running (an interface went away):
    /// everything captured before was analysed and written.
    Monitor(Box<MonitorArgs>),
    /// Publish a definitions file on the Kafka control topic that every `monitor
    /// --kafka-control` applies, and read the probes' reports (docs/kafka.md, "Control topic").
    #[command(subcommand)]
    Control(crate::control::ControlCommand),
    /// Serve the merged view of several probes: the Spark merge job's output (intervals,
    /// quantiles, histograms and the probes table, docs/merged.md) on the dashboard, the API and
    /// /metrics, read again every --reload seconds, until Ctrl-C.
    ///
    /// Example: sonde serve --merged merged/ --http 127.0.0.1:8080
    ///
    /// Exit status: 0 stopped by Ctrl-C; 1 error (the directory or the address refused).
    Serve(Box<crate::serve::ServeArgs>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// tcp_flows and udp_flows (docs/metrics.md).
    Sonde,
    /// Tstat 3.3's log_tcp_complete, log_tcp_nocomplete and log_udp_complete.
    Tstat,
}

impl From<LayoutArg> for sonde_output::Layout {
    fn from(l: LayoutArg) -> sonde_output::Layout {
        match l {
            LayoutArg::Sonde => sonde_output::Layout::Sonde,
            LayoutArg::Tstat => sonde_output::Layout::Tstat,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum FormatArg {
    Tsv,
    Jsonl,
    /// Every output as typed Parquet (zstd); docs/typed-outputs.md.
    Parquet,
    /// Every output as a typed Arrow IPC file (zstd).
    Arrow,
}

#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Trace to read; `-` reads standard input.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub read: PathBuf,
    /// After the run, serve its results (JSON API, live stream, Prometheus /metrics and the
    /// dashboard; docs/http.md) on ADDR until Ctrl-C, e.g. 127.0.0.1:8080 (port 0: any free one).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// File holding the bearer token the HTTP API requires (needed when ADDR is not loopback;
    /// default: the SONDE_HTTP_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub http_token: Option<PathBuf>,
    #[command(flatten)]
    pub http_limits: HttpLimitArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

/// The HTTP server's bounds (docs/security.md): what one client, and all of them together, may
/// hold.
#[derive(Debug, Clone, clap::Args)]
pub struct HttpLimitArgs {
    /// Connections the HTTP server keeps open at once; beyond, a new one takes the place of the
    /// oldest that has not passed the token (or Host) check, or is answered 503.
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub http_max_connections: usize,
    /// Live stream (/api/stream) clients at once; beyond, 503.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub http_max_streams: usize,
    /// Seconds a client has to send a request's headers whole.
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub http_header_timeout: f64,
    /// Seconds without a byte read or written after which a connection is closed.
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub http_idle_timeout: f64,
    /// Largest request head (request line and headers; at least 8192); beyond, 431.
    #[arg(long, value_name = "BYTES", default_value_t = 16384)]
    pub http_max_header_bytes: usize,
    /// Largest request body; beyond, 413.
    #[arg(long, value_name = "BYTES", default_value_t = 65536)]
    pub http_max_body_bytes: usize,
    /// Definitions a live monitor counts at once; an addition through the API beyond is refused
    /// (409), and so is a control topic's version that holds more (--kafka-control).
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub http_max_definitions: usize,
    /// Points one answer of the long-term store's API (/api/store/series) holds at most;
    /// beyond, 413 (ask a shorter range or a coarser resolution).
    #[arg(long, value_name = "N", default_value_t = 10_000)]
    pub http_max_store_points: usize,
}

impl HttpLimitArgs {
    /// The server's limits, checked.
    pub fn limits(&self) -> anyhow::Result<sonde_http::Limits> {
        let secs = |name: &str, v: f64| {
            anyhow::ensure!(v.is_finite() && (0.001..=86_400.0).contains(&v), "{name} is 0.001 to 86400 seconds");
            Ok(std::time::Duration::from_secs_f64(v))
        };
        anyhow::ensure!(self.http_max_connections >= 1, "--http-max-connections must be at least 1");
        anyhow::ensure!(
            self.http_max_header_bytes >= sonde_http::MIN_HEADER_BYTES,
            "--http-max-header-bytes must be at least {}",
            sonde_http::MIN_HEADER_BYTES
        );
        Ok(sonde_http::Limits {
            max_connections: self.http_max_connections,
            max_streams: self.http_max_streams,
            header_timeout: secs("--http-header-timeout", self.http_header_timeout)?,
            idle_timeout: secs("--http-idle-timeout", self.http_idle_timeout)?,
            max_header_bytes: self.http_max_header_bytes,
            max_body_bytes: self.http_max_body_bytes,
            max_definitions: self.http_max_definitions,
            max_store_points: self.http_max_store_points,
            ..sonde_http::Limits::default()
        })
    }
}

/// What `analyze` and `monitor` share: the analysis and its outputs.
#[derive(Debug, clap::Args)]
pub struct AnalysisArgs {
    /// Output directory (created if missing).
    #[arg(short = 'o', long = "out", value_name = "DIR", default_value = "sonde-out")]
    pub out: PathBuf,
    /// Output format: tsv and jsonl for the flow logs (the other outputs stay TSV); parquet
    /// and arrow for every output, typed (times as UTC timestamps, nulls for metrics without a
    /// sample).
    #[arg(long, value_enum, default_value = "tsv")]
    pub format: FormatArg,
    /// The flow logs' layout: sonde's tcp_flows/udp_flows, or Tstat 3.3's log_tcp_complete,
    /// log_tcp_nocomplete and log_udp_complete in their place (same columns, units and
    /// space-separated values, for Tstat's scripts; docs/tstat-layout.md). tstat takes
    /// --format tsv and no live view (--http, --spool).
    #[arg(long, value_enum, default_value = "sonde")]
    pub layout: LayoutArg,
    /// Read options from a TOML file whose keys are these long options (`interval = 60`,
    /// `outputs = ["tcp_flows"]`, `filter = "tcp"`; docs/config.md); options given here win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective options (defaults, --config's and these) as a TOML file for
    /// --config, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// The outputs to write, by name without extension (comma-separated): e.g.
    /// `tcp_flows,udp_flows` writes those two logs and summary.json and nothing else, and the
    /// run computes only what they show (no interval statistics without an interval output, no
    /// payload read without an output of application facts; docs/config.md). "" writes only
    /// summary.json (and the exports). Default: every output the other options ask for.
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    pub outputs: Option<Vec<String>>,
    /// Overwrite the outputs of an earlier run in the output directory.
    #[arg(long)]
    pub force: bool,
    /// Internal networks (CIDR, comma-separated or repeated), like Tstat's net.conf.
    #[arg(long, value_name = "CIDR", value_delimiter = ',')]
    pub internal: Vec<String>,
    /// File of internal networks, one per line ("10.0.0.0/8" or "10.0.0.0/255.0.0.0"; # comments).
    #[arg(long, value_name = "FILE")]
    pub internal_file: Option<PathBuf>,
    /// Seconds without a packet after which a TCP flow ends (Tstat: 300).
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub tcp_timeout: f64,
    /// Seconds without a packet after which a UDP flow ends (Tstat: 200).
    #[arg(long, value_name = "SECS", default_value_t = 200.0)]
    pub udp_timeout: f64,
    /// Seconds a closed TCP flow (both FINs, or RST) waits for its last packets (Linux TIME_WAIT).
    #[arg(long, value_name = "SECS", default_value_t = 60.0)]
    pub closed_linger: f64,
    /// Most flows held at once; when full, the longest-idle flow is evicted and logged. Room for
    /// them is reserved up front: address space (about 0.9 KB per flow), used as flows arrive.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    pub max_flows: usize,
    /// Payload packets of each flow direction read for application facts (TLS, QUIC, HTTP,
    /// DNS, RTP; see docs/l7.md); later UDP packets bring their first 16 bytes (RTP's header).
    /// 0 turns application facts off.
    #[arg(long, value_name = "N", default_value_t = 8)]
    pub app_packets: u8,
    /// DNS answers (client, address) kept for DN-Hunter, which labels each flow with the name
    /// its client resolved to the server's address; when full, the oldest go.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub dns_cache: usize,
    /// Memory for the flow logs' lines, in MiB, shared by the workers: beyond it they wait in
    /// sorted runs in unnamed temporary files in the output directory, merged when the logs
    /// are written, so memory does not grow with the flows a run has seen.
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub sort_buffer: usize,
    /// Flow-tracking worker threads (default: the machine's cores). Outputs are the same for
    /// any number.
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Interval of the monitoring outputs in seconds of packet time (counters, histograms,
    /// percentiles and tables per interval; Tstat: 300). 0 turns them off.
    #[arg(long, value_name = "SECS", default_value_t = 300.0)]
    pub interval: f64,
    /// Also keep RMON2-style tables per interval: hosts, host pairs, protocol directory and
    /// top-N hosts (hosts.tsv, matrix.tsv, protocols.tsv, top.tsv), and by application from the
    /// flows (al_hosts.tsv, al_matrix.tsv, protocol_dir.tsv, al_top.tsv). Costs about a quarter
    /// more CPU time.
    #[arg(long)]
    pub tables: bool,
    /// Most rows per table and interval; the rest are summed in an overflow row.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub table_size: usize,
    /// Rows in the top-N tables: hosts by bytes and by flows (top.tsv); hosts, host pairs and
    /// applications by bytes (al_top.tsv).
    #[arg(long, value_name = "N", default_value_t = 10)]
    pub top: usize,
    /// Round-robin time-series store to add this run's intervals to (created if missing, at
    /// the interval as its step: 5-min points for a day, 30-min for a week, 2-h for a month,
    /// 1-day for a year at the default interval). Needs a whole number of seconds as --interval.
    #[arg(long, value_name = "FILE")]
    pub store: Option<PathBuf>,
    /// The store's resolutions when it is created, as RESOLUTION:SPAN pairs (durations in s,
    /// m, h, d, w, y), each kept as AVERAGE, MIN and MAX [default: 5m:1d,30m:1w,2h:31d,1d:1y
    /// at a 300 s interval].
    #[arg(long, value_name = "LIST")]
    pub store_archives: Option<String>,
    /// Largest store (MB on disk, fixed at creation) --store may create: a short --interval
    /// with the default archives makes a large one (1 s: 745 MB); above it the run is refused
    /// and says the size.
    #[arg(long, value_name = "MB", default_value_t = 64)]
    pub store_max_mb: u64,
    /// Flow definitions to count (docs/definitions.md): packets and bytes per definition, flow
    /// identifier and interval, into definitions.tsv.
    #[arg(long, value_name = "FILE")]
    pub definitions: Option<PathBuf>,
    /// Changes to the definitions at given packet times (add, replace, remove, each against a
    /// version of the set; see docs/definitions.md).
    #[arg(long, value_name = "FILE")]
    pub definition_changes: Option<PathBuf>,
    /// Most flow identifiers per definition and interval; the rest are summed in an overflow row.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub definition_fids: usize,
    /// Samples of each association written one by one to definition_association_samples.tsv
    /// (the first N taken, 16 bytes each in memory; later ones are counted in
    /// definition_associations.tsv's samples_unwritten); what `sonde plot` draws its RTT phase
    /// plot from. 0 writes none.
    #[arg(long, value_name = "N", default_value_t = sonde_define::WRITTEN_SAMPLES)]
    pub association_samples: usize,
    /// Anonymise every address the outputs hold (flow logs, tables, definitions' address FIDs):
    /// cryptopan (prefix preserving), hash, zero or tcpdpriv (prefix preserving, images in the
    /// order addresses are first seen; one reader) (docs/anonymization.md).
    #[arg(long, value_name = "MODE", value_parser = crate::anon::parse_mode)]
    pub anonymize: Option<sonde_anon::Mode>,
    /// The 32-byte key for --anonymize cryptopan, hash or tcpdpriv: 64 hex digits or 32 raw
    /// bytes; created with a new random key (mode 600) if absent. The same key maps addresses
    /// the same way in every run, so outputs join (tcpdpriv: when addresses come in the same
    /// order).
    #[arg(long, value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Most distinct addresses --anonymize tcpdpriv's table holds (both families); past it a
    /// new address becomes 0.0.0.0 or :: and is counted in summary.json.
    #[arg(long, value_name = "N", default_value_t = sonde_anon::tcpdpriv::DEFAULT_MAX_ADDRESSES)]
    pub tcpdpriv_max_addresses: usize,
    /// Thin the packets before analysis (docs/thinning.md): `natra` drops pure TCP ACKs but
    /// each handshake's first; dropped packets are counted as read, nothing else sees them.
    #[arg(long, value_name = "MODE", value_enum)]
    pub thin: Option<crate::thin::ThinMode>,
    #[command(flatten)]
    pub thin_params: crate::thin::ThinParams,
    /// Export every flow record as IPFIX (docs/ipfix.md): udp://HOST:PORT, tcp://HOST:PORT or a
    /// file path; the flow logs are written as well.
    #[arg(long, value_name = "TARGET")]
    pub ipfix: Option<String>,
    /// The IPFIX observation domain id (one per probe).
    #[arg(long, value_name = "ID", default_value_t = 1)]
    pub ipfix_domain: u32,
    /// The largest IPFIX message in bytes (UDP: the path MTU less the IP and UDP headers).
    #[arg(long, value_name = "BYTES", default_value_t = 1400)]
    pub ipfix_mtu: usize,
    /// IPFIX over UDP: at most this many messages a second, so that a collector's socket buffer
    /// does not overflow when many flows end at once (a trace's end); 0: no limit.
    #[arg(long, value_name = "MSGS", default_value_t = sonde_ipfix::export::DEFAULT_UDP_RATE)]
    pub ipfix_rate: u32,
    /// Publish every finished flow to Kafka (docs/kafka.md): the bootstrap brokers,
    /// HOST:PORT[,HOST:PORT…]; the flow logs are written as well.
    #[arg(long, value_name = "BROKERS")]
    pub kafka: Option<String>,
    /// Seconds after which a flow still open sends an interim record to the exporters (--ipfix,
    /// --kafka; its end reason "open", IPFIX activeTimeout), and again every as many seconds
    /// while it has packets, as NetFlow and IPFIX exporters do; 0: only when it ends.
    /// Default: 60 in monitor, 0 in analyze. The flow logs hold only flows that ended.
    #[arg(long, value_name = "SECS")]
    pub active_timeout: Option<f64>,
    /// The flows' topic.
    #[arg(long, value_name = "TOPIC", default_value = "sonde-flows")]
    pub kafka_topic: String,
    /// The intervals' topic: additive contributions to intervals.tsv's rows, as intervals close
    /// (monitor) or when the run ends (analyze); "" for none.
    #[arg(long, value_name = "TOPIC", default_value = "sonde-intervals")]
    pub kafka_interval_topic: String,
    /// Messages the producer's local queue holds; beyond, flows are dropped and counted.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    pub kafka_queue: usize,
    /// Seconds the end of the run waits for queued messages to be delivered.
    #[arg(long, value_name = "SECS", default_value_t = 30.0)]
    pub kafka_flush_timeout: f64,
    /// A librdkafka property, KEY=VALUE (repeatable): TLS, SASL, batching…
    #[arg(long, value_name = "KEY=VALUE", value_parser = sonde_kafka::parse_option)]
    pub kafka_option: Vec<(String, String)>,
    // Issue 22, probe identity (docs/kafka.md).
    /// The topic of the intervals' histograms (additive contributions, as the intervals'); ""
    /// for none.
    #[arg(long, value_name = "TOPIC", default_value = "sonde-histograms")]
    pub kafka_histogram_topic: String,
    /// This probe's id: first in every Kafka message, the key of its intervals and histograms,
    /// and in summary.json. 1 to 64 of A-Z a-z 0-9 . _ - (default: the host name).
    #[arg(long, value_name = "ID")]
    pub probe_id: Option<String>,
    /// A live capture (`monitor`), not a trace: its defaults differ.
    #[arg(skip)]
    pub live: bool,
    /// No summary on stderr and no progress bar.
    #[arg(short, long)]
    pub quiet: bool,
    /// BPF filter (tcpdump syntax), e.g. `tcp port 80`.
    #[arg(trailing_var_arg = true, value_name = "FILTER")]
    pub filter: Vec<String>,
}

impl AnalysisArgs {
    /// Whether the outputs are typed (`--format parquet|arrow`).
    pub fn typed(&self) -> Option<FormatArg> {
        matches!(self.format, FormatArg::Parquet | FormatArg::Arrow).then_some(self.format)
    }

    /// The monitoring interval, or `None` when turned off.
    pub fn interval_ns(&self) -> Result<Option<u64>> {
        Ok(settings::interval_ns(self.interval, "--interval")?)
    }

    pub fn filter_expression(&self) -> Option<String> {
        let expr = self.filter.join(" ");
        (!expr.trim().is_empty()).then_some(expr)
    }

    pub fn internal_nets(&self) -> Result<Vec<IpNet>> {
        internal_nets(&self.internal, self.internal_file.as_deref())
    }

    /// The active timeout (`None`: off), `default_s` unless --active-timeout says.
    pub fn active_timeout_ns(&self, default_s: f64) -> Result<Option<u64>> {
        match self.active_timeout.unwrap_or(default_s) {
            0.0 => Ok(None),
            s => Self::timeout_ns(s, "--active-timeout").map(Some),
        }
    }

    pub fn timeout_ns(secs: f64, name: &str) -> Result<u64> {
        Ok(settings::timeout_ns(secs, name)?)
    }
}

/// The internal networks of `--internal` (each `list` entry) and `--internal-file` (`file`).
pub fn internal_nets(list: &[String], file: Option<&std::path::Path>) -> Result<Vec<IpNet>> {
    Ok(settings::internal_nets(list, file, "--internal")?)
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum CaptureArg {
    /// Linux AF_PACKET with a TPACKET_V3 memory-mapped ring.
    Afpacket,
    /// libpcap.
    Pcap,
}

#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// Interface to capture on; repeat for several (their frames are merged by timestamp).
    #[arg(short = 'i', long = "interface", value_name = "IFACE", required = true)]
    pub interfaces: Vec<String>,
    /// Capture mechanism.
    #[arg(long, value_enum, default_value = "afpacket")]
    pub capture: CaptureArg,
    /// Per interface: the ring's size in MiB (afpacket), or libpcap's buffer (pcap).
    #[arg(long, value_name = "MIB", default_value_t = 64)]
    pub ring_mb: usize,
    /// Put the interfaces in promiscuous mode while capturing.
    #[arg(long)]
    pub promisc: bool,
    /// Once the capture is open, become this user (and its group) before reading a packet.
    #[arg(long, value_name = "NAME")]
    pub user: Option<String>,
    /// Milliseconds without a packet after which packet time moves on by itself (the idle tick:
    /// intervals close and flows time out on a quiet link).
    #[arg(long, value_name = "MS", default_value_t = 100)]
    pub tick_ms: u64,
    /// Readers, each with its own AF_PACKET socket of a PACKET_FANOUT group per interface: the
    /// kernel spreads the flows over them by a symmetric hash, and each reader analyses its share
    /// with its own workers (--threads per reader; default 1, in the reader's thread). Not with
    /// --definitions (counted in input order by one reader).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub readers: usize,
    /// While capturing, serve the live run (JSON API, stream, Prometheus /metrics, dashboard;
    /// docs/http.md) on ADDR, e.g. 127.0.0.1:8080 (port 0: any free one). Definitions can be
    /// added, replaced and removed there while the capture runs.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// File holding the bearer token the HTTP API requires (needed when ADDR is not loopback;
    /// default: the SONDE_HTTP_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub http_token: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub http_limits: HttpLimitArgs,
    /// Write the outputs in chunks into this storage location, with an optional byte quota
    /// (K, M, G, T: powers of 1024), e.g. /data1:500G; repeat for more: when one is at its quota
    /// the chunks continue in the next. Each location's manifest.tsv lists the files complete
    /// and safe to move (docs/spool.md).
    #[arg(long, value_name = "PATH[:QUOTA]")]
    pub spool: Vec<sonde_spool::Location>,
    /// With --spool: seconds of packet time per chunk (aligned, as Tstat's hourly directories).
    #[arg(long, value_name = "SECONDS", default_value_t = 3600.0)]
    pub rotate: f64,
    /// With --spool: also end a chunk when its flow logs reach this many bytes (K, M, G, T).
    #[arg(long, value_name = "BYTES", value_parser = parse_bytes)]
    pub rotate_size: Option<u64>,
    #[command(flatten)]
    pub control: ControlArgs,
    #[command(flatten)]
    pub analysis: AnalysisArgs,
}

/// `monitor --kafka-control`: the definitions follow the Kafka control topic (docs/kafka.md,
/// "Control topic").
#[derive(Debug, clap::Args)]
pub struct ControlArgs {
    /// With --kafka: start with the control topic's newest definitions (in place of
    /// --definitions') and apply each new version published (`sonde control publish`) at the
    /// next packet; report the version applied to --kafka-status-topic.
    #[arg(long)]
    pub kafka_control: bool,
    /// The control topic (compacted, one partition; created so if missing).
    #[arg(long, value_name = "TOPIC", default_value = "sonde-control")]
    pub kafka_control_topic: String,
    /// The topic the probe reports the version it applies to (compacted, keyed by probe id).
    #[arg(long, value_name = "TOPIC", default_value = "sonde-probes")]
    pub kafka_status_topic: String,
    /// Seconds the start may wait for the brokers (reading the control topic to its end).
    #[arg(long, value_name = "SECS", default_value_t = 10.0)]
    pub kafka_control_timeout: f64,
}

fn parse_bytes(text: &str) -> Result<u64, String> {
    sonde_spool::parse_quota_bytes(text).map_err(|_| {
        format!("'{text}': expected a number of bytes, optionally followed by K, M, G or T (powers of 1024)")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_is_the_trailing_words() {
        let cli = Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap", "tcp", "port", "80"]).unwrap();
        let Command::Analyze(a) = cli.command else { panic!("not analyze") };
        assert_eq!(a.analysis.filter_expression().as_deref(), Some("tcp port 80"));
        assert_eq!(a.analysis.layout, LayoutArg::Sonde);
    }

    #[test]
    fn layout_tstat() {
        let cli = Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap", "--layout", "tstat"]).unwrap();
        let Command::Analyze(a) = cli.command else { panic!("not analyze") };
        assert_eq!(a.analysis.layout, LayoutArg::Tstat);
        assert!(Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap", "--layout", "argus"]).is_err());
    }
}
