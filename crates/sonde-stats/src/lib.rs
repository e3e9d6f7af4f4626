//! sonde-stats: monitoring by packet time. Every `interval` of packet time it keeps traffic
//! counters per protocol and direction, the distributions Tstat keeps histograms of (with
//! percentiles), and RMON2-style tables: hosts, host pairs, protocol directory and top-N from
//! the packets, and the application layer (alHost, alMatrix, the directory as a hierarchy) from
//! the flows.
//!
//! Two halves fill it: the reader feeds every packet to [`PacketIntervals`] (in packet order,
//! so bounded tables fill the same way whatever the number of workers), and each worker's flows
//! go to a [`FlowIntervals`] sink. [`Report`] merges them; every count is an integer, so the
//! merge gives the same result in any order and for any number of workers.
//!
//! ```
//! use sonde_stats::{Config, PacketIntervals, FlowIntervals, Report};
//! let cfg = Config::default();
//! let report = Report::new(&cfg, PacketIntervals::new(&cfg).finish(), vec![FlowIntervals::new(&cfg)]);
//! assert!(report.intervals.is_empty());
//! ```

#![forbid(unsafe_code)]

pub mod apps;
pub mod bins;
pub mod class;
pub mod flows;
pub mod packets;
pub mod report;
pub mod tables;

use ipnet::IpNet;

pub use apps::{App, AppTables, DirNode};
pub use bins::{percentiles, Binning, Dist};
pub use class::{Dir, Metric, Net, Proto, Unit, ANOMALY_CLASSES};
pub use flows::{FlowInterval, FlowIntervals};
pub use packets::{FineBin, FineBins, PacketInterval, PacketIntervals};
pub use report::{Interval, Report, ReportSummary};
pub use tables::{HostRow, ProtoKey, Tables, Traffic};

/// Monitoring settings. Defaults follow Tstat.
#[derive(Debug, Clone)]
pub struct Config {
    /// Interval length in packet time (Tstat: 5 minutes).
    pub interval_ns: u64,
    /// Internal networks: they decide the directions (in, out, loc, ext).
    pub internal_nets: Vec<IpNet>,
    /// Whether to keep the host, host-pair and protocol tables (off by default: four table
    /// updates per packet cost about as much as the rest of the monitoring together).
    pub tables: bool,
    /// Most rows per table per interval; the rest go to an overflow row.
    pub table_cap: usize,
    /// Rows listed in the top-N tables: hosts by bytes and by flows; hosts, host pairs and
    /// applications by bytes at the application layer.
    pub top_n: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            interval_ns: 300 * 1_000_000_000,
            internal_nets: Vec::new(),
            tables: false,
            table_cap: 100_000,
            top_n: 10,
        }
    }
}
