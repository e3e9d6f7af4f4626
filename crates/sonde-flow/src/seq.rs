//! Sequence space of one TCP direction: 32-bit wire numbers unwrapped to 64 bits, and the set
//! of byte ranges seen so far, which tells new data from retransmissions and reordering.

/// Unwraps 32-bit sequence numbers into a signed 64-bit space relative to a base (the ISN, or
/// the first sequence number seen). Arithmetic on wire numbers always wraps (RFC 9293 §3.4).
/// 12 bytes, aligned to four (its fields are only read by value), so that it packs beside the
/// 32-bit fields of a TCP direction.
#[derive(Debug, Clone, Copy, Default)]
#[repr(C, packed(4))]
pub struct SeqUnwrapper {
    base: u32,
    /// The most recent unwrapped value, the reference for choosing the closest wrap.
    last: i64,
}

impl SeqUnwrapper {
    pub fn new(base: u32) -> Self {
        SeqUnwrapper { base, last: 0 }
    }

    /// Unwraps `seq` to the 64-bit value closest to the last one unwrapped.
    pub fn unwrap(&mut self, seq: u32) -> i64 {
        let value = self.peek(seq);
        if value > self.last {
            self.last = value;
        }
        value
    }

    /// Like `unwrap` without moving the reference.
    pub fn peek(&self, seq: u32) -> i64 {
        let rel = seq.wrapping_sub(self.base);
        let delta = rel.wrapping_sub(self.last as u32) as i32;
        self.last + i64::from(delta)
    }
}

/// What adding a segment's range to the seen set found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RangeOutcome {
    /// Bytes (sequence numbers) of the segment that had been seen before.
    pub overlap: u64,
    /// Sequence numbers never seen before.
    pub fresh: u64,
    /// The segment brought fresh data below the highest sequence number seen: it fills a hole
    /// (tcptrace's "out of order").
    pub fills_hole: bool,
    /// When it fills a hole: the time the hole appeared (the data above it was first seen).
    pub hole_opened_ns: u64,
}

type Range = (i64, i64, u64);

/// Spilled range sets of every flow that has holes, with their buffers kept for reuse: a
/// tracker in steady state does not allocate for them.
#[derive(Debug, Default)]
pub struct RangePool {
    sets: Vec<Vec<Range>>,
    free: Vec<u32>,
}

impl RangePool {
    fn take(&mut self) -> u32 {
        match self.free.pop() {
            Some(i) => i,
            None => {
                self.sets.push(Vec::new());
                (self.sets.len() - 1) as u32
            }
        }
    }

    fn give_back(&mut self, i: u32) {
        self.sets[i as usize].clear();
        self.free.push(i);
    }
}

/// Disjoint, sorted, merged ranges `[start, end)` of sequence numbers seen, each with the packet
/// time it began (the time the hole below it opened). In normal traffic it holds one range,
/// stored inline; once a hole appears the ranges move to a `RangePool` set until the holes are
/// filled again. 24 bytes: a spilled set's number takes the inline range's place.
#[derive(Debug, Clone, Copy, Default)]
pub struct SeenRanges {
    /// The only range while not spilled (`start == end` when empty); once spilled,
    /// `(SPILLED, 0, set number in the pool)`: a start above the end, which no range has.
    one: Range,
}

/// The start of `SeenRanges::one` while its ranges are in a `RangePool` set.
const SPILLED: i64 = 1;

impl SeenRanges {
    fn spill(&self) -> Option<usize> {
        (self.one.0 > self.one.1).then_some(self.one.2 as usize)
    }

    fn slice<'a>(&'a self, pool: &'a RangePool) -> &'a [Range] {
        // The common case first: one range inline.
        if self.one.0 < self.one.1 {
            std::slice::from_ref(&self.one)
        } else if self.one.0 == self.one.1 {
            &[]
        } else {
            &pool.sets[self.one.2 as usize]
        }
    }

    /// One past the highest sequence number seen, if any.
    pub fn max_end(&self, pool: &RangePool) -> Option<i64> {
        self.slice(pool).last().map(|r| r.1)
    }

    /// Total sequence numbers covered.
    pub fn covered(&self, pool: &RangePool) -> u64 {
        self.slice(pool).iter().map(|r| (r.1 - r.0) as u64).sum()
    }

    pub fn holes(&self, pool: &RangePool) -> usize {
        self.slice(pool).len().saturating_sub(1)
    }

    /// Whether every number in `[start, end)` has been seen.
    pub fn contains(&self, pool: &RangePool, start: i64, end: i64) -> bool {
        self.slice(pool).iter().any(|r| r.0 <= start && end <= r.1)
    }

    /// Forgets every range, returning a spilled set to the pool.
    pub fn clear(&mut self, pool: &mut RangePool) {
        if let Some(set) = self.spill() {
            pool.give_back(set as u32);
        }
        *self = SeenRanges::default();
    }

    /// Adds `[start, end)`, seen at `ts_ns`, and reports what was new.
    pub fn add(&mut self, pool: &mut RangePool, start: i64, end: i64, ts_ns: u64) -> RangeOutcome {
        if end <= start {
            return RangeOutcome::default();
        }
        let len = (end - start) as u64;
        let set = if self.one.0 <= self.one.1 {
            // Not spilled. Fast paths: the first range, or appending at its end.
            if self.one.0 == self.one.1 {
                self.one = (start, end, ts_ns);
                return RangeOutcome { fresh: len, ..Default::default() };
            }
            if start == self.one.1 {
                self.one.1 = end;
                return RangeOutcome { fresh: len, ..Default::default() };
            }
            let i = pool.take();
            pool.sets[i as usize].push(self.one);
            self.one = (SPILLED, 0, u64::from(i));
            i as usize
        } else {
            self.one.2 as usize
        };
        let ranges = &mut pool.sets[set];
        let outcome = add_to(ranges, start, end, ts_ns);
        if ranges.len() == 1 {
            // The holes are filled: back inline.
            self.one = ranges[0];
            pool.give_back(set as u32);
        }
        outcome
    }
}

