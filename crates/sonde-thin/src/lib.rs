//! sonde-thin: NATRA ACK thinning (Garcia-Jimenez, Magaña, Aracil, IEEE Access 2020), a stage
//! between decoding and analysis that drops the TCP segments least worth analysing.
//!
//! As the paper's Pseudocode 1: a TCP segment with ACK, without payload and without SYN or FIN
//! (a *pure ACK*; RST+ACK included) is dropped, except the one that completes a handshake. The
//! client's SYN records that ACK in a table of open handshakes ([`table::HandshakeTable`]),
//! keyed by the client → server addresses and ports and the SYN's sequence number + 1 — the
//! sequence number of the client's next segment, its handshake ACK; the first pure ACK that
//! matches passes and frees the entry. The table is sized by the paper's Eq. 1–2
//! ([`table_slots`]) from the connection rate, given or **measured from the traffic** over a
//! sliding minute ([`load::RateWindow`]), and re-sized when the measured rate leaves the range
//! it was sized for. Everything else — non-TCP, data, SYN, FIN, RST without ACK, fragments,
//! headers that could not be read whole — is kept. Where sonde departs from the pseudocode
//! (collisions, late ACKs, a SYN/ACK renewing the entry): docs/thinning.md.
//!
//! No I/O, no clock: packet time is passed in, so a trace thins the same way every time. The
//! counters are a `Copy` [`ThinStats`]; per 5-minute interval, the reduction and the open
//! handshakes against the model ([`load::Intervals`]). [`thin_trace`] runs a whole trace through
//! a thinner, from a sonde-capture source to a trace writer the caller opened (`sonde thin`).
//!
//! ```
//! use sonde_thin::{Config, Thinner};
//! let mut thinner = Thinner::new(&Config::default()).unwrap();
//! // Sized for the starting rate until the traffic's own is measured.
//! assert_eq!(thinner.slots(), 2_342);
//! // A frame that is not TCP passes.
//! let arp = sonde_wire::decode(sonde_wire::LinkType::ETHERNET, &[0u8; 60], 60).unwrap();
//! assert!(thinner.keep(0, &arp, 60));
//! ```

#![forbid(unsafe_code)]

pub mod load;
pub mod table;
mod trace;

use std::net::IpAddr;

use load::{Intervals, RateWindow, ThinInterval};
use sonde_wire::{Fragment, PacketSummary, Transport};
use table::{HandshakeTable, Insert, Lookup};
pub use trace::{thin_trace, ThinnedTrace};

/// The 99th percentile of the standard normal distribution (one-sided), as in the paper's
/// sizing of the table.
pub const Z99: f64 = 2.326;
/// The most slots a table may have (16 bytes each: 1 GiB).
pub const MAX_SLOTS: usize = 1 << 26;
/// The rate a measured table starts from, and the least it is sized for (2,342 slots at the
/// default lifetime and collision probability: 37 kB).
pub const START_RATE_PER_S: f64 = 100.0;
/// A measured table grows when the rate exceeds the one it was sized for by this factor…
pub const GROW_ABOVE: f64 = 1.25;
/// …and shrinks when the rate falls below the one it was sized for divided by this.
pub const SHRINK_BELOW: f64 = 4.0;
/// The resizes a report lists (the latest); the count covers them all.
pub const MAX_RESIZE_EVENTS: usize = 64;

const NS: u64 = 1_000_000_000;

/// The thinner's settings. The defaults: the paper's P = 0.05, an entry lifetime of 1 s (the
/// largest handshake RTTs seen, and RFC 6298's initial RTO: docs/thinning.md says why not the
/// paper's 0.2 s), and a rate measured from the traffic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// λ: new connections per second the table is sized for; `None`: measured from the
    /// traffic, the table re-sized as it changes.
    pub rate_per_s: Option<f64>,
    /// 1/μ: how long an entry lives, SYN to ACK, in seconds (a bound on the handshake RTT).
    /// Eq. 1's holding time, and the expiry.
    pub hold_s: f64,
    /// P: the collision probability the table is sized for.
    pub collision_p: f64,
    /// The most slots a table sized from a measured rate may take.
    pub max_slots: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config { rate_per_s: None, hold_s: 1.0, collision_p: 0.05, max_slots: 1 << 20 }
    }
}

