//! The `count` measurement: packets and bytes per definition, flow identifier (FID) and
//! interval of packet time. Each definition keeps at most `cap` FIDs per interval; the packets
//! of the others are added to an overflow row and counted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use rustc_hash::FxHashMap;

use crate::{Anchor, Compiled, Definition, Layers, Match};

/// Packets and bytes (on the wire).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Traffic {
    pub packets: u64,
    pub bytes: u64,
}

impl Traffic {
    fn add(&mut self, bytes: u64) {
        self.packets += 1;
        self.bytes += bytes;
    }
}

/// One definition's FIDs in one interval.
#[derive(Debug, Clone, Default)]
struct FidTable {
    rows: FxHashMap<u128, Traffic>,
    overflow: Traffic,
}

/// What a definition counted over the whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefinitionTotal {
    pub name: String,
    pub text: String,
    pub traffic: Traffic,
    /// Rows written: distinct FIDs summed over the intervals.
    pub fid_rows: u64,
    /// Packets whose FID found its interval's table full (counted in the overflow row).
    pub overflow_packets: u64,
}

/// Counts the packets each definition matches. Fed in input order by the reader.
#[derive(Debug)]
pub struct Counter {
    set: Compiled,
    defs: Vec<Definition>,
    /// `None`: one interval for the whole run.
    interval_ns: Option<u64>,
    cap: usize,
    /// By definition, then interval index.
    tables: Vec<BTreeMap<u64, FidTable>>,
    matches: Vec<Match>,
    /// First and last packet times seen.
    span_ns: Option<(u64, u64)>,
}

impl Counter {
    pub fn new(defs: Vec<Definition>, interval_ns: Option<u64>, cap: usize) -> Counter {
        Counter {
            set: Compiled::new(&defs),
            tables: vec![BTreeMap::new(); defs.len()],
            defs,
            interval_ns: interval_ns.filter(|&n| n > 0),
            cap: cap.max(1),
            matches: Vec::new(),
            span_ns: None,
        }
    }

    pub fn definitions(&self) -> &[Definition] {
        &self.defs
    }

    /// Counts one packet of `wire_len` bytes at `ts_ns` for every definition it matches.
    pub fn packet(&mut self, ts_ns: u64, layers: &Layers<'_>, wire_len: u32) {
        self.span_ns = Some(self.span_ns.map_or((ts_ns, ts_ns), |(a, b)| (a.min(ts_ns), b.max(ts_ns))));
        self.set.matches(layers, &mut self.matches);
        let interval = self.interval_ns.map_or(0, |n| ts_ns / n);
        for m in &self.matches {
            let table = self.tables[m.def as usize].entry(interval).or_default();
            let full = table.rows.len() >= self.cap;
            match table.rows.get_mut(&m.fid) {
                Some(t) => t.add(u64::from(wire_len)),
                None if !full => table.rows.entry(m.fid).or_default().add(u64::from(wire_len)),
                None => table.overflow.add(u64::from(wire_len)),
            }
        }
    }

    /// Per definition: its totals.
    pub fn totals(&self) -> Vec<DefinitionTotal> {
        self.defs
            .iter()
            .zip(&self.tables)
            .map(|(d, intervals)| {
                let mut total = DefinitionTotal {
                    name: d.name.clone(),
                    text: d.text.clone(),
                    traffic: Traffic::default(),
                    fid_rows: 0,
                    overflow_packets: 0,
                };
                for t in intervals.values() {
                    for r in t.rows.values().chain([&t.overflow]) {
                        total.traffic.packets += r.packets;
                        total.traffic.bytes += r.bytes;
                    }
                    total.fid_rows += t.rows.len() as u64;
                    total.overflow_packets += t.overflow.packets;
                }
                total
            })
            .collect()
    }

