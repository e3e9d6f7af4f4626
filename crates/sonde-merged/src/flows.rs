//! The flow query's changelogs (`hosts/`, `pairs/`; docs/spark.md, "Flows across probes") as
//! the merged view keeps them: per interval the newest row of each host and each host pair,
//! bounded, and the tables `/api/tables` and `/api/flows` serve.
//!
//! **Bounded, largest kept.** An interval keeps at most `max_table_rows` hosts and as many pairs.
//! Past it, a new key's row takes the place of the kept row with the fewest bytes if it has more
//! (that one is evicted), else it is dropped; either is counted, and the interval remembers the
//! most bytes of any row it let go (`bound_bytes`). So the top-N by bytes is exact for every
//! rank above `bound_bytes`: a host or pair not kept had at most that many bytes in the newest
//! row the server read of it. With no more keys than the bound (100,000 by default, sonde's
//! `--table-size`), nothing is let go and every rank is exact.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use sonde_http::{Table, TableFiles};
use sonde_types::table::{Cell, Column, Decimal, Kind, Table as Typed};

use crate::read::{HostRow, PairRow};
use crate::view::Key;

/// At most `cap` keys, the largest by bytes; what is let go counted.
#[derive(Debug)]
struct Bounded<K: Ord + Clone, R> {
    rows: BTreeMap<K, (i64, R)>,
    by_bytes: BTreeSet<(i64, K)>,
    let_go: u64,
    bound_bytes: i64,
}

impl<K: Ord + Clone, R> Default for Bounded<K, R> {
    fn default() -> Self {
        Bounded { rows: BTreeMap::new(), by_bytes: BTreeSet::new(), let_go: 0, bound_bytes: 0 }
    }
}

impl<K: Ord + Clone, R> Bounded<K, R> {
    /// Offers a key's row of `batch` with `bytes`; whether anything changed (the row kept, or
    /// one let go and counted).
    fn offer(&mut self, key: K, batch: i64, bytes: i64, row: R, cap: usize, batch_of: impl Fn(&R) -> i64) -> bool {
        if let Some((old_bytes, old)) = self.rows.get_mut(&key) {
            if batch_of(old) >= batch {
                return false;
            }
            self.by_bytes.remove(&(*old_bytes, key.clone()));
            *old_bytes = bytes;
            *old = row;
            self.by_bytes.insert((bytes, key));
            return true;
        }
        if self.rows.len() >= cap.max(1) {
            let smallest = self.by_bytes.first().cloned();
            match smallest {
                Some((least, gone)) if least < bytes => {
                    self.by_bytes.remove(&(least, gone.clone()));
                    self.rows.remove(&gone);
                    self.let_go += 1;
                    self.bound_bytes = self.bound_bytes.max(least);
                }
                _ => {
                    self.let_go += 1;
                    self.bound_bytes = self.bound_bytes.max(bytes);
                    return true;
                }
            }
        }
        self.by_bytes.insert((bytes, key.clone()));
        self.rows.insert(key, (bytes, row));
        true
    }
}

#[derive(Debug, Default)]
struct FlowInterval {
    end: f64,
    hosts: Bounded<String, HostRow>,
    pairs: Bounded<(String, String), PairRow>,
}

/// The flow tables of the newest `max_intervals` intervals.
#[derive(Debug, Default)]
pub(crate) struct FlowTables {
    intervals: BTreeMap<Key, FlowInterval>,
    /// The newest interval that left: rows at or before it are dropped.
    floor: Option<f64>,
    /// Rows refused: not a finite time, or of an interval that already left.
    pub rows_dropped: u64,
    /// Rows let go by the bound of intervals that left (with the kept ones', the total).
    let_go_gone: u64,
}

impl FlowTables {
    fn interval(&mut self, start: f64, end: f64) -> Option<&mut FlowInterval> {
        if !start.is_finite() || !end.is_finite() || self.floor.is_some_and(|f| start <= f) {
            self.rows_dropped += 1;
            return None;
        }
        let i = self.intervals.entry(Key(start)).or_default();
        i.end = end;
        Some(i)
    }

    pub fn hosts(&mut self, rows: Vec<HostRow>, cap: usize) -> bool {
        let mut changed = false;
        for r in rows {
            let Some(i) = self.interval(r.start, r.end) else {
                changed = true;
                continue;
            };
            let bytes = r.bytes_in.saturating_add(r.bytes_out);
            changed |= i.hosts.offer(r.addr.clone(), r.batch, bytes, r, cap, |r| r.batch);
        }
        changed
    }

    pub fn pairs(&mut self, rows: Vec<PairRow>, cap: usize) -> bool {
        let mut changed = false;
        for r in rows {
            let Some(i) = self.interval(r.start, r.end) else {
                changed = true;
                continue;
            };
            let (key, batch, bytes) = ((r.src.clone(), r.dst.clone()), r.batch, r.bytes);
            changed |= i.pairs.offer(key, batch, bytes, r, cap, |r| r.batch);
        }
        changed
    }

    /// Lets the oldest intervals go until `max` are left; whether any went.
    pub fn evict(&mut self, max: usize) -> bool {
        let mut any = false;
        while self.intervals.len() > max {
            let Some((Key(start), gone)) = self.intervals.pop_first() else { break };
            self.let_go_gone += gone.hosts.let_go + gone.pairs.let_go;
            self.floor = Some(self.floor.map_or(start, |f| f.max(start)));
            any = true;
        }
        any
    }

