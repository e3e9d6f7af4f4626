//! The thinning part of the run summary: the thinner's settings, its table and what it dropped.

use serde::Serialize;
use sonde_thin::Thinner;

/// What `--thin` did, for summary.json (`"thinning": null` when off) and `sonde thin --report`.
#[derive(Debug, Clone, Serialize)]
pub struct ThinningReport {
    pub mode: &'static str,
    pub parameters: ThinParameters,
    pub table: ThinTable,
    /// Of the packets offered to the thinner (decoded, past the filter).
    pub seen: ThinSeen,
    pub dropped: ThinDropped,
    pub handshakes: ThinHandshakes,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThinParameters {
    pub connection_rate_per_s: f64,
    pub hold_s: f64,
    pub collision_probability: f64,
    pub max_handshake_rtt_s: f64,
    pub z99: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThinTable {
    pub slots: u64,
    pub bytes: u64,
    pub peak_occupancy: u64,
    /// SYN/ACKs that met a slot held by another live handshake.
    pub collisions: u64,
    /// Pure ACKs kept because their slot was collided.
    pub collided_passes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThinSeen {
    pub packets: u64,
    pub bytes: u64,
    pub tcp_packets: u64,
    pub tcp_bytes: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThinDropped {
    pub packets: u64,
    pub bytes: u64,
    pub share_of_packets: f64,
    pub share_of_bytes: f64,
    pub share_of_tcp_packets: f64,
    pub share_of_tcp_bytes: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct ThinHandshakes {
    pub tracked: u64,
    pub syn_ack_repeats: u64,
    pub matched: u64,
    /// Matched after their entry's expiry, before its slot was reused.
    pub late: u64,
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
