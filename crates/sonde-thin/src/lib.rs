//! sonde-thin: NATRA ACK thinning (Garcia-Jimenez, Magaña, Aracil, IEEE Access 2020), a stage
//! between decoding and analysis that drops the TCP segments least worth analysing.
//!
//! A [`Thinner`] decides per decoded packet whether it is kept: a TCP segment that carries ACK
//! and no payload and is not SYN, FIN or RST (a *pure ACK*) is dropped, except the first ACK of
//! a handshake. Handshakes are recognised through a fixed table of open handshakes
//! ([`table::HandshakeTable`]): a SYN/ACK records the ACK it awaits (the client → server
//! addresses and ports, acknowledging the SYN/ACK's sequence number + 1), and the first pure ACK
//! that matches passes and frees the entry. The client's own sequence number is not part of the
//! key: the flow analyser takes the handshake RTT from the first ACK of the SYN/ACK whatever its
//! sequence number, and thinning must keep that ACK. The table is sized once from the paper's
//! formula ([`table_slots`]) and never grows; on a collision the packet passes, so a handshake
//! is never lost to the table. Everything else — non-TCP, data, SYN, FIN, RST, fragments,
//! headers that could not be read whole — is kept.
//!
//! No I/O, no clock: packet time is passed in, so a trace thins the same way every time. The
//! counters are a `Copy` [`ThinStats`]. [`thin_trace`] runs a whole trace through a thinner,
//! from a sonde-capture source to a trace writer the caller opened (`sonde thin`).
//!
//! ```
//! use sonde_thin::{Config, Thinner};
//! let mut thinner = Thinner::new(&Config::default()).unwrap();
//! assert_eq!(thinner.slots(), 23_057);
//! // A frame that is not TCP passes.
//! let arp = sonde_wire::decode(sonde_wire::LinkType::ETHERNET, &[0u8; 60], 60).unwrap();
//! assert!(thinner.keep(0, &arp, 60));
//! ```

#![forbid(unsafe_code)]

pub mod table;
mod trace;

use std::net::IpAddr;

use sonde_wire::{Fragment, PacketSummary, Transport};
use table::{HandshakeTable, Insert, Lookup};
pub use trace::{thin_trace, ThinnedTrace};

/// The 99th percentile of the standard normal distribution (one-sided), as in the paper's
/// sizing of the table.
pub const Z99: f64 = 2.326;
/// The most slots a table may have (16 bytes each: 1 GiB).
pub const MAX_SLOTS: usize = 1 << 26;

/// The thinner's settings. The defaults are ours, chosen for a busy access link: the paper
/// sizes the table from these quantities but a trace's own values vary.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// λ: expected new connections per second.
    pub rate_per_s: f64,
    /// 1/μ: how long a handshake holds its entry, SYN/ACK to ACK, in seconds.
    pub hold_s: f64,
    /// P: the collision probability the table is sized for.
    pub collision_p: f64,
    /// Entries expire this long after their SYN/ACK: the longest handshake RTT expected.
    pub max_rtt_s: f64,
}

impl Default for Config {
    fn default() -> Self {
        Config { rate_per_s: 1_000.0, hold_s: 0.2, collision_p: 0.01, max_rtt_s: 3.0 }
    }
}