    /// `definitions.tsv`: one row per interval, definition and FID (by interval, then the
    /// definitions' order, then FID), and an `overflow` row where a table was full.
    pub fn write_tsv(&self, out: &mut String) {
        out.push_str("start\tend\tdefinition\tfid\tpackets\tbytes\n");
        let mut by_interval: BTreeMap<u64, Vec<(usize, &FidTable)>> = BTreeMap::new();
        for (d, intervals) in self.tables.iter().enumerate() {
            for (i, t) in intervals {
                by_interval.entry(*i).or_default().push((d, t));
            }
        }
        for (i, tables) in by_interval {
            let (start, end) = match (self.interval_ns, self.span_ns) {
                (Some(n), _) => (i * n, (i * n).saturating_add(n)),
                (None, Some(span)) => span,
                (None, None) => (0, 0),
            };
            let span = format!("{}\t{}\t", seconds(start), seconds(end));
            for (d, t) in tables {
                let def = &self.defs[d];
                let mut rows: Vec<_> = t.rows.iter().collect();
                rows.sort_unstable_by_key(|r| r.0);
                for (fid, traffic) in rows {
                    let _ = writeln!(
                        out,
                        "{span}{}\t{}\t{}\t{}",
                        def.name,
                        fid_text(def, *fid),
                        traffic.packets,
                        traffic.bytes
                    );
                }
                if t.overflow.packets > 0 {
                    let _ = writeln!(out, "{span}{}\toverflow\t{}\t{}", def.name, t.overflow.packets, t.overflow.bytes);
                }
            }
        }
    }
}

/// A FID as text: an address when the key is an IPv4 or IPv6 address field, else a number.
fn fid_text(def: &Definition, fid: u128) -> String {
    let key = def.patterns[def.key];
    match (key.anchor, key.offset_bits, key.bits, key.mask) {
        (Anchor::Net, 96 | 128, 32, m) if m == u128::from(u32::MAX) => Ipv4Addr::from(fid as u32).to_string(),
        (Anchor::Net, 64 | 192, 128, u128::MAX) => Ipv6Addr::from(fid).to_string(),
        _ => fid.to_string(),
    }
}

/// Packet time in seconds with microseconds.
fn seconds(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000_000, ns % 1_000_000_000 / 1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_definitions;

    fn layers(frame: &[u8]) -> Layers<'_> {
        Layers { frame, l3: Some(0), l4: Some(20), payload: Some(40), meta: [4, 6, 64, 0] }
    }

    #[test]
    fn counts_per_interval_and_fid_with_a_bounded_table() {
        let defs = parse_definitions("port = ip.proto == 6 key tcp.dport\nsrc = ip.version == 4 key ip.src").unwrap();
        let mut c = Counter::new(defs, Some(1_000_000_000), 2);
        let mut frame = [0u8; 40];
        frame[12..16].copy_from_slice(&[10, 0, 0, 1]);
        for (ts, port) in [(0, 80u16), (1, 443), (2, 80), (3, 22), (1_500_000_000, 22)] {
            frame[22..24].copy_from_slice(&port.to_be_bytes());
            c.packet(ts, &layers(&frame), 100);
        }
        let mut out = String::new();
        c.write_tsv(&mut out);
        assert_eq!(
            out,
            "start\tend\tdefinition\tfid\tpackets\tbytes\n\
             0.000000\t1.000000\tport\t80\t2\t200\n\
             0.000000\t1.000000\tport\t443\t1\t100\n\
             0.000000\t1.000000\tport\toverflow\t1\t100\n\
             0.000000\t1.000000\tsrc\t10.0.0.1\t4\t400\n\
             1.000000\t2.000000\tport\t22\t1\t100\n\
             1.000000\t2.000000\tsrc\t10.0.0.1\t1\t100\n"
        );
        let totals = c.totals();
        assert_eq!(
            (totals[0].traffic, totals[0].fid_rows, totals[0].overflow_packets),
            (Traffic { packets: 5, bytes: 500 }, 3, 1)
        );
        assert_eq!(totals[1].traffic.packets, 5);
    }
}
