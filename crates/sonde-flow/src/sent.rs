//! Data segments waiting for their ACK (RTT matching), kept in one pool per tracker: each
//! direction of a flow holds a singly linked list of pool nodes in sequence order, so memory
//! follows the segments actually in flight and freed nodes are reused without allocating.

use rustc_hash::FxHashMap;

const NIL: u32 = u32::MAX;

/// A data segment waiting for its ACK: 24 bytes (when it was last sent, once retransmitted,
/// is kept apart in [`SentPool`], since few segments are).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sent {
    pub start: i64,
    pub ts_ns: u64,
    /// Payload length.
    pub len: u32,
    /// The next node of the list (or of the free list).
    next: u32,
}

/// Flag bits kept in the top of `len` (a TCP payload is far below 2^30 bytes).
const FIN_BIT: u32 = 1 << 31;
const RETX_BIT: u32 = 1 << 30;
const LEN_MASK: u32 = RETX_BIT - 1;

impl Sent {
    pub fn new(start: i64, payload: u64, fin: bool, ts_ns: u64) -> Sent {
        let len = payload.min(u64::from(LEN_MASK)) as u32 | if fin { FIN_BIT } else { 0 };
        Sent { start, ts_ns, len, next: NIL }
    }
    /// End of the payload.
    pub fn end(&self) -> i64 {
        self.start + i64::from(self.len & LEN_MASK)
    }
    /// End including a FIN, if the segment carried one.
    pub fn end_ctl(&self) -> i64 {
        self.end() + i64::from(self.len & FIN_BIT != 0)
    }
    /// Karn's rule: a retransmitted range gives no RTT sample.
    pub fn retransmitted(&self) -> bool {
        self.len & RETX_BIT != 0
    }
}

/// The nodes of every list, and the free list threaded through them.
#[derive(Debug)]
pub(crate) struct SentPool {
    nodes: Vec<Sent>,
    free: u32,
    in_use: usize,
    /// When each retransmitted node in use was last sent, by node.
    resent_ns: FxHashMap<u32, u64>,
}

impl Default for SentPool {
    fn default() -> Self {
        SentPool::with_capacity(0)
    }
}

impl SentPool {
    /// A pool with room for `n` nodes reserved (address space until written; more grow it).
    pub fn with_capacity(n: usize) -> Self {
        SentPool { nodes: Vec::with_capacity(n), free: NIL, in_use: 0, resent_ns: FxHashMap::default() }
    }

    /// Reserved bytes never written.
    pub fn untouched_bytes(&self) -> usize {
        (self.nodes.capacity() - self.nodes.len()) * std::mem::size_of::<Sent>()
    }

    fn alloc(&mut self, s: Sent) -> u32 {
        self.in_use += 1;
        if self.free != NIL {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = s;
            i
        } else {
            self.nodes.push(s);
            (self.nodes.len() - 1) as u32
        }
    }

    /// When node `i` was last sent.
    fn last_sent_ns(&self, i: u32) -> u64 {
        let node = &self.nodes[i as usize];
        if node.retransmitted() {
            self.resent_ns[&i]
        } else {
            node.ts_ns
        }
    }

    /// Returns node `i` to the free list.
    fn free_node(&mut self, i: u32) {
        if self.nodes[i as usize].retransmitted() {
            self.resent_ns.remove(&i);
        }
        self.nodes[i as usize].next = self.free;
        self.free = i;
        self.in_use -= 1;
    }

    #[cfg(test)]
    pub fn in_use(&self) -> usize {
        self.in_use
    }
}

/// One direction's list: sorted by `start`. Ten bytes, aligned to two (fields only read by
/// value).
#[derive(Debug, Clone, Copy)]
#[repr(C, packed(2))]
pub(crate) struct SentList {
    head: u32,
    tail: u32,
    /// At most `MAX_LEN`: the caller drops the oldest segment past its own bound, which is lower.
    len: u16,
}

/// The most segments a list may hold.
pub(crate) const MAX_LEN: usize = u16::MAX as usize;

impl Default for SentList {
    fn default() -> Self {
        SentList { head: NIL, tail: NIL, len: 0 }
    }
}

impl SentList {
    pub fn len(&self) -> usize {
        self.len as usize
    }

