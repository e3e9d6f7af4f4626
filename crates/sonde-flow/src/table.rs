//! The flow table: an open-addressing index (linear probing, backward-shift deletion) over a
//! slab of flow slots, plus intrusive recency lists that make idle expiry and longest-idle
//! eviction O(1) per flow instead of a scan. Slots are reused with their buffers, so a table in
//! steady state does not allocate. The slots' room is reserved for `max_flows` up front (address
//! space only until written); the index doubles as the flows grow, since its entries are spread
//! over all its pages and a full-size index would be resident from the first thousand flows.

use crate::key::FlowKey;

/// An index entry: the low 32 bits of the flow's place ([`FlowKey::place`]: its home position
/// and a tag that spares most key comparisons) above its slot number.
const EMPTY: u64 = u64::MAX;
const NIL: u32 = u32::MAX;

fn entry(place: u64, slot: u32) -> u64 {
    (place & 0xffff_ffff) << 32 | u64::from(slot)
}

fn entry_slot(e: u64) -> u32 {
    e as u32
}

/// The home position of an entry (the index is never longer than 2^32).
fn entry_home(e: u64, mask: usize) -> usize {
    (e >> 32) as usize & mask
}

/// The recency lists: each holds flows with one idle timeout, least recently active first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    TcpOpen = 0,
    TcpClosed = 1,
    Udp = 2,
}

pub const LANES: [Lane; 3] = [Lane::TcpOpen, Lane::TcpClosed, Lane::Udp];

#[derive(Debug, Clone, Copy, Default)]
struct List {
    head: u32,
    tail: u32,
}

/// Table load figures for the run summary.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TableStats {
    pub lookups: u64,
    /// Index slots inspected over all lookups (1 per lookup when there are no collisions).
    pub probes: u64,
    pub peak_live: u64,
    pub inserted: u64,
    /// Open flows ended early because the table was full.
    pub evicted: u64,
}

impl TableStats {
    /// Adds another table's counts; the peaks add up too (a bound: the tables peak apart).
    pub fn add(&mut self, other: &TableStats) {
        self.lookups += other.lookups;
        self.probes += other.probes;
        self.peak_live += other.peak_live;
        self.inserted += other.inserted;
        self.evicted += other.evicted;
    }

    pub fn mean_probe_len(&self) -> f64 {
        if self.lookups == 0 {
            0.0
        } else {
            self.probes as f64 / self.lookups as f64
        }
    }
}

/// One slot of the slab: the key, the recency links and the caller's value, together so that a
/// lookup touches one cache line.
#[derive(Debug)]
struct Link<V> {
    key: FlowKey,
    lane: Lane,
    live: bool,
    prev: u32,
    next: u32,
    last_ns: u64,
    value: V,
}

/// Index + slab + lanes, generic over the per-flow value so the analyzers stay separate.
#[derive(Debug)]
pub struct FlowTable<V> {
    index: Vec<u64>,
    links: Vec<Link<V>>,
    free: Vec<u32>,
    lists: [List; 3],
    live: usize,
    max_flows: usize,
    pub stats: TableStats,
}

impl<V> FlowTable<V> {
    /// A table that holds at most `max_flows` flows, with an index sized for `initial` flows.
    pub fn new(max_flows: usize, initial: usize) -> Self {
        let max_flows = max_flows.max(1);
        let initial = initial.clamp(1, max_flows);
        let index_len = (initial * 2).next_power_of_two().max(16);
        FlowTable {
            index: vec![EMPTY; index_len],
            links: Vec::with_capacity(max_flows),
            free: Vec::new(),
            lists: [List { head: NIL, tail: NIL }; 3],
            live: 0,
            max_flows,
            stats: TableStats::default(),
        }
    }

    pub fn len(&self) -> usize {
        self.live
    }

    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    pub fn is_full(&self) -> bool {
        self.live >= self.max_flows
    }

    #[inline]
    pub fn find(&mut self, key: &FlowKey, place: u64) -> Option<u32> {
        let mask = self.index.len() - 1;
        let mut pos = place as usize & mask;
        self.stats.lookups += 1;
        loop {
            self.stats.probes += 1;
            let e = self.index[pos];
            if e == EMPTY {
                return None;
            }
            if e >> 32 == place & 0xffff_ffff && self.links[entry_slot(e) as usize].key == *key {
                return Some(entry_slot(e));
            }
            pos = (pos + 1) & mask;
        }
    }

    /// Starts loading the index entry where a lookup of `place` begins.
    pub fn prefetch_index(&self, place: u64) {
        crate::prefetch(&self.index[place as usize & (self.index.len() - 1)]);
    }

