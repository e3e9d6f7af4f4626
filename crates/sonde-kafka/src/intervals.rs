//! A run's intervals and their distributions as additive contributions (docs/kafka.md,
//! "Merging"): what each message adds to one interval of one probe. Summing every contribution
//! of a (probe, interval, proto, net) gives that probe's row of intervals.tsv, and summing those
//! of a (probe, interval, metric, dir, net) its histogram (counts, sums and bins add; minima
//! and maxima by min and max), whenever and in whatever pieces they were sent.
//!
//! [`LiveIntervals`] turns a live run's drains into contributions: the packet counts of an
//! interval when every reader has closed it, with the flow statistics of the flows ended by
//! then; then, at each drain, what the flows ended since add to the intervals they are charged
//! to (opened in the interval of their first packet, closed and measured in that of their last,
//! active in every interval of the report between). It keeps nothing per published interval
//! but the ranges of intervals the report has (one entry per gap in the traffic), which tell
//! where a late flow is active; and for the intervals not released yet, what was brought for
//! them. Its work follows the intervals that have data: a flow spanning a long silence, or a
//! reader's clock far behind the others', costs nothing per empty interval between.

use std::collections::BTreeMap;

use sonde_stats::{Dir, Dist, FlowInterval, Metric, Net, PacketInterval, Proto, Report};

/// Flows by protocol (TCP, UDP), then [`Net`].
type Flows = [[u64; 4]; 2];

/// What one publication adds to one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Contribution {
    /// By [`Proto`], then [`Net`].
    pub packets: [[u64; 4]; 4],
    pub bytes: [[u64; 4]; 4],
    /// Flows by protocol (TCP, UDP), then [`Net`].
    pub opened: [[u64; 4]; 2],
    pub closed: [[u64; 4]; 2],
    pub active: [[u64; 4]; 2],
    /// The distributions with samples (packet metrics under [`Dir::Both`]).
    pub dists: BTreeMap<(Metric, Dir, Net), Dist>,
}

impl Contribution {
    fn add_packets(&mut self, p: &PacketInterval) {
        for (proto, nets) in p.traffic.iter().enumerate() {
            for (net, t) in nets.iter().enumerate() {
                self.packets[proto][net] += t.packets;
                self.bytes[proto][net] += t.bytes;
            }
        }
        for net in Net::ALL {
            for (metric, dist) in [(Metric::IpLen, &p.ip_len[net as usize]), (Metric::IpTtl, &p.ip_ttl[net as usize])] {
                self.add_dist((metric, Dir::Both, net), dist);
            }
        }
    }

    fn add_flows(&mut self, f: &FlowInterval) {
        for p in 0..2 {
            for n in 0..4 {
                self.opened[p][n] += f.opened[p][n];
                self.closed[p][n] += f.closed[p][n];
            }
        }
        for (key, dist) in f.dists() {
            self.add_dist(key, dist);
        }
    }

    fn add_dist(&mut self, key: (Metric, Dir, Net), dist: &Dist) {
        if dist.count == 0 {
            return;
        }
        match self.dists.get_mut(&key) {
            Some(mine) => mine.merge(dist),
            None => {
                self.dists.insert(key, dist.clone());
            }
        }
    }

    /// The row of intervals.tsv this adds to `(proto, net)`: packets, bytes, flows opened,
    /// closed and active.
    pub fn row(&self, proto: Proto, net: Net) -> [u64; 5] {
        let (p, n) = (proto as usize, net as usize);
        let flows = |a: &[[u64; 4]; 2]| if p < 2 { a[p][n] } else { 0 };
        [self.packets[p][n], self.bytes[p][n], flows(&self.opened), flows(&self.closed), flows(&self.active)]
    }

    pub fn is_empty(&self) -> bool {
        let zero = |a: &[[u64; 4]; 2]| a.iter().flatten().all(|&v| v == 0);
        self.packets.iter().flatten().all(|&v| v == 0)
            && self.bytes.iter().flatten().all(|&v| v == 0)
            && zero(&self.opened)
            && zero(&self.closed)
            && zero(&self.active)
            && self.dists.is_empty()
    }
}

/// Contributions by interval index (start ÷ `interval_ns`).
#[derive(Debug, Clone, Default)]
pub struct Contributions {
    pub interval_ns: u64,
    pub parts: BTreeMap<u64, Contribution>,
}

