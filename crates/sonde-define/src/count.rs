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
use std::sync::Arc;

use rustc_hash::FxHashMap;
use sonde_anon::Anonymizer;
pub use sonde_types::Traffic;

use crate::assoc::{answer, arm, Armed, AssociationTotal};
use crate::gaps::{add_gap, Gaps, GAP_BINS};
use crate::versions::{DefinitionSet, SetChange};
use crate::{Change, ChangeError, ChangeOutcome, Definition, Layers, Match, Matcher, ScheduledChange};

/// One definition's FIDs in one interval.
#[derive(Debug, Clone, Default)]
pub(crate) struct FidTable {
    pub(crate) rows: FxHashMap<u128, Traffic>,
    pub(crate) overflow: Traffic,
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
pub(crate) struct FidState {
    last_ns: u64,
    pub(crate) gaps: Gaps,
    pub(crate) flow: FidFlow,
}

/// One definition's `gap` and `length` state.
#[derive(Debug, Clone)]
pub(crate) struct Tracked {
    pub(crate) fids: FxHashMap<u128, FidState>,
    pub(crate) untracked_packets: u64,
    /// Flows that ended (a gap over `idle`); the open ones are in `fids`.
    pub(crate) flows: Vec<FidFlow>,
    pub(crate) histogram: [u64; GAP_BINS],
}

/// Counts the packets each definition matches. Fed in input order by the reader.
#[derive(Debug)]
pub struct Counter {
    pub(crate) set: DefinitionSet,
    run_interval_ns: Option<u64>,
    /// Per slot of the set: its interval; `None`, one interval for the whole run.
    pub(crate) interval_ns: Vec<Option<u64>>,
    cap: usize,
    /// By slot, then interval index.
    pub(crate) tables: Vec<BTreeMap<u64, FidTable>>,
    pub(crate) tracked: Vec<Tracked>,
    /// Per slot: every packet it matched.
    matched: Vec<Traffic>,
    armed: Vec<Armed>,
    matches: Vec<Match>,
    /// First and last packet times seen.
    pub(crate) span_ns: Option<(u64, u64)>,
    /// Samples each association keeps one by one for `definition_association_samples.tsv`.
    written_samples: usize,
    /// Shows the FIDs' address parts anonymised (a cell: writing takes `&self`).
    pub(crate) anon: Option<RefCell<Anonymizer>>,
}

impl Counter {
    /// `interval_ns` is the run's interval, for definitions without their own (`every`).
    pub fn new(defs: Vec<Definition>, interval_ns: Option<u64>, cap: usize) -> Counter {
        let n = defs.len();
        let mut counter = Counter {
            set: DefinitionSet::new(defs),
            run_interval_ns: interval_ns,
            tables: Vec::new(),
            tracked: Vec::new(),
            matched: Vec::new(),
            armed: Vec::new(),
            interval_ns: Vec::new(),
            cap: cap.max(1),
            matches: Vec::new(),
            span_ns: None,
            anon: None,
            written_samples: crate::assoc::WRITTEN_SAMPLES,
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
        self.set.matcher.matches(layers, &mut matches);
        self.count(ts_ns, wire_len, &matches);
        self.matches = matches;
    }

    /// The active definitions, compiled: what [`Counter::count`] expects matches from.
    pub fn matcher(&self) -> Arc<Matcher> {
        Arc::clone(&self.set.matcher)
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
        self.set.next_due(ts_ns)
    }

    /// The changes that turn the active set into `wanted` (name, line), as a reload of a
    /// definitions file makes them: new and changed lines in the file's order (an association
    /// after what it names), then removals.
    pub fn changes_to(&self, wanted: &[(String, String)]) -> Vec<Change> {
        let active: BTreeMap<String, String> =
            self.totals().into_iter().filter(|t| !t.retired).map(|t| (t.name, t.text)).collect();
        let mut changes = Vec::new();
        for (name, line) in wanted {
            match active.get(name) {
                None => changes.push(Change::Add(line.clone())),
                Some(old) if old.trim() != line.trim() => changes.push(Change::Replace(line.clone())),
                Some(_) => {}
            }
        }
        for name in active.keys().filter(|n| !wanted.iter().any(|(w, _)| w == *n)) {
            changes.push(Change::Remove(name.clone()));
        }
        changes
    }

    /// Applies `change` to the set at once (an operator's edit, at packet time `at_ns`), logged
    /// as a scheduled change is; an accepted one is for [`Counter::settle`] when the
    /// measurements reach the next packet.
    pub fn change_now(&mut self, at_ns: u64, expected_version: u64, change: Change) -> Result<SetChange, ChangeError> {
        self.set.change_now(at_ns, expected_version, change)
    }

    /// Measures one packet of `wire_len` bytes at `ts_ns` that matched `matches` (from
    /// [`Counter::matcher`], in slot order). Packets come in input order, every change settled
    /// before the first packet after it.
    pub fn count(&mut self, ts_ns: u64, wire_len: u32, matches: &[Match]) {
        let bytes = u64::from(wire_len);
        for m in matches {
            let d = m.def as usize;
            let def = &self.set.defs[d];
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
        self.set.schedule(changes);
    }

    /// The first and last packet times the counter has seen (`None` before any).
    pub fn span_ns(&self) -> Option<(u64, u64)> {
        self.span_ns
    }

    /// The set's version: 1 for the definitions the run started with, one more per change.
    pub fn version(&self) -> u64 {
        self.set.version
    }

    /// What became of each scheduled change.
    pub fn change_log(&self) -> &[ChangeOutcome] {
        &self.set.log
    }

    /// Applies `change`, made against version `expected_version`: validated first, then
    /// swapped in whole; definitions it leaves alone keep counting without a gap. Returns the
    /// new version.
    pub fn apply(&mut self, expected_version: u64, change: &Change) -> Result<u64, ChangeError> {
        let change = self.set.change(expected_version, change)?;
        self.settle(change);
        Ok(self.set.version)
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
        let def = &self.set.defs[slot];
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
            self.armed.push(Armed::new(slot, a, self.written_samples));
        }
    }

    /// The longest name a definition added while running may have, in bytes (the set it starts
    /// with was parsed under the same limit: [`Counter::parse`]).
    pub fn set_max_name_bytes(&mut self, limit: usize) {
        self.set.max_name = limit;
    }

    pub fn max_name_bytes(&self) -> usize {
        self.set.max_name
    }

    /// `text`'s definitions, parsed as this counter takes them ([`crate::parse_definitions`]
    /// under its name limit).
    pub fn parse(&self, text: &str) -> Result<Vec<crate::Definition>, crate::ParseError> {
        crate::parse_definitions(text, self.set.max_name)
    }

    /// Keeps the first `limit` samples of each association one by one (default
    /// [`crate::assoc::WRITTEN_SAMPLES`]), for [`Counter::association_samples_table`]; later ones
    /// are counted (`samples_unwritten`). Memory: 16 bytes a sample. Applies to the
    /// associations the counter holds and those added later.
    pub fn set_written_samples(&mut self, limit: usize) {
        self.written_samples = limit;
        for a in &mut self.armed {
            a.log_limit = limit;
            a.log_dropped += a.log.len().saturating_sub(limit) as u64;
            a.log.truncate(limit);
        }
    }

    /// Per association: every sample kept (time answered, A→B gap, in ns), in the order taken.
    pub fn association_samples(&self) -> Vec<(String, &[(u64, u64)])> {
        self.armed.iter().map(|a| (self.set.defs[a.def].name.clone(), a.log.as_slice())).collect()
    }

    /// Per association: its latest samples (time answered, A→B gap, in ns), oldest first, at
    /// most [`crate::assoc::RECENT_SAMPLES`].
    pub fn recent_samples(&self) -> Vec<(String, Vec<(u64, u64)>)> {
        self.armed.iter().map(|a| (self.set.defs[a.def].name.clone(), a.recent.iter().copied().collect())).collect()
    }

    /// Per association: its samples and counts.
    pub fn association_totals(&self) -> Vec<AssociationTotal> {
        self.armed
            .iter()
            .map(|a| {
                let d = &self.set.defs[a.def];
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
                    samples_unwritten: a.log_dropped,
                }
            })
            .collect()
    }

