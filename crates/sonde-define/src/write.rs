//! The definitions' TSV outputs: `definitions.tsv` (the counts), `definition_gaps.tsv`,
//! `definition_gap_histogram.tsv`, `definition_flows.tsv` and `definition_associations.tsv`;
//! FIDs shown as [`crate::fid`] writes them, anonymised when asked.

use std::cell::RefCell;
use std::fmt::Write as _;

use sonde_anon::Anonymizer;
use sonde_types::time::{seconds_6 as seconds, seconds_9};

use crate::count::{FidFlow, FidTable};
use crate::fid::{address_field, anonymized_fid, fid_text, reads_address_bits};
use crate::{Counter, Definition};

impl Counter {
    /// Writes the address parts of FIDs (keys on `ip4.src`, `ip6.dst`, or a prefix of one as
    /// `l3[12:3]`) through `anon`; rows go in the order of the FIDs shown. Refused, naming the
    /// definition, when a written FID reads other address bits (`l3[15:1]`, an address's last
    /// byte), which no anonymised value could stand for consistently.
    pub fn anonymize(&mut self, anon: Anonymizer) -> Result<(), String> {
        let writes_fids = |d: &Definition| d.measures.count || d.measures.gap || d.measures.length;
        if let Some(d) = self
            .set
            .defs
            .iter()
            .filter(|d| writes_fids(d))
            .find(|d| d.keys.iter().any(|&k| reads_address_bits(&d.patterns[k])))
        {
            return Err(format!(
                "definition `{}` keys on part of an address that --anonymize cannot map: key on the whole \
                 address or a prefix of it (`{}`)",
                d.name, d.text
            ));
        }
        self.anon = Some(RefCell::new(anon));
        Ok(())
    }

    /// The FID written for `fid` of `def`.
    fn shown(&self, def: &Definition, fid: u128) -> u128 {
        match &self.anon {
            Some(anon) if def.keys.iter().any(|&k| address_field(&def.patterns[k]).is_some()) => {
                anonymized_fid(def, fid, &mut anon.borrow_mut())
            }
            _ => fid,
        }
    }

    /// `definitions.tsv`: one row per interval, definition and FID (by interval, then the
    /// definitions' order, then FID), and an `overflow` row where a table was full.
    pub fn write_tsv(&self, out: &mut String) {
        self.write_counts(out, None);
    }

    /// `definitions.tsv`'s rows of the latest `intervals` intervals of each definition (by the
    /// newest packet time), at most `max_rows` of them, the latest-ending intervals first (the oldest
    /// interval shown may be cut, its lowest FIDs kept): a live view's window, whose cost does not
    /// grow with the run or its history of changes. A removed definition leaves it once its
    /// intervals are old.
    pub fn write_tsv_recent(&self, out: &mut String, intervals: u64, max_rows: usize) {
        self.write_counts(out, Some((intervals.max(1), max_rows)));
    }

    fn write_counts(&self, out: &mut String, window: Option<(u64, usize)>) {
        out.push_str("start\tend\tdefinition\tversion\tfid\tpackets\tbytes\n");
        let newest_ns = self.span_ns.map_or(0, |(_, last)| last);
        let span = |d: usize, i: u64| match (self.interval_ns[d], self.span_ns) {
            (Some(n), _) => (i * n, (i * n).saturating_add(n)),
            (None, Some(span)) => span,
            (None, None) => (0, 0),
        };
        // (start, definition, end, table, rows shown at most)
        let mut chosen: Vec<(u64, usize, u64, &FidTable, usize)> = Vec::new();
        match window {
            None => {
                for (d, intervals) in self.tables.iter().enumerate() {
                    for (&i, t) in intervals {
                        let (start, end) = span(d, i);
                        chosen.push((start, d, end, t, usize::MAX));
                    }
                }
            }
            Some((w, max_rows)) => {
                // Each definition's window newest first, merged by end (a long interval is as
                // recent as the short ones ending with it): the tables that fit in the budget,
                // and the first that does not, cut. Only those kept are visited.
                let mut windows: Vec<_> = self
                    .tables
                    .iter()
                    .enumerate()
                    .map(|(d, intervals)| {
                        let from = self.interval_ns[d].map_or(0, |n| (newest_ns / n).saturating_sub(w - 1));
                        intervals.range(from..).rev().peekable()
                    })
                    .collect();
                let mut newest: std::collections::BinaryHeap<(u64, std::cmp::Reverse<usize>)> = windows
                    .iter_mut()
                    .enumerate()
                    .filter_map(|(d, it)| it.peek().map(|(&i, _)| (span(d, i).1, std::cmp::Reverse(d))))
                    .collect();
                let mut left = max_rows;
                while left > 0 {
                    let Some((_, std::cmp::Reverse(d))) = newest.pop() else { break };
                    let Some((&i, t)) = windows[d].next() else { continue };
                    let (start, end) = span(d, i);
                    let most = (t.rows.len() + usize::from(t.overflow.packets > 0)).min(left);
                    left -= most;
                    chosen.push((start, d, end, t, most));
                    if let Some((&next, _)) = windows[d].peek() {
                        newest.push((span(d, next).1, std::cmp::Reverse(d)));
                    }
                }
            }
        }
        // By interval start, then definition: intervals of different lengths interleave.
        chosen.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        for (start, d, end, t, most) in chosen {
            let span = format!("{}\t{}\t", seconds(start), seconds(end));
            let def = &self.set.defs[d];
            let version = self.set.since[d];
            let mut rows: Vec<_> = t.rows.iter().map(|(fid, traffic)| (self.shown(def, *fid), *fid, traffic)).collect();
            rows.sort_unstable_by_key(|r| (r.0, r.1));
            for (fid, _, traffic) in rows.into_iter().take(most) {
                let _ = writeln!(
                    out,
                    "{span}{}\t{version}\t{}\t{}\t{}",
                    def.name,
                    fid_text(def, fid),
                    traffic.packets,
                    traffic.bytes
                );
            }
            if t.overflow.packets > 0 && t.rows.len() < most {
                let (packets, bytes) = (t.overflow.packets, t.overflow.bytes);
                let _ = writeln!(out, "{span}{}\t{version}\toverflow\t{packets}\t{bytes}", def.name);
            }
        }
    }

