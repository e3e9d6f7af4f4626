//! [`AnalysisConfig`]: one type for everything a run is told, with one definition of each
//! setting (its type, default and documentation) read by clap (the CLI's flags, `--config`'s
//! keys) and by serde (`sonde.analyze`'s keyword arguments).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::ValueEnum;
use ipnet::IpNet;
use serde::Deserialize;
use sonde_engine::{settings, ThinConfig, Thinner};

/// The flow logs' layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FlowLayout {
    /// tcp_flows and udp_flows (docs/metrics.md).
    Sonde,
    /// Tstat 3.3's log_tcp_complete, log_tcp_nocomplete and log_udp_complete.
    Tstat,
}

impl From<FlowLayout> for sonde_output::Layout {
    fn from(l: FlowLayout) -> sonde_output::Layout {
        match l {
            FlowLayout::Sonde => sonde_output::Layout::Sonde,
            FlowLayout::Tstat => sonde_output::Layout::Tstat,
        }
    }
}

/// A set of extra per-flow features (`--features`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FeatureSet {
    /// NFStream's flow features (statistical_analysis and splt_analysis; docs/features.md).
    Ml,
}

/// The outputs' format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputFormat {
    Tsv,
    Jsonl,
    /// Every output as typed Parquet (zstd); docs/typed-outputs.md.
    Parquet,
    /// Every output as a typed Arrow IPC file (zstd).
    Arrow,
}

/// How the checks name a setting in their messages.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Names {
    /// As the CLI's flags: `--tcp-timeout`.
    #[default]
    Flags,
    /// As keys (Python's keyword arguments): `tcp_timeout`.
    Keys,
}

/// Everything a run of `analyze` or `monitor` is told: its outputs, facts, limits, networks,
/// intervals, tables, definitions, anonymisation, thinning and exports. The flags of the CLI
/// (`--config`'s keys, docs/config.md) and the keyword arguments of `sonde.analyze` are its
/// fields; its defaults are clap's. [`crate::Analysis::prepare`] is the one place it is checked.
#[derive(Debug, Clone, clap::Args, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AnalysisConfig {
    /// Output directory (created if missing).
    #[arg(short = 'o', long = "out", value_name = "DIR", default_value = "sonde-out")]
    pub out: PathBuf,
    /// Output format: tsv and jsonl for the flow logs (the other outputs stay TSV); parquet
    /// and arrow for every output, typed (times as UTC timestamps, nulls for metrics without a
    /// sample).
    #[arg(long, value_enum, default_value = "tsv")]
    pub format: OutputFormat,
    /// The flow logs' layout: sonde's tcp_flows/udp_flows, or Tstat 3.3's log_tcp_complete,
    /// log_tcp_nocomplete and log_udp_complete in their place (same columns, units and
    /// space-separated values, for Tstat's scripts; docs/tstat-layout.md). tstat takes
    /// --format tsv and no live view (--http, --spool).
    #[arg(long, value_enum, default_value = "sonde")]
    pub layout: FlowLayout,
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
    /// End TCP flows where Zeek ends its connections: a packet 5 s after an unanswered SYN, or
    /// 5 s after a close Zeek calls complete, starts a new flow (end_reason expired), so that
    /// the flow logs pair one to one with Zeek's conn.log (docs/zeek.md).
    #[arg(long)]
    pub zeek_lifetimes: bool,
    /// Extra per-flow features in sonde's flow logs (comma-separated): `ml`, NFStream's flow
    /// features (statistical_analysis=True, splt_analysis=N): packet sizes and inter-arrival
    /// times (min, mean, stddev, max) per direction and both, TCP flag counts, and the first
    /// packets' directions, sizes and gaps (SPLT) as lists (docs/features.md).
    #[arg(long, value_enum, value_name = "SET", value_delimiter = ',')]
    pub features: Vec<FeatureSet>,
    /// With --features ml: the packets of each flow's SPLT (NFStream's splt_analysis); the lists
    /// are padded with -1 to this length. 0 leaves the SPLT columns out.
    #[arg(long, value_name = "N", default_value_t = sonde_flow::features::DEFAULT_SPLT)]
    pub splt_packets: u16,
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
    /// MaxMind DB of countries (GeoIP2 or GeoLite2 Country or City): each flow's client and
    /// server country in the flow logs (c_country, s_country; docs/owners.md). Checked whole
    /// when opened: a damaged file is refused.
    #[arg(long, value_name = "FILE.mmdb")]
    pub geoip: Option<PathBuf>,
    /// MaxMind DB of autonomous systems (GeoLite2 ASN): each flow's client and server AS
    /// number and organisation in the flow logs (c_asn, s_asn, c_as_org, s_as_org).
    #[arg(long, value_name = "FILE.mmdb")]
    pub asn: Option<PathBuf>,
    /// Addresses whose owners (--geoip, --asn) each worker keeps, so that a busy address is
    /// looked up once; when full, the cache empties and fills again.
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    pub owner_cache: usize,
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
    /// Longest definition name taken, in bytes, from the definitions file and every change
    /// (SIGHUP, the HTTP API, the control topic): a name reaches every definition output's rows
    /// and the /metrics labels.
    #[arg(long, value_name = "BYTES", default_value_t = sonde_define::MAX_NAME_BYTES as u16, value_parser = clap::value_parser!(u16).range(1..))]
    pub definition_name_max: u16,
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
    #[serde(with = "text")]
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
    pub thin: Option<ThinMode>,
    #[command(flatten)]
    #[serde(skip)]
    pub thin_params: ThinParams,
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
    #[serde(skip)]
    pub live: bool,
    /// How the checks name a setting: as a flag (`--tcp-timeout`) or a key (`tcp_timeout`).
    #[arg(skip)]
    #[serde(skip)]
    pub names: Names,
    /// No summary on stderr and no progress bar.
    #[arg(short, long)]
    pub quiet: bool,
    /// BPF filter (tcpdump syntax), e.g. `tcp port 80`.
    #[arg(trailing_var_arg = true, value_name = "FILTER")]
    pub filter: Vec<String>,
}