    pub fn held(&self) -> usize {
        self.intervals.len()
    }

    /// Rows the bound let go, in all.
    pub fn let_go(&self) -> u64 {
        self.let_go_gone + self.intervals.values().map(|i| i.hosts.let_go + i.pairs.let_go).sum::<u64>()
    }

    /// The tables served: `hosts`, `matrix` (the pairs) and `top` (the `top` largest hosts and
    /// pairs by bytes per interval); `protocols` stays empty (the flows carry no protocol
    /// directory). Within an interval, hosts and pairs are ordered by bytes, largest first, ties
    /// by address.
    pub fn tables(&self, top: usize) -> TableFiles {
        const HOSTS: &[Column] = &[
            Column::new("start", Kind::Time),
            Column::new("end", Kind::Time),
            Column::new("addr", Kind::Address),
            Column::new("pkts_in", Kind::Count),
            Column::new("bytes_in", Kind::Count),
            Column::new("pkts_out", Kind::Count),
            Column::new("bytes_out", Kind::Count),
            Column::new("flows", Kind::Count),
        ];
        const MATRIX: &[Column] = &[
            Column::new("start", Kind::Time),
            Column::new("end", Kind::Time),
            Column::new("src", Kind::Address),
            Column::new("dst", Kind::Address),
            Column::new("packets", Kind::Count),
            Column::new("bytes", Kind::Count),
            Column::new("flows", Kind::Count),
        ];
        const TOP: &[Column] = &[
            Column::new("start", Kind::Time),
            Column::new("end", Kind::Time),
            Column::new("table", Kind::Label),
            Column::new("rank", Kind::Count),
            Column::new("addr", Kind::Address),
            Column::new("peer", Kind::Address),
            Column::new("packets", Kind::Count),
            Column::new("bytes", Kind::Count),
            Column::new("flows", Kind::Count),
            Column::new("exact", Kind::Flag),
            Column::new("bound_bytes", Kind::Count),
        ];
        let n = |v: i64| Cell::Count(v.max(0) as u64);
        // Each interval's hosts and pairs ordered once, for their tables and for `top`.
        let ordered: Vec<_> = self
            .intervals
            .iter()
            .map(|(Key(start), i)| (span(*start, i.end), i, largest(&i.hosts), largest(&i.pairs)))
            .collect();
        let hosts = Typed::new(HOSTS, |row| {
            for ([s, e], _, hosts, _) in &ordered {
                for (_, h) in hosts {
                    let (a, b) = (n(h.pkts_in), n(h.bytes_in));
                    row(&[s.clone(), e.clone(), addr(&h.addr), a, b, n(h.pkts_out), n(h.bytes_out), n(h.flows)]);
                }
            }
        });
        let matrix = Typed::new(MATRIX, |row| {
            for ([s, e], _, _, pairs) in &ordered {
                for (_, p) in pairs {
                    row(&[s.clone(), e.clone(), addr(&p.src), addr(&p.dst), n(p.packets), n(p.bytes), n(p.flows)]);
                }
            }
        });
        let ranked = Typed::new(TOP, |row| {
            for ([s, e], i, hosts, pairs) in &ordered {
                let bound = i.hosts.bound_bytes;
                for (rank, &(bytes, h)) in hosts.iter().take(top).enumerate() {
                    let exact = Cell::Flag(i.hosts.let_go == 0 || bytes > bound);
                    let packets = h.pkts_in.saturating_add(h.pkts_out);
                    row(&[
                        s.clone(),
                        e.clone(),
                        Cell::text("hosts"),
                        Cell::Count(rank as u64 + 1),
                        addr(&h.addr),
                        Cell::Null,
                        n(packets),
                        n(bytes),
                        n(h.flows),
                        exact,
                        n(bound),
                    ]);
                }
                let bound = i.pairs.bound_bytes;
                for (rank, &(bytes, p)) in pairs.iter().take(top).enumerate() {
                    let exact = Cell::Flag(i.pairs.let_go == 0 || bytes > bound);
                    row(&[
                        s.clone(),
                        e.clone(),
                        Cell::text("matrix"),
                        Cell::Count(rank as u64 + 1),
                        addr(&p.src),
                        addr(&p.dst),
                        n(p.packets),
                        n(bytes),
                        n(p.flows),
                        exact,
                        n(bound),
                    ]);
                }
            }
        });
        TableFiles {
            hosts: Table::from(hosts.collect()),
            matrix: Table::from(matrix.collect()),
            protocols: Table::default(),
            top: Table::from(ranked.collect()),
        }
    }
}

/// The rows of a bounded table with their bytes, largest bytes first, ties by key.
fn largest<K: Ord + Clone, R>(t: &Bounded<K, R>) -> Vec<(i64, &R)> {
    let mut rows: Vec<(i64, &K, &R)> = t.rows.iter().map(|(k, (bytes, r))| (*bytes, k, r)).collect();
    rows.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    rows.into_iter().map(|(bytes, _, r)| (bytes, r)).collect()
}

fn span(start: f64, end: f64) -> [Cell<'static>; 2] {
    let t = |s: f64| Decimal::of_f64(s, 6).map_or(Cell::Null, Cell::Decimal);
    [t(start), t(end)]
}

fn addr(text: &str) -> Cell<'_> {
    text.parse::<IpAddr>().map_or_else(|_| Cell::text(text), Cell::Address)
}
