//! The definitions' outputs as typed tables (sonde-types' [`Table`], which every format
//! renders): `definitions.tsv` (the counts), `definition_gaps.tsv`, `definition_gap_histogram.tsv`,
//! `definition_flows.tsv`, `definition_associations.tsv` and
//! `definition_association_samples.tsv`; FIDs shown as [`crate::fid`] writes them, anonymised
//! when asked.

use std::cell::RefCell;

use sonde_anon::Anonymizer;
use sonde_types::table::{Cell, Column, Decimal, Kind, Table};

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
    pub fn counts_table(&self) -> Table<'_> {
        Table::new(COUNTS, |row| self.count_rows(row, None))
    }

    /// `definitions.tsv`'s rows of the latest `intervals` intervals of each definition (by the
    /// newest packet time), at most `max_rows` of them, the latest-ending intervals first (the oldest
    /// interval shown may be cut, its lowest FIDs kept): a live view's window, whose cost does not
    /// grow with the run or its history of changes. A removed definition leaves it once its
    /// intervals are old.
    pub fn recent_counts_table(&self, intervals: u64, max_rows: usize) -> Table<'_> {
        Table::new(COUNTS, move |row| self.count_rows(row, Some((intervals.max(1), max_rows))))
    }

    /// [`Counter::counts_table`]'s text.
    pub fn write_tsv(&self, out: &mut String) {
        self.counts_table().write_tsv(out);
    }

    /// [`Counter::recent_counts_table`]'s text.
    pub fn write_tsv_recent(&self, out: &mut String, intervals: u64, max_rows: usize) {
        self.recent_counts_table(intervals, max_rows).write_tsv(out);
    }

    fn count_rows(&self, row: &mut dyn FnMut(&[Cell<'_>]), window: Option<(u64, usize)>) {
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
            let (start, end) = (Cell::Decimal(Decimal::seconds(start)), Cell::Decimal(Decimal::seconds(end)));
            let def = &self.set.defs[d];
            let version = Cell::Count(self.set.since[d]);
            let mut rows: Vec<_> = t.rows.iter().map(|(fid, traffic)| (self.shown(def, *fid), *fid, traffic)).collect();
            rows.sort_unstable_by_key(|r| (r.0, r.1));
            for (fid, _, traffic) in rows.into_iter().take(most) {
                let fid = Cell::Text(fid_text(def, fid).into());
                let (packets, bytes) = (Cell::Count(traffic.packets), Cell::Count(traffic.bytes));
                row(&[start.clone(), end.clone(), Cell::text(&def.name), version.clone(), fid, packets, bytes]);
            }
            if t.overflow.packets > 0 && t.rows.len() < most {
                let (packets, bytes) = (Cell::Count(t.overflow.packets), Cell::Count(t.overflow.bytes));
                row(&[start, end, Cell::text(&def.name), version, Cell::text("overflow"), packets, bytes]);
            }
        }
    }

    /// `definition_gaps.tsv`: per definition asking for `gap` and FID, the inter-arrival times
    /// in ms; then, per definition, the untracked packets if any.
    pub fn gaps_table(&self) -> Table<'_> {
        Table::new(GAPS, |row| {
            for (def, t) in self.set.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.gap) {
                let mut fids: Vec<_> = t.fids.iter().map(|(fid, s)| (self.shown(def, *fid), *fid, s)).collect();
                fids.sort_unstable_by_key(|f| (f.0, f.1));
                for (fid, _, s) in fids {
                    let g = &s.gaps;
                    let (name, fid, n) =
                        (Cell::text(&def.name), Cell::Text(fid_text(def, fid).into()), Cell::Count(g.n));
                    if g.n == 0 {
                        row(&[name, fid, n, Cell::Null, Cell::Null, Cell::Null, Cell::Null]);
                        continue;
                    }
                    let mean = g.sum as f64 / g.n as f64;
                    let variance = (g.sum_sq / g.n as f64 - mean * mean).max(0.0);
                    let ms_f = |ns: f64| Decimal::of_f64(ns / 1e6, 6).map_or(Cell::Null, Cell::Decimal);
                    let (min, max) = (Cell::Decimal(Decimal::ms(g.min)), Cell::Decimal(Decimal::ms(g.max)));
                    row(&[name, fid, n, min, ms_f(mean), max, ms_f(variance.sqrt())]);
                }
            }
        })
    }

    /// `definition_gap_histogram.tsv`: per definition asking for `gap`, its gaps (all FIDs) in
    /// power-of-two bins of microseconds.
    pub fn gap_histogram_table(&self) -> Table<'_> {
        Table::new(GAP_HISTOGRAM, |row| {
            for (def, t) in self.set.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.gap) {
                for (k, &n) in t.histogram.iter().enumerate().filter(|(_, n)| **n > 0) {
                    let lo_us = if k == 0 { 0 } else { 1u64 << k };
                    let (lo, hi) = (Decimal::new(lo_us, 3), Decimal::new(2u64 << k, 3));
                    row(&[Cell::text(&def.name), Cell::Decimal(lo), Cell::Decimal(hi), Cell::Count(n)]);
                }
            }
        })
    }

    /// `definition_flows.tsv`: per definition asking for `length`, each FID's flows (open ones
    /// end at their last packet), by start time.
    pub fn flows_table(&self) -> Table<'_> {
        Table::new(FLOWS, |row| {
            for (def, t) in self.set.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.length) {
                let mut flows: Vec<FidFlow> = t.flows.iter().copied().chain(t.fids.values().map(|s| s.flow)).collect();
                for f in &mut flows {
                    f.fid = self.shown(def, f.fid);
                }
                flows.sort_unstable_by_key(|f| (f.start_ns, f.fid, f.end_ns));
                for f in flows {
                    row(&[
                        Cell::text(&def.name),
                        Cell::Text(fid_text(def, f.fid).into()),
                        Cell::Decimal(Decimal::seconds(f.start_ns)),
                        Cell::Decimal(Decimal::seconds(f.end_ns)),
                        Cell::Decimal(Decimal::ms(f.end_ns - f.start_ns)),
                        Cell::Count(f.traffic.packets),
                        Cell::Count(f.traffic.bytes),
                    ]);
                }
            }
        })
    }

    /// `definition_associations.tsv`: per association, its A→B samples in ms and what became
    /// of the arms.
    pub fn associations_table(&self) -> Table<'_> {
        Table::new(ASSOCIATIONS, |row| {
            for t in self.association_totals() {
                let ms = |v: Option<u64>| v.map_or(Cell::Null, |ns| Cell::Decimal(Decimal::ms(ns)));
                let mean = t.mean_ns.and_then(|ns| Decimal::of_f64(ns / 1e6, 6)).map_or(Cell::Null, Cell::Decimal);
                row(&[
                    Cell::text(&t.name),
                    Cell::Count(t.samples),
                    ms(t.min_ns),
                    ms(t.p50_ns),
                    mean,
                    ms(t.max_ns),
                    Cell::Count(t.ambiguous),
                    Cell::Count(t.refused),
                    Cell::Count(t.expired),
                    Cell::Count(t.unanswered),
                    Cell::Count(t.samples_unwritten),
                ]);
            }
        })
    }

    /// `definition_association_samples.tsv`: per association (in the definitions' order), its
    /// samples one by one in the order taken — `n` from 1, the time of the answering packet
    /// (exact ns), the A→B gap in ms — up to the limit of [`Counter::set_written_samples`]: what
    /// a phase plot of sample n against n + 1 needs.
    pub fn association_samples_table(&self) -> Table<'_> {
        Table::new(ASSOCIATION_SAMPLES, |row| {
            for (name, samples) in self.association_samples() {
                for (n, &(ts_ns, gap_ns)) in samples.iter().enumerate() {
                    let (answered, gap) = (Decimal::new(ts_ns, 9), Decimal::ms(gap_ns));
                    row(&[Cell::text(&name), Cell::Count(n as u64 + 1), Cell::Decimal(answered), Cell::Decimal(gap)]);
                }
            }
        })
    }
}

