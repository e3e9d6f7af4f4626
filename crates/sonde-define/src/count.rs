//! The measurements of the definitions, per flow identifier (FID):
//! - `count`: packets and bytes per interval of packet time (the definition's `every`, else the
//!   run's interval); at most `cap` FIDs per interval, the others' packets in an overflow row;
//! - `gap`: inter-arrival times (count, min, mean, max, standard deviation) and a histogram
//!   per definition;
//! - `length`: flows of packets no more than `idle` apart: start, end, packets, bytes.
//!
//! `gap` and `length` follow at most `cap` FIDs per definition; packets of the others are
//! counted as untracked.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use sonde_anon::Anonymizer;

use rustc_hash::FxHashMap;
use sonde_types::time::seconds_6;
pub use sonde_types::Traffic;

use crate::assoc::{answer, arm, Armed, AssociationTotal};
use crate::gaps::{add_gap, Gaps, GAP_BINS};
use crate::{
    Anchor, Change, ChangeError, ChangeOutcome, Compiled, Definition, Layers, Match, Matcher, Pattern, ScheduledChange,
};

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
    /// Packets `gap` and `length` did not follow (their table of FIDs was full).
    pub untracked_packets: u64,
    /// An association (its figures are in [`Counter::association_totals`]).
    pub association: bool,
    /// The set's version when the definition was added (1: the starting file).
    pub version: u64,
    /// Removed or replaced during the run (its figures cover the time before).
    pub retired: bool,
}

/// A FID's flow (`length`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FidFlow {
    pub fid: u128,
    pub start_ns: u64,
    pub end_ns: u64,
    pub traffic: Traffic,
}

/// What `gap` and `length` keep per FID.
#[derive(Debug, Clone, Copy)]
struct FidState {
    last_ns: u64,
    gaps: Gaps,
    flow: FidFlow,
}

/// One definition's `gap` and `length` state.
#[derive(Debug, Clone)]
struct Tracked {
    fids: FxHashMap<u128, FidState>,
    untracked_packets: u64,
    flows: Vec<FidFlow>,
    histogram: [u64; GAP_BINS],
}

/// What a change to the set means for the measurements: a slot to start, one whose
/// association stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetChange {
    pub added: Option<usize>,
    pub retired: Option<usize>,
}

/// The active slots of `defs`, compiled (the tree only needs their patterns).
fn compile(defs: &[Definition], active: &[bool]) -> Arc<Matcher> {
    let slots: Vec<u32> = (0..defs.len()).filter(|&i| active[i]).map(|i| i as u32).collect();
    let patterns: Vec<Definition> = slots
        .iter()
        .map(|&i| {
            let mut d = defs[i as usize].clone();
            d.assoc = None;
            d
        })
        .collect();
    Matcher::new(Compiled::new(&patterns), slots)
}

/// Counts the packets each definition matches. Fed in input order by the reader.
#[derive(Debug)]
pub struct Counter {
    matcher: Arc<Matcher>,
    /// Every definition the run has had, in the order added ("slots"); a removed or replaced
    /// one stays here, inactive, with what it counted.
    defs: Vec<Definition>,
    active: Vec<bool>,
    /// The set's version when each slot was added (1: the file the run started with).
    since: Vec<u64>,
    version: u64,
    run_interval_ns: Option<u64>,
    /// Changes still to apply, by packet time (earliest last), and what became of the others.
    schedule: Vec<ScheduledChange>,
    log: Vec<ChangeOutcome>,
    /// Per definition: its interval; `None`, one interval for the whole run.
    interval_ns: Vec<Option<u64>>,
    cap: usize,
    /// By definition, then interval index.
    tables: Vec<BTreeMap<u64, FidTable>>,
    tracked: Vec<Tracked>,
    /// Per definition: every packet it matched.
    matched: Vec<Traffic>,
    armed: Vec<Armed>,
    matches: Vec<Match>,
    /// First and last packet times seen.
    span_ns: Option<(u64, u64)>,
    /// Shows the FIDs' address parts anonymised (a cell: writing takes `&self`).
    anon: Option<RefCell<Anonymizer>>,
}

