//! Packets and bytes: what every counter of the run adds up ([`Traffic`]), and one row of
//! `intervals.tsv` ([`TrafficRow`]).

use std::borrow::Cow;

use serde::Serialize;

/// Packets and bytes (original lengths on the wire, or IP lengths where the counter says so)
/// of one kind. Plain `Copy` data: cheap to snapshot and to add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Traffic {
    /// Packets.
    pub packets: u64,
    /// Bytes (original lengths on the wire, unless the counter says otherwise).
    pub bytes: u64,
}

impl Traffic {
    /// Counts one packet of `bytes`.
    #[inline]
    pub fn add(&mut self, bytes: u64) {
        self.packets += 1;
        self.bytes += bytes;
    }

    pub fn merge(&mut self, other: &Traffic) {
        self.packets += other.packets;
        self.bytes += other.bytes;
    }
}

/// One row of `intervals.tsv`: a protocol's traffic and flows in one direction in one
/// interval, as the file and the HTTP API give it. `proto` and `net` are the names of
/// [`crate::Proto`] and [`crate::Net`]: borrowed from them for the rows sonde makes (a row
/// costs no allocation), owned when a caller builds a row from text.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TrafficRow {
    pub proto: Cow<'static, str>,
    pub net: Cow<'static, str>,
    pub packets: u64,
    pub bytes: u64,
    pub flows_opened: u64,
    pub flows_closed: u64,
    /// Flows open at some time in the interval.
    pub flows_active: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds_and_merges() {
        let mut a = Traffic::default();
        a.add(60);
        a.add(1500);
        let mut b = Traffic { packets: 1, bytes: 40 };
        b.merge(&a);
        assert_eq!(b, Traffic { packets: 3, bytes: 1600 });
    }

    #[test]
    fn serialises_as_the_summary_writes_it() {
        let t = Traffic { packets: 2, bytes: 120 };
        assert_eq!(serde_json::to_string(&t).unwrap(), r#"{"packets":2,"bytes":120}"#);
    }
}
