//! Command-line arguments: parsed close to argv here, then turned into validated settings.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
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
    /// /metrics, read again every --reload seconds, until Ctrl-C or SIGTERM.
    ///
    /// Example: sonde serve --merged merged/ --http 127.0.0.1:8080
    ///
    /// Exit status: 0 stopped by Ctrl-C or SIGTERM; 1 error (the directory or the address refused).
    Serve(Box<crate::serve::ServeArgs>),
    /// Print the shell completion script for bash, zsh, fish, elvish or PowerShell.
    ///
    /// Generated from the same definitions as the command line itself, so it names every
    /// subcommand and option this binary takes.
    ///
    /// Examples: sonde completions bash > /etc/bash_completion.d/sonde;
    /// sonde completions zsh > "${fpath[1]}/_sonde"; sonde completions fish > ~/.config/fish/completions/sonde.fish
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), or write one for sonde and each subcommand into a directory.
    ///
    /// Generated from the same definitions as `--help`.
    ///
    /// Examples: sonde man | man -l -; sonde man --dir /usr/share/man/man1
    Man {
        /// Write sonde.1 and sonde-SUBCOMMAND.1 (every subcommand, nested ones too) into DIR.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

#[derive(Debug, clap::Args)]
pub struct AnalyzeArgs {
    /// Trace to read; `-` reads standard input.
    #[arg(short = 'r', long = "read", value_name = "FILE")]
    pub read: PathBuf,
    /// After the run, serve its results (JSON API, live stream, Prometheus /metrics and the
    /// dashboard; docs/http.md) on ADDR until Ctrl-C or SIGTERM, e.g. 127.0.0.1:8080 (port 0: any free one).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// File holding the bearer token the HTTP API requires (needed when ADDR is not loopback;
    /// default: the SONDE_HTTP_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub http_token: Option<PathBuf>,
    #[command(flatten)]
    pub http_limits: sonde_analysis::serve::HttpLimits,
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

/// `sonde monitor`'s flags: the capture's, the live views', and the config file's.
#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    #[command(flatten)]
    pub monitor: sonde_analysis::monitor::MonitorConfig,
    /// Read options from a TOML file whose keys are these long options (`interval = 60`,
    /// `outputs = ["tcp_flows"]`, `filter = "tcp"`; docs/config.md); options given here win.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Print the effective options (defaults, --config's and these) as a TOML file for
    /// --config, and exit.
    #[arg(long)]
    pub print_config: bool,
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

    #[test]
    fn features_ml_and_its_splt() {
        let cli = Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap"]).unwrap();
        let Command::Analyze(a) = cli.command else { panic!("not analyze") };
        assert!(a.analysis.features.is_empty());
        assert_eq!(a.analysis.splt_packets, 20);
        let args = ["sonde", "analyze", "-r", "x.pcap", "--features", "ml", "--splt-packets", "8"];
        let Command::Analyze(a) = Cli::try_parse_from(args).unwrap().command else { panic!("not analyze") };
        assert_eq!(a.analysis.features, [sonde_analysis::FeatureSet::Ml]);
        assert_eq!(a.analysis.splt_packets, 8);
        assert!(Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap", "--features", "dl"]).is_err());
        assert!(Cli::try_parse_from(["sonde", "analyze", "-r", "x.pcap", "--splt-packets", "70000"]).is_err());
    }
}