impl Counter {
    /// `interval_ns` is the run's interval, for definitions without their own (`every`).
    pub fn new(defs: Vec<Definition>, interval_ns: Option<u64>, cap: usize) -> Counter {
        let n = defs.len();
        let active = vec![true; n];
        let mut counter = Counter {
            matcher: compile(&defs, &active),
            active,
            since: vec![1; n],
            version: 1,
            run_interval_ns: interval_ns,
            schedule: Vec::new(),
            log: Vec::new(),
            tables: Vec::new(),
            tracked: Vec::new(),
            matched: Vec::new(),
            armed: Vec::new(),
            interval_ns: Vec::new(),
            defs,
            cap: cap.max(1),
            matches: Vec::new(),
            span_ns: None,
            anon: None,
        };
        for slot in 0..n {
            counter.push_state(slot);
        }
        counter
    }

    /// Counts one packet of `wire_len` bytes at `ts_ns` for every definition it matches; the
    /// changes scheduled at or before its time are applied first.
    pub fn packet(&mut self, ts_ns: u64, layers: &Layers<'_>, wire_len: u32) {
        while let Some(change) = self.next_due(ts_ns) {
            self.settle(change);
        }
        self.observe(ts_ns);
        let mut matches = std::mem::take(&mut self.matches);
        self.matcher.matches(layers, &mut matches);
        self.count(ts_ns, wire_len, &matches);
        self.matches = matches;
    }