/// A setting out of range.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// Which setting, and the range it must lie in.
    OutOfRange { name: &'static str, range: &'static str, value: f64 },
    /// The formula asks for more than [`MAX_SLOTS`] slots.
    TooLarge { slots: f64 },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::OutOfRange { name, range, value } => write!(f, "{name} must be {range}, not {value}"),
            ConfigError::TooLarge { slots } => {
                write!(f, "the table would need {slots:.0} slots, more than the {MAX_SLOTS} allowed")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The table's size from the formula, after checking every setting.
    pub fn slots(&self) -> Result<usize, ConfigError> {
        let check = |name, ok: bool, range, value| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange { name, range, value })
            }
        };
        let positive = |v: f64| v.is_finite() && v > 0.0;
        check("the connection rate", positive(self.rate_per_s), "a positive number", self.rate_per_s)?;
        check("the holding time", positive(self.hold_s), "a positive number of seconds", self.hold_s)?;
        let p = self.collision_p;
        check("the collision probability", p.is_finite() && p > 0.0 && p < 1.0, "between 0 and 1", p)?;
        check("the maximum handshake RTT", positive(self.max_rtt_s), "a positive number of seconds", self.max_rtt_s)?;
        let slots = table_slots(self.rate_per_s, self.hold_s, self.collision_p);
        if slots > MAX_SLOTS as f64 {
            return Err(ConfigError::TooLarge { slots });
        }
        Ok(slots as usize)
    }

    pub fn max_rtt_ns(&self) -> u64 {
        (self.max_rtt_s * 1e9).round() as u64
    }
}

/// The paper's table size M = (λ/μ + z₉₉·√(λ/μ))·(1−P)/P, rounded up: λ/μ is the mean number
/// of handshakes open at once (Little's law; Poisson arrivals), λ/μ + z₉₉·√(λ/μ) its 99th
/// percentile (normal approximation), and (1−P)/P the slots per entry that keep the chance a
/// new entry meets an occupied slot at P.
pub fn table_slots(rate_per_s: f64, hold_s: f64, collision_p: f64) -> f64 {
    let open = rate_per_s * hold_s;
    ((open + Z99 * open.sqrt()) * (1.0 - collision_p) / collision_p).ceil().max(1.0)
}

/// What the thinner saw and did. Bytes are lengths on the wire.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThinStats {
    /// Every packet offered, and the TCP ones among them (a TCP header cut short included).
    pub packets: u64,
    pub bytes: u64,
    pub tcp_packets: u64,
    pub tcp_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    /// SYN/ACKs that opened an entry (a retransmitted one counts in `syn_ack_repeats`).
    pub handshakes_tracked: u64,
    pub syn_ack_repeats: u64,
    /// Handshakes whose ACK was found (and kept); `late_matches` of them after their expiry.
    pub handshakes_matched: u64,
    pub late_matches: u64,
    /// Entries that expired unanswered (their ACK carried data, was not captured, or the
    /// handshake failed).
    pub handshakes_expired: u64,
    /// SYN/ACKs that met a slot held by another live handshake, and the pure ACKs kept because
    /// they mapped to a collided slot.
    pub collisions: u64,
    pub collided_passes: u64,
    /// The most slots in use at once (stale entries are swept every maximum RTT).
    pub peak_occupancy: u64,
}

/// The per-packet decision, over a handshake table of fixed size.
#[derive(Debug, Clone)]
pub struct Thinner {
    config: Config,
    table: HandshakeTable,
    max_rtt_ns: u64,
    /// The latest packet time seen: expiry never runs backwards with the trace's timestamps.
    clock_ns: u64,
    next_sweep_ns: u64,
    stats: ThinStats,
}