    /// Whether any definition asks for `gap` / `length`, and whether there are associations.
    pub fn wants(&self) -> (bool, bool, bool) {
        let any = |f: fn(&Definition) -> bool| self.set.defs.iter().any(f);
        (any(|d| d.measures.gap), any(|d| d.measures.length), !self.armed.is_empty())
    }

    /// Per definition: its totals.
    pub fn totals(&self) -> Vec<DefinitionTotal> {
        self.list(true)
    }

    /// Per definition: its totals without `fid_rows` and `overflow_packets` (left 0), which
    /// visit every interval's table: a live view's listing, whose cost does not grow with the run.
    pub fn listing(&self) -> Vec<DefinitionTotal> {
        self.list(false)
    }

    fn list(&self, tables: bool) -> Vec<DefinitionTotal> {
        // A definition just added has no measurement state until the counts reach the packet
        // it starts at: it is listed, with nothing counted.
        (0..self.set.defs.len())
            .map(|i| {
                let d = &self.set.defs[i];
                let mut total = DefinitionTotal {
                    name: d.name.clone(),
                    text: d.text.clone(),
                    traffic: self.matched.get(i).copied().unwrap_or_default(),
                    fid_rows: 0,
                    overflow_packets: 0,
                    untracked_packets: self.tracked.get(i).map_or(0, |t| t.untracked_packets),
                    association: d.assoc.is_some(),
                    version: self.set.since[i],
                    retired: !self.set.active[i],
                };
                for t in self.tables.get(i).into_iter().filter(|_| tables).flat_map(BTreeMap::values) {
                    total.fid_rows += t.rows.len() as u64;
                    total.overflow_packets += t.overflow.packets;
                }
                total
            })
            .collect()
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

#[cfg(test)]
mod tests {

    #[test]
    fn a_reload_adds_replaces_and_removes_by_name() {
        let defs =
            crate::parse_definitions("web = tcp.dport == 80\ndns = udp.dport == 53\n", crate::MAX_NAME_BYTES).unwrap();
        let counter = Counter::new(defs, None, 10);
        let wanted = [
            ("web".to_string(), "web = tcp.dport == 8080".to_string()),
            ("ssh".to_string(), "ssh = tcp.dport == 22".to_string()),
        ];
        assert_eq!(
            counter.changes_to(&wanted),
            [Change::Replace(wanted[0].1.clone()), Change::Add(wanted[1].1.clone()), Change::Remove("dns".to_string())]
        );
        let same: Vec<(String, String)> = counter.totals().into_iter().map(|t| (t.name, t.text)).collect();
        assert!(counter.changes_to(&same).is_empty());
    }

    use super::*;
    use crate::parse_definitions;

    fn layers(frame: &[u8]) -> Layers<'_> {
        Layers { frame, l3: Some(0), l4: Some(20), payload: Some(40), meta: [4, 6, 64, 0, 0, 0, 0, 0, 0, 0, 0, 40, 0] }
    }

    #[test]
    fn counts_per_interval_and_fid_with_a_bounded_table() {
        let defs = parse_definitions(
            "port = ip.proto == 6 key tcp.dport\nsrc = ip.version == 4 key ip.src",
            crate::MAX_NAME_BYTES,
        )
        .unwrap();
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

    /// Issue 20: a live view rendered every interval of the run at each drain. Its window is
    /// the latest intervals of each definition, and the listing leaves the tables alone.
    #[test]
    fn a_live_window_holds_the_latest_intervals_only() {
        let defs = parse_definitions(
            "port = ip.proto == 6 key tcp.dport\nslow = ip.proto == 6 every 10s",
            crate::MAX_NAME_BYTES,
        )
        .unwrap();
        let mut c = Counter::new(defs, Some(1_000_000_000), 8);
        let mut frame = [0u8; 40];
        frame[22..24].copy_from_slice(&80u16.to_be_bytes());
        for second in 0..1000u64 {
            c.packet(second * 1_000_000_000, &layers(&frame), 100);
        }
        let mut all = String::new();
        c.write_tsv(&mut all);
        assert_eq!(all.lines().count(), 1 + 1000 + 100);
        let mut recent = String::new();
        c.write_tsv_recent(&mut recent, 5, usize::MAX);
        let starts: Vec<(&str, &str)> = recent
            .lines()
            .skip(1)
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                (f[0], f[2])
            })
            .collect();
        // The 1 s definition's seconds 995..999, the 10 s one's 950..990.
        assert_eq!(starts.iter().filter(|(_, d)| *d == "port").count(), 5);
        assert_eq!(starts.iter().filter(|(_, d)| *d == "slow").count(), 5);
        assert!(starts.contains(&("995.000000", "port")) && starts.contains(&("950.000000", "slow")));
        // A row budget keeps the newest rows: 3 of the 1 s definition's newest (999, 998, 997)
        // and, at 990, the 10 s one's.
        let mut budget = String::new();
        c.write_tsv_recent(&mut budget, 5, 4);
        let rows: Vec<String> =
            budget.lines().skip(1).map(|l| l.split('\t').take(3).collect::<Vec<_>>().join(" ")).collect();
        assert_eq!(
            rows,
            [
                "990.000000 1000.000000 slow",
                "997.000000 998.000000 port",
                "998.000000 999.000000 port",
                "999.000000 1000.000000 port"
            ]
        );
        let listing = c.listing();
        assert_eq!(listing[0].traffic.packets, 1000);
        assert_eq!((listing[0].fid_rows, c.totals()[0].fid_rows), (0, 1000));
    }
}