impl Default for AnalysisConfig {
    /// clap's defaults: the CLI's with no flag given.
    fn default() -> AnalysisConfig {
        use clap::{Args, FromArgMatches};
        let command = AnalysisConfig::augment_args(clap::Command::new("sonde"));
        let matches = command.try_get_matches_from(["sonde"]).expect("no flag needs a value");
        AnalysisConfig::from_arg_matches(&matches).expect("the defaults are valid")
    }
}

impl AnalysisConfig {
    /// Whether the outputs are typed (`--format parquet|arrow`).
    pub fn typed(&self) -> Option<OutputFormat> {
        matches!(self.format, OutputFormat::Parquet | OutputFormat::Arrow).then_some(self.format)
    }

    /// The setting `key` (`tcp_timeout`) as [`Names`] says: `--tcp-timeout` or `tcp_timeout`.
    pub fn name(&self, key: &str) -> String {
        match self.names {
            Names::Flags => format!("--{}", key.replace('_', "-")),
            Names::Keys => key.to_string(),
        }
    }

    /// The monitoring interval (`None`: turned off); an error if it is off while the tables, kept per interval,
    /// are asked for.
    pub fn interval_ns(&self) -> Result<Option<u64>> {
        let ns = settings::interval_ns(self.interval, &self.name("interval"))?;
        anyhow::ensure!(
            ns.is_some() || !self.tables,
            "{} needs intervals (it keeps its tables per interval), and {} 0 turns them off",
            self.name("tables"),
            self.name("interval")
        );
        Ok(ns)
    }

    pub fn filter_expression(&self) -> Option<String> {
        let expr = self.filter.join(" ");
        (!expr.trim().is_empty()).then_some(expr)
    }

    /// The internal networks of `--internal` and `--internal-file`.
    pub fn internal_nets(&self) -> Result<Vec<IpNet>> {
        Ok(settings::internal_nets(&self.internal, self.internal_file.as_deref(), &self.name("internal"))?)
    }

    /// The active timeout (`None`: off), `default_s` unless --active-timeout says.
    pub fn active_timeout_ns(&self, default_s: f64) -> Result<Option<u64>> {
        match self.active_timeout.unwrap_or(default_s) {
            0.0 => Ok(None),
            s => self.timeout_ns(s, "active_timeout").map(Some),
        }
    }

    /// `secs` of the timeout `key`, checked.
    pub fn timeout_ns(&self, secs: f64, key: &str) -> Result<u64> {
        Ok(settings::timeout_ns(secs, &self.name(key))?)
    }
}

