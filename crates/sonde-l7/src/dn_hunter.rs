//! DN-Hunter's cache (Bermudez et al.): the DNS answers a probe saw, as (client, address) →
//! the answer, so that a flow is labelled with the last name its client resolved to the server's
//! address before the flow began.
//!
//! The entries sit in a ring in the order they were written, `capacity` slots at most; the
//! oldest slot is the next one written, so the oldest answer goes first. A renewed entry
//! (the same client and address answered again) takes a new slot and leaves its old one empty,
//! to be reused when the ring comes round to it: the cache then holds fewer than `capacity`
//! entries for a while, never more. A table of slot numbers (4 bytes each) finds an entry by its
//! pair under a keyed hash (random keys per run: the pairs are what the traffic says). The
//! answer itself, name and resolver, is shared by every address it gave.

use std::net::IpAddr;
use std::sync::Arc;

use ahash::RandomState;
use hashbrown::HashTable;

use crate::Resolved;

/// (client, address) → the answer that gave the client the address, `capacity` at most.
pub struct DnsCache {
    capacity: usize,
    /// The ring; its length grows to `capacity`, and `next` is the slot written next.
    slots: Vec<Slot>,
    next: usize,
    /// The slots that hold an entry, by their pair.
    index: HashTable<u32>,
    hasher: RandomState,
}

/// One entry: 48 bytes (the two addresses take 17 each).
struct Slot {
    client: IpAddr,
    address: IpAddr,
    /// None: empty (renewed elsewhere in the ring).
    resolved: Option<Arc<Resolved>>,
}

impl DnsCache {
    /// A cache of at most `capacity` entries; 0 keeps none. Slot numbers are 32-bit: the
    /// capacity is capped at 2³² − 1 (about 200 GB of entries).
    pub fn new(capacity: usize) -> DnsCache {
        let capacity = capacity.min(u32::MAX as usize);
        DnsCache { capacity, slots: Vec::new(), next: 0, index: HashTable::new(), hasher: RandomState::new() }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The answer that gave `client` the address `server`, if the cache holds it.
    pub fn lookup(&self, client: IpAddr, server: IpAddr) -> Option<Arc<Resolved>> {
        if self.index.is_empty() {
            return None;
        }
        let hash = self.hasher.hash_one((client, server));
        let at = self.index.find(hash, |&s| self.holds(s, client, server))?;
        self.slots[*at as usize].resolved.clone()
    }

    /// Writes (or renews) the entry (client, address) → `resolved` in the oldest slot; returns
    /// whether an entry was evicted to make room.
    pub fn insert(&mut self, client: IpAddr, address: IpAddr, resolved: Arc<Resolved>) -> bool {
        if self.capacity == 0 {
            return false;
        }
        let slots = &mut self.slots;
        let hasher = &self.hasher;
        let hash = hasher.hash_one((client, address));
        // A renewal: its old slot empties, and its index entry comes out (put back below).
        if let Ok(old) = self.index.find_entry(hash, |&s| slot_holds(&slots[s as usize], client, address)) {
            let (s, _) = old.remove();
            slots[s as usize].resolved = None;
        }
        let at = self.next;
        let mut evicted = false;
        if at == slots.len() {
            if slots.len() == slots.capacity() {
                // Doubling, but never past the capacity: a full ring has no slack.
                let more = slots.len().max(16).min(self.capacity - slots.len());
                slots.reserve_exact(more);
            }
            slots.push(Slot { client, address, resolved: Some(resolved) });
        } else {
            let old = &slots[at];
            if old.resolved.is_some() {
                let old_hash = hasher.hash_one((old.client, old.address));
                if let Ok(e) = self.index.find_entry(old_hash, |&s| s as usize == at) {
                    e.remove();
                }
                evicted = true;
            }
            slots[at] = Slot { client, address, resolved: Some(resolved) };
        }
        let slots = &self.slots;
        let rehash = |s: &u32| {
            let slot = &slots[*s as usize];
            hasher.hash_one((slot.client, slot.address))
        };
        self.index.insert_unique(hash, at as u32, rehash);
        self.next = (at + 1) % self.capacity;
        evicted
    }

    fn holds(&self, s: u32, client: IpAddr, address: IpAddr) -> bool {
        slot_holds(&self.slots[s as usize], client, address)
    }

    /// Heap bytes the cache holds: its slots and index (the answers are shared with the flows).
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Slot>() + self.index.allocation_size()
    }
}

