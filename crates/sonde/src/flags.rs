//! Command-line arguments: parsed close to argv here, then turned into validated settings.

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};
use sonde_analysis::AnalysisConfig;

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
    /// Read options from a TOML file whose keys are these long options (`interval = 60`,
    /// `outputs = ["tcp_flows"]`, `filter = "tcp"`; docs/config.md); options given here win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective options (defaults, --config's and these) as a TOML file for
    /// --config, and exit.
    #[arg(long)]
    pub print_config: bool,
    #[command(flatten)]
    pub analysis: AnalysisConfig,
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
    /// Read options from a TOML file whose keys are these long options (`interval = 60`,
    /// `outputs = ["tcp_flows"]`, `filter = "tcp"`; docs/config.md); options given here win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective options (defaults, --config's and these) as a TOML file for
    /// --config, and exit.
    #[arg(long)]
    pub print_config: bool,
    #[command(flatten)]
    pub analysis: AnalysisConfig,
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
        assert_eq!(a.analysis.layout, sonde_analysis::FlowLayout::Sonde);
    }

    #[test]
    fn layout_tstat() {
        let cli = Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap", "--layout", "tstat"]).unwrap();
        let Command::Analyze(a) = cli.command else { panic!("not analyze") };
        assert_eq!(a.analysis.layout, sonde_analysis::FlowLayout::Tstat);
        assert!(Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap", "--layout", "argus"]).is_err());
    }
}