/// `--thin`'s modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThinMode {
    /// Drop pure TCP ACKs (ACK, no payload, not SYN or FIN; RST+ACK included) except each
    /// handshake's (NATRA, as the paper's Pseudocode 1).
    Natra,
}

/// The thinner's settings (NATRA's table sizing and entry lifetime); docs/thinning.md.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ThinParams {
    /// New TCP connections per second (λ) to size the handshake table for, once
    /// [default: measured from the traffic over the latest minute, the table re-sized as it changes].
    #[arg(long, value_name = "CONN_PER_S")]
    pub thin_rate: Option<f64>,
    /// Seconds a handshake's entry lives, SYN to ACK (1/μ, a bound on the handshake RTT): the
    /// sizing's holding time and the expiry [default: 1; the paper's is 0.2].
    #[arg(long, value_name = "SECS")]
    pub thin_hold: Option<f64>,
    /// Collision probability the table is sized for (P) [default: 0.05].
    #[arg(long, value_name = "P")]
    pub thin_collision: Option<f64>,
    /// The most slots (16 bytes each) a table sized from the measured rate may take
    /// [default: 1048576].
    #[arg(long, value_name = "SLOTS")]
    pub thin_max_slots: Option<usize>,
}

impl ThinParams {
    fn given(&self) -> bool {
        self.thin_rate.is_some()
            || self.thin_hold.is_some()
            || self.thin_collision.is_some()
            || self.thin_max_slots.is_some()
    }

    /// A fresh thinner with these settings, checked.
    pub fn thinner(&self) -> Result<Thinner> {
        let d = ThinConfig::default();
        let config = ThinConfig {
            rate_per_s: self.thin_rate.or(d.rate_per_s),
            hold_s: self.thin_hold.unwrap_or(d.hold_s),
            collision_p: self.thin_collision.unwrap_or(d.collision_p),
            max_slots: self.thin_max_slots.unwrap_or(d.max_slots),
        };
        Thinner::new(&config).context("thinning settings")
    }

    /// The thinner a run with `mode` runs with, if any.
    pub fn for_run(&self, mode: Option<ThinMode>) -> Result<Option<Thinner>> {
        match mode {
            Some(ThinMode::Natra) => self.thinner().map(Some),
            None if self.given() => {
                anyhow::bail!("--thin-rate, --thin-hold, --thin-collision and --thin-max-slots need --thin")
            }
            None => Ok(None),
        }
    }
}

/// A value read from its text (`FromStr`), as clap reads it: `--anonymize`'s mode.
mod text {
    use serde::{Deserialize, Deserializer};

    pub fn deserialize<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: std::str::FromStr,
        T::Err: std::fmt::Display,
    {
        Option::<String>::deserialize(d)?.map(|s| s.parse().map_err(serde::de::Error::custom)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults are the CLI's, and keys read as serde reads them.
    #[test]
    fn defaults_and_keys() {
        let d = AnalysisConfig::default();
        assert_eq!((d.interval, d.max_flows, d.app_packets, d.format), (300.0, 1_000_000, 8, OutputFormat::Tsv));
        let c: AnalysisConfig =
            serde_json::from_str(r#"{"interval": 60, "anonymize": "zero", "thin": "natra", "format": "parquet"}"#)
                .unwrap();
        assert_eq!(
            (c.interval, c.thin, c.format, c.tcp_timeout),
            (60.0, Some(ThinMode::Natra), OutputFormat::Parquet, 300.0)
        );
        assert_eq!(c.anonymize, Some(sonde_anon::Mode::Zero));
        let e = serde_json::from_str::<AnalysisConfig>(r#"{"intervl": 60}"#).unwrap_err().to_string();
        assert!(e.contains("intervl"), "{e}");
        let e = serde_json::from_str::<AnalysisConfig>(r#"{"anonymize": "rot13"}"#).unwrap_err().to_string();
        assert!(e.contains("rot13"), "{e}");
    }

    #[test]
    fn names_as_flags_or_keys() {
        let mut c = AnalysisConfig::default();
        assert_eq!(c.name("tcp_timeout"), "--tcp-timeout");
        c.names = Names::Keys;
        assert_eq!(c.name("tcp_timeout"), "tcp_timeout");
    }
}