impl Contributions {
    /// A whole report's: one per interval, each intervals.tsv row and distribution whole
    /// (`analyze`, which has its intervals only at its end).
    pub fn of_report(report: &Report) -> Contributions {
        let active = report.active_flows();
        let mut parts = BTreeMap::new();
        for (&i, interval) in &report.intervals {
            let mut c = Contribution::default();
            if let Some(p) = &interval.packets {
                c.add_packets(p);
            }
            c.add_flows(&interval.flows);
            c.active = active.get(&i).copied().unwrap_or_default();
            if !c.is_empty() {
                parts.insert(i, c);
            }
        }
        Contributions { interval_ns: report.interval_ns, parts }
    }
}

/// Interval indices as inclusive ranges `lo → hi`, adjacent ones joined.
#[derive(Debug, Default)]
struct Ranges(BTreeMap<u64, u64>);

impl Ranges {
    fn insert(&mut self, i: u64) {
        if self.contains(i) {
            return;
        }
        let before = self.0.range(..i).next_back().map(|(&lo, &hi)| (lo, hi)).filter(|&(_, hi)| hi + 1 == i);
        let after = i.checked_add(1).and_then(|next| self.0.get(&next).map(|&hi| (next, hi)));
        let lo = before.map_or(i, |(lo, _)| lo);
        let hi = match after {
            Some((next, hi)) => {
                self.0.remove(&next);
                hi
            }
            None => i,
        };
        self.0.insert(lo, hi);
    }

    fn contains(&self, i: u64) -> bool {
        self.0.range(..=i).next_back().is_some_and(|(_, &hi)| hi >= i)
    }

    /// The indices in `lo..=hi` that are in a range, in order.
    fn within(&self, lo: u64, hi: u64) -> impl Iterator<Item = u64> + '_ {
        let first = self.0.range(..=lo).next_back().map_or(lo, |(&start, _)| start);
        let ranges = (lo <= hi).then(|| self.0.range(first..=hi)).into_iter().flatten();
        ranges.flat_map(move |(&a, &b)| a.max(lo)..=b.min(hi))
    }
}

/// A live run's intervals as contributions, drain after drain ([module docs](self)).
#[derive(Debug)]
pub struct LiveIntervals {
    interval_ns: u64,
    /// Each reader's latest drain clock (packet time): an interval is closed once every
    /// reader's clock has passed its end.
    clocks: Vec<Option<u64>>,
    /// The intervals the run's report has: those with packets or flow events.
    known: Ranges,
    /// What was brought for intervals not released yet (and, between a drain's absorbing and
    /// releasing, for those released before).
    pending: BTreeMap<u64, Contribution>,
    /// The first interval not released yet.
    boundary: u64,
    /// Of the flows absorbed, those opened before `boundary` and closed at or after it.
    carry: Flows,
    /// Of the flows absorbed, those opened or closed at or after `boundary`, per interval:
    /// where they are active is told as the intervals are released.
    events: BTreeMap<u64, (Flows, Flows)>,
}

impl LiveIntervals {
    pub fn new(interval_ns: u64, readers: usize) -> LiveIntervals {
        LiveIntervals {
            interval_ns: interval_ns.max(1),
            clocks: vec![None; readers.max(1)],
            known: Ranges::default(),
            pending: BTreeMap::new(),
            boundary: 0,
            carry: Flows::default(),
            events: BTreeMap::new(),
        }
    }

    /// Reader `reader`'s drain at packet time `clock_ns` brought the packet intervals it
    /// closed and the flow statistics of the flows ended since the last drain: the
    /// contributions to send now (those of intervals every reader has closed).
    pub fn drained(
        &mut self,
        reader: usize,
        clock_ns: u64,
        packets: &[PacketInterval],
        flows: &[&BTreeMap<u64, FlowInterval>],
    ) -> Contributions {
        if let Some(clock) = self.clocks.get_mut(reader) {
            *clock = Some(clock.map_or(clock_ns, |c| c.max(clock_ns)));
        }
        let closed_before = match self.clocks.iter().copied().collect::<Option<Vec<u64>>>() {
            Some(clocks) => clocks.into_iter().min().unwrap_or(0) / self.interval_ns,
            None => 0,
        };
        self.absorb(packets, flows);
        self.release(closed_before)
    }

    /// The run ended with these intervals and flow statistics not drained: every contribution
    /// left.
    pub fn finished(&mut self, packets: &[PacketInterval], flows: &[&BTreeMap<u64, FlowInterval>]) -> Contributions {
        self.absorb(packets, flows);
        self.release(u64::MAX)
    }