/// A setting out of range.
#[derive(Debug, Clone, PartialEq)]
pub enum ConfigError {
    /// Which setting, and the range it must lie in.
    OutOfRange { name: &'static str, range: &'static str, value: f64 },
    /// The formula asks for more slots than allowed (`--thin-max-slots`, at most [`MAX_SLOTS`]).
    TooLarge { slots: f64, max: usize },
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigError::OutOfRange { name, range, value } => write!(f, "{name} must be {range}, not {value}"),
            ConfigError::TooLarge { slots, max } => {
                write!(f, "the table would need {slots:.0} slots, more than the {max} allowed")
            }
        }
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The table's starting size from the formula (at the given rate, else at
    /// [`START_RATE_PER_S`]), after checking every setting.
    pub fn slots(&self) -> Result<usize, ConfigError> {
        let check = |name, ok: bool, range, value| {
            if ok {
                Ok(())
            } else {
                Err(ConfigError::OutOfRange { name, range, value })
            }
        };
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if let Some(rate) = self.rate_per_s {
            check("the connection rate", positive(rate), "a positive number", rate)?;
        }
        check("the entry lifetime", positive(self.hold_s), "a positive number of seconds", self.hold_s)?;
        let p = self.collision_p;
        check("the collision probability", p.is_finite() && p > 0.0 && p < 1.0, "between 0 and 1", p)?;
        let max = self.max_slots as f64;
        check("the table's largest size", (1.0..=MAX_SLOTS as f64).contains(&max), "1 to 2^26 slots", max)?;
        let slots = table_slots(self.rate_per_s.unwrap_or(START_RATE_PER_S), self.hold_s, self.collision_p);
        if slots > max {
            return Err(ConfigError::TooLarge { slots, max: self.max_slots });
        }
        Ok(slots as usize)
    }

    pub fn hold_ns(&self) -> u64 {
        ((self.hold_s * 1e9).round() as u64).max(1)
    }
}

/// The paper's Eq. 2, M = (λ/μ + z₉₉·√(λ/μ))·(1−P)/P, rounded up: λ/μ is the mean number of
/// handshakes open at once (an M/D/∞ queue: Little's law), Eq. 1's λ/μ + z₉₉·√(λ/μ) its 99th
/// percentile (Poisson, normal approximation), and (1−P)/P the slots per entry that keep the
/// chance a new entry meets an occupied slot at P. (The paper prints the root as √(λ/μ·z₉₉), a
/// typesetting slip: its Eq. 1, which Eq. 2 scales, has z₉₉·√(λ/μ).)
pub fn table_slots(rate_per_s: f64, hold_s: f64, collision_p: f64) -> f64 {
    (load::open_handshakes_model(rate_per_s, hold_s) * (1.0 - collision_p) / collision_p).ceil().max(1.0)
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
    /// Of the dropped packets, those with RST (RST+ACK without payload).
    pub dropped_rst: u64,
    /// Client SYNs that opened a connection (a retransmitted SYN of a live entry is not one):
    /// the arrivals the rate is measured from.
    pub connections: u64,
    /// Entries opened: by a client's SYN, or by a SYN/ACK whose SYN was not seen
    /// (`tracked_from_syn_ack` of them).
    pub handshakes_tracked: u64,
    pub tracked_from_syn_ack: u64,
    /// A retransmitted SYN, or the SYN/ACK, found its handshake's entry and renewed it.
    pub renewed: u64,
    /// Handshakes whose ACK was found (and kept); `late_matches` of them after their expiry.
    pub handshakes_matched: u64,
    pub late_matches: u64,
    /// Entries that expired unanswered (their ACK carried data, was not captured, or the
    /// handshake failed).
    pub handshakes_expired: u64,
    /// Handshakes that met a slot held by another live handshake, and the pure ACKs kept because
    /// they mapped to a collided slot.
    pub collisions: u64,
    pub collided_passes: u64,
    /// The most slots in use at once (stale entries are freed every lifetime).
    pub peak_occupancy: u64,
}

/// A change of the table's size to the measured rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resize {
    /// Packet time of the change, ns.
    pub at_ns: u64,
    /// The rate measured then, connections per second.
    pub rate_per_s: f64,
    pub slots: u64,
}

