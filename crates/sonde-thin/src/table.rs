//! The table of open handshakes: an array of slots, direct-mapped by a hash of the ACK the
//! handshake waits for (client → server addresses and ports, the client's ISN + 1). Nothing is
//! allocated per packet: only a re-size ([`HandshakeTable::resized`]) makes a new array.
//!
//! A slot holds the 64-bit hash itself as its tag, so a lookup reads one 16-byte slot. Two live
//! handshakes that map to one slot cannot both be kept: the slot is then marked collided, and
//! every pure ACK that maps to it passes until the later of the two would have expired — a
//! collision costs a few ACKs kept, never a handshake lost.

/// A free slot.
const EMPTY: u64 = 0;
/// A slot claimed by two or more live handshakes: every pure ACK mapping to it passes.
const COLLIDED: u64 = u64::MAX;

#[derive(Debug, Clone, Copy)]
struct Slot {
    /// `EMPTY`, `COLLIDED` or the hash of the awaited ACK.
    tag: u64,
    /// Packet time after which the entry is stale and the slot free for another handshake.
    expires_ns: u64,
}

/// What a lookup for a pure ACK found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lookup {
    /// The awaited ACK of a handshake (its entry is removed); `late` when it came after the
    /// entry's expiry but before the slot was reused.
    Handshake { late: bool },
    /// The slot is collided and live: the ACK may be a handshake's, so it passes.
    Collided,
    /// No handshake waits for this ACK.
    Miss,
}

/// What an insertion did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Insert {
    /// A new entry; `expired` when it took the slot of one stale handshake.
    New { expired: bool },
    /// The same handshake again (a retransmitted SYN/ACK): its expiry moves on.
    Repeat,
    /// The slot held another live handshake, or (`already`) was collided: now collided.
    Collision { already: bool },
}

/// Fixed-size, direct-mapped table of open handshakes.
#[derive(Clone)]
pub struct HandshakeTable {
    slots: Box<[Slot]>,
    /// Slots holding a live or not yet swept entry (tagged or collided).
    occupied: usize,
}

/// Its size and load, not its thousands of slots.
impl std::fmt::Debug for HandshakeTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HandshakeTable").field("slots", &self.slots.len()).field("occupied", &self.occupied).finish()
    }
}