    /// The slot of the first entry at `place`'s home position whose tag matches, without
    /// comparing keys: a guess, good enough to prefetch by.
    pub fn peek(&self, place: u64) -> Option<u32> {
        let e = self.index[place as usize & (self.index.len() - 1)];
        (e != EMPTY && e >> 32 == place & 0xffff_ffff).then_some(entry_slot(e))
    }

    pub fn prefetch_slot(&self, slot: u32) {
        if let Some(l) = self.links.get(slot as usize) {
            crate::prefetch(l);
        }
    }

    /// The value in `slot`, read only (live or not: for prefetching).
    pub fn peek_value(&self, slot: u32) -> &V {
        &self.links[slot as usize].value
    }

    /// Inserts a new flow (the caller checked it is absent and the table is not full) and
    /// returns its slot, whose value is `value`.
    pub fn insert(&mut self, key: FlowKey, place: u64, now_ns: u64, lane: Lane, value: V) -> u32 {
        if (self.live + 1) * 2 > self.index.len() {
            self.grow_index();
        }
        let slot = match self.free.pop() {
            Some(s) => {
                let l = &mut self.links[s as usize];
                l.key = key;
                l.last_ns = now_ns;
                l.live = true;
                l.value = value;
                s
            }
            None => {
                self.links.push(Link { key, lane, live: true, prev: NIL, next: NIL, last_ns: now_ns, value });
                (self.links.len() - 1) as u32
            }
        };
        let mask = self.index.len() - 1;
        let mut pos = place as usize & mask;
        while self.index[pos] != EMPTY {
            pos = (pos + 1) & mask;
        }
        self.index[pos] = entry(place, slot);
        self.push_tail(slot, lane);
        self.live += 1;
        self.stats.inserted += 1;
        self.stats.peak_live = self.stats.peak_live.max(self.live as u64);
        slot
    }

    /// Removes a flow with the given place; its value stays in the slab until the slot is reused.
    pub fn remove(&mut self, slot: u32, place: u64) {
        let lane = {
            let l = &self.links[slot as usize];
            debug_assert!(l.live);
            l.lane
        };
        self.unlink(slot, lane);
        let mask = self.index.len() - 1;
        let mut pos = place as usize & mask;
        while entry_slot(self.index[pos]) != slot {
            pos = (pos + 1) & mask;
        }
        // Backward-shift deletion keeps every probe sequence unbroken without tombstones.
        let mut hole = pos;
        let mut next = (hole + 1) & mask;
        while self.index[next] != EMPTY {
            let moved = self.index[next];
            let ideal = entry_home(moved, mask);
            if (next.wrapping_sub(ideal) & mask) >= (next.wrapping_sub(hole) & mask) {
                self.index[hole] = moved;
                hole = next;
            }
            next = (next + 1) & mask;
        }
        self.index[hole] = EMPTY;
        self.links[slot as usize].live = false;
        self.free.push(slot);
        self.live -= 1;
    }

    /// Marks activity: moves the flow to the tail of `lane`.
    pub fn touch(&mut self, slot: u32, now_ns: u64, lane: Lane) {
        let old = self.links[slot as usize].lane;
        self.unlink(slot, old);
        let l = &mut self.links[slot as usize];
        l.last_ns = l.last_ns.max(now_ns);
        self.push_tail(slot, lane);
    }

    /// The least recently active flow of `lane`, with its last activity time.
    pub fn oldest(&self, lane: Lane) -> Option<(u32, u64)> {
        let head = self.lists[lane as usize].head;
        (head != NIL).then(|| (head, self.links[head as usize].last_ns))
    }

    /// The least recently active flow of all lanes (the eviction victim).
    pub fn oldest_any(&self) -> Option<u32> {
        LANES.iter().filter_map(|&l| self.oldest(l)).min_by_key(|&(_, t)| t).map(|(s, _)| s)
    }

    /// Whether `slot` holds a flow now.
    pub fn is_live(&self, slot: u32) -> bool {
        self.links.get(slot as usize).is_some_and(|l| l.live)
    }

    /// The flow's last activity time.
    pub fn last_ns(&self, slot: u32) -> u64 {
        self.links[slot as usize].last_ns
    }

    pub fn key(&self, slot: u32) -> &FlowKey {
        &self.links[slot as usize].key
    }

    pub fn value(&mut self, slot: u32) -> &mut V {
        &mut self.links[slot as usize].value
    }

    /// Reserved slot bytes never written: address space, not memory.
    pub fn untouched_bytes(&self) -> usize {
        (self.links.capacity() - self.links.len()) * std::mem::size_of::<Link<V>>()
    }