    /// `definition_gaps.tsv`: per definition asking for `gap` and FID, the inter-arrival times
    /// in ms; then, per definition, the untracked packets if any.
    pub fn write_gaps(&self, out: &mut String) {
        out.push_str("definition\tfid\tgaps\tmin_ms\tmean_ms\tmax_ms\tstdev_ms\n");
        for (def, t) in self.set.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.gap) {
            let mut fids: Vec<_> = t.fids.iter().map(|(fid, s)| (self.shown(def, *fid), *fid, s)).collect();
            fids.sort_unstable_by_key(|f| (f.0, f.1));
            for (fid, _, s) in fids {
                let g = &s.gaps;
                let _ = write!(out, "{}\t{}\t{}", def.name, fid_text(def, fid), g.n);
                if g.n == 0 {
                    out.push_str("\t-\t-\t-\t-\n");
                    continue;
                }
                let mean = g.sum as f64 / g.n as f64;
                let variance = (g.sum_sq / g.n as f64 - mean * mean).max(0.0);
                let ms = |ns: f64| ns / 1e6;
                let _ = writeln!(
                    out,
                    "\t{:.6}\t{:.6}\t{:.6}\t{:.6}",
                    ms(g.min as f64),
                    ms(mean),
                    ms(g.max as f64),
                    ms(variance.sqrt())
                );
            }
        }
    }

    /// `definition_gap_histogram.tsv`: per definition asking for `gap`, its gaps (all FIDs) in
    /// power-of-two bins of microseconds.
    pub fn write_gap_histogram(&self, out: &mut String) {
        out.push_str("definition\tbin_lo_ms\tbin_hi_ms\tgaps\n");
        for (def, t) in self.set.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.gap) {
            for (k, &n) in t.histogram.iter().enumerate().filter(|(_, n)| **n > 0) {
                let lo = if k == 0 { 0 } else { 1u64 << k };
                let _ = writeln!(out, "{}\t{:.3}\t{:.3}\t{n}", def.name, lo as f64 / 1e3, (2u64 << k) as f64 / 1e3);
            }
        }
    }

    /// `definition_flows.tsv`: per definition asking for `length`, each FID's flows (open ones
    /// end at their last packet), by start time.
    pub fn write_flows(&self, out: &mut String) {
        out.push_str("definition\tfid\tstart\tend\tduration_ms\tpackets\tbytes\n");
        for (def, t) in self.set.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.length) {
            let mut flows: Vec<FidFlow> = t.flows.iter().copied().chain(t.fids.values().map(|s| s.flow)).collect();
            for f in &mut flows {
                f.fid = self.shown(def, f.fid);
            }
            flows.sort_unstable_by_key(|f| (f.start_ns, f.fid, f.end_ns));
            for f in flows {
                let _ = writeln!(
                    out,
                    "{}\t{}\t{}\t{}\t{:.6}\t{}\t{}",
                    def.name,
                    fid_text(def, f.fid),
                    seconds(f.start_ns),
                    seconds(f.end_ns),
                    (f.end_ns - f.start_ns) as f64 / 1e6,
                    f.traffic.packets,
                    f.traffic.bytes
                );
            }
        }
    }

    /// `definition_associations.tsv`: per association, its A→B samples in ms and what became
    /// of the arms.
    pub fn write_associations(&self, out: &mut String) {
        out.push_str(
            "association\tsamples\tmin_ms\tp50_ms\tmean_ms\tmax_ms\tambiguous\trefused\texpired\tunanswered\t\
             samples_unwritten\n",
        );
        for t in self.association_totals() {
            let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.6}", v / 1e6));
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                t.name,
                t.samples,
                ms(t.min_ns.map(|v| v as f64)),
                ms(t.p50_ns.map(|v| v as f64)),
                ms(t.mean_ns),
                ms(t.max_ns.map(|v| v as f64)),
                t.ambiguous,
                t.refused,
                t.expired,
                t.unanswered,
                t.samples_unwritten
            );
        }
    }

    /// `definition_association_samples.tsv`: per association (in the definitions' order), its
    /// samples one by one in the order taken — `n` from 1, the time of the answering packet,
    /// the A→B gap in ms — up to the limit of [`Counter::set_written_samples`]: what a phase plot
    /// of sample n against n + 1 needs.
    pub fn write_association_samples(&self, out: &mut String) {
        out.push_str("association\tn\tanswered\tgap_ms\n");
        for (name, samples) in self.association_samples() {
            for (n, &(ts_ns, gap_ns)) in samples.iter().enumerate() {
                let _ = writeln!(out, "{name}\t{}\t{}\t{}", n + 1, seconds_9(ts_ns), ms_6(gap_ns));
            }
        }
    }
}

/// Nanoseconds as milliseconds with six decimals, exactly.
fn ms_6(ns: u64) -> String {
    format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000)
}