impl HandshakeTable {
    /// A table of `slots` slots (at least 1), all free.
    pub fn new(slots: usize) -> HandshakeTable {
        let slots = slots.max(1);
        HandshakeTable { slots: vec![Slot { tag: EMPTY, expires_ns: 0 }; slots].into_boxed_slice(), occupied: 0 }
    }

    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Bytes the slots take.
    pub fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.slots)
    }

    pub fn occupied(&self) -> usize {
        self.occupied
    }

    /// The slot of `hash`: its high 32 bits scaled to the table (a multiply, no division). The
    /// table holds at most 2^32 slots (`Config::slots` caps it well below).
    fn index(&self, hash: u64) -> usize {
        (((hash >> 32) * self.slots.len() as u64) >> 32) as usize
    }

    /// Records a handshake awaiting the ACK of hash `hash` until `expires_ns`.
    pub fn insert(&mut self, hash: u64, now_ns: u64, expires_ns: u64) -> Insert {
        let tag = tag_of(hash);
        let i = self.index(hash);
        let slot = &mut self.slots[i];
        if slot.tag == EMPTY || slot.expires_ns < now_ns {
            if slot.tag == EMPTY {
                self.occupied += 1;
            }
            // A stale collided slot held several handshakes: not counted as one expiry.
            let expired = slot.tag != EMPTY && slot.tag != COLLIDED;
            *slot = Slot { tag, expires_ns };
            return Insert::New { expired };
        }
        if slot.tag == tag {
            slot.expires_ns = slot.expires_ns.max(expires_ns);
            return Insert::Repeat;
        }
        let already = slot.tag == COLLIDED;
        slot.tag = COLLIDED;
        slot.expires_ns = slot.expires_ns.max(expires_ns);
        Insert::Collision { already }
    }

    /// Looks up a pure ACK of hash `hash`, removing the handshake it completes.
    pub fn lookup(&mut self, hash: u64, now_ns: u64) -> Lookup {
        let tag = tag_of(hash);
        let i = self.index(hash);
        let slot = &mut self.slots[i];
        if slot.tag == tag {
            // Known to be the handshake's ACK even if late: keeping it costs nothing.
            let late = slot.expires_ns < now_ns;
            slot.tag = EMPTY;
            self.occupied -= 1;
            return Lookup::Handshake { late };
        }
        if slot.tag == COLLIDED && slot.expires_ns >= now_ns {
            return Lookup::Collided;
        }
        Lookup::Miss
    }

    /// The same entries in a table of `slots` slots: each tagged entry moves to its slot there
    /// (the slot comes from the tag's high bits, which are the hash's), and a collided slot
    /// marks collided every new slot its hashes map to, so no handshake a collided slot covered
    /// is lost; entries that meet in one new slot collide.
    pub fn resized(&self, slots: usize) -> HandshakeTable {
        let mut table = HandshakeTable::new(slots);
        let old = self.slots.len() as u128;
        for (i, slot) in self.slots.iter().enumerate().filter(|(_, s)| s.tag != EMPTY) {
            if slot.tag != COLLIDED {
                table.put(table.index(slot.tag), slot.tag, slot.expires_ns);
                continue;
            }
            // The high 32 bits that map to old slot i: from ⌈i·2³²/old⌉ to ⌈(i+1)·2³²/old⌉ − 1.
            let first = ((i as u128) << 32).div_ceil(old) as u64;
            let last = (((i as u128 + 1) << 32).div_ceil(old) - 1) as u64;
            for j in table.index(first << 32)..=table.index(last << 32) {
                table.put(j, COLLIDED, slot.expires_ns);
            }
        }
        table
    }

    /// Puts an entry in slot `j`: it collides with another already there.
    fn put(&mut self, j: usize, tag: u64, expires_ns: u64) {
        let slot = &mut self.slots[j];
        if slot.tag == EMPTY {
            self.occupied += 1;
            *slot = Slot { tag, expires_ns };
            return;
        }
        if slot.tag != tag {
            slot.tag = COLLIDED;
        }
        slot.expires_ns = slot.expires_ns.max(expires_ns);
    }

    /// Frees every slot whose entry expired before `now_ns`; returns how many held one
    /// handshake (collided slots are not counted: how many they held is not known).
    pub fn sweep(&mut self, now_ns: u64) -> u64 {
        let mut expired = 0;
        for slot in self.slots.iter_mut() {
            if slot.tag != EMPTY && slot.expires_ns < now_ns {
                expired += u64::from(slot.tag != COLLIDED);
                slot.tag = EMPTY;
                self.occupied -= 1;
            }
        }
        expired
    }
}