    /// Live slots, in no particular order.
    pub fn live_slots(&self) -> Vec<u32> {
        (0..self.links.len() as u32).filter(|&s| self.links[s as usize].live).collect()
    }

    fn grow_index(&mut self) {
        let new_len = self.index.len() * 2;
        let mut index = vec![EMPTY; new_len];
        let mask = new_len - 1;
        for &e in self.index.iter().filter(|&&e| e != EMPTY) {
            let mut pos = entry_home(e, mask);
            while index[pos] != EMPTY {
                pos = (pos + 1) & mask;
            }
            index[pos] = e;
        }
        self.index = index;
    }

    fn unlink(&mut self, slot: u32, lane: Lane) {
        let (prev, next) = {
            let l = &self.links[slot as usize];
            (l.prev, l.next)
        };
        let list = &mut self.lists[lane as usize];
        if prev == NIL {
            list.head = next;
        } else {
            self.links[prev as usize].next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.links[next as usize].prev = prev;
        }
    }

    fn push_tail(&mut self, slot: u32, lane: Lane) {
        let tail = self.lists[lane as usize].tail;
        {
            let l = &mut self.links[slot as usize];
            l.lane = lane;
            l.prev = tail;
            l.next = NIL;
        }
        if tail == NIL {
            self.lists[lane as usize].head = slot;
        } else {
            self.links[tail as usize].next = slot;
        }
        self.lists[lane as usize].tail = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn key(i: u32) -> FlowKey {
        let a: IpAddr = std::net::Ipv4Addr::from(i).into();
        let b: IpAddr = "10.0.0.1".parse().unwrap();
        FlowKey::new(17, (a, 1000), (b, 53)).0
    }

    #[test]
    fn insert_find_remove_many() {
        let mut t: FlowTable<u32> = FlowTable::new(10_000, 4);
        let mut slots = Vec::new();
        for i in 0..5000 {
            let k = key(i);
            assert_eq!(t.find(&k, k.place()), None);
            slots.push(t.insert(k, k.place(), u64::from(i), Lane::Udp, i));
        }
        for i in (0..5000).step_by(2) {
            t.remove(slots[i as usize], key(i).place());
        }
        for i in 0..5000 {
            let k = key(i);
            let found = t.find(&k, k.place());
            assert_eq!(found.is_some(), i % 2 == 1, "flow {i}");
        }
        assert_eq!(t.len(), 2500);
        assert_eq!(t.stats.peak_live, 5000);
    }

    #[test]
    fn lanes_keep_recency_order() {
        let mut t: FlowTable<u32> = FlowTable::new(10, 10);
        let s: Vec<u32> = (0..3).map(|i| t.insert(key(i), key(i).place(), u64::from(i), Lane::TcpOpen, i)).collect();
        assert_eq!(t.oldest(Lane::TcpOpen), Some((s[0], 0)));
        t.touch(s[0], 10, Lane::TcpOpen);
        assert_eq!(t.oldest(Lane::TcpOpen), Some((s[1], 1)));
        t.touch(s[1], 11, Lane::TcpClosed);
        assert_eq!(t.oldest(Lane::TcpOpen), Some((s[2], 2)));
        assert_eq!(t.oldest(Lane::TcpClosed), Some((s[1], 11)));
        assert_eq!(t.oldest_any(), Some(s[2]));
        t.remove(s[2], key(2).place());
        assert_eq!(t.oldest_any(), Some(s[0]));
    }

    /// IPv6 sources whose halves xor to one value: one run-independent hash for all of them
    /// (a flood aimed at the table), yet spread over the index by the run's secret.
    #[test]
    fn a_flood_of_equal_folds_does_not_share_a_probe_sequence() {
        let server: IpAddr = "2001:db8::1".parse().unwrap();
        let keys: Vec<FlowKey> = (0..4096u128)
            .map(|i| {
                let halves = (i << 64) | i; // high ^ low == 0 for every one
                FlowKey::new(6, (std::net::Ipv6Addr::from(halves).into(), 40_000), (server, 443)).0
            })
            .collect();
        assert!(keys.windows(2).all(|w| w[0].hash64() == w[1].hash64()), "the fold collides by design");
        let mut t: FlowTable<u32> = FlowTable::new(8192, 8192);
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(t.find(k, k.place()), None);
            t.insert(*k, k.place(), 0, Lane::TcpOpen, i as u32);
        }
        assert!(t.stats.mean_probe_len() < 2.0, "mean probe length {}", t.stats.mean_probe_len());
    }
}
