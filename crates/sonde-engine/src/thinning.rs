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
    /// The settings the table was sized from.
    pub parameters: ThinParameters,
    /// The handshake table: its size and how it fared.
    pub table: ThinTable,
    /// Of the packets offered to the thinner (decoded, past the filter).
    pub seen: ThinSeen,
    /// The packets thinning dropped.
    pub dropped: ThinDropped,
    /// The TCP handshakes the table followed.
    pub handshakes: ThinHandshakes,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinParameters {
    /// λ: expected new connections per second.
    pub connection_rate_per_s: f64,
    /// 1/μ: how long a handshake holds its entry, SYN/ACK to ACK, in seconds.
    pub hold_s: f64,
    /// P: the collision probability the table is sized for.
    pub collision_probability: f64,
    /// Entries expire this long after their SYN/ACK: the longest handshake RTT expected.
    pub max_handshake_rtt_s: f64,
    /// The 99th percentile of the standard normal distribution used in the sizing.
    pub z99: f64,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ThinTable {
    /// Slots in the table.
    pub slots: u64,
    /// Memory the table takes, in bytes.
    pub bytes: u64,
    /// The most slots in use at once.
    pub peak_occupancy: u64,
    /// SYN/ACKs that met a slot held by another live handshake.
    pub collisions: u64,
    /// Pure ACKs kept because their slot was collided.
    pub collided_passes: u64,
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
    /// SYN/ACKs that opened an entry.
    pub tracked: u64,
    /// Retransmitted SYN/ACKs of a handshake already tracked.
    pub syn_ack_repeats: u64,
    /// Handshakes whose ACK was found (and kept).
    pub matched: u64,
    /// Matched after their entry's expiry, before its slot was reused.
    pub late: u64,
    /// Entries that expired unanswered (their ACK carried data, was not captured, or the
    /// handshake failed).
    pub expired: u64,
}

impl ThinningReport {
    pub fn new(thinner: &Thinner) -> ThinningReport {
        let c = thinner.config();
        let s = thinner.stats();
        let share = |part: u64, whole: u64| if whole == 0 { 0.0 } else { part as f64 / whole as f64 };
        ThinningReport {
            mode: "natra",
            parameters: ThinParameters {
                connection_rate_per_s: c.rate_per_s,
                hold_s: c.hold_s,
                collision_probability: c.collision_p,
                max_handshake_rtt_s: c.max_rtt_s,
                z99: sonde_thin::Z99,
            },
            table: ThinTable {
                slots: thinner.slots() as u64,
                bytes: thinner.table_bytes() as u64,
                peak_occupancy: s.peak_occupancy,
                collisions: s.collisions,
                collided_passes: s.collided_passes,
            },
            seen: ThinSeen { packets: s.packets, bytes: s.bytes, tcp_packets: s.tcp_packets, tcp_bytes: s.tcp_bytes },
            dropped: ThinDropped {
                packets: s.dropped_packets,
                bytes: s.dropped_bytes,
                share_of_packets: share(s.dropped_packets, s.packets),
                share_of_bytes: share(s.dropped_bytes, s.bytes),
                share_of_tcp_packets: share(s.dropped_packets, s.tcp_packets),
                share_of_tcp_bytes: share(s.dropped_bytes, s.tcp_bytes),
            },
            handshakes: ThinHandshakes {
                tracked: s.handshakes_tracked,
                syn_ack_repeats: s.syn_ack_repeats,
                matched: s.handshakes_matched,
                late: s.late_matches,
                expired: s.handshakes_expired,
            },
        }
    }

    /// One line for a person: what was dropped and how the table fared.
    pub fn human(&self) -> String {
        let (d, t, h) = (&self.dropped, &self.table, &self.handshakes);
        format!(
            "natra: dropped {} packets ({:.1} % of all, {:.1} % of TCP), {} bytes ({:.1} %); table {} slots ({} kB), peak {}, {} collisions; handshakes {} tracked, {} matched, {} expired",
            d.packets,
            100.0 * d.share_of_packets,
            100.0 * d.share_of_tcp_packets,
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
