//! The thinning part of the run summary: the thinner's settings, its table and what it dropped.

use schemars::JsonSchema;
use serde::Serialize;
use sonde_thin::Thinner;

/// What `--thin` did, for summary.json (`"thinning": null` when off) and `sonde thin --report`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinningReport {
    /// The thinning algorithm (`natra`).
    pub mode: &'static str,
    /// The settings the table is sized from.
    pub parameters: ThinParameters,
    /// The handshake table: its size, its re-sizes and how it fared.
    pub table: ThinTable,
    /// The connection rate measured from the traffic.
    pub rate: ThinRate,
    /// Of the packets offered to the thinner (decoded, past the filter).
    pub seen: ThinSeen,
    /// The packets thinning dropped.
    pub dropped: ThinDropped,
    /// The TCP handshakes the table followed.
    pub handshakes: ThinHandshakes,
    /// Per 5-minute interval of packet time (the latest week of them): the reduction, and the
    /// open handshakes against the paper's model.
    pub intervals: Vec<ThinIntervalReport>,
    /// Earlier intervals left out of `intervals`.
    pub intervals_omitted: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinParameters {
    /// λ given (`--thin-rate`), new connections per second; null when measured from the traffic.
    pub connection_rate_per_s: Option<f64>,
    /// `given` or `measured`: where the table's rate comes from.
    pub rate_source: &'static str,
    /// 1/μ: how long an entry lives, SYN to ACK, in seconds (Eq. 1's holding time, and the expiry).
    pub hold_s: f64,
    /// P: the collision probability the table is sized for.
    pub collision_probability: f64,
    /// The most slots a table sized from a measured rate may take.
    pub max_slots: u64,
    /// The 99th percentile of the standard normal distribution used in the sizing.
    pub z99: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinTable {
    /// Slots in the table at the end.
    pub slots: u64,
    /// Memory the table takes at the end, in bytes.
    pub bytes: u64,
    /// Slots it started with.
    pub initial_slots: u64,
    /// The connection rate (per second) its size comes from, by Eq. 1–2.
    pub sized_for_rate_per_s: f64,
    /// Times it was re-sized to the measured rate.
    pub resizes: u64,
    /// The latest re-sizes (at most 64): when, at what measured rate, to how many slots.
    pub resize_events: Vec<ThinResize>,
    /// The most slots in use at once.
    pub peak_occupancy: u64,
    /// Handshakes that met a slot held by another live handshake.
    pub collisions: u64,
    /// Pure ACKs kept because their slot was collided.
    pub collided_passes: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinResize {
    /// Packet time, seconds since the epoch.
    pub at_s: f64,
    /// The connection rate measured then (per second, over the latest minute).
    pub rate_per_s: f64,
    /// The table's new size.
    pub slots: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinRate {
    /// New connections per second over the latest minute of packet time (null before a whole
    /// second has passed).
    pub latest_per_s: Option<f64>,
    /// The highest rate over a minute seen.
    pub peak_per_s: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinSeen {
    /// Packets offered.
    pub packets: u64,
    /// Bytes (on the wire) offered.
    pub bytes: u64,
    /// TCP packets offered (a TCP header cut short included).
    pub tcp_packets: u64,
    /// Bytes of the TCP packets offered.
    pub tcp_bytes: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinDropped {
    /// Packets dropped.
    pub packets: u64,
    /// Bytes (on the wire) dropped.
    pub bytes: u64,
    /// Of the packets dropped, those with RST (RST+ACK without payload).
    pub rst_packets: u64,
    /// Dropped packets ÷ packets seen (0 to 1).
    pub share_of_packets: f64,
    /// Dropped bytes ÷ bytes seen (0 to 1).
    pub share_of_bytes: f64,
    /// Dropped packets ÷ TCP packets seen (0 to 1).
    pub share_of_tcp_packets: f64,
    /// Dropped bytes ÷ TCP bytes seen (0 to 1).
    pub share_of_tcp_bytes: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinHandshakes {
    /// Client SYNs that opened a connection (the arrivals the rate is measured from).
    pub connections: u64,
    /// Entries opened, by a SYN or by a SYN/ACK whose SYN was not seen.
    pub tracked: u64,
    /// Entries a SYN/ACK opened (its SYN not seen).
    pub from_syn_ack: u64,
    /// A SYN/ACK or a retransmitted SYN that found its entry and renewed its lifetime.
    pub renewed: u64,
    /// Handshakes whose ACK was found (and kept).
    pub matched: u64,
    /// Matched after their entry's expiry, before it was freed.
    pub late: u64,
    /// Entries that expired unanswered (their ACK carried data, was not captured, came later
    /// than the lifetime, or the handshake failed).
    pub expired: u64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinIntervalReport {
    /// Start, seconds since the epoch (a multiple of 300).
    pub start_s: u64,
    /// Seconds of packet time it covers (a trace's first and last intervals are partial).
    pub span_s: f64,
    /// Packets offered.
    pub packets: u64,
    /// TCP packets offered.
    pub tcp_packets: u64,
    /// Packets dropped.
    pub dropped_packets: u64,
    /// Bytes (on the wire) dropped.
    pub dropped_bytes: u64,
    /// Dropped packets ÷ packets (0 to 1).
    pub share_of_packets: f64,
    /// Connections that opened (client SYNs of new handshakes).
    pub connections: u64,
    /// Connections per second of `span_s`.
    pub rate_per_s: f64,
    /// Eq. 1's K at that rate: the 99th percentile of open handshakes the model expects.
    pub open_model: f64,
    /// Handshakes open, sampled each second: their 99th percentile (nearest rank).
    pub open_p99: u32,
    /// The largest of those samples.
    pub open_max: u32,
    /// Table slots at the interval's end.
    pub slots: u64,
}

impl ThinningReport {
    pub fn new(thinner: &Thinner) -> ThinningReport {
        let c = thinner.config();
        let s = thinner.stats();
        let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
        let (resizes, events) = thinner.resizes();
        let (intervals, intervals_omitted) = thinner.intervals();
        ThinningReport {
            mode: "natra",
            parameters: ThinParameters {
                connection_rate_per_s: c.rate_per_s,
                rate_source: if c.rate_per_s.is_some() { "given" } else { "measured" },
                hold_s: c.hold_s,
                collision_probability: c.collision_p,
                max_slots: c.max_slots as u64,
                z99: sonde_thin::Z99,
            },
            table: ThinTable {
                slots: thinner.slots() as u64,
                bytes: thinner.table_bytes() as u64,
                initial_slots: thinner.initial_slots() as u64,
                sized_for_rate_per_s: thinner.sized_for_rate(),
                resizes,
                resize_events: events
                    .iter()
                    .map(|e| ThinResize { at_s: e.at_ns as f64 / 1e9, rate_per_s: e.rate_per_s, slots: e.slots })
                    .collect(),
                peak_occupancy: s.peak_occupancy,
                collisions: s.collisions,
                collided_passes: s.collided_passes,
            },
            rate: ThinRate { latest_per_s: thinner.measured_rate(), peak_per_s: thinner.peak_rate() },
            seen: ThinSeen { packets: s.packets, bytes: s.bytes, tcp_packets: s.tcp_packets, tcp_bytes: s.tcp_bytes },
            dropped: ThinDropped {
                packets: s.dropped_packets,
                bytes: s.dropped_bytes,
                rst_packets: s.dropped_rst,
                share_of_packets: share(s.dropped_packets, s.packets),
                share_of_bytes: share(s.dropped_bytes, s.bytes),
                share_of_tcp_packets: share(s.dropped_packets, s.tcp_packets),
                share_of_tcp_bytes: share(s.dropped_bytes, s.tcp_bytes),
            },
            handshakes: ThinHandshakes {
                connections: s.connections,
                tracked: s.handshakes_tracked,
                from_syn_ack: s.tracked_from_syn_ack,
                renewed: s.renewed,
                matched: s.handshakes_matched,
                late: s.late_matches,
                expired: s.handshakes_expired,
            },
            intervals: intervals
                .iter()
                .map(|i| ThinIntervalReport {
                    start_s: i.start_s,
                    span_s: i.span_s,
                    packets: i.packets,
                    tcp_packets: i.tcp_packets,
                    dropped_packets: i.dropped_packets,
                    dropped_bytes: i.dropped_bytes,
                    share_of_packets: share(i.dropped_packets, i.packets),
                    connections: i.connections,
                    rate_per_s: i.rate_per_s,
                    open_model: i.open_model,
                    open_p99: i.open_p99,
                    open_max: i.open_max,
                    slots: i.slots,
                })
                .collect(),
            intervals_omitted,
        }
    }

    /// One line for a person: what was dropped and how the table fared.
    pub fn human(&self) -> String {
        let (d, t, h) = (&self.dropped, &self.table, &self.handshakes);
        let sizing = match self.parameters.connection_rate_per_s {
            Some(rate) => format!("sized for {rate} conn/s"),
            None => format!(
                "sized for {:.0} conn/s measured, {} resizes from {} slots",
                t.sized_for_rate_per_s, t.resizes, t.initial_slots
            ),
        };
        format!(
            "natra: dropped {} packets ({:.1} % of all, {:.1} % of TCP; {} RST+ACK), {} bytes ({:.1} %); table {} slots ({} kB, {sizing}), peak {}, {} collisions; handshakes {} tracked, {} matched, {} expired",
            d.packets,
            100.0 * d.share_of_packets,
            100.0 * d.share_of_tcp_packets,
            d.rst_packets,
            d.bytes,
            100.0 * d.share_of_bytes,
            t.slots,
            t.bytes / 1000,
            t.peak_occupancy,
            t.collisions,
            h.tracked,
            h.matched,
            h.expired
        )
    }
}
