//! How traffic is split: Tstat's directions relative to the internal networks, protocols, and
//! the metrics kept per interval with their units and bins.

use std::net::IpAddr;

use ipnet::IpNet;
use sonde_types::table::Decimal;

use crate::bins::Binning;

// The directions and protocols are the whole workspace's words: defined in sonde-types.
pub use sonde_types::{Net, Proto};

/// The internal networks (Tstat's net.conf).
#[derive(Debug, Clone, Default)]
pub struct Internal {
    nets: Vec<IpNet>,
}

impl Internal {
    pub fn new(nets: Vec<IpNet>) -> Self {
        Internal { nets }
    }

    #[inline]
    pub fn contains(&self, ip: &IpAddr) -> bool {
        !self.nets.is_empty() && self.nets.iter().any(|n| n.contains(ip))
    }

    #[inline]
    pub fn net(&self, src: &IpAddr, dst: &IpAddr) -> Net {
        Net::of(self.contains(src), self.contains(dst))
    }
}

/// A flow metric's direction: client → server, server → client, or the flow (or packet) as a
/// whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    C2s,
    S2c,
    Both,
}

impl Dir {
    pub fn name(self) -> &'static str {
        ["c2s", "s2c", "-"][self as usize]
    }
}

/// The distributions kept per interval (docs/monitoring.md describes each).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Metric {
    IpLen,
    IpTtl,
    TcpRttAvg,
    TcpRttMin,
    TcpRttSample,
    TcpHsRtt,
    TcpDuration,
    TcpBytes,
    TcpThroughput,
    TcpRetxRate,
    TcpOooRate,
    TcpAnomaly,
    TcpWinMax,
    TcpCwndMax,
    TcpMss,
    UdpDuration,
    UdpBytes,
}

/// The classes of `tcp_anomaly`, by value: Tstat's segment types (its `tcp_anomalies`
/// histogram), in-sequence data first, then the causes of out-of-sequence segments of
/// [`sonde_flow::AnomalyCounts`].
pub const ANOMALY_CLASSES: [&str; 9] = [
    "in_sequence",
    "rto",
    "fast_retx",
    "reordering",
    "net_dup",
    "flow_control",
    "unneeded_rto",
    "unneeded_fast_retx",
    "unknown",
];

/// How a metric's integer base unit is written out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Nanoseconds written as milliseconds (Tstat's unit for times).
    Ms,
    Bytes,
    BitsPerSecond,
    /// Parts per million written as a percentage.
    Percent,
    Hops,
    /// A class code (`tcp_anomaly`: [`ANOMALY_CLASSES`]).
    Class,
}

impl Unit {
    pub fn name(self) -> &'static str {
        match self {
            Unit::Ms => "ms",
            Unit::Bytes => "bytes",
            Unit::BitsPerSecond => "bit/s",
            Unit::Percent => "%",
            Unit::Hops => "hops",
            Unit::Class => "class",
        }
    }
}

impl Unit {
    /// A base-unit value in this unit, exactly (integer arithmetic: float formatting cost more
    /// than the rest of the report): ms with 6 decimals, % with 4, the rest whole.
    pub fn decimal(self, value: u64) -> Decimal {
        match self {
            Unit::Ms => Decimal::new(value, 6),
            Unit::Percent => Decimal::new(value, 4),
            _ => Decimal::new(value, 0),
        }
    }

    /// Writes a base-unit value in this unit, exactly (as [`Unit::decimal`] has it).
    pub fn format(self, value: u64, out: &mut String) {
        self.decimal(value).write(out);
    }

    /// A base-unit value (ns, ppm, …) in this unit, as a float (ms, %, …).
    pub fn scaled(self, value: f64) -> f64 {
        match self {
            Unit::Ms => value / 1e6,
            Unit::Percent => value / 1e4,
            _ => value,
        }
    }

    /// A mean (a base-unit value with a fraction) in this unit, rounded as the quantiles file
    /// writes it: ms with 6 decimals, % with 4, the rest with 3. `None` for a negative or
    /// non-finite mean.
    pub fn mean(self, value: f64) -> Option<Decimal> {
        match self {
            Unit::Ms => Decimal::of_f64(value / 1e6, 6),
            Unit::Percent => Decimal::of_f64(value / 1e4, 4),
            _ => Decimal::of_f64(value, 3),
        }
    }
}

impl Metric {
    pub const ALL: [Metric; 17] = [
        Metric::IpLen,
        Metric::IpTtl,
        Metric::TcpRttAvg,
        Metric::TcpRttMin,
        Metric::TcpRttSample,
        Metric::TcpHsRtt,
        Metric::TcpDuration,
        Metric::TcpBytes,
        Metric::TcpThroughput,
        Metric::TcpRetxRate,
        Metric::TcpOooRate,
        Metric::TcpAnomaly,
        Metric::TcpWinMax,
        Metric::TcpCwndMax,
        Metric::TcpMss,
        Metric::UdpDuration,
        Metric::UdpBytes,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::IpLen => "ip_len",
            Metric::IpTtl => "ip_ttl",
            Metric::TcpRttAvg => "tcp_rtt_avg",
            Metric::TcpRttMin => "tcp_rtt_min",
            Metric::TcpRttSample => "tcp_rtt_sample",
            Metric::TcpHsRtt => "tcp_hs_rtt",
            Metric::TcpDuration => "tcp_duration",
            Metric::TcpBytes => "tcp_bytes",
            Metric::TcpThroughput => "tcp_thru",
            Metric::TcpRetxRate => "tcp_retx_rate",
            Metric::TcpOooRate => "tcp_ooo_rate",
            Metric::TcpAnomaly => "tcp_anomaly",
            Metric::TcpWinMax => "tcp_win_max",
            Metric::TcpCwndMax => "tcp_cwnd_max",
            Metric::TcpMss => "tcp_mss",
            Metric::UdpDuration => "udp_duration",
            Metric::UdpBytes => "udp_bytes",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Metric::IpLen
            | Metric::TcpBytes
            | Metric::TcpWinMax
            | Metric::TcpCwndMax
            | Metric::TcpMss
            | Metric::UdpBytes => Unit::Bytes,
            Metric::TcpAnomaly => Unit::Class,
            Metric::IpTtl => Unit::Hops,
            Metric::TcpRttAvg
            | Metric::TcpRttMin
            | Metric::TcpRttSample
            | Metric::TcpHsRtt
            | Metric::TcpDuration
            | Metric::UdpDuration => Unit::Ms,
            Metric::TcpThroughput => Unit::BitsPerSecond,
            Metric::TcpRetxRate | Metric::TcpOooRate => Unit::Percent,
        }
    }

    pub fn binning(self) -> Binning {
        match self {
            // Exact: small integers, and rates to the part per million.
            Metric::IpLen
            | Metric::IpTtl
            | Metric::TcpMss
            | Metric::TcpRetxRate
            | Metric::TcpOooRate
            | Metric::TcpAnomaly => Binning::Linear(1),
            _ => Binning::Log,
        }
    }
}