    /// Writes the address parts of FIDs (keys on `ip4.src`, `ip6.dst`, or a prefix of one as
    /// `l3[12:3]`) through `anon`; rows go in the order of the FIDs shown. Refused, naming the
    /// definition, when a written FID reads other address bits (`l3[15:1]`, an address's last
    /// byte), which no anonymised value could stand for consistently.
    pub fn anonymize(&mut self, anon: Anonymizer) -> Result<(), String> {
        let writes_fids = |d: &Definition| d.measures.count || d.measures.gap || d.measures.length;
        if let Some(d) = self
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

    /// The active definitions, compiled: what [`Counter::count`] expects matches from.
    pub fn matcher(&self) -> Arc<Matcher> {
        Arc::clone(&self.matcher)
    }

    /// Notes a packet's time (the span of the intervals of definitions without one); every
    /// packet, matched or not, in input order.
    pub fn observe(&mut self, ts_ns: u64) {
        self.span_ns = Some(self.span_ns.map_or((ts_ns, ts_ns), |(a, b)| (a.min(ts_ns), b.max(ts_ns))));
    }

    /// Applies the next scheduled change due at `ts_ns` to the set — its version and
    /// [`Counter::matcher`] — logging what became of it; returns an accepted one, for
    /// [`Counter::settle`] when the measurements reach this packet.
    pub fn next_due(&mut self, ts_ns: u64) -> Option<SetChange> {
        while self.schedule.last().is_some_and(|c| c.at_ns <= ts_ns) {
            let c = self.schedule.pop().expect("checked");
            if let Ok(change) = self.change_now(c.at_ns, c.expected_version, c.change) {
                return Some(change);
            }
        }
        None
    }

    /// Applies `change` to the set at once (an operator's edit, at packet time `at_ns`), logged
    /// as a scheduled change is; an accepted one is for [`Counter::settle`] when the
    /// measurements reach the next packet.
    pub fn change_now(&mut self, at_ns: u64, expected_version: u64, change: Change) -> Result<SetChange, ChangeError> {
        let result = self.change_set(expected_version, &change);
        let outcome = result.as_ref().map(|_| self.version).map_err(Clone::clone);
        self.log.push(ChangeOutcome { at_ns, change, result: outcome });
        result
    }

    /// Measures one packet of `wire_len` bytes at `ts_ns` that matched `matches` (from
    /// [`Counter::matcher`], in slot order). Packets come in input order, every change settled
    /// before the first packet after it.
    pub fn count(&mut self, ts_ns: u64, wire_len: u32, matches: &[Match]) {
        let bytes = u64::from(wire_len);
        for m in matches {
            let d = m.def as usize;
            let def = &self.defs[d];
            self.matched[d].add(bytes);
            if def.measures.count {
                let interval = self.interval_ns[d].map_or(0, |n| ts_ns / n);
                let table = self.tables[d].entry(interval).or_default();
                let full = table.rows.len() >= self.cap;
                match table.rows.get_mut(&m.fid) {
                    Some(t) => t.add(bytes),
                    None if !full => table.rows.entry(m.fid).or_default().add(bytes),
                    None => table.overflow.add(bytes),
                }
            }
            if def.measures.gap || def.measures.length {
                track(&mut self.tracked[d], self.cap, def.idle_ns, m.fid, ts_ns, bytes);
            }
        }
        // Answers first, then arms: a packet that is both (data carrying an ACK) answers the
        // other direction's arm before it arms its own.
        for a in &mut self.armed {
            let to = a.to;
            for m in matches.iter().filter(|m| m.def as usize == to) {
                answer(a, m.fid, ts_ns);
            }
            let from = a.from;
            for m in matches.iter().filter(|m| m.def as usize == from) {
                arm(a, m.fid, ts_ns);
            }
        }
    }

    /// Changes to apply when the packets reach their times (a trace's stand-in for an
    /// operator's edits).
    /// Changes at the same time apply in the order given.
    pub fn schedule(&mut self, changes: Vec<ScheduledChange>) {
        let mut changes: Vec<(usize, ScheduledChange)> = changes.into_iter().enumerate().collect();
        changes.sort_by_key(|(i, c)| std::cmp::Reverse((c.at_ns, *i)));
        self.schedule = changes.into_iter().map(|(_, c)| c).collect();
    }

    /// The set's version: 1 for the definitions the run started with, one more per change.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// What became of each scheduled change.
    pub fn change_log(&self) -> &[ChangeOutcome] {
        &self.log
    }

    /// Applies `change`, made against version `expected_version`: validated first, then
    /// swapped in whole; definitions it leaves alone keep counting without a gap. Returns the
    /// new version.
    pub fn apply(&mut self, expected_version: u64, change: &Change) -> Result<u64, ChangeError> {
        let change = self.change_set(expected_version, change)?;
        self.settle(change);
        Ok(self.version)
    }

    /// The set's half of [`Counter::apply`]: the definitions, their version and the matcher.
    fn change_set(&mut self, expected_version: u64, change: &Change) -> Result<SetChange, ChangeError> {
        if expected_version != self.version {
            return Err(ChangeError::Conflict { expected: expected_version, current: self.version });
        }
        let active: Vec<usize> = (0..self.defs.len()).filter(|&i| self.active[i]).collect();
        let find = |name: &str| active.iter().copied().find(|&i| self.defs[i].name == name);
        let (retire, added) = match change {
            Change::Remove(name) => {
                let slot = find(name).ok_or_else(|| ChangeError::Unknown(name.clone()))?;
                (Some(slot), None)
            }
            Change::Add(line) | Change::Replace(line) => {
                let earlier: Vec<Definition> = active.iter().map(|&i| self.defs[i].clone()).collect();
                let mut def = crate::parse_definition_among(line, &earlier).map_err(ChangeError::Invalid)?;
                if let Some(a) = def.assoc.as_mut() {
                    (a.from, a.to) = (active[a.from], active[a.to]);
                }
                let existing = find(&def.name);
                match (change, existing) {
                    (Change::Add(_), Some(_)) => return Err(ChangeError::Exists(def.name)),
                    (Change::Replace(_), None) => return Err(ChangeError::Unknown(def.name)),
                    _ => (existing, Some(def)),
                }
            }
        };
        if let Some(slot) = retire {
            let name = &self.defs[slot].name;
            let user = active
                .iter()
                .copied()
                .find(|&i| i != slot && self.defs[i].assoc.as_ref().is_some_and(|a| a.from == slot || a.to == slot));
            if let Some(u) = user {
                return Err(ChangeError::InUse { name: name.clone(), by: self.defs[u].name.clone() });
            }
            self.active[slot] = false;
        }
        self.version += 1;
        let added = added.map(|def| {
            self.active.push(true);
            self.since.push(self.version);
            self.defs.push(def);
            self.defs.len() - 1
        });
        self.matcher = compile(&self.defs, &self.active);
        Ok(SetChange { added, retired: retire })
    }

    /// The measurements' half of a change: state for the added definition, none any more for
    /// the arms of a retired association.
    pub fn settle(&mut self, change: SetChange) {
        if let Some(slot) = change.retired {
            self.armed.retain(|a| a.def != slot);
        }
        if let Some(slot) = change.added {
            debug_assert_eq!(slot, self.tables.len(), "changes settle in order");
            self.push_state(slot);
        }
    }

    /// Empty measurement state for slot `slot` (the next one).
    fn push_state(&mut self, slot: usize) {
        let def = &self.defs[slot];
        self.tables.push(BTreeMap::new());
        self.tracked.push(Tracked {
            fids: FxHashMap::default(),
            untracked_packets: 0,
            flows: Vec::new(),
            histogram: [0; GAP_BINS],
        });
        self.matched.push(Traffic::default());
        self.interval_ns.push(def.every_ns.or(self.run_interval_ns).filter(|&n| n > 0));
        if let Some(a) = &def.assoc {
            self.armed.push(Armed::new(slot, a));
        }
    }

    /// `definition_associations.tsv`: per association, its A→B samples in ms and what became
    /// of the arms.
    pub fn write_associations(&self, out: &mut String) {
        out.push_str(
            "association\tsamples\tmin_ms\tp50_ms\tmean_ms\tmax_ms\tambiguous\trefused\texpired\tunanswered\n",
        );
        for t in self.association_totals() {
            let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.6}", v / 1e6));
            let _ = writeln!(
                out,
                "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
                t.name,
                t.samples,
                ms(t.min_ns.map(|v| v as f64)),
                ms(t.p50_ns.map(|v| v as f64)),
                ms(t.mean_ns),
                ms(t.max_ns.map(|v| v as f64)),
                t.ambiguous,
                t.refused,
                t.expired,
                t.unanswered
            );
        }
    }