/// The per-packet decision, over a table of open handshakes.
#[derive(Debug, Clone)]
pub struct Thinner {
    config: Config,
    table: HandshakeTable,
    initial_slots: usize,
    hold_ns: u64,
    /// The latest packet time seen: expiry never runs backwards with the trace's timestamps.
    clock_ns: u64,
    /// When [`Thinner::tick`] next has work: the earlier of the next sweep and the next second.
    next_tick_ns: u64,
    next_sweep_ns: u64,
    /// The second of packet time being counted; `None` before the first packet.
    second: Option<u64>,
    connections_at_second: u64,
    window: RateWindow,
    /// The rate the table is sized for.
    sized_for: f64,
    peak_rate: f64,
    resizes: u64,
    resize_events: std::collections::VecDeque<Resize>,
    intervals: Intervals,
    stats: ThinStats,
}

impl Thinner {
    pub fn new(config: &Config) -> Result<Thinner, ConfigError> {
        let slots = config.slots()?;
        Ok(Thinner {
            config: *config,
            table: HandshakeTable::new(slots),
            initial_slots: slots,
            hold_ns: config.hold_ns(),
            clock_ns: 0,
            next_tick_ns: 0,
            next_sweep_ns: 0,
            second: None,
            connections_at_second: 0,
            window: RateWindow::new(),
            sized_for: config.rate_per_s.unwrap_or(START_RATE_PER_S),
            peak_rate: 0.0,
            resizes: 0,
            resize_events: std::collections::VecDeque::new(),
            intervals: Intervals::default(),
            stats: ThinStats::default(),
        })
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn slots(&self) -> usize {
        self.table.slots()
    }

    pub fn initial_slots(&self) -> usize {
        self.initial_slots
    }

    pub fn table_bytes(&self) -> usize {
        self.table.bytes()
    }

    pub fn stats(&self) -> ThinStats {
        self.stats
    }

    /// The rate the table is sized for now, connections per second.
    pub fn sized_for_rate(&self) -> f64 {
        self.sized_for
    }

    /// The connection rate over the latest minute, and the highest it reached (`None` before a
    /// whole second of packet time has passed).
    pub fn measured_rate(&self) -> Option<f64> {
        self.window.rate_per_s()
    }

    pub fn peak_rate(&self) -> f64 {
        self.peak_rate
    }

    /// How many times the table was re-sized, and the latest [`MAX_RESIZE_EVENTS`] of them.
    pub fn resizes(&self) -> (u64, Vec<Resize>) {
        (self.resizes, self.resize_events.iter().copied().collect())
    }

    /// The 5-minute intervals so far (the latest [`load::MAX_INTERVALS`], the current one
    /// closed at the latest packet time), and how many earlier ones were left out.
    pub fn intervals(&self) -> (Vec<ThinInterval>, u64) {
        let table = self.table.slots();
        (self.intervals.report(self.clock_ns, &self.stats, table, self.config.hold_s), self.intervals.omitted)
    }

    /// Whether the packet `p` (of `wire_len` bytes, at packet time `ts_ns`) is kept.
    #[inline]
    pub fn keep(&mut self, ts_ns: u64, p: &PacketSummary, wire_len: u32) -> bool {
        self.clock_ns = self.clock_ns.max(ts_ns);
        if self.clock_ns >= self.next_tick_ns {
            self.tick();
        }
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
        let flags = tcp.flags;
        if flags.syn() {
            if flags.ack() {
                // The SYN/ACK acknowledges the client's ISN + 1: the same key as the SYN's.
                let awaited = ack_hash(ip.dst, ip.src, tcp.dst_port, tcp.src_port, tcp.ack);
                self.track(awaited, false);
            } else {
                // Pseudocode 1, lines 2–4: the client's next sequence number, ISN + 1.
                let awaited = ack_hash(ip.src, ip.dst, tcp.src_port, tcp.dst_port, tcp.seq.wrapping_add(1));
                self.track(awaited, true);
            }
            return true;
        }
        // Pseudocode 1, line 17: ACK, no SYN, no FIN, no data (RST+ACK is one). Only a segment
        // read whole may go: never drop what could not be read.
        let pure = flags.ack() && !flags.fin() && tcp.payload_len == 0;
        if !pure || p.problem.is_some() || ip.fragment != Fragment::No {
            return true;
        }
        let hash = ack_hash(ip.src, ip.dst, tcp.src_port, tcp.dst_port, tcp.seq);
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
                s.dropped_rst += u64::from(flags.rst());
                false
            }
        }
    }

    /// Records the handshake awaiting the ACK of hash `awaited`, on its client's SYN (`syn`)
    /// or its server's SYN/ACK.
    fn track(&mut self, awaited: u64, syn: bool) {
        let s = &mut self.stats;
        let expires = self.clock_ns.saturating_add(self.hold_ns);
        match self.table.insert(awaited, self.clock_ns, expires) {
            Insert::New { expired } => {
                s.handshakes_tracked += 1;
                s.tracked_from_syn_ack += u64::from(!syn);
                s.connections += u64::from(syn);
                s.handshakes_expired += u64::from(expired);
            }
            Insert::Repeat => s.renewed += 1,
            // A SYN/ACK in a slot already collided may be the answer to a SYN counted there.
            Insert::Collision { already } if !syn && already => {}
            Insert::Collision { .. } => {
                s.handshakes_tracked += 1;
                s.tracked_from_syn_ack += u64::from(!syn);
                s.connections += u64::from(syn);
                s.collisions += 1;
            }
        }
        s.peak_occupancy = s.peak_occupancy.max(self.table.occupied() as u64);
    }

    /// Work due by packet time: the sweep of stale entries (every lifetime), and once a second
    /// the rate, the interval's sample of open handshakes and a re-size.
    #[cold]
    fn tick(&mut self) {
        let now = self.clock_ns;
        let second = now / NS;
        let new_second = self.second.is_some_and(|last| second > last);
        // A new second's sample counts only live entries: the stale ones go first.
        if now >= self.next_sweep_ns || new_second {
            self.sweep();
        }
        match self.second {
            None => self.connections_at_second = self.stats.connections,
            Some(last) if new_second => {
                let opened = self.stats.connections - self.connections_at_second;
                self.connections_at_second = self.stats.connections;
                self.window.push(opened, second - last - 1);
                let rate = self.window.rate_per_s().unwrap_or(0.0);
                self.peak_rate = self.peak_rate.max(rate);
                if self.config.rate_per_s.is_none() {
                    self.resize_to(rate, now);
                }
            }
            Some(_) => {}
        }
        if self.second != Some(second) {
            let (open, slots) = (self.table.occupied(), self.table.slots());
            self.intervals.second(now, &self.stats, open, slots, self.config.hold_s);
            self.second = Some(second);
        }
        self.next_tick_ns = self.next_sweep_ns.min((second + 1) * NS);
    }

    /// Re-sizes the table to the measured `rate` when it left the range the table was sized
    /// for (above it by [`GROW_ABOVE`], below it by [`SHRINK_BELOW`]), never below
    /// [`START_RATE_PER_S`] nor above the largest size allowed.
    fn resize_to(&mut self, rate: f64, now_ns: u64) {
        let grow = rate > self.sized_for * GROW_ABOVE;
        let shrink = rate < self.sized_for / SHRINK_BELOW && self.sized_for > START_RATE_PER_S;
        if !grow && !shrink {
            return;
        }
        self.sized_for = rate.max(START_RATE_PER_S);
        let c = &self.config;
        let slots = table_slots(self.sized_for, c.hold_s, c.collision_p).min(c.max_slots as f64) as usize;
        if slots == self.table.slots() {
            return;
        }
        self.table = self.table.resized(slots);
        self.resizes += 1;
        if self.resize_events.len() == MAX_RESIZE_EVENTS {
            self.resize_events.pop_front();
        }
        self.resize_events.push_back(Resize { at_ns: now_ns, rate_per_s: rate, slots: slots as u64 });
    }

    /// Frees the stale entries (a pass over the table); the next sweep is a lifetime later.
    fn sweep(&mut self) {
        self.stats.handshakes_expired += self.table.sweep(self.clock_ns);
        self.next_sweep_ns = self.clock_ns.saturating_add(self.hold_ns);
    }
}

/// The hash of a handshake's ACK: its addresses and ports (client → server) and its sequence
/// number (the client's ISN + 1). Fixed constants, so every run maps alike.
fn ack_hash(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16, seq: u32) -> u64 {
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
        u64::from(seq),
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