impl Thinner {
    pub fn new(config: &Config) -> Result<Thinner, ConfigError> {
        let slots = config.slots()?;
        let max_rtt_ns = config.max_rtt_ns();
        Ok(Thinner {
            config: *config,
            table: HandshakeTable::new(slots),
            max_rtt_ns,
            clock_ns: 0,
            next_sweep_ns: 0,
            stats: ThinStats::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn slots(&self) -> usize {
        self.table.slots()
    }

    pub fn table_bytes(&self) -> usize {
        self.table.bytes()
    }

    pub fn stats(&self) -> ThinStats {
        self.stats
    }

    /// Whether the packet `p` (of `wire_len` bytes, at packet time `ts_ns`) is kept.
    #[inline]
    pub fn keep(&mut self, ts_ns: u64, p: &PacketSummary, wire_len: u32) -> bool {
        let s = &mut self.stats;
        s.packets += 1;
        s.bytes += u64::from(wire_len);
        let tcp = match p.transport {
            Some(Transport::Tcp(t)) => t,
            Some(Transport::Truncated { protocol: 6 }) => {
                s.tcp_packets += 1;
                s.tcp_bytes += u64::from(wire_len);
                return true;
            }
            _ => return true,
        };
        s.tcp_packets += 1;
        s.tcp_bytes += u64::from(wire_len);
        let Some(ip) = p.ip else { return true };
        self.clock_ns = self.clock_ns.max(ts_ns);
        if self.clock_ns >= self.next_sweep_ns {
            self.sweep();
        }
        let flags = tcp.flags;
        if flags.syn() {
            if flags.ack() {
                // RFC 9293 §3.5: the ACK completing the handshake acknowledges the SYN/ACK's
                // seq + 1 and comes from the SYN/ACK's receiver.
                let awaited = ack_hash(ip.dst, ip.src, tcp.dst_port, tcp.src_port, tcp.seq.wrapping_add(1));
                self.track(awaited);
            }
            return true;
        }
        // Only a pure ACK read whole may go: never drop what could not be read.
        let pure = flags.ack() && !flags.fin() && !flags.rst() && tcp.payload_len == 0;
        if !pure || p.problem.is_some() || ip.fragment != Fragment::No {
            return true;
        }
        let hash = ack_hash(ip.src, ip.dst, tcp.src_port, tcp.dst_port, tcp.ack);
        let s = &mut self.stats;
        match self.table.lookup(hash, self.clock_ns) {
            Lookup::Handshake { late } => {
                s.handshakes_matched += 1;
                s.late_matches += u64::from(late);
                true
            }
            Lookup::Collided => {
                s.collided_passes += 1;
                true
            }
            Lookup::Miss => {
                s.dropped_packets += 1;
                s.dropped_bytes += u64::from(wire_len);
                false
            }
        }
    }

    fn track(&mut self, awaited: u64) {
        let s = &mut self.stats;
        match self.table.insert(awaited, self.clock_ns, self.clock_ns.saturating_add(self.max_rtt_ns)) {
            Insert::New { expired } => {
                s.handshakes_tracked += 1;
                s.handshakes_expired += u64::from(expired);
            }
            Insert::Repeat => s.syn_ack_repeats += 1,
            Insert::Collision => {
                s.handshakes_tracked += 1;
                s.collisions += 1;
            }
        }
        s.peak_occupancy = s.peak_occupancy.max(self.table.occupied() as u64);
    }

    /// Frees the stale entries, once per maximum RTT of packet time (a pass over the table).
    #[cold]
    fn sweep(&mut self) {
        self.stats.handshakes_expired += self.table.sweep(self.clock_ns);
        self.next_sweep_ns = self.clock_ns.saturating_add(self.max_rtt_ns);
    }
}

/// The hash of an ACK: its addresses and ports (in its direction) and its acknowledgement
/// number. Fixed constants, so every run maps alike.
fn ack_hash(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16, ack: u32) -> u64 {
    let (src, dst, family) = match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => (u128::from(u32::from(s)), u128::from(u32::from(d)), 4u64),
        (s, d) => (ip_bits(s), ip_bits(d), 6u64),
    };
    let mut h = 0x243f_6a88_85a3_08d3u64;
    for word in [
        (src >> 64) as u64,
        src as u64,
        (dst >> 64) as u64,
        dst as u64,
        u64::from(src_port) << 32 | u64::from(dst_port) << 16 | family,
        u64::from(ack),
    ] {
        h = mix(h ^ word);
    }
    mix(h)
}

fn ip_bits(ip: IpAddr) -> u128 {
    match ip {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

/// A 64 × 64 → 128-bit multiply folded: every input bit reaches the high half.
fn mix(x: u64) -> u64 {
    let m = u128::from(x ^ 0x9e37_79b9_7f4a_7c15) * 0xff51_afd7_ed55_8ccd;
    (m as u64) ^ (m >> 64) as u64
}

#[cfg(test)]
mod tests;