fn slot_holds(slot: &Slot, client: IpAddr, address: IpAddr) -> bool {
    slot.client == client && slot.address == address && slot.resolved.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(name: &str) -> Arc<Resolved> {
        Arc::new(Resolved { name: name.into(), resolver: "9.9.9.9".parse().unwrap(), answer_ns: 1, query_ns: 0 })
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_newest_answers_stay_within_the_capacity() {
        let mut c = DnsCache::new(2);
        let (a, b, x, y, z) = (ip("10.0.0.1"), ip("10.0.0.2"), ip("1.1.1.1"), ip("2.2.2.2"), ip("3.3.3.3"));
        assert!(!c.insert(a, x, resolved("x.example")));
        assert!(!c.insert(a, y, resolved("y.example")));
        // Renewing x writes over its own (oldest) slot: y is now the oldest.
        assert!(!c.insert(a, x, resolved("x2.example")));
        assert!(c.insert(b, z, resolved("z.example")));
        assert!(c.lookup(a, y).is_none());
        assert_eq!(c.lookup(a, x).unwrap().name.as_ref() as &str, "x2.example");
        assert_eq!(c.lookup(b, z).unwrap().name.as_ref() as &str, "z.example");
        assert!(c.lookup(b, x).is_none(), "answers belong to the client that asked");
        assert_eq!(c.len(), 2);
        for i in 0..1000u32 {
            c.insert(a, x, resolved(&i.to_string()));
        }
        assert_eq!(c.lookup(a, x).unwrap().name.as_ref() as &str, "999");
        assert!(c.len() <= 2 && c.slots.len() == 2, "a ring of the capacity: {}", c.slots.len());
    }

    #[test]
    fn a_renewal_leaves_an_empty_slot_that_evicts_nothing() {
        let mut c = DnsCache::new(3);
        let (a, x, y, z, w) = (ip("10.0.0.1"), ip("1.1.1.1"), ip("2.2.2.2"), ip("3.3.3.3"), ip("4.4.4.4"));
        c.insert(a, x, resolved("x"));
        c.insert(a, y, resolved("y"));
        c.insert(a, x, resolved("x2")); // slot 0 empties; x now in slot 2
        assert_eq!(c.len(), 2);
        assert!(!c.insert(a, z, resolved("z")), "slot 0 was empty");
        assert!(c.insert(a, w, resolved("w")), "slot 1 held y, the oldest");
        assert!(c.lookup(a, y).is_none());
        for (addr, name) in [(x, "x2"), (z, "z"), (w, "w")] {
            assert_eq!(c.lookup(a, addr).unwrap().name.as_ref() as &str, name);
        }
    }

    #[test]
    fn families_and_capacity_zero() {
        let mut c = DnsCache::new(4);
        let (a4, a6) = (ip("10.0.0.1"), ip("2001:db8::1"));
        let (x4, x6) = (ip("1.2.3.4"), ip("::ffff:1.2.3.4"));
        c.insert(a4, x4, resolved("v4"));
        c.insert(a6, x6, resolved("v6"));
        assert_eq!(c.lookup(a4, x4).unwrap().name.as_ref() as &str, "v4");
        assert!(c.lookup(a4, x6).is_none(), "a v4-mapped address is another address");
        assert_eq!(c.lookup(a6, x6).unwrap().name.as_ref() as &str, "v6");
        let mut none = DnsCache::new(0);
        assert!(!none.insert(a4, x4, resolved("v4")));
        assert!(none.lookup(a4, x4).is_none() && none.is_empty());
    }

    /// The ring against a model (a map and a queue of insertion numbers) over a random stream.
    #[test]
    fn agrees_with_a_queue_model() {
        use std::collections::{HashMap, VecDeque};
        let mut c = DnsCache::new(50);
        let mut model: HashMap<(IpAddr, IpAddr), (String, usize)> = HashMap::new();
        let mut ring: VecDeque<Option<(IpAddr, IpAddr)>> = VecDeque::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for n in 0..20_000usize {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let client = IpAddr::from([10, 0, 0, (x % 7) as u8]);
            let address = IpAddr::from([1, 1, (x >> 8) as u8 % 13, 1]);
            let name = n.to_string();
            // The model: a ring of 50 slots in write order.
            // A name written again leaves its old slot empty (and the model, until re-added).
            if let Some((_, at)) = model.remove(&(client, address)) {
                ring[at] = None;
            }
            let mut evicted = false;
            if ring.len() == 50 {
                if let Some(old) = ring.pop_front().unwrap() {
                    model.remove(&old);
                    evicted = true;
                }
                for (_, at) in model.values_mut() {
                    *at -= 1;
                }
            }
            ring.push_back(Some((client, address)));
            model.insert((client, address), (name.clone(), ring.len() - 1));
            assert_eq!(c.insert(client, address, resolved(&name)), evicted, "insert {n}");
            assert_eq!(c.len(), model.len());
            let probe = (IpAddr::from([10, 0, 0, (x >> 20) as u8 % 7]), IpAddr::from([1, 1, (x >> 28) as u8 % 13, 1]));
            let want = model.get(&probe).map(|(s, _)| s.as_str());
            assert_eq!(c.lookup(probe.0, probe.1).as_deref().map(|r| &*r.name), want, "lookup {n}");
        }
    }
}