    pub fn front(&self, pool: &SentPool) -> Option<Sent> {
        (self.head != NIL).then(|| pool.nodes[self.head as usize])
    }

    /// When the first segment's bytes were last sent (its first time, unless retransmitted).
    pub fn front_last_sent_ns(&self, pool: &SentPool) -> Option<u64> {
        (self.head != NIL).then(|| pool.last_sent_ns(self.head))
    }

    pub fn pop_front(&mut self, pool: &mut SentPool) {
        let i = self.head;
        if i == NIL {
            return;
        }
        self.head = pool.nodes[i as usize].next;
        if self.head == NIL {
            self.tail = NIL;
        }
        self.len -= 1;
        pool.free_node(i);
    }

    /// Marks every segment overlapping `[start, end)` as retransmitted at `ts_ns` (Karn's rule:
    /// no RTT sample from them).
    pub fn mark_retransmitted(&self, pool: &mut SentPool, start: i64, end: i64, ts_ns: u64) {
        let mut cur = self.head;
        while cur != NIL {
            let node = &mut pool.nodes[cur as usize];
            if node.start < end && start < node.end_ctl() {
                node.len |= RETX_BIT;
                pool.resent_ns.insert(cur, ts_ns);
            }
            cur = pool.nodes[cur as usize].next;
        }
    }

    /// Inserts in `start` order: at the tail unless the tail starts later, else before the
    /// first node starting at or after it.
    pub fn insert(&mut self, pool: &mut SentPool, s: Sent) {
        let i = pool.alloc(s);
        self.len += 1;
        if self.tail == NIL {
            self.head = i;
            self.tail = i;
            return;
        }
        if pool.nodes[self.tail as usize].start <= s.start {
            pool.nodes[self.tail as usize].next = i;
            self.tail = i;
            return;
        }
        // Out of order: before the first node that starts at or after it.
        let mut prev = NIL;
        let mut cur = self.head;
        while cur != NIL && pool.nodes[cur as usize].start < s.start {
            prev = cur;
            cur = pool.nodes[cur as usize].next;
        }
        pool.nodes[i as usize].next = cur;
        if prev == NIL {
            self.head = i;
        } else {
            pool.nodes[prev as usize].next = i;
        }
    }

    /// Calls `f` on every node, in order, until it returns false.
    pub fn for_each_mut(&self, pool: &mut SentPool, mut f: impl FnMut(&mut Sent) -> bool) {
        let mut cur = self.head;
        while cur != NIL {
            let node = &mut pool.nodes[cur as usize];
            let next = node.next;
            if !f(node) {
                return;
            }
            cur = next;
        }
    }

    /// Returns every node to the pool.
    pub fn clear(&mut self, pool: &mut SentPool) {
        if !pool.resent_ns.is_empty() {
            // Node by node, so that retransmitted ones leave the side table.
            while self.head != NIL {
                self.pop_front(pool);
            }
        } else if self.head != NIL {
            pool.nodes[self.tail as usize].next = pool.free;
            pool.free = self.head;
            pool.in_use -= self.len as usize;
        }
        *self = SentList::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn starts(l: &SentList, pool: &mut SentPool) -> Vec<i64> {
        let mut v = Vec::new();
        l.for_each_mut(pool, |s| {
            v.push(s.start);
            true
        });
        v
    }

    #[test]
    fn sorted_insert_pop_and_reuse() {
        let mut pool = SentPool::default();
        let mut l = SentList::default();
        for start in [10, 20, 15, 5, 20] {
            l.insert(&mut pool, Sent::new(start, 5, false, 1));
        }
        assert_eq!(starts(&l, &mut pool), [5, 10, 15, 20, 20]);
        l.pop_front(&mut pool);
        assert_eq!(l.front(&pool).map(|s| s.start), Some(10));
        assert_eq!(l.len(), 4);
        l.clear(&mut pool);
        assert_eq!(pool.in_use(), 0);
        let mut m = SentList::default();
        for start in 0..5 {
            m.insert(&mut pool, Sent::new(start, 1, start == 4, 1));
        }
        assert_eq!(pool.nodes.len(), 5, "freed nodes are reused");
        let last = m.front(&pool).unwrap();
        assert_eq!((last.end(), last.end_ctl()), (1, 1));
    }
}
