//! The blocks of a TPACKET_V3 ring as the kernel shares them, and the reading position in
//! them. A block is the kernel's until its status word says TP_STATUS_USER, then ours until
//! we store TP_STATUS_KERNEL back.
//!
//! Every offset read from a block (its frame count and first frame, each frame's next offset,
//! MAC offset and length) is checked against the block before it is used: the kernel writes
//! these headers, and memory it shares is not trusted to be in range. A header that points
//! outside its block ends the block (it is given back with the frames after it unread); a
//! frame longer than the rest of its block is cut to fit. Nothing is read outside the mapping.

use std::mem::size_of;
use std::sync::atomic::{AtomicU32, Ordering};

use memmap2::MmapRaw;

/// Offsets in a block descriptor (struct tpacket_block_desc: version, offset_to_priv, then
/// struct tpacket_hdr_v1, 8-byte aligned).
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
/// The descriptor's fields read here end before this.
const BLOCK_DESC_BYTES: usize = 20;
/// A frame's `sll_pkttype`: after its header (48 bytes, TPACKET_ALIGN'd) comes a struct
/// sockaddr_ll (family 2, protocol 2, ifindex 4, hatype 2, then pkttype 1).
const FRAME_PKTTYPE: usize = 48 + 10;

/// A frame's header in a block.
pub(crate) type FrameHeader = libc::tpacket3_hdr;

/// Frames in the blocks handed over to us and not read yet.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pending {
    /// To be read.
    pub frames: u64,
    /// To be passed over (the leaving copies, when those are skipped).
    pub passed_over: u64,
}

/// The ring's memory, cut in blocks, and where reading is.
pub(crate) struct Blocks {
    /// Shared with the kernel: only raw pointers into it, never references to its bytes
    /// except a frame's, while its block is ours.
    map: MmapRaw,
    block_bytes: usize,
    count: usize,
    /// The block read next, or being read when `held`.
    block: usize,
    /// The current block is ours (the kernel marked it TP_STATUS_USER).
    held: bool,
    /// Frames of the held block not read yet, and the next one's offset in it.
    left: u32,
    next_offset: usize,
    /// Frames the kernel marks PACKET_OUTGOING are passed over (a loopback interface, where
    /// each packet is seen leaving and again arriving; libpcap skips the first copy too).
    skip_outgoing: bool,
    /// Frames passed over since the ring opened.
    skipped: u64,
}

impl Blocks {
    /// The blocks of `map`, each `block_bytes` long (a multiple of 8, as the kernel's are:
    /// it keeps the status words aligned), as many as fit; all the kernel's at first.
    pub(crate) fn new(map: MmapRaw, block_bytes: usize) -> Blocks {
        assert!(block_bytes >= BLOCK_DESC_BYTES && block_bytes.is_multiple_of(8), "block size {block_bytes}");
        // A map starts on a page: block starts, and so their status words, are aligned.
        assert!((map.as_ptr() as usize).is_multiple_of(8), "the ring's map is not aligned");
        let count = map.len() / block_bytes;
        assert!(count > 0, "a ring of {} bytes has no block of {block_bytes}", map.len());
        Blocks {
            map,
            block_bytes,
            count,
            block: 0,
            held: false,
            left: 0,
            next_offset: 0,
            skip_outgoing: false,
            skipped: 0,
        }
    }

    /// Passes over the frames the kernel marks PACKET_OUTGOING.
    pub(crate) fn skipping_outgoing(self) -> Blocks {
        Blocks { skip_outgoing: true, ..self }
    }

    /// Frames passed over since the ring opened.
    pub(crate) fn skipped(&self) -> u64 {
        self.skipped
    }