fn add_to(ranges: &mut Vec<Range>, start: i64, end: i64, ts_ns: u64) -> RangeOutcome {
    let len = (end - start) as u64;
    // Fast path: appending at or beyond the end.
    if let Some(last) = ranges.last_mut() {
        if start >= last.1 {
            if start == last.1 {
                last.1 = end;
            } else {
                ranges.push((start, end, ts_ns));
            }
            return RangeOutcome { fresh: len, ..Default::default() };
        }
    }
    let mut overlap = 0u64;
    for r in ranges.iter() {
        let lo = r.0.max(start);
        let hi = r.1.min(end);
        if hi > lo {
            overlap += (hi - lo) as u64;
        }
    }
    let fresh = len - overlap;
    // tcptrace's rule: fresh bytes that start in a gap and end before the range after it.
    let next = ranges.iter().find(|r| r.1 > start).copied();
    let fills_hole = fresh > 0 && next.is_some_and(|r| start < r.0 && end < r.1);
    let hole_opened_ns = if fills_hole { next.map_or(0, |r| r.2) } else { 0 };
    if fresh > 0 {
        insert_merge(ranges, start, end, ts_ns);
    }
    RangeOutcome { overlap, fresh, fills_hole, hole_opened_ns }
}

fn insert_merge(ranges: &mut Vec<Range>, start: i64, end: i64, ts_ns: u64) {
    // Index of the first range that ends at or after `start` (it may merge).
    let first = ranges.iter().position(|r| r.1 >= start).unwrap_or(ranges.len());
    let mut last = first;
    let (mut lo, mut hi) = (start, end);
    // A merged range keeps the opening time of its lowest part.
    let mut opened = if first < ranges.len() && ranges[first].0 <= start { ranges[first].2 } else { ts_ns };
    while last < ranges.len() && ranges[last].0 <= end {
        if ranges[last].0 < lo {
            opened = ranges[last].2;
        }
        lo = lo.min(ranges[last].0);
        hi = hi.max(ranges[last].1);
        last += 1;
    }
    ranges.drain(first..last);
    ranges.insert(first, (lo, hi, opened));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_crosses_the_32_bit_boundary() {
        let mut u = SeqUnwrapper::new(u32::MAX - 10);
        assert_eq!(u.unwrap(u32::MAX - 10), 0);
        assert_eq!(u.unwrap(5), 16);
        assert_eq!(u.unwrap(u32::MAX), 10);
        assert_eq!(u.unwrap(u32::MAX - 20), -10);
    }

    #[test]
    fn unwrap_follows_more_than_4_gib() {
        let mut u = SeqUnwrapper::new(0);
        let mut expected = 0i64;
        let mut seq = 0u32;
        for _ in 0..10 {
            seq = seq.wrapping_add(1 << 30);
            expected += 1 << 30;
            assert_eq!(u.unwrap(seq), expected);
        }
    }

    #[test]
    fn in_order_data_is_fresh() {
        let mut p = RangePool::default();
        let mut s = SeenRanges::default();
        assert_eq!(s.add(&mut p, 0, 1, 0).fresh, 1);
        assert_eq!(s.add(&mut p, 1, 101, 0).fresh, 100);
        assert_eq!(s.covered(&p), 101);
        assert_eq!(s.holes(&p), 0);
    }

    #[test]
    fn retransmission_overlaps_and_hole_fill_is_out_of_order() {
        let mut p = RangePool::default();
        let mut s = SeenRanges::default();
        s.add(&mut p, 0, 100, 0);
        s.add(&mut p, 200, 300, 7); // 100..200 lost before the probe: the hole opens at time 7
        assert_eq!(s.holes(&p), 1);
        let rtx = s.add(&mut p, 0, 100, 0);
        assert_eq!(rtx, RangeOutcome { overlap: 100, fresh: 0, fills_hole: false, hole_opened_ns: 0 });
        let fill = s.add(&mut p, 100, 200, 0);
        assert_eq!(fill, RangeOutcome { overlap: 0, fresh: 100, fills_hole: true, hole_opened_ns: 7 });
        assert_eq!(s.holes(&p), 0);
        assert_eq!(s.covered(&p), 300);
    }

    #[test]
    fn partial_overlap_counts_both_parts() {
        let mut p = RangePool::default();
        let mut s = SeenRanges::default();
        s.add(&mut p, 0, 100, 0);
        let o = s.add(&mut p, 50, 150, 0);
        assert_eq!(o, RangeOutcome { overlap: 50, fresh: 50, fills_hole: false, hole_opened_ns: 0 });
        assert_eq!(s.covered(&p), 150);
        assert!(s.contains(&p, 10, 150));
        assert!(!s.contains(&p, 10, 151));
    }

    #[test]
    fn merging_several_ranges() {
        let mut p = RangePool::default();
        let mut s = SeenRanges::default();
        for i in 0..6 {
            s.add(&mut p, i * 100, i * 100 + 50, 0);
        }
        assert_eq!(s.holes(&p), 5);
        let o = s.add(&mut p, 25, 575, 0);
        assert_eq!(o.overlap, 25 + 50 * 5);
        assert_eq!(s.holes(&p), 0);
        assert_eq!(s.covered(&p), 575);
    }
}