    /// Per association: its latest samples (time answered, A→B gap, in ns), oldest first, at
    /// most [`crate::assoc::RECENT_SAMPLES`].
    pub fn recent_samples(&self) -> Vec<(String, Vec<(u64, u64)>)> {
        self.armed.iter().map(|a| (self.defs[a.def].name.clone(), a.recent.iter().copied().collect())).collect()
    }

    /// Per association: its samples and counts.
    pub fn association_totals(&self) -> Vec<AssociationTotal> {
        self.armed
            .iter()
            .map(|a| {
                let d = &self.defs[a.def];
                let g = &a.samples;
                let known = g.n > 0;
                AssociationTotal {
                    name: d.name.clone(),
                    text: d.text.clone(),
                    samples: g.n,
                    min_ns: known.then_some(g.min),
                    p50_ns: a.dist.percentile(50),
                    mean_ns: known.then(|| g.sum as f64 / g.n as f64),
                    max_ns: known.then_some(g.max),
                    ambiguous: a.ambiguous,
                    refused: a.refused,
                    expired: a.expired,
                    unanswered: (a.arms.len() + a.ranged_count) as u64,
                }
            })
            .collect()
    }

    /// `definition_gaps.tsv`: per definition asking for `gap` and FID, the inter-arrival times
    /// in ms; then, per definition, the untracked packets if any.
    pub fn write_gaps(&self, out: &mut String) {
        out.push_str("definition\tfid\tgaps\tmin_ms\tmean_ms\tmax_ms\tstdev_ms\n");
        for (def, t) in self.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.gap) {
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
        for (def, t) in self.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.gap) {
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
        for (def, t) in self.defs.iter().zip(&self.tracked).filter(|(d, _)| d.measures.length) {
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
                    seconds_6(f.start_ns),
                    seconds_6(f.end_ns),
                    (f.end_ns - f.start_ns) as f64 / 1e6,
                    f.traffic.packets,
                    f.traffic.bytes
                );
            }
        }
    }

    /// Whether any definition asks for `gap` / `length`, and whether there are associations.
    pub fn wants(&self) -> (bool, bool, bool) {
        let any = |f: fn(&Definition) -> bool| self.defs.iter().any(f);
        (any(|d| d.measures.gap), any(|d| d.measures.length), !self.armed.is_empty())
    }

    /// Per definition: its totals.
    pub fn totals(&self) -> Vec<DefinitionTotal> {
        // A definition just added has no measurement state until the counts reach the packet
        // it starts at: it is listed, with nothing counted.
        (0..self.defs.len())
            .map(|i| {
                let d = &self.defs[i];
                let mut total = DefinitionTotal {
                    name: d.name.clone(),
                    text: d.text.clone(),
                    traffic: self.matched.get(i).copied().unwrap_or_default(),
                    fid_rows: 0,
                    overflow_packets: 0,
                    untracked_packets: self.tracked.get(i).map_or(0, |t| t.untracked_packets),
                    association: d.assoc.is_some(),
                    version: self.since[i],
                    retired: !self.active[i],
                };
                for t in self.tables.get(i).into_iter().flat_map(BTreeMap::values) {
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
        out.push_str("start\tend\tdefinition\tversion\tfid\tpackets\tbytes\n");
        // By interval start, then definition: intervals of different lengths interleave.
        let mut by_start: BTreeMap<u64, Vec<(usize, u64, &FidTable)>> = BTreeMap::new();
        for (d, intervals) in self.tables.iter().enumerate() {
            for (i, t) in intervals {
                let (start, end) = match (self.interval_ns[d], self.span_ns) {
                    (Some(n), _) => (i * n, (i * n).saturating_add(n)),
                    (None, Some(span)) => span,
                    (None, None) => (0, 0),
                };
                by_start.entry(start).or_default().push((d, end, t));
            }
        }
        for (start, tables) in by_start {
            for (d, end, t) in tables {
                let span = format!("{}\t{}\t", seconds_6(start), seconds_6(end));
                let def = &self.defs[d];
                let mut rows: Vec<_> =
                    t.rows.iter().map(|(fid, traffic)| (self.shown(def, *fid), *fid, traffic)).collect();
                rows.sort_unstable_by_key(|r| (r.0, r.1));
                for (fid, _, traffic) in rows {
                    let _ = writeln!(
                        out,
                        "{span}{}\t{}\t{}\t{}\t{}",
                        def.name,
                        self.since[d],
                        fid_text(def, fid),
                        traffic.packets,
                        traffic.bytes
                    );
                }
                if t.overflow.packets > 0 {
                    let (packets, bytes) = (t.overflow.packets, t.overflow.bytes);
                    let _ = writeln!(out, "{span}{}\t{}\toverflow\t{packets}\t{bytes}", def.name, self.since[d]);
                }
            }
        }
    }
}

/// Adds a packet of `fid` to its gap statistics and its flow (`length`).
fn track(t: &mut Tracked, cap: usize, idle_ns: u64, fid: u128, ts_ns: u64, bytes: u64) {
    let full = t.fids.len() >= cap;
    let fresh = FidFlow { fid, start_ns: ts_ns, end_ns: ts_ns, traffic: Traffic { packets: 1, bytes } };
    let state = match t.fids.get_mut(&fid) {
        Some(s) => s,
        None if !full => {
            t.fids.insert(fid, FidState { last_ns: ts_ns, gaps: Gaps::default(), flow: fresh });
            return;
        }
        None => {
            t.untracked_packets += 1;
            return;
        }
    };
    // A trace whose time steps back gives a gap of 0, not a huge one.
    let gap = ts_ns.saturating_sub(state.last_ns);
    add_gap(&mut state.gaps, &mut t.histogram, gap);
    state.last_ns = state.last_ns.max(ts_ns);
    if gap > idle_ns {
        t.flows.push(state.flow);
        state.flow = fresh;
    } else {
        state.flow.end_ns = state.flow.end_ns.max(ts_ns);
        state.flow.traffic.add(bytes);
    }
}

/// A FID's key parts: each part's pattern and value.
fn key_parts(def: &Definition, fid: u128) -> Vec<(Pattern, u128)> {
    let mut rest_bits: u32 = def.keys.iter().map(|&k| def.patterns[k].bits).sum();
    def.keys
        .iter()
        .map(|&k| {
            let p = def.patterns[k];
            rest_bits -= p.bits;
            let value = if rest_bits >= 128 { 0 } else { (fid >> rest_bits) & Pattern::full_mask(p.bits) };
            (p, value)
        })
        .collect()
}

/// The address fields of a network header: (offset in bits, width, family). The IPv4 ones
/// lie inside the IPv6 ones' bytes; a definition's preconditions say which family it reads.
const ADDRESS_FIELDS: [(u32, u32, u8); 4] = [(96, 32, 4), (128, 32, 4), (64, 128, 6), (192, 128, 6)];

/// The address field a key part is, or is a prefix of: (its width, the family).
fn address_field(p: &Pattern) -> Option<(u32, u8)> {
    if p.anchor != Anchor::Net {
        return None;
    }
    ADDRESS_FIELDS
        .iter()
        .find(|&&(at, width, _)| p.offset_bits == at && p.bits <= width)
        .map(|&(_, width, family)| (width, family))
}

/// Whether a key part reads address bits without being an address or a prefix of one (its
/// value could not be anonymised consistently).
fn reads_address_bits(p: &Pattern) -> bool {
    let (start, end) = (p.offset_bits, p.offset_bits + p.bits);
    p.anchor == Anchor::Net && start < 320 && end > 64 && address_field(p).is_none()
}

/// A FID as text: each key part an address when it is a whole IPv4 or IPv6 address field,
/// else a number; parts joined by `|`.
fn fid_text(def: &Definition, fid: u128) -> String {
    let parts: Vec<String> = key_parts(def, fid)
        .into_iter()
        .map(|(p, value)| match address_field(&p) {
            Some((32, _)) if p.bits == 32 => Ipv4Addr::from(value as u32).to_string(),
            Some((128, _)) if p.bits == 128 => Ipv6Addr::from(value).to_string(),
            _ => value.to_string(),
        })
        .collect();
    parts.join("|")
}

/// `fid` with each address part anonymised: a whole address as an address, a prefix as the
/// same bits of its anonymised address (under Crypto-PAn, a /24 key stays the /24 of the
/// anonymised addresses).
fn anonymized_fid(def: &Definition, fid: u128, anon: &mut Anonymizer) -> u128 {
    key_parts(def, fid).into_iter().fold(0u128, |out, (p, value)| {
        let shown = match address_field(&p) {
            Some((width, family)) => {
                let unused = width - p.bits;
                let address = value << unused;
                let mapped = match family {
                    4 => u128::from(u32::from_be_bytes(anon.ipv4((address as u32).to_be_bytes()))),
                    _ => u128::from_be_bytes(anon.ipv6(address.to_be_bytes())),
                };
                (mapped >> unused) & p.mask
            }
            None => value,
        };
        let high = if p.bits >= 128 { 0 } else { out << p.bits };
        high | shown
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_definitions;

    fn layers(frame: &[u8]) -> Layers<'_> {
        Layers { frame, l3: Some(0), l4: Some(20), payload: Some(40), meta: [4, 6, 64, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0] }
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
            "start\tend\tdefinition\tversion\tfid\tpackets\tbytes\n\
             0.000000\t1.000000\tport\t1\t80\t2\t200\n\
             0.000000\t1.000000\tport\t1\t443\t1\t100\n\
             0.000000\t1.000000\tport\t1\toverflow\t1\t100\n\
             0.000000\t1.000000\tsrc\t1\t10.0.0.1\t4\t400\n\
             1.000000\t2.000000\tport\t1\t22\t1\t100\n\
             1.000000\t2.000000\tsrc\t1\t10.0.0.1\t1\t100\n"
        );
        let totals = c.totals();
        assert_eq!(
            (totals[0].traffic, totals[0].fid_rows, totals[0].overflow_packets),
            (Traffic { packets: 5, bytes: 500 }, 3, 1)
        );
        assert_eq!(totals[1].traffic.packets, 5);
    }

    #[test]
    fn changes_are_versioned_and_leave_the_other_definitions_counting() {
        let defs = parse_definitions("port = ip.proto == 6 key tcp.dport\nall = ip.version == 4").unwrap();
        let mut c = Counter::new(defs, None, 100);
        let mut frame = [0u8; 40];
        frame[22..24].copy_from_slice(&80u16.to_be_bytes());
        c.schedule(vec![
            ScheduledChange { at_ns: 10, expected_version: 1, change: Change::Add("web = tcp.dport == 80".into()) },
            // Made against version 1 too: someone else's change came first.
            ScheduledChange { at_ns: 11, expected_version: 1, change: Change::Remove("port".into()) },
            ScheduledChange { at_ns: 20, expected_version: 2, change: Change::Replace("port = tcp.sport < 10".into()) },
            ScheduledChange { at_ns: 30, expected_version: 3, change: Change::Add("bad = tcp.dprt == 1".into()) },
            ScheduledChange { at_ns: 30, expected_version: 3, change: Change::Remove("nothing".into()) },
        ]);
        for ts in [0, 5, 10, 15, 20, 25, 30, 35] {
            c.packet(ts, &layers(&frame), 100);
        }
        let results: Vec<String> = c
            .change_log()
            .iter()
            .map(|o| match &o.result {
                Ok(v) => format!("v{v}"),
                Err(e) => e.to_string(),
            })
            .collect();
        assert_eq!(
            results[..3],
            ["v2", "conflict: the change was made against version 1, the set is at version 2", "v3"]
        );
        assert!(results[3].starts_with("refused: line 1, column 7: unknown field `tcp.dprt`"), "{}", results[3]);
        assert_eq!(results[4], "no definition `nothing`");
        assert_eq!(c.version(), 3);
        let totals: Vec<(String, u64, u64, bool)> =
            c.totals().into_iter().map(|t| (t.name, t.version, t.traffic.packets, t.retired)).collect();
        assert_eq!(
            totals,
            [
                ("port".to_string(), 1, 4, true),  // 0 to 15: replaced at 20
                ("all".to_string(), 1, 8, false),  // never changed: every packet
                ("web".to_string(), 2, 6, false),  // added at 10
                ("port".to_string(), 3, 4, false), // the replacement, from 20 (source port 0 < 10)
            ]
        );
    }

    #[test]
    fn a_definition_an_association_uses_cannot_go() {
        let defs = parse_definitions("a = tcp.dport == 80\nb = tcp.sport == 80\nr = assoc a -> b").unwrap();
        let mut c = Counter::new(defs, None, 100);
        let e = c.apply(1, &Change::Remove("a".into())).unwrap_err();
        assert_eq!(e.to_string(), "`a` is used by the association `r`");
        assert_eq!(c.apply(1, &Change::Remove("r".into())), Ok(2));
        assert_eq!(c.apply(2, &Change::Remove("a".into())), Ok(3));
        assert_eq!(c.apply(3, &Change::Add("a = udp.dport == 53".into())), Ok(4));
        assert!(matches!(c.apply(4, &Change::Add("a = udp.dport == 53".into())), Err(ChangeError::Exists(_))));
    }
}