    /// The status word of block `i`, shared with the kernel.
    fn status(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.count);
        // SAFETY: block `i` < `count` lies inside the map, and so does its status word (at 8 of
        // at least 20 bytes); the word is 4-byte aligned (the map and `block_bytes` are
        // 8-aligned, checked in `new`); the map lives as long as `self`, and the kernel only
        // accesses the word atomically too.
        unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(i * self.block_bytes + BLOCK_STATUS).cast()) }
    }

    /// The `T` at `offset` in the held block, if it lies wholly inside the block.
    fn read<T: Copy>(&self, offset: usize) -> Option<T> {
        self.read_in(self.block, offset)
    }

    /// The `T` at `offset` in block `b`, which must be ours (held, or marked TP_STATUS_USER),
    /// if it lies wholly inside the block. `T` is `u8`, `u32` or [`FrameHeader`]: integers
    /// only, so any bytes are a valid value.
    fn read_in<T: Copy>(&self, b: usize, offset: usize) -> Option<T> {
        if b >= self.count || offset.checked_add(size_of::<T>())? > self.block_bytes {
            return None;
        }
        // SAFETY: `offset..offset + size_of::<T>()` is inside block `b` (checked just above),
        // which is inside the map (`b` < `count`); the block is ours, so the kernel does not
        // write it now; any bit pattern is a valid T; read_unaligned needs no alignment.
        Some(unsafe { self.map.as_ptr().add(b * self.block_bytes + offset).cast::<T>().read_unaligned() })
    }

    /// Frames handed over to us and not read yet: the rest of the held block and every other
    /// block marked ours, apart as those `ready` would hand out and those it would pass over.
    /// Counted when the capture stops, so that no frame the kernel counted as received goes
    /// unaccounted.
    pub(crate) fn pending(&self) -> Pending {
        let mut pending = Pending::default();
        for b in 0..self.count {
            let (left, first) = if self.held && b == self.block {
                (self.left, self.next_offset)
            } else if self.status(b).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0 {
                let first = self.read_in::<u32>(b, BLOCK_FIRST_PKT).map_or(usize::MAX, |o| o as usize);
                (self.read_in::<u32>(b, BLOCK_NUM_PKTS).unwrap_or(0), first)
            } else {
                continue;
            };
            self.count_from(b, left, first, &mut pending);
        }
        pending
    }

    /// Counts `left` frames of block `b` from `offset` into `pending`, following the frames'
    /// next offsets while they stay in the block.
    fn count_from(&self, b: usize, left: u32, mut offset: usize, pending: &mut Pending) {
        if !self.skip_outgoing {
            pending.frames += u64::from(left);
            return;
        }
        for _ in 0..left {
            let Some(h) = self.read_in::<FrameHeader>(b, offset) else { break };
            let pkttype = offset.checked_add(FRAME_PKTTYPE).and_then(|at| self.read_in::<u8>(b, at));
            if pkttype == Some(libc::PACKET_OUTGOING) {
                pending.passed_over += 1;
            } else {
                pending.frames += 1;
            }
            if h.tp_next_offset == 0 {
                break;
            }
            offset = offset.saturating_add(h.tp_next_offset as usize);
        }
    }

    /// Gives the held block back to the kernel and moves to the next one.
    fn release(&mut self) {
        self.status(self.block).store(libc::TP_STATUS_KERNEL, Ordering::Release);
        self.held = false;
        self.left = 0;
        self.block = (self.block + 1) % self.count;
    }

    /// The header of the next frame, if one is ready; never waits. A held block whose frames
    /// are all read, or whose next header would not fit in it, goes back to the kernel.
    pub(crate) fn ready(&mut self) -> Option<FrameHeader> {
        loop {
            if self.held {
                if let Some(h) = (self.left > 0).then(|| self.read::<FrameHeader>(self.next_offset)).flatten() {
                    let pkttype = self.next_offset.checked_add(FRAME_PKTTYPE).and_then(|at| self.read::<u8>(at));
                    if !(self.skip_outgoing && pkttype == Some(libc::PACKET_OUTGOING)) {
                        return Some(h);
                    }
                    // Passed over as `take` would pass it.
                    self.skipped += 1;
                    self.left -= 1;
                    self.next_offset = self.next_offset.saturating_add(h.tp_next_offset as usize);
                    if h.tp_next_offset == 0 {
                        self.left = 0;
                    }
                    continue;
                }
                // Every frame read (and the last one handed out is no longer borrowed).
                self.release();
            }
            if self.status(self.block).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                return None;
            }
            self.held = true;
            self.left = self.read::<u32>(BLOCK_NUM_PKTS).unwrap_or(0);
            self.next_offset = self.read::<u32>(BLOCK_FIRST_PKT).map_or(usize::MAX, |o| o as usize);
        }
    }

    /// The next frame of the held block: its header and its captured bytes, which stay ours
    /// until `ready` is called again (it takes `&mut self`, so this borrow ends first). `None`
    /// when no frame is ready or the header points outside its block (the block then ends).
    pub(crate) fn take(&mut self) -> Option<(FrameHeader, &[u8])> {
        if !self.held || self.left == 0 {
            return None;
        }
        let start = self.next_offset;
        let Some(h) = self.read::<FrameHeader>(start) else {
            self.left = 0;
            return None;
        };
        self.left -= 1;
        self.next_offset = start.saturating_add(h.tp_next_offset as usize);
        if h.tp_next_offset == 0 {
            self.left = 0; // the block's last frame
        }
        // `start` is inside the block, so this cannot overflow.
        let mac = start + usize::from(h.tp_mac);
        if mac > self.block_bytes {
            self.left = 0;
            return None;
        }
        let len = (h.tp_snaplen as usize).min(self.block_bytes - mac);
        // SAFETY: `mac..mac + len` is inside the held block (both checked above), which is
        // inside the map; the kernel does not write the block until `release`, which needs
        // `&mut self` and so waits for this borrow to end; nothing writes through a reference
        // to these bytes meanwhile.
        let data =
            unsafe { std::slice::from_raw_parts(self.map.as_ptr().add(self.block * self.block_bytes + mac), len) };
        Some((h, data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use memmap2::MmapMut;

    const BLOCK: usize = 4096;

    /// Builds ring memory by hand, as the kernel would fill it.
    struct Fill(MmapMut);

    impl Fill {
        fn new(blocks: usize) -> Fill {
            Fill(MmapMut::map_anon(blocks * BLOCK).unwrap())
        }

        fn u32(&mut self, at: usize, v: u32) -> &mut Self {
            self.0[at..at + 4].copy_from_slice(&v.to_ne_bytes());
            self
        }

        /// Block `b` handed to us, with `frames` frames from `first`.
        fn block(&mut self, b: usize, frames: u32, first: u32) -> &mut Self {
            self.u32(b * BLOCK + BLOCK_STATUS, libc::TP_STATUS_USER)
                .u32(b * BLOCK + BLOCK_NUM_PKTS, frames)
                .u32(b * BLOCK + BLOCK_FIRST_PKT, first)
        }

        /// A frame at `at` in block `b`: its next offset, time, lengths and MAC offset; its
        /// bytes at the MAC offset are `at % 251` on.
        fn frame(&mut self, b: usize, at: usize, next: u32, sec: u32, snaplen: u32, mac: u16) -> &mut Self {
            let h = b * BLOCK + at;
            self.u32(h, next).u32(h + 4, sec).u32(h + 8, 7).u32(h + 12, snaplen).u32(h + 16, snaplen + 1);
            self.0[h + 24..h + 26].copy_from_slice(&mac.to_ne_bytes());
            let data = h + usize::from(mac);
            let end = (data + snaplen as usize).min((b + 1) * BLOCK);
            for (i, byte) in self.0[data.min(end)..end].iter_mut().enumerate() {
                *byte = ((at + i) % 251) as u8;
            }
            self
        }

        fn blocks(self) -> Blocks {
            Blocks::new(MmapRaw::from(self.0), BLOCK)
        }
    }

    fn status(blocks: &Blocks, b: usize) -> u32 {
        blocks.status(b).load(Ordering::Acquire)
    }

    #[test]
    fn the_header_is_the_kernels_layout() {
        assert_eq!(size_of::<FrameHeader>(), 48);
        let mut fill = Fill::new(1);
        fill.block(0, 1, 48).frame(0, 48, 0, 1_700_000_000, 60, 80);
        let mut blocks = fill.blocks();
        let h = blocks.ready().unwrap();
        assert_eq!((h.tp_sec, h.tp_nsec, h.tp_snaplen, h.tp_len, h.tp_mac), (1_700_000_000, 7, 60, 61, 80));
    }

    /// Issue 20: on loopback each packet comes twice, leaving (PACKET_OUTGOING) and arriving;
    /// the leaving copies are passed over, wherever they are in a block, and counted.
    #[test]
    fn outgoing_frames_are_passed_over_when_asked() {
        let fill = || {
            let mut fill = Fill::new(2);
            fill.block(0, 3, 48).frame(0, 48, 200, 1, 60, 80).frame(0, 248, 200, 2, 60, 80).frame(0, 448, 0, 3, 60, 80);
            fill.block(1, 1, 48).frame(1, 48, 0, 4, 10, 80);
            // Frames 1 and 4 left (the last frame of a block among them); 2 and 3 arrived.
            fill.0[48 + FRAME_PKTTYPE] = libc::PACKET_OUTGOING;
            fill.0[BLOCK + 48 + FRAME_PKTTYPE] = libc::PACKET_OUTGOING;
            fill.0[248 + FRAME_PKTTYPE] = libc::PACKET_HOST;
            fill
        };
        let read = |mut blocks: Blocks| {
            let mut seen = Vec::new();
            while let Some(h) = blocks.ready() {
                let (taken, _) = blocks.take().unwrap();
                assert_eq!(taken.tp_sec, h.tp_sec);
                seen.push(h.tp_sec);
            }
            (seen, blocks.skipped(), status(&blocks, 0), status(&blocks, 1))
        };
        let k = libc::TP_STATUS_KERNEL;
        assert_eq!(read(fill().blocks()), (vec![1, 2, 3, 4], 0, k, k));
        assert_eq!(read(fill().blocks().skipping_outgoing()), (vec![2, 3], 2, k, k));
    }

    /// The frames left when the capture stops are counted: the held block's rest and every
    /// other block handed over, without the leaving copies when those are passed over.
    #[test]
    fn frames_handed_over_and_not_read_are_counted() {
        let fill = || {
            let mut fill = Fill::new(3);
            fill.block(0, 3, 48).frame(0, 48, 200, 1, 60, 80).frame(0, 248, 200, 2, 60, 80).frame(0, 448, 0, 3, 60, 80);
            fill.block(2, 2, 48).frame(2, 48, 200, 4, 10, 80).frame(2, 248, 0, 5, 10, 80);
            fill.0[448 + FRAME_PKTTYPE] = libc::PACKET_OUTGOING;
            fill.0[2 * BLOCK + 48 + FRAME_PKTTYPE] = libc::PACKET_OUTGOING;
            fill
        };
        assert_eq!(fill().blocks().pending(), Pending { frames: 5, passed_over: 0 });
        let mut blocks = fill().blocks();
        blocks.ready().unwrap();
        blocks.take().unwrap();
        assert_eq!(blocks.pending(), Pending { frames: 4, passed_over: 0 }, "one read; block 1 is the kernel's");
        let mut blocks = fill().blocks().skipping_outgoing();
        blocks.ready().unwrap();
        blocks.take().unwrap();
        assert_eq!(blocks.pending(), Pending { frames: 2, passed_over: 2 }, "frames 2 and 5; 3 and 4 left the host");
    }

    #[test]
    fn frames_are_read_in_place_and_the_block_goes_back_after_the_last() {
        let mut fill = Fill::new(2);
        fill.block(0, 2, 48).frame(0, 48, 200, 1, 60, 80).frame(0, 248, 0, 2, 100, 80);
        fill.block(1, 1, 48).frame(1, 48, 0, 3, 10, 80);
        let mut blocks = fill.blocks();
        let mut seen = Vec::new();
        while let Some(h) = blocks.ready() {
            let (taken, data) = blocks.take().unwrap();
            assert_eq!(taken.tp_sec, h.tp_sec);
            seen.push((h.tp_sec, data.len(), data[0]));
        }
        assert_eq!(seen, [(1, 60, 48), (2, 100, 248), (3, 10, 48)]);
        assert_eq!((status(&blocks, 0), status(&blocks, 1)), (libc::TP_STATUS_KERNEL, libc::TP_STATUS_KERNEL));
        assert!(blocks.take().is_none());
    }

    #[test]
    fn a_first_frame_outside_the_block_gives_the_block_back_unread() {
        for first in [BLOCK as u32 - 47, BLOCK as u32, u32::MAX] {
            // The last block of the map: a read past it would leave the mapping.
            let mut fill = Fill::new(2);
            fill.block(1, 3, first);
            let mut blocks = fill.blocks();
            blocks.block = 1;
            assert!(blocks.ready().is_none(), "first frame at {first}");
            assert!(blocks.take().is_none());
            assert_eq!(status(&blocks, 1), libc::TP_STATUS_KERNEL);
        }
    }

    #[test]
    fn a_next_offset_outside_the_block_ends_it_after_the_frames_before() {
        let mut fill = Fill::new(1);
        fill.block(0, 3, 48).frame(0, 48, BLOCK as u32 - 48 - 20, 1, 10, 80);
        let mut blocks = fill.blocks();
        assert!(blocks.ready().is_some());
        assert_eq!(blocks.take().unwrap().1.len(), 10);
        assert!(blocks.ready().is_none());
        assert_eq!(status(&blocks, 0), libc::TP_STATUS_KERNEL);
    }

    #[test]
    fn a_frame_starting_outside_its_block_is_not_taken() {
        let mut fill = Fill::new(1);
        // The header fits; its MAC offset points past the block.
        fill.block(0, 2, BLOCK as u32 - 48).frame(0, BLOCK - 48, 0, 1, 10, 60);
        let mut blocks = fill.blocks();
        assert!(blocks.ready().is_some());
        assert!(blocks.take().is_none());
        assert!(blocks.take().is_none());
        assert!(blocks.ready().is_none());
        assert_eq!(status(&blocks, 0), libc::TP_STATUS_KERNEL);
    }

    #[test]
    fn a_frame_longer_than_its_block_is_cut_to_fit() {
        let mut fill = Fill::new(1);
        fill.block(0, 1, 48).frame(0, 48, 0, 1, u32::MAX - 1, 80);
        let mut blocks = fill.blocks();
        assert!(blocks.ready().is_some());
        let (h, data) = blocks.take().unwrap();
        assert_eq!((h.tp_snaplen, data.len()), (u32::MAX - 1, BLOCK - 48 - 80));
    }

    #[test]
    fn take_without_a_ready_frame_is_none() {
        let mut fill = Fill::new(1);
        fill.block(0, 1, 48).frame(0, 48, 0, 1, 10, 80);
        let mut blocks = fill.blocks();
        assert!(blocks.take().is_none(), "the block is not held before ready");
        assert!(blocks.ready().is_some());
        assert!(blocks.take().is_some());
        assert!(blocks.take().is_none());
    }
}