    fn absorb(&mut self, packets: &[PacketInterval], flows: &[&BTreeMap<u64, FlowInterval>]) {
        for p in packets {
            self.known.insert(p.index);
            self.pending.entry(p.index).or_default().add_packets(p);
        }
        // Flows opened and closed per interval, for where they are active.
        let mut events: BTreeMap<u64, (Flows, Flows)> = BTreeMap::new();
        for map in flows {
            for (&i, f) in map.iter() {
                self.known.insert(i);
                self.pending.entry(i).or_default().add_flows(f);
                let (opened, closed) = events.entry(i).or_default();
                add(opened, &f.opened);
                add(closed, &f.closed);
            }
        }
        let (Some(&lo), Some(&hi)) = (events.keys().next(), events.keys().next_back()) else { return };
        // Active in an interval: opened at or before it, closed at or after it. In the
        // intervals released already that the report has, now; in the others as they are
        // released (`carry` and `events`).
        let last_released = (self.boundary > 0).then(|| hi.min(self.boundary - 1));
        let released: Vec<u64> = last_released.map_or_else(Vec::new, |last| self.known.within(lo, last).collect());
        let (mut opened_upto, mut closed_below, mut closed_here) =
            (Flows::default(), Flows::default(), Flows::default());
        let mut ev = events.iter().peekable();
        for i in released {
            add(&mut closed_below, &std::mem::take(&mut closed_here));
            while let Some(&(&j, (o, c))) = ev.peek() {
                if j > i {
                    break;
                }
                add(&mut opened_upto, o);
                match j < i {
                    true => add(&mut closed_below, c),
                    false => closed_here = *c,
                }
                ev.next();
            }
            let active = difference(&opened_upto, &closed_below);
            if active.iter().flatten().any(|&a| a > 0) {
                add(&mut self.pending.entry(i).or_default().active, &active);
            }
        }
        for (i, (opened, closed)) in events {
            if i < self.boundary {
                // Opened before the boundary; still open at it unless closed before.
                add(&mut self.carry, &opened);
                self.carry = difference(&self.carry, &closed);
            } else {
                let (o, c) = self.events.entry(i).or_default();
                add(o, &opened);
                add(c, &closed);
            }
        }
    }

    /// Releases the intervals before `closed_before` (the flows active in each that the report
    /// has counted as they are passed), then takes every contribution to a released interval.
    fn release(&mut self, closed_before: u64) -> Contributions {
        if closed_before > self.boundary {
            let mut passed: Vec<u64> = self.known.within(self.boundary, closed_before - 1).collect();
            passed.extend(self.events.range(self.boundary..closed_before).map(|(&i, _)| i));
            passed.sort_unstable();
            passed.dedup();
            for i in passed {
                let (opened, closed) = self.events.remove(&i).unwrap_or_default();
                add(&mut self.carry, &opened);
                if self.known.contains(i) && self.carry.iter().flatten().any(|&a| a > 0) {
                    add(&mut self.pending.entry(i).or_default().active, &self.carry);
                }
                self.carry = difference(&self.carry, &closed);
            }
            self.boundary = closed_before;
        }
        let later = match self.boundary {
            u64::MAX => BTreeMap::new(),
            b => self.pending.split_off(&b),
        };
        let ready = std::mem::replace(&mut self.pending, later);
        let parts = ready.into_iter().filter(|(_, c)| !c.is_empty()).collect();
        Contributions { interval_ns: self.interval_ns, parts }
    }
}

fn add(into: &mut Flows, more: &Flows) {
    for (a, b) in into.iter_mut().flatten().zip(more.iter().flatten()) {
        *a += b;
    }
}