/// The tag of a hash: never `EMPTY` nor `COLLIDED`.
fn tag_of(hash: u64) -> u64 {
    match hash {
        EMPTY => 1,
        COLLIDED => COLLIDED - 1,
        h => h,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two hashes that share a slot in a table of `n` slots (same high bits).
    fn same_slot(n: usize) -> (u64, u64) {
        let t = HandshakeTable::new(n);
        let a = 0x1234_5678_0000_0001;
        let b = 0x1234_5678_0000_0002;
        assert_eq!(t.index(a), t.index(b));
        (a, b)
    }

    #[test]
    fn an_entry_is_found_once() {
        let mut t = HandshakeTable::new(64);
        assert_eq!(t.insert(7 << 40, 0, 100), Insert::New { expired: false });
        assert_eq!(t.occupied(), 1);
        assert_eq!(t.lookup(8 << 40, 10), Lookup::Miss);
        assert_eq!(t.lookup(7 << 40, 10), Lookup::Handshake { late: false });
        assert_eq!(t.lookup(7 << 40, 11), Lookup::Miss);
        assert_eq!(t.occupied(), 0);
    }

    #[test]
    fn a_repeat_extends_the_entry() {
        let mut t = HandshakeTable::new(64);
        t.insert(5 << 40, 0, 100);
        assert_eq!(t.insert(5 << 40, 50, 150), Insert::Repeat);
        assert_eq!(t.occupied(), 1);
        assert_eq!(t.lookup(5 << 40, 120), Lookup::Handshake { late: false });
    }

    #[test]
    fn a_collision_lets_every_ack_of_the_slot_pass_until_both_expire() {
        let (a, b) = same_slot(16);
        let mut t = HandshakeTable::new(16);
        t.insert(a, 0, 100);
        assert_eq!(t.insert(b, 10, 110), Insert::Collision { already: false });
        assert_eq!(t.lookup(a, 20), Lookup::Collided);
        assert_eq!(t.lookup(b, 105), Lookup::Collided);
        // Any ACK that maps there passes too: it might be either handshake's.
        assert_eq!(t.lookup(a ^ 3, 110), Lookup::Collided);
        assert_eq!(t.lookup(a, 111), Lookup::Miss);
        // Stale, so the next handshake takes the slot again.
        assert_eq!(t.insert(a, 200, 300), Insert::New { expired: false });
        assert_eq!(t.occupied(), 1);
    }

    #[test]
    fn a_stale_entry_still_matches_until_its_slot_is_reused() {
        let (a, b) = same_slot(16);
        let mut t = HandshakeTable::new(16);
        t.insert(a, 0, 100);
        assert_eq!(t.lookup(a, 150), Lookup::Handshake { late: true });
        t.insert(a, 200, 300);
        assert_eq!(t.insert(b, 400, 500), Insert::New { expired: true });
        assert_eq!(t.lookup(a, 410), Lookup::Miss);
    }

    #[test]
    fn sweep_frees_stale_slots_only() {
        let mut t = HandshakeTable::new(1024);
        t.insert(1 << 63, 0, 100);
        t.insert(2 << 50, 0, 300);
        let (a, b) = same_slot(1024);
        t.insert(a, 0, 100);
        t.insert(b, 0, 100);
        assert_eq!(t.occupied(), 3);
        assert_eq!(t.sweep(200), 1);
        assert_eq!(t.occupied(), 1);
        assert_eq!(t.lookup(2 << 50, 250), Lookup::Handshake { late: false });
    }

    #[test]
    fn tags_avoid_the_markers() {
        let mut t = HandshakeTable::new(4);
        assert_eq!(t.insert(0, 0, 10), Insert::New { expired: false });
        assert_eq!(t.lookup(0, 1), Lookup::Handshake { late: false });
        assert_eq!(t.insert(u64::MAX, 0, 10), Insert::New { expired: false });
        assert_eq!(t.lookup(u64::MAX, 1), Lookup::Handshake { late: false });
    }

    #[test]
    fn a_resized_table_finds_every_entry_and_keeps_collided_ranges() {
        let (a, b) = same_slot(16);
        let mut t = HandshakeTable::new(16);
        let hashes: Vec<u64> = (1..200u64).map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)).collect();
        let mut big = HandshakeTable::new(1000);
        for &h in &hashes {
            big.insert(h, 0, 100);
        }
        t.insert(a, 0, 100);
        t.insert(b, 0, 100);
        // Grown: a and b now have slots of their own, yet their old slot was collided, so
        // every slot of its range stays collided (either ACK passes, as before).
        let grown = t.resized(4096);
        assert_eq!(grown.slots(), 4096);
        let mut g = grown.clone();
        assert_eq!(g.lookup(a, 50), Lookup::Collided);
        assert_eq!(g.lookup(b ^ (1 << 20), 50), Lookup::Collided);
        assert_eq!(g.lookup(a ^ (1 << 63), 50), Lookup::Miss);
        // Shrunk to 7 slots: some of the 199 entries collide, none is lost (found or collided).
        let mut small = big.resized(7);
        for &h in &hashes {
            assert_ne!(small.lookup(h, 50), Lookup::Miss, "{h:x}");
        }
        // Grown again from 1000: every entry found, as itself unless its slot was collided.
        let mut grown = big.resized(100_000);
        for &h in &hashes {
            let before = big.clone().lookup(h, 50);
            let after = grown.lookup(h, 50);
            assert_ne!(after, Lookup::Miss, "{h:x}");
            assert!(before != Lookup::Collided || after == Lookup::Collided, "{h:x}");
        }
    }

    #[test]
    fn slots_are_sixteen_bytes() {
        assert_eq!(HandshakeTable::new(100).bytes(), 1600);
        assert_eq!(format!("{:?}", HandshakeTable::new(100)), "HandshakeTable { slots: 100, occupied: 0 }");
    }
}