const fn col(name: &'static str, kind: Kind) -> Column {
    Column::new(name, kind)
}

/// Each definitions file's columns (docs/definitions.md describes them).
const COUNTS: &[Column] = &[
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("definition", Kind::Label),
    col("version", Kind::Count),
    col("fid", Kind::Label),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
];
const GAPS: &[Column] = &[
    col("definition", Kind::Label),
    col("fid", Kind::Label),
    col("gaps", Kind::Count),
    col("min_ms", Kind::Duration),
    col("mean_ms", Kind::Duration),
    col("max_ms", Kind::Duration),
    col("stdev_ms", Kind::Duration),
];
const GAP_HISTOGRAM: &[Column] = &[
    col("definition", Kind::Label),
    col("bin_lo_ms", Kind::Duration),
    col("bin_hi_ms", Kind::Duration),
    col("gaps", Kind::Count),
];
const FLOWS: &[Column] = &[
    col("definition", Kind::Label),
    col("fid", Kind::Label),
    col("start", Kind::Time),
    col("end", Kind::Time),
    col("duration_ms", Kind::Duration),
    col("packets", Kind::Count),
    col("bytes", Kind::Count),
];
const ASSOCIATIONS: &[Column] = &[
    col("association", Kind::Label),
    col("samples", Kind::Count),
    col("min_ms", Kind::Duration),
    col("p50_ms", Kind::Duration),
    col("mean_ms", Kind::Duration),
    col("max_ms", Kind::Duration),
    col("ambiguous", Kind::Count),
    col("refused", Kind::Count),
    col("expired", Kind::Count),
    col("unanswered", Kind::Count),
    col("samples_unwritten", Kind::Count),
];
const ASSOCIATION_SAMPLES: &[Column] = &[
    col("association", Kind::Label),
    col("n", Kind::Count),
    col("answered", Kind::Time),
    col("gap_ms", Kind::Duration),
];