/// `a - b`, per protocol and net (never below 0).
fn difference(a: &Flows, b: &Flows) -> Flows {
    let mut out = *a;
    for (x, y) in out.iter_mut().flatten().zip(b.iter().flatten()) {
        *x = x.saturating_sub(*y);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const L: u64 = 1_000_000_000;

    fn packets(index: u64, n: u64) -> PacketInterval {
        let mut traffic: [[sonde_stats::Traffic; 4]; 4] = Default::default();
        traffic[Proto::Tcp as usize][Net::Ext as usize].packets = n;
        let dists = || std::array::from_fn(|_| Dist::new(Metric::IpLen.binning()));
        PacketInterval { index, traffic, ip_len: dists(), ip_ttl: dists(), tables: None }
    }

    fn flows(events: &[(u64, u64, u64)]) -> BTreeMap<u64, FlowInterval> {
        let mut map: BTreeMap<u64, FlowInterval> = BTreeMap::new();
        for &(i, opened, closed) in events {
            let f = map.entry(i).or_default();
            f.opened[0][Net::Ext as usize] += opened;
            f.closed[0][Net::Ext as usize] += closed;
        }
        map
    }

    fn active(all: &[Contributions]) -> BTreeMap<u64, u64> {
        let mut sums = BTreeMap::new();
        for c in all {
            for (&i, part) in &c.parts {
                *sums.entry(i).or_default() += part.row(Proto::Tcp, Net::Ext)[4];
            }
        }
        sums.retain(|_, v| *v > 0);
        sums
    }

    /// Two readers, one lagging: an interval is held until both have passed it; a flow
    /// active across an interval that turns out to have no packet at all is not counted there
    /// (the report has no such interval), and one that ends after its intervals were published
    /// adds to each.
    #[test]
    fn active_flows_follow_the_report() {
        let mut live = LiveIntervals::new(L, 2);
        let first = live.drained(0, L + L / 2, &[packets(0, 5)], &[]);
        assert!(first.parts.is_empty(), "reader 1 has not passed interval 0 yet");
        let second = live.drained(1, L, &[packets(1, 3)], &[]);
        assert_eq!(second.parts.keys().copied().collect::<Vec<_>>(), [0], "both passed interval 0 only");
        // A flow from interval 0 to 3, ended while intervals 1 to 3 are open; 2 has no packet.
        let third = live.drained(0, 3 * L + L / 10, &[packets(3, 1)], &[&flows(&[(0, 1, 0), (3, 0, 1)])]);
        assert_eq!(
            active(std::slice::from_ref(&third)),
            BTreeMap::from([(0, 1)]),
            "interval 0 was published: the flow adds to it"
        );
        let fourth = live.drained(1, 4 * L, &[], &[]);
        assert_eq!(fourth.parts.keys().copied().collect::<Vec<_>>(), [1], "reader 0 is in interval 3");
        let fifth = live.drained(0, 4 * L, &[], &[]);
        let all = [first, second, third, fourth, fifth];
        assert_eq!(active(&all), BTreeMap::from([(0, 1), (1, 1), (3, 1)]));
        // A later flow across the gap, from 1 to 3: closed intervals the report has only.
        let late = live.finished(&[], &[&flows(&[(1, 1, 0), (3, 0, 1)])]);
        assert_eq!(active(&[late]), BTreeMap::from([(1, 1), (3, 1)]));
    }

    /// A reader whose clock is far behind the other's (a timestamp far in the past): a flow
    /// spanning the gap costs the intervals that have data, not the intervals between.
    #[test]
    fn a_clock_far_behind_costs_no_interval_without_data() {
        const FAR: u64 = 1 << 33;
        let mut live = LiveIntervals::new(L, 2);
        assert!(live.drained(1, L, &[packets(0, 1)], &[]).parts.is_empty());
        let flow = flows(&[(0, 1, 0), (FAR, 0, 1)]);
        let second = live.drained(0, FAR * L + 1, &[packets(FAR, 2)], &[&flow]);
        assert_eq!(active(std::slice::from_ref(&second)), BTreeMap::from([(0, 1)]));
        assert!(live.pending.len() <= 1 && live.events.len() <= 1, "{live:?}");
        let third = live.drained(1, (FAR + 1) * L, &[], &[]);
        assert!(third.parts.is_empty(), "reader 0 is in interval FAR, the only one after 0 with data");
        let fourth = live.drained(0, (FAR + 1) * L, &[], &[]);
        assert_eq!(active(&[third, fourth]), BTreeMap::from([(FAR, 1)]));
        assert!(live.pending.is_empty() && live.events.is_empty() && live.carry == Flows::default());
    }

    #[test]
    fn ranges_join_and_answer() {
        let mut r = Ranges::default();
        for i in [5, 3, 4, 9, 10, 0, 7] {
            r.insert(i);
        }
        assert_eq!(r.0, BTreeMap::from([(0, 0), (3, 5), (7, 7), (9, 10)]));
        assert_eq!(r.within(4, 9).collect::<Vec<_>>(), [4, 5, 7, 9]);
        assert_eq!(r.within(6, 6).count(), 0);
        assert_eq!(r.within(9, 2).count(), 0);
        assert!(r.contains(10) && !r.contains(11) && !r.contains(6));
        r.insert(u64::MAX);
        assert!(r.contains(u64::MAX));
    }
}
