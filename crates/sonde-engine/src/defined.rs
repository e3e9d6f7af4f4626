//! Flow definitions across worker threads. The matcher (the costly part: the patterns) runs in
//! the workers, on a copy of the frame bytes the patterns can read; what each packet matched
//! comes back with its sequence number, and the reader puts the workers' answers back in input
//! order for the counter. Counts, caps, gaps, flows and associations are then exactly those of
//! one thread — any FID may span workers (`key ip.src`), and gaps and associations need its
//! packets in order — whatever the thread count.

use std::collections::VecDeque;
use std::ops::Range;

use sonde_define::{Counter, Layers, Match, Matcher, SetChange};

/// A layer offset the packet does not have.
const ABSENT: u32 = u32::MAX;

/// A packet for the matcher in a worker: where its layers start in its bytes.
#[derive(Debug, Clone, Copy)]
struct Packet {
    seq: u64,
    ts_ns: u64,
    wire_len: u32,
    /// Its bytes: `bytes[at..at + len]` of the batch.
    at: u32,
    len: u32,
    l3: u32,
    l4: u32,
    payload: u32,
    meta: [u8; sonde_define::fields::meta::LEN],
}

/// A packet that matched: its `n` matches follow the previous one's in the batch.
#[derive(Debug, Clone, Copy)]
struct Found {
    seq: u64,
    ts_ns: u64,
    wire_len: u32,
    n: u32,
}

/// A batch's packets for the matcher and, on its way back, what they matched.
#[derive(Debug, Default)]
pub(crate) struct DefBatch {
    /// The worker it was sent to, and the sequence number below which the reader had sent that
    /// worker every packet of its share.
    worker: usize,
    covers: u64,
    packets: Vec<Packet>,
    bytes: Vec<u8>,
    found: Vec<Found>,
    matches: Vec<Match>,
    scratch: Vec<Match>,
}

/// Bytes a batch collects before it is sent, whatever its packet count (deep payload patterns
/// copy whole frames).
const MAX_BATCH_BYTES: usize = 1 << 20;

impl DefBatch {
    /// Adds packet `seq` with the first `prefix` bytes of its frame.
    pub(crate) fn push(&mut self, seq: u64, ts_ns: u64, wire_len: u32, layers: &Layers<'_>, prefix: usize) {
        let at = self.bytes.len() as u32;
        self.bytes.extend_from_slice(&layers.frame[..prefix]);
        self.packets.push(Packet {
            seq,
            ts_ns,
            wire_len,
            at,
            len: prefix as u32,
            l3: layers.l3.unwrap_or(ABSENT),
            l4: layers.l4.unwrap_or(ABSENT),
            payload: layers.payload.unwrap_or(ABSENT),
            meta: layers.meta,
        });
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// Whether the batch should go now.
    pub(crate) fn is_full(&self, batch_len: usize) -> bool {
        self.packets.len() >= batch_len || self.bytes.len() >= MAX_BATCH_BYTES
    }

    pub(crate) fn address(&mut self, worker: usize, covers: u64) {
        (self.worker, self.covers) = (worker, covers);
    }

    /// In the worker: matches every packet, keeping what they matched for the reader.
    pub(crate) fn match_all(&mut self, matcher: &Matcher) {
        let DefBatch { packets, bytes, found, matches, scratch, .. } = self;
        let layer = |at: u32| (at != ABSENT).then_some(at);
        for p in packets.iter() {
            let frame = &bytes[p.at as usize..(p.at + p.len) as usize];
            let layers = Layers { frame, l3: layer(p.l3), l4: layer(p.l4), payload: layer(p.payload), meta: p.meta };
            matcher.matches(&layers, scratch);
            if !scratch.is_empty() {
                matches.extend_from_slice(scratch);
                found.push(Found { seq: p.seq, ts_ns: p.ts_ns, wire_len: p.wire_len, n: scratch.len() as u32 });
            }
        }
        packets.clear();
        bytes.clear();
    }
}

/// A first-in first-out queue read from a vector's front (cheaper than a ring for runs of
/// several items taken at once).
#[derive(Debug, Clone)]
struct Queue<T> {
    items: Vec<T>,
    head: usize,
}

impl<T: Copy> Queue<T> {
    fn new() -> Self {
        Queue { items: Vec::new(), head: 0 }
    }

    fn extend(&mut self, more: &[T]) {
        if self.head == self.items.len() {
            self.items.clear();
            self.head = 0;
        } else if self.head > self.items.len() / 2 {
            self.items.drain(..self.head);
            self.head = 0;
        }
        self.items.extend_from_slice(more);
    }

    fn front(&self) -> Option<&T> {
        self.items.get(self.head)
    }

    /// The next `n` items' positions, taken.
    fn take(&mut self, n: usize) -> Range<usize> {
        let at = self.head;
        self.head += n;
        at..self.head
    }
}

/// In the reader: the workers' matches, put back in input order.
pub(crate) struct Reorder {
    found: Vec<Queue<Found>>,
    matches: Vec<Queue<Match>>,
    /// Per worker: every packet below this sequence number has come back.
    covered: Vec<u64>,
    /// Changes to the set, each before the packet of its sequence number.
    changes: VecDeque<(u64, SetChange)>,
    /// Answers arrived since the last drain.
    fresh: bool,
}

impl Reorder {
    pub(crate) fn new(workers: usize) -> Self {
        Reorder {
            found: vec![Queue::new(); workers],
            matches: vec![Queue::new(); workers],
            covered: vec![0; workers],
            changes: VecDeque::new(),
            fresh: false,
        }
    }

    /// Takes the answers a batch brought back (a batch that went nowhere brings none).
    pub(crate) fn receive(&mut self, batch: &mut DefBatch) {
        let w = batch.worker;
        self.found[w].extend(&batch.found);
        self.matches[w].extend(&batch.matches);
        batch.found.clear();
        batch.matches.clear();
        self.covered[w] = self.covered[w].max(batch.covers);
        self.fresh = true;
    }

    /// A change to the set that takes effect at packet `seq`.
    pub(crate) fn change(&mut self, seq: u64, change: SetChange) {
        self.changes.push_back((seq, change));
    }

    /// Whether answers arrived since the last drain.
    pub(crate) fn has_fresh(&self) -> bool {
        self.fresh
    }

    /// Counts, in input order, every packet all workers have answered for.
    pub(crate) fn drain(&mut self, counter: &mut Counter) {
        self.fresh = false;
        let limit = self.covered.iter().copied().min().unwrap_or(u64::MAX);
        loop {
            let next = (0..self.found.len())
                .filter_map(|w| self.found[w].front().map(|f| (f.seq, w)))
                .min()
                .filter(|&(seq, _)| seq < limit);
            if let Some(&(at, change)) = self.changes.front() {
                if at <= next.map_or(limit, |(seq, _)| seq) {
                    counter.settle(change);
                    self.changes.pop_front();
                    continue;
                }
            }
            let Some((_, w)) = next else { return };
            let at = self.found[w].take(1).start;
            let f = self.found[w].items[at];
            let matches = self.matches[w].take(f.n as usize);
            counter.count(f.ts_ns, f.wire_len, &self.matches[w].items[matches]);
        }
    }

    /// Counts everything left: every worker has answered for every packet.
    pub(crate) fn finish(&mut self, counter: &mut Counter) {
        self.covered.fill(u64::MAX);
        self.drain(counter);
    }
}
